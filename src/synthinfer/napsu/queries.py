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

Choice of reference: every choice spans the same family of distributions; which one the fit
uses, and why it matters for sampling, is :mod:`synthinfer.napsu.reference`.
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
from synthinfer.napsu.reference import complete_reference


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
        :mod:`synthinfer.napsu.reference`), never from the raw data.

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
