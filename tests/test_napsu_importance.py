"""Pareto-smoothed importance sampling of NAPSU-MQ's posterior: the proposal's pieces, agreement
with long NUTS runs on the same noisy counts, and the refusal of a poor proposal.

Monte Carlo tolerances of the comparisons with NUTS. For parameter ``i`` with NUTS variance
``v_i``, kurtosis ``kappa_i`` and bulk ESS ``E_i``, and importance sampling's ESS ``E`` of
that parameter's mean (``ImportanceResult.ess_per_parameter``) with ``M`` resampled draws, the
difference of the two means has variance about ``v_i (1/E + 1/M + 1/E_i)`` (``1/M``: the resampling), and the log ratio of the two standard
deviations has variance about ``(kappa_i - 1)/4 (1/E + 1/M + 1/E_i)`` (delta method for
the variance of a sample variance). Both are asserted within 4 of their standard errors: for
at most 13 roughly normal z-scores, a false failure has probability below 1e-3.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pandas as pd
import pytest
from scipy import integrate, stats

from synthinfer.data import Domain
from synthinfer.datasets import make_toy_logistic
from synthinfer.errors import ConvergenceWarning, ParameterError
from synthinfer.generate import NapsuMQ
from synthinfer.mcmc import convergence_diagnostics
from synthinfer.napsu import backends
from synthinfer.napsu.backends import ImportanceBackend, InferenceSettings, PosteriorProblem, get_backend
from synthinfer.napsu.diagnostics import to_inference_data
from synthinfer.napsu.importance import (
    AxisDensity, Proposal, importance_sample, systematic_resample,
)
from synthinfer.napsu.nuts import nuts_sample

pytestmark = pytest.mark.usefixtures("float64")


def _problem(data: pd.DataFrame, domain: Domain, marginals, epsilon: float) -> NapsuMQ:
    """A Laplace fit of NapsuMQ (its noisy counts, network and Laplace result are the problem)."""
    n = len(data)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        return NapsuMQ(marginals, epsilon=epsilon, delta=n**-2.0, inference="laplace", num_samples=10,
                       seed=1).fit(data, domain)


@pytest.fixture(scope="module", autouse=True)
def _fixed_noise():
    """These comparisons of samplers are tuned on one noise realisation: draw the privacy noise
    from a seeded stream (test-only hook of synthinfer.privacy.samplers)."""
    from synthinfer.privacy import samplers

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(samplers, "_TEST_ONLY_noise_rng", np.random.default_rng(0))
        yield


@pytest.fixture(scope="module")
def toy() -> NapsuMQ:
    """The toy model (the full 3-way marginal of NAPSU-MQ Section 5.1, d = 7): near Gaussian."""
    ds = make_toy_logistic(2000, (1.0, 0.0), seed=0)
    return _problem(ds.data, ds.domain, [("x1", "x2", "y")], 1.0)


def _sparse_data(n: int, seed: int) -> tuple[pd.DataFrame, Domain]:
    """Four columns whose rare levels leave cells of the 2-way marginals with expected counts
    of a few rows, next to the noise's sigma_DP ~ 11."""
    rng = np.random.default_rng(seed)
    a = rng.choice(3, n, p=[0.6, 0.37, 0.03])
    b = np.where(a == 2, rng.choice(3, n, p=[0.8, 0.15, 0.05]), rng.choice(3, n, p=[0.5, 0.3, 0.2]))
    c = (rng.random(n) < np.where(b == 2, 0.05, 0.5)).astype(int)
    e = (rng.random(n) < np.where(c == 1, 0.9, 0.3)).astype(int)
    return (pd.DataFrame({"a": a, "b": b, "c": c, "e": e}),
            Domain({"a": [0, 1, 2], "b": [0, 1, 2], "c": [0, 1], "e": [0, 1]}))


@pytest.fixture(scope="module")
def sparse() -> NapsuMQ:
    """A 4-column chain of 2-way marginals (d = 13) with near-empty cells: one-sided posteriors."""
    data, domain = _sparse_data(2000, 0)
    return _problem(data, domain, [("a", "b"), ("b", "c"), ("c", "e")], 1.0)


def _importance(g: NapsuMQ, **kw):
    net = g.network_
    return importance_sample(net, g.noisy_counts_, kw.pop("sigma_dp", g.sigma_dp_), g.n_, g.laplace_,
                             dropped_cell_jacobian=net.dropped_cell_log_prob_jacobian,
                             rng=np.random.default_rng(kw.pop("seed", 3)), **kw)


def _nuts(g: NapsuMQ, num_samples: int):
    net = g.network_
    res = nuts_sample(net, g.noisy_counts_, g.sigma_dp_, g.n_, g.laplace_, n_chains=4, num_warmup=500,
                      num_samples=num_samples, dropped_cell_jacobian=net.dropped_cell_log_prob_jacobian,
                      rng=np.random.default_rng(9))
    diag = convergence_diagnostics(to_inference_data(res.draws), ["theta"], warn=False)
    assert diag["ok"], diag["rhat_max"]
    return res.draws.reshape(-1, res.draws.shape[-1]), np.asarray(diag["ess_bulk"])


def _assert_agree(imp, ref: np.ndarray, ref_ess: np.ndarray) -> None:
    """Means and standard deviations within 4 Monte Carlo standard errors (module docstring)."""
    x = imp.draws.reshape(-1, imp.draws.shape[-1])
    m, v = ref.mean(0), ref.var(0)
    kurt = np.mean((ref - m) ** 4, axis=0) / v**2
    inv_ess = 1.0 / imp.ess_per_parameter + 1.0 / x.shape[0] + 1.0 / ref_ess
    z_mean = (x.mean(0) - m) / np.sqrt(v * inv_ess)
    z_sd = np.log(x.std(0) / np.sqrt(v)) / np.sqrt((kurt - 1.0) / 4.0 * inv_ess)
    assert np.abs(z_mean).max() < 4.0, z_mean
    assert np.abs(z_sd).max() < 4.0, z_sd


# ------------------------------------------------------------------------------------------
# The pieces
# ------------------------------------------------------------------------------------------
def test_axis_density_normalises_and_samples_its_density():
    # a one-sided profile: a narrow wall on the right, a plateau 3 nats down on the left
    x = np.concatenate([-np.geomspace(8, 0.05, 12), [0.0], np.geomspace(0.05, 2, 8)])
    lp = np.where(x > 0, -0.5 * (x / 0.1) ** 2, np.maximum(-0.5 * (x / 0.1) ** 2, -3.0 - 0.1 * x**2))
    dens = AxisDensity.from_profile(x, lp)
    total = integrate.quad(lambda y: np.exp(dens.log_pdf(np.array([y]))[0]), -60, 60, points=list(dens.x), limit=500)[0]
    assert total == pytest.approx(1.0, abs=1e-6)
    # between grid points the log density is the chord of the profile
    mid = 0.5 * (dens.x[3] + dens.x[4])
    assert dens.log_pdf(np.array([mid]))[0] - dens.log_pdf(dens.x[3:4])[0] == pytest.approx(
        0.5 * (dens.level[4] - dens.level[3]))
    y = dens.sample(np.random.default_rng(0), 40_000)
    cdf = np.vectorize(lambda t: integrate.quad(lambda s: np.exp(dens.log_pdf(np.array([s]))[0]), -60, t,
                                                points=[p for p in dens.x if p < t], limit=500)[0])
    # Kolmogorov-Smirnov against the density's own CDF: critical value at alpha = 1e-3
    grid = np.quantile(y, np.linspace(0.01, 0.99, 60))
    ecdf = np.searchsorted(np.sort(y), grid, side="right") / y.size
    assert np.abs(ecdf - cdf(grid)).max() < 1.95 / math.sqrt(y.size)


def test_proposal_log_density_is_student_t_times_the_axis_densities():
    center, spread = np.array([0.5, -1.0, 2.0]), np.array([1.0, 2.0, 0.5])
    t_only = Proposal(center, spread, 7.0)
    u, log_q = t_only.sample(np.random.default_rng(1), 50)
    want = stats.multivariate_t(loc=center, shape=np.diag(spread**2), df=7.0).logpdf(u)
    np.testing.assert_allclose(log_q, want, rtol=1e-10)
    axis = AxisDensity.from_profile(np.linspace(-3, 3, 13), -0.5 * np.linspace(-3, 3, 13) ** 2)
    mixed = Proposal(center, spread, 7.0, {1: axis})
    u, log_q = mixed.sample(np.random.default_rng(2), 50)
    t_part = stats.multivariate_t(loc=center[[0, 2]], shape=np.diag(spread[[0, 2]] ** 2), df=7.0).logpdf(u[:, [0, 2]])
    np.testing.assert_allclose(log_q, t_part + axis.log_pdf((u[:, 1] - center[1]) / spread[1]) - np.log(spread[1]),
                               rtol=1e-10)


def test_systematic_resampling_keeps_each_draw_within_one_of_its_share():
    rng = np.random.default_rng(4)
    log_w = rng.normal(0.0, 2.0, 300)
    w = np.exp(log_w - log_w.max())
    w /= w.sum()
    idx = systematic_resample(log_w, 1000, rng)
    counts = np.bincount(idx, minlength=300)
    assert counts.sum() == 1000
    assert np.all(counts >= np.floor(1000 * w) - 1e-9) and np.all(counts <= np.ceil(1000 * w) + 1e-9)
    assert not np.all(np.diff(idx) >= 0)  # shuffled: a subset (a "chain") is a random one


def test_bad_settings_raise_parameter_errors(toy):
    with pytest.raises(ParameterError, match="fallback"):
        ImportanceBackend(fallback="laplace")
    with pytest.raises(ParameterError, match="df must be a positive number"):
        ImportanceBackend(df=-1.0)
    with pytest.raises(ParameterError, match="num_proposals must be an integer >= 100"):
        ImportanceBackend(num_proposals=50.5)
    with pytest.raises(ParameterError, match="num_proposals"):
        _importance(toy, num_proposals=10)
    with pytest.raises(ParameterError, match="scale"):
        _importance(toy, scale=0.0)


# ------------------------------------------------------------------------------------------
# Against long NUTS runs on the same noisy counts
# ------------------------------------------------------------------------------------------
def test_toy_posterior_agrees_with_nuts_and_k_hat_is_small(toy):
    imp = _importance(toy)
    # near Gaussian: nothing profiled, and the Student-t proposal's weights are light-tailed
    # (k-hat 0.03 measured; Vehtari et al. 2024 call k < 0.5 good)
    assert imp.n_one_sided == 0 and imp.n_profiled == 0
    assert imp.reliable and imp.k_hat < 0.3
    assert imp.ess > 0.5 * imp.num_proposals
    assert imp.draws.shape == (4, 2000, 7)
    ref, ess = _nuts(toy, 2500)
    _assert_agree(imp, ref, ess)


def test_near_empty_cells_posterior_agrees_with_nuts(sparse):
    imp = _importance(sparse)
    assert imp.n_one_sided >= 3 and imp.n_profiled >= imp.n_one_sided
    assert imp.reliable, imp.k_hat
    assert imp.ess_min > 400
    ref, ess = _nuts(sparse, 1500)
    _assert_agree(imp, ref, ess)


def test_measurements_in_a_layout_give_the_same_draws_as_the_canonical_queries(sparse):
    """The same values passed as measurements (the canonical layout, one sd per value) define
    the same target and proposal: the same draws and k-hat."""
    from synthinfer.napsu.structured import canonical_layout

    plain = _importance(sparse, num_proposals=400, num_samples=50)
    as_measured = _importance(sparse, num_proposals=400, num_samples=50, layout=canonical_layout(sparse.queries_),
                              sigma_dp=np.full(sparse.noisy_counts_.size, sparse.sigma_dp_))
    np.testing.assert_allclose(as_measured.draws, plain.draws, rtol=0, atol=1e-8)
    assert as_measured.k_hat == pytest.approx(plain.k_hat, abs=1e-10)
    assert as_measured.n_profiled == plain.n_profiled


def test_a_symmetric_proposal_fails_on_near_empty_cells(sparse):
    # without the profiles the Student-t cannot follow the one-sided posteriors, and PSIS says so
    imp = _importance(sparse, profile=False)
    assert not imp.reliable and imp.k_hat > 0.7


# ------------------------------------------------------------------------------------------
# The backend
# ------------------------------------------------------------------------------------------
def _run_backend(g: NapsuMQ, backend: ImportanceBackend, **settings):
    problem = PosteriorProblem(g.network_, g.noisy_counts_, g.sigma_dp_, g.n_, 10.0)
    s = dict(n_chains=2, num_warmup=100, num_samples=200, max_tree_depth=8, laplace_max_iter=6000,
             laplace_max_restarts=5) | settings
    return backend.run(problem, InferenceSettings(**s), rng=np.random.default_rng(5), progress=lambda _: None,
                       spare_core=lambda: None)


@pytest.mark.filterwarnings("ignore:NUTS diagnostics failed")  # deliberately short chains
def test_a_narrow_proposal_is_refused_and_falls_back_to_nuts(toy):
    bad = ImportanceBackend(scale=math.sqrt(0.05))  # the Laplace covariance times 0.05
    with pytest.warns(ConvergenceWarning, match=r"importance sampling refused: Pareto k-hat \d+\.\d+ > 0\.70"):
        res = _run_backend(toy, bad)
    info = res.diagnostics["importance"]
    assert info["k_hat"] > 0.7 and info["validated"] is False
    assert info["sampler"] == "nuts" and "fell back to NUTS" in info["reason"]
    assert "nuts" in res.diagnostics and res.posterior.attrs["inference"] == "nuts"
    assert res.posterior.posterior["theta"].shape == (2, 200, 7)
    assert set(res.timings) >= {"laplace", "importance", "nuts"}


def test_a_narrow_proposal_without_fallback_returns_flagged_draws(toy, monkeypatch):
    bad = ImportanceBackend(scale=math.sqrt(0.05), fallback=None)
    with pytest.warns(ConvergenceWarning, match="NOT validated"):
        res = _run_backend(toy, bad)
    info = res.diagnostics["importance"]
    assert info["validated"] is False and info["sampler"] == "importance" and "nuts" not in res.diagnostics
    assert res.posterior.posterior["theta"].shape == (2, 200, 7)
    # through NapsuMQ, the warning points at the caller's line
    monkeypatch.setitem(backends._REGISTRY, "narrow", ImportanceBackend(name="narrow", scale=math.sqrt(0.05),
                                                                       fallback=None))
    ds = make_toy_logistic(2000, (1.0, 0.0), seed=0)
    with pytest.warns(ConvergenceWarning, match="NOT validated") as caught:
        g = NapsuMQ([("x1", "x2", "y")], epsilon=1.0, delta=2000**-2.0, inference="narrow", seed=1).fit(ds.data,
                                                                                                        ds.domain)
    assert all(w.filename == __file__ for w in caught if "NOT validated" in str(w.message))
    assert g.diagnostics_["importance"]["validated"] is False


def test_importance_is_a_registered_backend_and_reports_its_sampler(tmp_path):
    ds = make_toy_logistic(2000, (1.0, 0.0), seed=0)
    g = NapsuMQ([("x1", "x2", "y")], epsilon=1.0, delta=2000**-2.0, inference="importance", seed=1)
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)  # an accepted proposal warns nothing
        g.fit(ds.data, ds.domain)
    assert isinstance(get_backend("importance"), ImportanceBackend)
    info = g.diagnostics_["importance"]
    assert info["validated"] is True and info["sampler"] == "importance"
    assert info["k_hat"] <= info["k_hat_threshold"] == pytest.approx(0.7)
    assert info["ess_min"] >= info["ess_required"] == 400
    assert info["proposal_df"] == 7.0 and info["num_proposals"] == 4000
    assert "PSIS accepted" in info["reason"]
    assert g.draws_.shape == (4, 2000, 7)
    assert "importance" in g.diagnostics_summary()
    assert "inference: importance" in g.summary()
    assert len(g.generate(2, n=50, seed=0)) == 2
    g.save(tmp_path / "g.npz")
    assert NapsuMQ.load(tmp_path / "g.npz").diagnostics_["importance"] == info
