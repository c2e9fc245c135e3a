"""Canonical (identifiable) marginal queries, NAPSU-MQ Supplement C.

The indicator queries of full marginal sets are linearly dependent (each marginal's cells sum
to one, overlapping marginals share lower-order sums), so ``theta`` in
``p(x) ∝ exp(theta · a(x))`` (NAPSU-MQ eq. 3) is not identifiable from them. Supplement C
removes the dependencies with the *canonical parametrisation* (Abbeel et al. 2006; Koller and
Friedman 2009, Section 4.4.2.1) relative to the reference assignment ``x* = (0, ..., 0)``:

* the canonical factors live on every non-empty subset ``D`` of a marginal's columns, and their
  non-trivial values are the cells ``v`` of ``D`` with every component non-zero, so the
  identifiable statistics are ``{1[x_D = v] : D in S*, v_i != 0}``, of dimension
  ``sum_{D in S*} prod_{i in D} (k_i - 1)``;
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
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Sequence

import numpy as np
import pandas as pd

from synthinfer.data.domain import Domain
from synthinfer.data.marginals import Marginal, QuerySet


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

    Attributes
    ----------
    queryset : QuerySet
        The user's full marginal sets, in order (the sensitivity source).
    kept : ndarray of int64, shape (d,)
        Increasing indices of the kept queries in ``queryset``'s concatenated query vector.
    dimension : int
        ``d = len(kept)``, the number of model parameters.
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
    ) -> None:
        self.domain = domain
        self.queryset = QuerySet(domain, marginals)
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
                support = frozenset(c for c, v in zip(m.columns, cell) if v != 0)
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
