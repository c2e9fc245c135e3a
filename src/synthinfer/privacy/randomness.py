"""Randomness for posterior and synthetic sampling (never for privacy noise).

Samplers take ``seed``: an int, a :class:`numpy.random.Generator` or None (OS entropy). A fixed
seed makes posterior draws and synthetic rows reproducible; it never reaches privacy noise,
which :mod:`synthinfer.privacy.samplers` draws from OpenDP's CSPRNG. Releases record *whether*
a seed was fixed, never the seed itself.
"""

from __future__ import annotations

import numpy as np

from synthinfer.errors import ArgumentTypeError, ParameterError

SeedLike = int | np.random.Generator | np.random.SeedSequence | None


def make_rng(seed: SeedLike = None) -> np.random.Generator:
    """A numpy Generator from ``seed`` (OS entropy when None)."""
    if isinstance(seed, np.random.Generator):
        return seed
    # a bool is an int to Python: True would silently be seed 1
    if isinstance(seed, bool) or (seed is not None and not isinstance(seed, (int, np.integer, np.random.SeedSequence))):
        raise ArgumentTypeError(f"seed must be an int, a numpy Generator or None, got {type(seed).__name__}")
    if isinstance(seed, (int, np.integer)) and seed < 0:
        raise ParameterError(f"seed must be a non-negative integer, got {seed}")
    return np.random.default_rng(seed)


def seed_fixed(seed: SeedLike) -> bool:
    """True when ``seed`` makes the randomness reproducible (anything but None)."""
    return seed is not None


def jax_key(rng: np.random.Generator):
    """A JAX PRNG key drawn from a numpy Generator (so one seed drives both libraries).

    Made from raw key data (:func:`jax_key_data`): ``jax.random.key(int)`` would compile a
    seeding program on first use, on the critical path of a small fit."""
    import jax

    return jax.random.wrap_key_data(jax_key_data(rng, 1)[0])


def jax_key_data_spec():
    """Shape and dtype of one key's raw data under JAX's default PRNG (a ``ShapeDtypeStruct``,
    found abstractly: nothing compiles)."""
    import jax

    return jax.eval_shape(lambda: jax.random.key_data(jax.random.key(0)))


def jax_key_data(rng: np.random.Generator, count: int) -> np.ndarray:
    """Raw data of ``count`` JAX PRNG keys drawn from a numpy Generator, shape
    ``(count, *jax_key_data_spec().shape)``, for compiled programs that wrap them with
    ``jax.random.wrap_key_data``. Unlike ``jax.random.key(int)`` and ``jax.random.split``,
    nothing compiles on the way: worth it where small programs are on the critical path."""
    spec = jax_key_data_spec()
    return rng.integers(0, np.iinfo(spec.dtype).max, size=(count, *spec.shape), dtype=spec.dtype, endpoint=True)
