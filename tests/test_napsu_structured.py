"""Eq. 6 in the interaction basis (synthinfer.napsu.structured) against brute force and the dense form."""

from __future__ import annotations

import numpy as np
import pytest
from models_oracle import all_cells, brute_force, design

from synthinfer._jax import jax, jnp, quick_compiler_options
from synthinfer.data import Domain
from synthinfer.datasets import ADULT_PAPER_MARGINALS, load_adult
from synthinfer.errors import ParameterError
from synthinfer.napsu import CanonicalQueries, MarkovNetwork
from synthinfer.napsu.likelihood import log_likelihood
from synthinfer.napsu.queries import most_frequent_reference
from synthinfer.napsu.structured import InteractionStructure, _local_row, structure, structured_log_likelihood

pytestmark = pytest.mark.usefixtures("float64")

DOM = Domain({
    "a": ["a0", "a1", "a2"], "b": ["b0", "b1"], "c": ["c0", "c1", "c2", "c3"],
    "d": ["d0", "d1", "d2"], "e": ["e0", "e1"], "f": ["f0", "f1", "f2"],
})  # 432 cells
SHAPES = {
    "chain": [("a", "b"), ("b", "c"), ("c", "d")],
    "star": [("c", "a"), ("c", "b"), ("c", "d"), ("e", "c")],
    "3-way+2-way": [("a", "b", "c"), ("c", "d")],
    "disconnected": [("a", "b"), ("c", "d"), ("e",)],  # and f in no marginal
    "cycle": [("a", "b"), ("b", "c"), ("c", "d"), ("d", "a")],  # triangulated: fill features
    "triangle": [("a", "b"), ("b", "c"), ("a", "c")],  # clique {a,b,c} without its 3-way term
}
REFERENCES = {
    "first": None,
    "mixed": {"a": 1, "b": 1, "c": 2, "d": 0, "e": 1, "f": 2},  # middle, last and first codes
}
TOL = 1e-8


@pytest.fixture(scope="module", params=[(s, r) for s in SHAPES for r in REFERENCES], ids=lambda p: f"{p[0]}-{p[1]}")
def model(request):
    shape, ref = request.param
    q = CanonicalQueries(DOM, SHAPES[shape], reference=REFERENCES[ref])
    net = MarkovNetwork(q)
    st = structure(net)
    cells = all_cells(DOM)
    # brute-force interaction features over every cell of the domain
    feats = np.array([[all(c[i] == v for i, v in zip(scope, vals)) for scope, vals in st.features] for c in cells], float)
    return shape, q, net, st, feats


def _compile(f):
    return jax.jit(jax.value_and_grad(f), compiler_options=quick_compiler_options())


@pytest.fixture(scope="module")
def programs(model):
    """Value-and-gradient programs of one model, compiled once (data are traced arguments)."""
    net = model[2]
    return {
        "structured": _compile(lambda t, s, var, n: structured_log_likelihood(t, s, var, n, net)),
        "dense": _compile(lambda t, s, var, n: log_likelihood(t, s, jnp.sqrt(var), n, net.mean_and_cov)),
        "dense diagonal": _compile(lambda t, s, var, n: _dense_diagonal(t, s, var, n, net)),
    }


def _thetas(q, seed, k=2):
    return np.random.default_rng(seed).normal(size=(k, q.dimension))


def test_structure_is_built_once_per_network(model):
    _, _, net, st, _ = model
    assert structure(net) is st
    assert isinstance(st, InteractionStructure)


def test_transform_maps_interaction_features_to_canonical_queries(model):
    _, q, net, st, feats = model
    t = st.transform
    assert t.shape == (q.dimension, st.dimension)
    assert set(np.unique(t)) <= {-1.0, 0.0, 1.0}
    np.testing.assert_array_equal(feats @ t.T, design(q))
    # T lives on the marginals' own features, where it is square with determinant +-1
    assert not t[:, ~st.marginal_features].any()
    assert st.marginal_features.sum() == q.dimension
    sign, logdet = np.linalg.slogdet(t[:, st.marginal_features])
    assert sign != 0 and abs(logdet) < 1e-12
    # each row touches only features whose scope lies in that query's marginal, and is the
    # column of the query's cell in the marginal's local matrix A_M
    ref = [q.reference[k] for k in DOM.names]
    for j, (mi, flat) in enumerate(zip(q.query_marginal, q.query_cell)):
        m = q.marginals[mi]
        cols = [DOM.index(c) for c in m.columns]
        assert all(set(st.features[k][0]) <= set(cols) for k in np.flatnonzero(t[j]))
        scope = tuple(sorted(cols))
        cell = np.unravel_index(int(flat), m.shape(DOM))
        flat_sorted = np.ravel_multi_index([int(cell[cols.index(i)]) for i in scope], [DOM.shape[i] for i in scope])
        column = np.zeros(st.dimension)
        for k, f in enumerate(st.features):
            if set(f[0]) <= set(scope):
                column[k] = _local_row(scope, f, DOM.shape, ref)[flat_sorted]
        np.testing.assert_array_equal(t[j], column)


def test_precision_is_the_inverse_feature_covariance(model):
    _, q, net, st, feats = model
    for theta in _thetas(q, 1):
        _, mu_s, _, p = brute_force(q, theta)
        mu_u = p @ feats
        cov_u = (feats * p[:, None]).T @ feats - np.outer(mu_u, mu_u)
        marg = [m.ravel() for m in net.clique_marginals(theta)]
        prec = np.asarray(st.precision(marg))
        expected = np.linalg.inv(cov_u)
        assert np.abs(prec - expected).max() <= TOL * np.abs(expected).max()
        np.testing.assert_allclose(np.asarray(st.mean(marg)), mu_u, rtol=0, atol=1e-12)
        np.testing.assert_allclose(st.transform @ np.asarray(st.mean(marg)), mu_s, rtol=0, atol=1e-12)
        logdet = float(st.log_det_precision(marg))
        assert abs(logdet - np.linalg.slogdet(expected)[1]) <= TOL * abs(logdet)


def test_every_matrix_has_the_clique_pattern(model):
    shape, q, net, st, _ = model
    pattern = st.pattern()
    if len(net.junction_tree.cliques) > 1:
        assert not pattern.all()  # the check below has zeros to look at
    theta = _thetas(q, 2, 1)[0]
    marg = [m.ravel() for m in net.clique_marginals(theta)]
    prec = np.asarray(st.precision(marg))
    d_inv = 1.0 / np.random.default_rng(3).uniform(1.0, 50.0, q.dimension)
    tdt = st.transform.T @ (d_inv[:, None] * st.transform)
    assert not prec[~pattern].any()
    assert not tdt[~pattern].any()
    # U's order is a perfect elimination order: the Cholesky factor has no fill-in
    chol = np.linalg.cholesky(prec + 1000.0 * tdt)
    assert not chol[~pattern].any()
    if shape == "cycle":  # the order matters: eliminating the roots' features first fills in
        rev = np.linalg.cholesky((prec + 1000.0 * tdt)[::-1, ::-1])
        assert np.abs(rev[~pattern[::-1, ::-1]]).max() > 1e-3


def test_marginal_features_alone_would_not_be_clique_sparse():
    """Why U holds the triangulation's fill features: on a cycle the precision of the marginals'
    own features (a Schur complement of P) couples features that share no clique."""
    q = CanonicalQueries(DOM, SHAPES["cycle"])
    net = MarkovNetwork(q)
    st = structure(net)
    u = st.marginal_features
    assert (~u).any()
    marg = [m.ravel() for m in net.clique_marginals(_thetas(q, 4, 1)[0])]
    prec = np.asarray(st.precision(marg))
    schur = prec[np.ix_(u, u)] - prec[np.ix_(u, ~u)] @ np.linalg.solve(prec[np.ix_(~u, ~u)], prec[np.ix_(~u, u)])
    assert np.abs(schur[~st.pattern()[np.ix_(u, u)]]).max() > 1e-2


def _dense_diagonal(theta, s_tilde, var, n, net):
    """Eq. 6 with per-query noise variances, densely: log N(s~ | n mu, n Sigma + diag(var))."""
    mu, sigma = net.mean_and_cov(theta)
    chol = jnp.linalg.cholesky(n * sigma + jnp.diag(var))
    y = jax.scipy.linalg.solve_triangular(chol, s_tilde - n * mu, lower=True)
    return -0.5 * jnp.dot(y, y) - jnp.sum(jnp.log(jnp.diag(chol))) - 0.5 * mu.size * np.log(2 * np.pi)


def _close(structured, dense, args):
    v1, g1 = structured(*args)
    v0, g0 = dense(*args)
    assert abs(float(v1 - v0)) <= TOL * abs(float(v0))
    assert float(jnp.max(jnp.abs(g1 - g0))) <= TOL * float(jnp.max(jnp.abs(g0)))


def test_equals_dense_likelihood_with_isotropic_noise(model, programs):
    _, q, _, _, _ = model
    rng = np.random.default_rng(5)
    for n, sigma in [(1000.0, 3.0), (20000.0, 40.0)]:
        for theta in _thetas(q, 6):
            _, mu, cov, _ = brute_force(q, theta)
            s = n * mu + rng.normal(size=q.dimension) * np.sqrt(n * np.diag(cov) + sigma**2)
            _close(programs["structured"], programs["dense"], (theta, s, np.float64(sigma**2), np.float64(n)))


def test_equals_dense_likelihood_with_per_query_noise(model, programs):
    _, q, _, _, _ = model
    rng = np.random.default_rng(7)
    n = 5000.0
    var = rng.uniform(0.5, 400.0, q.dimension)
    for theta in _thetas(q, 8):
        _, mu, cov, _ = brute_force(q, theta)
        s = n * mu + rng.normal(size=q.dimension) * np.sqrt(n * np.diag(cov) + var)
        _close(programs["structured"], programs["dense diagonal"], (theta, s, var, np.float64(n)))


def test_vmap_over_thetas():
    q = CanonicalQueries(DOM, SHAPES["3-way+2-way"])
    net = MarkovNetwork(q)
    thetas = _thetas(q, 9, 3)
    s = np.random.default_rng(10).uniform(0, 100, q.dimension)
    single = jax.jit(lambda t: structured_log_likelihood(t, s, 4.0, 500.0, net))
    batched = jax.jit(jax.vmap(single))(thetas)
    # a scalar D is sigma^2 for every query
    vector = jax.jit(lambda t: structured_log_likelihood(t, s, np.full(q.dimension, 4.0), 500.0, net))
    for t, b in zip(thetas, np.asarray(batched)):
        assert abs(float(single(t)) - b) <= 1e-12 * abs(b)
        assert abs(float(vector(t)) - b) <= 1e-12 * abs(b)


def test_adult_paper_model():
    data = load_adult(paper_subset=True)
    base = CanonicalQueries(data.domain, ADULT_PAPER_MARGINALS)
    ref = most_frequent_reference(base.queryset, base.queryset.count(data.data))
    q = CanonicalQueries(data.domain, ADULT_PAPER_MARGINALS, reference=ref)
    net = MarkovNetwork(q)
    n, sigma = float(len(data.data)), 10.0
    s = q.count(data.data) + np.random.default_rng(11).normal(size=q.dimension) * sigma
    _close(_compile(lambda t: structured_log_likelihood(t, s, sigma**2, n, net)),
           _compile(lambda t: log_likelihood(t, s, sigma, n, net.mean_and_cov)),
           (_thetas(q, 12, 1)[0],))


def test_bad_shapes_are_parameter_errors():
    q = CanonicalQueries(DOM, SHAPES["chain"])
    net = MarkovNetwork(q)
    theta, d = np.zeros(q.dimension), q.dimension
    with pytest.raises(ParameterError, match="s_tilde"):
        structured_log_likelihood(theta, np.ones(d + 1), 1.0, 10.0, net)
    with pytest.raises(ParameterError, match="D"):
        structured_log_likelihood(theta, np.ones(d), np.ones(d - 1), 10.0, net)
