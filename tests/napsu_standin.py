"""Brute-force stand-in for the Markov-network engine, for NAPSU-MQ tests on tiny domains.

Used only while branch ``engine`` has not landed (see :func:`install`). It enumerates the full
domain, keeps a linearly independent subset of queries (rank-greedy, which spans the same
distributions as Supplement C's canonical queries), and computes everything exactly.
"""

from __future__ import annotations

import importlib
import itertools
import sys
import types

import numpy as np

from synthinfer._jax import jax, jnp
from synthinfer.data import QuerySet, as_marginals


class CanonicalQueries:
    def __init__(self, domain, marginals):
        self.domain = domain
        self.queryset = QuerySet(domain, as_marginals(marginals))
        cells = np.array(list(itertools.product(*[range(k) for k in domain.shape])), dtype=np.int64)
        full = np.stack([self.queryset.count(c[None, :]) for c in cells])  # (cells, queries)
        kept, basis = [], np.ones((cells.shape[0], 1))
        for j in range(full.shape[1]):
            cand = np.hstack([basis, full[:, j : j + 1]])
            if np.linalg.matrix_rank(cand) > basis.shape[1]:
                kept.append(j)
                basis = cand
        self.kept = np.asarray(kept, dtype=np.int64)
        self.dimension = len(kept)
        self.l2_sensitivity = self.queryset.l2_sensitivity
        self.cells = cells
        self.features = full[:, self.kept]

    def count(self, data):
        return self.queryset.count(data)[self.kept]


class MarkovNetwork:
    def __init__(self, queries):
        self.queries = queries
        self.dimension = queries.dimension
        self._a = jnp.asarray(queries.features)
        self._cells = jnp.asarray(queries.cells)

    def log_partition(self, theta):
        return jax.scipy.special.logsumexp(self._a @ theta)

    def mean(self, theta):
        return jax.nn.softmax(self._a @ theta) @ self._a

    def mean_and_cov(self, theta):
        p = jax.nn.softmax(self._a @ theta)
        mu = p @ self._a
        return mu, (self._a * p[:, None]).T @ self._a - jnp.outer(mu, mu)

    def sample(self, theta, n, key):
        idx = jax.random.categorical(key, self._a @ theta, shape=(n,))
        return self._cells[idx]

    def sample_many(self, thetas, n, key):
        keys = jax.random.split(key, thetas.shape[0])
        return jax.vmap(lambda t, k: self.sample(t, n, k))(thetas, keys)


def install() -> bool:
    """Register this stand-in as synthinfer.models.* if the real engine is absent."""
    try:
        importlib.import_module("synthinfer.models.markov_network")
        importlib.import_module("synthinfer.models.canonical")
        return False
    except ImportError:
        pkg = types.ModuleType("synthinfer.models")
        pkg.__path__ = []
        can = types.ModuleType("synthinfer.models.canonical")
        can.CanonicalQueries = CanonicalQueries
        mn = types.ModuleType("synthinfer.models.markov_network")
        mn.MarkovNetwork = MarkovNetwork
        sys.modules.update({"synthinfer.models": pkg, "synthinfer.models.canonical": can,
                            "synthinfer.models.markov_network": mn})
        return True
