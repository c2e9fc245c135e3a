r"""Fidelity of synthetic data to the private table: marginal distances and the propensity score.

Computed by the data holder only (they read the private rows); the report marks them as not for
publication.

* **Total variation distance** of a marginal, ``TV = (1/2) sum_c |p_real(c) - p_syn(c)|``, over
  every 1-way and 2-way marginal of the Domain's columns (each synthetic dataset against the
  real table, averaged over the datasets).
* **Association differences**: Cramér's V of every pair of columns,
  ``V = sqrt(chi^2 / (n (min(r, c) - 1)))`` of their contingency table (Cramér 1946), in the
  synthetic data minus in the real data (averaged over the datasets): how much stronger or
  weaker each relation is, where TV says only how different the table is.
* **pMSE** (Woo et al. 2009; Snoke, Raab, Nowok, Dibben & Slavkovic 2018, "General and specific
  utility measures for synthetic data", JRSS A): stack ``n_1`` real and ``n_2`` synthetic rows,
  label the synthetic ones, fit a propensity model ``p_hat`` (here a logistic regression on the
  one-hot main effects, as synthpop's ``utility.gen(method = "logit")`` with ``maxorder = 0``),
  and ``pMSE = mean_i (p_hat_i - c)^2`` with ``c = n_2 / (n_1 + n_2)``. Under the null that both
  come from one distribution its expectation is ``(k - 1)(1 - c)^2 c / N`` for a model with ``k``
  parameters (Snoke et al. 2018, eq. 2), and ``S_pMSE`` is the ratio of the two: about 1 when
  the propensity model cannot tell them apart, larger when it can.
"""

from __future__ import annotations

import itertools

import numpy as np

from synthinfer.errors import ParameterError

#: Rows of each table the propensity model sees at most (a fixed, seeded sample above it), so
#: that the report's cost is bounded on large tables.
PMSE_MAX_ROWS = 20_000


def marginal_shares(codes: np.ndarray, shape: tuple[int, ...], columns: tuple[int, ...]) -> np.ndarray:
    """Each cell's share of the rows in the marginal on ``columns`` (flat, row-major)."""
    size = [shape[c] for c in columns]
    flat = np.ravel_multi_index(tuple(codes[:, c] for c in columns), size)
    return np.bincount(flat, minlength=int(np.prod(size))) / max(len(codes), 1)


def marginal_tv(real: np.ndarray, synthetic: np.ndarray, shape: tuple[int, ...], columns: tuple[int, ...]) -> float:
    """Total variation distance between the real and synthetic marginals on ``columns`` (codes)."""
    return 0.5 * float(np.abs(marginal_shares(real, shape, columns) - marginal_shares(synthetic, shape, columns)).sum())


def marginal_tables(codes: np.ndarray,
                    shape: tuple[int, ...]) -> tuple[list[np.ndarray], dict[tuple[int, int], np.ndarray]]:
    """Counts of every 1-way marginal (a vector per column) and every 2-way one (an
    ``(shape[i], shape[j])`` table per pair ``i < j``) of one table of codes: each column is
    copied out once, so a table of millions of rows is read column by column, not strided."""
    cols = [np.ascontiguousarray(codes[:, c], dtype=np.int64) for c in range(len(shape))]  # int64: no overflow below
    one = [np.bincount(c, minlength=s) for c, s in zip(cols, shape)]
    two = {(i, j): np.bincount(cols[i] * shape[j] + cols[j], minlength=shape[i] * shape[j]).reshape(
        shape[i], shape[j]) for i, j in itertools.combinations(range(len(shape)), 2)}
    return one, two


def tv_matrix(real: np.ndarray, synthetics: list[np.ndarray], shape: tuple[int, ...]) -> np.ndarray:
    """``(k, k)`` matrix of total variation distances, averaged over the synthetic datasets: the
    1-way marginals on the diagonal, the 2-way ones off it."""
    return fidelity_matrices(real, synthetics, shape)[0]


def association_differences(real: np.ndarray, synthetics: list[np.ndarray], shape: tuple[int, ...]) -> np.ndarray:
    """``(k, k)`` matrix of Cramér's V in the synthetic data (mean over the datasets) minus in
    the real data, 0 on the diagonal."""
    return fidelity_matrices(real, synthetics, shape)[1]


def fidelity_matrices(real: np.ndarray, synthetics: list[np.ndarray],
                      shape: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray]:
    """:func:`tv_matrix` and :func:`association_differences` together, from each dataset's
    :func:`marginal_tables` counted once."""
    if not synthetics:
        raise ParameterError("no synthetic datasets to compare with the real table")
    k = len(shape)
    real_one, real_two = marginal_tables(real, shape)
    real_v = {pair: _cramers_v(table) for pair, table in real_two.items()}
    tv, assoc = np.zeros((k, k)), np.zeros((k, k))
    for s in synthetics:
        one, two = marginal_tables(s, shape)
        for i in range(k):
            tv[i, i] += _tv(real_one[i], one[i])
        for (i, j), table in two.items():
            tv[i, j] += _tv(real_two[i, j], table)
            assoc[i, j] += _cramers_v(table) - real_v[i, j]
    tv, assoc = tv / len(synthetics), assoc / len(synthetics)
    upper = np.triu_indices(k, 1)
    tv[upper[::-1]], assoc[upper[::-1]] = tv[upper], assoc[upper]
    return tv, assoc


def _tv(a: np.ndarray, b: np.ndarray) -> float:
    """Total variation distance between the distributions of two count tables."""
    return 0.5 * float(np.abs(a / max(a.sum(), 1) - b / max(b.sum(), 1)).sum())


def pmse(real: np.ndarray, synthetic: np.ndarray, shape: tuple[int, ...], *, seed: int = 0) -> dict[str, float]:
    """``{"pmse", "s_pmse", "expected_null", "rows_real", "rows_synthetic"}`` of the logistic
    propensity model on one-hot main effects (module docstring); at most :data:`PMSE_MAX_ROWS`
    rows of each table, sampled with ``seed``."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.preprocessing import OneHotEncoder

    rng = np.random.default_rng(seed)
    if len(real) > PMSE_MAX_ROWS:
        real = real[rng.choice(len(real), PMSE_MAX_ROWS, replace=False)]
    if len(synthetic) > PMSE_MAX_ROWS:
        synthetic = synthetic[rng.choice(len(synthetic), PMSE_MAX_ROWS, replace=False)]
    x = np.concatenate([real, synthetic])
    t = np.concatenate([np.zeros(len(real)), np.ones(len(synthetic))])
    enc = OneHotEncoder(categories=[np.arange(s) for s in shape], drop="first", sparse_output=True)
    design = enc.fit_transform(x)
    # an unpenalised fit (C large), as the logit of the paper; lbfgs on the sparse one-hot design
    fit = LogisticRegression(C=1e6, max_iter=2000).fit(design, t)
    p = fit.predict_proba(design)[:, 1]
    n, c = len(t), len(synthetic) / len(t)
    value = float(np.mean((p - c) ** 2))
    k = design.shape[1] + 1  # coefficients and the intercept
    expected = (k - 1) * (1 - c) ** 2 * c / n
    return {"pmse": value, "s_pmse": value / expected, "expected_null": expected,
            "rows_real": int(len(real)), "rows_synthetic": int(len(synthetic))}


def cramers_v(codes: np.ndarray, shape: tuple[int, ...], i: int, j: int) -> float:
    """Cramér's V of columns ``i`` and ``j`` (0 when either takes one value only)."""
    table = np.bincount(codes[:, i] * shape[j] + codes[:, j], minlength=shape[i] * shape[j])
    return _cramers_v(table.reshape(shape[i], shape[j]))


def _cramers_v(table: np.ndarray) -> float:
    """Cramér's V of a contingency table of counts (0 when either side takes one value only)."""
    table = table.astype(float)
    table = table[table.sum(axis=1) > 0][:, table.sum(axis=0) > 0]  # categories that occur
    k = min(table.shape) - 1
    if k < 1:
        return 0.0
    n = table.sum()
    expected = np.outer(table.sum(axis=1), table.sum(axis=0)) / n
    chi2 = float(((table - expected) ** 2 / expected).sum())
    return float(np.sqrt(chi2 / (n * k)))
