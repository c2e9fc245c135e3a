"""float64 for synthinfer's JAX computations, scoped to them (see :mod:`synthinfer._jax`).

Kept apart from :mod:`synthinfer._jax` so that modules which import JAX only when they compute
(the DP-GAN, the MLP weights) can decorate their entry points without importing JAX.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any


def float64():
    """Context manager: JAX computes in float64 inside it, in the calling thread only
    (``jax.enable_x64(True)``); the setting outside is left as it was."""
    import jax

    return jax.enable_x64(True)


def uses_float64(fn: Callable) -> Callable:
    """Decorator for public entry points that run JAX: the call runs inside :func:`float64`."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        with float64():
            return fn(*args, **kwargs)

    return wrapper
