r"""NAPSU-MQ's noise-aware likelihood (Räisä et al. 2023, eq. 6) in the interaction basis.

Eq. 6 is ``log N(s~ | n mu_s(theta), n Sigma_s(theta) + D)`` with ``mu_s, Sigma_s`` the mean and
covariance of the ``d`` canonical queries ``a(x)`` under MED_theta and ``D`` the Gaussian
mechanism's noise variances (``sigma_DP^2 I`` in the paper; one variance per query when the
queries are measured at different noise scales). :func:`synthinfer.napsu.likelihood.log_likelihood`
forms the dense ``d x d`` matrix. This module evaluates the same number through matrices that
have the junction tree's clique pattern.

Interaction basis
-----------------
For a column ``i`` with reference category ``r_i`` and a scope ``F`` (a set of columns) with
values ``v`` off the reference on every column of ``F``, the interaction feature is
``u_{F,v}(x) = 1[x_F = v]``. ``U`` is the set of interaction features of every sub-scope of
every junction-tree clique (Koller and Friedman 2009, Ch. 10: a junction tree of the
marginals' scopes, triangulated when the scopes form cycles). Each clique ``C`` contributes
``K_C - 1`` features (``K_C = prod_{i in C} k_i`` cells), and ``1, u_C`` is an invertible
(unimodular) recoding of the cell indicators of ``C``.

1. **Queries.** A canonical query (Supplement C; :mod:`synthinfer.napsu.queries`) is a cell of
   a marginal ``M`` whose non-reference support is ``F`` with values ``v`` on ``F`` and the
   reference on ``M \ F``. Writing ``1[x_j = r_j] = 1 - sum_{w != r_j} 1[x_j = w]`` and
   expanding the product over ``M \ F``::

       1[x_F = v, x_{M\F} = r] = sum_{E ⊆ M\F} (-1)^{|E|} sum_{w in non-ref(E)} u_{F∪E,(v,w)}(x)

   so ``a(x) = T u(x)`` with ``T`` fixed, entries in ``{0, +1, -1}``, built from the query
   list alone (no enumeration of the domain). Row ``j`` touches only features whose scope lies
   in query ``j``'s marginal. Restricted to the marginals' own features ``T`` is square, and
   a row and column permutation of a unit triangular matrix (the query of scope ``F`` has
   coefficient 1 on ``u_{F,v}`` and its other terms on larger scopes), so ``det T = ±1``; the
   columns of the other features of ``U`` (interactions of a clique that no marginal
   contains: triangulation fill, or the 3-way term of a triangle of 2-way marginals) are zero.
   Row ``j`` is also column ``c_j`` (the query's cell) of the marginal's matrix ``A_M`` of 2.,
   so ``T^T D^{-1} T = sum_j A_{M_j}[:, c_j] A_{M_j}[:, c_j]^T / D_j``.

2. **Precision.** MED_theta is Markov with respect to the junction tree, and ``U`` is a
   minimal statistic of the decomposable family on its cliques, which contains MED_theta
   (``eta = T^T theta`` on the marginal features, zero on the others). In mean parameters the
   negative entropy of a distribution that is Markov on a junction tree splits over it,
   ``-H(p) = sum_C -H(p_C) - sum_S -H(p_S)`` (Wainwright and Jordan 2008, Section 4.2 on
   hypertree decompositions of the entropy; Koller and Friedman 2009, Section 10.2 on clique
   trees), the conjugate dual of the log-partition function is ``A*(mu) = -H(p_mu)``
   (Wainwright and Jordan 2008, Theorem 3.4), and the Hessian of ``A*`` is the inverse of the
   Hessian of ``A``, ``Sigma_U^{-1}``. Each local term is the negative entropy
   of a saturated model on one table: with ``p_C = Z_C^{-T} (1, mu_C)`` (``Z_C`` the
   Kronecker product over the clique's columns of the per-column recoding),
   ``d^2 (sum_x p log p) / d mu_C^2 = A_C diag(1/p_C) A_C^T`` where ``A_C`` drops the constant
   row of ``Z_C^{-1}``: ``A_C[(F,v), x] = prod_{i in F} (1[x_i = v_i] - 1[x_i = r_i])
   prod_{i in C\F} 1[x_i = r_i]``. Hence::

       P = Sigma_U^{-1} = sum_C E_C A_C diag(1/p_C) A_C^T E_C^T - sum_S E_S A_S diag(1/p_S) A_S^T E_S^T

   (``E`` embeds a clique's or separator's features into ``U``; the Gaussian analogue is the
   decomposable-model inverse covariance of Lauritzen 1996, Section 5.3). ``P`` is zero for every pair of features whose scopes share no
   clique, and needs only the clique marginals of one two-pass message passing. Its
   log-determinant is closed-form: ``det Sigma_C = prod_x p_C(x)`` (the recoding is
   unimodular; the multinomial covariance of ``K - 1`` cell indicators has that determinant),
   and a positive-definite matrix whose inverse has this chordal form has
   ``det Sigma = prod_C det Sigma_C / prod_S det Sigma_S`` (Lauritzen 1996, Section 5.3), so
   ``log det P = - sum_C sum_x log p_C(x) + sum_S sum_x log p_S(x)``.

3. **Likelihood.** With ``s~`` of length ``m`` (here ``m = d``), ``Sigma_s = T Sigma_U T^T``,
   ``mu_s = T mu_U`` and ``N = P + n T^T D^{-1} T`` (``|U| x |U|``, clique pattern):

   * the matrix determinant lemma,
     ``det(D + n T Sigma_U T^T) = det D det(Sigma_U) det(Sigma_U^{-1} + n T^T D^{-1} T)``, gives
     ``log det(n Sigma_s + D) = log det D + log det N - log det P``. It holds for any
     (rectangular) ``T``; for ``D = sigma^2 I`` and square ``T`` it equals
     ``log det(n T^T T + sigma^2 P) - log det P - log det(T^T T) + 2 log|det T|``, and the last
     two terms cancel, so no ``log det(T^T T)`` correction appears;
   * Woodbury, ``(D + T (n Sigma_U) T^T)^{-1} = D^{-1} - D^{-1} T (P/n + T^T D^{-1} T)^{-1} T^T D^{-1}``,
     gives, with ``r = s~ - n mu_s`` and ``b = T^T D^{-1} r``,
     ``r^T (n Sigma_s + D)^{-1} r = r^T D^{-1} r - n b^T N^{-1} b``.

Every matrix formed has the clique pattern: ``T`` (rows within a marginal), ``P`` and
``T^T D^{-1} T`` and ``N`` (pairs of features within one clique). ``U`` is ordered clique by
clique from the leaves to the roots, each clique contributing the features whose scope is not
in its separator; every feature is then simplicial when eliminated (its neighbours all lie in
its clique), so the Cholesky factor of ``N`` in this order has the same pattern (no fill-in).
Here ``N`` is still a dense array factorised densely; the pattern is what a clique-by-clique
(multifrontal) factorisation will exploit.

Numerics: ``P`` grows like ``1 / p_C(x)``, so cells of probability near the float64 floor
make ``P`` ill-conditioned; and when ``D`` is small against ``n Sigma_s`` the two terms of the
quadratic form nearly cancel (relative loss about ``max(n Sigma_s) / min(D)``).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from synthinfer._jax import jax, jnp
from synthinfer.errors import ParameterError

if TYPE_CHECKING:
    from synthinfer.napsu.network import MarkovNetwork

_LOG_2PI = math.log(2.0 * math.pi)

#: an interaction feature: (scope as ascending column indices, one non-reference code per column)
Feature = tuple[tuple[int, ...], tuple[int, ...]]


@dataclass(frozen=True)
class _Table:
    """One clique or separator: its features' positions in ``U`` and its local ``A`` matrix."""

    columns: tuple[int, ...]
    features: np.ndarray  # int64, positions in U of the table's K - 1 local features
    local: np.ndarray  # A: (K - 1, K), rows = features, columns = cells (row-major)


class InteractionStructure:
    """The fixed linear structure of eq. 6 in the interaction basis of a network.

    Built once per network from its queries and junction tree (no enumeration of the domain;
    cost ``O(sum_C K_C^2)`` for the local tables).

    Attributes
    ----------
    features : tuple of Feature
        The interaction features ``U``, in elimination order (leaf cliques first).
    home : ndarray of int64, shape (|U|,)
        The clique (index into the junction tree) that owns each feature: the clique nearest
        the root whose columns contain the feature's scope.
    marginal_features : ndarray of bool, shape (|U|,)
        Whether each feature's scope lies in one of the user's marginals (the features ``u``
        of the canonical parametrisation); the others have zero columns in ``T``.
    transform : ndarray, shape (d, |U|)
        ``T`` with ``a(x) = T u(x)``.
    cliques : list of _Table
        Local ``A`` matrices of every clique.
    separators : list of (int, _Table)
        Each non-empty separator with the clique whose parent edge it is.
    """

    def __init__(self, network: MarkovNetwork) -> None:
        jt = network.junction_tree
        queries = network.queries
        domain = queries.domain
        shape = domain.shape
        ref = [queries.reference[name] for name in domain.names]

        def local_features(cols: Sequence[int]) -> list[Feature]:
            out = []
            for r in range(1, len(cols) + 1):
                for scope in itertools.combinations(cols, r):
                    for v in itertools.product(*[_off_reference(shape[i], ref[i]) for i in scope]):
                        out.append((scope, v))
            return out

        # U in elimination order: leaves first; a clique owns the features not in its separator
        features: list[Feature] = []
        home: list[int] = []
        for c in reversed(range(len(jt.cliques))):
            sep = set(jt.separators[c])
            for f in local_features(jt.cliques[c]):
                if not set(f[0]) <= sep:
                    features.append(f)
                    home.append(c)
        index = {f: k for k, f in enumerate(features)}
        self.features = tuple(features)
        self.home = np.asarray(home, dtype=np.int64)
        self.dimension = len(features)
        scopes = [tuple(sorted(domain.index(c) for c in m.columns)) for m in queries.marginals]
        self.marginal_features = np.array(
            [any(set(f[0]) <= set(s) for s in scopes) for f in features], dtype=bool
        )

        def table(cols: tuple[int, ...]) -> _Table:
            fs = local_features(cols)
            cells = math.prod(shape[i] for i in cols)
            local = np.stack([_local_row(cols, f, shape, ref) for f in fs]) if fs else np.zeros((0, cells))
            return _Table(cols, np.asarray([index[f] for f in fs], dtype=np.int64), local)

        self.cliques = [table(cl) for cl in jt.cliques]
        self.separators = [(c, table(sep)) for c, sep in enumerate(jt.separators) if sep]
        # p_S is the child clique's marginal summed over the columns it does not share
        self._separator_sums = [
            (c, tuple(shape[i] for i in jt.cliques[c]),
             tuple(a for a, v in enumerate(jt.cliques[c]) if v not in jt.separators[c]))
            for c, _ in self.separators
        ]

        # per clique, the indicators 1[x_F = v] over its cells of the features it owns (mu_U)
        self._owned = []
        for c, cl in enumerate(jt.cliques):
            own = np.flatnonzero(self.home == c)
            grid = np.indices([shape[i] for i in cl]).reshape(len(cl), -1)
            ind = np.ones((grid.shape[1], own.size))
            for k, f in enumerate(own):
                scope, v = features[f]
                for i, vi in zip(scope, v):
                    ind[:, k] *= grid[cl.index(i)] == vi
            self._owned.append((own, ind))

        # T, row by row from each kept query's cell (queries.py: marginal, flat cell)
        t = np.zeros((queries.dimension, self.dimension))
        for j, (mi, flat) in enumerate(zip(queries.query_marginal, queries.query_cell)):
            m = queries.marginals[mi]
            cols = [domain.index(c) for c in m.columns]
            cell = np.unravel_index(int(flat), m.shape(domain))
            on = {i: int(x) for i, x in zip(cols, cell) if x != ref[i]}
            rest = [i for i in cols if i not in on]
            for r in range(len(rest) + 1):
                for extra in itertools.combinations(rest, r):
                    for w in itertools.product(*[_off_reference(shape[i], ref[i]) for i in extra]):
                        values = {**on, **dict(zip(extra, w))}
                        scope = tuple(sorted(values))
                        t[j, index[(scope, tuple(values[i] for i in scope))]] += (-1.0) ** r
        self.transform = t

    # ---------------------------------------------------------------------------------------
    def pattern(self) -> np.ndarray:
        """Boolean ``|U| x |U|``: whether two features' scopes lie together in one clique."""
        cols = [set(t.columns) for t in self.cliques]
        scopes = [set(f[0]) for f in self.features]
        return np.array([[any(a | b <= c for c in cols) for b in scopes] for a in scopes])

    def mean(self, marginals: Sequence[jax.Array]) -> jax.Array:
        """``mu_U = E[u(x)]`` from the flat clique marginals."""
        mu = jnp.zeros(self.dimension)
        for (own, ind), p in zip(self._owned, marginals):
            if own.size:
                mu = mu.at[own].set(p @ ind)
        return mu

    def precision(self, marginals: Sequence[jax.Array]) -> jax.Array:
        """``P = Sigma_U^{-1}``: clique terms minus separator terms (module docstring, 2.)."""
        prec = jnp.zeros((self.dimension, self.dimension))
        for tab, p in zip(self.cliques, marginals):
            block = (tab.local / p) @ tab.local.T
            prec = prec.at[tab.features[:, None], tab.features[None, :]].add(block)
        for (_, tab), p_s in zip(self.separators, self._separator_marginals(marginals)):
            block = (tab.local / p_s) @ tab.local.T
            prec = prec.at[tab.features[:, None], tab.features[None, :]].add(-block)
        return prec

    def log_det_precision(self, marginals: Sequence[jax.Array]) -> jax.Array:
        """``log det P = - sum_C sum_x log p_C(x) + sum_S sum_x log p_S(x)`` (module docstring)."""
        out = -sum(jnp.sum(jnp.log(p)) for p in marginals)
        return out + sum(jnp.sum(jnp.log(p)) for p in self._separator_marginals(marginals))

    def _separator_marginals(self, marginals: Sequence[jax.Array]) -> list[jax.Array]:
        """``p_S`` of each non-empty separator, summed from its (child) clique's marginal."""
        return [marginals[c].reshape(k).sum(axis=drop).ravel() for c, k, drop in self._separator_sums]


def _off_reference(k: int, r: int) -> list[int]:
    return [v for v in range(k) if v != r]


def _local_row(cols: tuple[int, ...], f: Feature, shape, ref) -> np.ndarray:
    """Row of ``A`` for feature ``f`` over the cells of ``cols`` (a Kronecker product)."""
    scope, v = f
    row = np.ones(1)
    for i in cols:
        e = np.zeros(shape[i])
        if i in scope:
            e[v[scope.index(i)]] += 1.0
            e[ref[i]] -= 1.0
        else:
            e[ref[i]] = 1.0
        row = np.kron(row, e)
    return row


def structure(network: MarkovNetwork) -> InteractionStructure:
    """The network's :class:`InteractionStructure`, built once and kept with its programs."""
    return network.programs.get(("interaction_structure",), lambda: InteractionStructure(network))


def structured_log_likelihood(
    theta: jax.Array, s_tilde: jax.Array, D: jax.Array, n: jax.Array, network: MarkovNetwork
) -> jax.Array:
    """``log N(s~ | n T mu_U, n T Sigma_U T^T + diag(D))``, NAPSU-MQ eq. 6, without ``Sigma``.

    Equal to :func:`synthinfer.napsu.likelihood.log_likelihood` with ``D = sigma_DP^2``; the
    derivation is in the module docstring. Pure JAX in ``theta``, ``s_tilde``, ``D`` and ``n``
    (usable under ``jit``, ``grad`` and ``vmap``; close over ``network``).

    Parameters
    ----------
    theta : array, shape (d,)
    s_tilde : array, shape (d,)
        Noisy canonical query answers.
    D : scalar or array of shape (d,)
        Noise variance of each query (a scalar for ``sigma_DP^2 I``); must be positive.
    n : scalar
        Number of rows.
    network : MarkovNetwork
    """
    st = structure(network)
    d = network.dimension
    s_tilde = jnp.asarray(s_tilde, dtype=jnp.float64)
    if s_tilde.shape != (d,):
        raise ParameterError(f"s_tilde must have shape ({d},) (one answer per canonical query), got {s_tilde.shape}")
    D = jnp.asarray(D, dtype=jnp.float64)
    if D.shape not in ((), (d,)):
        raise ParameterError(f"D (noise variances) must be a scalar or have shape ({d},), got {D.shape}")
    D = jnp.broadcast_to(D, (d,))
    marg = [m.ravel() for m in network.clique_marginals(theta)]
    t = st.transform
    r = s_tilde - n * (t @ st.mean(marg))
    d_inv = 1.0 / D
    tdt = t.T @ (d_inv[:, None] * t)
    chol = jnp.linalg.cholesky(st.precision(marg) + n * tdt)
    y = jax.scipy.linalg.solve_triangular(chol, t.T @ (d_inv * r), lower=True)
    quad = jnp.dot(r, d_inv * r) - n * jnp.dot(y, y)
    logdet = jnp.sum(jnp.log(D)) + 2.0 * jnp.sum(jnp.log(jnp.diag(chol))) - st.log_det_precision(marg)
    return -0.5 * quad - 0.5 * logdet - 0.5 * d * _LOG_2PI
