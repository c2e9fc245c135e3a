"""Exact junction-tree inference for MED_theta against brute-force enumeration."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
from models_oracle import brute_force, design
from scipy.special import logsumexp
from scipy.stats import chi2

from synthinfer._jax import jax, jnp
from synthinfer.data import Domain
from synthinfer.datasets import ADULT_PAPER_MARGINALS, load_adult
from synthinfer.napsu import CanonicalQueries, JunctionTree, MarkovNetwork

# these tests call lower-level JAX code directly, which runs in the caller's precision
pytestmark = pytest.mark.usefixtures("float64")

DOM = Domain({
    "a": ["a0", "a1", "a2"], "b": ["b0", "b1"], "c": ["c0", "c1", "c2", "c3"],
    "d": ["d0", "d1", "d2"], "e": ["e0", "e1"], "f": ["f0", "f1", "f2", "f3", "f4"],
    "g": ["g0", "g1", "g2"], "h": ["h0", "h1"],
})  # 8640 cells
STRUCTURES = {
    # needs triangulation: a 4-cycle of 2-way marginals, plus a separate pair and free columns
    "cycle+disconnected": [("a", "b"), ("b", "c"), ("c", "d"), ("d", "a"), ("f", "g")],
    # a 3-way marginal overlapping 2-way ones, a 1-way marginal, an uncovered column (h)
    "3-way+star": [("a", "b", "c"), ("c", "d"), ("c", "e"), ("f", "c"), ("g",)],
}


@pytest.fixture(scope="module", params=sorted(STRUCTURES) + ["3-way+star, last reference"])
def network(request):
    if request.param.endswith("last reference"):
        last = {name: DOM[name].size - 1 for name in DOM.names}
        return MarkovNetwork(CanonicalQueries(DOM, STRUCTURES["3-way+star"], reference=last))
    return MarkovNetwork(CanonicalQueries(DOM, STRUCTURES[request.param]))


def _thetas(d, seed=0):
    rng = np.random.default_rng(seed)
    # ordinary, large (probabilities down to ~e^-60) and zero parameters
    return [rng.normal(size=d), 12.0 * rng.normal(size=d), np.zeros(d)]


def test_exact_against_brute_force(network):
    q = network.queries
    for theta in _thetas(q.dimension):
        lz, mu, sigma, p = brute_force(q, theta)
        t = jnp.asarray(theta)
        assert float(network.log_partition(t)) == pytest.approx(lz, rel=1e-12, abs=1e-10)
        np.testing.assert_allclose(network.mean(t), mu, atol=1e-10)
        m2, s2 = network.mean_and_cov(t)
        np.testing.assert_allclose(m2, mu, atol=1e-10)
        np.testing.assert_allclose(s2, sigma, atol=1e-10)
        np.testing.assert_allclose(jax.grad(network.log_partition)(t), mu, atol=1e-10)
        # full user marginals from the clique marginals
        joint = p.reshape(DOM.shape)
        for m, table in zip(q.queryset.marginals, network.query_marginals(t)):
            axes = [DOM.index(c) for c in m.columns]
            other = tuple(i for i in range(len(DOM)) if i not in axes)
            expect = np.transpose(joint.sum(axis=other), np.argsort(np.argsort(axes)))
            np.testing.assert_allclose(table, expect, atol=1e-10)
        # in log space (the cell prior's), relative to each cell however small (~e^-60 here)
        log_joint = (design(q) @ theta - lz).reshape(DOM.shape)
        for m, table in zip(q.queryset.marginals, network.log_query_marginals(t)):
            axes = [DOM.index(c) for c in m.columns]
            other = tuple(i for i in range(len(DOM)) if i not in axes)
            expect = np.transpose(logsumexp(log_joint, axis=other), np.argsort(np.argsort(axes)))
            np.testing.assert_allclose(table, expect, rtol=1e-10, atol=1e-9)
        for cl, table in zip(network.junction_tree.cliques, network.clique_marginals(t)):
            other = tuple(i for i in range(len(DOM)) if i not in cl)
            np.testing.assert_allclose(table, joint.sum(axis=other), atol=1e-10)
    assert float(network.log_partition(jnp.zeros(q.dimension))) == pytest.approx(math.log(DOM.size))


def test_log_marginals_stay_finite_where_probabilities_underflow(network):
    """Cells of probability ~e^-2000 (below float64's 1e-308): log_query_marginals still equals
    the brute-force log marginal, where log(query_marginals) would be -inf."""
    q = network.queries
    theta = 400.0 * np.random.default_rng(5).normal(size=q.dimension)
    log_joint = design(q) @ theta
    log_joint = (log_joint - logsumexp(log_joint)).reshape(DOM.shape)
    tables = network.log_query_marginals(jnp.asarray(theta))
    assert min(float(np.min(t)) for t in tables) < -1000  # the case this test is about
    for m, table in zip(q.queryset.marginals, tables):
        axes = [DOM.index(c) for c in m.columns]
        other = tuple(i for i in range(len(DOM)) if i not in axes)
        expect = np.transpose(logsumexp(log_joint, axis=other), np.argsort(np.argsort(axes)))
        np.testing.assert_allclose(table, expect, rtol=1e-9, atol=1e-9)


def test_derivatives_vmap_and_jit(network):
    """The functions vmap, jit and differentiate (reverse mode through mean_and_cov)."""
    q = network.queries
    rng = np.random.default_rng(3)
    thetas = jnp.asarray(rng.normal(size=(3, q.dimension)))
    lz = jax.vmap(network.log_partition)(thetas)
    np.testing.assert_allclose(lz, [brute_force(q, t)[0] for t in np.asarray(thetas)], rtol=1e-12)
    mus, sigmas = jax.jit(jax.vmap(network.mean_and_cov))(thetas)
    assert mus.shape == (3, q.dimension) and sigmas.shape == (3, q.dimension, q.dimension)
    np.testing.assert_allclose(sigmas[2], brute_force(q, np.asarray(thetas[2]))[2], atol=1e-10)
    # gradient of a scalar of (mu, Sigma), as a likelihood needs, against central differences
    w = jnp.asarray(rng.normal(size=(q.dimension, q.dimension)))

    def f(t):
        mu, s = network.mean_and_cov(t)
        return jnp.sum(s * w) + jnp.sum(mu * w[0]) + network.log_partition(t)

    # extreme parameters (an optimiser's wild step): still finite, marginals still sum to one
    wild = 300.0 * thetas[0]
    assert np.isfinite(float(network.log_partition(wild)))
    assert np.all(np.isfinite(np.asarray(jax.grad(f)(wild))))
    assert all(float(t.sum()) == pytest.approx(1.0) for t in network.clique_marginals(wild))

    g = jax.grad(f)(thetas[1])
    v = jnp.asarray(rng.normal(size=q.dimension))
    h = 1e-5
    fd = (f(thetas[1] + h * v) - f(thetas[1] - h * v)) / (2 * h)
    assert float(g @ v) == pytest.approx(float(fd), rel=1e-6, abs=1e-8)


def test_sparse_potentials_change_nothing(monkeypatch):
    """The sparse product of large networks' potentials (forced here on a small one): the same
    log partition, clique marginals and gradient as the dense product, to rounding."""
    from synthinfer.napsu import network as network_module

    q = CanonicalQueries(DOM, STRUCTURES["3-way+star"])
    dense = MarkovNetwork(q)
    assert dense._sparse_incidence is None
    monkeypatch.setattr(network_module, "SPARSE_POTENTIALS_MIN_ENTRIES", 0)
    monkeypatch.setattr(network_module, "SPARSE_POTENTIALS_MAX_DENSITY", 1.0)
    sparse = MarkovNetwork(q)
    assert sparse._sparse_incidence is not None
    theta = jnp.asarray(np.random.default_rng(9).normal(size=q.dimension))
    for net in (dense, sparse):
        np.testing.assert_allclose(net.log_partition(theta), brute_force(q, np.asarray(theta))[0], rtol=1e-12)

    def f(net, t):
        return net.log_partition(t) + sum(jnp.sum(m**2) for m in net.clique_marginals(t))

    for a, b in zip(dense.clique_marginals(theta), sparse.clique_marginals(theta)):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-15)
    with jax.enable_x64(False), warnings.catch_warnings():  # JAX's default 32-bit mode: the indices still fit
        warnings.filterwarnings("ignore", message="Explicitly requested dtype float64", category=UserWarning)
        assert np.isfinite(float(sparse.log_partition(np.zeros(q.dimension, np.float32))))
    np.testing.assert_allclose(jax.grad(lambda t: f(sparse, t))(theta), jax.grad(lambda t: f(dense, t))(theta),
                               rtol=1e-10, atol=1e-13)


def test_sampling_frequencies_chi_square(network):
    """Exact forward sampling: the joint histogram passes a chi-square goodness-of-fit test."""
    q = network.queries
    theta = np.random.default_rng(5).normal(size=q.dimension)
    p = brute_force(q, theta)[3]
    n = 200_000
    x = np.asarray(network.sample(jnp.asarray(theta), n, jax.random.key(11)))
    assert x.shape == (n, len(DOM)) and x.min() >= 0 and np.all(x.max(axis=0) < np.array(DOM.shape))
    counts = np.bincount(np.ravel_multi_index(tuple(x.T), DOM.shape), minlength=DOM.size)
    # pool cells with small expected counts so the chi-square approximation holds
    expected = n * p
    order = np.argsort(expected)
    small = order[np.cumsum(expected[order]) < 50]
    big = np.setdiff1d(np.arange(DOM.size), small)
    obs = np.append(counts[big], counts[small].sum())
    exp = np.append(expected[big], expected[small].sum())
    stat = ((obs - exp) ** 2 / exp).sum()
    assert chi2.sf(stat, len(obs) - 1) > 1e-3


def test_sample_many_uses_each_theta():
    """sample_many draws dataset i from theta_i: per-dataset marginals match their own mu."""
    q = CanonicalQueries(DOM, STRUCTURES["3-way+star"])
    mn = MarkovNetwork(q)
    rng = np.random.default_rng(9)
    thetas = rng.normal(size=(4, q.dimension)) * 2.0
    n = 20_000
    xs = np.asarray(mn.sample_many(jnp.asarray(thetas), n, jax.random.key(2)))
    assert xs.shape == (4, n, len(DOM))
    for x, theta in zip(xs, thetas):
        mu = brute_force(q, theta)[1]
        freq = q.count(x) / n
        # binomial standard errors; 5 sigma over ~60 queries and 4 datasets
        se = np.sqrt(mu * (1 - mu) / n)
        assert np.all(np.abs(freq - mu) <= 5 * se + 1e-12)
    assert not np.array_equal(xs[0], xs[1])
    again = np.asarray(MarkovNetwork(q).sample_many(jnp.asarray(thetas), n, jax.random.key(2)))
    np.testing.assert_array_equal(again, xs)  # same key, same data (reproducible seeds)


def test_junction_tree_triangulates_cycle():
    jt = JunctionTree.build(DOM, STRUCTURES["cycle+disconnected"])
    assert jt.width == 2  # the 4-cycle a-b-c-d needs a chord: two 3-cliques
    assert sorted(map(len, jt.cliques)) == [1, 1, 2, 3, 3]  # e, h free; (f, g); chorded cycle
    assert sum(p < 0 for p in jt.parent) == 4  # four components, each rooted once
    for c, p in enumerate(jt.parent):
        assert p < c  # parents before children
        if p >= 0:
            assert set(jt.separators[c]) == set(jt.cliques[c]) & set(jt.cliques[p])


def test_adult_cost_follows_tree_width():
    """Adult: 1.8 million domain cells, but 8 cliques of at most 20 cells."""
    ds = load_adult(paper_subset=True)
    mn = MarkovNetwork(CanonicalQueries(ds.domain, ADULT_PAPER_MARGINALS))
    assert ds.domain.size == 1_792_000
    assert mn.junction_tree.width == 2 and mn.junction_tree.table_cells < 200
    zero = jnp.zeros(mn.dimension)
    assert float(mn.log_partition(zero)) == pytest.approx(math.log(ds.domain.size), rel=1e-14)
    q = mn.queries
    cell_sizes = np.array([q.marginals[i].size(ds.domain) for i in q.query_marginal])
    np.testing.assert_allclose(mn.mean(zero), 1.0 / cell_sizes, rtol=1e-12)
    x = mn.sample_many(jnp.zeros((2, mn.dimension)), 1000, jax.random.key(0))
    assert x.shape == (2, 1000, 10)


def test_sampling_long_rows_binary_search_path():
    """Clique rows longer than the unrolled limit are sampled by binary search, also exactly."""
    dom = Domain({"x": list(range(40)), "y": ["y0", "y1"]})
    q = CanonicalQueries(dom, [("x", "y")])
    mn = MarkovNetwork(q)
    theta = np.random.default_rng(4).normal(size=q.dimension)
    p = brute_force(q, theta)[3]
    n = 100_000
    x = np.asarray(mn.sample(jnp.asarray(theta), n, jax.random.key(5)))
    counts = np.bincount(np.ravel_multi_index(tuple(x.T), dom.shape), minlength=dom.size)
    stat = ((counts - n * p) ** 2 / (n * p)).sum()  # every expected count is > 50 here
    assert (n * p).min() > 50
    assert chi2.sf(stat, dom.size - 1) > 1e-3


def test_bad_arguments_raise():
    mn = MarkovNetwork(CanonicalQueries(DOM, [("a", "b")]))
    with pytest.raises(ValueError, match=r"theta must have shape \(5,\)"):
        mn.log_partition(jnp.zeros(4))
    with pytest.raises(ValueError, match="positive int"):
        mn.sample(jnp.zeros(5), 0, jax.random.key(0))
    with pytest.raises(ValueError, match="thetas must have shape"):
        mn.sample_many(jnp.zeros(5), 3, jax.random.key(0))
