r"""NAPSU-MQ's noise-aware likelihood (Räisä et al. 2023, eq. 6) by Gaussian message passing on the junction tree.

Eq. 6 is ``log N(y | n mu_y(theta), n Sigma_y(theta) + D)``: ``y`` are noisy counts of cells of
the measured marginals, ``mu_y, Sigma_y`` the mean and covariance of those cells' indicators
``e(x)`` under MED_theta, and ``D`` the Gaussian mechanism's noise variances (``sigma_DP^2 I`` in
the paper; one variance per value when marginals are measured at different noise scales, as
AIM does). :func:`synthinfer.napsu.likelihood.log_likelihood` forms the dense ``d x d`` matrix
(cost ``O(d^3)`` plus the covariance passes). This module computes the same number with cost
about linear in the clique tables' cells, without ever forming ``Sigma_y``.

Model as a linear-Gaussian tree
-------------------------------
Let ``z_C = e_C(x) - p_C`` be the centred cell-indicator vector of clique ``C`` (``K_C`` cells,
``p_C`` its marginal). MED_theta is Markov on the junction tree, so for a clique ``C`` with
separator ``S`` to its parent, ``E[e_C | x] = E[e_C | e_S] = Q_C e_S`` with
``Q_C[x, s] = p(x_C | x_S = s) 1[x_S = s]`` (linear in the one-hot ``e_S``), and

    z_C = Q_C z_S + xi_C,   Cov(xi_C) = E[Cov(e_C | x_S)] = diag(p_C) - L_C diag(1/p_S) L_C^T,

``L_C[x, s] = p_C(x) 1[x_S = s]``, ``xi_C`` uncorrelated with everything outside ``C``'s subtree
given ``z_S``; a root has ``Cov(z_R) = diag(p_R) - p_R p_R^T`` (the same formula with an empty
separator). These regressions reproduce every covariance between cells of the whole tree
exactly (Markov property plus linear conditional means), so the Gaussian with this tree
structure has exactly eq. 6's moments (Koller and Friedman 2009, Ch. 14 on Gaussian networks;
the multinomial's conditional covariance as in Lauritzen 1996, Section 4.2). A measured cell
of marginal ``M`` inside clique ``C`` is ``y_j = n p_M(c_j) + sqrt(n) (R_M z_C)_j + eps_j``,
``eps_j ~ N(0, D_j)``, with ``R_M`` the 0/1 marginalisation of ``C``'s cells onto ``M``'s.

Message passing (a Kalman filter on the tree)
---------------------------------------------
Scale ``zeta = sqrt(n) z`` (``B_C = n Cov(xi_C)``). From the leaves up, clique ``C`` collects in
information form the observations it holds and its children's messages:
``J = diag(delta) + G W G^T`` and ``h = h_delta + G eta``, where ``delta, h_delta`` come from
measurements of the clique's own scope (one weight ``1/D_j`` per measured cell) and each block
of ``G`` (``K_C x K_V``, ``G[x, v] = 1[x_V = v]``) from a strict sub-scope ``V``: a measured
sub-marginal (diagonal ``W_V``) or a child's separator (its message ``J_V, h_V``). Integrating
``zeta_C ~ N(Q zeta_S, B)`` against ``exp(-zeta^T J zeta / 2 + h^T zeta)``
(``int N(e | 0, B) exp(-e^T J e / 2 + g^T e) de = det(I + BJ)^{-1/2} exp(g^T (I + BJ)^{-1} B g / 2)``,
valid for singular ``B``) gives the message to the parent

    J_S = Q^T (I + JB)^{-1} J Q,   h_S = Q^T (I + JB)^{-1} h,
    log c_C = h^T B (I + JB)^{-1} h / 2 - log det(I + JB) / 2,

and the log-likelihood is ``sum_C log c_C - sum_j (r_j^2 / D_j + log(2 pi D_j)) / 2`` with
``r_j = y_j - n p_M(c_j)``. ``I + JB`` is a diagonal plus a matrix of rank
``t + r`` (``t = K_S``, ``r = sum_V K_V``):

    I + JB = D_0 + U V^T,  D_0 = 1 + n delta p_C,  U = [-n delta L, G],  V^T = [Q^T; W G^T B],

so one ``(t + r) x (t + r)`` factorisation per clique gives the determinant (Sylvester) and the
solves (Woodbury). Cost per clique ``O(K_C (t + r)^2 + (t + r)^3)``, against ``O(d^3)`` for the
dense form: a clique measured in full (the usual case: a 2-way marginal is its own clique) costs
only its separators' and sub-marginals' cells squared, not ``K_C^2``.

Grouped values: a value may count a group of its scope's cells (a coarse table measured on a
fine scope: age groups x income where the model holds one-year ages). Such a measurement is a
block of its own at its clique, whose ``G`` column of each value is the indicator of its group
(``R_M`` above with one row per group): the same algebra, with that block never holding
another's information (its values are not cells of a sub-scope).

Numerics: every quantity is a probability, a conditional probability or a count, and
``B``'s entries are bounded by ``n``; no ``1/p`` appears, so near-empty cells are harmless.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from synthinfer._jax import jax, jnp
from synthinfer.errors import ParameterError

if TYPE_CHECKING:
    from synthinfer.napsu.junction_tree import JunctionTree
    from synthinfer.napsu.measurements import Measurement
    from synthinfer.napsu.network import MarkovNetwork
    from synthinfer.napsu.queries import CanonicalQueries

_LOG_2PI = math.log(2.0 * math.pi)
#: Smallest block a projected clique eliminates first (and never one smaller than its
#: separator): below a few dozen cells the extra t x t factorisation costs more than it saves.
MIN_ELIMINATED_BLOCK = 32
#: Largest share of an eliminated block's cells its low-rank part may have (the Woodbury
#: factorisation is ``k x k``; past half the block it saves little).
MAX_ELIMINATED_RANK_SHARE = 0.5

#: A projected clique's Gram tables come from its marginals on pairs of block scopes
#: (:func:`_factorised_gram`) instead of one scatter-add of ``(1 + B)^2`` entries per clique
#: cell (:func:`_gram_index`) when that scatter has at least this many entries: below it the
#: scatter is one cheap program, above it (a clique of tens of thousands of cells with twenty
#: blocks: two numbers and the columns of an analysis, all pairs measured) it sets the cost.
FACTORISED_GRAM_MIN_ENTRIES = 1 << 20

#: The measured values, in the order of the observation vector ``y``: per measurement
#: ``(columns, cells)`` (domain column indices in the marginal's order; flat C-order cells), one
#: value per cell; or ``(columns, cells, groups)``, where ``groups[i]`` is the value that cell
#: ``cells[i]`` counts towards (``0 .. k - 1``, each used): a value is then the sum of its group's
#: cells, e.g. a coarse table (age groups x income) measured on a fine scope (ages x income); or
#: ``(columns, cells, groups, weights)``: a value is the weighted sum ``sum_i weights[i] count(cells[i])``
#: over its group, e.g. the sum of age over the rows of each (age group, income) cell.
Layout = tuple[tuple[tuple[int, ...], ...], ...]


def _values(entry: tuple) -> int:
    """How many values a layout entry measures."""
    return len(entry[1]) if len(entry) == 2 else (max(entry[2]) + 1 if entry[2] else 0)


def layout_size(layout: Layout) -> int:
    """How many values ``layout`` measures (the length of the observation vector ``y``)."""
    return sum(_values(e) for e in layout)


def _weights(entry: tuple) -> np.ndarray | None:
    """A layout entry's weight of each listed cell, or ``None`` (every weight 1)."""
    if len(entry) < 4:
        return None
    w = np.asarray(entry[3], dtype=np.float64)
    if w.shape != (len(entry[1]),) or not np.all(np.isfinite(w)):
        raise ParameterError(f"a weighted measurement on columns {entry[0]} needs one finite weight per cell")
    return w


def _groups(entry: tuple) -> np.ndarray | None:
    """A layout entry's value of each listed cell, or ``None`` where each cell is its own value
    (with weight 1)."""
    if len(entry) == 2:
        return None
    groups = np.asarray(entry[2], dtype=np.int64)
    k = _values(entry)
    if groups.shape != (len(entry[1]),) or np.any(np.bincount(groups, minlength=k) == 0) or groups.min() < 0:
        raise ParameterError(f"a grouped measurement on columns {entry[0]} needs one group per cell, "
                             f"every group 0 .. k - 1 used")
    plain = k == len(entry[1]) and np.array_equal(groups, np.arange(k))
    return None if plain and (len(entry) < 4 or np.all(_weights(entry) == 1.0)) else groups


def canonical_layout(queries: CanonicalQueries) -> Layout:
    """The layout of NAPSU-MQ's canonical queries ``s~`` (one group per marginal, kept cells)."""
    domain = queries.domain
    out = []
    for i, m in enumerate(queries.marginals):
        cells = queries.query_cell[queries.query_marginal == i]
        if cells.size:
            out.append((tuple(domain.index(c) for c in m.columns), tuple(int(c) for c in cells)))
    return tuple(out)


def measurement_layout(measurements: Sequence[Measurement], domain) -> Layout:
    """The layout of a list of measurements (their values concatenated in order; a grouped
    measurement's entry carries its groups, a weighted one its weights too)."""
    return tuple((tuple(domain.index(c) for c in m.marginal.columns), tuple(int(c) for c in m.cells))
                 + (() if m.groups is None else (tuple(int(g) for g in m.groups),))
                 + (() if m.weights is None else (tuple(float(w) for w in m.weights),))
                 for m in measurements)


def canonical_information(queries: CanonicalQueries, layout: Layout, *, grouped: bool = False) -> np.ndarray:
    """0/1 matrix (canonical queries x measured values): ``A[j, k] = 1`` when value ``k``
    measures query ``j``'s cell directly (same column set, same cell).

    With it, ``1 / D_eff = A (1 / D)`` and ``s_eff = D_eff A (y / D)`` combine the direct
    measurements of each canonical cell by inverse-variance weighting (post-processing of the
    measurements): a per-query summary where one is needed (the Gauss-Newton preconditioner,
    PGM's point estimate), while the likelihood itself uses every measured value.

    ``grouped=True`` (for the preconditioner only): a value that sums a group of ``g`` cells
    also informs each canonical cell in it, with ``A[j, k] = g``: a parameter tying the whole
    group (a coarse interaction) then sums its members' variances ``var_k / g`` back to the
    value's ``var_k``, where without it the group's cells would look unmeasured.
    """
    domain = queries.domain
    where = {}
    for j, (i, cell) in enumerate(zip(queries.query_marginal, queries.query_cell)):
        cols = tuple(domain.index(c) for c in queries.marginals[i].columns)
        idx = np.unravel_index(int(cell), [domain.shape[c] for c in cols])
        where[tuple(sorted(zip(cols, (int(v) for v in idx))))] = j
    out = np.zeros((queries.dimension, layout_size(layout)))
    k = 0
    for entry in layout:
        cols, cells, groups = entry[0], entry[1], _groups(entry)
        shape = [domain.shape[c] for c in cols]
        sizes = None if groups is None else np.bincount(groups)
        for i, cell in enumerate(cells):
            key = tuple(sorted(zip(cols, (int(v) for v in np.unravel_index(cell, shape)))))
            value = k + (i if groups is None else int(groups[i]))
            unit = len(entry) < 4 or entry[3][i] == 1
            if key in where and (groups is None or (sizes[groups[i]] == 1 and unit)):
                # a value of one cell, of weight 1, measures it
                out[where[key], value] = 1.0
            elif key in where and grouped and unit:
                out[where[key], value] = float(sizes[groups[i]])
        k += _values(entry)
    return out


def canonical_summary(queries: CanonicalQueries, layout: Layout, y: np.ndarray,
                      sigma: float | np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(s~, sigma)`` per canonical query from measurements in ``layout``: each query's direct
    measurements combined by inverse-variance weighting (:func:`canonical_information`), the
    per-query noisy count and noise sd that samplers' reparametrisations read (post-processing).
    A query with no direct measurement (a fine cell that only a coarse table sums) gets
    ``(+inf, +inf)``: nothing says it is near-empty, so no sampler treats it as one-sided."""
    info = canonical_information(queries, layout)
    var = np.broadcast_to(np.asarray(sigma, dtype=np.float64) ** 2, np.shape(y))
    precision = info @ (1.0 / var)
    measured = precision > 0
    s = np.full(precision.shape, np.inf)
    sd = np.full(precision.shape, np.inf)
    s[measured] = (info[measured] @ (np.asarray(y, dtype=np.float64) / var)) / precision[measured]
    sd[measured] = precision[measured] ** -0.5
    return s, sd


@dataclass(frozen=True)
class _Group:
    """Measured cells of one marginal, in its home clique's coordinates."""

    rows: np.ndarray  # int64: positions of the values in y
    cells: np.ndarray  # int64: the measured cells of the scope (scope-local flat index); grouped: 0 .. k - 1
    scope: tuple[int, ...]  # clique axes of the marginal's columns, ascending
    #: grouped values: each clique cell's value (k where the cell is in no group); None otherwise
    value_map: np.ndarray | None = None
    #: weighted values: each clique cell's weight (0 where in no group); None: weights 1
    value_weight: np.ndarray | None = None


@dataclass(frozen=True)
class _Block:
    """A strict sub-scope ``V`` of a clique that carries information (a column block of ``G``):
    no other block's scope contains it, so nested measured sub-marginals and separators share
    one block (their information is mapped into it)."""

    scope: tuple[int, ...]
    cell_map: np.ndarray  # int64 (K,): the block's cell of each clique cell
    size: int  # K_V
    #: a weighted measurement's block: each clique cell's entry in its column of ``G`` (None: 1)
    weight: np.ndarray | None = None


@dataclass(frozen=True)
class _Part:
    """Information on a sub-scope ``U`` of block ``block`` (``U`` = the block's scope, or nested
    in it): ``proj`` maps each block cell to its cell of ``U`` (``None`` when ``U`` is the block's
    scope), i.e. the information enters as ``R W_U R^T`` with ``R`` the 0/1 map ``proj``.

    Its values' probabilities come from ``p_A``, the clique table's marginal on the clique axes
    ``axes`` (row-major): ``p_A`` itself (``A = U``, a value per cell), or for a grouped
    measurement the sums of ``weights * p_A`` over the cells of ``A`` with equal ``values``."""

    block: int
    proj: np.ndarray | None
    size: int  # K_U
    axes: tuple[int, ...]  # the clique axes of the scope A the values are functions of, ascending
    values: np.ndarray | None = None  # int64 (cells of A,): each cell's value; None: the cell itself
    weights: np.ndarray | None = None  # float64 (cells of A,): each cell's weight in its value; None: 1


@dataclass(frozen=True)
class _Clique:
    size: int
    table: tuple[int, ...]  # the clique table's shape (its columns' categories, in the clique's order)
    sep_map: np.ndarray | None  # int64 (K,): separator cell of each clique cell; None at a root
    sep_size: int
    full: tuple[_Group, ...]  # measurements of the clique's whole scope
    blocks: tuple[_Block, ...]
    groups: tuple[tuple[_Part, _Group], ...]  # measured strict sub-marginals
    children: tuple[tuple[int, _Part], ...]  # (child clique, its separator as a part)
    active: bool  # holds any information (measurements or children that do)
    gram_index: np.ndarray | None  # the projected form's scatter indices (see _gram); None: cell form
    #: the projected form's weight of each scattered entry (weighted blocks); None: all 1
    gram_weight: np.ndarray | None = None
    #: projected form: the block eliminated first (its information is a diagonal plus the
    #: nested parts' low rank), or None
    eliminated: int | None = None
    #: rank of that block's low-rank part: the separator's cells and its nested parts' cells
    eliminated_rank: int = 0
    #: projected form from marginals on pairs of scopes (:func:`_factorised_gram`): the
    #: clique's table shape and, for the separator then each block, its clique axes and its
    #: ``(scope cells x values)`` factor (``G``'s columns as a function of the scope's cell);
    #: None: one scatter-add (:func:`_gram_index`)
    gram_factors: tuple[tuple[int, ...], tuple[tuple[tuple[int, ...], np.ndarray], ...]] | None = None
    #: projected form: every block has a measurement of all its cells, so its information
    #: ``W`` is positive definite and ``M = W (W^-1 + A)`` is factorised by Cholesky
    definite: bool = False

    @property
    def rank(self) -> int:
        """``r``: the columns of ``G`` (cells of the blocks)."""
        return sum(b.size for b in self.blocks)

    @property
    def flops(self) -> int:
        """Rough multiply-adds of one evaluation (forward pass) at this clique."""
        K, t, r = self.size, self.sep_size, self.rank
        if self.gram_index is not None:
            gram = K * (len(self.blocks) + 1) ** 2 if self.gram_factors is None else _factorised_flops(*self.gram_factors)
            if self.eliminated is None:
                return gram + r**3 + r * r * t
            k1, k = self.blocks[self.eliminated].size, self.eliminated_rank
            r2 = r - k1
            return gram + k1 * (r2 + k + t) ** 2 + r2**3 + k**3 + r2 * r2 * t
        return K * (t + r) ** 2 + (t + r) ** 3


def _plan_cliques(jt: JunctionTree, shape: Sequence[int], layout: Layout,
                  factorised_gram_min: int | None = None) -> list[_Clique]:
    """The per-clique plan of :class:`TreeLikelihoodPlan` from the junction tree, the domain's
    shape and the layout (needs no network: :func:`likelihood_flops` uses it to price a model
    before it is built); ``factorised_gram_min`` as :class:`TreeLikelihoodPlan`'s."""
    if factorised_gram_min is None:
        factorised_gram_min = FACTORISED_GRAM_MIN_ENTRIES
    n_cliques = len(jt.cliques)
    cells_of = [math.prod(shape[v] for v in cl) for cl in jt.cliques]

    # each measurement goes to the smallest clique holding its columns
    full: list[list[_Group]] = [[] for _ in range(n_cliques)]
    sub: list[list[_Group]] = [[] for _ in range(n_cliques)]
    start = 0
    for entry in layout:
        cols, cells, groups = entry[0], entry[1], _groups(entry)
        rows = np.arange(start, start + _values(entry), dtype=np.int64)
        start += rows.size
        holders = [c for c in range(n_cliques) if set(cols) <= set(jt.cliques[c])]
        if not holders:
            raise ParameterError(f"a measurement on columns {cols} lies in no clique of the network's junction tree")
        c = min(holders, key=lambda k: cells_of[k])
        cl = jt.cliques[c]
        scope = tuple(sorted(cl.index(v) for v in cols))
        # measured cells re-indexed from the marginal's column order to the clique's (ascending)
        local = _reorder_cells(np.asarray(cells, dtype=np.int64), cols, tuple(cl[a] for a in scope), shape)
        if groups is not None:  # its own block of the clique: each clique cell's value (k: none)
            value_of = np.full(_cells(cl, scope, shape), rows.size, dtype=np.int64)
            value_of[local] = groups
            to_scope = _cell_map(cl, tuple(cl[a] for a in scope), shape)
            weight = None
            if (w := _weights(entry)) is not None and not np.all(w == 1.0):
                weight_of = np.zeros(value_of.size)
                weight_of[local] = w
                weight = weight_of[to_scope]
            sub[c].append(_Group(rows, np.arange(rows.size, dtype=np.int64), scope, value_of[to_scope], weight))
            continue
        group = _Group(rows, local, scope)
        (full if len(scope) == len(cl) else sub)[c].append(group)

    active = [bool(full[c] or sub[c]) for c in range(n_cliques)]
    for c in reversed(range(n_cliques)):  # children after parents: propagate upwards
        p = jt.parent[c]
        if p >= 0 and active[c]:
            active[p] = True

    cliques: list[_Clique] = []
    for c, cl in enumerate(jt.cliques):
        sep = jt.separators[c]
        sep_map = _cell_map(cl, sep, shape) if jt.parent[c] >= 0 else None
        kids = [k for k in range(n_cliques) if jt.parent[k] == c and active[k]]
        kid_scopes = [tuple(sorted(cl.index(v) for v in jt.separators[k])) for k in kids]
        scopes = [g.scope for g in sub[c] if g.value_map is None] + kid_scopes
        # blocks: the maximal scopes (largest first, so a scope joins the largest holding it)
        maximal: list[tuple[int, ...]] = []
        for s in sorted(set(scopes), key=lambda s: (-_cells(cl, s, shape), s)):
            if not any(set(s) <= set(m) for m in maximal):
                maximal.append(s)
        maximal.sort()
        blocks = tuple(_Block(s, _cell_map(cl, tuple(cl[a] for a in s), shape), _cells(cl, s, shape))
                       for s in maximal)
        n_scoped = len(blocks)
        # a grouped measurement's values are not cells of a sub-scope: a block of its own (its
        # values, and one more for the clique cells in no group), never a container
        grouped = [g for g in sub[c] if g.value_map is not None]
        blocks += tuple(_Block(g.scope, g.value_map, int(g.value_map.max()) + 1, g.value_weight) for g in grouped)

        def part(scope: tuple[int, ...]) -> _Part:
            b = next(i for i, blk in enumerate(blocks[:n_scoped]) if set(scope) <= set(blk.scope))
            blk = blocks[b]
            cell_map = _cell_map(cl, tuple(cl[a] for a in scope), shape)
            proj = None
            if scope != blk.scope:  # block cell -> sub-scope cell, read off any clique cell in it
                proj = np.zeros(blk.size, dtype=np.int64)
                proj[blk.cell_map] = cell_map
            return _Part(b, proj, _cells(cl, scope, shape), scope)

        groups = tuple((part(g.scope), g) for g in sub[c] if g.value_map is None) + tuple(
            (_Part(n_scoped + i, None, blocks[n_scoped + i].size, g.scope,
                   *_scope_values(cl, g.scope, shape, g.value_map, g.value_weight)), g)
            for i, g in enumerate(grouped))
        children = tuple((k, part(s)) for k, s in zip(kids, kid_scopes))
        sep_size = math.prod(shape[v] for v in sep) if sep else 1
        # no measurement of the whole scope: the projected form (see structured_log_likelihood)
        projected = bool(not full[c] and blocks)
        gram_index, gram_weight, gram_factors = None, None, None
        if projected and cells_of[c] * (len(blocks) + 1) ** 2 >= factorised_gram_min:
            gram_factors = _gram_factors(cl, sep, shape, blocks)
            gram_index = np.zeros(0, dtype=np.int64)  # marks the projected form; the factors replace the scatter
        elif projected:
            gram_index = _gram_index(sep_map, cells_of[c], sep_size, blocks)
        if gram_factors is None and projected and any(b.weight is not None for b in blocks):
            col = np.stack([np.ones(cells_of[c])] + [np.ones(cells_of[c]) if b.weight is None else b.weight
                                                      for b in blocks])  # (1 + B, K), as _gram_index's pairs
            gram_weight = (col[:, None, :] * col[None, :, :]).reshape(-1)
        eliminated, low_rank = None, 0
        if gram_index is not None:
            # the block with the most cells beyond its low-rank part (the separator's cells
            # and those of the sub-scopes nested in it) is eliminated first, when that part
            # is a small enough share of it (see _projected_clique_eliminating)
            nested = [pt for pt, _ in groups if pt.proj is not None] + [pt for _, pt in children]
            rank = [sep_size + sum(pt.size for pt in nested if pt.block == i) for i in range(len(blocks))]
            # (a child's separator equal to a block's scope makes that block's information dense)
            dense = {pt.block for _, pt in children if pt.proj is None}
            eliminated = _eliminated_block({i: (blocks[i].size, rank[i]) for i in range(len(blocks))
                                            if i not in dense})
            low_rank = 0 if eliminated is None else rank[eliminated]
        covered = {pt.block for pt, g in groups if pt.proj is None and np.unique(g.cells).size == blocks[pt.block].size}
        cliques.append(_Clique(
            size=cells_of[c], table=tuple(shape[v] for v in cl), sep_map=sep_map, sep_size=sep_size,
            full=tuple(full[c]), blocks=blocks,
            groups=groups, children=children, active=active[c], gram_index=gram_index, gram_weight=gram_weight,
            eliminated=eliminated, eliminated_rank=low_rank, gram_factors=gram_factors,
            definite=bool(gram_index is not None and eliminated is None and len(covered) == len(blocks)),
        ))
    return cliques


def likelihood_flops(junction_tree: JunctionTree, shape: Sequence[int], scopes: Sequence[Sequence[int]]) -> int:
    """:attr:`TreeLikelihoodPlan.flops` of a model whose measurements are every cell of each
    of ``scopes`` (domain column indices) on ``junction_tree``: the work of one evaluation of
    the noise-aware likelihood, from the measured scopes alone (which cells are measured, and
    how often, does not change it). Public wherever the scopes are. Priced with every projected
    clique's Gram tables in the one-scatter form, on which AIM's default cap was calibrated
    (:data:`synthinfer.napsu.aim.DEFAULT_MAX_LIKELIHOOD_FLOPS`), whichever form the fit then uses."""
    layout = tuple((tuple(int(v) for v in sc), tuple(range(math.prod(shape[v] for v in sc)))) for sc in scopes)
    return sum(cq.flops for cq in _plan_cliques(junction_tree, shape, layout, factorised_gram_min=1 << 62)
               if cq.active)


class TreeLikelihoodPlan:
    """The fixed (data-independent) part of :func:`structured_log_likelihood` for a network and
    a layout of measured cells: which clique holds each measurement, the blocks of measured
    sub-marginals and separators of each clique, and the 0/1 maps between them. Built once
    (``O(sum_C K_C (number of blocks)^2)``).

    ``factorised_gram_min``: a clique without a measurement of its whole scope forms its Gram
    tables from marginals on pairs of scopes when the one-scatter form would scatter at least
    this many entries (default :data:`FACTORISED_GRAM_MIN_ENTRIES`; 0: always, a huge number:
    never). The likelihood is the same either way; only its cost differs."""

    def __init__(self, network: MarkovNetwork, layout: Layout, *, factorised_gram_min: int | None = None) -> None:
        self.network = network
        self.layout = layout
        self.size = layout_size(layout)
        self.cliques = _plan_cliques(network.junction_tree, network.queries.domain.shape, layout,
                                     factorised_gram_min)
        #: float64 working memory of one evaluation with its gradient, roughly: a dozen copies
        #: (with reverse-mode residuals) of each clique's ``K x (t + r)`` matrices (cell form) or
        #: ``r x r`` matrices (projected form)
        self.bytes_per_point = 8 * 12 * sum(
            (cq.rank + cq.sep_size) ** 2 + (cq.size * (len(cq.blocks) + 1) ** 2 if cq.gram_factors is None
                                             else _factorised_cells(*cq.gram_factors)) if cq.gram_index is not None
            else cq.size * (cq.sep_size + cq.rank + 2) for cq in self.cliques if cq.active)

    @property
    def flops(self) -> int:
        """Rough multiply-adds of one evaluation: the sum of the active cliques' :attr:`_Clique.flops`
        (a gradient costs a small multiple)."""
        return sum(cq.flops for cq in self.cliques if cq.active)


def plan(network: MarkovNetwork, layout: Layout) -> TreeLikelihoodPlan:
    """The network's :class:`TreeLikelihoodPlan` for ``layout``, built once and kept with its programs."""
    return network.programs.get(("tree_likelihood_plan", layout), lambda: TreeLikelihoodPlan(network, layout))


def structured_log_likelihood(
    theta: jax.Array, y: jax.Array, D: jax.Array, n: jax.Array, tree_plan: TreeLikelihoodPlan
) -> jax.Array:
    """``log N(y | n mu_y(theta), n Sigma_y(theta) + diag(D))``, NAPSU-MQ eq. 6, without ``Sigma``.

    Equal to :func:`synthinfer.napsu.likelihood.log_likelihood` for the canonical queries
    (:func:`canonical_layout`) with ``D = sigma_DP^2``; the derivation is in the module
    docstring. Pure JAX in ``theta``, ``y``, ``D`` and ``n`` (usable under ``jit``, ``grad`` and
    ``vmap``; close over the plan).

    Parameters
    ----------
    theta : array, shape (d,)
    y : array, shape (m,)
        Noisy counts of the measured cells, in the plan's layout order.
    D : scalar or array of shape (m,)
        Noise variance of each value (a scalar for ``sigma_DP^2 I``); must be positive.
    n : scalar
        Number of rows.
    tree_plan : TreeLikelihoodPlan
    """
    m = tree_plan.size
    y = jnp.asarray(y, dtype=jnp.float64)
    if y.shape != (m,):
        raise ParameterError(f"y must have shape ({m},) (one value per measured cell), got {y.shape}")
    D = jnp.asarray(D, dtype=jnp.float64)
    if D.shape not in ((), (m,)):
        raise ParameterError(f"D (noise variances) must be a scalar or have shape ({m},), got {D.shape}")
    D = jnp.broadcast_to(D, (m,))
    w = 1.0 / D
    marginals = [t.ravel() for t in tree_plan.network.clique_marginals(theta)]
    cliques = tree_plan.cliques
    messages: list[tuple[jax.Array, jax.Array] | None] = [None] * len(cliques)
    total = -0.5 * jnp.sum(jnp.log(D)) - 0.5 * m * _LOG_2PI
    for c in reversed(range(len(cliques))):
        cq = cliques[c]
        if not cq.active:
            continue
        p = marginals[c]
        K = cq.size
        # -- information collected at this clique: measurements and children's messages
        delta = jnp.zeros(K)
        h = jnp.zeros(K)
        for g in cq.full:
            # the scope's cells are in the clique's axis order: scope cell = clique cell
            r = y[g.rows] - n * p[g.cells]
            total = total - 0.5 * jnp.sum(w[g.rows] * r * r)
            delta = delta.at[g.cells].add(w[g.rows])
            h = h.at[g.cells].add(w[g.rows] * r)
        W = [jnp.zeros((b.size, b.size)) for b in cq.blocks]
        eta = [jnp.zeros(b.size) for b in cq.blocks]

        def add(part: _Part, info: jax.Array, vec: jax.Array) -> None:
            """Block ``part.block`` gains ``R info R^T`` and ``R vec`` (``R``: the map ``part.proj``)."""
            b = part.block
            if part.proj is not None:
                info, vec = info[part.proj][:, part.proj], vec[part.proj]
            W[b] = W[b] + info
            eta[b] = eta[b] + vec

        e = cq.eliminated
        w_diag = None if e is None else jnp.zeros(cq.blocks[e].size)
        low: list[tuple[np.ndarray, jax.Array]] = []  # the eliminated block's nested parts: (proj, J)
        table = p.reshape(cq.table)
        scope_marginals: dict[tuple[int, ...], jax.Array] = {}
        for part, g in cq.groups:
            # the sub-marginal's probabilities (a weighted measurement: each value's weighted sum)
            # from the table's marginal on the part's axes (shared by the parts on one scope).
            # Why not one segment_sum over the clique's cells per part: its reverse mode is a
            # gather of all K cells, a marginal's is a broadcast.
            if part.axes not in scope_marginals:
                other = tuple(a for a in range(len(cq.table)) if a not in part.axes)
                scope_marginals[part.axes] = (jnp.sum(table, axis=other) if other else table).ravel()
            p_u = scope_marginals[part.axes]
            if part.values is not None:
                p_u = jax.ops.segment_sum(p_u if part.weights is None else p_u * part.weights, part.values, part.size)
            r = y[g.rows] - n * p_u[g.cells]
            total = total - 0.5 * jnp.sum(w[g.rows] * r * r)
            w_u = jnp.zeros(part.size).at[g.cells].add(w[g.rows])
            h_u = jnp.zeros(part.size).at[g.cells].add(w[g.rows] * r)
            if part.block == e and part.proj is None:  # kept as a vector: the block is eliminated first
                w_diag = w_diag + w_u
                eta[e] = eta[e] + h_u
            elif part.block == e:
                low.append((part.proj, jnp.diag(w_u)))
                eta[e] = eta[e] + h_u[part.proj]
            else:
                add(part, jnp.diag(w_u), h_u)
        for k, part in cq.children:
            if part.block == e:
                low.append((part.proj, messages[k][0]))
                eta[e] = eta[e] + messages[k][1][part.proj]
            else:
                add(part, *messages[k])
        if cq.gram_index is not None:
            if e is None:
                total, messages[c] = _projected_clique(cq, p, W, eta, n, total)
            else:
                total, messages[c] = _projected_clique_eliminating(cq, p, W, eta, n, total, w_diag, low)
            continue
        # -- the conditional of this clique given its separator: zeta_C ~ N(Q zeta_S, B)
        if cq.sep_map is None:
            L = p[:, None]
            Q = L
        else:
            sep_onehot = jax.nn.one_hot(cq.sep_map, cq.sep_size, dtype=p.dtype)
            L = p[:, None] * sep_onehot
            Q = L / (sep_onehot.T @ p)[None, :]
        if cq.blocks:
            G = jnp.concatenate([jax.nn.one_hot(b.cell_map, b.size, dtype=p.dtype) * (1.0 if b.weight is None else
                                                                                       b.weight[:, None])
                                 for b in cq.blocks], axis=1)
            Wm = jax.scipy.linalg.block_diag(*W)
            h = h + G @ jnp.concatenate(eta)
            GtB = n * (G.T * p[None, :] - (G.T @ L) @ Q.T)  # G^T B
            U = jnp.concatenate([-n * delta[:, None] * L, G], axis=1)
            Vt = jnp.concatenate([Q.T, Wm @ GtB], axis=0)
        else:
            G = None
            U = -n * delta[:, None] * L
            Vt = Q.T
        if cq.sep_map is None:
            Y = h[:, None]
        else:
            JQ = delta[:, None] * Q
            if G is not None:
                JQ = JQ + G @ (Wm @ (G.T @ Q))
            Y = jnp.concatenate([JQ, h[:, None]], axis=1)
        # (I + JB)^{-1} Y by Woodbury, with I + JB = diag(d0) + U Vt
        d0 = 1.0 + n * delta * p
        Ud, Yd = U / d0[:, None], Y / d0[:, None]
        logdet, Z = _logdet_solve(jnp.eye(U.shape[1], dtype=p.dtype) + Vt @ Ud, Vt @ Yd)
        logdet = logdet + jnp.sum(jnp.log(d0))
        X = Yd - Ud @ Z
        x_h = X[:, -1]
        if cq.sep_map is not None:
            j_s = Q.T @ X[:, :-1]
            messages[c] = (0.5 * (j_s + j_s.T), Q.T @ x_h)
        bh = n * (p * h - L @ (Q.T @ h))  # B h
        total = total + 0.5 * jnp.dot(bh, x_h) - 0.5 * logdet
    return total


def _eliminated_block(candidates: dict[int, tuple[int, int]]) -> int | None:
    """Which block of a projected clique to eliminate first, from each candidate's ``(cells,
    low rank)``: the one with the most cells beyond its low-rank part, among those of at least
    :data:`MIN_ELIMINATED_BLOCK` cells whose low rank is at most
    :data:`MAX_ELIMINATED_RANK_SHARE` of them; ``None`` when none is."""
    fits = {i: k - r for i, (k, r) in candidates.items()
            if k >= MIN_ELIMINATED_BLOCK and r <= MAX_ELIMINATED_RANK_SHARE * k}
    return max(fits, key=lambda i: (fits[i], -i)) if fits else None


def _gram_index(sep_map: np.ndarray | None, K: int, t: int, blocks: Sequence[_Block]) -> np.ndarray:
    """Scatter indices of ``E^T diag(c) E`` for ``E = [G_S, G]`` (``K x (t + r)``, one-hot columns
    of the separator and of each block): clique cell ``x`` adds ``c_x`` at ``(e_i(x), e_j(x))``
    for every pair of its ``1 + len(blocks)`` columns; flat indices, shape ``((1 + B)^2 K,)``."""
    cols = [np.zeros(K, dtype=np.int64) if sep_map is None else np.asarray(sep_map, dtype=np.int64)]
    offset = t
    for b in blocks:
        cols.append(offset + b.cell_map)
        offset += b.size
    e = np.stack(cols)  # (1 + B, K)
    return (e[:, None, :] * offset + e[None, :, :]).reshape(-1)


def _gram_tables(cq: _Clique, p: jax.Array) -> tuple[jax.Array, jax.Array, jax.Array]:
    """The projected form's marginal tables of a clique's table ``p``: ``P_GG`` (blocks x
    blocks), ``P_GS`` (blocks x separator), by one scatter-add over the clique's cells
    (:func:`_gram_index`), and ``F = P_GS diag(1/p_S) = G^T Q``."""
    t = cq.sep_size
    if cq.gram_factors is not None:
        P_gg, P_gs = _factorised_gram(*cq.gram_factors, p)
        p_s = jnp.sum(p) if cq.sep_map is None else jax.ops.segment_sum(p, cq.sep_map, t)
        return P_gg, P_gs, P_gs / p_s
    size = t + cq.rank
    scattered = jnp.tile(p, (len(cq.blocks) + 1) ** 2)
    if cq.gram_weight is not None:  # weighted blocks: G's entries multiply in
        scattered = scattered * cq.gram_weight
    P = jnp.zeros(size * size, p.dtype).at[cq.gram_index].add(scattered)
    P = P.reshape(size, size)
    p_s = jnp.sum(p) if cq.sep_map is None else jax.ops.segment_sum(p, cq.sep_map, t)
    return P[t:, t:], P[t:, :t], P[t:, :t] / p_s


def _gram_factors(clique: tuple[int, ...], sep: tuple[int, ...], shape: Sequence[int], blocks: Sequence[_Block]
                  ) -> tuple[tuple[int, ...], tuple[tuple[tuple[int, ...], np.ndarray], ...]]:
    """:attr:`_Clique.gram_factors`: each column of ``E = [G_S, G]`` is a function of the cell of
    one scope of the clique (the separator's, or a block's), so ``E``'s columns of that scope are
    a ``(scope cells x values)`` matrix ``F`` (one entry per row: the value's weight, 1 unless
    weighted) read off the clique-cell maps."""
    table = tuple(shape[v] for v in clique)
    sep_axes = tuple(clique.index(v) for v in sep)
    t = math.prod(table[a] for a in sep_axes)
    parts = [(sep_axes, np.eye(t))]
    for b in blocks:  # a block's value is a function of its scope's cell
        value, weight = _scope_values(clique, b.scope, shape, b.cell_map, b.weight)
        F = np.zeros((value.size, b.size))
        F[np.arange(value.size), value] = 1.0 if weight is None else weight
        parts.append((tuple(b.scope), F))
    return table, tuple(parts)


def _pairs(parts: Sequence[tuple[tuple[int, ...], np.ndarray]]) -> list[tuple[int, int, tuple[int, ...]]]:
    """The ``(i, j, union of their axes)`` of :func:`_factorised_gram`: each block with each block
    from itself on, and with the separator (part 0)."""
    return [(i, j, tuple(sorted(set(parts[i][0]) | set(parts[j][0]))))
            for i in range(1, len(parts)) for j in [0, *range(i, len(parts))]]


def _factorised_cells(table: tuple[int, ...], parts) -> int:
    """Cells of the marginal tables :func:`_factorised_gram` forms (its working memory, roughly)."""
    return sum(math.prod(table[a] for a in u) for u in {u for _, _, u in _pairs(parts)})


def _factorised_flops(table: tuple[int, ...], parts) -> int:
    """Rough multiply-adds of :func:`_factorised_gram`: each distinct union's marginal (a pass
    over the clique) and, per pair, its marginal times the smaller factor's values, then the
    two factors' product."""
    K = math.prod(table)
    unions = {u for _, _, u in _pairs(parts)}
    work = K * len(unions)
    for i, j, u in _pairs(parts):
        ki, kj = parts[i][1].shape[1], parts[j][1].shape[1]
        work += math.prod(table[a] for a in u) * min(ki, kj) + parts[i][1].shape[0] * ki * kj
    return work


def _factorised_gram(table: tuple[int, ...], parts, p: jax.Array) -> tuple[jax.Array, jax.Array]:
    """``P_GG = G^T diag(p) G`` and ``P_GS = G^T diag(p) G_S`` of a projected clique from its
    table's marginals: for scopes ``X, Y`` with factors ``F_X, F_Y`` (:func:`_gram_factors`),

        (G_X^T diag(p) G_Y)[u, v] = sum over cells z of X ∪ Y of p_{X ∪ Y}(z) F_X[z_X, u] F_Y[z_Y, v],

    one contraction of the marginal on ``X ∪ Y`` (an einsum), so the cost is the marginals'
    cells times a factor's values instead of ``(1 + B)^2`` scattered entries per clique cell.
    The same numbers as :func:`_gram_tables`' scatter-add."""
    full = p.reshape(table)
    letters = "abcdefghijklmnopqrstuvw"
    if len(table) > len(letters):
        raise ParameterError(f"a clique of {len(table)} columns is beyond the factorised Gram tables' {len(letters)}")
    # each factor with one axis per scope column (then its values), made a constant once
    factors = [jnp.asarray(F.reshape([table[a] for a in axes] + [F.shape[1]])) for axes, F in parts]
    letters_of = ["".join(letters[a] for a in axes) for axes, _ in parts]
    marginals: dict[tuple[int, ...], jax.Array] = {}
    block: dict[tuple[int, int], jax.Array] = {}
    for i, j, u in _pairs(parts):
        if u not in marginals:
            other = tuple(a for a in range(len(table)) if a not in u)
            marginals[u] = jnp.sum(full, axis=other) if other else full
        union = "".join(letters[a] for a in u)
        block[i, j] = jnp.einsum(f"{union},{letters_of[i]}X,{letters_of[j]}Y->XY", marginals[u], factors[i], factors[j])
    n = len(parts)
    P_gg = jnp.concatenate([jnp.concatenate([block[i, j] if j >= i else block[j, i].T for j in range(1, n)], axis=1)
                            for i in range(1, n)], axis=0)
    P_gs = jnp.concatenate([block[i, 0] for i in range(1, n)], axis=0)
    return P_gg, P_gs


def _lu(M: jax.Array) -> tuple[jax.Array, Callable[[jax.Array], jax.Array]]:
    """``log |det M|`` and ``B -> M^{-1} B`` from one pivoted LU, ``M[perm] = L U``."""
    lu, _, perm = jax.lax.linalg.lu(M)

    def solve(B: jax.Array) -> jax.Array:
        y = jax.lax.linalg.triangular_solve(lu, B[perm], left_side=True, lower=True, unit_diagonal=True)
        return jax.lax.linalg.triangular_solve(lu, y, left_side=True, lower=False)

    return jnp.sum(jnp.log(jnp.abs(jnp.diagonal(lu)))), solve


def _cholesky(C: jax.Array) -> tuple[jax.Array, Callable[[jax.Array], jax.Array]]:
    """``log det C`` and ``B -> C^{-1} B`` from the Cholesky factor of the symmetric positive
    definite ``C`` (as :func:`jnp.linalg.cholesky`, of ``(C + C^T) / 2``)."""
    L = jnp.linalg.cholesky(C)
    return 2.0 * jnp.sum(jnp.log(jnp.diagonal(L))), lambda B: jax.scipy.linalg.cho_solve((L, True), B)


def _logdet_solve_by(factor: Callable, symmetric: bool) -> Callable[..., tuple[jax.Array, jax.Array]]:
    r"""``(M, B) -> (log |det M|, M^{-1} B)`` from one factorisation of ``M`` (``factor``: :func:`_lu`
    or :func:`_cholesky`), with its derivative given directly (Magnus and Neudecker 2019, Ch. 8):

        d log |det M| = tr(M^{-1} dM),   d(M^{-1} B) = M^{-1} (dB - dM M^{-1} B),

    so reverse mode costs one solve for ``M^{-1}`` and one transposed solve for the cotangent
    of ``M^{-1} B``. JAX's own rules instead differentiate through the factorisation (the
    factors' tangents, then each triangular solve's): more small kernels and ``r^3`` products
    per gradient (docs/napsu-sampler.md). As a custom JVP, forward mode and higher-order
    derivatives (``jax.hessian``) keep working. ``symmetric``: the factorisation reads
    ``(M + M^T) / 2``, and so the rule reads the tangent's symmetric part."""

    @jax.custom_jvp
    def logdet_solve(M: jax.Array, B: jax.Array) -> tuple[jax.Array, jax.Array]:
        logdet, solve = factor(M)
        return logdet, solve(B)

    @logdet_solve.defjvp
    def jvp(primals: tuple, tangents: tuple) -> tuple[tuple, tuple]:
        (M, B), (dM, dB) = primals, tangents
        if symmetric:
            dM = 0.5 * (dM + dM.T)
        logdet, solve = factor(M)
        X, M_inv = solve(B), solve(jnp.eye(M.shape[0], dtype=M.dtype))
        return (logdet, X), (jnp.sum(M_inv.T * dM), solve(dB - dM @ X))

    return logdet_solve


_logdet_solve = _logdet_solve_by(_lu, symmetric=False)
_spd_logdet_solve = _logdet_solve_by(_cholesky, symmetric=True)


def _block_diagonal_times(W: Sequence[jax.Array], X: jax.Array, bounds: np.ndarray) -> jax.Array:
    """``blockdiag(W) X``, block by block. The rows of ``X`` are cut by one ``split``, whose
    reverse mode is one concatenation: with a slice per block, each slice's cotangent is padded
    to ``X``'s full shape and summed, and XLA recomputes that sum inside every consumer of the
    result (docs/continuous-columns.md)."""
    parts = jnp.split(X, bounds[1:-1], axis=0) if len(W) > 1 else [X]
    return jnp.concatenate([w @ x for w, x in zip(W, parts)], axis=0)


def _projected_clique(cq: _Clique, p: jax.Array, W: list[jax.Array], eta: list[jax.Array], n: jax.Array,
                      total: jax.Array) -> tuple[jax.Array, tuple[jax.Array, jax.Array] | None]:
    r"""A clique with no measurement of its whole scope, in the ``r`` coordinates of its blocks.

    Here ``J = G W G^T`` and ``h = G eta``, so by the push-through identity
    ``(I + JB)^{-1} G = G M^{-1}`` with ``M = I_r + W A``, ``A = G^T B G``, and (Sylvester)
    ``det(I + JB) = det M``:

        log c_C = eta^T A M^{-1} eta / 2 - log det M / 2,
        J_S = F^T M^{-1} W F,   h_S = F^T M^{-1} eta,   F = G^T Q.

    ``A = n (P_GG - P_GS diag(1/p_S) P_SG)`` and ``F = P_GS diag(1/p_S)`` need only the
    marginal tables ``P_XY = G_X^T diag(p) G_Y`` of the clique's table on pairs of blocks and the
    separator, one scatter-add over the clique's cells (:func:`_gram_index`): cost
    ``O(K B^2 + r^3)`` instead of ``O(K (t + r)^2)`` for the cell form. Triangulation makes such
    cliques (several measured 2-way marginals closing a cycle), where ``r`` is a fraction of ``K``.
    In a large clique with many blocks the scatter itself dominates; there the tables come from
    the clique's marginals on pairs of scopes instead (:func:`_factorised_gram`).
    """
    P_gg, P_gs, F = _gram_tables(cq, p)
    A = n * (P_gg - F @ P_gs.T)
    e = jnp.concatenate(eta)
    bounds = np.cumsum([0] + [b.size for b in cq.blocks])

    def times_w(X: jax.Array) -> jax.Array:  # W X block by block (W is block-diagonal)
        return _block_diagonal_times(W, X, bounds)

    if cq.definite:
        return _projected_clique_definite(cq, W, A, F, e, total)
    rhs = e[:, None] if cq.sep_map is None else jnp.concatenate([e[:, None], times_w(F)], axis=1)
    logdet, X = _logdet_solve(jnp.eye(cq.rank, dtype=p.dtype) + times_w(A), rhs)
    x = X[:, 0]  # M^{-1} eta
    total = total + 0.5 * jnp.dot(e, A @ x) - 0.5 * logdet
    if cq.sep_map is None:
        return total, None
    j_s = F.T @ X[:, 1:]
    return total, (0.5 * (j_s + j_s.T), F.T @ x)


def _projected_clique_definite(cq: _Clique, W: list[jax.Array], A: jax.Array, F: jax.Array, e: jax.Array,
                               total: jax.Array) -> tuple[jax.Array, tuple[jax.Array, jax.Array] | None]:
    r""":func:`_projected_clique` where every block's information is positive definite
    (:attr:`_Clique.definite`): then ``M = I + W A = W C`` with ``C = W^{-1} + A`` symmetric
    positive definite (``A`` is positive semi-definite), so

        log det M = log det W + log det C,   M^{-1} eta = C^{-1} W^{-1} eta,   J_S = F^T C^{-1} F,

    by Cholesky factors of ``C`` and of ``W``'s small blocks. Why not the pivoted LU of ``M``:
    on the CPU, turning LAPACK's pivots into a permutation is an ``r``-step loop, and Cholesky
    needs no pivots and half the work (docs/continuous-columns.md)."""
    inverses = [_spd_logdet_solve(Wb, jnp.eye(Wb.shape[0], dtype=Wb.dtype)) for Wb in W]
    w_inv = jax.scipy.linalg.block_diag(*[inv for _, inv in inverses])
    rhs = (w_inv @ e)[:, None] if cq.sep_map is None else jnp.concatenate([(w_inv @ e)[:, None], F], axis=1)
    logdet, X = _spd_logdet_solve(w_inv + 0.5 * (A + A.T), rhs)
    logdet = logdet + sum(ld for ld, _ in inverses)
    x = X[:, 0]  # M^{-1} eta
    total = total + 0.5 * jnp.dot(e, A @ x) - 0.5 * logdet
    if cq.sep_map is None:
        return total, None
    j_s = F.T @ X[:, 1:]
    return total, (0.5 * (j_s + j_s.T), F.T @ x)


def _projected_clique_eliminating(
    cq: _Clique, p: jax.Array, W: list[jax.Array], eta: list[jax.Array], n: jax.Array, total: jax.Array,
    w1: jax.Array, low: Sequence[tuple[np.ndarray, jax.Array]],
) -> tuple[jax.Array, tuple[jax.Array, jax.Array] | None]:
    r""":func:`_projected_clique` with block 1 (:attr:`_Clique.eliminated`, ``K_1`` cells)
    eliminated first, so that no ``r x r`` matrix is factorised.

    Block 1's information is ``W_1 = diag(w_1) + sum_u R_u J_u R_u^T``: measurements of exactly
    its scope, plus the sub-scopes ``u`` nested in it (measured sub-marginals, children's
    separators; ``R_u`` the 0/1 map ``proj``). A block's own Gram table is diagonal (its cells
    are exclusive), so ``A_11 = n diag(p_1) - n F_1 V^T`` (``V = P_1S``) and

        M_11 = I + W_1 A_11 = diag(d_1) - U V'^T,   d_1 = 1 + n w_1 p_1,
        U = [n w_1 F_1, -R_u ...],   V' = [V, A_11 R_u J_u ...],

    a diagonal minus rank ``k = t + sum_u K_u`` (:attr:`_Clique.eliminated_rank`), inverted by
    Woodbury through a ``k x k`` LU. With ``Y = M_11^{-1} M_12`` the Schur complement
    ``Sc = M_22 - M_21 Y`` (``r_2 = r - K_1`` square) gives ``det M = det M_11 det Sc`` and the
    block solve ``x_2 = Sc^{-1} (z_2 - M_21 M_11^{-1} z_1)``, ``x_1 = M_11^{-1} z_1 - Y x_2``.
    Cost ``O(K_1 (r_2 + k)^2 + r_2^3 + k^3)`` instead of ``O(r^3)``: a measured marginal of
    several hundred cells inside a triangulated clique no longer sets the cost.
    """
    t = cq.sep_size
    P_gg, P_gs, F = _gram_tables(cq, p)
    bounds = np.cumsum([0] + [b.size for b in cq.blocks])
    e1 = cq.eliminated
    i1 = np.arange(bounds[e1], bounds[e1 + 1])
    rest = [i for i in range(len(cq.blocks)) if i != e1]
    i2 = np.concatenate([np.arange(bounds[i], bounds[i + 1]) for i in rest]) if rest else np.zeros(0, np.int64)
    bounds2 = np.cumsum([0] + [cq.blocks[i].size for i in rest])
    F1, F2, V = F[i1], F[i2], P_gs[i1]
    p1 = jnp.diagonal(P_gg)[i1]
    A12 = n * (P_gg[np.ix_(i1, i2)] - F1 @ P_gs[i2].T)  # K_1 x r_2
    A22 = n * (P_gg[np.ix_(i2, i2)] - F2 @ P_gs[i2].T)
    R = [jax.nn.one_hot(proj, J.shape[0], dtype=p.dtype) for proj, J in low]  # K_1 x K_u each

    def times_a11(X: jax.Array) -> jax.Array:
        return n * (p1[:, None] * X - F1 @ (V.T @ X))

    def times_w1(X: jax.Array) -> jax.Array:
        out = w1[:, None] * X
        for Ru, (_, J) in zip(R, low):
            out = out + Ru @ (J @ (Ru.T @ X))
        return out

    def times_w2(X: jax.Array) -> jax.Array:  # W_2 X, block by block
        return _block_diagonal_times([W[b] for b in rest], X, bounds2)

    # M_11^{-1} = D^{-1} + D^{-1} U S^{-1} V'^T D^{-1},  S = I_k - V'^T D^{-1} U
    d1 = 1.0 + n * w1 * p1
    U = jnp.concatenate([n * w1[:, None] * F1] + [-Ru for Ru in R], axis=1)
    Vp = jnp.concatenate([V] + [times_a11(Ru) @ J for Ru, (_, J) in zip(R, low)], axis=1)
    Ud = U / d1[:, None]
    e_1, e_2 = eta[e1], (jnp.concatenate([eta[b] for b in rest]) if rest else jnp.zeros(0))
    # Right-hand sides [eta, W F] of the block solve, and M_12 for Y: all of block 1's solves at once.
    Z1 = [times_w1(A12)] if rest else []
    Z1 += [e_1[:, None]] + ([times_w1(F1)] if cq.sep_map is not None else [])
    Z2 = [e_2[:, None]] + ([times_w2(F2) if rest else F2] if cq.sep_map is not None else [])
    Zd = jnp.concatenate(Z1, axis=1) / d1[:, None]
    logdet, S_z = _logdet_solve(jnp.eye(U.shape[1], dtype=p.dtype) - Vp.T @ Ud, Vp.T @ Zd)
    z1 = Zd + Ud @ S_z  # M_11^{-1} Z1
    logdet = logdet + jnp.sum(jnp.log(d1))
    z2 = jnp.concatenate(Z2, axis=1)
    if rest:
        Y, z1 = z1[:, :len(i2)], z1[:, len(i2):]  # Y = M_11^{-1} M_12
        M21 = times_w2(A12.T)
        logdet_c, x2 = _logdet_solve(jnp.eye(len(i2), dtype=p.dtype) + times_w2(A22) - M21 @ Y, z2 - M21 @ z1)
        logdet = logdet + logdet_c
        x1 = z1 - Y @ x2
    else:
        x1, x2 = z1, z2
    ax1 = times_a11(x1[:, :1])[:, 0] + A12 @ x2[:, 0]  # (A x)_1 for x = M^{-1} eta
    ax2 = A12.T @ x1[:, 0] + A22 @ x2[:, 0]
    total = total + 0.5 * (jnp.dot(e_1, ax1) + jnp.dot(e_2, ax2)) - 0.5 * logdet
    if cq.sep_map is None:
        return total, None
    j_s = F1.T @ x1[:, 1:] + F2.T @ x2[:, 1:]
    return total, (0.5 * (j_s + j_s.T), F1.T @ x1[:, 0] + F2.T @ x2[:, 0])


def _cells(clique: tuple[int, ...], scope: tuple[int, ...], shape) -> int:
    """Cells of the sub-table of ``clique`` on the clique axes ``scope``."""
    return math.prod(shape[clique[a]] for a in scope)


def _scope_values(clique: tuple[int, ...], scope: tuple[int, ...], shape, value_map: np.ndarray,
                  value_weight: np.ndarray | None) -> tuple[np.ndarray, np.ndarray | None]:
    """Each cell of the sub-table on ``scope`` (clique axes, ascending; row-major): its value and
    its weight (``None``: every weight 1), read off the clique-cell maps ``value_map``,
    ``value_weight``, which are functions of the scope's cell."""
    to_scope = _cell_map(clique, tuple(clique[a] for a in scope), shape)
    value = np.zeros(_cells(clique, scope, shape), dtype=np.int64)
    value[to_scope] = value_map
    if value_weight is None:
        return value, None
    weight = np.ones(value.size)
    weight[to_scope] = value_weight
    return value, weight


def _cell_map(clique: tuple[int, ...], columns: tuple[int, ...], shape) -> np.ndarray:
    """Each cell of ``clique`` (row-major) -> its row-major cell in the sub-table on ``columns``."""
    grid = np.indices([shape[v] for v in clique]).reshape(len(clique), -1)
    return np.ravel_multi_index(tuple(grid[clique.index(v)] for v in columns), [shape[v] for v in columns])


def _reorder_cells(cells: np.ndarray, cols: tuple[int, ...], sorted_cols: tuple[int, ...], shape) -> np.ndarray:
    """Flat cells of a table on ``cols`` re-indexed to the same table with axes ``sorted_cols``."""
    idx = np.unravel_index(cells, [shape[v] for v in cols])
    by_col = dict(zip(cols, idx))
    return np.ravel_multi_index(tuple(by_col[v] for v in sorted_cols), [shape[v] for v in sorted_cols])
