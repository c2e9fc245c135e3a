"""Canonical (identifiable) marginal queries, NAPSU-MQ Supplement C.

The indicator queries of full marginal sets are linearly dependent (each marginal's cells sum
to one, overlapping marginals share lower-order sums), so ``theta`` in
``p(x) ∝ exp(theta · a(x))`` (NAPSU-MQ eq. 3) is not identifiable from them. Supplement C
removes the dependencies with the *canonical parametrisation* (Abbeel et al. 2006; Koller and
Friedman 2009, Section 4.4.2.1) relative to a reference assignment ``x*`` (one category per
column; ``x* = (0, ..., 0)`` unless given):

* the canonical factors live on every non-empty subset ``D`` of a marginal's columns, and their
  non-trivial values are the cells ``v`` of ``D`` with every component off the reference, so the
  identifiable statistics are ``{1[x_D = v] : D in S*, v_i != 0}``, of dimension
  ``sum_{D in S*} prod_{i in D} (k_i - 1)`` (below, "non-zero" means "not the reference");
* ``1[x_D = v]`` for a ``D`` that is not itself a marginal is a sum of cells of a marginal
  ``C ⊇ D``; the cells with some non-zero component outside ``D`` are already canonical
  queries of larger scopes, so the one new query it contributes is the cell
  ``(x_D = v, x_{C \\ D} = 0)`` of ``C`` (the paper's "replace the new query with the old queries
  that sum to it; queries already included need not be added again").

Rule implemented here: give every scope ``D`` one *host*, the first marginal (in the user's
order) that contains it, and keep exactly the cells of the host whose non-zero support is
``D``. A kept cell's expansion in the canonical basis is ``1[x_D = v]`` plus terms on strict
supersets ``D ⊂ D' ⊆ C`` (all in ``S*``), so the kept cells form a unit-triangular, hence
invertible, transform of the canonical basis: they are linearly independent (together with the
constant) and span every marginal query. Every kept query is a cell of an original marginal,
so the L2 sensitivity is still at most ``sqrt(2 n_s)`` (Theorem 3.5).

Choice of reference. Every choice spans the same family of distributions, but the dropped
cells are those with a reference component, and their probabilities are functions of many
parameters at once. If a dropped cell is (nearly) empty, the posterior has a one-sided,
prior-dominated direction that no coordinate follows, which is what makes NUTS slow on Adult
(e.g. ``(age 75-90, Federal-gov)`` with 4 rows when ``Federal-gov`` is the reference). With
each column's most frequent category as the reference (:func:`most_frequent_reference`),
the dropped cells are the large ones in most rows, and most near-empty cells own their
parameter. Not all: in a rare row every cell is small against the summed noise of its row
(Adult's ``(age 75-90, Married-civ-spouse)``, implied count ~140 +- 70, is dropped and can
empty), and no choice of reference avoids that; NUTS's one-sided map
(:mod:`synthinfer.napsu.reparam`) therefore works on every cell's log count, not on the
parameters' axes. The prior
``N(0, 10^2 I)`` on ``theta`` is stated relative to the reference; the paper does not say which
one it used, so this is a choice within the specification, not a change of model family.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable, Mapping, Sequence

import numpy as np
import pandas as pd
from scipy import sparse

from synthinfer.data.domain import Domain
from synthinfer.data.marginals import Marginal, QuerySet
from synthinfer.errors import DomainError, ParameterError


class CanonicalQueries:
    """Identifiable subset of the full marginal queries (NAPSU-MQ Supplement C).

    Parameters
    ----------
    domain : Domain
        The public domain.
    marginals : iterable of column tuples or :class:`Marginal`
        The full marginal sets the user releases (each contributes ``sqrt(2)`` to the squared
        sensitivity).
    prune : bool, default True
        ``False`` keeps *every* cell query (a non-identifiable parametrisation of the same
        family); only for comparisons and tests.
    reference : mapping of column name to category code, optional
        The reference category of each column (default 0 for every column; missing columns
        default to 0). For a private fit, choose it from *noisy* counts (post-processing,
        :func:`most_frequent_reference`), never from the raw data.

    Attributes
    ----------
    queryset : QuerySet
        The user's full marginal sets, in order (the sensitivity source).
    kept : ndarray of int64, shape (d,)
        Increasing indices of the kept queries in ``queryset``'s concatenated query vector.
    dimension : int
        ``d = len(kept)``, the number of model parameters.
    reference : dict of column name to category code
        The reference assignment ``x*``.
    query_marginal, query_cell : ndarray of int64, shape (d,)
        For each kept query, the index of its marginal in ``queryset`` and its flat (row-major)
        cell index within that marginal.
    """

    def __init__(
        self,
        domain: Domain,
        marginals: Iterable[Sequence[str] | Marginal],
        *,
        prune: bool = True,
        reference: Mapping[str, int] | None = None,
    ) -> None:
        self.domain = domain
        self.queryset = QuerySet(domain, marginals)
        self.reference = complete_reference(domain, reference)
        offsets = self.queryset.offsets()
        host: dict[frozenset[str], int] = {}
        for i, m in enumerate(self.queryset.marginals):
            for r in range(1, len(m.columns) + 1):
                for sub in itertools.combinations(m.columns, r):
                    host.setdefault(frozenset(sub), i)
        kept, which, cells = [], [], []
        for i, m in enumerate(self.queryset.marginals):
            shape = m.shape(domain)
            for flat, cell in enumerate(np.ndindex(*shape)):
                support = frozenset(c for c, v in zip(m.columns, cell) if v != self.reference[c])
                if prune and (not support or host[support] != i):
                    continue
                kept.append(offsets[i] + flat)
                which.append(i)
                cells.append(flat)
        self.kept = np.asarray(kept, dtype=np.int64)
        self.query_marginal = np.asarray(which, dtype=np.int64)
        self.query_cell = np.asarray(cells, dtype=np.int64)

    @property
    def marginals(self) -> tuple[Marginal, ...]:
        return self.queryset.marginals

    @property
    def canonical(self) -> CanonicalQueries:
        """The canonical queries themselves (a parametrisation such as
        :class:`synthinfer.napsu.interactions.InteractionFeatures` holds them here too)."""
        return self

    @property
    def cells(self) -> tuple[np.ndarray, ...]:
        """Each parameter's cells of its marginal (one: its query's)."""
        return tuple(np.array([c]) for c in self.query_cell)

    def interactions(self) -> tuple[sparse.csr_array, np.ndarray]:
        """``(M, shrunk)``: :func:`interaction_matrix`'s ``M`` and which interactions take the
        interaction prior (order two or more)."""
        M, order = interaction_matrix(self)
        return M, order >= 2

    def summarise(self, s: np.ndarray, sigma: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Per parameter, its query's noisy count and noise sd: ``(s, sigma)`` as they are."""
        return np.asarray(s, dtype=np.float64), np.broadcast_to(np.asarray(sigma, dtype=np.float64), np.shape(s))

    @property
    def dimension(self) -> int:
        return int(self.kept.size)

    @property
    def l2_sensitivity(self) -> float:
        """``sqrt(2 n_s)``: the kept queries are a subset of the ``n_s`` full marginal sets,
        and dropping coordinates cannot increase an L2 distance (NAPSU-MQ Theorem 3.5)."""
        return self.queryset.l2_sensitivity

    def count(self, data: pd.DataFrame | np.ndarray) -> np.ndarray:
        """Kept query answers ``a*(X)``: the full concatenated counts restricted to ``kept``."""
        return self.queryset.count(data)[self.kept]

    def describe(self) -> list[tuple[Marginal, tuple]]:
        """``(marginal, categories of the cell)`` for each kept query, in order."""
        out = []
        for i, flat in zip(self.query_marginal, self.query_cell):
            m = self.queryset.marginals[i]
            cell = np.unravel_index(int(flat), m.shape(self.domain))
            out.append(
                (m, tuple(self.domain[c].categories[int(v)] for c, v in zip(m.columns, cell)))
            )
        return out

    def __repr__(self) -> str:
        return (
            f"CanonicalQueries({len(self.queryset)} marginals, "
            f"{self.dimension} of {self.queryset.dimension} queries kept)"
        )


def complete_reference(domain: Domain, reference: Mapping[str, int] | None) -> dict[str, int]:
    out = {name: 0 for name in domain.names}
    for name, code in (reference or {}).items():
        if name not in out:
            raise DomainError(f"reference: unknown column {name!r}")
        k = domain[name].size
        if not (isinstance(code, (int, np.integer)) and 0 <= int(code) < k):
            raise DomainError(f"reference[{name!r}] must be a category code in [0, {k}), got {code!r}")
        out[name] = int(code)
    return out


def most_frequent_reference(queryset: QuerySet, counts: np.ndarray) -> dict[str, int]:
    """Each column's category with the largest count, from the marginal counts ``counts``.

    ``counts`` is the full concatenated query vector of ``queryset`` (all cells of every
    marginal). For a private fit pass the *noisy* counts: the choice is then post-processing
    of the Gaussian mechanism's output and costs no privacy. A column's count comes from the
    first marginal that contains it (its cells summed over the other columns).
    """
    counts = np.asarray(counts, dtype=np.float64)
    if counts.shape != (queryset.dimension,):
        raise ParameterError(f"counts must have shape ({queryset.dimension},), got {counts.shape}")
    out: dict[str, int] = {}
    for m, part in zip(queryset.marginals, queryset.split(counts)):
        table = part.reshape(m.shape(queryset.domain))
        for axis, name in enumerate(m.columns):
            if name not in out:
                other = tuple(a for a in range(table.ndim) if a != axis)
                out[name] = int(np.argmax(table.sum(axis=other)))
    return out


def well_measured_reference(
    tables: Sequence[tuple[Sequence[str], np.ndarray, np.ndarray | float]],
    domain: Domain,
    start: Mapping[str, int],
    *,
    below: float = 3.0,
    max_sweeps: int = 10,
) -> dict[str, int]:
    """Reference categories under which the cells that fix the main effects are well measured.

    In the reference-coded model (:func:`interaction_matrix`) a main effect ``lambda_c(v)`` is
    the log-ratio of the cells ``(x_c = v, x* elsewhere)`` and ``x*``, and in each measured
    table those are the cells with at most one component off the reference. Where such a cell
    is (structurally) empty, e.g. ``(Separated, Husband)`` when Husband is the reference of
    relationship, its main effect has only a one-sided bound and every interaction of ``v``
    must compensate it: a long ridge against the interaction prior that NUTS crosses slowly.
    This picks, by coordinate descent from ``start`` (e.g. :func:`most_frequent_reference`),
    each column's category that minimises the number of such cells whose noisy count is below
    ``below`` noise sd, over the tables of two or more columns; ties keep the current choice.

    ``tables`` are ``(columns, noisy table, noise sd)`` (sd a scalar or per cell): the choice is
    post-processing of released counts and costs no privacy.
    """
    multi = []
    for cols, table, sd in tables:
        cols = tuple(cols)
        if len(cols) < 2:
            continue
        t = np.asarray(table, dtype=np.float64).reshape([domain[c].size for c in cols])
        multi.append((cols, t < below * np.broadcast_to(np.asarray(sd, dtype=np.float64), t.shape)))
    ref = {c: int(start.get(c, 0)) for c in domain.names}

    def score(columns: set[str]) -> int:
        total = 0
        for cols, weak in multi:
            if not columns & set(cols):
                continue
            grids = np.ix_(*[np.arange(domain[c].size) for c in cols])
            off = sum((g != ref[c]).astype(np.int64) for g, c in zip(grids, cols))
            total += int(np.count_nonzero(weak & (off <= 1)))
        return total

    for _ in range(max_sweeps):
        changed = False
        for c in domain.names:
            if not any(c in cols for cols, _ in multi):
                continue
            current = ref[c]
            best, best_score = current, score({c})
            for k in range(domain[c].size):
                if k == current:
                    continue
                ref[c] = k
                sc = score({c})
                if sc < best_score:
                    best, best_score = k, sc
            ref[c] = best
            changed |= best != current
        if not changed:
            break
    return ref


def interaction_matrix(queries: CanonicalQueries) -> tuple[sparse.csr_array, np.ndarray]:
    """``(M, order)``: the log-linear interactions ``lambda = M theta`` of the canonical
    parameters, and each one's order.

    In ``p(x) ∝ exp(theta · a(x))`` with the kept queries ``a`` (one per scope ``D`` and value
    ``v`` with every component off the reference), ``log p(x) = const + sum_{D ⊆ supp(x)}
    lambda_D(x_D)``: the reference-coded log-linear model (corner-point constraints; Agresti,
    Categorical Data Analysis, 3rd ed., 2013, Chapter 9), whose ``lambda_D(v)`` is the main
    effect (``|D| = 1``) or the ``|D|``-way interaction of the categories ``v``. By Möbius
    inversion over the subsets of ``D``,

        lambda_D(v) = sum_{D' ⊆ D} (-1)^{|D| - |D'|} f(v_{D'}),   f(x) = theta · a(x),

    at the points ``v_{D'}`` equal to ``v`` on ``D'`` and to the reference elsewhere. Row ``j``
    of ``M`` is query ``j``'s ``(D, v)``. ``M`` is unit lower-triangular in an order by scope
    size (``theta_j`` fires at ``v_D``; every other query firing at some ``v_{D'}`` has a strict
    sub-scope of ``D``), so ``det M = 1``; its main-effect rows are the identity's, as a cell
    with one off-reference component fires only its own query.
    """
    domain = queries.domain
    marginals = queries.queryset.marginals
    cols = [np.array([domain.index(c) for c in m.columns]) for m in marginals]
    shapes = [m.shape(domain) for m in marginals]
    reference = np.array([queries.reference[c] for c in domain.names])
    # each marginal's flat cell -> its kept query (-1: dropped)
    owner = [np.full(math.prod(shape), -1, dtype=np.int64) for shape in shapes]
    for j, (i, flat) in enumerate(zip(queries.query_marginal, queries.query_cell)):
        owner[i][flat] = j
    points, rows, signs = [], [], []
    order = np.zeros(queries.dimension, dtype=np.int64)
    for j, (i, flat) in enumerate(zip(queries.query_marginal, queries.query_cell)):
        cell = np.unravel_index(int(flat), shapes[i])
        support = [(c, int(v)) for c, v in zip(cols[i], cell) if v != reference[c]]
        order[j] = len(support)
        for r in range(len(support) + 1):
            for sub in itertools.combinations(support, r):
                x = reference.copy()
                for c, v in sub:
                    x[c] = v
                points.append(x)
                rows.append(j)
                signs.append((-1.0) ** (len(support) - r))
    X, rows, signs = np.array(points), np.array(rows), np.array(signs)
    entries = []
    for c, shape, own in zip(cols, shapes, owner):
        hit = own[np.ravel_multi_index(tuple(X[:, c].T), shape)]
        fires = hit >= 0
        entries.append((signs[fires], rows[fires], hit[fires]))
    vals, r, q = (np.concatenate(e) for e in zip(*entries))
    d = queries.dimension
    M = sparse.csr_array(sparse.coo_array((vals, (r, q)), shape=(d, d)))  # duplicates summed
    M.eliminate_zeros()
    return M, order
