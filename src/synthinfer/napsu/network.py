"""The max-ent distribution MED_theta as a Markov network, with exact junction-tree inference.

NAPSU-MQ (Räisä et al. 2023) models the data as ``p(x) = exp(theta · a(x) - theta_0(theta))``
(eq. 3) where ``a`` are the canonical indicator queries (Supplement C) and
``theta_0(theta) = log sum_x exp(theta · a(x))`` is the log-partition function. As an exponential
family (eq. 7), ``mu(theta) = grad theta_0 = E[a(x)]`` and
``Sigma(theta) = Hessian theta_0 = Cov[a(x)]``.

Every query is a cell indicator of one marginal, and every marginal lies inside a clique of the
junction tree, so ``theta · a(x)`` splits into clique
log-potentials and the sums over the 1.8-million-cell Adult domain become sum-product message
passing over tables of a few dozen cells (Koller and Friedman 2009, Ch. 10).

Why not ``mbi.marginal_oracles``: private-pgm's oracles are differentiable JAX, but they return
calibrated marginals only (no log-partition without a second reduction), work on named
``Factor`` objects, and have no forward sampler or covariance. The engine needs all of these
over plain fixed-shape arrays, so the numerics are written here, on the junction tree that mbi
builds (:mod:`synthinfer.napsu.junction_tree`).

Numerics (all float64, all pure JAX, usable under ``jit``/``vmap``/``grad``; the passes are
unrolled over the few cliques, which keeps run time per call in the tens of microseconds):

* ``log_partition``: one collect pass from the leaves to the roots (log-sum-exp messages);
* ``clique_marginals`` / ``mean``: the collect pass gives ``log P(x_c | x_S)``; a downward pass
  in probability space multiplies in the separator marginals; ``mu`` sums each clique marginal
  over the cells of its queries (no autodiff);
* ``mean_and_cov``: ``Sigma`` by two more passes carrying ``E[a(x) | x_c]`` (see its
  docstring); no nested autodiff, so the gradient of a likelihood in ``Sigma`` is plain reverse
  mode over forward arithmetic (NAPSU-MQ eq. 7 asks for the Hessian of ``theta_0``; this is
  the same matrix, exactly);
* ``sample``: exact ancestral sampling through the tree: the root clique from its marginal, then
  each child's new columns from ``P(x_C | x_S)`` given the already drawn separator values.
"""

from __future__ import annotations

import functools
import gc
import math
import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future
from typing import TYPE_CHECKING

import numpy as np

from synthinfer._jax import ProgramCache, jax, jnp, quick_compiler_options
from synthinfer.errors import ParameterError
from synthinfer.napsu.junction_tree import JunctionTree
from synthinfer.napsu.queries import CanonicalQueries
from synthinfer.napsu.reference import complete_reference

if TYPE_CHECKING:
    from synthinfer.data import Domain, Marginal
    from synthinfer.napsu.interactions import InteractionFeatures

_SEP_FLOOR = 1e-150  # floor for separator probabilities in the covariance passes
_UNROLL_MAX = 32  # longest clique row sampled by the unrolled comparison count


#: Networks with at most this many parameters compile their own programs (the Laplace
#: objective, NUTS, the dropped cells' Jacobian) with
#: :func:`synthinfer._jax.quick_compiler_options`: their gradients take microseconds, so
#: compiling is most of what the user waits for (the toy's NUTS program compiles in about half
#: the time and runs slightly slower). Larger ones keep the default, whose faster code matters
#: over ~10^6 gradient evaluations (Adult: d = 130).
SMALL_MODEL_DIMENSION = 32

#: The clique log-potentials ``B theta`` are a sparse product (a gather of the nonzero
#: entries' parameters and a segment sum per cell) instead of a dense one when the dense
#: incidence ``B`` (cells x parameters) has at least this many entries and at most
#: :data:`SPARSE_POTENTIALS_MAX_DENSITY` of them are nonzero: a product over a clique of tens of
#: thousands of cells then reads megabytes instead of the whole matrix, in each gradient.
SPARSE_POTENTIALS_MIN_ENTRIES = 1 << 21
SPARSE_POTENTIALS_MAX_DENSITY = 0.1


def compiles_quick(dimension: int) -> bool:
    """Whether a model of ``dimension`` parameters compiles its programs quick
    (:data:`SMALL_MODEL_DIMENSION`)."""
    return dimension <= SMALL_MODEL_DIMENSION

#: Samplers producing at most this many codes per call compile with
#: :func:`synthinfer._jax.quick_compiler_options`, where compiling is most of their cost (the
#: toy's 100 datasets of 2000 x 3). Larger ones keep the default: on Adult-size batches the
#: unoptimised sampler runs about three times slower per call, more than the compile it saves
#: (measurements in docs/performance.md).
QUICK_SAMPLER_CODES = 10**6


class MarkovNetwork:
    """MED_theta (NAPSU-MQ eq. 3): ``p(x) ∝ exp(theta · a(x))``, ``a`` = canonical queries.

    Exact inference on a junction tree of the marginals' cliques, in float64; the cost grows with
    the clique table sizes (tree width), not with the domain size.

    Parameters
    ----------
    queries : CanonicalQueries or InteractionFeatures
        The parameters' features: the canonical queries (Supplement C), or the interactions
        with some tied (:mod:`synthinfer.napsu.interactions`); each is a set of cells of one
        marginal (``queries.cells``; a slope's cells carry weights, ``queries.cell_weights``),
        and ``theta`` has shape ``(queries.dimension,)``.

    Attributes
    ----------
    junction_tree : JunctionTree
        Rooted clique forest used for message passing and sampling.
    dimension : int
        Number of parameters ``d``.

    Notes
    -----
    All public methods are pure functions of ``theta`` (already ``jax.jit``-compiled; they can
    be called inside another ``jit``, under ``jax.vmap`` over a batch of thetas, and
    differentiated). Shapes are fixed per network, so a network compiles once whatever the
    privacy level or data.
    """

    def __init__(self, queries: CanonicalQueries | InteractionFeatures) -> None:
        self.queries = queries
        domain = queries.domain
        qs = queries.queryset
        self.dimension = queries.dimension
        scopes = [m.columns for m in qs.marginals]
        jt = JunctionTree.build(domain, scopes)
        self.junction_tree = jt
        d = self.dimension
        n_cliques = len(jt.cliques)
        shapes = [jt.shape(c) for c in range(n_cliques)]
        sizes = [math.prod(s) for s in shapes]
        offsets = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)

        # Each marginal lives in the first clique (parents first) that contains its columns.
        cols = [tuple(domain.index(c) for c in m.columns) for m in qs.marginals]
        home = [next(c for c in range(n_cliques) if set(mc) <= set(jt.cliques[c])) for mc in cols]
        # Dense cell-to-parameter incidence B (cells x d): potentials = B theta, mu = B^T P.
        # Dense matmuls beat gather/scatter on CPU and transpose cleanly under autodiff; B has
        # the size of the (cells x d) tables the covariance needs anyway. Only where B is large
        # and sparse (a clique of tens of thousands of cells) do the potentials use its nonzeros.
        incidence = np.zeros((int(offsets[-1]), d))
        cell_of = [_cell_map(jt.cliques[c], mc, domain.shape) for mc, c in zip(cols, home)]
        weights = getattr(queries, "cell_weights", None)  # a feature's value on its cells (slopes); else 1
        for j, (i, cells) in enumerate(zip(queries.query_marginal, queries.cells)):
            c = home[i]
            at = np.flatnonzero(np.isin(cell_of[i], cells))
            incidence[offsets[c] + at, j] = 1.0 if weights is None else weights[j][np.searchsorted(cells, cell_of[i][at])]
        self._incidence = incidence
        #: (cell, parameter, value) of B's nonzero entries, where the potentials use them; else None
        self._sparse_incidence = None
        if incidence.size >= SPARSE_POTENTIALS_MIN_ENTRIES:
            nz_cell, nz_param = np.nonzero(incidence)  # cells ascending
            if nz_cell.size <= SPARSE_POTENTIALS_MAX_DENSITY * incidence.size:
                # int32 indices (cells and parameters are far fewer than 2^31): valid in JAX's
                # default 32-bit mode as in float64 mode
                self._sparse_incidence = (nz_cell.astype(np.int32), nz_param.astype(np.int32),
                                          incidence[nz_cell, nz_param])
        self._dropped = np.setdiff1d(np.arange(qs.dimension), queries.kept)
        # Each parameter belongs to one clique: its block of B (cells_c x d_c) and the order
        # that puts the per-clique rows of E[a a^T] back into parameter order.
        blocks = [incidence[offsets[c] : offsets[c + 1]] for c in range(n_cliques)]
        own = [np.flatnonzero(b.any(axis=0)) for b in blocks]
        self._own_incidence = [b[:, o] for b, o in zip(blocks, own)]
        self._row_order = np.argsort(np.concatenate(own))
        self._offsets = offsets
        self._shapes = shapes
        self._marginal_home = home
        self._marginal_cols = cols

        # Static plan for the log-space collect pass: axes summed out towards the parent, and
        # the parent-broadcast shape of the separator message (cliques' columns are sorted, so
        # a separator's axes keep their order and only need singleton axes inserted).
        self._plan = [
            (
                tuple(a for a, v in enumerate(cl) if v not in sep),
                tuple(domain.shape[v] if v in sep else 1 for v in jt.cliques[p]),
            )
            if p >= 0 else None
            for cl, sep, p in zip(jt.cliques, jt.separators, jt.parent)
        ]
        # Separator projections: 0/1 matrices mapping a clique's flat cells onto its
        # separator's cells, from the child's side and from the parent's side.
        self._sep_proj = [
            (_projection(cl, sep, domain.shape), _projection(jt.cliques[p], sep, domain.shape))
            if p >= 0 else None
            for cl, sep, p in zip(jt.cliques, jt.separators, jt.parent)
        ]

        #: this network's compiled programs (objectives, NUTS, samplers): they live and die
        #: with the network
        self.programs = ProgramCache()
        # these are also traced inside other programs, where JAX refuses compiler options
        self.log_partition = jax.jit(self._log_partition)
        self.clique_marginals = jax.jit(self._clique_marginals)
        self.mean = jax.jit(self._mean)
        self.mean_and_cov = jax.jit(self._mean_and_cov)
        self.query_marginals = jax.jit(self._query_marginals)
        self.log_query_marginals = jax.jit(self._log_query_marginals)
        self.sample = jax.jit(self._sample, static_argnums=1)
        self.sample_many = jax.jit(self._sample_many, static_argnums=1)

    # ---------------------------------------------------------------------------------------
    # message passing
    def _potentials(self, theta: jax.Array) -> list[jax.Array]:
        """Clique log-potentials: sum of the parameters of the queries true in each cell."""
        theta = jnp.asarray(theta, dtype=jnp.float64)
        if theta.shape != (self.dimension,):
            raise ParameterError(
                f"theta must have shape ({self.dimension},) (one parameter per canonical query), "
                f"got {theta.shape}; use jax.vmap for batches"
            )
        if self._sparse_incidence is None:
            flat = self._incidence @ theta
        else:
            rows, cols, values = self._sparse_incidence
            flat = jax.ops.segment_sum(theta[cols] * jnp.asarray(values, theta.dtype), rows, self._incidence.shape[0],
                                       indices_are_sorted=True)
        o = self._offsets
        return [flat[o[c] : o[c + 1]].reshape(s) for c, s in enumerate(self._shapes)]

    def _collect(self, theta: jax.Array) -> tuple[list[jax.Array], list[jax.Array | None]]:
        """Upward pass in log space, leaves to roots.

        ``up[c]`` = log-potential of c plus the messages of its children, and the message to
        the parent is ``m_c(x_S) = logsumexp_{x_c \\ x_S} up[c]``. Also returns the log
        conditionals ``log P(x_c | x_S) = up[c] - m_c`` (exact: c's subtree sums to ``m_c``).
        """
        jt = self.junction_tree
        up = self._potentials(theta)
        log_cond: list[jax.Array | None] = [None] * len(up)
        for c in reversed(range(len(up))):
            p = jt.parent[c]
            if p < 0:
                continue
            out_axes, to_parent = self._plan[c]
            m = _lse(up[c], axis=out_axes, keepdims=True)
            log_cond[c] = up[c] - m
            up[p] = up[p] + m.reshape(to_parent)
        return up, log_cond

    def _log_partition(self, theta: jax.Array) -> jax.Array:
        """``theta_0(theta) = log sum_x exp(theta · a(x))`` (NAPSU-MQ eq. 3), exact."""
        up, _ = self._collect(theta)
        roots = [c for c, p in enumerate(self.junction_tree.parent) if p < 0]
        return sum(_lse(up[r]) for r in roots)

    def _flat_marginals(self, theta: jax.Array) -> tuple[list[jax.Array], list[jax.Array | None]]:
        """Clique marginals ``P(x_c)`` and conditionals ``P(x_c | x_S)`` as flat tables.

        The marginals come from a downward pass in probability space:

        ``P(x_root) = exp(up - logsumexp(up))``; ``P(x_c) = P(x_c | x_S) P(x_S)`` with
        ``P(x_S)`` the parent's marginal summed onto the separator. Every factor is a
        probability, so nothing overflows and no Hugin-style division is needed.
        """
        jt = self.junction_tree
        up, log_cond = self._collect(theta)
        marg: list[jax.Array | None] = [None] * len(up)
        cond: list[jax.Array | None] = [None] * len(up)
        for c, p in enumerate(jt.parent):
            if p < 0:
                marg[c] = jnp.exp(up[c] - _lse(up[c])).ravel()
            else:
                own, in_parent = self._sep_proj[c]
                cond[c] = jnp.exp(log_cond[c]).ravel()
                marg[c] = cond[c] * (own @ (in_parent.T @ marg[p]))
        return marg, cond

    def _clique_marginals(self, theta: jax.Array) -> list[jax.Array]:
        """Probability tables of the junction-tree cliques (axes = clique columns, ascending)."""
        return [m.reshape(s) for m, s in zip(self._flat_marginals(theta)[0], self._shapes)]

    def _mean(self, theta: jax.Array) -> jax.Array:
        """``mu(theta) = E[a(x)] = grad theta_0(theta)`` (NAPSU-MQ eq. 7)."""
        return jnp.concatenate(self._flat_marginals(theta)[0]) @ self._incidence

    def _mean_and_cov(self, theta: jax.Array) -> tuple[jax.Array, jax.Array]:
        """``mu`` and ``Sigma(theta) = Cov[a(x)] = Hessian theta_0`` (NAPSU-MQ eq. 7), exactly.

        Rather than differentiating twice, ``Sigma`` comes from one more pair of passes over
        the tree with a trailing axis of length ``d``: ``G_c[x_c, j] = E[a_j(x) | x_c]`` for
        every clique ``c`` and query ``j``. Then for the queries ``k`` of clique ``c``,
        ``E[a_k a_j] = sum_{x_c} P(x_c) a_k(x_c) G_c[x_c, j]``, i.e.
        ``Sigma = B^T (P * G) - mu mu^T`` with ``B`` the cell-to-query incidence.

        * up: ``U_c = B_c + sum_{children h} E[U_h | x_{S_h}]`` holds ``E[a_j | x_c]`` for the
          queries of c's subtree (conditioning on the separator suffices by the junction
          tree's Markov property); ``E[. | x_S]`` uses ``P(x_h | x_S) = P(x_h) / P(x_S)``;
        * down: ``G_c = U_c + E[G_p - (c's upward message) | x_S]`` adds the queries outside
          c's subtree; a root adds ``mu`` of the other components (independent of it).

        Tables are flattened (cells x d) and separators are constant 0/1 projection matrices,
        so each tree edge is a few matrix products: ``O(d * sum_c |table_c|)`` flops and
        ``O(#cliques)`` operations of plain forward arithmetic, whose reverse mode (for the
        gradient of a likelihood in ``Sigma``) is cheap to compile and to run.
        """
        jt = self.junction_tree
        p, cond = self._flat_marginals(theta)
        mu = jnp.concatenate(p) @ self._incidence
        o = self._offsets
        up = [self._incidence[o[c] : o[c + 1]] for c in range(len(p))]
        msgs: list[jax.Array | None] = [None] * len(p)
        for c in reversed(range(len(p))):
            par = jt.parent[c]
            if par < 0:
                continue
            own, in_parent = self._sep_proj[c]
            # E[U_c | x_S] = sum_{x_c ~ x_S} P(x_c | x_S) U_c
            msgs[c] = own.T @ (cond[c][:, None] * up[c])
            up[par] = up[par] + in_parent @ msgs[c]
        g = list(up)
        weighted: list[jax.Array | None] = [None] * len(p)  # P(x_c) G_c
        for c, par in enumerate(jt.parent):
            if par < 0:
                g[c] = up[c] + (mu - p[c] @ up[c])
            else:
                own, in_parent = self._sep_proj[c]
                # E[G_p | x_S] = sum_{x_p ~ x_S} P(x_p) G_p / P(x_S), minus c's own upward
                # message (E[msg | x_S] = msg). P(x_S) is floored: a separator value of
                # probability < 1e-150 (weight ~0 in Sigma) must not make gradients overflow.
                sep_marg = jnp.maximum(own.T @ p[c], _SEP_FLOOR)[:, None]
                down = (in_parent.T @ weighted[par]) / sep_marg - msgs[c]
                g[c] = up[c] + own @ down
            weighted[c] = p[c][:, None] * g[c]
        # E[a_k a_j] for the queries k of each clique, then rows back in parameter order
        rows = [b.T @ weighted[c] for c, b in enumerate(self._own_incidence) if b.size]
        second = jnp.concatenate(rows)[self._row_order]
        cov = second - jnp.outer(mu, mu)
        return mu, 0.5 * (cov + cov.T)

    def _query_marginals(self, theta: jax.Array) -> list[jax.Array]:
        """Probability tables of the user's marginals (axes in each marginal's column order)."""
        return self._per_marginal(self._clique_marginals(theta), lambda t, axes: t.sum(axis=axes))

    def _per_marginal(self, tables: list[jax.Array], reduce: Callable) -> list[jax.Array]:
        """Each user marginal's table from its home clique's ``tables`` (``reduce(table, axes)``
        sums out the clique's other columns), axes in the marginal's column order."""
        jt = self.junction_tree
        out = []
        for mc, c in zip(self._marginal_cols, self._marginal_home):
            cl = jt.cliques[c]
            drop = tuple(a for a, v in enumerate(cl) if v not in mc)
            t = reduce(tables[c], drop) if drop else tables[c]
            kept = [v for v in cl if v in mc]
            out.append(jnp.transpose(t, [kept.index(v) for v in mc]))
        return out

    def _log_query_marginals(self, theta: jax.Array) -> list[jax.Array]:
        """Log-probability tables of the user's marginals, in log space throughout.

        ``log P(x_root) = up - logsumexp(up)`` and ``log P(x_c) = log P(x_c | x_S) + log P(x_S)``
        with ``log P(x_S)`` the parent's log marginal summed (log-sum-exp) onto the separator:
        finite however small a cell's probability, where ``log`` of :meth:`_query_marginals`
        would underflow to ``-inf`` (cells below ~1e-308) with a zero gradient. For the
        Dirichlet-type cell prior (:func:`synthinfer.napsu.likelihood.log_cell_prior`).
        """
        jt = self.junction_tree
        up, log_cond = self._collect(theta)
        logs: list[jax.Array | None] = [None] * len(up)
        for c, p in enumerate(jt.parent):
            if p < 0:
                logs[c] = up[c] - _lse(up[c])
            else:
                sep = set(jt.separators[c])
                outside = tuple(a for a, v in enumerate(jt.cliques[p]) if v not in sep)
                to_child = tuple(self.queries.domain.shape[v] if v in sep else 1 for v in jt.cliques[c])
                logs[c] = log_cond[c] + _lse(logs[p], axis=outside, keepdims=True).reshape(to_child)
        return self._per_marginal(logs, lambda t, axes: _lse(t, axis=axes))

    def _dropped_cell_log_probs(self, theta: jax.Array) -> jax.Array:
        """Log-probabilities of the marginals' cells the canonical parametrisation dropped.

        Their probabilities depend on many parameters at once (used by the one-sided map of
        :mod:`synthinfer.napsu.reparam`). In the full query order, without the kept ones.
        """
        full = jnp.concatenate([t.ravel() for t in self._query_marginals(theta)])
        return jnp.log(full[self._dropped])

    # ---------------------------------------------------------------------------------------
    # sampling
    def _sample(self, theta: jax.Array, n: int, key: jax.Array) -> jax.Array:
        """``n`` i.i.d. rows of MED_theta by exact ancestral sampling: int32 codes (n, n_cols)."""
        if not isinstance(n, int | np.integer) or n < 1:
            raise ParameterError(f"n (rows to sample) must be a positive int, got {n!r}")
        jt = self.junction_tree
        shape = self.queries.domain.shape
        # P(x_root) and P(x_c | x_S) straight from the collect pass (no downward pass needed)
        up, log_cond = self._collect(theta)
        tables = [
            jnp.exp(up[c] - _lse(up[c])) if p < 0 else jnp.exp(log_cond[c])
            for c, p in enumerate(jt.parent)
        ]
        # one uniform per row and clique, drawn in a single call (one RNG kernel to compile)
        u = jax.random.uniform(key, (len(tables), n), dtype=jnp.float64)
        codes: list[jax.Array | None] = [None] * len(shape)
        for c, table in enumerate(tables):
            cl, sep = jt.cliques[c], jt.separators[c]
            new = [v for v in cl if v not in sep]
            # table as (separator cells, new cells), both row-major in ascending column order
            perm = [cl.index(v) for v in sep] + [cl.index(v) for v in new]
            s_size = math.prod(shape[v] for v in sep)
            k_size = math.prod(shape[v] for v in new)
            t = jnp.transpose(table, perm).reshape(s_size, k_size)
            r = jnp.zeros((n,), jnp.int32)  # separator cell of each row (0 for a root)
            for v in sep:
                r = r * shape[v] + codes[v]
            cell = _sample_rows(t, r, u[c])
            for v in reversed(new):
                codes[v] = (cell % shape[v]).astype(jnp.int32)
                cell = cell // shape[v]
        return jnp.stack(codes, axis=1)

    @functools.cached_property
    def dropped_cell_log_prob_jacobian(self) -> Callable[[jax.Array], jax.Array]:
        """Jitted Jacobian of :meth:`_dropped_cell_log_probs`, shape ``(dropped cells, d)``.
        Made on first use, as only NUTS needs it (and compiler options are found then)."""
        return jax.jit(jax.jacfwd(self._dropped_cell_log_probs),
                       compiler_options=quick_compiler_options() if self.small else None)

    @property
    def small(self) -> bool:
        """Whether the network's programs compile quick (:func:`compiles_quick`)."""
        return compiles_quick(self.dimension)

    def _sample_many(self, thetas: jax.Array, n: int, key: jax.Array) -> jax.Array:
        """One dataset of ``n`` rows per theta: ``(m, n, n_columns)``, vectorised over thetas."""
        if jnp.ndim(thetas) != 2:
            raise ParameterError(
                f"thetas must have shape (m, {self.dimension}), got {jnp.shape(thetas)}"
            )
        keys = jax.random.split(key, thetas.shape[0])
        return jax.vmap(lambda t, k: self._sample(t, n, k))(thetas, keys)

    def compile_sample_many(self, m: int, n: int) -> Future:
        """Future of :attr:`sample_many` compiled for ``m`` parameter vectors and ``n`` rows.

        Compiles once per ``(m, n)`` on a background thread (:meth:`ProgramCache.compile_ahead`),
        so a fit can start it for the datasets it will be asked for while inference runs. The
        compiled program is called as ``program(thetas, key)``, without ``n``.
        """
        m, n = int(m), int(n)
        thetas = jax.ShapeDtypeStruct((m, self.dimension), jnp.float64)
        key = jax.eval_shape(lambda: jax.random.key(0))
        quick = m * n * len(self.queries.domain.shape) <= QUICK_SAMPLER_CODES
        return self.programs.compile_ahead(("sample_many", m, n), lambda: self.sample_many.lower(thetas, n, key),
                                            quick=quick)

    def __repr__(self) -> str:
        jt = self.junction_tree
        return (
            f"MarkovNetwork(d={self.dimension}, cliques={len(jt.cliques)}, width={jt.width}, "
            f"table cells={jt.table_cells}, domain cells={self.queries.domain.size})"
        )


def _cell_map(clique: tuple[int, ...], columns: tuple[int, ...], shape) -> np.ndarray:
    """Each cell of ``clique`` (row-major) -> its row-major cell in the sub-table on ``columns``."""
    grid = np.indices([shape[v] for v in clique]).reshape(len(clique), -1)
    sub = [shape[v] for v in columns]
    return np.ravel_multi_index(tuple(grid[clique.index(v)] for v in columns), sub)


def _projection(clique: tuple[int, ...], sep: tuple[int, ...], shape) -> np.ndarray:
    """0/1 matrix (clique cells x separator cells): which separator value each cell has."""
    cells = _cell_map(clique, sep, shape)
    proj = np.zeros((cells.size, math.prod(shape[v] for v in sep)))
    proj[np.arange(cells.size), cells] = 1.0
    return proj


def _lse(x: jax.Array, axis=None, keepdims: bool = False) -> jax.Array:
    """Log-sum-exp for finite tables (all entries here are finite for finite theta).

    Leaner than ``jax.nn.logsumexp``, which adds infinity handling we do not need; fewer
    operations keep XLA compile time down for the unrolled passes.
    """
    m = jax.lax.stop_gradient(jnp.max(x, axis=axis, keepdims=True))
    out = jnp.log(jnp.sum(jnp.exp(x - m), axis=axis, keepdims=True)) + m
    return out if keepdims else jnp.squeeze(out, axis=axis)


def _sample_rows(table: jax.Array, rows: jax.Array, u: jax.Array) -> jax.Array:
    """Draw a column index per entry of ``rows`` from the row ``table[rows]``, given U(0,1) ``u``.

    Inverse-CDF sampling: the index is ``#{j < k - 1 : F_r(j) <= u}`` (zero-probability cells
    have empty intervals and are never drawn). For the short rows of clique tables this count
    is unrolled over ``j`` into one fused gather-compare loop over the rows (7x faster than
    ``jnp.searchsorted`` on CPU for k = 16); long rows use a binary search over the
    row-offset table ``r + F_r(j)``, increasing over the flattened table.
    """
    s, k = table.shape
    # Rows are P(x_C | x_S) (or the root's marginal): each sums to 1 up to rounding, which the
    # renormalisation absorbs; a row cannot vanish since its largest log-entry is finite.
    cdf = jnp.cumsum(table / table.sum(axis=1, keepdims=True), axis=1)
    if k <= _UNROLL_MAX:
        flat, base = cdf.ravel(), rows * k
        out = jnp.zeros(rows.shape, jnp.int32)
        for j in range(k - 1):
            out = out + (flat[base + j] <= u).astype(jnp.int32)
        return out
    cdf = jnp.concatenate([cdf[:, :-1], jnp.ones((s, 1), cdf.dtype)], axis=1)
    offset_cdf = (cdf + jnp.arange(s, dtype=cdf.dtype)[:, None]).ravel()
    pos = jnp.searchsorted(offset_cdf, rows + u, side="right")
    return jnp.clip(pos - rows * k, 0, k - 1).astype(jnp.int32)


#: how many networks :func:`network_for` keeps (each holds its compiled programs)
MAX_CACHED_NETWORKS = 4
#: share of the process's memory-map limit (Linux ``vm.max_map_count``, 65,530 by default)
#: above which :func:`network_for` keeps only the newest network. XLA's CPU code lives in
#: memory mappings of its own, about 10,000 for the programs of one fit of AIM's 15-column
#: Adult model, freed only with the network; past the limit the next compilation fails
#: ("LLVM compilation error: Cannot allocate memory") and the process crashes, which eight
#: cached networks of that size reached within one study.
MAP_SHARE = 0.5
_NETWORKS: OrderedDict[tuple, MarkovNetwork] = OrderedDict()
_NETWORKS_LOCK = threading.Lock()


def network_for(domain: Domain, marginals: Sequence[Marginal], reference: Mapping[str, int] | None = None,
                ties: Sequence[Sequence[int]] | None = None, zero: Sequence[int] = (),
                slopes: Sequence[tuple[Sequence[int], Sequence[float]]] = (),
                trends: Sequence[tuple[Sequence[int], Sequence[float]]] = ()) -> MarkovNetwork:
    """The :class:`MarkovNetwork` of ``marginals`` over ``domain`` with ``reference`` categories
    (codes; missing columns take their first category), shared by every fit of the same model.
    With ``ties`` (groups of canonical query indices) its parameters are the interactions with
    those tied, without those in ``zero`` (fixed at zero), and with the weighted ``slopes`` and
    ``trends`` (:class:`synthinfer.napsu.interactions.InteractionFeatures`).

    Refits of the same marginals (studies, other epsilons, other data) then reuse its compiled
    programs, which the network owns (:attr:`MarkovNetwork.programs`). The last
    :data:`MAX_CACHED_NETWORKS` networks are kept, only the newest once the process's memory
    mappings pass :data:`MAP_SHARE` of the system's limit; an older one is dropped and, once no
    fit holds it, freed with its programs.
    """
    # key on the completed reference, so {} and an explicit all-first mapping share a network
    zero = tuple(sorted({int(j) for j in zero}))
    slopes, trends = (tuple((tuple(int(j) for j in mem), tuple(float(w) for w in wts)) for mem, wts in weighted)
                      for weighted in (slopes, trends))
    ties = () if ties is None and (zero or slopes or trends) else ties
    ties = None if ties is None else tuple(tuple(sorted(int(j) for j in g)) for g in ties)
    key = (domain, tuple(m.columns for m in marginals), tuple(sorted(complete_reference(domain, reference).items())),
           ties, zero, slopes, trends)
    with _NETWORKS_LOCK:
        if key in _NETWORKS:
            _NETWORKS.move_to_end(key)
            return _NETWORKS[key]
    queries = CanonicalQueries(domain, marginals, reference=reference)
    if ties is not None:
        from synthinfer.napsu.interactions import InteractionFeatures

        queries = InteractionFeatures(queries, ties, zero, slopes, trends)
    net = MarkovNetwork(queries)
    maps = _memory_maps()
    crowded = maps is not None and maps[0] > MAP_SHARE * maps[1]
    with _NETWORKS_LOCK:
        net = _NETWORKS.setdefault(key, net)
        _NETWORKS.move_to_end(key)
        while len(_NETWORKS) > (1 if crowded else MAX_CACHED_NETWORKS):
            _NETWORKS.popitem(last=False)
    if crowded:
        gc.collect()  # a network and its programs' closures form cycles: free their code now
    return net


def _memory_maps() -> tuple[int, int] | None:
    """``(memory mappings of this process, the system's limit)`` where Linux tells (else None)."""
    try:
        with open("/proc/sys/vm/max_map_count") as f:
            limit = int(f.read())
        with open("/proc/self/maps", "rb") as f:
            used = sum(1 for _ in f)
    except (OSError, ValueError):
        return None
    return used, limit
