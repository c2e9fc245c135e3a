"""DP-SGD (Abadi et al. 2016) under substitution neighbours: lots, the noisy step, accounting.

One DP-SGD step Poisson-samples each of the ``N`` private rows with probability ``q``, clips
every sampled row's gradient to L2 norm ``C`` and adds ``N(0, sigma^2 C^2 I)`` to their sum.
synthinfer uses *substitution* neighbours (one row replaced; NAPSU-MQ Theorem 3.5), for which
the privacy loss of one step is that of the dominating pair

    P = (1 - q) N(0, sigma^2) + q N(+1, sigma^2),   Q = (1 - q) N(0, sigma^2) + q N(-1, sigma^2)

(in units of C; the replaced row moves the sum by up to 2C only when it is sampled). The
privacy loss distribution (PLD) accountant of ``dp_accounting`` implements exactly this pair
for ``NeighboringRelation.REPLACE_ONE`` and composes ``T`` steps tightly by FFT. The RDP
accountant of ``dp_accounting`` refuses REPLACE_ONE for Poisson sampling, and the add/remove
analysis would understate the loss under substitution, which is why we use the PLD one.
The private part of a step is :func:`noisy_clipped_sum` on lots from :func:`poisson_lots`.
Used by the DP-GAN baseline (:mod:`synthinfer.generate.dpgan`) and the DP-MLP importance
weights (:class:`synthinfer.weights.DPMLPWeights`).

**Noise source.** OpenDP has no sampler that runs inside a compiled JAX program, where the noise
is added to the clipped gradient sum at every step, so the noise is JAX's float Gaussian, keyed
by :func:`synthinfer.privacy.samplers.secret_jax_key` (OS CSPRNG bits, never the user's seed),
and the lots come from :func:`synthinfer.privacy.samplers.secret_rng`: the subsampling
amplification the accountant assumes needs the lots to be secret too. The floating-point
attack on textbook noise (Mironov 2012) needs the noisy value itself; DP-SGD publishes only the
parameters after many noisy, clipped, non-linear updates, never a noisy sum. Opacus' "secure
mode" (a CSPRNG plus summed Gaussians, Holohan & Braghin 2021) is the reference for a stricter
alternative.
"""

from __future__ import annotations

import math

import numpy as np

from synthinfer.errors import PrivacyError

#: Discretisation of the privacy loss in the PLD accountant: finer is tighter but slower.
_PLD_DISCRETISATION = 1e-3
#: Smallest noise multiplier searched (see dpsgd_noise_multiplier).
_SIGMA_FLOOR = 0.1


def poisson_lots(
    n: int, sampling_probability: float, steps: int, rng: np.random.Generator, width_multiple: int = 32
) -> tuple[np.ndarray, np.ndarray]:
    """Row indices and masks of ``steps`` Poisson-sampled lots, padded to a common width.

    Poisson sampling (each of the ``n`` rows independently with probability ``q``, the
    sampling the accountant assumes) is drawn as a ``Binomial(n, q)`` lot size followed by a
    uniformly random subset of that size: the same distribution, at O(lot size) per step
    instead of O(n). Returns ``idx`` (steps x width, int64; padding points at row 0) and
    ``mask`` (bool, True for sampled rows); the width is the largest lot rounded up to a
    multiple of ``width_multiple``, so that few distinct shapes compile.
    """
    sizes = rng.binomial(n, sampling_probability, size=steps)
    width = width_multiple * math.ceil(max(int(sizes.max()), 1) / width_multiple)
    idx = np.zeros((steps, width), dtype=np.int64)
    mask = np.zeros((steps, width), dtype=bool)
    for t, k in enumerate(sizes):
        if k:
            idx[t, :k] = rng.choice(n, size=k, replace=False)
            mask[t, :k] = True
    return idx, mask


def noisy_clipped_sum(per_example_grads, mask, clip_norm: float, noise_multiplier: float, key):
    """The private part of one DP-SGD step: ``sum_i clip_C(g_i) + N(0, sigma^2 C^2 I)``.

    ``per_example_grads`` is a pytree whose leaves have a leading example axis; ``mask``
    (0/1 per example) marks the rows actually sampled into the lot (the rest is padding).
    Each row's whole gradient (all leaves together) is scaled to L2 norm at most ``C``.

    Sensitivity: replacing one private row moves the sum by at most ``2C`` in L2 (adding or
    removing one by at most ``C``). Guarantee: with Poisson lots at rate ``q`` and noise
    multiplier ``sigma``, ``T`` steps are (epsilon, delta)-DP for the epsilon of
    :func:`dpsgd_epsilon` (Abadi et al. 2016; Ghalebikesabi et al. 2022, Algorithm 1).
    ``noise_multiplier=0`` returns the clipped sum itself (used for sensitivity tests and for
    clipping non-private rows).
    """
    from synthinfer._jax import jax, jnp

    leaves, treedef = jax.tree_util.tree_flatten(per_example_grads)
    norms = jnp.sqrt(sum(jnp.sum(g.reshape(g.shape[0], -1) ** 2, axis=1) for g in leaves))
    factor = mask * jnp.minimum(1.0, clip_norm / jnp.maximum(norms, 1e-12))
    keys = jax.random.split(key, len(leaves))
    out = [
        jnp.tensordot(factor.astype(g.dtype), g, axes=1)
        + noise_multiplier * clip_norm * jax.random.normal(k, g.shape[1:], dtype=g.dtype)
        for g, k in zip(leaves, keys)
    ]
    return jax.tree_util.tree_unflatten(treedef, out)


def _event(noise_multiplier: float, sampling_probability: float, steps: int):
    import dp_accounting

    return dp_accounting.SelfComposedDpEvent(
        dp_accounting.PoissonSampledDpEvent(
            sampling_probability, dp_accounting.GaussianDpEvent(noise_multiplier)
        ),
        steps,
    )


def _accountant():
    from dp_accounting import NeighboringRelation
    from dp_accounting.pld import PLDAccountant

    return PLDAccountant(
        neighboring_relation=NeighboringRelation.REPLACE_ONE,
        value_discretization_interval=_PLD_DISCRETISATION,
    )


def _check(sampling_probability: float, steps: int, delta: float) -> None:
    if not (0 < sampling_probability <= 1):
        raise PrivacyError(f"sampling probability must be in (0, 1], got {sampling_probability!r}")
    if not (isinstance(steps, int) and steps >= 1):
        raise PrivacyError(f"steps must be a positive integer, got {steps!r}")
    if not (0 < delta < 1):
        raise PrivacyError(f"DP-SGD needs 0 < delta < 1, got {delta!r}")


def dpsgd_epsilon(noise_multiplier: float, sampling_probability: float, steps: int, delta: float) -> float:
    """epsilon of ``steps`` Poisson-subsampled Gaussian steps at ``delta`` (substitution neighbours)."""
    _check(sampling_probability, steps, delta)
    if not (noise_multiplier > 0 and math.isfinite(noise_multiplier)):
        raise PrivacyError(f"noise multiplier must be a finite number > 0, got {noise_multiplier!r}")
    acc = _accountant()
    acc.compose(_event(noise_multiplier, sampling_probability, steps))
    return float(acc.get_epsilon(delta))


def dpsgd_noise_multiplier(epsilon: float, delta: float, sampling_probability: float, steps: int) -> float:
    """The smallest noise multiplier sigma for which DP-SGD is (epsilon, delta)-DP.

    Solved with ``dp_accounting.calibrate_dp_mechanism`` (bisection on sigma; the epsilon
    of the result is at most the target, and within 0.1% of it for continuous sigma).
    """
    from dp_accounting import ExplicitBracketInterval, calibrate_dp_mechanism

    _check(sampling_probability, steps, delta)
    if not (epsilon > 0 and math.isfinite(epsilon)):
        raise PrivacyError(f"epsilon must be a finite number > 0, got {epsilon!r}")
    # Bracket sigma by doubling / halving from 1 (epsilon decreases in sigma). Very small
    # sigma makes the PLD's support explode, so the search stops at _SIGMA_FLOOR.
    lo, hi = 1.0, 1.0
    if dpsgd_epsilon(hi, sampling_probability, steps, delta) > epsilon:
        while dpsgd_epsilon(hi, sampling_probability, steps, delta) > epsilon:
            lo, hi = hi, hi * 2.0
            if hi > 1e6:
                raise PrivacyError(
                    f"no noise multiplier up to 1e6 reaches epsilon={epsilon:g} at delta={delta:g} "
                    f"with {steps} steps at sampling probability {sampling_probability:g}; use "
                    "fewer epochs or a larger delta"
                )
    else:
        while dpsgd_epsilon(lo, sampling_probability, steps, delta) <= epsilon:
            hi, lo = lo, lo / 2.0
            if lo < _SIGMA_FLOOR:
                raise PrivacyError(
                    f"epsilon={epsilon:g} is so large that the noise multiplier would fall below "
                    f"{_SIGMA_FLOOR}; use a smaller epsilon or more steps (epochs)"
                )
    return float(
        calibrate_dp_mechanism(
            _accountant,
            lambda s: _event(s, sampling_probability, steps),
            epsilon,
            delta,
            ExplicitBracketInterval(lo, hi),
            tol=1e-5 * hi,
        )
    )
