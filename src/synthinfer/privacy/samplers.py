"""Vetted noise samplers: the one place synthinfer draws privacy noise.

Every sampler here is an OpenDP measurement (``opendp`` 0.16, the OpenDP Library's Rust core;
each has a proof document at docs.opendp.org). OpenDP samples *exactly*: the discrete
distributions by the rejection samplers of Canonne, Kamath & Steinke (2020, "The discrete Gaussian
for differential privacy", Section 5) with exact integer/rational arithmetic, and real-valued
noise as discrete noise on a grid of width ``2^k`` added to the input rounded to that grid, so no
floating-point artefact (Mironov 2012, "On significance of the least significant bits for
differential privacy") can reveal the input. Its privacy maps account for the rounding.

**Randomness.** OpenDP draws every random bit from its own cryptographically secure generator
(OpenSSL's ``RAND_bytes``, seeded by the operating system). It cannot be seeded, and it is
separate from the numpy / JAX streams that the ``seed`` arguments of synthinfer drive (posterior
and synthetic sampling): a fixed ``seed`` never makes privacy noise reproducible, and the
published posterior draws carry no information about the noise stream. :func:`secret_rng` and
:func:`secret_jax_key` give numpy / JAX randomness for privacy-relevant sampling that OpenDP
cannot do (DP-SGD's lots and in-graph noise), seeded from the OS CSPRNG and never from ``seed``.

OpenDP gates its measurements behind ``dp.enable_features("contrib")`` (measurements from the
library's contributed, proof-reviewed set), enabled on import below; ``"floating-point"`` is not
needed, because the float mechanisms used here are the grid-based ones, not the textbook ones.
The samplers take noise *scales* and charge no ledger: the mechanisms of
:mod:`synthinfer.privacy.mechanisms` calibrate the scales and spend the budget first.

**Tests only.** Statistical tests of the inference that were tuned on one noise realisation can
set :data:`_TEST_ONLY_noise_rng` to a numpy Generator: the samplers then draw the same
distributions from it (not exactly, not securely). It refuses to work outside a running pytest
test (``PYTEST_CURRENT_TEST``), so no release can use it.
"""

from __future__ import annotations

import math
import os
import secrets
from functools import lru_cache
from types import SimpleNamespace

import numpy as np

from synthinfer.errors import ParameterError, PrivacyError

_OPENDP_FEATURES = ("contrib",)
#: Discrete-Gaussian terms beyond this many scales are below the smallest float64 (e^-800).
_TAIL_SCALES = 40.0
#: Above this scale the deficit ``sigma^2 - Var`` is below float64 resolution of ``sigma^2``
#: (see :func:`discrete_gaussian_variance`), so the sum is not needed.
_EXACT_VARIANCE_MAX_SCALE = 100.0


#: Tests only (module docstring): a numpy Generator to draw the noise from, or None (always in use).
_TEST_ONLY_noise_rng: np.random.Generator | None = None


def _test_only_rng() -> np.random.Generator | None:
    rng = _TEST_ONLY_noise_rng
    if rng is not None and "PYTEST_CURRENT_TEST" not in os.environ:
        raise PrivacyError("samplers._TEST_ONLY_noise_rng is set outside a pytest test: refusing to draw privacy noise")
    return rng


@lru_cache(maxsize=1)
def _dp() -> SimpleNamespace:
    """OpenDP's core modules as one namespace (the names of ``opendp.prelude``), with the
    features synthinfer uses enabled. Not the prelude itself: it imports ``opendp.extras``,
    which imports scikit-learn (about a second on a cold start, before the first noise)."""
    import opendp.domains
    import opendp.measurements
    import opendp.measures
    import opendp.metrics
    import opendp.mod

    opendp.mod.enable_features(*_OPENDP_FEATURES)
    return SimpleNamespace(**{name: getattr(mod, name) for mod in (opendp.domains, opendp.metrics, opendp.measures)
                              for name in mod.__all__}, m=opendp.measurements)


def _check_scale(scale: float) -> float:
    if isinstance(scale, bool) or not isinstance(scale, (int, float, np.floating)) or not math.isfinite(scale) or scale <= 0:
        raise ParameterError(f"noise scale must be a finite number > 0, got {scale!r}")
    return float(scale)


def as_counts(values: np.ndarray) -> np.ndarray:
    """``values`` as int64, or :class:`ParameterError` unless they are finite integers (checked before any spend)."""
    x = np.asarray(values)
    if x.dtype.kind in "iu":
        return x.astype(np.int64)
    xf = np.asarray(x, dtype=np.float64)
    if not np.all(np.isfinite(xf)) or np.any(xf != np.round(xf)):
        raise ParameterError("discrete noise is added to integer counts only; got non-integer values")
    if xf.size and np.max(np.abs(xf)) >= 2**53:
        raise ParameterError("counts must be below 2^53 in magnitude")
    return xf.astype(np.int64)


def as_reals(values: np.ndarray) -> np.ndarray:
    """``values`` as float64, or :class:`ParameterError` unless they are all finite."""
    x = np.asarray(values, dtype=np.float64)
    if not np.all(np.isfinite(x)):
        raise ParameterError("noise is added to finite values only; got NaN or infinity")
    return x


def _apply(measurement, x: np.ndarray, dtype) -> np.ndarray:
    if x.size == 0:
        return x.astype(dtype)
    return np.asarray(measurement(x.ravel().tolist()), dtype=dtype).reshape(x.shape)


# -- discrete noise on integer counts -----------------------------------------------------------


def discrete_gaussian(counts: np.ndarray, scale: float) -> np.ndarray:
    """``counts + Z`` with ``Z_i`` i.i.d. discrete Gaussian ``N_Z(0, scale^2)``: integer outputs.

    ``N_Z(0, s^2)`` puts mass ``proportional to exp(-k^2 / (2 s^2))`` on every integer ``k``
    (Canonne, Kamath & Steinke 2020, Def. 1); its variance is below ``s^2``
    (:func:`discrete_gaussian_variance`). Drawn by OpenDP's ``make_gaussian`` on an ``i64``
    vector (exact rejection sampler, CKS 2020, Alg. 3). Guarantee (CKS 2020, Thm 4, and
    additivity of Rényi divergence over independent coordinates): for integer vectors whose
    neighbouring values differ by ``v`` with ``||v||_2 <= Delta``, the release is
    ``Delta^2 / (2 scale^2)``-zCDP, exactly the bound of the continuous Gaussian; OpenDP's
    privacy map states the same (:func:`discrete_gaussian_rho`). Returns int64.
    """
    scale = _check_scale(scale)
    x = as_counts(counts)
    if (rng := _test_only_rng()) is not None:
        k = np.arange(-int(math.ceil(_TAIL_SCALES * scale)), int(math.ceil(_TAIL_SCALES * scale)) + 1)
        p = np.exp(-(k.astype(float) ** 2) / (2 * scale * scale))
        return x + rng.choice(k, size=x.shape, p=p / p.sum())
    dp = _dp()
    m = dp.m.make_gaussian(dp.vector_domain(dp.atom_domain(T="i64")), dp.l2_distance(T="i64"), scale=scale)
    return _apply(m, x, np.int64)


def discrete_gaussian_rho(sensitivity: float, scale: float) -> float:
    """zCDP of :func:`discrete_gaussian` at L2 sensitivity ``Delta``: ``Delta^2 / (2 scale^2)``.

    Valid for every integer shift ``v`` with ``||v||_2 <= Delta`` (CKS 2020, Thm 4 per coordinate,
    summed over independent coordinates), so ``Delta`` need not be an integer (``sqrt(2 d)``
    for ``d`` marginals under substitution)."""
    return float(sensitivity) ** 2 / (2.0 * _check_scale(scale) ** 2)


def discrete_gaussian_variance(scale: float) -> float:
    """Exact variance of ``N_Z(0, scale^2)``: ``sum_k k^2 N(k) / sum_k N(k)``, ``N(k) = exp(-k^2/(2 s^2))``.

    Summed over ``|k| <= 40 s`` (the rest is below the smallest float64), in increasing order
    of the terms. The deficit ``s^2 - Var`` is, by Poisson summation, about
    ``8 pi^2 s^4 exp(-2 pi^2 s^2)``: 2e-7 at ``s = 1``, below float64 resolution of ``s^2``
    from ``s ~ 1.5`` on, so above ``s = 100`` the sum (of ``80 s`` terms) is skipped and ``s^2``
    returned.
    """
    s = _check_scale(scale)
    if s > _EXACT_VARIANCE_MAX_SCALE:
        return s * s
    k = np.arange(int(math.ceil(_TAIL_SCALES * s)) + 1, 0, -1, dtype=np.float64)  # smallest terms first
    w = np.exp(-k * k / (2.0 * s * s))
    # the sum may round a hair above s^2 where the deficit is below float64 resolution
    return min(float(2.0 * math.fsum(k * k * w) / (1.0 + 2.0 * math.fsum(w))), s * s)


def discrete_laplace(counts: np.ndarray, scale: float) -> np.ndarray:
    """``counts + Z`` with ``Z_i`` i.i.d. discrete Laplace (two-sided geometric) of scale ``t``.

    ``P(Z = k)`` is proportional to ``exp(-|k| / t)``; variance :func:`discrete_laplace_variance`.
    Drawn by OpenDP's ``make_laplace`` on an ``i64`` vector (exact sampler, CKS 2020, Alg. 2).
    Guarantee (Ghosh, Roughgarden & Sundararajan 2012; OpenDP's privacy map): for integer
    vectors with L1 sensitivity ``Delta``, ``Delta / t``-DP (pure). Returns int64.
    """
    scale = _check_scale(scale)
    x = as_counts(counts)
    if (rng := _test_only_rng()) is not None:  # two-sided geometric: difference of two geometrics
        q = -math.expm1(-1.0 / scale)
        return x + rng.geometric(q, size=x.shape) - rng.geometric(q, size=x.shape)
    dp = _dp()
    m = dp.m.make_laplace(dp.vector_domain(dp.atom_domain(T="i64")), dp.l1_distance(T="i64"), scale=scale)
    return _apply(m, x, np.int64)


def discrete_laplace_variance(scale: float) -> float:
    """Variance of the discrete Laplace of scale ``t``: ``2 e^(-1/t) / (1 - e^(-1/t))^2`` (below ``2 t^2``)."""
    r = math.exp(-1.0 / _check_scale(scale))
    return 2.0 * r / (1.0 - r) ** 2


# -- real-valued noise -----------------------------------------------------------------------------


def _calibrated(make, d_in: float, target: float, scale: float):
    """OpenDP measurement ``make(scale)`` whose privacy map at ``d_in`` is at most ``target``.

    OpenDP's real-valued maps add a little for rounding the input to the noise grid; the scale
    is raised by that relative excess (at most a few steps) so that the charge stays exact."""
    for _ in range(8):
        m = make(scale)
        got = float(m.map(d_in))
        if got <= target:
            return m, scale
        scale *= (got / target) * (1.0 + 1e-9)
    raise ParameterError(f"cannot calibrate the noise to privacy loss {target!r} at sensitivity {d_in!r}")


def laplace(values: np.ndarray, *, sensitivity: float, epsilon: float) -> tuple[np.ndarray, float]:
    """``values + Z``, ``Z_i`` Laplace-distributed on a fine grid: ``epsilon``-DP at L1 sensitivity ``Delta``.

    OpenDP's ``make_laplace`` on a float64 vector: the input is rounded to the grid ``2^k Z``
    (OpenDP's default ``k`` for the scale) and discrete Laplace noise on that grid is added, so
    the noise is ``Laplace(0, t)`` up to the grid and every output is attainable from every
    input. The scale ``t`` starts at ``Delta / epsilon`` and is raised (by far less than 1e-6
    relatively) until OpenDP's privacy map, which counts the rounding, gives at most
    ``epsilon``. Returns the noisy values (float64) and ``t``.
    """
    dp = _dp()
    sensitivity, epsilon = _check_scale(sensitivity), _check_scale(epsilon)
    x = as_reals(values)
    space = dp.vector_domain(dp.atom_domain(T=float, nan=False)), dp.l1_distance(T=float)
    if (rng := _test_only_rng()) is not None:
        return x + rng.laplace(0.0, sensitivity / epsilon, size=x.shape), sensitivity / epsilon
    m, t = _calibrated(lambda s: dp.m.make_laplace(*space, scale=s), sensitivity, epsilon, sensitivity / epsilon)
    return _apply(m, x, np.float64), t


def gaussian(values: np.ndarray, *, sensitivity: float, rho: float) -> tuple[np.ndarray, float]:
    """``values + Z``, ``Z_i`` Gaussian on a fine grid: ``rho``-zCDP at L2 sensitivity ``Delta``.

    OpenDP's ``make_gaussian`` on a float64 vector: the input is rounded to the grid ``2^k Z``
    and discrete Gaussian noise on that grid is added (CKS 2020), ``N(0, s^2)`` up to the grid.
    The scale ``s`` starts at ``Delta / sqrt(2 rho)`` and is raised until OpenDP's privacy map
    (rounding included) gives at most ``rho``. Returns the noisy values (float64) and ``s``.
    """
    dp = _dp()
    sensitivity, rho = _check_scale(sensitivity), _check_scale(rho)
    x = as_reals(values)
    space = dp.vector_domain(dp.atom_domain(T=float, nan=False)), dp.l2_distance(T=float)
    if (rng := _test_only_rng()) is not None:
        s = sensitivity / math.sqrt(2 * rho)
        return x + rng.normal(0.0, s, size=x.shape), s
    m, s = _calibrated(lambda v: dp.m.make_gaussian(*space, scale=v), sensitivity, rho, sensitivity / math.sqrt(2 * rho))
    return _apply(m, x, np.float64), s


# -- selection -----------------------------------------------------------------------------------


def exponential_mechanism(scores: np.ndarray, *, epsilon: float, sensitivity: float) -> int:
    """Index ``i`` drawn with probability proportional to ``exp(epsilon * score_i / (2 Delta))``.

    The exponential mechanism (McSherry & Talwar 2007) as report-noisy-max with Gumbel noise of
    scale ``2 Delta / epsilon`` (the two have the same distribution): OpenDP's ``make_noisy_max``
    with the zCDP output measure, which samples the Gumbel argmax exactly on the scores as
    exact rationals. Guarantee, for scores that each move by at most ``Delta`` between
    neighbours: ``epsilon``-DP, and ``epsilon^2 / 8``-zCDP (bounded range; Cesar & Rogers 2021),
    which is OpenDP's privacy map.
    """
    dp = _dp()
    epsilon, sensitivity = _check_scale(epsilon), _check_scale(sensitivity)
    s = as_reals(scores).ravel()
    if s.size == 0:
        raise ParameterError("the exponential mechanism needs at least one candidate")
    if (rng := _test_only_rng()) is not None:
        return int(np.argmax(epsilon * s / (2.0 * sensitivity) + rng.gumbel(size=s.shape)))
    m = dp.m.make_noisy_max(
        dp.vector_domain(dp.atom_domain(T=float, nan=False)), dp.linf_distance(T=float),
        dp.zero_concentrated_divergence(), scale=2.0 * sensitivity / epsilon)
    return int(m(s.tolist()))


def quantile_scale(epsilon: float) -> float:
    """Scale of :func:`private_quantile` for ``epsilon``-DP under substitution of one row.

    A substitution is symmetric distance 2 on vectors of known size n, where OpenDP's privacy
    map of ``make_private_quantile`` (max divergence) is ``2 / scale``."""
    return 2.0 / _check_scale(epsilon)


def private_quantile(values: np.ndarray, *, candidates: np.ndarray, alpha: float, epsilon: float) -> float:
    """The ``alpha``-quantile of ``values`` among public ``candidates``, ``epsilon``-DP.

    The exponential mechanism on the quantile score (Smith 2011, "Privacy-preserving
    statistical estimation with optimal convergence rates"): candidate ``c`` scores by how far
    the number of values below it is from ``alpha n`` (ties counted as in OpenDP's proof), and is
    drawn with probability proportional to ``exp(-score / scale)``. OpenDP's
    ``make_private_quantile`` on vectors of the known, public size ``n`` (a substitution moves a
    candidate's score by at most one rank), exact Gumbel report-noisy-max on integer scores.
    Guarantee: ``epsilon``-DP under substitution of one row (OpenDP's privacy map at symmetric
    distance 2, checked against ``epsilon`` before anything is drawn).
    """
    dp = _dp()
    epsilon = _check_scale(epsilon)
    x = as_reals(values).ravel()
    cands = np.asarray(as_reals(candidates), dtype=np.float64).ravel()
    if cands.size == 0 or x.size == 0:
        raise ParameterError("a private quantile needs at least one value and one candidate")
    if not np.all(np.diff(cands) > 0):
        raise ParameterError("quantile candidates must be strictly increasing")
    if not 0.0 <= alpha <= 1.0:
        raise ParameterError(f"alpha must be in [0, 1], got {alpha!r}")
    scale = quantile_scale(epsilon)
    if (rng := _test_only_rng()) is not None:
        below = np.searchsorted(np.sort(x), cands, side="left")
        score = -np.abs(below - alpha * x.size)
        return float(cands[int(np.argmax(score / scale + rng.gumbel(size=cands.shape)))])
    space = dp.vector_domain(dp.atom_domain(T=float, nan=False), size=int(x.size)), dp.symmetric_distance()
    m, _ = _calibrated(lambda s: dp.m.make_private_quantile(*space, dp.max_divergence(), candidates=cands.tolist(),
                                                            alpha=float(alpha), scale=s), 2, epsilon, scale)
    return float(m(x.tolist()))


# -- OS-CSPRNG-seeded streams for privacy randomness OpenDP cannot draw ---------------------------


def secret_rng() -> np.random.Generator:
    """A numpy Generator seeded with 128 bits from the OS CSPRNG (``secrets``), never from ``seed``.

    For privacy-relevant sampling that OpenDP has no measurement for (DP-SGD's Poisson lots);
    its outputs are never published, and it shares no state with the seeded streams."""
    return np.random.default_rng(secrets.randbits(128))


def secret_jax_key():
    """A JAX PRNG key whose raw data comes from the OS CSPRNG (``secrets``), never from ``seed``.

    For noise added inside compiled JAX programs (DP-SGD), where OpenDP cannot reach: JAX's
    Threefry-2x32 counter-based generator (Salmon et al. 2011) keyed with secret bits."""
    import jax

    spec = jax.eval_shape(lambda: jax.random.key_data(jax.random.key(0)))
    nbytes = int(np.prod(spec.shape)) * np.dtype(spec.dtype).itemsize
    data = np.frombuffer(secrets.token_bytes(nbytes), dtype=spec.dtype).reshape(spec.shape)
    return jax.random.wrap_key_data(data)
