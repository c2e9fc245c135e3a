"""Wald-type tests of multi-component estimands from m fully synthetic datasets (Reiter 2005).

Reiter (2005), "Significance tests for multi-component estimands from multiply imputed,
synthetic microdata", J. Statist. Plann. Inference 131, 365-377, adapts the Li, Raghunathan &
Rubin (1991) test for multiple imputation to fully synthetic data. For k-vector estimates q_i with
covariance estimates U_i (i = 1..m), and H0: Q = Q0:

    q̄ = (1/m) Σ q_i,   Ū = (1/m) Σ U_i,   B = 1/(m-1) Σ (q_i - q̄)(q_i - q̄)ᵀ
    T_f = (1 + 1/m) B - Ū                                     (multivariate eq. 10)
    r_f = (1 + 1/m) tr(B Ū⁻¹) / k

Assuming B ∝ Ū (the usual proportionality assumption, which makes the test depend on B only
through one scalar), T_f ≈ (r_f - 1) Ū, and the Wald statistic (q̄ - Q0)ᵀ T_f⁻¹ (q̄ - Q0) / k is

    S_f = (q̄ - Q0)ᵀ Ū⁻¹ (q̄ - Q0) / (k (r_f - 1)),

referred to F(k, ν_f) with

    ν_f = t (1 - 1/r_f)²,   t = k (m - 1).

Provenance, precisely: the full text of Reiter (2005) was not available to us, so the formulas
are derived in its framework. T_f, r_f and S_f follow from the proportionality assumption as
above (the construction of Li, Raghunathan & Rubin 1991, with T_f of Reiter 2002 in place of the
MI total variance). ν_f is the Satterthwaite approximation that also gives the scalar eq. 11:
under B ∝ Ū, tr(B Ū⁻¹)/k is a scaled χ²_t/t with t = k(m - 1), so the denominator r_f - 1 of S_f
has 2 E² / Var = t (1 - 1/r_f)² degrees of freedom. For k = 1 this is exactly eq. 11 and S_f is
the square of the scalar t statistic. We also simulated the analogue of Li et al.'s refined
ν = 4 + (t - 4)(1 - (1 - 2/t)/r_f)²; it is anti-conservative for k = 1 (size about 0.065 at
level 0.05 for m = 10..50), while ν_f above is conservative for small m and accurate for m ≥ 50
(benchmarks/analysis/results/calibration.json; tests/test_analysis_multivariate.py).

When T_f = (r_f - 1) Ū is below the floor (n_syn/n) Ū, i.e. r_f ≤ 1 + n_syn/n (the analogue
of the scalar floor of :mod:`synthinfer.analysis.combining`, which also says why), we use
T* = (n_syn/n) Ū, S = (q̄ - Q0)ᵀ T*⁻¹ (q̄ - Q0) / k referred to F(k, ∞) = χ²_k / k. Without n
and n_syn only r_f ≤ 1 (T_f not positive) is detected, and it is an error.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import stats

from synthinfer.errors import AnalysisError, ParameterError


@dataclass(frozen=True)
class WaldTestResult:
    """Result of :func:`reiter_wald_test`.

    statistic : S_f (or the fallback statistic); df_num = k; df_denom = ν_f (``inf`` in the
    fallback); pvalue = P(F(k, ν_f) > S_f); r_f; m datasets used; fallback flag.
    """

    statistic: float
    df_num: int
    df_denom: float
    pvalue: float
    r_f: float
    m: int
    fallback: bool

    def __str__(self) -> str:
        note = " (fallback T* = (n_syn/n) Ū)" if self.fallback else ""
        return (
            f"Reiter (2005) Wald test: F({self.df_num}, {self.df_denom:.4g}) = {self.statistic:.4g}, "
            f"p = {self.pvalue:.4g}, r_f = {self.r_f:.4g}, m = {self.m}{note}"
        )


#: Largest condition number of Ū for which the test is computed (about 1e-4 relative
#: precision left in float64 solves).
_MAX_CONDITION = 1e12


def reiter_wald_test(
    estimates,
    covariances,
    null=None,
    *,
    r_matrix=None,
    n: int | None = None,
    n_syn: int | float | None = None,
) -> WaldTestResult:
    """Test H0: R Q = Q0 with m fully synthetic datasets (Reiter 2005; formulas in module doc).

    Parameters
    ----------
    estimates : ``(m, p)`` point estimates. Datasets with a non-finite entry are left out.
    covariances : ``(m, p, p)`` covariance estimates.
    null : Q0, a length-k vector (default zeros).
    r_matrix : optional ``(k, p)`` restriction matrix R (default identity: test all p entries).
    n, n_syn : rows of the private and of each synthetic dataset (for the floor; module doc).
    """
    if n is not None and n_syn is not None and not (n > 0 and n_syn > 0):
        raise ParameterError(f"n and n_syn must be positive, got n={n!r}, n_syn={n_syn!r}")
    q = np.asarray(estimates, dtype=float)
    U = np.asarray(covariances, dtype=float)
    if q.ndim != 2 or U.shape != (q.shape[0], q.shape[1], q.shape[1]):
        raise AnalysisError(f"estimates must be (m, p) and covariances (m, p, p); got {q.shape}, {U.shape}")
    R = np.eye(q.shape[1]) if r_matrix is None else np.atleast_2d(np.asarray(r_matrix, dtype=float))
    if R.shape[1] != q.shape[1]:
        raise ParameterError(f"r_matrix has {R.shape[1]} columns for {q.shape[1]} parameters")
    k = R.shape[0]
    q0 = np.zeros(k) if null is None else np.broadcast_to(np.asarray(null, dtype=float), (k,))
    # Only the parameters the hypothesis involves matter (others may be missing everywhere).
    used = np.any(R != 0, axis=0)
    q, U, R = q[:, used], U[:, used][:, :, used], R[:, used]
    keep = np.all(np.isfinite(q), axis=1) & np.all(np.isfinite(U), axis=(1, 2))
    m = int(keep.sum())
    if m < 2:
        raise AnalysisError(f"the Wald test needs at least 2 datasets with complete estimates; got {m}")
    qk = q[keep] @ R.T
    Uk = np.einsum("ij,mjl,kl->mik", R, U[keep], R)
    q_bar = qk.mean(axis=0)
    U_bar = Uk.mean(axis=0)
    dev = qk - q_bar
    B = dev.T @ dev / (m - 1)
    diff = q_bar - q0
    # Ū must be a usable covariance: positive definite and not numerically singular (a
    # solve with cond ~ 1e14 "succeeds" with meaningless r_f and statistic).
    eig = np.linalg.eigvalsh(0.5 * (U_bar + U_bar.T))
    if not (np.all(np.isfinite(eig)) and eig[0] > 0 and eig[-1] / eig[0] < _MAX_CONDITION):
        raise AnalysisError(
            "the mean within-dataset covariance Ū is singular, indefinite or numerically singular for "
            f"this hypothesis (eigenvalues {eig[0]:.3g} .. {eig[-1]:.3g}); test fewer or non-redundant terms"
        )
    U_inv_diff = np.linalg.solve(U_bar, diff)
    r_f = (1.0 + 1.0 / m) * np.trace(np.linalg.solve(U_bar, B)) / k
    quad = float(diff @ U_inv_diff)
    floor = None if n is None or n_syn is None else float(n_syn) / float(n)
    if r_f > 1.0 + (floor or 0.0):
        stat = quad / (k * (r_f - 1.0))
        nu = k * (m - 1) * (1.0 - 1.0 / r_f) ** 2
        return WaldTestResult(stat, k, float(nu), float(stats.f.sf(stat, k, nu)), float(r_f), m, False)
    if floor is None:
        raise AnalysisError(
            f"r_f = {r_f:.3g} <= 1, so T_f is not positive definite; pass n and n_syn to use the "
            "fallback T* = (n_syn/n) Ū"
        )
    stat = quad / (floor * k)
    return WaldTestResult(stat, k, float("inf"), float(stats.chi2.sf(k * stat, k)), float(r_f), m, True)
