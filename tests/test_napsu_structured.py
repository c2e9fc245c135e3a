"""Eq. 6 by message passing (synthinfer.napsu.structured) against brute force and the dense form."""

from __future__ import annotations

import math

import numpy as np
import pytest
from models_oracle import all_cells, brute_force

from synthinfer._jax import jax, jnp, quick_compiler_options
from synthinfer.data import Domain, Marginal
from synthinfer.datasets import ADULT_PAPER_MARGINALS, load_adult
from synthinfer.errors import ParameterError
from synthinfer.napsu import CanonicalQueries, MarkovNetwork
from synthinfer.napsu.likelihood import log_likelihood
from synthinfer.napsu.measurements import Measurement, combine_repeated
from synthinfer.napsu.reference import most_frequent_reference
from synthinfer.napsu.structured import (
    TreeLikelihoodPlan,
    canonical_layout,
    measurement_layout,
    plan,
    structured_log_likelihood,
)

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
    "cycle": [("a", "b"), ("b", "c"), ("c", "d"), ("d", "a")],  # triangulated: 3-column cliques
    "triangle": [("a", "b"), ("b", "c"), ("a", "c")],  # clique {a,b,c}, no marginal on all of it
    "unsorted+sub": [("b", "a"), ("a",), ("c", "b"), ("c",)],  # columns not in domain order; 1-ways
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
    return shape, q, MarkovNetwork(q)


def _compile(f):
    return jax.jit(jax.value_and_grad(f), compiler_options=quick_compiler_options())


def _thetas(q, seed, k=2):
    return np.random.default_rng(seed).normal(size=(k, q.dimension))


def _close(structured, dense, args):
    v1, g1 = structured(*args)
    v0, g0 = dense(*args)
    assert abs(float(v1 - v0)) <= TOL * abs(float(v0))
    assert float(jnp.max(jnp.abs(g1 - g0))) <= TOL * float(jnp.max(jnp.abs(g0)))


def test_plan_is_built_once_per_network_and_layout(model):
    _, q, net = model
    layout = canonical_layout(q)
    assert isinstance(plan(net, layout), TreeLikelihoodPlan)
    assert plan(net, layout) is plan(net, layout)
    assert plan(net, layout).size == q.dimension


def test_equals_dense_likelihood_on_the_canonical_queries(model):
    """The library's posterior: s~ of the canonical queries, sigma^2 I (the dense form, eq. 6)."""
    _, q, net = model
    tree = plan(net, canonical_layout(q))
    structured = _compile(lambda t, s, var, n: structured_log_likelihood(t, s, var, n, tree))
    dense = _compile(lambda t, s, var, n: log_likelihood(t, s, jnp.sqrt(var), n, net.mean_and_cov))
    rng = np.random.default_rng(5)
    for n, sigma in [(1000.0, 1.0), (1000.0, 3.0), (20000.0, 40.0)]:
        for theta in _thetas(q, 6):
            _, mu, cov, _ = brute_force(q, theta)
            s = n * mu + rng.normal(size=q.dimension) * np.sqrt(n * np.diag(cov) + sigma**2)
            _close(structured, dense, (theta, s, np.float64(sigma**2), np.float64(n)))


# ---- any measurements: brute force over the 432 cells ----------------------------------------
def _indicators(layout) -> np.ndarray:
    """Matrix (measured values x domain cells): which cells each measured value counts (a
    grouped entry's value: every cell of its group, times its weight where weighted)."""
    grid = all_cells(DOM)
    rows = []
    for entry in layout:
        cols, cells = entry[0], entry[1]
        groups = entry[2] if len(entry) >= 3 else range(len(cells))
        weights = entry[3] if len(entry) == 4 else [1.0] * len(cells)
        sub = np.ravel_multi_index(tuple(grid[:, c] for c in cols), [DOM.shape[c] for c in cols])
        value = [np.zeros(len(grid)) for _ in range(max(groups) + 1)]
        for cell, g, w in zip(cells, groups, weights):
            value[g] += w * (sub == cell)
        rows.extend(value)
    return np.array(rows, dtype=float)


def _brute_force_likelihood(q, layout):
    """log N(y | n E p, n (E diag(p) E^T - E p p^T E^T) + diag(D)) over the enumerated domain."""
    e = jnp.asarray(_indicators(layout))
    from models_oracle import design

    a = jnp.asarray(design(q))

    def loglik(theta, y, var, n):
        logits = a @ theta
        p = jnp.exp(logits - jax.scipy.special.logsumexp(logits))
        mu = e @ p
        cov = n * ((e * p[None, :]) @ e.T - jnp.outer(mu, mu)) + jnp.diag(var)
        chol = jnp.linalg.cholesky(cov)
        z = jax.scipy.linalg.solve_triangular(chol, y - n * mu, lower=True)
        return -0.5 * jnp.dot(z, z) - jnp.sum(jnp.log(jnp.diag(chol))) - 0.5 * mu.size * np.log(2 * np.pi)

    return loglik


def _measurements(q, rng):
    """Every model marginal in full at one noise level, one again on a cell subset at another
    level, and a 1-way sub-marginal of the first marginal (and, for a 3-way first marginal, a
    2-way one holding it): repeated, partial and nested."""
    out = []
    for m in q.marginals:
        size = m.size(DOM)
        out.append(Measurement(m, rng.uniform(0, 50, size), rng.uniform(1, 30)))
    first = q.marginals[0]
    cells = np.flatnonzero(rng.random(first.size(DOM)) < 0.6)
    out.append(Measurement(first, rng.uniform(0, 50, cells.size), 7.0, cells=cells))
    out.append(Measurement(Marginal((first.columns[-1],)), rng.uniform(0, 50, DOM[first.columns[-1]].size), 2.5))
    if len(first.columns) > 2:  # a 2-way sub-marginal holding that 1-way one: nested blocks of a measured clique
        sub = Marginal(first.columns[1:])
        out.append(Measurement(sub, rng.uniform(0, 50, sub.size(DOM)), 4.0))
    return out


def test_equals_brute_force_for_any_measurements(model):
    _, q, net = model
    rng = np.random.default_rng(7)
    meas = _measurements(q, rng)
    layout = measurement_layout(meas, DOM)
    tree = plan(net, layout)
    structured = _compile(lambda t, y, var, n: structured_log_likelihood(t, y, var, n, tree))
    dense = _compile(_brute_force_likelihood(q, layout))
    var = np.concatenate([np.full(m.cells.size, m.variance) for m in meas])
    n = 3000.0
    for theta in _thetas(q, 8):
        mu = _indicators(layout) @ brute_force(q, theta)[3]
        y = n * mu + rng.normal(size=mu.size) * np.sqrt(n * mu + var)
        _close(structured, dense, (theta, y, var, np.float64(n)))


def _grouped(layout, rng):
    """The layout with coarse versions of its measurements added: each marginal's cells (some
    left out) summed in random groups of one to four, and the first marginal's first column
    coarsened, as a derived group column would (its categories in two groups)."""
    out = list(layout)
    for cols, cells in layout:
        keep = [c for c in cells if rng.random() < 0.85] or list(cells[:1])
        groups = np.sort(rng.integers(0, max(1, len(keep) // 2), len(keep)))
        groups = np.unique(groups, return_inverse=True)[1]
        out.append((cols, tuple(keep), tuple(int(g) for g in groups)))
    cols = layout[0][0]
    shape = [DOM.shape[c] for c in cols]
    coarse = np.arange(shape[0]) % 2  # the first column's categories in two groups
    cells = np.arange(math.prod(shape))
    first = np.unravel_index(cells, shape)[0]
    rest = np.ravel_multi_index(np.unravel_index(cells, shape)[1:], shape[1:]) if len(shape) > 1 else 0 * cells
    out.append((cols, tuple(int(c) for c in cells), tuple(int(g) for g in coarse[first] * (cells.size // shape[0]) + rest)))
    return tuple(out)


def _weighted(layout, rng):
    """The layout with weighted grouped versions of its measurements added (moments: a value is
    ``sum_i w_i count(cell_i)`` over its group), weights in [-1, 2] (some 0)."""
    out = list(layout)
    for cols, cells, *_ in layout:
        groups = np.unique(rng.integers(0, max(1, len(cells) // 3), len(cells)), return_inverse=True)[1]
        weights = np.round(rng.uniform(-1.0, 2.0, len(cells)), 1)
        out.append((cols, tuple(cells), tuple(int(g) for g in groups), tuple(float(w) for w in weights)))
    return tuple(out)


def test_equals_brute_force_for_weighted_measurements(model):
    """Weighted sums of a scope's cells (e.g. sums of a number over each coarse cell's rows)."""
    _, q, net = model
    rng = np.random.default_rng(13)
    layout = _weighted(_grouped(canonical_layout(q), rng), rng)
    tree = plan(net, layout)
    structured = _compile(lambda t, y, var, n: structured_log_likelihood(t, y, var, n, tree))
    dense = _compile(_brute_force_likelihood(q, layout))
    var = rng.uniform(1.0, 30.0, tree.size)
    n = 3000.0
    ind = _indicators(layout)
    for theta in _thetas(q, 14):
        p = brute_force(q, theta)[3]
        mu = ind @ p
        sd = np.sqrt(n * ((ind**2) @ p) + var)
        _close(structured, dense, (theta, n * mu + rng.normal(size=mu.size) * sd, var, np.float64(n)))


def test_equals_brute_force_for_grouped_measurements(model):
    """Values that sum groups of a scope's cells (coarse tables on fine scopes) beside cell values."""
    _, q, net = model
    rng = np.random.default_rng(11)
    layout = _grouped(canonical_layout(q), rng)
    assert any(len(e) == 3 for e in layout)
    tree = plan(net, layout)
    assert tree.size == _indicators(layout).shape[0]
    structured = _compile(lambda t, y, var, n: structured_log_likelihood(t, y, var, n, tree))
    dense = _compile(_brute_force_likelihood(q, layout))
    var = rng.uniform(1.0, 30.0, tree.size)
    n = 3000.0
    for theta in _thetas(q, 12):
        mu = _indicators(layout) @ brute_force(q, theta)[3]
        y = n * mu + rng.normal(size=mu.size) * np.sqrt(n * mu + var)
        _close(structured, dense, (theta, y, var, np.float64(n)))


def test_grouped_layout_validation():
    q = CanonicalQueries(DOM, SHAPES["chain"])
    net = MarkovNetwork(q)
    with pytest.raises(ParameterError, match="every group"):
        plan(net, (((0, 1), (0, 1, 2), (0, 2, 2)),))  # group 1 unused
    with pytest.raises(ParameterError, match="finite weight"):
        plan(net, (((0, 1), (0, 1, 2), (0, 0, 1), (1.0, np.nan, 2.0)),))
    # singleton groups in order are plain cell values; one-cell groups measure a canonical cell directly
    from synthinfer.napsu.structured import canonical_information

    cells = canonical_layout(q)[0]
    plain = canonical_information(q, (cells,))
    assert np.array_equal(canonical_information(q, ((*cells, tuple(range(len(cells[1])))),)), plain)
    merged = canonical_information(q, ((*cells, (0,) * len(cells[1])),))
    assert merged.shape == (q.dimension, 1) and not merged.any()


#: a triangulated clique {a, b, c} without a measurement of its whole scope, and a child clique
#: {c, d} whose separator (c) nests in a block of it
ELIMINATION_SHAPES = {**{k: SHAPES[k] for k in ("cycle", "triangle")},
                      "triangle+tail": [("a", "c"), ("b", "c"), ("a", "b"), ("c", "d")]}


@pytest.mark.parametrize("shape, measured", [(s, m) for s in ELIMINATION_SHAPES for m in ("canonical", "measurements")]
                         + [("triangle+tail", "grouped"), ("triangle+tail", "weighted")])  # grouped blocks: one shape
def test_eliminating_any_block_first_changes_nothing(shape, measured, monkeypatch):
    """Projected cliques with one block eliminated first (Woodbury on its diagonal plus the
    low rank of its separator and nested parts, then the Schur complement of the others): the
    same value and gradient as the dense form / brute force, whichever block is eliminated
    (each choice in turn, nested measured sub-marginals and children's separators included)."""
    from synthinfer.napsu import structured

    q = CanonicalQueries(DOM, ELIMINATION_SHAPES[shape])
    rng = np.random.default_rng(11)
    meas = _measurements(q, rng)
    if measured == "canonical":
        layout = canonical_layout(q)
    else:
        layout = measurement_layout(meas, DOM)
        layout = _grouped(layout, rng) if measured in ("grouped", "weighted") else layout
        layout = _weighted(layout, rng) if measured == "weighted" else layout
    n_blocks = max(len(cq.blocks) for cq in plan(MarkovNetwork(q), layout).cliques if cq.gram_index is not None)
    nested_seen = False
    for pick in range(n_blocks):
        monkeypatch.setattr(structured, "_eliminated_block", lambda cands, pick=pick: pick if pick in cands else None)
        net = MarkovNetwork(q)  # a new network: a new plan
        if measured == "canonical":
            var = np.float64(9.0)
            reference = _compile(lambda t, s, v, n, net=net: log_likelihood(t, s, jnp.sqrt(v), n, net.mean_and_cov))
        else:
            var = np.concatenate([np.full(m.cells.size, m.variance) for m in meas])
            var = np.concatenate([var, np.full(_indicators(layout).shape[0] - var.size, 5.0)])
            reference = _compile(_brute_force_likelihood(q, layout))
        tree = plan(net, layout)
        eliminating = [cq for cq in tree.cliques if cq.active and cq.eliminated is not None]
        nested_seen |= any(pt.block == cq.eliminated and pt.proj is not None
                           for cq in eliminating for pt in [g[0] for g in cq.groups] + [k[1] for k in cq.children])
        structured_ll = _compile(lambda t, y, v, n, tree=tree: structured_log_likelihood(t, y, v, n, tree))
        n = 3000.0
        for theta in _thetas(q, 12, k=1):
            mu = _indicators(layout) @ brute_force(q, theta)[3]
            y = n * mu + rng.normal(size=mu.size) * np.sqrt(n * np.abs(mu) + var)  # weighted values may be < 0
            _close(structured_ll, reference, (theta, y, var, np.float64(n)))
    if shape == "triangle+tail":
        assert nested_seen, "no eliminated block held a nested part"


@pytest.mark.parametrize("shape, measured", [("cycle", "weighted"), ("triangle", "measurements"),
                                             ("triangle+tail", "grouped"), ("triangle+tail", "canonical")])
def test_factorised_gram_tables_change_nothing(shape, measured, monkeypatch):
    """Projected cliques whose Gram tables come from marginals on pairs of scopes (the form of
    large cliques, forced here on small ones): the same tables as the scatter-add to 1e-12, and
    the same value and gradient as brute force, with and without an eliminated block."""
    from synthinfer.napsu import structured

    q = CanonicalQueries(DOM, ELIMINATION_SHAPES[shape])
    rng = np.random.default_rng(5)
    meas = _measurements(q, rng)
    layout = canonical_layout(q) if measured == "canonical" else measurement_layout(meas, DOM)
    if measured in ("grouped", "weighted"):
        layout = _grouped(layout, rng)
    if measured == "weighted":
        layout = _weighted(layout, rng)
    scattered = TreeLikelihoodPlan(MarkovNetwork(q), layout, factorised_gram_min=2**62)
    assert all(cq.gram_factors is None for cq in scattered.cliques)
    for pick in (None, 0):
        monkeypatch.setattr(structured, "_eliminated_block", lambda cands, pick=pick: pick if pick in cands else None)
        net = MarkovNetwork(q)
        tree = TreeLikelihoodPlan(net, layout, factorised_gram_min=0)
        projected = [c for c, cq in enumerate(tree.cliques) if cq.active and cq.gram_index is not None]
        assert projected and all(tree.cliques[c].gram_factors is not None for c in projected)
        theta = _thetas(q, 4, k=1)[0]
        tables = [t.ravel() for t in net.clique_marginals(jnp.asarray(theta))]
        for c in projected:
            old, new = scattered.cliques[c], tree.cliques[c]
            for a, b in zip(structured._gram_tables(old, tables[c]), structured._gram_tables(new, tables[c])):
                assert float(jnp.max(jnp.abs(a - b))) <= 1e-12
        var = (np.float64(9.0) if measured == "canonical"
               else rng.uniform(1.0, 30.0, tree.size))
        if measured == "canonical":
            reference = _compile(lambda t, s, v, n, net=net: log_likelihood(t, s, jnp.sqrt(v), n, net.mean_and_cov))
        else:
            reference = _compile(_brute_force_likelihood(q, layout))
        structured_ll = _compile(lambda t, y, v, n, tree=tree: structured_log_likelihood(t, y, v, n, tree))
        n = 3000.0
        mu = _indicators(layout) @ brute_force(q, theta)[3]
        y = n * mu + rng.normal(size=mu.size) * np.sqrt(n * np.abs(mu) + var)
        _close(structured_ll, reference, (theta, y, var, np.float64(n)))


@pytest.mark.parametrize("shape, factorised", [("triangle", False), ("cycle", True), ("triangle+tail", False)])
def test_definite_cliques_by_cholesky_equal_the_lu_form_and_brute_force(shape, factorised, monkeypatch):
    """A projected clique each of whose blocks is measured on every cell has positive definite
    information ``W`` and is factorised by Cholesky (``M = W (W^-1 + A)``): the same value and
    gradient as brute force and as the pivoted-LU form of the same plan; a block measured on
    some cells only keeps the LU form (``W`` singular there)."""
    import dataclasses

    from synthinfer.napsu import structured

    monkeypatch.setattr(structured, "_eliminated_block", lambda cands: None)
    q = CanonicalQueries(DOM, ELIMINATION_SHAPES[shape])
    rng = np.random.default_rng(8)
    layout = measurement_layout([Measurement(m, rng.uniform(0, 50, m.size(DOM)), rng.uniform(1, 30))
                                 for m in q.marginals], DOM)
    net = MarkovNetwork(q)
    tree = TreeLikelihoodPlan(net, layout, factorised_gram_min=0 if factorised else 2**62)
    projected = [cq for cq in tree.cliques if cq.active and cq.gram_index is not None]
    assert any(cq.definite for cq in projected)  # (a block holding only a child's separator is not)
    lu_form = TreeLikelihoodPlan(net, layout, factorised_gram_min=0 if factorised else 2**62)
    lu_form.cliques = [dataclasses.replace(cq, definite=False) for cq in lu_form.cliques]
    reference = _compile(_brute_force_likelihood(q, layout))
    var = rng.uniform(1.0, 30.0, tree.size)
    n = 3000.0
    for theta in _thetas(q, 9, k=2):
        mu = _indicators(layout) @ brute_force(q, theta)[3]
        y = n * mu + rng.normal(size=mu.size) * np.sqrt(n * mu + var)
        args = (theta, y, var, np.float64(n))
        _close(_compile(lambda t, y, v, n: structured_log_likelihood(t, y, v, n, tree)), reference, args)
        _close(_compile(lambda t, y, v, n: structured_log_likelihood(t, y, v, n, lu_form)), reference, args)
    # one marginal measured on part of its cells: its block's W is singular, so no Cholesky
    first = q.marginals[0]
    cells = np.arange(first.size(DOM) - 1)
    partial = measurement_layout([Measurement(first, rng.uniform(0, 50, cells.size), 3.0, cells=cells)]
                                 + [Measurement(m, rng.uniform(0, 50, m.size(DOM)), 3.0) for m in q.marginals[1:]], DOM)
    some = TreeLikelihoodPlan(MarkovNetwork(q), partial, factorised_gram_min=0 if factorised else 2**62)
    assert not all(cq.definite for cq in some.cliques if cq.active and cq.gram_index is not None)


def _by_jax_lu(M, B):
    lu = jax.scipy.linalg.lu_factor(M)
    return jnp.sum(jnp.log(jnp.abs(jnp.diagonal(lu[0])))), jax.scipy.linalg.lu_solve(lu, B)


def _by_jax_cholesky(C, B):
    L = jnp.linalg.cholesky(C)
    return 2.0 * jnp.sum(jnp.log(jnp.diagonal(L))), jax.scipy.linalg.cho_solve((L, True), B)


@pytest.mark.parametrize("rule", ["lu", "cholesky"])
def test_logdet_and_solve_derivatives_equal_jax_rules(rule):
    """``_logdet_solve`` / ``_spd_logdet_solve``'s own derivative rule (``tr(M^-1 dM)``,
    ``M^-1 (dB - dM M^-1 B)``) against JAX differentiating the factorisation: gradient,
    forward-mode Jacobian and Hessian of a scalar function of both outputs, in every direction
    of ``M`` (for Cholesky also the non-symmetric ones, which it reads as their symmetric part).
    LU on a matrix that needs row pivots and has a negative determinant (the log of its
    absolute value); Cholesky on a symmetric positive definite one."""
    from synthinfer.napsu.structured import _logdet_solve, _spd_logdet_solve

    rng = np.random.default_rng(4)
    if rule == "lu":
        M = np.eye(5) + 0.3 * rng.normal(size=(5, 5))
        M[[0, 1]] = M[[1, 0]]
        M[0, 0] = 0.0  # pivots needed
        assert np.linalg.det(M) < 0
        ours, theirs = _logdet_solve, _by_jax_lu
    else:
        X = rng.normal(size=(5, 8))
        M = X @ X.T / 8 + 0.1 * np.eye(5)
        ours, theirs = _spd_logdet_solve, _by_jax_cholesky
    B, w = rng.normal(size=(5, 3)), rng.normal(size=(5, 3))
    x = np.concatenate([M.ravel(), B.ravel()])

    def scalar(logdet_solve):
        def f(x):
            logdet, X = logdet_solve(x[:25].reshape(5, 5), x[25:].reshape(5, 3))
            return 1.7 * logdet + jnp.sum(w * X) + 0.5 * jnp.sum(X ** 2)
        return f

    ld, X = ours(M, B)
    assert ld == pytest.approx(np.log(abs(np.linalg.det(M))), rel=1e-12)
    np.testing.assert_allclose(X, np.linalg.solve(M, B), rtol=1e-12, atol=1e-12)
    for derivative in (jax.grad, jax.jacfwd, jax.hessian):
        np.testing.assert_allclose(derivative(scalar(ours))(x), derivative(scalar(theirs))(x),
                                   rtol=1e-10, atol=1e-10)


def _full(cols):
    return tuple(DOM.index(c) for c in cols), tuple(range(int(np.prod([DOM[c].size for c in cols]))))


def _partial(cols, rng):
    cells = np.flatnonzero(rng.random(int(np.prod([DOM[c].size for c in cols]))) < 0.6)
    return tuple(DOM.index(c) for c in cols), tuple(int(c) for c in cells)


#: model marginals and measurements that put unusual information into an eliminated block
ELIMINATION_EDGE_CASES = {
    "overlapping nested parts": ([("a", "b"), ("b", "c"), ("a", "c")],
                                 lambda r: [_full("a"), _full("b"), _full("c"), _partial(("a", "b"), r), _full(("b", "c"))]),
    "repeated nested scope, reversed columns": ([("a", "b"), ("b", "c"), ("a", "c")],
                                                lambda r: [_full("b"), _partial("b", r), _full(("c", "b")), _full("a")]),
    "no other block, child clique": ([("a", "b"), ("b", "c")], lambda r: [_full("a"), _full(("b", "c"))]),
    "no other block, root": ([("a", "b"), ("c", "d")], lambda r: [_full("a"), _full(("c", "d"))]),
    "nested parts only": ([("a", "b", "c")], lambda r: [_full("a"), _full("b"), _full(("a", "c")), _full(("b", "c"))]),
    "children's separators nested": ([("a", "b"), ("b", "c"), ("a", "c"), ("a", "d"), ("b", "e")],
                                     lambda r: [_full(("a", "b")), _full(("b", "c")), _full(("a", "d")),
                                                _full(("b", "e")), _full("c")]),
}


@pytest.mark.parametrize("case", list(ELIMINATION_EDGE_CASES))
def test_eliminating_in_edge_cases(case, monkeypatch):
    """Every choice of eliminated block on layouts that put overlapping or repeated nested
    parts, children's separators or nothing else into a clique's blocks: brute force agrees."""
    from synthinfer.napsu import structured

    marginals, make = ELIMINATION_EDGE_CASES[case]
    rng = np.random.default_rng(3)
    q = CanonicalQueries(DOM, marginals)
    layout = tuple(make(rng))
    reference = _compile(_brute_force_likelihood(q, layout))
    n_blocks = max([len(cq.blocks) for cq in plan(MarkovNetwork(q), layout).cliques if cq.gram_index is not None] + [0])
    eliminations = 0
    for pick in range(n_blocks):
        monkeypatch.setattr(structured, "_eliminated_block", lambda cands, pick=pick: pick if pick in cands else None)
        tree = plan(MarkovNetwork(q), layout)
        eliminations += sum(cq.eliminated is not None for cq in tree.cliques if cq.active)
        f = _compile(lambda t, y, v, n, tree=tree: structured_log_likelihood(t, y, v, n, tree))
        var = rng.uniform(1, 30, sum(len(c) for _, c in layout))
        theta = _thetas(q, 5, k=1)[0]
        mu = _indicators(layout) @ brute_force(q, theta)[3]
        y = 3000.0 * mu + rng.normal(size=mu.size) * np.sqrt(3000.0 * mu + var)
        _close(f, reference, (theta, y, var, np.float64(3000.0)))
    assert eliminations > 0


def test_the_eliminated_block_is_the_largest_beyond_its_low_rank():
    from synthinfer.napsu.structured import MIN_ELIMINATED_BLOCK, _eliminated_block

    k = MIN_ELIMINATED_BLOCK
    assert _eliminated_block({0: (4 * k, k), 1: (3 * k, 0), 2: (2 * k, 0)}) == 0  # 3k beyond its low rank
    assert _eliminated_block({0: (4 * k, 3 * k), 1: (2 * k, 0)}) == 1  # low rank over half the block
    assert _eliminated_block({0: (k - 1, 0)}) is None  # too small to be worth it
    assert _eliminated_block({}) is None


def test_vmap_over_thetas():
    q = CanonicalQueries(DOM, SHAPES["3-way+2-way"])
    net = MarkovNetwork(q)
    tree = plan(net, canonical_layout(q))
    thetas = _thetas(q, 9, 3)
    s = np.random.default_rng(10).uniform(0, 100, q.dimension)
    single = jax.jit(lambda t: structured_log_likelihood(t, s, 4.0, 500.0, tree))
    batched = jax.jit(jax.vmap(single))(thetas)
    # a scalar D is sigma^2 for every value
    vector = jax.jit(lambda t: structured_log_likelihood(t, s, np.full(q.dimension, 4.0), 500.0, tree))
    for t, b in zip(thetas, np.asarray(batched)):
        assert abs(float(single(t)) - b) <= 1e-12 * abs(b)
        assert abs(float(vector(t)) - b) <= 1e-12 * abs(b)


def test_adult_paper_model():
    data = load_adult(paper_subset=True)
    base = CanonicalQueries(data.domain, ADULT_PAPER_MARGINALS)
    qs = base.queryset
    ref = most_frequent_reference(zip((m.columns for m in qs.marginals), qs.split(qs.count(data.data))), data.domain)
    q = CanonicalQueries(data.domain, ADULT_PAPER_MARGINALS, reference=ref)
    net = MarkovNetwork(q)
    tree = plan(net, canonical_layout(q))
    n, sigma = float(len(data.data)), 10.0
    s = q.count(data.data) + np.random.default_rng(11).normal(size=q.dimension) * sigma
    for scale in (1.0, 3.0):  # near the data and far from it
        _close(_compile(lambda t: structured_log_likelihood(t, s, sigma**2, n, tree)),
               _compile(lambda t: log_likelihood(t, s, sigma, n, net.mean_and_cov)),
               (scale * _thetas(q, 12, 1)[0],))


def test_bad_input_is_a_parameter_error():
    q = CanonicalQueries(DOM, SHAPES["chain"])
    net = MarkovNetwork(q)
    tree = plan(net, canonical_layout(q))
    theta, d = np.zeros(q.dimension), q.dimension
    with pytest.raises(ParameterError, match="y must have shape"):
        structured_log_likelihood(theta, np.ones(d + 1), 1.0, 10.0, tree)
    with pytest.raises(ParameterError, match="D"):
        structured_log_likelihood(theta, np.ones(d), np.ones(d - 1), 10.0, tree)
    # a measurement on columns that share no clique (a and d are not together in the chain)
    with pytest.raises(ParameterError, match="no clique"):
        plan(net, measurement_layout([Measurement(Marginal(("a", "d")), np.ones(9), 1.0)], DOM))


def test_measurement_validation():
    with pytest.raises(ParameterError, match="values for"):
        Measurement(Marginal(("a",)), np.ones(3), 1.0, cells=[0, 1])
    with pytest.raises(ParameterError, match="ascending"):
        Measurement(Marginal(("a",)), np.ones(2), 1.0, cells=[1, 0])
    with pytest.raises(ParameterError, match="variance"):
        Measurement(Marginal(("a",)), np.ones(3), 0.0)
    with pytest.raises(ParameterError, match="outside"):
        Measurement(Marginal(("a",)), np.ones(2), 1.0, cells=[1, 3]).check(DOM)


def test_combining_repeats_changes_the_likelihood_by_a_constant(model):
    """Repeats of the same values (a full marginal twice, a partial one, a grouped and a
    weighted one, each at its own noise) combined by inverse-variance weighting: the
    likelihood's gradient at every theta is unchanged and its value moves by one constant."""
    _, q, net = model
    rng = np.random.default_rng(11)
    first, last = q.marginals[0], q.marginals[-1]
    cells = np.flatnonzero(rng.random(first.size(DOM)) < 0.6)
    groups = np.unique(rng.integers(0, 3, cells.size), return_inverse=True)[1]
    weights = np.round(rng.uniform(-1.0, 2.0, cells.size), 1)
    base = [Measurement(first, rng.uniform(0, 50, first.size(DOM)), 6.0),
            Measurement(first, rng.uniform(0, 50, cells.size), 3.0, cells=cells),
            Measurement(first, rng.uniform(0, 50, groups.max() + 1), 2.0, cells=cells, groups=groups),
            Measurement(first, rng.uniform(0, 50, groups.max() + 1), 5.0, cells=cells, groups=groups, weights=weights),
            Measurement(last, rng.uniform(0, 50, last.size(DOM)), 0.01)]  # below the floor
    repeats = [Measurement(m.marginal, m.values + rng.normal(0, 3, m.values.size), v, cells=m.cells, groups=m.groups,
                           weights=m.weights) for m, v in zip(base, (9.0, 1.5, 4.0, 0.5, 0.02))]
    meas = base + repeats[::-1]
    floor = 1.0 / 12.0
    merged = combine_repeated(meas, floor)
    assert len(merged) == len(base)
    assert [m.marginal for m in merged] == [m.marginal for m in base]  # order of first occurrence
    b, r = base[0], repeats[0]
    assert np.allclose(merged[0].values, (b.values / 6.0 + r.values / 9.0) / (1 / 6.0 + 1 / 9.0), rtol=1e-14)
    assert merged[0].variance == pytest.approx(1.0 / (1 / 6.0 + 1 / 9.0), rel=1e-14)
    assert merged[-1].variance == pytest.approx(floor / 2, rel=1e-14)  # each floored, then combined

    def compiled(ms, floor):
        tree = plan(net, measurement_layout(ms, DOM))
        y = np.concatenate([m.values for m in ms])
        var = np.concatenate([np.full(m.values.size, max(m.variance, floor)) for m in ms])
        f = _compile(lambda t: structured_log_likelihood(t, y, var, np.float64(3000.0), tree))
        return f, tree

    # the two routes round differently around the floored counts (precision 12-24 per value,
    # against ~1e-3 for the others): 1e-6, where re-flooring the combined variance moves 1e-3
    MERGE_TOL = 1e-6
    (f_all, tree_all), (f_merged, tree_merged) = compiled(meas, floor), compiled(merged, 0.0)  # floored once
    assert tree_merged.flops <= tree_all.flops
    gaps, scale = [], 0.0
    for theta in _thetas(q, 12, k=3):
        (v0, g0), (v1, g1) = f_all(theta), f_merged(theta)
        gaps.append(float(v0 - v1))
        scale = max(scale, abs(float(v0)))
        assert float(jnp.max(jnp.abs(g1 - g0))) <= MERGE_TOL * float(jnp.max(jnp.abs(g0)))
    assert max(gaps) - min(gaps) <= MERGE_TOL * scale
    assert combine_repeated(base, floor)[1].variance == 3.0  # nothing to combine: only floored
    with pytest.raises(ParameterError, match="variance_floor"):
        combine_repeated(base, -1.0)
