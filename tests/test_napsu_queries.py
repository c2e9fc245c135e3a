"""Canonical (identifiable) queries, NAPSU-MQ Supplement C."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from models_oracle import design
from scipy.optimize import minimize

from synthinfer._jax import jax, jnp
from synthinfer.data import Domain, Marginal
from synthinfer.datasets import ADULT_PAPER_MARGINALS, load_adult
from synthinfer.errors import DomainError, UnknownColumnError
from synthinfer.napsu import CanonicalQueries, MarkovNetwork

# these tests call lower-level JAX code directly, which runs in the caller's precision
pytestmark = pytest.mark.usefixtures("float64")


DOM = Domain({"a": ["a0", "a1", "a2"], "b": ["b0", "b1"], "c": ["c0", "c1", "c2", "c3"],
              "d": ["d0", "d1", "d2"], "e": ["e0", "e1"]})
CASES = {
    "chain": [("a", "b"), ("b", "c"), ("c", "d")],
    "4-cycle": [("a", "b"), ("b", "c"), ("c", "d"), ("d", "a")],
    "3-way+overlap": [("a", "b", "c"), ("c", "d"), ("b", "d"), ("e",)],
    "nested": [("c", "a"), ("a",), ("a", "b", "c")],
}


def canonical_dimension(domain: Domain, marginals) -> int:
    """sum over the non-empty subsets D of the marginals' scopes of prod_{i in D} (k_i - 1)."""
    scopes = {frozenset(s) for m in marginals for r in range(1, len(m) + 1)
              for s in itertools.combinations(m, r)}
    return sum(math.prod(domain[c].size - 1 for c in s) for s in scopes)


LAST = {name: DOM[name].size - 1 for name in DOM.names}  # every column's last category


@pytest.mark.parametrize("reference", [None, LAST, {"c": 2}], ids=["first", "last", "c2"])
@pytest.mark.parametrize("name", sorted(CASES))
def test_dimension_and_basis(name, reference):
    """Kept queries + constant are linearly independent and span every original query,
    whatever the reference categories."""
    q = CanonicalQueries(DOM, CASES[name], reference=reference)
    assert q.dimension == canonical_dimension(DOM, CASES[name])
    ones = np.ones((DOM.size, 1))
    kept = np.hstack([ones, design(q)])
    full = np.hstack([ones, design(q, full=True)])
    assert np.linalg.matrix_rank(kept) == q.dimension + 1  # independent
    assert np.linalg.matrix_rank(full) == q.dimension + 1  # same span as all queries
    assert np.all(np.diff(q.kept) > 0) and q.kept.max() < q.queryset.dimension


@st.composite
def structures(draw):
    sizes = draw(st.lists(st.integers(1, 3), min_size=2, max_size=4))
    dom = Domain({f"v{i}": [f"c{j}" for j in range(k)] for i, k in enumerate(sizes)})
    names = list(dom.names)
    scopes = draw(st.lists(st.lists(st.sampled_from(names), min_size=1, max_size=3, unique=True),
                           min_size=1, max_size=4, unique_by=lambda s: frozenset(s)))
    reference = {name: draw(st.integers(0, k - 1)) for name, k in zip(names, sizes)}
    return dom, [tuple(s) for s in scopes], reference


@settings(max_examples=40, deadline=None)
@given(structures())
def test_canonical_basis_property(structure):
    """Any marginal set: kept cells + constant form a basis of the span of all cell queries."""
    dom, marginals, reference = structure
    q = CanonicalQueries(dom, marginals, reference=reference)
    assert q.dimension == canonical_dimension(dom, marginals)
    ones = np.ones((dom.size, 1))
    assert np.linalg.matrix_rank(np.hstack([ones, design(q)])) == q.dimension + 1
    assert np.linalg.matrix_rank(np.hstack([ones, design(q, full=True)])) == q.dimension + 1


def test_adult_dimension_and_sensitivity():
    ds = load_adult(paper_subset=True)
    q = CanonicalQueries(ds.domain, ADULT_PAPER_MARGINALS)
    assert q.dimension == 130 == canonical_dimension(ds.domain, ADULT_PAPER_MARGINALS)
    assert q.l2_sensitivity == pytest.approx(math.sqrt(20))
    counts = q.count(ds.data)
    assert counts.shape == (130,)
    np.testing.assert_array_equal(counts, q.queryset.count(ds.data)[q.kept])


def test_kept_queries_are_original_cells_and_describe():
    """Each kept query is a cell of a user marginal; describe() names it by categories."""
    q = CanonicalQueries(DOM, [("b", "a"), ("a", "c")])
    off = q.queryset.offsets()
    np.testing.assert_array_equal(q.kept, off[q.query_marginal] + q.query_cell)
    desc = q.describe()
    assert len(desc) == q.dimension
    # (b, a): all cells but the reference (b0, a0); (a, c): only c != c0, since the
    # scope {a} alone is hosted by (b, a)
    assert desc[0] == (Marginal(("b", "a")), ("b0", "a1"))
    assert all(cats[1] != "c0" for m, cats in desc if m.columns == ("a", "c"))
    rows = pd.DataFrame({"a": ["a1", "a2", "a1"], "b": ["b1", "b0", "b1"], "c": ["c3", "c0", "c1"],
                         "d": ["d0"] * 3, "e": ["e0"] * 3})
    np.testing.assert_array_equal(q.count(rows), q.queryset.count(rows)[q.kept])


def test_reference_moves_the_dropped_cells():
    """With reference (b1, a2) the dropped cell of (b, a) is (b1, a2), and the kept cells of
    (a, c) are those with c off its reference."""
    q = CanonicalQueries(DOM, [("b", "a"), ("a", "c")], reference={"b": 1, "a": 2, "c": 3})
    desc = q.describe()
    assert q.reference == {"a": 2, "b": 1, "c": 3, "d": 0, "e": 0}
    assert (Marginal(("b", "a")), ("b1", "a2")) not in desc
    assert sum(m.columns == ("b", "a") for m, _ in desc) == 5
    assert all(cats[1] != "c3" for m, cats in desc if m.columns == ("a", "c"))


def test_bad_reference_raises():
    with pytest.raises(DomainError, match="zzz"):
        CanonicalQueries(DOM, [("a", "b")], reference={"zzz": 0})
    with pytest.raises(DomainError, match=r"reference\['b'\]"):
        CanonicalQueries(DOM, [("a", "b")], reference={"b": 2})


def test_bad_marginals_raise():
    with pytest.raises(UnknownColumnError, match="zzz"):
        CanonicalQueries(DOM, [("a", "zzz")])
    with pytest.raises(DomainError):
        CanonicalQueries(DOM, [("a", "b"), ("b", "a")])


def test_jacobian_of_mean_has_full_column_rank():
    """d mu / d theta (= Sigma) is nonsingular at random theta: the parametrisation is identifiable;
    with every query kept the Jacobian loses exactly the dependent directions."""
    marg = CASES["3-way+overlap"]
    q, qfull = CanonicalQueries(DOM, marg), CanonicalQueries(DOM, marg, prune=False)
    rng = np.random.default_rng(1)
    for qq, rank in [(q, q.dimension), (qfull, q.dimension)]:
        mn = MarkovNetwork(qq)
        for _ in range(3):
            theta = jnp.asarray(rng.normal(size=qq.dimension))
            jac = np.asarray(jax.jacfwd(mn.mean)(theta))
            assert np.linalg.matrix_rank(jac, tol=1e-10) == rank
    assert qfull.dimension > q.dimension


def _fit_maxent(mn: MarkovNetwork, target: np.ndarray) -> np.ndarray:
    """Max-likelihood of exact marginal means: minimise theta_0(theta) - theta . u (convex)."""
    fg = jax.jit(jax.value_and_grad(lambda t: mn.log_partition(t) - t @ target))
    res = minimize(lambda t: tuple(np.asarray(v) for v in fg(jnp.asarray(t))),
                   np.zeros(mn.dimension), jac=True, method="L-BFGS-B",
                   options={"gtol": 1e-12, "ftol": 1e-15, "maxiter": 5000})
    return res.x


@pytest.mark.parametrize("reference", [None, LAST], ids=["first", "last"])
@pytest.mark.parametrize("name", ["4-cycle", "3-way+overlap"])
def test_pruned_model_reaches_same_distributions_as_full(name, reference):
    """Max-ent fits to the same exact marginals agree between pruned and full query sets."""
    marg = CASES[name]
    q, qfull = CanonicalQueries(DOM, marg, reference=reference), CanonicalQueries(DOM, marg, prune=False)
    rng = np.random.default_rng(7)
    joint = rng.dirichlet(np.ones(DOM.size) * 2.0)  # an arbitrary positive distribution
    fits = []
    for qq in (q, qfull):
        a = design(qq)
        theta = _fit_maxent(MarkovNetwork(qq), joint @ a)
        e = a @ theta
        p = np.exp(e - e.max())
        fits.append(p / p.sum())
        np.testing.assert_allclose(fits[-1] @ a, joint @ a, atol=1e-7)  # marginals reproduced
    np.testing.assert_allclose(fits[0], fits[1], atol=1e-7)
    assert np.abs(fits[0] - joint).max() > 1e-3  # the joint itself is not in the family


# -- the log-linear interactions (interaction_matrix) -----------------------------------------
@pytest.mark.parametrize("marginals, reference", [
    ([("a", "b"), ("b", "c"), ("c", "d")], None),
    ([("a", "b", "c"), ("c", "d"), ("a", "d")], {"a": 2, "c": 1}),
    ([("a", "b", "c", "d")], {"d": 1}),
])
def test_interactions_reproduce_every_log_probability_by_brute_force(marginals, reference):
    """log p(x) - log p(x*) = sum over the non-empty sub-scopes D of supp(x) of lambda_D(x_D),
    with lambda = M theta, at every point x of the domain; theta . a(x) is counted by the
    queries' own counting path, not by the transform's."""
    from synthinfer.napsu.queries import interaction_matrix

    domain = Domain({"a": [0, 1, 2], "b": [0, 1], "c": [0, 1, 2, 3], "d": [0, 1, 2]})
    q = CanonicalQueries(domain, marginals, reference=reference)
    M, order = interaction_matrix(q)
    dense = M.toarray()
    assert np.allclose(np.diag(dense), 1.0) and abs(np.linalg.det(dense) - 1.0) < 1e-9
    theta = np.random.default_rng(0).normal(size=q.dimension)
    lam = M @ theta
    ref = np.array([q.reference[c] for c in domain.names])
    scope = {}
    for j, (i, flat) in enumerate(zip(q.query_marginal, q.query_cell)):
        m = q.queryset.marginals[i]
        cell = np.unravel_index(int(flat), m.shape(domain))
        scope[tuple((domain.index(c), int(v)) for c, v in zip(m.columns, cell) if v != q.reference[c])] = j
    assert sorted(len(k) for k in scope) == sorted(order)
    points = np.array(list(itertools.product(*[range(k) for k in domain.shape])))
    f = np.array([q.count(x[None]) @ theta for x in points])
    f0 = f[np.all(points == ref, axis=1)][0]
    for x, fx in zip(points, f):
        support = [(c, int(v)) for c, v in enumerate(x) if v != ref[c]]
        total = sum(lam[scope[sub]] for r in range(1, len(support) + 1)
                    for sub in itertools.combinations(support, r) if sub in scope)
        assert fx - f0 == pytest.approx(total, abs=1e-12)
