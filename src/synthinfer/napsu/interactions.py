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
its source, e.g. an age group of fine age bins) is measured on the source's cells, as before;
:func:`coarse_ties` ties its interactions with that column by the map's groups wherever no
marginal names the source itself, so one model holds fine age in ``(age, income)`` and age
groups in ``(age_group, race)`` with few parameters for the latter.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

import numpy as np
from scipy import sparse
from scipy.sparse.linalg import spsolve

from synthinfer.errors import ParameterError
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
        host marginal and scope, of two or more columns (main effects are never tied).
    zero : iterable of canonical query indices
        Interactions fixed at zero (no parameter; order two or more, in no tie): a coarse
        column's group that holds its reference category (:func:`coarse_ties`).

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
        Each parameter's cells of its host marginal (flat, row-major): those with ``x_D`` in its
        values.
    """

    def __init__(self, queries: CanonicalQueries, ties: Iterable[Sequence[int]] = (), zero: Iterable[int] = ()) -> None:
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
            if order[j] < 2:
                raise ParameterError(f"zero interaction {j}: main effects (1-way scopes) are never fixed")
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
            if order[first] < 2:
                raise ParameterError(f"tie {list(g)}: main effects (1-way scopes) are never tied")
            group_of[list(g)] = first
        firsts = np.unique(group_of[group_of >= 0])  # each parameter at its first member's position
        self.members = tuple(np.flatnonzero(group_of == f) for f in firsts)
        self.order = order[firsts]
        self.query_marginal = queries.query_marginal[firsts]
        cells = []
        grids: dict[int, np.ndarray] = {}  # each host marginal's cells as value tuples, made once
        for f, mem in zip(firsts, self.members):
            i = int(queries.query_marginal[f])
            m = queries.marginals[i]
            if i not in grids:
                shape = m.shape(queries.domain)
                grids[i] = np.indices(shape).reshape(len(shape), -1)
            grid = grids[i]
            axes = [m.columns.index(c) for c in support[f]]
            hit = np.zeros(grid.shape[1], dtype=bool)
            for j in mem:
                hit |= np.all(grid[axes] == np.asarray(values[j])[:, None], axis=0)
            cells.append(np.flatnonzero(hit))
        self.cells = tuple(cells)
        self.dimension = len(self.members)
        rows = np.concatenate(self.members) if self.members else np.zeros(0, dtype=np.int64)
        cols = np.repeat(np.arange(self.dimension), [len(m) for m in self.members])
        #: ``lambda = E phi`` (canonical interactions x parameters, 0/1)
        self.expansion = sparse.csr_array((np.ones(rows.size), (rows, cols)), shape=(d, self.dimension))

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
        """``(I, order)``: the parameters are interactions already (a tie is one interaction)."""
        return sparse.identity(self.dimension, format="csr"), self.order

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
        parameter (post-processing)."""
        s = np.asarray(s, dtype=np.float64)
        var = np.broadcast_to(np.asarray(sigma, dtype=np.float64) ** 2, s.shape)
        return (np.array([s[m].sum() for m in self.members]),
                np.sqrt(np.array([var[m].sum() for m in self.members])))

    def __repr__(self) -> str:
        n_tied = sum(len(g) for g in self.ties)
        return (f"InteractionFeatures({self.dimension} parameters: {self.canonical.dimension} interactions, "
                f"{n_tied} of them in {len(self.ties)} ties, {len(self.zero)} fixed at zero)")


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

    For a scope ``D`` of two or more columns, a column ``c`` of ``D`` is *coarse* when every
    version whose columns contain ``D`` names it through a map; its groups are then those of all
    those maps together (their common refinement), and it is fine when any version names it
    directly. The interactions ``lambda_D(v)`` whose values fall in the same group of each
    coarse column and agree on the fine ones share one parameter: the features become
    ``1[x_c in g, x_rest = v_rest]``, functions of the fine column, so the model keeps the fine
    domain (and its main effects) while the coarse relations cost one parameter per group
    (docs/continuous-columns.md, "Fine and coarse versions of one column"). Main effects are
    never tied. A group that holds a coarse column's reference category ``x*_c`` is fixed at
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
        if len(scope) < 2:
            continue
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
