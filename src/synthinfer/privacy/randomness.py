"""Randomness for mechanisms and samplers.

Every noisy function takes ``seed``: an int, a :class:`numpy.random.Generator` or None. A fixed
seed makes tests reproducible but makes the noise reproducible too, so a real release must not
fix it: with ``seed=None`` the generator is seeded from OS entropy. Releases record *whether* a
seed was fixed, never the seed itself (publishing it would let anyone subtract the noise).
"""

from __future__ import annotations

import numpy as np

from synthinfer.errors import ArgumentTypeError

SeedLike = int | np.random.Generator | np.random.SeedSequence | None


def make_rng(seed: SeedLike = None) -> np.random.Generator:
    """A numpy Generator from ``seed`` (OS entropy when None)."""
    if isinstance(seed, np.random.Generator):
        return seed
    if seed is not None and not isinstance(seed, (int, np.integer, np.random.SeedSequence)):
        raise ArgumentTypeError(f"seed must be an int, a numpy Generator or None, got {type(seed).__name__}")
    return np.random.default_rng(seed)


def seed_fixed(seed: SeedLike) -> bool:
    """True when ``seed`` makes the randomness reproducible (anything but None)."""
    return seed is not None


def jax_key(rng: np.random.Generator):
    """A JAX PRNG key drawn from a numpy Generator (so one seed drives both libraries)."""
    import jax

    return jax.random.key(int(rng.integers(0, 2**31 - 1)))
