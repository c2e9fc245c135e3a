"""NAPSU-MQ inference: posterior recovery of a known theta, Laplace vs NUTS, restarts, MLE."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from synthinfer._jax import jax, jnp
from synthinfer.data import Domain, Marginal
from synthinfer.napsu import network as network_module
from synthinfer.mcmc import convergence_diagnostics
from synthinfer.napsu.diagnostics import to_inference_data
from synthinfer.napsu.laplace import laplace_approximation
from synthinfer.napsu.likelihood import gradients, log_likelihood, log_posterior, objective, posterior_args, value_and_grad
from synthinfer.napsu.mle import maximum_likelihood_pgm
from synthinfer.napsu.network import network_for as _network
from synthinfer.napsu.nuts import compile_nuts, nuts_sample
from synthinfer.napsu.optimize import hessian, lbfgs_minimize

# these tests call lower-level JAX code directly, which runs in the caller's precision
pytestmark = pytest.mark.usefixtures("float64")

# The toy domain and marginal of test_napsu_mq: the cached network (and so its compiled
# programs) is shared between the test files when they run in one process.
DOMAIN = Domain({"x1": [0, 1], "x2": [0, 1], "y": [0, 1]})
MARGINALS = [("x1", "x2", "y")]


@pytest.fixture(scope="module")
def truth():
    """A known theta, n = 200,000 rows drawn exactly from MED_theta, and their exact counts."""
    net = _network(DOMAIN, [Marginal(m) for m in MARGINALS])
    rng = np.random.default_rng(0)
    theta = rng.normal(0.0, 0.7, net.dimension)
    n = 200_000
    codes = np.asarray(net.sample(jnp.asarray(theta), n, jax.random.key(1)))
    counts = net.queries.count(codes)
    return net, theta, n, counts


def test_laplace_recovers_known_theta(truth):
    net, theta, n, counts = truth
    sigma = 0.01  # tiny DP noise
    s_tilde = counts + np.random.default_rng(2).normal(0, sigma, counts.shape)
    lap = laplace_approximation(net, s_tilde, sigma, n, rng=np.random.default_rng(3))
    assert lap.converged
    sd = np.sqrt(np.diag(lap.cov))
    z = (lap.mean - theta) / sd
    # d independent-ish standard normal z-scores: |z| < 4 each fails with prob < 1e-3 overall.
    assert np.all(np.abs(z) < 4.0), z
    # With n = 2e5 the posterior is tight: sds of order 1/sqrt(n p) ~ 0.01.
    assert np.all(sd < 0.05)
    # The posterior mean reproduces the observed counts (moment matching at the mode).
    fitted = n * np.asarray(net.mean(jnp.asarray(lap.mean)))
    assert np.all(np.abs(fitted - counts) <= 5 * np.sqrt(counts) + 1)


@pytest.mark.slow
def test_nuts_agrees_with_laplace_when_gaussian(truth):
    net, theta, n, counts = truth
    sigma = 5.0
    s_tilde = counts + np.random.default_rng(4).normal(0, sigma, counts.shape)
    rng = np.random.default_rng(5)
    lap = laplace_approximation(net, s_tilde, sigma, n, rng=rng)
    res = nuts_sample(net, s_tilde, sigma, n, lap, n_chains=4, num_warmup=200, num_samples=1000, rng=rng)
    assert res.draws.shape == (4, 1000, net.dimension)
    assert res.n_grad_evals > res.n_grad_evals_warmup > 0
    post = to_inference_data(res.draws)
    diag = convergence_diagnostics(post, ["theta"], ess_per_chain=50)
    assert diag["ok"], diag["rhat_max"]
    flat = res.draws.reshape(-1, net.dimension)
    sd = np.sqrt(np.diag(lap.cov))
    # Monte Carlo error of the NUTS mean is sd / sqrt(ESS) with ESS >= 100: 0.35 sd is > 3.5 MC s.e.
    assert np.all(np.abs(flat.mean(0) - lap.mean) < 0.35 * sd)
    np.testing.assert_allclose(flat.std(0), sd, rtol=0.25)
    assert np.all(np.abs((lap.mean - theta) / sd) < 4.0)


def test_noise_aware_posterior_is_wider_than_naive(truth):
    net, _, n, counts = truth
    sigma = 200.0
    s_tilde = counts + np.random.default_rng(6).normal(0, sigma, counts.shape)
    wide = laplace_approximation(net, s_tilde, sigma, n, rng=np.random.default_rng(7))
    narrow = laplace_approximation(net, s_tilde, 0.005, n, rng=np.random.default_rng(7))
    assert np.all(np.diag(wide.cov) > 1.5 * np.diag(narrow.cov))


def test_likelihood_matches_scipy(truth):
    from scipy.stats import multivariate_normal

    net, theta, n, counts = truth
    mu, cov = (np.asarray(x) for x in net.mean_and_cov(jnp.asarray(theta)))
    s = counts + 3.0
    want = multivariate_normal(n * mu, n * cov + 4.0 * np.eye(len(mu))).logpdf(s)
    got = float(log_likelihood(jnp.asarray(theta), jnp.asarray(s), 2.0, float(n), net.mean_and_cov))
    assert got == pytest.approx(want, rel=1e-9)


def test_lbfgs_restarts_when_an_attempt_is_rejected():
    def loss(x, c):
        return jnp.sum((x - c) ** 2)

    calls = []

    def accept(x):
        calls.append(x)
        return len(calls) > 2  # reject the first two optima

    res = lbfgs_minimize(jax.jit(jax.value_and_grad(loss)), np.zeros(3), (jnp.ones(3),), rng=np.random.default_rng(0), accept=accept)
    assert res.converged and res.n_restarts == 2 and len(res.attempts) == 3
    np.testing.assert_allclose(res.x, 1.0, atol=1e-4)


def test_lbfgs_reports_failure_after_max_restarts():
    def loss(x):
        return jnp.sum(x**2)

    res = lbfgs_minimize(jax.jit(jax.value_and_grad(loss)), np.zeros(2), (), rng=np.random.default_rng(0), max_restarts=1, accept=lambda x: False)
    assert not res.converged and res.n_restarts == 1


def test_lbfgs_treats_a_non_finite_loss_as_a_failed_attempt():
    # The minimum (x = 2) lies beyond a region where the loss is infinite. SciPy's line search
    # alone would stop at the edge and report success; Supplement E calls it a failure.
    def loss(x):
        return jnp.where(x[0] > 1.5, jnp.inf, jnp.sum((x - 2.0) ** 2))

    res = lbfgs_minimize(jax.jit(jax.value_and_grad(loss)), np.zeros(2), (), rng=np.random.default_rng(0), max_restarts=2)
    assert not res.converged
    assert all(a["failed"] for a in res.attempts) and len(res.attempts) == 3


def test_lbfgs_ends_a_metric_that_cannot_take_a_step():
    # The gradient points uphill, so the line search fails before the first step of every
    # round. Re-preconditioning at the same point used to repeat that round forever (it hung
    # the PGM fit on AIM's models, whose Gauss-Newton metric is near-singular).
    def vg(x):
        return jnp.sum(x**2), -2.0 * x - 1.0

    calls = []

    def curvature(x):
        calls.append(1)
        assert len(calls) < 5, "the same round was re-preconditioned again and again"
        return np.eye(2)

    res = lbfgs_minimize(vg, np.zeros(2), (), curvature_fn=curvature, max_iter=50, max_restarts=0,
                         rng=np.random.default_rng(0))
    assert not res.converged and len(calls) == 1
    assert res.attempts[0]["rounds"] == [0, 0]  # the metric's round, then the plain run's


def test_finite_difference_hessian_matches_autodiff(truth):
    net, theta, n, counts = truth
    args = posterior_args(counts, 3.0, n, 10.0)
    loss, _ = objective(net, "neg_log_posterior")
    x = np.asarray(theta) + 0.1
    want = np.asarray(jax.hessian(loss)(jnp.asarray(x), *args))
    grads = gradients(net, "neg_log_posterior")
    scale = np.abs(want).max()
    np.testing.assert_allclose(hessian(grads, x, args, central=True), want, rtol=1e-6, atol=1e-6 * scale)
    # forward differences: O(h) = O(1e-6) truncation, relative to the Hessian's scale
    np.testing.assert_allclose(hessian(grads, x, args), want, rtol=1e-5, atol=1e-5 * scale)


def test_pgm_mle_recovers_theta_without_noise(truth):
    net, theta, n, counts = truth
    res = maximum_likelihood_pgm(net, counts, n, rng=np.random.default_rng(0))
    mu_hat = np.asarray(net.mean(jnp.asarray(res.x)))
    np.testing.assert_allclose(n * mu_hat, counts, atol=2.0)



def test_a_network_owns_its_programs_and_makes_each_once():
    net = _network(DOMAIN, [Marginal(("x1", "y"))])
    assert objective(net, "neg_log_posterior") is objective(net, "neg_log_posterior")
    assert value_and_grad(net, "neg_log_posterior") is value_and_grad(net, "neg_log_posterior")
    program = compile_nuts(net, num_warmup=10, num_samples=10)
    # one compilation per network and settings, started once however often it is asked for
    assert compile_nuts(net, num_warmup=10, num_samples=10) is program
    assert compile_nuts(net, num_warmup=10, num_samples=11) is not program
    program.result()
    sampler = net.compile_sample_many(3, 5)
    assert net.compile_sample_many(3, 5) is sampler
    assert np.asarray(sampler.result()(np.zeros((3, net.dimension)), jax.random.key(0))).shape == (3, 5, 3)
    other = _network(DOMAIN, [Marginal(("x2", "y"))])
    assert other.programs is not net.programs and len(other.programs) == 0


def test_evicted_networks_are_freed_and_others_keep_their_programs(monkeypatch):
    import gc
    import weakref

    monkeypatch.setattr(network_module, "MAX_CACHED_NETWORKS", 2)
    nets = [_network(DOMAIN, [Marginal((x, "y"))]) for x in ("x1", "x2")]
    for net in nets:
        compile_nuts(net, num_warmup=10, num_samples=10).result()
        net.compile_sample_many(3, 5).result()
        args = posterior_args(np.zeros(net.dimension), 1.0, 10, 10.0)
        value_and_grad(net, "neg_log_posterior")(jnp.zeros(net.dimension), *args)
    kept = value_and_grad(nets[1], "neg_log_posterior")
    gone = weakref.ref(nets[0])
    del nets, net
    _network(DOMAIN, [Marginal(("x1", "x2"))])  # evicts the first network only
    gc.collect()
    assert gone() is None  # nothing (no JAX cache) keeps the evicted network or its programs alive
    assert kept._cache_size() == 1  # the other network's compiled objective survives


def test_networks_are_dropped_when_memory_maps_run_short(monkeypatch):
    """Compiled code holds memory mappings; near the system's limit only the newest network is
    kept (and the others freed), whatever MAX_CACHED_NETWORKS allows."""
    import weakref

    maps = network_module._memory_maps()
    if maps is not None:  # Linux: this process's mappings and the limit
        assert 0 < maps[0] < maps[1]
    monkeypatch.setattr(network_module, "MAX_CACHED_NETWORKS", 8)
    monkeypatch.setattr(network_module, "_memory_maps", lambda: (100, 1000))
    first = _network(DOMAIN, [Marginal(("x1", "y"))])
    second = _network(DOMAIN, [Marginal(("x2", "y"))])
    assert {id(n) for n in network_module._NETWORKS.values()} >= {id(first), id(second)}
    gone = weakref.ref(first)
    del first
    monkeypatch.setattr(network_module, "_memory_maps", lambda: (600, 1000))  # past MAP_SHARE = 0.5
    third = _network(DOMAIN, [Marginal(("y",)), Marginal(("x1", "x2"))])  # a new network: no other test makes it
    assert list(network_module._NETWORKS.values()) == [third]
    assert gone() is None  # freed at once (collected), not at the next garbage collection
    assert second is not None


# -- the one-sided map (synthinfer.napsu.reparam) ----------------------------------------
# Two empty cells in the toy's 3-way table of 2000 rows (reference cell (0, 0, 0) = 600).
SPARSE = np.array([600.0, 400.0, 300.0, 0.0, 350.0, 200.0, 150.0, 0.0])


@pytest.fixture(scope="module")
def sparse():
    net = _network(DOMAIN, [Marginal(m) for m in MARGINALS], {})
    sigma = 10.0
    s_tilde = SPARSE[net.queries.kept] + np.random.default_rng(0).normal(0.0, sigma, net.dimension)
    n = int(SPARSE.sum())
    lap = laplace_approximation(net, s_tilde, sigma, n, rng=np.random.default_rng(1))
    return net, s_tilde, sigma, n, lap


def test_one_sided_map_is_an_exact_change_of_variables(sparse):
    from synthinfer.napsu.reparam import one_sided_map, to_theta

    net, s_tilde, sigma, n, lap = sparse
    mu = np.asarray(net.mean(jnp.asarray(lap.mean)))
    umap = one_sided_map(s_tilde, sigma, n, mu, lap.mean, lap.cov, prior_sd=10.0)
    assert umap.n_one_sided == 2 and np.array_equal(np.flatnonzero(umap.mask), [2, 6])  # the empty cells
    arrays = umap.arrays()
    fwd = jax.jit(lambda u: to_theta(u, arrays))
    rng = np.random.default_rng(3)
    logjac = []
    for scale in (0.5, 3.0, 30.0):  # reaching far into the flat side (phi = -30 * ...) too
        u = rng.normal(0.0, scale, net.dimension)
        theta, lj = fwd(jnp.asarray(u))
        np.testing.assert_allclose(umap.to_u(np.asarray(theta)), u, rtol=1e-8, atol=1e-8)
        jac = np.asarray(jax.jacfwd(lambda v: fwd(v)[0])(jnp.asarray(u)))
        logjac.append(float(lj) - np.linalg.slogdet(jac)[1])
    # the returned log-Jacobian is exact up to one constant (log |L_R|)
    np.testing.assert_allclose(logjac, logjac[0], atol=1e-8)
    # with the others at the Laplace mean, the flagged cells' expected counts are sigma_DP at T = 0
    theta0 = np.where(umap.mask, umap.offset, lap.mean)
    np.testing.assert_allclose(n * np.asarray(net.mean(jnp.asarray(theta0)))[umap.mask], sigma, rtol=0.05)


def test_one_sided_map_aligns_an_emptying_dropped_cell_with_one_axis():
    """The reference cell (0, 0, 0) has no parameter of its own; when it can empty, the map
    rotates the whitened coordinates so that its log count moves along a single axis (which
    the diagonal mass matrix can stretch), and stays an exact change of variables."""
    from synthinfer.napsu.reparam import one_sided_map, to_theta

    table = np.array([0.0, 400.0, 300.0, 500.0, 350.0, 200.0, 150.0, 100.0])
    net = _network(DOMAIN, [Marginal(m) for m in MARGINALS], {})
    sigma, n = 10.0, int(table.sum())
    s_tilde = table[net.queries.kept] + np.random.default_rng(0).normal(0.0, sigma, net.dimension)
    lap = laplace_approximation(net, s_tilde, sigma, n, rng=np.random.default_rng(1))
    mean = jnp.asarray(lap.mean)
    mu = np.asarray(net.mean(mean))
    jd = np.asarray(net.dropped_cell_log_prob_jacobian(mean))
    assert jd.shape == (1, net.dimension)  # the one dropped cell of a full 3-way table
    umap = one_sided_map(s_tilde, sigma, n, mu, lap.mean, lap.cov, prior_sd=10.0, dropped_jacobian=jd)
    plain = one_sided_map(s_tilde, sigma, n, mu, lap.mean, lap.cov, prior_sd=10.0)
    assert umap.n_one_sided == plain.n_one_sided == 0  # every kept cell is >= 10 sd from zero
    share = lambda m: np.max((jd @ m.linear) ** 2) / np.sum((jd @ m.linear) ** 2)  # noqa: E731
    assert share(umap) > 1 - 1e-10
    # a rotation of the Laplace whitening: same covariance, and an exact inverse
    np.testing.assert_allclose(umap.linear @ umap.linear.T, lap.cov, rtol=1e-8, atol=1e-12)
    u = np.random.default_rng(2).normal(0.0, 3.0, net.dimension)
    theta, _ = to_theta(jnp.asarray(u), umap.arrays())
    np.testing.assert_allclose(umap.to_u(np.asarray(theta)), u, rtol=1e-8, atol=1e-8)


@pytest.mark.slow
def test_one_sided_nuts_agrees_with_plain_nuts(sparse):
    """Same posterior quantiles with and without the map (two-sample z-scores from ArviZ's
    quantile MCSE; 21 correlated comparisons, |z| < 4 fails by chance with probability < 1e-3),
    and the map needs fewer gradients per draw."""
    import arviz as az

    net, s_tilde, sigma, n, lap = sparse
    runs = {}
    for name, threshold in (("map", 5.0), ("plain", -np.inf)):
        res = nuts_sample(net, s_tilde, sigma, n, lap, n_chains=4, num_warmup=400,
                              num_samples=3000, one_sided_threshold=threshold, rng=np.random.default_rng(2))
        runs[name] = (res, to_inference_data(res.draws))
    assert runs["map"][0].n_one_sided == 2 and runs["plain"][0].n_one_sided == 0
    for q in (0.05, 0.5, 0.95):
        est = [np.quantile(p.posterior["theta"].values.reshape(-1, net.dimension), q, axis=0) for _, p in runs.values()]
        se = [np.asarray(az.mcse(p, method="quantile", prob=q)["theta"]) for _, p in runs.values()]
        z = (est[0] - est[1]) / np.hypot(se[0], se[1])
        assert np.all(np.abs(z) < 4.0), (q, z)
    per_draw = {k: r.n_grad_evals / (4 * 3400) for k, (r, _) in runs.items()}
    # fewer gradients per draw with the map: 17 against 25 when written, 21 against 25 with
    # jax 0.10.2 / blackjax 1.7.1 (the trajectories, not the posterior, depend on the versions)
    assert per_draw["map"] < 0.95 * per_draw["plain"], per_draw


# -- plateau jumps (synthinfer.napsu.jumps) ----------------------------------------------
def _cell_map(s_tilde, sigma, n, count_at_mode, mean, sd):
    """One-sided maps of independent cells (diagonal Laplace covariance), all flagged."""
    from synthinfer.napsu.reparam import one_sided_map

    mean = np.asarray(mean, float)
    mu = np.asarray(count_at_mode, float) / n
    return one_sided_map(np.asarray(s_tilde, float), sigma, n, mu, mean, np.diag(np.asarray(sd, float) ** 2),
                         prior_sd=10.0, threshold=100.0), mu


def test_plateau_jumps_choose_cells_with_a_bulk_and_a_plateau():
    from synthinfer.napsu.jumps import plateau_jumps

    sigma, n = 25.0, 46_043
    # 3.4 sd above zero (a plateau behind ~6 nats), far below zero (all plateau), 12 sd above
    s = [86.0, -75.0, 300.0]
    umap, mu = _cell_map(s, sigma, n, [80.0, 1.0, 300.0], [-2.8, -8.0, -1.5], [0.33, 5.0, 0.1])
    assert umap.n_one_sided == 3
    jumps = plateau_jumps(umap, np.array(s), sigma, n, mu, prior_sd=10.0)
    assert jumps.count == 1 and jumps.index[0] == 0
    assert np.all(np.diff(jumps.edges[0]) > 0)


def test_jump_sweep_leaves_the_posterior_invariant():
    """Independence MH alone, with a deliberately poor proposal (built for another noisy count),
    on a cell's 1-D bulk-and-plateau profile: the chain's plateau share and quartiles match the
    exact ones computed on a grid (|z| < 4 with ArviZ's MCSE; a chance failure has
    probability < 1e-3)."""
    import arviz as az
    from synthinfer.napsu.jumps import _GRID, _profile, jump_sweep, plateau_jumps
    from synthinfer.napsu.reparam import _log_t_prime, _t

    sigma, n, count, mean, sd = 25.0, 46_043, 80.0, -2.8, 0.33
    umap, mu = _cell_map([86.0], sigma, n, [count], [mean], [sd])
    umap_60, mu_60 = _cell_map([60.0], sigma, n, [count], [mean], [sd])
    poor = plateau_jumps(umap_60, np.array([60.0]), sigma, n, mu_60, prior_sd=10.0)
    assert poor.count == 1
    args = (86.0, sigma, count, mean, float(umap.offset[0]), float(umap.kappa[0]), 10.0)

    def logdensity(u):  # _profile's density, in JAX
        theta = args[4] + _t(u[0], args[5])
        c = count * jnp.exp(theta - mean)
        var = sigma**2 + c
        return -0.5 * (86.0 - c) ** 2 / var - 0.5 * jnp.log(var) - 0.5 * (theta / 10.0) ** 2 + _log_t_prime(u[0], args[5])

    arrays = tuple(jnp.asarray(a) for a in poor.arrays())  # JAX arrays, as inside the compiled sampler

    def step(carry, key):
        u, lp = carry
        u, lp, _ = jump_sweep(key, u, lp, logdensity, *arrays)
        return (u, lp), u[0]

    u0 = jnp.asarray([float(umap.to_u(np.array([mean]))[0])])
    _, chain = jax.lax.scan(jax.jit(step), (u0, logdensity(u0)), jax.random.split(jax.random.key(0), 40_000))
    chain = np.asarray(chain)
    logp, c = _profile(_GRID, *args)
    p = np.exp(logp - logp.max())
    p /= p.sum()
    cdf = np.cumsum(p)
    plateau = c < sigma / 2
    assert 0.01 < p[plateau].sum() < 0.2  # the profile has a plateau worth testing
    # the grid is monotone in count, so "plateau" is phi below a threshold
    edge = _GRID[plateau][-1]
    post = az.convert_to_inference_data(chain[None])
    share = (chain <= edge).astype(float)
    ess = float(az.ess(share[None]))
    z = (share.mean() - p[plateau].sum()) / np.sqrt(p[plateau].sum() * (1 - p[plateau].sum()) / ess)
    assert abs(z) < 4.0, z
    for q in (0.25, 0.5, 0.75):
        exact = np.interp(q, cdf, _GRID)
        se = float(az.mcse(post, method="quantile", prob=q).to_array().values.squeeze())
        assert abs(np.quantile(chain, q) - exact) < 4.0 * se + 2 * (_GRID[1] - _GRID[0]), q


def _bimodal(x, xp=np):
    """A parameter's log density with a bulk and a second mode behind a ~5-nat drop: 0.8 N(4.7,
    0.25^2) + 0.2 N(0, 1) (the interaction of a cell that can empty, pulled to the prior's
    centre 0)."""
    return xp.logaddexp(np.log(0.8) - 0.5 * ((x - 4.7) / 0.25) ** 2 - np.log(0.25), np.log(0.2) - 0.5 * x**2)


def _long_tail(x, xp=np):
    """Unimodal with a long left tail and no second mode: 0.8 N(4.7, 0.25^2) + 0.2 N(4.7, 3^2)."""
    return xp.logaddexp(np.log(0.8) - 0.5 * ((x - 4.7) / 0.25) ** 2 - np.log(0.25),
                        np.log(0.2) - 0.5 * ((x - 4.7) / 3.0) ** 2 - np.log(3.0))


def test_axis_jumps_choose_second_modes_not_long_tails():
    """Independent parameters: a bimodal one, a long-tailed unimodal one, a Gaussian one. Only the
    bimodal one gets a jump, and its histogram spans both modes."""
    from synthinfer.napsu.jumps import axis_jumps

    loc = np.array([4.7, 4.7, 1.0])
    linear = np.diag([0.25, 0.25, 0.5])

    def log_density(points):
        return _bimodal(points[:, 0]) + _long_tail(points[:, 1]) - 0.5 * ((points[:, 2] - 1.0) / 0.5) ** 2

    jumps = axis_jumps(log_density, loc, linear, np.ones(3, bool), prior_scale=1.0)
    assert jumps.count == 1 and jumps.index[0] == 0
    assert jumps.edges[0, 0] < -1.5 and jumps.edges[0, -1] > 5.5 and np.all(np.diff(jumps.edges[0]) > 0)
    assert axis_jumps(log_density, loc, linear, np.array([False, True, True]), prior_scale=1.0).count == 0


def test_axis_jump_sweep_moves_one_parameter_and_leaves_its_conditional_invariant():
    """Jumps alone along theta_0's axis, NUTS's coordinates u correlated with theta through a
    non-diagonal whitening ``theta = loc + L u``: theta_1 never moves, and theta_0's draws have
    its exact conditional's mass in the second mode and its quartiles (|z| < 4 with ArviZ's
    MCSE; a chance failure has probability < 1e-3)."""
    import arviz as az
    from synthinfer.napsu.jumps import axis_jumps, jump_sweep

    loc = np.array([4.7, 2.0])
    linear = np.array([[0.3, 0.0], [0.4, 0.8]])
    y0 = 1.5  # theta_1 held where the chain starts (the profile the jumps use is at 2.0)

    def log_theta(theta, xp=np):  # theta_1 | theta_0 is N(0.3 theta_0 + 0.6, 0.8^2)
        return _bimodal(theta[..., 0], xp) - 0.5 * ((theta[..., 1] - 0.3 * theta[..., 0] - 0.6) / 0.8) ** 2

    jumps = axis_jumps(log_theta, loc, linear, np.array([True, False]), prior_scale=1.0)
    assert jumps.count == 1 and jumps.index[0] == 0
    arrays = tuple(jnp.asarray(a) for a in jumps.arrays())
    lin = jnp.asarray(linear)

    def logdensity(u):
        return log_theta(jnp.asarray(loc) + lin @ u, jnp)

    def step(carry, key):
        u, lp = carry
        u, lp, _ = jump_sweep(key, u, lp, logdensity, *arrays)
        return (u, lp), jnp.asarray(loc) + lin @ u

    u0 = jnp.asarray(np.linalg.solve(linear, np.array([4.7, y0]) - loc))
    _, chain = jax.lax.scan(jax.jit(step), (u0, logdensity(u0)), jax.random.split(jax.random.key(0), 40_000))
    chain = np.asarray(chain)
    assert np.max(np.abs(chain[:, 1] - y0)) < 1e-12
    grid = np.linspace(-8.0, 9.0, 20_001)
    p = np.exp(log_theta(np.stack([grid, np.full_like(grid, y0)], axis=1)))
    p /= p.sum()
    x = chain[:, 0]
    exact = float(p[grid < 2.5].sum())
    assert 0.05 < exact < 0.5  # a second mode worth testing
    share = (x < 2.5).astype(float)
    ess = float(az.ess(share[None]))
    assert abs(share.mean() - exact) < 4.0 * np.sqrt(exact * (1 - exact) / ess)
    post = az.convert_to_inference_data(x[None])
    for q in (0.25, 0.5, 0.75):
        se = float(az.mcse(post, method="quantile", prob=q).to_array().values.squeeze())
        assert abs(np.quantile(x, q) - np.interp(q, np.cumsum(p), grid)) < 4.0 * se + 2 * (grid[1] - grid[0]), q


def _ridge(theta, xp=np):
    """A posterior whose second region needs both parameters to move: 0.8 N((4.7, 0), diag(0.25,
    0.3)^2) + 0.2 N((0.5, 3), 0.6^2 I). Along theta_0's axis at the first mode the second holds
    ~e^-15 of the mass (its centre is 10 of theta_1's sd away): no axis jump; along the line
    through both it holds a fifth."""
    x, y = theta[..., 0], theta[..., 1]
    return xp.logaddexp(np.log(0.8) - 0.5 * (((x - 4.7) / 0.25) ** 2 + (y / 0.3) ** 2) - np.log(0.075),
                        np.log(0.2) - 0.5 * ((x - 0.5) ** 2 + (y - 3.0) ** 2) / 0.36 - np.log(0.36))


def _ridge_draws(size: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    second = rng.random(size) < 0.2
    return np.where(second[:, None], rng.normal([0.5, 3.0], 0.6, (size, 2)),
                    rng.normal([4.7, 0.0], [0.25, 0.3], (size, 2)))


def test_line_jumps_find_a_second_region_along_the_draws_regression_line():
    """No axis jump for the ridge's parameter (its second region is off the axis), but a line
    jump from draws that visited both regions: along ``(1, v_1)``, ``v_1`` the draws' regression
    slope of theta_1 on theta_0, with a histogram spanning both modes. A Gaussian posterior's
    draws, however correlated, give none."""
    from synthinfer.napsu.jumps import axis_jumps, line_jumps

    loc, linear = np.array([4.7, 0.0]), np.diag([0.25, 0.3])
    axis = axis_jumps(_ridge, loc, linear, np.ones(2, bool), prior_scale=1.0)
    assert axis.count == 0
    draws = _ridge_draws(4000, 0)
    jumps = line_jumps(_ridge, axis, draws, np.array([0]))
    # one parameter, tried LINE_TRIES times per iteration, as often as d = 2 leaves room for
    assert jumps.parameters == 1 and jumps.count == 2 and jumps.index.tolist() == [0, 0]
    slope = np.cov(draws.T)[0, 1] / draws[:, 0].var(ddof=1)
    np.testing.assert_allclose(linear @ jumps.directions[0], [1.0, slope], rtol=1e-9, atol=1e-12)
    assert jumps.edges[0, 0] < 0.0 and jumps.edges[0, -1] > 5.0 and np.all(np.diff(jumps.edges[0]) > 0)
    assert line_jumps(_ridge, jumps, draws, np.array([0])) is jumps  # one jump per parameter

    cov = np.array([[1.0, 0.9], [0.9, 1.0]])
    gaussian = np.random.default_rng(1).multivariate_normal([0.0, 0.0], cov, 4000)

    def log_gaussian(theta):
        return -0.5 * np.einsum("ki,ij,kj->k", theta, np.linalg.inv(cov), theta)

    none = axis_jumps(log_gaussian, np.zeros(2), np.linalg.cholesky(cov), np.zeros(2, bool), prior_scale=1.0)
    assert line_jumps(log_gaussian, none, gaussian, np.array([0, 1])).count == 0


def test_line_jump_sweep_leaves_the_posterior_invariant():
    """20,000 exact draws of the ridge, each moved by 25 sweeps of its line jump alone (two tries each; whitening
    ``theta = loc + L u`` non-diagonal): still the posterior. The second region's share stays 0.2
    (|z| < 4 of the binomial se; a chance failure < 1e-4) and theta_0's quartiles within 4 se of
    the exact; an update that left out the proposal's density ratio would sample ~ p q along the
    line and empty the second region."""
    from synthinfer.napsu.jumps import axis_jumps, jump_sweep, line_jumps

    loc, linear = np.array([4.7, 0.0]), np.array([[0.25, 0.0], [0.1, 0.3]])
    jumps = line_jumps(_ridge, axis_jumps(_ridge, loc, linear, np.zeros(2, bool), prior_scale=1.0),
                       _ridge_draws(4000, 0), np.array([0]))
    assert jumps.parameters == 1 and jumps.count == 2  # two tries a sweep: as many as d = 2 leaves room for
    arrays = tuple(jnp.asarray(a) for a in jumps.arrays())
    lin, at = jnp.asarray(linear), jnp.asarray(loc)

    def logdensity(u):
        return _ridge(at + lin @ u, jnp)

    def sweeps(u, key):
        def step(carry, k):
            u, lp, n = carry
            u, lp, accepted = jump_sweep(k, u, lp, logdensity, *arrays)
            return (u, lp, n + accepted), None

        (u, _, n), _ = jax.lax.scan(step, (u, logdensity(u), jnp.asarray(0, jnp.int32)), jax.random.split(key, 25))
        return u, n

    start = _ridge_draws(20_000, 1)
    u0 = jnp.asarray(np.linalg.solve(linear, (start - loc).T).T)
    u, accepted = jax.jit(jax.vmap(sweeps))(u0, jax.random.split(jax.random.key(0), len(start)))
    theta = np.asarray(at + u @ lin.T)
    assert int(accepted.sum()) > 0.2 * 25 * len(start)  # the jumps move
    moved = theta[:, 0] < 2.6
    assert 0.1 < np.mean(moved != (start[:, 0] < 2.6))  # across the regions, not only within them
    assert abs(moved.mean() - 0.2) < 4.0 * np.sqrt(0.16 / len(start))
    exact = np.sort(_ridge_draws(400_000, 2)[:, 0])
    for q in (0.25, 0.5, 0.75):
        se = np.sqrt(q * (1 - q) / len(start)) / 0.25  # the density at each quartile is 0.38 or more: 0.25 bounds it
        assert abs(np.quantile(theta[:, 0], q) - np.quantile(exact, q)) < 4.0 * se, q


def test_a_jump_from_outside_its_histogram_is_never_accepted():
    """The reverse of a jump that lands inside the histogram from outside it is impossible (its
    proposal density is 0 there), so such a jump must be rejected, however likely its target."""
    from synthinfer.napsu.jumps import BINS, PlateauJumps, jump_sweep

    d = 2
    jumps = PlateauJumps(np.array([0, 1]), 1, np.tile(np.linspace(-1.0, 1.0, BINS + 1), (d, 1)), np.zeros(d),
                         np.eye(d), np.eye(d))
    arrays = tuple(jnp.asarray(a) for a in jumps.arrays())

    def logdensity(u):  # far likelier inside the histogram than at the start, 5
        return -0.5 * jnp.sum(u**2)

    u = jnp.asarray([5.0, 0.3])

    def step(carry, key):
        u, lp, n = carry
        u, lp, accepted = jump_sweep(key, u, lp, logdensity, *arrays)
        return (u, lp, n + accepted), None

    (end, _, accepted), _ = jax.lax.scan(jax.jit(step), (u, logdensity(u), jnp.asarray(0, jnp.int32)),
                                         jax.random.split(jax.random.key(0), 200))
    assert int(accepted) == 0
    np.testing.assert_array_equal(np.asarray(end), np.asarray(u))


def test_nuts_with_axis_jumps_samples_the_same_posterior(monkeypatch):
    """NUTS under the interaction prior with a jump forced on one parameter (a histogram over its
    conditional's +-6 sd: the jumps are accepted often), a line jump forced on a second at the
    warmup's screen (along its regression line in the last slow window's positions, a histogram
    over +-4 of their sd) and, after a first check made to fail, one on a third (in the first
    pass's draws, which are then set aside), against plain NUTS on the same noisy counts: each
    parameter's mean agrees (|z| < 4 with ArviZ's MCSE of both; chance failure < 1e-3 over the
    7): the jumps as the compiled sampler interleaves them with NUTS, after its warmup adapted
    around them, and the jumps added during warmup and between passes leave the posterior as it was."""
    import arviz as az
    from synthinfer.napsu import jumps as jumps_module
    from synthinfer.napsu import nuts as nuts_module

    net = _network(DOMAIN, [Marginal(m) for m in MARGINALS])
    counts = np.array([120.0, 12.0, 90.0, 60.0, 80.0, 40.0, 70.0])
    sigma, n = 5.0, 500
    s_tilde = counts + np.random.default_rng(0).normal(0.0, sigma, counts.shape)
    prior = {"interaction_sd": 1.0}
    lap = laplace_approximation(net, s_tilde, sigma, n, rng=np.random.default_rng(1), **prior)
    sd = 1.0 / np.sqrt(np.diag(np.linalg.inv(lap.cov)))  # conditional sds

    def forced(log_density, loc, linear, candidates, *, prior_scale):
        made = jumps_module.axis_jumps(log_density, loc, linear, np.zeros_like(candidates), prior_scale=prior_scale)
        edges = made.edges.copy()
        edges[3] = np.linspace(loc[3] - 6 * sd[3], loc[3] + 6 * sd[3], jumps_module.BINS + 1)
        return jumps_module.PlateauJumps(np.r_[3, np.delete(np.arange(loc.size), 3)], 1, edges, made.start,
                                         made.rows, made.directions)

    screens = []

    def forced_line(log_density, jumps, draws, parameters):
        screens.append(len(draws))
        assert np.all(np.any(draws != 0.0, axis=1))  # positions, not the buffer's zeros
        assert len(parameters) == nuts_module.LINE_JUMP_CANDIDATES
        j = 5 if len(screens) == 1 else 6  # the warmup's screen, then the failed check's
        centred = draws - draws.mean(0)
        v = centred.T @ centred[:, j] / (centred[:, j] @ centred[:, j])
        edges, directions = jumps.edges.copy(), jumps.directions.copy()
        centre, spread = draws[:, j].mean(), 4 * draws[:, j].std()
        edges[j] = np.linspace(centre - spread, centre + spread, jumps_module.BINS + 1)
        directions[j] = np.linalg.solve(jumps.rows, v)
        index = np.r_[jumps.index[:jumps.count], j, np.setdiff1d(jumps.index[jumps.count:], [j])]
        return jumps_module.PlateauJumps(index, jumps.count + 1, edges, jumps.start, jumps.rows, directions)

    monkeypatch.setattr(nuts_module, "axis_jumps", forced)
    monkeypatch.setattr(nuts_module, "line_jumps", forced_line)
    checks = []

    def unconverged(draws):  # the first check fails, the second passes
        checks.append(draws.shape)
        return ["made to fail"] if len(checks) == 1 else []

    kw = dict(n_chains=4, num_warmup=300, num_samples=1500, one_sided_threshold=-np.inf, **prior)
    jumped = nuts_sample(net, s_tilde, sigma, n, lap, rng=np.random.default_rng(2), max_passes=3,
                         unconverged=unconverged, pass_draws=lambda draws: 1000, **kw)
    plain = nuts_sample(net, s_tilde, sigma, n, lap, rng=np.random.default_rng(3), jump_moves=False, **kw)
    # the warmup's screen saw the last slow window (iterations 150-249 of 300); the first pass's
    # draws, without the second line jump, set aside: a whole pass with it, not the sized 1000
    assert screens == [4 * 100, 4 * 1500]
    assert checks == [(4, 1500, 7), (4, 1500, 7)] and jumped.passes == 2 and jumped.set_aside == 1500
    assert jumped.draws.shape == (4, 1500, 7)
    assert jumped.n_jump_cells == 3 and jumped.n_jump_updates == 4 * (2 * 1500 + 3 * 1500)
    assert jumped.n_jumps_accepted > 1000 and plain.n_jump_cells == 0 and plain.n_jump_updates == 0
    se = [np.asarray(az.mcse(to_inference_data(r.draws), method="mean")["theta"]) for r in (jumped, plain)]
    z = (jumped.draws.mean((0, 1)) - plain.draws.mean((0, 1))) / np.hypot(*se)
    assert np.all(np.abs(z) < 4.0), z


def _importance_reference(net, s_tilde, sigma, n, lap, one_sided, size, rng):
    """Self-normalised importance sampling from the exact posterior: each one-sided theta_j from
    an equal mixture of N(m_j, (2 sd_j)^2) and Uniform(-50, m_j + 2) (bulk and plateau), the
    rest from a multivariate t_4 (2x the Laplace conditional scale) centred on the Laplace
    regression on the one-sided cells' *counts* (e^{theta_j - m_j} - 1, which saturates when a
    cell empties). Returns draws, normalised weights and PSIS k-hat."""
    import arviz as az
    from scipy.special import gammaln

    d, (m, cov) = net.dimension, (lap.mean, lap.cov)
    rest = [k for k in range(d) if k not in one_sided]
    reg = cov[np.ix_(rest, one_sided)] @ np.linalg.inv(cov[np.ix_(one_sided, one_sided)])
    chol = np.linalg.cholesky(4 * (cov[np.ix_(rest, rest)] - reg @ cov[np.ix_(one_sided, rest)]))
    theta, logq, counts = np.empty((size, d)), np.zeros(size), np.empty((size, len(one_sided)))
    for i, j in enumerate(one_sided):
        sd, lo, hi = 2 * np.sqrt(cov[j, j]), -50.0, m[j] + 2.0
        t = np.where(rng.random(size) < 0.5, m[j] + sd * rng.standard_normal(size), rng.uniform(lo, hi, size))
        logq += np.logaddexp(np.log(0.5) - 0.5 * ((t - m[j]) / sd) ** 2 - np.log(sd * np.sqrt(2 * np.pi)),
                             np.log(0.5) - np.log(hi - lo) + np.where((t > lo) & (t < hi), 0.0, -np.inf))
        theta[:, j], counts[:, i] = t, np.expm1(np.minimum(t - m[j], 3.0))
    nu, k = 4.0, len(rest)
    x = rng.standard_normal((size, k)) / np.sqrt(rng.chisquare(nu, size) / nu)[:, None]
    theta[:, rest] = m[rest] + counts @ reg.T + x @ chol.T
    logq += (gammaln((nu + k) / 2) - gammaln(nu / 2) - k / 2 * np.log(nu * np.pi) - np.log(np.diag(chol)).sum()
             - (nu + k) / 2 * np.log1p((x**2).sum(1) / nu))
    logp = jax.jit(jax.vmap(lambda th: log_posterior(th, jnp.asarray(s_tilde), sigma, n, net.mean_and_cov)))
    logw = np.asarray(logp(jnp.asarray(theta))) - logq
    _, khat = az.psislw(logw.copy())
    w = np.exp(logw - logw.max())
    return theta, w / w.sum(), float(khat)


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore:overflow encountered in exp:RuntimeWarning")  # ArviZ's PSIS on far-off weights
def test_nuts_with_plateau_jumps_matches_an_importance_sampling_reference():
    """A cell 3.6 noise sd above zero (36 of 2030 rows, sigma_DP = 10) has ~2% of its posterior
    on the empty-cell plateau behind a ~4-nat drop. NUTS with the one-sided map and plateau
    jumps puts the same mass there as an importance-sampling reference with PSIS k-hat < 0.5,
    and agrees on the 5/50/95% quantiles of every parameter (|z| < 4 with ArviZ's MCSE and the
    reference's own standard error; chance failure < 1e-3 over these ~25 comparisons). (Plain
    NUTS on this posterior, 4 x 20,000 draws, put 0.5% to 2.4% there depending on the chain.)"""
    import arviz as az

    table = np.array([600.0, 400.0, 300.0, 30.0, 350.0, 200.0, 150.0, 0.0])
    net = _network(DOMAIN, [Marginal(m) for m in MARGINALS], {})
    sigma, n = 10.0, int(table.sum())
    s_tilde = table[net.queries.kept] + np.random.default_rng(0).normal(0.0, sigma, net.dimension)
    lap = laplace_approximation(net, s_tilde, sigma, n, rng=np.random.default_rng(1))
    res = nuts_sample(net, s_tilde, sigma, n, lap, n_chains=4, num_warmup=400, num_samples=3000,
                          rng=np.random.default_rng(2))
    assert res.n_jump_cells == 1 and res.n_jumps_accepted > 1000
    theta, w, khat = _importance_reference(net, s_tilde, sigma, n, lap, [2, 6], 400_000, np.random.default_rng(3))
    assert khat < 0.5
    post = to_inference_data(res.draws)
    flat = res.draws.reshape(-1, net.dimension)
    for cut in (-5.0, -4.0):  # the plateau share of the 36-count cell (query 2)
        below = (res.draws[..., 2] < cut).astype(float)
        ref = float(w[theta[:, 2] < cut].sum())
        se_ref = float(np.sqrt(np.sum(w**2 * ((theta[:, 2] < cut) - ref) ** 2)))
        se = float(az.mcse(az.convert_to_inference_data(below), method="mean").to_array().squeeze())
        assert 0.005 < ref < 0.1 and abs(below.mean() - ref) < 4 * np.hypot(se, se_ref), (cut, below.mean(), ref)
    order = np.argsort(theta, axis=0)
    for q in (0.05, 0.5, 0.95):
        se = np.asarray(az.mcse(post, method="quantile", prob=q)["theta"])
        for j in range(net.dimension):
            cw = np.cumsum(w[order[:, j]])
            ref = theta[order[:, j], j][np.searchsorted(cw, [q, q - 0.005, q + 0.005])]
            # the reference's quantile error, from its CDF error sqrt(q (1 - q) sum w^2) and local slope
            se_ref = np.sqrt(q * (1 - q) * np.sum(w**2)) * (ref[2] - ref[1]) / 0.01
            assert abs(np.quantile(flat[:, j], q) - ref[0]) < 4 * np.hypot(se[j], se_ref), (q, j)


# -- the cell prior (synthinfer.napsu.likelihood.log_cell_prior) ------------------------------
@pytest.mark.parametrize("alpha", [0.5, 1.0, 2.0])
def test_cell_prior_of_one_binary_marginal_is_the_dirichlet(alpha):
    """For one marginal on K = 2 cells, theta is the logit of the non-reference cell and the cell
    prior exp(alpha sum_c log p_c) must be Dirichlet(alpha) = Beta(alpha, alpha) in p, times the
    Jacobian dp/dtheta = p (1 - p): its integral over theta is the Beta function B(alpha, alpha).
    A missing Jacobian (a prior of p^(alpha-1)) would integrate to B(alpha-1, alpha-1) or diverge."""
    from scipy.integrate import quad
    from scipy.special import beta

    from synthinfer.napsu.likelihood import log_cell_prior

    net = _network(Domain({"x": [0, 1]}), [Marginal(("x",))], {})
    assert net.dimension == 1
    f = jax.jit(lambda t: jnp.exp(log_cell_prior(net.log_query_marginals(jnp.reshape(t, (1,))), alpha)))
    total, err = quad(lambda t: float(f(t)), -np.inf, np.inf)
    assert total == pytest.approx(beta(alpha, alpha), rel=1e-7)


def test_objective_adds_the_cell_prior_over_every_cell_of_every_marginal(truth):
    """The objective with cell_prior = alpha is the paper's negative log posterior minus
    alpha * sum of the log cell probabilities of each marginal, the cells summed by brute force
    over the whole domain (reference cells included)."""
    net, theta, n, counts = truth
    x = np.asarray(theta) + 0.3
    vg = value_and_grad(net, "neg_log_posterior")
    plain = float(vg(jnp.asarray(x), *posterior_args(counts, 3.0, n, 10.0))[0])
    with_prior = float(vg(jnp.asarray(x), *posterior_args(counts, 3.0, n, 10.0, 1.5))[0])
    joint = np.asarray(net.query_marginals(jnp.asarray(x))[0]).ravel()  # one 3-way marginal: the joint
    logits = np.zeros(joint.size)
    logits[net.queries.query_cell] = x  # the kept cells' parameters; reference cells at 0
    log_joint = logits - np.log(np.exp(logits).sum())
    np.testing.assert_allclose(np.log(joint), log_joint, rtol=1e-10)
    assert with_prior == pytest.approx(plain - 1.5 * log_joint.sum(), rel=1e-10)


def test_objective_with_the_interaction_prior_by_brute_force(truth):
    """With interaction_sd = tau the objective is the likelihood's minus log N(lambda | 0, s^2)
    (s = prior_sd on main effects, tau on interactions; lambda computed here by Möbius inversion
    of the joint's log-probabilities, not by the library's matrix) minus alpha times the log
    probabilities of each column's categories (summed out of the brute-force joint)."""
    from scipy.stats import norm

    net, theta, n, counts = truth
    x = np.asarray(theta) + 0.3
    vg = value_and_grad(net, "neg_log_posterior")
    plain = float(vg(jnp.asarray(x), *posterior_args(counts, 3.0, n, 10.0))[0])
    loglik = -plain - float(norm.logpdf(x, 0.0, 10.0).sum())
    tau, alpha = 1.5, 0.7
    value = float(vg(jnp.asarray(x), *posterior_args(counts, 3.0, n, 10.0, alpha, tau))[0])
    joint = np.log(np.asarray(net.query_marginals(jnp.asarray(x))[0]))  # one 3-way marginal: the joint
    lam, sd = [], []
    for cell in zip(*np.unravel_index(net.queries.query_cell, joint.shape)):
        support = [a for a, v in enumerate(cell) if v != 0]
        total = 0.0
        for r in range(len(support) + 1):
            for sub in itertools.combinations(support, r):
                point = tuple(cell[a] if a in sub else 0 for a in range(joint.ndim))
                total += (-1) ** (len(support) - r) * (joint[point] - joint[0, 0, 0])
        lam.append(total)
        sd.append(10.0 if len(support) == 1 else tau)
    one_way = sum(np.log(np.exp(joint).sum(axis=tuple(b for b in range(3) if b != a))).sum() for a in range(3))
    expected = -(loglik + norm.logpdf(lam, 0.0, sd).sum() + alpha * one_way)
    assert value == pytest.approx(expected, rel=1e-10)


def test_plain_nuts_under_the_cell_prior_matches_an_importance_sampling_reference():
    """With the cell prior the posterior of a near-empty cell has no plateau (density ~e^theta
    below its bulk), so plain whitened NUTS (no map, no jumps) samples it: on the toy with a
    30-count and an empty cell at sigma_DP = 10, its 5/50/95% quantiles of every parameter agree
    with self-normalised importance sampling from a t_4 proposal at twice the Laplace scale
    (PSIS k-hat < 0.5, 200,000 draws) within 4 combined standard errors."""
    import arviz as az

    from synthinfer.napsu.likelihood import log_cell_prior

    table = np.array([600.0, 400.0, 300.0, 30.0, 350.0, 200.0, 150.0, 0.0])
    net = _network(DOMAIN, [Marginal(m) for m in MARGINALS], {})
    sigma, n = 10.0, int(table.sum())
    s_tilde = table[net.queries.kept] + np.random.default_rng(0).normal(0.0, sigma, net.dimension)
    lap = laplace_approximation(net, s_tilde, sigma, n, cell_prior=1.0, rng=np.random.default_rng(1))
    res = nuts_sample(net, s_tilde, sigma, n, lap, cell_prior=1.0, one_sided_threshold=-np.inf, jump_moves=False,
                      n_chains=4, num_warmup=400, num_samples=2000, rng=np.random.default_rng(2))
    assert res.n_one_sided == 0 and res.n_jump_cells == 0
    post = to_inference_data(res.draws)
    assert float(az.rhat(post)["theta"].max()) < 1.01
    # the reference: t_4 around the Laplace mean with twice its scale
    rng, size, nu, d = np.random.default_rng(3), 200_000, 4.0, net.dimension
    from scipy.stats import multivariate_t

    prop = multivariate_t(loc=lap.mean, shape=4.0 * lap.cov, df=nu)
    theta = prop.rvs(size, random_state=rng)
    logp = jax.jit(jax.vmap(lambda th: log_posterior(th, jnp.asarray(s_tilde), sigma, n, net.mean_and_cov)
                            + log_cell_prior(net.log_query_marginals(th), 1.0)))
    logw = np.asarray(logp(jnp.asarray(theta))) - prop.logpdf(theta)
    _, khat = az.psislw(logw.copy())
    assert khat < 0.5
    w = np.exp(logw - logw.max())
    w /= w.sum()
    flat = res.draws.reshape(-1, d)
    order = np.argsort(theta, axis=0)
    for q in (0.05, 0.5, 0.95):
        se = np.asarray(az.mcse(post, method="quantile", prob=q)["theta"])
        for j in range(d):
            cw = np.cumsum(w[order[:, j]])
            ref = theta[order[:, j], j][np.searchsorted(cw, [q, q - 0.005, q + 0.005])]
            se_ref = np.sqrt(q * (1 - q) * np.sum(w**2)) * (ref[2] - ref[1]) / 0.01
            assert abs(np.quantile(flat[:, j], q) - ref[0]) < 4 * np.hypot(se[j], se_ref), (q, j)
