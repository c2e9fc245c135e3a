"""Brute-force oracle for MED_theta on small domains (test helper, not a test module).

Enumerates every cell of the domain, builds the canonical query design matrix ``A`` (cells x d)
and evaluates NAPSU-MQ eq. 3 and eq. 7 directly: ``theta_0 = log sum exp(A theta)``,
``mu = A^T p``, ``Sigma = A^T diag(p) A - mu mu^T``.
"""

from __future__ import annotations

import itertools

import numpy as np
from scipy.special import logsumexp

from synthinfer.napsu import CanonicalQueries


def all_cells(domain) -> np.ndarray:
    return np.array(list(itertools.product(*[range(k) for k in domain.shape])), dtype=np.int64)


def design(queries: CanonicalQueries, full: bool = False) -> np.ndarray:
    """0/1 matrix: rows = domain cells (row-major), columns = kept (or all) queries."""
    domain = queries.domain
    grid = all_cells(domain)
    qs = queries.queryset
    a = np.zeros((len(grid), qs.dimension))
    off = qs.offsets()
    for i, m in enumerate(qs.marginals):
        idx = [domain.index(c) for c in m.columns]
        flat = np.ravel_multi_index(tuple(grid[:, j] for j in idx), m.shape(domain))
        a[np.arange(len(grid)), off[i] + flat] = 1.0
    return a if full else a[:, queries.kept]


def brute_force(queries: CanonicalQueries, theta: np.ndarray):
    """(log_partition, mu, Sigma, joint probabilities over all cells) by enumeration."""
    a = design(queries)
    e = a @ np.asarray(theta, dtype=np.float64)
    lz = logsumexp(e)
    p = np.exp(e - lz)
    mu = p @ a
    sigma = (a * p[:, None]).T @ a - np.outer(mu, mu)
    return lz, mu, sigma, p
