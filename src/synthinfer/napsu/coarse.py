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

With bilinear coarse interactions (two numeric columns ``x``, ``y`` named through groups in one
marginal) the model also has a product term ``w_x w_y`` in each coarse cell, whose statistic is
the **product moment** ``sum over the rows in the cell of w_x w_y``: how the two numbers covary
inside the cell, which the moments alone leave at independence. Its weights ``w_x w_y`` are in
``[-1, 1]`` too.

**Sensitivity** (substitution of one row, :func:`squared_sensitivity`). Let ``f(c)`` be the
vector of a fine cell's normalised weights in the marginal's moment tables (0 in a table that
does not hold it). When the row changes coarse cell, the table changes by ``-1, +1`` in two
values and each moment table by ``-f_t(c)`` and ``+f_t(c')`` in two values: squared L2 at most
``2 + 2 max_c |f(c)|^2``. When it stays, only the moment tables change, by ``f(c') - f(c)`` for
two fine cells of one coarse cell. The sensitivity is the larger of the two maxima, computed
from the public weights. For ``k`` moments alone it is ``max(2 + 2k, 4k)``: ``2`` without
moments, ``4`` with one, ``8`` with two. A pair of numbers with both moments and their product
is also ``8``: inside a cell the largest change is a move from one edge of a group to the other
(``f`` is convex in each number), and flipping one number changes its moment and the product by
2 each, flipping both leaves the product as it was. So the product moment adds no noise.

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
from synthinfer.errors import SynthinferWarning, user_stacklevel

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
    """The moment of numeric column ``columns[0]`` (or, with two columns, the product moment of
    the pair) inside each coarse cell of ``marginal``'s coarse table whose groups of those
    columns hold two or more categories each.

    ``cells`` (ascending fine cells of the marginal), ``groups`` (each cell's value, ``0 .. k - 1``)
    and ``weights`` (each cell's integer weight ``round(Q w)``, ``Q`` = :data:`MOMENT_SCALE`;
    for a product ``w = w_x w_y``): value ``j`` is ``sum over cells in j of weights * count``,
    divided by ``Q`` once measured.
    """

    marginal: Marginal
    columns: tuple[str, ...]
    cells: np.ndarray
    groups: np.ndarray
    weights: np.ndarray

    def values(self, table: np.ndarray) -> np.ndarray:
        """The integer-scaled moments of a fine count table (C order, as ``marginal``'s)."""
        counts = np.asarray(table, dtype=np.int64).ravel()[self.cells]
        return np.bincount(self.groups, weights=self.weights * counts).round().astype(np.int64)


def moment_queries(marginal: Marginal, maps: Mapping[str, np.ndarray] | None, scores: Mapping[str, np.ndarray],
                   domain: Domain, *, products: bool = False) -> list[MomentQuery]:
    """The moment queries of ``marginal`` named through ``maps`` (source column -> code -> group):
    one per coarse column with ``scores`` (the number of each of its categories, e.g. bin
    midpoints), over the coarse cells whose group of that column has scores of two or more
    values; with ``products``, then one per pair of such columns, over the coarse cells where
    both groups do (module docstring)."""
    if not maps:
        return []
    table = coarse_groups(marginal, maps, domain)
    grid = np.indices(marginal.shape(domain)).reshape(len(marginal.columns), -1)
    centred: dict[str, np.ndarray] = {}  # each fine cell's w in [-1, 1]; NaN where its group has one value
    for axis, c in enumerate(marginal.columns):
        if c not in maps or c not in scores:
            continue
        mp, x = np.asarray(maps[c]), np.asarray(scores[c], dtype=np.float64)
        lo = np.array([x[mp == g].min() for g in range(mp.max() + 1)])
        hi = np.array([x[mp == g].max() for g in range(mp.max() + 1)])
        group = mp[grid[axis]]  # each fine cell's group of c
        half = (hi - lo)[group] / 2.0
        with np.errstate(invalid="ignore", divide="ignore"):
            w = np.where(half > 0, (x[grid[axis]] - (hi + lo)[group] / 2.0) / half, np.nan)
        if np.isfinite(w).any():
            centred[c] = np.clip(w, -1.0, 1.0)
    names = list(centred)
    terms = [(c,) for c in names] + ([(a, b) for i, a in enumerate(names) for b in names[i + 1:]] if products else [])
    out = []
    for cols in terms:
        w = np.prod([centred[c] for c in cols], axis=0)
        cells = np.flatnonzero(np.isfinite(w))
        if cells.size == 0:
            continue
        values = np.unique(table[cells], return_inverse=True)[1].ravel().astype(np.int64)
        out.append(MomentQuery(marginal, cols, cells.astype(np.int64), values,
                               np.rint(MOMENT_SCALE * w[cells]).astype(np.int64)))
    return out


def squared_sensitivity(coarse_cells: np.ndarray | None,
                        moments: Sequence[tuple[np.ndarray, np.ndarray]] = ()) -> float:
    """Squared L2 sensitivity, under substitution of one row, of one marginal's table and its
    moment tables (module docstring): ``max(2 + 2 max_c |f(c)|^2, max |f(c) - f(c')|^2)``, the
    second over pairs of fine cells in one coarse cell.

    ``coarse_cells``: each fine cell's coarse cell (:func:`coarse_groups`; ``None``: the table is
    fine). ``moments``: ``(cells, weights)`` of each moment table, the weights normalised (the
    measured ``round(Q w) / Q``, in ``[-1, 1]``). Only public quantities enter."""
    if not moments:
        return 2.0
    size = (max(int(np.max(c)) for c, _ in moments) + 1) if coarse_cells is None else np.asarray(coarse_cells).size
    f = np.zeros((size, len(moments)))
    for t, (cells, weights) in enumerate(moments):
        w = np.asarray(weights, dtype=np.float64)
        if np.any(np.abs(w) > 1):
            raise ValueError("moment weights must be normalised to [-1, 1]")
        f[np.asarray(cells), t] = w
    move = 2.0 + 2.0 * float(np.max(np.sum(f**2, axis=1)))
    coarse = np.arange(size) if coarse_cells is None else np.asarray(coarse_cells)
    stay = 0.0
    for g in np.unique(coarse):
        u = np.unique(f[coarse == g], axis=0)
        for row in u[:-1]:  # pairs of distinct weight vectors (a few dozen per coarse cell)
            stay = max(stay, float(np.max(np.sum((u - row) ** 2, axis=1))))
    return max(move, stay)


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
                          "it is not measured separately (that would only add noise)", SynthinferWarning,
                          stacklevel=user_stacklevel())
    return tuple(kept)


__all__ = ["MOMENT_SCALE", "MomentQuery", "coarse_groups", "coarse_versions", "drop_contained", "moment_queries",
           "squared_sensitivity"]
