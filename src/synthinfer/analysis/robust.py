"""Robustness option of Räisä et al. (2023), Section 5.2: drop estimates with extreme variance.

A synthetic dataset may, e.g., contain nobody of some race with high income; logistic regression
then reports a huge variance for that coefficient, and because Rubin's rules average over
datasets one such estimate makes the combined interval useless. Estimates whose variance is at
least a threshold (the paper uses 10³, Supplement F / Figure S5) are removed before combining,
coefficient by coefficient. Being post-processing of DP output, this does not affect privacy.

The other option of Section 5.2, a tiny L2 penalty with bootstrap variances, lives with the fits
(:func:`synthinfer.analysis.analyze` arguments ``penalty`` and ``n_bootstrap``).
"""

from __future__ import annotations

import numpy as np

from synthinfer.errors import AnalysisError, ParameterError


def drop_extreme_variances(
    estimates, variances, threshold: float = 1e3
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Replace by NaN every (estimate, variance) pair with ``variance >= threshold`` (or not finite).

    Parameters
    ----------
    estimates, variances : ``(m, k)`` arrays (m datasets, k coefficients).
    threshold : variances at or above this are dropped.

    Returns
    -------
    (estimates, variances, n_dropped) where ``n_dropped[j]`` counts the datasets dropped for
    coefficient j (entries that were already NaN are not counted).
    """
    if not threshold > 0:
        raise ParameterError(f"the variance threshold must be positive, got {threshold!r}")
    q = np.array(estimates, dtype=float, ndmin=2)
    v = np.array(variances, dtype=float, ndmin=2)
    if q.shape != v.shape:
        raise AnalysisError(f"estimates {q.shape} and variances {v.shape} differ in shape")
    present = np.isfinite(q) | np.isfinite(v)
    drop = present & ~(np.isfinite(v) & (v < threshold))
    q[drop] = np.nan
    v[drop] = np.nan
    return q, v, drop.sum(axis=0)
