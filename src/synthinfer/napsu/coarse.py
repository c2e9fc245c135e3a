"""What a marginal named through coarse columns measures: its coarse table and, for numeric
columns, the moments inside each coarse cell.

A marginal that names a derived column, a public many-to-one map of its source (``age_g``, the
age group of one-year ages), is measured as its **coarse table**: each value sums the fine
cells of one coarse cell (:func:`coarse_groups`). Each row is in one coarse cell, so a
substitution moves one value down and one up, as in a fine table.

With linear coarse interactions (:func:`synthinfer.napsu.interactions.coarse_slopes`) the model
is piecewise linear in a numeric column inside each group, and the statistic of a group's slope
is the **moment** of the number inside each coarse cell (:func:`moment_queries`):

    m_(g, k) = sum over the rows in coarse cell (g, k) of (x - a_g) / h_g,

with ``a_g`` the centre and ``h_g`` the half-range of the scores (bin midpoints, public) of group
``g``'s categories: a weighted sum of fine counts with weights ``w`` in ``[-1, 1]``, measured
integer-scaled (weights ``round(Q w) / Q``, ``Q`` = :data:`MOMENT_SCALE`) by
:func:`synthinfer.privacy.scaled_discrete_gaussian_mechanism`. Without moments a slope has no
measured statistic and only the prior sets it.

**Sensitivity** (substitution of one row, :func:`squared_sensitivity`): a marginal's table
changes by ``-1, +1`` in two values when the row changes coarse cell (squared L2 ``2``), and by
nothing when it stays. Each of its ``k`` moment tables changes by ``-w`` and ``+w'`` in two
values when the row changes coarse cell (at most ``1 + 1``), or by ``w' - w`` in one value when
it stays (at most ``2^2``). The marginal's squared sensitivity is therefore
``max(2 + 2k, 4k)``: ``2`` without moments, ``4`` with one.

Which marginals are coarse, and how: :func:`coarse_versions` (each marginal on the model's
columns with the maps of the columns it names through groups) and :func:`drop_contained` (a
marginal another one determines is not measured).
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from synthinfer.data import Domain, Marginal, as_marginals
from synthinfer.errors import SynthinferWarning

#: Moment weights are measured as the integers ``round(MOMENT_SCALE * w)`` (``|w| <= 1``): the
#: discrete Gaussian needs integer inputs, and at this scale the rounding moves a weight by at
#: most ``1 / 2048``, far below what any slope can resolve. The model uses the rounded weights.
MOMENT_SCALE = 1024


def coarse_groups(marginal: Marginal, maps: Mapping[str, np.ndarray] | None, domain: Domain) -> np.ndarray | None:
    """Each cell of ``marginal``'s fine table (C order) -> its cell of the coarse table that
    ``maps`` (source code -> group) make of it, numbered ``0 .. k - 1`` in the coarse table's C
    order; ``None`` without maps (a fine marginal)."""
    if not maps:
        return None
    shape = marginal.shape(domain)
    grid = np.indices(shape).reshape(len(shape), -1)
    coarse = [np.asarray(maps[c])[grid[i]] if c in maps else grid[i] for i, c in enumerate(marginal.columns)]
    sizes = [int(np.asarray(maps[c]).max()) + 1 if c in maps else shape[i] for i, c in enumerate(marginal.columns)]
    return np.unique(np.ravel_multi_index(coarse, sizes), return_inverse=True)[1].ravel().astype(np.int64)


@dataclass(frozen=True)
class MomentQuery:
    """The moment of numeric column ``column`` inside each coarse cell of ``marginal``'s coarse
    table whose group of ``column`` holds two or more categories.

    ``cells`` (ascending fine cells of the marginal), ``groups`` (each cell's value, ``0 .. k - 1``)
    and ``weights`` (each cell's integer weight ``round(Q w)``, ``Q`` = :data:`MOMENT_SCALE`):
    value ``j`` is ``sum over cells in j of weights * count``, divided by ``Q`` once measured.
    """

    marginal: Marginal
    column: str
    cells: np.ndarray
    groups: np.ndarray
    weights: np.ndarray

    def values(self, table: np.ndarray) -> np.ndarray:
        """The integer-scaled moments of a fine count table (C order, as ``marginal``'s)."""
        counts = np.asarray(table, dtype=np.int64).ravel()[self.cells]
        return np.bincount(self.groups, weights=self.weights * counts).round().astype(np.int64)


def moment_queries(marginal: Marginal, maps: Mapping[str, np.ndarray] | None, scores: Mapping[str, np.ndarray],
                   domain: Domain) -> list[MomentQuery]:
    """The moment queries of ``marginal`` named through ``maps`` (source column -> code -> group):
    one per coarse column with ``scores`` (the number of each of its categories, e.g. bin
    midpoints), over the coarse cells whose group of that column has scores of two or more
    values (module docstring)."""
    if not maps:
        return []
    table = coarse_groups(marginal, maps, domain)
    grid = np.indices(marginal.shape(domain)).reshape(len(marginal.columns), -1)
    out = []
    for axis, c in enumerate(marginal.columns):
        if c not in maps or c not in scores:
            continue
        mp, x = np.asarray(maps[c]), np.asarray(scores[c], dtype=np.float64)
        lo = np.array([x[mp == g].min() for g in range(mp.max() + 1)])
        hi = np.array([x[mp == g].max() for g in range(mp.max() + 1)])
        group = mp[grid[axis]]  # each fine cell's group of c
        half = (hi - lo)[group] / 2.0
        cells = np.flatnonzero(half > 0)
        if cells.size == 0:
            continue
        w = (x[grid[axis][cells]] - (hi + lo)[group[cells]] / 2.0) / half[cells]
        values = np.unique(table[cells], return_inverse=True)[1].ravel().astype(np.int64)
        out.append(MomentQuery(marginal, c, cells.astype(np.int64), values,
                               np.rint(MOMENT_SCALE * np.clip(w, -1.0, 1.0)).astype(np.int64)))
    return out


def squared_sensitivity(moment_tables: Sequence[int]) -> int:
    """Squared L2 sensitivity, under substitution of one row, of a list of marginals' coarse (or
    fine) tables with, for marginal ``i``, ``moment_tables[i]`` normalised moment tables
    (weights in ``[-1, 1]``): ``sum_i max(2 + 2 k_i, 4 k_i)`` (module docstring)."""
    return int(sum(max(2 + 2 * k, 4 * k) for k in moment_tables))


def coarse_versions(marginals, domain: Domain) -> list[tuple[tuple[str, ...], dict[str, np.ndarray]]]:
    """Each marginal as named, on the model's columns, with the code map of every source column
    it names only through a many-to-one derived column (``{}`` for none): the input of
    :func:`synthinfer.napsu.interactions.coarse_ties`. A one-to-one map (a code and its label)
    is the source itself."""
    out = []
    for m in as_marginals(marginals):
        maps: dict[str, np.ndarray] = {}
        direct = {c for c in m.columns if c not in domain.derived}
        for c in m.columns:
            if c in domain.derived:
                src, mp = domain.derived[c]
                if src not in direct and np.unique(mp).size < mp.size:
                    # two derived columns of one source in one marginal: their common refinement
                    maps[src] = mp if src not in maps else np.unique(np.stack([maps[src], mp]), axis=1,
                                                                     return_inverse=True)[1].ravel()
        out.append((domain.source_columns(m.columns), maps))
    return out


def drop_contained(marginals: Sequence[Marginal],
                   versions: Sequence[tuple[tuple[str, ...], Mapping[str, np.ndarray]]] = ()) -> tuple[Marginal, ...]:
    """The marginals without those contained in another: a contained marginal's counts follow
    from the larger one's, so measuring it would only add noise (it raises n_s in the
    sensitivity sqrt(2 n_s) while the canonical queries keep none of its cells). ``versions``
    (:func:`coarse_versions`, in the same order): a larger marginal that names a column only
    through its groups determines the smaller one only if that names it through the same groups
    (``("age",)`` beside ``("age_group", "income")`` is measured, ``("age_group",)`` is not)."""
    maps = [dict(m) for _, m in versions] or [{} for _ in marginals]

    def determines(j: int, i: int) -> bool:
        return set(marginals[i].columns) < set(marginals[j].columns) and all(
            c not in maps[j] or (c in maps[i] and np.array_equal(maps[i][c], maps[j][c])) for c in marginals[i].columns)

    kept = []
    for i, m in enumerate(marginals):
        bigger = next((o for j, o in enumerate(marginals) if j != i and determines(j, i)), None)
        if bigger is None:
            kept.append(m)
        else:
            warnings.warn(f"marginal {m.columns} is contained in {bigger.columns}, which determines it; "
                          "it is not measured separately (that would only add noise)", SynthinferWarning, stacklevel=4)
    return tuple(kept)


__all__ = ["MOMENT_SCALE", "MomentQuery", "coarse_groups", "coarse_versions", "drop_contained", "moment_queries",
           "squared_sensitivity"]
