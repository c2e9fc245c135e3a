"""JAX for synthinfer's numerics: float64 where synthinfer computes, and nowhere else.

Likelihoods of counts in the tens of thousands and exact log-partition functions need float64
(NAPSU-MQ asks for it explicitly), but switching ``jax_enable_x64`` on for the whole process
would change the numerics of the user's own JAX code. So synthinfer computes inside
:func:`float64` (JAX's thread-local ``enable_x64`` context): every public entry point that runs
JAX (``NapsuMQ.fit``/``generate``, ``GeneralisedPosterior.fit``, the DP-GAN, the MLP weights, ...)
is decorated with :func:`uses_float64`, and the threads synthinfer starts (background
compilation, NUTS chains) enter the context themselves. The user's process keeps its own
setting; code that calls synthinfer's lower-level JAX functions directly (a
``MarkovNetwork``'s passes, the likelihoods) wraps the calls in ``with synthinfer.float64():``.

Every synthinfer module that uses JAX imports ``jax``/``jnp`` from here.
"""

from __future__ import annotations

import functools
import os
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from synthinfer._precision import float64, uses_float64

__all__ = [
    "ProgramCache", "float64", "uses_float64", "default_cache_dir", "enable_compilation_cache", "jax", "jnp", "quick_compiler_options",
    "single_threaded_blas",
]


def single_threaded_blas():
    """Context manager: run the BLAS/LAPACK libraries with one thread (threadpoolctl).

    JAX's CPU LAPACK kernels (the Cholesky factorisation of NAPSU-MQ's eq. 6 likelihood) run
    inside the process's OpenBLAS, which by default starts one spinning thread per core. For
    the small matrices here (d ~ 100-200) those threads only contend, and on a busy machine a
    gradient becomes many times slower than single-threaded (docs/performance.md).
    Parallelism comes from running chains side by side instead.
    """
    from threadpoolctl import threadpool_limits

    return threadpool_limits(limits=1, user_api="blas")


# Programs a fit will need next (NUTS; the synthetic-data sampler) compile on background
# threads while the main thread computes: on two cores that hides most of a small model's
# wait. Two compilations side by side gain little (each takes about twice as long), so
# callers start a program where the main thread has numerics to run.
_COMPILE_POOL = ThreadPoolExecutor(2, thread_name_prefix="synthinfer-compile")


#: XLA options for programs whose run time is tiny next to compiling them: the lowest LLVM
#: optimisation level, and XLA:CPU's classic loop emitters instead of its MLIR fusion
#: emitters: on small models' programs (the toy's NUTS program) they roughly halve the compile
#: time for a slightly slower run (measurements in docs/performance.md).
_QUICK_OPTIONS = {"xla_backend_optimization_level": 0, "xla_cpu_use_fusion_emitters": False}


@functools.cache
def quick_compiler_options() -> dict[str, Any]:
    """:data:`_QUICK_OPTIONS`, or the optimisation level alone where the installed XLA does
    not know the emitter option (older jaxlibs; an unknown option is an error at compile
    time). Probed once per process on a one-operation program."""
    try:
        with float64():
            jax.jit(lambda x: x + 1).lower(np.float64(0.0)).compile(_QUICK_OPTIONS)
    except Exception as err:  # XLA reports an unknown option as a runtime error
        if "compile option" not in str(err):
            raise
        return {"xla_backend_optimization_level": 0}
    return dict(_QUICK_OPTIONS)


class ProgramCache:
    """The compiled programs of one owner (a NAPSU-MQ network), made once per key.

    The owner holds its cache and nothing global refers to either, so when the owner is
    dropped its programs are freed with it: no eviction chain. Every program refers to its
    owner through a closure or a bound method, never a static argument (JAX's global caches
    keep those alive) nor a ``functools.partial`` (JAX caches its signature, which shows the
    bound values). Thread-safe: background compilations and the main
    thread ask for programs concurrently.
    """

    def __init__(self) -> None:
        self._items: dict[Any, Any] = {}
        self._lock = threading.RLock()  # a maker may ask for another entry

    def get(self, key: Any, make: Callable[[], Any]) -> Any:
        """The entry for ``key``, made by ``make()`` on first use (``make`` runs under the
        cache's lock, so it must be cheap: a ``jax.jit`` wrapper, not a compilation)."""
        with self._lock:
            if key not in self._items:
                self._items[key] = make()
            return self._items[key]

    def compile_ahead(self, key: Any, lower: Callable[[], Any], *, quick: bool = False) -> Future:
        """Future of the compiled program ``lower().compile()``, started once per ``key`` on a
        background thread. ``lower`` returns a ``jax.stages.Lowered`` (``jax.jit(f).lower(...)``
        on ``ShapeDtypeStruct`` placeholders); ``quick`` compiles with
        :func:`quick_compiler_options`, for programs whose run time is tiny next to compiling
        them (callers decide, with their measurements)."""
        options = quick_compiler_options() if quick else None
        return self.get(("compiled", key), lambda: _COMPILE_POOL.submit(uses_float64(lambda: lower().compile(options))))

    def __len__(self) -> int:
        with self._lock:
            return len(self._items)


def default_cache_dir() -> Path:
    """A subdirectory per JAX/jaxlib version and host CPU of ``$SYNTHINFER_CACHE_DIR``, else of
    ``$XDG_CACHE_HOME/synthinfer/jax``, else of ``~/.cache/synthinfer/jax``.

    Why the subdirectory: XLA:CPU programs are compiled for the host's instruction set, and
    reports of reused entries after an in-place jaxlib change (crashes) or on other CPUs
    (rejected with errors) show the cache key is not enough when a home directory is shared
    between machines or environments.
    """
    import hashlib
    import platform

    import jaxlib

    root = os.environ.get("SYNTHINFER_CACHE_DIR")
    if root:
        base = Path(root)
    else:
        base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "synthinfer" / "jax"
    try:
        flags = next((line for line in Path("/proc/cpuinfo").read_text().splitlines() if line.startswith("flags")), "")
    except OSError:  # not Linux
        flags = platform.processor()
    host = hashlib.sha256(flags.encode()).hexdigest()[:10]
    return base / f"jax{jax.__version__}-jaxlib{jaxlib.__version__}-{platform.machine()}-{host}"


def enable_compilation_cache(path: str | os.PathLike | None = None) -> Path:
    """Keep compiled programs on disk, so later processes skip XLA compilation.

    Turns on JAX's persistent compilation cache (entries are keyed on the program, the
    compile options and the JAX/XLA versions, so a stale entry is never used) in ``path``
    (default :func:`default_cache_dir`) for every program, however fast it compiled: most of
    ours compile in under JAX's default threshold of 1 s, and together they are most of a
    small fit's time in a new process (docs/performance.md). Call it before the first fit; the CLI does by
    default (``--no-compile-cache`` to opt out). Returns the directory.

    Privacy: a program holds the arrays its function closes over as constants, so synthinfer's
    programs take private rows only as arguments and the cache holds none of them
    (tests/test_compiled_programs_hold_no_rows.py); a directory it makes is readable by its
    owner only.
    """
    directory = Path(path) if path is not None else default_cache_dir()
    directory.mkdir(parents=True, exist_ok=True, mode=0o700)
    jax.config.update("jax_compilation_cache_dir", str(directory))
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)
    return directory
