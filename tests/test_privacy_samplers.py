"""The vetted samplers (OpenDP): distributions, exact variance, privacy maps, no seeding."""

import math

import numpy as np
import pytest
from scipy.stats import chi2

from synthinfer.errors import ParameterError, PrivacyError
from synthinfer.privacy import samplers

N = 20000


def _discrete_gaussian_pmf(scale, k):
    w = np.exp(-k.astype(float) ** 2 / (2 * scale**2))
    return w / w.sum()


@pytest.mark.parametrize("scale", [0.3, 0.6, 1.0, 2.5, 7.0, 150.0])
def test_discrete_gaussian_variance_against_brute_force(scale):
    k = np.arange(-int(60 * scale) - 5, int(60 * scale) + 6)
    p = _discrete_gaussian_pmf(scale, k)
    brute = float((p * k.astype(float) ** 2).sum())
    assert samplers.discrete_gaussian_variance(scale) == pytest.approx(brute, rel=1e-12)
    assert samplers.discrete_gaussian_variance(scale) <= scale**2


def test_discrete_gaussian_variance_below_scale_squared_at_small_scales():
    # far below sigma^2 where it matters: N_Z(0, 0.3^2) is almost a point mass at 0
    assert samplers.discrete_gaussian_variance(0.3) < 0.1 * 0.3**2
    assert samplers.discrete_gaussian_variance(0.5) < 0.9 * 0.25


@pytest.mark.parametrize("scale", [0.5, 1.3, 4.0])
def test_discrete_gaussian_distribution(scale):
    z = samplers.discrete_gaussian(np.zeros(N, dtype=np.int64), scale)
    assert z.dtype == np.int64 and z.shape == (N,)
    var = samplers.discrete_gaussian_variance(scale)
    # mean within 5 se; variance within 5 se (se of the sample variance ~ var sqrt(2/N) for near-normal tails)
    assert abs(z.mean()) < 5 * math.sqrt(var / N)
    assert abs(z.var() - var) < 5 * var * math.sqrt(2.0 / N) + 1e-9
    # goodness of fit on the central cells (chi-square, 1e-6 level)
    k = np.arange(-int(3 * scale) - 1, int(3 * scale) + 2)
    p = _discrete_gaussian_pmf(scale, np.arange(-int(40 * scale) - 2, int(40 * scale) + 3))
    pk = p[np.searchsorted(np.arange(-int(40 * scale) - 2, int(40 * scale) + 3), k)]
    obs = np.array([(z == v).sum() for v in k] + [(np.abs(z) > k[-1]).sum()])
    exp = np.r_[pk, max(1.0 - pk.sum(), 1e-12)] * N
    stat = float(((obs - exp) ** 2 / exp)[exp > 5].sum())
    assert stat < chi2.ppf(1 - 1e-6, (exp > 5).sum() - 1)


def test_discrete_gaussian_adds_to_counts_and_keeps_shape():
    counts = np.arange(12).reshape(3, 4)
    out = samplers.discrete_gaussian(counts, 2.0)
    assert out.shape == (3, 4) and out.dtype == np.int64
    assert samplers.discrete_gaussian(np.array([], dtype=np.int64), 1.0).size == 0
    # float arrays holding integers are counts too; anything else is refused
    assert samplers.discrete_gaussian(np.array([3.0, 4.0]), 1.0).dtype == np.int64
    with pytest.raises(ParameterError, match="integer"):
        samplers.discrete_gaussian(np.array([0.5]), 1.0)
    with pytest.raises(ParameterError, match="scale"):
        samplers.discrete_gaussian(np.array([1]), 0.0)


@pytest.mark.parametrize("scale", [0.7, 3.0])
def test_discrete_laplace_distribution(scale):
    z = samplers.discrete_laplace(np.full(N, 5, dtype=np.int64), scale) - 5
    assert z.dtype == np.int64
    var = samplers.discrete_laplace_variance(scale)
    k = np.arange(-400, 401)
    w = np.exp(-np.abs(k) / scale)
    assert var == pytest.approx(float((w * k**2).sum() / w.sum()), rel=1e-10)
    assert abs(z.mean()) < 5 * math.sqrt(var / N)
    # sd of the sample variance: sqrt((m4 - var^2) / N), m4 of the two-sided geometric by summation
    m4 = float((w * k.astype(float) ** 4).sum() / w.sum())
    assert abs(z.var() - var) < 5 * math.sqrt((m4 - var**2) / N)


def test_float_laplace_and_gaussian_distribution():
    x, t = samplers.laplace(np.full(N, 0.25), sensitivity=2.0, epsilon=4.0)
    assert t == pytest.approx(0.5, rel=1e-6)
    z = x - 0.25
    assert abs(z.mean()) < 5 * math.sqrt(2 * t * t / N)
    assert abs(np.abs(z).mean() - t) < 5 * t / math.sqrt(N)  # E|Laplace(0, t)| = t, sd t
    y, s = samplers.gaussian(np.full(N, -1.5), sensitivity=1.0, rho=0.5)
    assert s == pytest.approx(1.0, rel=1e-6)
    assert abs(y.mean() + 1.5) < 5 * s / math.sqrt(N)
    assert abs(y.std() - s) < 5 * s / math.sqrt(2 * N)
    with pytest.raises(ParameterError, match="finite"):
        samplers.gaussian(np.array([np.inf]), sensitivity=1.0, rho=0.5)


def test_privacy_maps_match_opendp():
    dp = samplers._dp()
    for delta_int, scale in [(1, 1.0), (2, 3.0), (5, 0.7)]:
        m = dp.m.make_gaussian(dp.vector_domain(dp.atom_domain(T="i64")), dp.l2_distance(T="i64"), scale=scale)
        assert samplers.discrete_gaussian_rho(delta_int, scale) == pytest.approx(float(m.map(delta_int)), rel=1e-9)


def test_exponential_mechanism_distribution():
    scores = np.array([0.0, 1.0, 2.0, 4.0])
    eps, sens = 1.0, 1.0
    draws = np.array([samplers.exponential_mechanism(scores, epsilon=eps, sensitivity=sens) for _ in range(4000)])
    p = np.exp(eps * scores / (2 * sens))
    p /= p.sum()
    freq = np.bincount(draws, minlength=4) / draws.size
    assert np.all(np.abs(freq - p) < 5 * np.sqrt(p * (1 - p) / draws.size))
    with pytest.raises(ParameterError):
        samplers.exponential_mechanism(np.array([]), epsilon=1.0, sensitivity=1.0)


def test_noise_ignores_numpy_seed():
    """Privacy noise never comes from numpy's global or seeded streams."""
    np.random.seed(0)
    a = samplers.discrete_gaussian(np.zeros(200, dtype=np.int64), 5.0)
    np.random.seed(0)
    b = samplers.discrete_gaussian(np.zeros(200, dtype=np.int64), 5.0)
    assert not np.array_equal(a, b)
    assert not np.array_equal(samplers.secret_rng().integers(0, 2**62, 4), samplers.secret_rng().integers(0, 2**62, 4))


def test_test_only_hook_refuses_outside_pytest(monkeypatch):
    monkeypatch.setattr(samplers, "_TEST_ONLY_noise_rng", np.random.default_rng(0))
    a = samplers.discrete_gaussian(np.zeros(5, dtype=np.int64), 2.0)
    monkeypatch.setattr(samplers, "_TEST_ONLY_noise_rng", np.random.default_rng(0))
    assert np.array_equal(a, samplers.discrete_gaussian(np.zeros(5, dtype=np.int64), 2.0))
    monkeypatch.delenv("PYTEST_CURRENT_TEST")
    with pytest.raises(PrivacyError, match="outside a pytest test"):
        samplers.discrete_gaussian(np.zeros(5, dtype=np.int64), 2.0)


def test_test_only_hook_draws_the_same_distributions(monkeypatch):
    monkeypatch.setattr(samplers, "_TEST_ONLY_noise_rng", np.random.default_rng(1))
    z = samplers.discrete_gaussian(np.zeros(N, dtype=np.int64), 0.6)
    var = samplers.discrete_gaussian_variance(0.6)
    assert z.dtype.kind == "i" and abs(z.var() - var) < 5 * var * math.sqrt(2.0 / N)
    y = samplers.discrete_laplace(np.zeros(N, dtype=np.int64), 2.0)
    assert abs(y.var() - samplers.discrete_laplace_variance(2.0)) < 0.1 * samplers.discrete_laplace_variance(2.0)
