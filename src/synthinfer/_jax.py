"""Import JAX with the settings synthinfer's numerics need.

Likelihoods of counts in the tens of thousands and exact log-partition functions need float64
(NAPSU-MQ asks for float64 explicitly), so importing this module turns on ``jax_enable_x64``.
Every synthinfer module that uses JAX imports ``jax``/``jnp`` from here, never directly first.
"""

from __future__ import annotations

import jax

jax.config.update("jax_enable_x64", True)

import jax.numpy as jnp  # noqa: E402

__all__ = ["jax", "jnp", "single_threaded_blas"]


def single_threaded_blas():
    """Context manager: run the BLAS/LAPACK libraries with one thread (threadpoolctl).

    JAX's CPU LAPACK kernels (the Cholesky factorisation of NAPSU-MQ's eq. 6 likelihood) run
    inside the process's OpenBLAS, which by default starts one spinning thread per core. For
    the small matrices here (d ~ 100-200) those threads only contend: on the 2-core CI
    machine with one other busy process, one log-posterior gradient on Adult took 18-34 ms
    with OpenBLAS threading and 0.8 ms single-threaded (the same as on an idle machine).
    Parallelism comes from running chains side by side instead.
    """
    from threadpoolctl import threadpool_limits

    return threadpool_limits(limits=1, user_api="blas")
