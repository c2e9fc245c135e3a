"""The max-ent distribution MED_theta as a Markov network, with exact junction-tree inference.

NAPSU-MQ (Räisä et al. 2023) models the data as ``p(x) = exp(theta · a(x) - theta_0(theta))``
(eq. 3) where ``a`` are the canonical indicator queries (Supplement C) and
``theta_0(theta) = log sum_x exp(theta · a(x))`` is the log-partition function. As an exponential
family (eq. 7), ``mu(theta) = grad theta_0 = E[a(x)]`` and
``Sigma(theta) = Hessian theta_0 = Cov[a(x)]``.

Every query is a cell indicator of one marginal, and every marginal lies inside a clique of the
junction tree (:mod:`synthinfer.models.junction_tree`), so ``theta · a(x)`` splits into clique
log-potentials and the sums over the 1.8-million-cell Adult domain become sum-product message
passing over tables of a few dozen cells (Koller and Friedman 2009, Ch. 10).

Why not ``mbi.marginal_oracles``: private-pgm's oracles are differentiable JAX, but they return
calibrated marginals only (no log-partition without a second reduction), work on named
``Factor`` objects, and have no forward sampler or batched evidence. The engine needs all of
these over plain fixed-shape arrays, so the ~100 lines of numerics are written here (log-space
Hugin message passing on the tree that mbi builds).

Numerics (all float64, all pure JAX, usable under ``jit``/``vmap``/``grad``):

* ``log_partition``: one collect pass from the leaves to the roots (log-sum-exp messages);
* ``clique_marginals`` / ``mean``: collect + distribute passes, then ``mu`` by summing each
  clique marginal over the cells of its queries (no autodiff);
* ``mean_and_cov``: ``Sigma = d mu / d theta`` by forward-mode differentiation of the
  message passing, i.e. ``d`` vectorised tangent passes over the same small tables; this is
  exact and keeps the log-posterior gradient at second order (reverse over forward) rather than
  the third-order nested autodiff of a Hessian of ``theta_0``;
* ``sample``: exact ancestral sampling through the tree: the root clique from its marginal, then
  each child's new columns from ``P(x_C | x_S) = P(x_C) / P(x_S)`` given its separator, by
  inverse-CDF search over a row-offset cumulative table (no ``(n, k)`` intermediates).
"""

from __future__ import annotations

import math

import numpy as np

from synthinfer._jax import jax, jnp
from synthinfer.models.canonical import CanonicalQueries
from synthinfer.models.junction_tree import JunctionTree


class MarkovNetwork:
    """MED_theta (NAPSU-MQ eq. 3): ``p(x) ∝ exp(theta · a(x))``, ``a`` = canonical queries.

    Exact inference on a junction tree of the marginals' cliques, in float64; the cost grows with
    the clique table sizes (tree width), not with the domain size.

    Parameters
    ----------
    queries : CanonicalQueries
        The (canonical) queries; ``theta`` has shape ``(queries.dimension,)``.

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

    def __init__(self, queries: CanonicalQueries) -> None:
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

        # Each marginal goes to the first clique (parents first) that contains its columns.
        cols = [tuple(domain.index(c) for c in m.columns) for m in qs.marginals]
        home = [next(c for c in range(n_cliques) if set(mc) <= set(jt.cliques[c])) for mc in cols]
        # position of each (marginal, cell) among the kept queries, d = "not a parameter"
        qpos = [np.full(s, d, dtype=np.int64) for s in qs.sizes]
        for j, (i, cell) in enumerate(zip(queries.query_marginal, queries.query_cell)):
            qpos[i][cell] = j
        # index[r, cell] = parameter of the r-th marginal living in that clique cell (or d).
        n_rows = max(1, max(home.count(c) for c in range(n_cliques)))
        index = np.full((n_rows, int(offsets[-1])), d, dtype=np.int64)
        row = [0] * n_cliques
        for i, (mc, c) in enumerate(zip(cols, home)):
            grid = np.indices(shapes[c]).reshape(len(shapes[c]), -1)  # clique cells, row-major
            axes = [jt.cliques[c].index(v) for v in mc]
            mshape = [domain.shape[v] for v in mc]
            flat = np.ravel_multi_index(tuple(grid[a] for a in axes), mshape)
            index[row[c], offsets[c] : offsets[c + 1]] = qpos[i][flat]
            row[c] += 1
        self._index = index
        self._offsets = offsets
        self._shapes = shapes
        self._marginal_home = home
        self._marginal_cols = cols

        # Static plans for the passes: axes summed out towards the parent, and how a separator
        # table broadcasts into the parent / child clique (cliques' columns are sorted, so a
        # separator's axes keep their order and only need singleton axes inserted).
        self._plan = []
        for c in range(n_cliques):
            cl, sep, p = jt.cliques[c], jt.separators[c], jt.parent[c]
            out_axes = tuple(a for a, v in enumerate(cl) if v not in sep)
            to_parent = (
                tuple(domain.shape[v] if v in sep else 1 for v in jt.cliques[p]) if p >= 0 else ()
            )
            parent_out = tuple(a for a, v in enumerate(jt.cliques[p]) if v not in sep) if p >= 0 else ()
            to_child = tuple(domain.shape[v] if v in sep else 1 for v in cl)
            self._plan.append((out_axes, to_parent, parent_out, to_child))

        self.log_partition = jax.jit(self._log_partition)
        self.clique_marginals = jax.jit(self._clique_marginals)
        self.mean = jax.jit(self._mean)
        self.mean_and_cov = jax.jit(self._mean_and_cov)
        self.query_marginals = jax.jit(self._query_marginals)
        self.sample = jax.jit(self._sample, static_argnums=1)
        self.sample_many = jax.jit(self._sample_many, static_argnums=1)

    # ---------------------------------------------------------------------------------------
    # message passing
    def _potentials(self, theta: jax.Array) -> list[jax.Array]:
        """Clique log-potentials: sum of the parameters of the queries true in each cell."""
        theta = jnp.asarray(theta, dtype=jnp.float64)
        ext = jnp.concatenate([theta, jnp.zeros((1,), theta.dtype)])
        flat = ext[self._index].sum(axis=0)
        o = self._offsets
        return [flat[o[c] : o[c + 1]].reshape(s) for c, s in enumerate(self._shapes)]

    def _collect(self, theta: jax.Array):
        """Upward pass: ``up[c]`` = potential of c times the messages of its subtree."""
        jt = self.junction_tree
        up = self._potentials(theta)
        msgs: list[jax.Array | None] = [None] * len(up)
        for c in reversed(range(len(up))):
            p = jt.parent[c]
            if p < 0:
                continue
            out_axes, to_parent, _, _ = self._plan[c]
            m = jax.nn.logsumexp(up[c], axis=out_axes) if out_axes else up[c]
            msgs[c] = m.reshape(to_parent)
            up[p] = up[p] + msgs[c]
        return up, msgs

    def _log_partition(self, theta: jax.Array) -> jax.Array:
        """``theta_0(theta) = log sum_x exp(theta · a(x))`` (NAPSU-MQ eq. 3), exact."""
        up, _ = self._collect(theta)
        roots = [c for c, p in enumerate(self.junction_tree.parent) if p < 0]
        return sum(jax.nn.logsumexp(up[r]) for r in roots)

    def _log_beliefs(self, theta: jax.Array) -> list[jax.Array]:
        """Normalised log clique marginals after collect + distribute (Hugin) passes."""
        jt = self.junction_tree
        up, msgs = self._collect(theta)
        belief: list[jax.Array] = list(up)
        for c, p in enumerate(jt.parent):
            if p < 0:
                belief[c] = up[c] - jax.nn.logsumexp(up[c])
                continue
            _, _, parent_out, to_child = self._plan[c]
            # message parent -> c: parent's belief without c's own message, summed to the separator
            t = belief[p] - msgs[c]
            m = jax.nn.logsumexp(t, axis=parent_out) if parent_out else t
            belief[c] = up[c] + m.reshape(to_child)
        return belief

    def _clique_marginals(self, theta: jax.Array) -> list[jax.Array]:
        """Probability tables of the junction-tree cliques (axes = clique columns, ascending)."""
        return [jnp.exp(b) for b in self._log_beliefs(theta)]

    def _mean(self, theta: jax.Array) -> jax.Array:
        """``mu(theta) = E[a(x)] = grad theta_0(theta)`` (NAPSU-MQ eq. 7)."""
        flat = jnp.concatenate([p.ravel() for p in self._clique_marginals(theta)])
        rows = jnp.broadcast_to(flat, self._index.shape).ravel()
        return jnp.zeros(self.dimension + 1, flat.dtype).at[self._index.ravel()].add(rows)[:-1]

    def _mean_and_cov(self, theta: jax.Array) -> tuple[jax.Array, jax.Array]:
        """``mu`` and ``Sigma(theta) = Cov[a(x)] = d mu / d theta`` (NAPSU-MQ eq. 7)."""
        mu, jvp = jax.linearize(self._mean, theta)
        cov = jax.vmap(jvp, out_axes=1)(jnp.eye(self.dimension, dtype=mu.dtype))
        return mu, 0.5 * (cov + cov.T)

    def _query_marginals(self, theta: jax.Array) -> list[jax.Array]:
        """Probability tables of the user's full marginals (axes in each marginal's column order)."""
        jt = self.junction_tree
        tables = self._clique_marginals(theta)
        out = []
        for mc, c in zip(self._marginal_cols, self._marginal_home):
            cl = jt.cliques[c]
            drop = tuple(a for a, v in enumerate(cl) if v not in mc)
            t = tables[c].sum(axis=drop) if drop else tables[c]
            kept = [v for v in cl if v in mc]
            out.append(jnp.transpose(t, [kept.index(v) for v in mc]))
        return out

    # ---------------------------------------------------------------------------------------
    # sampling
    def _sample(self, theta: jax.Array, n: int, key: jax.Array) -> jax.Array:
        """``n`` i.i.d. rows from MED_theta by exact ancestral sampling; ``(n, n_columns)`` int32."""
        jt = self.junction_tree
        shape = self.queries.domain.shape
        tables = self._clique_marginals(theta)
        keys = jax.random.split(key, len(tables))
        codes: list[jax.Array | None] = [None] * len(shape)
        for c, table in enumerate(tables):
            cl, sep = jt.cliques[c], jt.separators[c]
            new = [v for v in cl if v not in sep]
            # table as (separator cells, new cells), both row-major in ascending column order
            perm = [cl.index(v) for v in sep] + [cl.index(v) for v in new]
            s_size = math.prod(shape[v] for v in sep)
            k_size = math.prod(shape[v] for v in new)
            t = jnp.transpose(table, perm).reshape(s_size, k_size)
            if sep:
                r = jnp.zeros((n,), jnp.int32)
                for v in sep:
                    r = r * shape[v] + codes[v]
            else:
                r = jnp.zeros((n,), jnp.int32)
            cell = _sample_rows(t, r, keys[c])
            for v in reversed(new):
                codes[v] = (cell % shape[v]).astype(jnp.int32)
                cell = cell // shape[v]
        return jnp.stack(codes, axis=1)

    def _sample_many(self, thetas: jax.Array, n: int, key: jax.Array) -> jax.Array:
        """One dataset of ``n`` rows per theta: ``(m, n, n_columns)``, vectorised over thetas."""
        keys = jax.random.split(key, thetas.shape[0])
        return jax.vmap(lambda t, k: self._sample(t, n, k))(thetas, keys)

    def __repr__(self) -> str:
        jt = self.junction_tree
        return (
            f"MarkovNetwork(d={self.dimension}, cliques={len(jt.cliques)}, width={jt.width}, "
            f"table cells={jt.table_cells}, domain cells={self.queries.domain.size})"
        )


def _sample_rows(table: jax.Array, rows: jax.Array, key: jax.Array) -> jax.Array:
    """Draw one column index per entry of ``rows`` from the normalised row ``table[rows]``.

    Inverse-CDF sampling against the row-offset cumulative table ``r + F_r(k)``, which is
    increasing over the flattened table, so one ``searchsorted`` serves all rows without
    materialising an ``(n, k)`` array.
    """
    s, k = table.shape
    total = table.sum(axis=1, keepdims=True)
    # A separator value of probability zero is never conditioned on; guard the division anyway.
    cond = jnp.where(total > 0, table / jnp.where(total > 0, total, 1.0), 1.0 / k)
    cdf = jnp.cumsum(cond, axis=1).at[:, -1].set(1.0)
    offset_cdf = (cdf + jnp.arange(s, dtype=cdf.dtype)[:, None]).ravel()
    u = jax.random.uniform(key, rows.shape, dtype=cdf.dtype)
    pos = jnp.searchsorted(offset_cdf, rows + u, side="right")
    return jnp.clip(pos - rows * k, 0, k - 1).astype(jnp.int32)
