"""NAPSU-MQ's model in interaction parameters, with near-empty interactions tied.

The canonical parameters ``theta`` (Supplement C, :class:`~synthinfer.napsu.queries.
CanonicalQueries`) and the reference-coded log-linear interactions ``lambda = M theta``
(:func:`~synthinfer.napsu.queries.interaction_matrix`; ``det M = 1``) describe the same family

    log p(x) = const + sum_(D, v) lambda_D(v) 1[x_D = v]

over every scope ``D`` of the marginals and every value ``v`` of ``D`` with all components off
the reference. Each feature ``1[x_D = v]`` is a set of cells of ``D``'s host marginal (the
first that contains it), so a :class:`~synthinfer.napsu.network.MarkovNetwork` takes these
features as its parameters as readily as the canonical cells: potentials ``B lambda`` with
``B`` the features' cell incidence.

**Tied interactions.** Selection (AIM, MST) adds marginals measured with large noise, and most
of their cells' counts lie within a few noise standard deviations of zero: every such cell has
a free interaction that only the prior bounds, and those directions are what makes NUTS slow at
the scale of real tables (docs/napsu-sampler.md). A *tie* gives a set of interactions of one
scope ``D`` a single parameter: ``lambda_D(v) = phi_g`` for ``v`` in ``g``, i.e. the feature
``1[x_D in g]``. The cells of a tie then follow their categories' main effects and lower-order
interactions with one common offset, the group's total, which their summed counts measure far
better than any one of them. It is a smaller log-linear model (a sub-family), chosen from the
noisy counts (:func:`near_empty_ties`: post-processing, no privacy cost); the likelihood (eq. 6)
still uses every measured value, and the interaction prior (:func:`synthinfer.napsu.likelihood.
log_interaction_prior`) puts ``N(0, tau^2)`` on each tied parameter as on any interaction.
Scopes inside the analyst's marginals are never tied for being near-empty.

**Coarse interactions.** A marginal that names a derived column (a public many-to-one map of
its source, e.g. an age group of fine age bins) is measured as its coarse table (AIM's rounds:
on the source's cells); :func:`coarse_ties` ties its interactions with that column by the map's groups wherever no
marginal names the source itself, so one model holds fine age in ``(age, income)`` and age
groups in ``(age_group, race)`` with few parameters for the latter.

**Linear coarse interactions.** Constant within a group, a coarse interaction of a numeric
column flattens the relation inside each group (an age group's log-odds of income cannot rise
with age), and a slope fitted to the synthetic data comes out attenuated. :func:`coarse_slopes`
adds one parameter per coarse group and numeric coarse column, the group's slope in the
column's value: ``lambda_D(v) = phi_g + psi_g (x(v_c) - a_g) / h_g`` (``a_g`` the group's centre,
``h_g`` its half-width; the reference's group has no ``phi`` and ``a_g = x(x*_c)``), i.e. the
weighted feature ``sum_v (x(v_c) - a_g) / h_g 1[x_D = v]``. The log-linear model stays
exponential-family on the fine domain, piecewise linear in the number across groups, with two
parameters per group instead of one per fine value.

**Linear-by-linear trends.** The interaction prior ``N(0, tau^2)`` centres every association on
independence. Between two numbers measured only through groups at a small epsilon, the
within-group part of their association is mostly the prior's, and centred there it attenuates
the numbers' covariance (and an OLS of one on the other). :func:`linear_by_linear` adds one
parameter per pair of numeric columns, ``lambda_(a, b)(v) += t (x_a(v_a) - x_a*) (x_b(v_b) - x_b*) /
(h_a h_b)``, the linear-by-linear association (Goodman 1979; Agresti 2013, *Categorical Data
Analysis*, sec. 10.5.1), under the main effects' wide prior: the coarse table measures it well,
and the pair's interactions are then shrunk towards that trend instead of towards zero.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence

import numpy as np
from scipy import sparse
from scipy.sparse.linalg import spsolve

from synthinfer.errors import ParameterError
from synthinfer.napsu.measurements import Measurement
from synthinfer.napsu.queries import CanonicalQueries


class InteractionFeatures:
    """The reference-coded interactions of ``queries``' model as parameters, some tied.

    Parameters
    ----------
    queries : CanonicalQueries
        The canonical queries; each defines one interaction ``(D, v)``: its cell's scope of
        off-reference components and their values.
    ties : iterable of sequences of canonical query indices
        Groups whose interactions share one parameter. Each group's queries must share their
        host marginal and scope (main effects too: a column measured only in groups).
    zero : iterable of canonical query indices
        Interactions fixed at zero (no parameter; in no tie): a coarse column's group that holds
        its reference category (:func:`coarse_ties`).
    slopes : iterable of ``(members, weights)``
        Weighted parameters (:func:`coarse_slopes`): each sets ``lambda_j += psi w_j`` for its
        members ``j`` (canonical query indices sharing a host marginal and scope; they may also
        be tied or fixed at zero), with finite weights ``w_j``. They come after the other
        parameters.
    trends : iterable of ``(members, weights)``
        Weighted parameters as ``slopes``, but under the main effects' prior, not shrunk
        (:func:`linear_by_linear`); they come last.

    Attributes
    ----------
    canonical : CanonicalQueries
        ``queries``.
    members : tuple of int64 arrays
        For each parameter, the canonical queries whose interactions it sets (one unless tied);
        parameters are in the order of their first member.
    order : ndarray of int64
        Each parameter's interaction order ``|D|``.
    query_marginal : ndarray of int64
        Each parameter's host marginal (an index into ``queryset``).
    cells : tuple of int64 arrays
        Each parameter's cells of its host marginal (flat, row-major, ascending): those with
        ``x_D`` in its values.
    cell_weights : tuple of float64 arrays
        The feature's value on each of ``cells``: 1, or a slope's weight of the cell's member.
    slopes, trends : tuple of ``(members, weights)``
        As given (members and weights as tuples).
    is_slope, is_trend : ndarray of bool
        Which parameters are slopes, and trends (the last ``len(trends)``).
    shrunk : ndarray of bool
        Which parameters take the interaction prior (:func:`synthinfer.napsu.likelihood.
        log_interaction_prior`): those of order two or more but trends, and every slope (a
        deviation from its group's constant, or a spline's change of slope,
        :func:`spline_main_effects`).
    """

    def __init__(self, queries: CanonicalQueries, ties: Iterable[Sequence[int]] = (), zero: Iterable[int] = (),
                 slopes: Iterable[tuple[Sequence[int], Sequence[float]]] = (),
                 trends: Iterable[tuple[Sequence[int], Sequence[float]]] = ()) -> None:
        self.canonical = queries
        d = queries.dimension
        support, values = _supports(queries)
        order = np.array([len(s) for s in support], dtype=np.int64)
        group_of = np.arange(d)
        self.ties = tuple(tuple(sorted(int(j) for j in g)) for g in ties)
        self.zero = tuple(sorted({int(j) for j in zero}))
        seen: set[int] = set()
        for j in self.zero:
            if not 0 <= j < d:
                raise ParameterError(f"zero interaction {j} is not a canonical query index in [0, {d})")
            seen.add(j)
            group_of[j] = -1
        for g in self.ties:
            if len(g) < 2:
                raise ParameterError(f"a tie needs at least two canonical queries, got {list(g)}")
            for j in g:
                if not 0 <= j < d:
                    raise ParameterError(f"tie member {j} is not a canonical query index in [0, {d})")
                if j in seen:
                    raise ParameterError(f"canonical query {j} is in more than one tie (or fixed at zero)")
                seen.add(j)
            first = g[0]
            for j in g:
                if queries.query_marginal[j] != queries.query_marginal[first] or support[j] != support[first]:
                    raise ParameterError(f"tied queries {list(g)} must share their marginal and scope")
            group_of[list(g)] = first
        self.slopes = tuple((tuple(int(j) for j in mem), tuple(float(w) for w in wts)) for mem, wts in slopes)
        self.trends = tuple((tuple(int(j) for j in mem), tuple(float(w) for w in wts)) for mem, wts in trends)
        for mem, wts in self.slopes + self.trends:
            if not mem or len(mem) != len(wts) or len(set(mem)) != len(mem):
                raise ParameterError(f"a slope needs distinct members and one weight each, got {list(mem)}, {list(wts)}")
            if not all(0 <= j < d for j in mem):
                raise ParameterError(f"slope members {list(mem)} are not all canonical query indices in [0, {d})")
            if not np.all(np.isfinite(wts)):
                raise ParameterError(f"slope weights must be finite, got {list(wts)}")
            if any(queries.query_marginal[j] != queries.query_marginal[mem[0]] or support[j] != support[mem[0]]
                   for j in mem):
                raise ParameterError(f"slope members {list(mem)} must share their marginal and scope")
        firsts = np.unique(group_of[group_of >= 0])  # each parameter at its first member's position
        members = [np.flatnonzero(group_of == f) for f in firsts]
        weights = [np.ones(len(m)) for m in members]
        for mem, wts in self.slopes + self.trends:
            members.append(np.asarray(mem, dtype=np.int64))
            weights.append(np.asarray(wts, dtype=np.float64))
        self.members = tuple(members)
        self._member_weights = tuple(weights)
        heads = np.array([int(m[0]) for m in members], dtype=np.int64)
        self.order = order[heads] if heads.size else np.zeros(0, dtype=np.int64)
        self.query_marginal = queries.query_marginal[heads] if heads.size else np.zeros(0, dtype=np.int64)
        cells, cell_weights = [], []
        grids: dict[int, np.ndarray] = {}  # each host marginal's cells as value tuples, made once
        for head, mem, wts in zip(heads, members, weights):
            i = int(queries.query_marginal[head])
            m = queries.marginals[i]
            if i not in grids:
                shape = m.shape(queries.domain)
                grids[i] = np.indices(shape).reshape(len(shape), -1)
            grid = grids[i]
            axes = [m.columns.index(c) for c in support[head]]
            value = np.zeros(grid.shape[1])  # members' cells are disjoint (distinct values of one scope)
            hit = np.zeros(grid.shape[1], dtype=bool)
            for j, w in zip(mem, wts):
                at = np.all(grid[axes] == np.asarray(values[j])[:, None], axis=0)
                hit |= at
                value[at] = w
            cells.append(np.flatnonzero(hit))
            cell_weights.append(value[cells[-1]])
        self.cells = tuple(cells)
        self.cell_weights = tuple(cell_weights)
        self.dimension = len(self.members)
        rows = np.concatenate(self.members) if self.members else np.zeros(0, dtype=np.int64)
        cols = np.repeat(np.arange(self.dimension), [len(m) for m in self.members])
        vals = np.concatenate(weights) if weights else np.zeros(0)
        #: ``lambda = E phi`` (canonical interactions x parameters; 0/1 but for slopes' weights)
        self.expansion = sparse.csr_array((vals, (rows, cols)), shape=(d, self.dimension))
        position = np.arange(self.dimension)
        self.is_trend = position >= self.dimension - len(self.trends)
        self.is_slope = (position >= self.dimension - len(self.trends) - len(self.slopes)) & ~self.is_trend
        self.shrunk = ((self.order >= 2) | self.is_slope) & ~self.is_trend

    # the canonical queries' public facts, unchanged by the parametrisation
    @property
    def domain(self):
        return self.canonical.domain

    @property
    def queryset(self):
        return self.canonical.queryset

    @property
    def marginals(self):
        return self.canonical.marginals

    @property
    def reference(self):
        return self.canonical.reference

    @property
    def kept(self):
        return self.canonical.kept

    @property
    def l2_sensitivity(self) -> float:
        return self.canonical.l2_sensitivity

    def interactions(self) -> tuple[sparse.csr_array, np.ndarray]:
        """``(I, shrunk)``: the parameters are interactions already (a tie is one interaction),
        and :attr:`shrunk` says which take the interaction prior."""
        return sparse.identity(self.dimension, format="csr"), self.shrunk

    def to_canonical(self) -> np.ndarray:
        """The dense ``d x d'`` matrix ``A = M^-1 E`` with ``theta = A phi``: the canonical
        parameters of the same distribution (for comparisons and tests)."""
        from synthinfer.napsu.queries import interaction_matrix

        M, _ = interaction_matrix(self.canonical)
        out = spsolve(sparse.csc_array(M), self.expansion.toarray())
        return np.asarray(out, dtype=np.float64).reshape(self.canonical.dimension, self.dimension)

    def summarise(self, s: np.ndarray, sigma: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Per parameter, the summed noisy count of its members' canonical cells and the sum's
        noise sd (members measured independently): what samplers' diagnostics read per
        parameter (post-processing). A slope's feature is the weighted sum of its members'
        cells, so its sd is ``sqrt(sum_j w_j^2 sigma_j^2)``; its count is ``+inf``: moving mass
        inside a group cannot empty the group, so a slope is never one-sided
        (:func:`synthinfer.napsu.reparam.one_sided_cells`), nor is a trend."""
        s = np.asarray(s, dtype=np.float64)
        var = np.broadcast_to(np.asarray(sigma, dtype=np.float64) ** 2, s.shape)
        weighted = self.is_slope | self.is_trend
        counts = np.array([np.inf if w else s[m].sum() for m, w in zip(self.members, weighted)])
        # a member of weight 0 adds nothing, even unmeasured (infinite variance)
        return counts, np.sqrt(np.array([(w**2 * np.where(w == 0, 0.0, var[m])).sum()
                                         for w, m in zip(self._member_weights, self.members)]))

    def __repr__(self) -> str:
        n_tied = sum(len(g) for g in self.ties)
        return (f"InteractionFeatures({self.dimension} parameters: {self.canonical.dimension} interactions, "
                f"{n_tied} of them in {len(self.ties)} ties, {len(self.zero)} fixed at zero, "
                f"{len(self.slopes)} slopes, {len(self.trends)} trends)")


def _supports(queries: CanonicalQueries) -> tuple[list[tuple[str, ...]], list[tuple[int, ...]]]:
    """Each canonical query's scope ``D`` (its cell's off-reference columns, in the marginal's
    order) and the values ``v`` there."""
    support, values = [], []
    for i, flat in zip(queries.query_marginal, queries.query_cell):
        m = queries.marginals[i]
        cell = np.unravel_index(int(flat), m.shape(queries.domain))
        on = [(c, int(v)) for c, v in zip(m.columns, cell) if v != queries.reference[c]]
        support.append(tuple(c for c, _ in on))
        values.append(tuple(v for _, v in on))
    return support, values


def coarse_ties(queries: CanonicalQueries, versions: Iterable[tuple[Sequence[str], Mapping[str, np.ndarray]]]
                ) -> tuple[list[list[int]], list[int]]:
    """Ties that make the interactions of coarsened columns coarse: one parameter per group of
    categories, where every marginal holding an interaction's scope names a column coarsely.

    ``versions`` are the marginals as named, on the model's columns: ``(columns, maps)`` with
    ``maps[c]`` the code map (source code -> group) of each column ``c`` named through a derived
    column (:attr:`synthinfer.data.Domain.derived`), e.g. ``(("age", "race"), {"age": age_group})``
    for a marginal ``("age_group", "race")``; ``{}`` for a marginal of source columns.

    For a scope ``D``, a column ``c`` of ``D`` is *coarse* when every
    version whose columns contain ``D`` names it through a map; its groups are then those of all
    those maps together (their common refinement), and it is fine when any version names it
    directly. The interactions ``lambda_D(v)`` whose values fall in the same group of each
    coarse column and agree on the fine ones share one parameter: the features become
    ``1[x_c in g, x_rest = v_rest]``, functions of the fine column, so the model keeps the fine
    domain (and, where a marginal names the column itself, its fine main effects) while the
    coarse relations cost one parameter per group
    (docs/continuous-columns.md, "Fine and coarse versions of one column"). A column that every
    marginal names through its groups has its main effects tied the same way (its distribution
    inside a group is then uniform, or log-linear with :func:`coarse_slopes`: nothing measures
    more). A group that holds a coarse column's reference category ``x*_c`` is fixed at
    zero: its value at ``x*_c`` is not an interaction of ``D`` (reference coding sets it to 0), so
    the coarse feature's parameter is 0 and its other members' interactions are too.

    Returns ``(ties, zero)``: the groups of two or more queries, and the queries fixed at zero
    (:class:`InteractionFeatures`).
    """
    versions = [(frozenset(cols), {c: np.asarray(mp) for c, mp in maps.items()}) for cols, maps in versions]
    support, values = _supports(queries)
    groups: dict[tuple, list[int]] = {}
    zero: list[int] = []
    for j, (scope, vals) in enumerate(zip(support, values)):
        holders = [maps for cols, maps in versions if set(scope) <= cols]
        key, coarse, with_reference = [], False, False
        for c, v in zip(scope, vals):
            if holders and all(c in maps for maps in holders):
                group = tuple(int(maps[c][v]) for maps in holders)
                with_reference |= group == tuple(int(maps[c][queries.reference[c]]) for maps in holders)
                key.append(group)
                coarse = True
            else:
                key.append(v)
        if with_reference:
            zero.append(j)
        elif coarse:
            groups.setdefault((int(queries.query_marginal[j]), scope, tuple(key)), []).append(j)
    return [g for g in groups.values() if len(g) >= 2], zero


def coarse_slopes(queries: CanonicalQueries, versions: Iterable[tuple[Sequence[str], Mapping[str, np.ndarray]]],
                  scores: Mapping[str, np.ndarray], *, products: bool = False) -> list[tuple[list[int], list[float]]]:
    """Slopes that make the coarse interactions of numeric columns linear within each group.

    ``versions`` as for :func:`coarse_ties`; ``scores[c]`` is the number of each category of
    column ``c`` (e.g. its bins' midpoints). For every group of interactions that
    :func:`coarse_ties` ties or fixes at zero, and every coarse column ``c`` of its scope with
    scores, one slope: members the group's interactions, weight of the member with value
    ``v_c`` ``w_c(v_c) = (x(v_c) - a) / h``, where ``h`` is half the range of the scores of the
    group's categories and ``a`` its centre, or the reference category's score in the
    reference's group (whose constant is fixed at zero: the interaction there is
    ``psi (x(v_c) - x(x*_c)) / h``, 0 at the reference as reference coding needs). With the
    constant, ``lambda_D(v) = phi_g + psi_g (x(v_c) - a) / h``: the interactions are linear in
    the number within each group, and ``psi_g`` is the log-odds change from the group's centre
    to its edge. A group of one category has no slope.

    ``products``: also, for every pair ``c, c'`` of such columns in the scope, a product term of
    weight ``w_c(v_c) w_c'(v_c')``: the interactions are then bilinear within each coarse cell,
    ``phi + psi w_c + psi' w_c' + chi w_c w_c'``, and ``chi`` is how the two numbers covary
    inside it (its statistic: the product moment, :mod:`synthinfer.napsu.coarse`). A column whose
    group holds one category besides the reference has one weight there, and no product.

    Returns ``[(members, weights), ...]`` (:class:`InteractionFeatures`' ``slopes``).
    """
    versions = [(frozenset(cols), {c: np.asarray(mp) for c, mp in maps.items()}) for cols, maps in versions]
    scores = {c: np.asarray(x, dtype=np.float64) for c, x in scores.items()}
    support, values = _supports(queries)
    slopes: dict[tuple, tuple[list[int], list[float]]] = {}
    for j, (scope, vals) in enumerate(zip(support, values)):
        holders = [maps for cols, maps in versions if set(scope) <= cols]
        if not holders:
            continue
        coarse = [c for c in scope if all(c in maps for maps in holders)]
        if not coarse:
            continue
        key = tuple(tuple(int(maps[c][v]) for maps in holders) if c in coarse else v for c, v in zip(scope, vals))
        weight: dict[str, float] = {}  # w_c(v_c) of each coarse numeric column whose group has a range
        varies: list[str] = []  # and of those whose w_c takes two values or more among the members
        for c, v in zip(scope, vals):
            if c not in coarse or c not in scores:
                continue
            groups = np.stack([maps[c] for maps in holders], axis=1)  # each category's group under each map
            codes = np.flatnonzero(np.all(groups == groups[v], axis=1))
            x = scores[c][codes]
            half = (x.max() - x.min()) / 2.0
            if not half > 0:
                continue
            anchor = scores[c][queries.reference[c]] if queries.reference[c] in codes else (x.max() + x.min()) / 2.0
            weight[c] = float((scores[c][v] - anchor) / half)
            if codes.size - (queries.reference[c] in codes) >= 2:
                varies.append(c)
        # a product with a column whose members all have one weight would repeat the other's slope
        pairs = [(a, b) for i, a in enumerate(varies) for b in varies[i + 1:]] if products else []
        terms = [(c,) for c in weight] + pairs
        for cols in terms:
            members, weights = slopes.setdefault((int(queries.query_marginal[j]), scope, key, cols), ([], []))
            members.append(j)
            weights.append(float(np.prod([weight[c] for c in cols])))
    return list(slopes.values())


def linear_by_linear(queries: CanonicalQueries, scores: Mapping[str, np.ndarray]
                     ) -> list[tuple[list[int], list[float]]]:
    """One trend per pair of numeric columns that a marginal holds: the linear-by-linear
    association ``t w_a(v_a) w_b(v_b)``, ``w_c(v) = (x_c(v) - x_c(x*_c)) / h_c`` with ``x_c`` the
    column's ``scores`` (its bins' midpoints), ``x*_c`` its reference category and ``h_c`` half
    the scores' range; zero at either reference, as reference coding needs.

    Members are every interaction of the scope ``(a, b)`` (in its host marginal; tied or fixed
    at zero as may be), so the trend adds to what the pair's own parameters say, and those
    parameters' prior ``N(0, tau^2)`` becomes a prior centred on the trend: the model's family is
    unchanged where the pair's interactions are free (the trend is in their span), and grows by
    the trend where they are tied in groups. The trend takes the main effects' prior
    (:class:`InteractionFeatures`' ``trends``): its statistic, the numbers' covariance, sums the
    whole table, so the data set it, not the prior.

    Returns ``[(members, weights), ...]`` (:class:`InteractionFeatures`' ``trends``), in the
    order of the scopes' first interactions.
    """
    w: dict[str, np.ndarray] = {}  # w_c of each category, for the columns with a range
    for c, x in scores.items():
        x = np.asarray(x, dtype=np.float64)
        half = (x.max() - x.min()) / 2.0
        if half > 0:
            w[c] = (x - x[queries.reference[c]]) / half
    support, values = _supports(queries)
    trends: dict[tuple, tuple[list[int], list[float]]] = {}
    for j, (scope, vals) in enumerate(zip(support, values)):
        if len(scope) == 2 and all(c in w for c in scope):
            members, weights = trends.setdefault((int(queries.query_marginal[j]), scope), ([], []))
            members.append(j)
            weights.append(float(w[scope[0]][vals[0]] * w[scope[1]][vals[1]]))
    return list(trends.values())


def spline_main_effects(queries: CanonicalQueries, scores: Mapping[str, np.ndarray], ratio: float,
                        exclude: Iterable[int] = ()) -> tuple[list[int], list[tuple[list[int], list[float]]]]:
    """The main effects of numeric columns as a penalised linear spline: ``(zero, slopes)`` for
    :class:`InteractionFeatures` that replace each such column's main effects by a trend and a
    change of slope at every interior bin.

    For a column ``c`` with ``scores`` (its bins' midpoints, ascending with the codes), three or
    more categories and no main effect in ``exclude`` (tied or fixed already), with ``x*`` its
    reference's score, ``u`` its median bin width and ``h`` half its range:

        lambda_c(v) = beta (x_v - x*) / h + sum_k gamma_k ratio ((x_v - x_k)_+ - (x* - x_k)_+) / u

    over the interior bins ``k`` (knots). The span is every function of the bins that is 0 at the
    reference (a linear spline with a knot at each bin interpolates any values), so the model is
    the same log-linear family; what changes is the prior. ``beta`` and the ``gamma_k`` are slopes,
    under the interaction prior ``N(0, tau^2)``, so each change of the log-density's slope from
    one bin to the next has sd ``ratio * tau``: a second-order random walk on the main effects
    (the mixed-model form of a penalised spline: Ruppert, Wand & Carroll 2003, *Semiparametric
    Regression*, ch. 4; Rue & Held 2005, ch. 3). A bin measured below its noise then follows its
    neighbours' trend instead of sitting at its own prior's scale, which is what fills the
    near-empty tails of a number in one-unit bins (docs/continuous-columns.md).

    Returns the main effects fixed at zero (replaced) and the slopes ``(members, weights)``.
    """
    exclude = {int(j) for j in exclude}
    support, values = _supports(queries)
    zero: list[int] = []
    slopes: list[tuple[list[int], list[float]]] = []
    for c, x in scores.items():
        x = np.asarray(x, dtype=np.float64)
        members = [j for j, sc in enumerate(support) if sc == (c,)]
        if x.size < 3 or not members or any(j in exclude for j in members) or np.any(np.diff(x) <= 0):
            continue
        v = np.array([values[j][0] for j in members])
        ref = x[queries.reference[c]]
        half, unit = (x[-1] - x[0]) / 2.0, float(np.median(np.diff(x)))
        zero += members
        slopes.append((members, ((x[v] - ref) / half).tolist()))
        for knot in x[1:-1]:
            w = ratio * (np.maximum(x[v] - knot, 0.0) - max(ref - knot, 0.0)) / unit
            slopes.append((members, w.tolist()))
    return zero, slopes


#: Default threshold of :func:`near_empty_ties`, in noise standard deviations.
TIE_BELOW = 3.0


def near_empty_ties(queries: CanonicalQueries, s: np.ndarray, sigma: np.ndarray | float, *,
                    below: float = TIE_BELOW, keep: Iterable[Sequence[str]] = (),
                    exclude: Iterable[int] = ()) -> list[list[int]]:
    """Ties of the interactions whose canonical cells' noisy counts lie within ``below`` noise
    sd of zero: ``s_j < below * sigma_j``, one tie per host marginal and scope (of two or more
    columns) with at least two such cells.

    ``s, sigma`` are the canonical queries' noisy counts and noise sd (for other measurements,
    their inverse-variance combination: :func:`synthinfer.napsu.structured.canonical_summary`):
    the choice is post-processing of the mechanism's output. Scopes inside a marginal of
    ``keep`` (the analyst's) are never tied, so the interactions an analysis reads keep their
    own parameters. Queries in ``exclude`` (already in another tie, e.g. :func:`coarse_ties`)
    are left out.
    """
    if not below > 0:
        raise ParameterError(f"tie threshold must be positive (noise standard deviations), got {below!r}")
    s = np.asarray(s, dtype=np.float64)
    sd = np.broadcast_to(np.asarray(sigma, dtype=np.float64), s.shape)
    if s.shape != (queries.dimension,):
        raise ParameterError(f"s must have one noisy count per canonical query ({queries.dimension}), got {s.shape}")
    kept_scopes = [frozenset(m) for m in keep]
    support, _ = _supports(queries)
    skip = {int(j) for j in exclude}
    groups: dict[tuple[int, tuple[str, ...]], list[int]] = {}
    for j, scope in enumerate(support):
        if (len(scope) < 2 or j in skip or s[j] >= below * sd[j]
                or any(frozenset(scope) <= k for k in kept_scopes)):
            continue
        groups.setdefault((int(queries.query_marginal[j]), scope), []).append(j)
    return [g for g in groups.values() if len(g) >= 2]


def near_empty_slopes(queries: CanonicalQueries, slopes: Sequence[tuple[Sequence[int], Sequence[float]]],
                      measurements: Sequence[Measurement], *, below: float) -> list[int]:
    """The slopes (:func:`coarse_slopes`) whose coarse cell's noisy count lies below ``below``
    noise sd: the indices of ``slopes`` to drop.

    A slope's feature lives on the cells where its scope ``D`` takes one of its members'
    values, e.g. the rows of age group ``g`` with race ``r``. Its statistic, the number's
    moment in that cell, carries about ``n_g var(w) psi`` of the slope ``psi`` against noise of
    the count's order, so where the cell holds ``n_g`` rows of noise sd ``sigma`` the noise
    alone leaves ``psi`` an sd of about ``3 sigma / n_g`` (weights ``w`` spread over ``[-1, 1]``,
    ``var(w) ~ 1/3``): at ``n_g < 3 sigma`` the slope is the prior's, not the data's. Such
    slopes tilt each synthetic dataset at random inside a cell nothing measures well (what
    dilutes a regression slope fitted to the synthetic data). Dropping one leaves the cell's values to its
    group's constant and the fine main effects (a sub-family: the likelihood still uses every
    measured value, its moment included).

    The cell's count is read from the unweighted measurements (``Measurement``) whose marginal
    holds ``D`` and is measured in full: the sum of the values whose cells project onto the
    members' values (a coarse table's group counts whole: the reference category's value is
    in its group), with variance the number of values summed times the measurement's; the
    estimate of least variance decides, ``count < below * sd``. Post-processing of the
    mechanism's output, no privacy cost. A slope no measurement covers is kept.
    """
    if not below > 0:
        raise ParameterError(f"slope threshold must be positive (noise standard deviations), got {below!r}")
    domain = queries.domain
    support, values = _supports(queries)
    usable = [m for m in measurements
              if m.weights is None and m.cells.size == m.marginal.size(domain)]
    projections: dict[tuple[int, tuple[str, ...]], np.ndarray] = {}  # each cell's flat value of D, per measurement
    quiet: list[int] = []
    for k, (members, _) in enumerate(slopes):
        scope = support[int(members[0])]
        shape = tuple(domain[c].size for c in scope)
        # the members' values of D, flat (a slope's scope is never empty: it holds its column)
        wanted = np.unique([np.ravel_multi_index(values[int(j)], shape) for j in members])
        best: tuple[float, float] | None = None
        for i, m in enumerate(usable):
            cols = tuple(m.marginal.columns)
            if not set(scope) <= set(cols):
                continue
            key = (i, scope)
            if key not in projections:
                grid = np.unravel_index(m.cells, m.marginal.shape(domain))
                sub = tuple(grid[cols.index(c)] for c in scope)
                projections[key] = np.ravel_multi_index(sub, shape)
            hit = np.isin(projections[key], wanted)
            summed = np.unique(m.groups[hit]) if m.groups is not None else np.flatnonzero(hit)
            variance = summed.size * m.variance
            if summed.size and (best is None or variance < best[1]):
                best = (float(m.values[summed].sum()), variance)
        if best is not None and best[0] < below * math.sqrt(best[1]):
            quiet.append(k)
    return quiet
