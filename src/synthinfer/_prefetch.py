"""Imports a job will need later, loaded on a background thread while it computes.

A first fit in a new process waits for modules it imports only at its end: ArviZ, for the
posterior's InferenceData and the convergence check, loads xarray and matplotlib (about half a
second on an idle core, more than the toy model's NUTS sampling itself). Loaded on a thread
while the main thread waits on XLA (compiling, sampling: the GIL is released), they cost the
user no wall time on a machine with a second core.

Only third-party modules that print nothing when imported are prefetched (ArviZ's own import
emits a once-a-day notice that :func:`synthinfer.mcmc.import_arviz` silences with a warnings
filter, and filters are process-global: a thread must not change them). A failure here is
ignored: the main thread's own import then raises it where it belongs.
"""

from __future__ import annotations

import importlib
import sys
import threading

__all__ = ["prefetch", "MCMC_RESULTS"]

#: ArviZ's heavy dependencies, which everything that returns MCMC draws imports at its end.
MCMC_RESULTS = ("xarray", "matplotlib.pyplot")

_lock = threading.Lock()
_requested: set[str] = set()


def prefetch(*modules: str) -> threading.Thread | None:
    """Import ``modules`` (in order) on a daemon thread, each at most once per process; returns
    the thread, or ``None`` when every module is loaded or already requested."""
    with _lock:
        todo = [m for m in modules if m not in sys.modules and m not in _requested]
        _requested.update(todo)
    if not todo:
        return None
    thread = threading.Thread(target=_load, args=(todo,), name="synthinfer-prefetch", daemon=True)
    thread.start()
    return thread


def _load(modules: list[str]) -> None:
    for name in modules:
        try:
            importlib.import_module(name)
        except Exception:  # noqa: BLE001 - the caller's own import reports it
            return
