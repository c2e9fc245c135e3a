"""Import JAX with the settings synthinfer's numerics need.

Likelihoods of counts in the tens of thousands and exact log-partition functions need float64
(NAPSU-MQ asks for float64 explicitly), so importing this module turns on ``jax_enable_x64``.
Every synthinfer module that uses JAX imports ``jax``/``jnp`` from here, never directly first.
"""

from __future__ import annotations

import jax

jax.config.update("jax_enable_x64", True)

import jax.numpy as jnp  # noqa: E402

__all__ = ["jax", "jnp"]
