"""Rubin's rules for fully synthetic data, scalar estimands (Räisä et al. 2023, Supplement B).

Given point estimates q_i and variance estimates v_i from the same analysis run on m synthetic
datasets drawn from the posterior predictive (Raghunathan, Reiter & Rubin 2003; Reiter 2002):

    q̄ = (1/m) Σ q_i,   v̄ = (1/m) Σ v_i,   b = 1/(m-1) Σ (q_i - q̄)²                    (eq. 9)
    T = (1 + 1/m) b - v̄,    T* = T if T > 0, else (n_syn/n) v̄                         (eq. 10)
    ν = (m - 1)(1 - 1/r)²,   r = (1 + 1/m) b / v̄                                       (eq. 11)

and (q̄ - Q)/√T* is referred to a t distribution with ν degrees of freedom.

Where the paper is silent, two choices:

* **The floor.** T estimates the variance of q̄ about the estimand, which includes the sampling
  variance of the real data's own estimate, about (n_syn/n) v̄ (v̄ is a variance at n_syn rows).
  We use T* = max(T, (n_syn/n) v̄): eq. 10's fallback also where T is positive but below that
  floor. The paper's T* = T there is unstable: as r → 1 (T → 0+), eq. 11 gives ν → 0 and
  t quantiles without bound (intervals of width ~1e150 were seen where the between-dataset
  spread is *small*). With the floor, T* is continuous in b and ν ≥ (m - 1)(n_syn / (n + n_syn))²
  wherever eq. 11 is used (about 24.7 at m = 100, n_syn = n). Without n and n_syn only T ≤ 0
  can be detected (its intervals are NaN, with a warning).
* **The reference where floored.** The floor is built from v̄ alone, whose sampling variability
  Assumption B.2 takes to be negligible, so those estimands use the normal reference (ν = ∞)
  and are flagged in ``fallback``.

NaN entries mean "no estimate from this dataset" (a failed fit, or an estimate dropped by
:func:`synthinfer.analysis.drop_extreme_variances`); each estimand is combined over the datasets
that have it, and ``m`` reports how many that was.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy import stats

from synthinfer.errors import AnalysisError, ParameterError, SynthinferWarning, user_stacklevel


@dataclass(frozen=True)
class CombinedEstimate:
    """Result of :func:`rubins_rules`: one entry per estimand (arrays of shape ``(k,)``).

    Attributes
    ----------
    q_bar, v_bar, b : eq. 9 (mean estimate, mean within variance, between variance).
    T : eq. 10's raw variance estimate (may be negative).
    T_star : the variance used for inference (T, or the fallback (n_syn/n) v̄).
    r : (1 + 1/m) b / v̄.
    df : degrees of freedom ν (eq. 11; ``inf`` where the fallback is used).
    m : number of datasets that contributed to each estimand.
    fallback : True where T* = (n_syn/n) v̄ was used (T below it; module docstring).
    names : estimand names, or None.
    """

    q_bar: np.ndarray
    v_bar: np.ndarray
    b: np.ndarray
    T: np.ndarray
    T_star: np.ndarray
    r: np.ndarray
    df: np.ndarray
    m: np.ndarray
    fallback: np.ndarray
    names: tuple[str, ...] | None = None

    @property
    def se(self) -> np.ndarray:
        """Standard errors √T*."""
        return np.sqrt(self.T_star)

    def tvalues(self, null: float | np.ndarray = 0.0) -> np.ndarray:
        return (self.q_bar - null) / self.se

    def pvalues(self, null: float | np.ndarray = 0.0) -> np.ndarray:
        """Two-sided p-values of H0: Q = null against the t(ν) reference."""
        return 2.0 * stats.t.sf(np.abs(self.tvalues(null)), self.df)

    def conf_int(self, alpha: float = 0.05) -> np.ndarray:
        """``(k, 2)`` array of equal-tailed (1 - alpha) t intervals q̄ ± t_{ν, 1-α/2} √T*."""
        if not 0.0 < alpha < 1.0:
            raise ParameterError(f"alpha must be in (0, 1), got {alpha!r}")
        half = stats.t.ppf(1.0 - alpha / 2.0, self.df) * self.se
        return np.stack([self.q_bar - half, self.q_bar + half], axis=-1)

    def to_frame(self, alpha: float = 0.05) -> pd.DataFrame:
        ci = self.conf_int(alpha)
        lo, hi = f"[{alpha / 2:g}", f"{1 - alpha / 2:g}]"
        return pd.DataFrame(
            {
                "estimate": self.q_bar,
                "std_err": self.se,
                "t": self.tvalues(),
                "p_value": self.pvalues(),
                lo: ci[:, 0],
                hi: ci[:, 1],
                "df": self.df,
                "m": self.m,
                "fallback": self.fallback,
                "b": self.b,
                "v_bar": self.v_bar,
                "r": self.r,
            },
            index=list(self.names) if self.names is not None else None,
        )


def _as_matrix(x, what: str) -> tuple[np.ndarray, bool]:
    arr = np.asarray(x, dtype=float)
    if arr.ndim == 1:
        return arr[:, None], True
    if arr.ndim != 2:
        raise AnalysisError(f"{what} must have shape (m,) or (m, k), got {arr.shape}")
    return arr, False


def rubins_rules(
    estimates,
    variances,
    n: int | None = None,
    n_syn: int | float | None = None,
    *,
    names: list[str] | None = None,
) -> CombinedEstimate:
    """Combine estimates from m synthetic datasets (Supplement B, eqs. 9-11), per estimand.

    Parameters
    ----------
    estimates, variances : arrays of shape ``(m,)`` (one estimand) or ``(m, k)`` (k estimands,
        combined independently). NaN marks a missing estimate; both entries of the pair are then
        ignored.
    n, n_syn : rows of the private data and of each synthetic dataset, for the floor
        T* = max(T, (n_syn/n) v̄) (module docstring). Without them only T ≤ 0 falls back, and
        such estimands get T* = NaN and a warning.
    names : optional estimand names carried into the result.

    Returns
    -------
    CombinedEstimate, with arrays of shape ``(k,)`` (``(1,)`` for scalar input).
    """
    q, _ = _as_matrix(estimates, "estimates")
    v, _ = _as_matrix(variances, "variances")
    if q.shape != v.shape:
        raise AnalysisError(f"estimates {q.shape} and variances {v.shape} differ in shape")
    if names is not None and len(names) != q.shape[1]:
        raise AnalysisError(f"{len(names)} names for {q.shape[1]} estimands")
    if np.any(v[np.isfinite(v)] < 0):
        raise AnalysisError("variance estimates must be non-negative")
    ok = np.isfinite(q) & np.isfinite(v)
    m = ok.sum(axis=0)
    if np.all(m < 2):
        raise AnalysisError(
            f"Rubin's rules need estimates from at least 2 datasets per estimand; got {m.max()}"
        )

    qz = np.where(ok, q, 0.0)
    vz = np.where(ok, v, 0.0)
    # r -> 0 (between-dataset variance ~ 0) sends nu to +inf, its limit: overflow there is not an error
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        mf = m.astype(float)
        q_bar = qz.sum(axis=0) / mf
        v_bar = vz.sum(axis=0) / mf
        b = np.where(ok, (q - q_bar) ** 2, 0.0).sum(axis=0) / (mf - 1.0)
        T = (1.0 + 1.0 / mf) * b - v_bar
        r = (1.0 + 1.0 / mf) * b / v_bar
        df = (mf - 1.0) * (1.0 - 1.0 / r) ** 2
    too_few = m < 2
    if n is not None and n_syn is not None:
        if n <= 0 or n_syn <= 0:
            raise ParameterError(f"n and n_syn must be positive, got n={n!r}, n_syn={n_syn!r}")
        T_fb = (float(n_syn) / float(n)) * v_bar
        fallback = ((T <= 0) | (T <= T_fb)) & ~too_few
    else:
        T_fb = np.full_like(v_bar, np.nan)
        fallback = (T <= 0) & ~too_few
        if fallback.any():
            warnings.warn(
                f"{int(fallback.sum())} estimand(s) have a negative variance estimate T; pass n and "
                "n_syn to use the fallback T* = (n_syn/n) v̄ (their intervals are NaN now)",
                SynthinferWarning,
                stacklevel=user_stacklevel(),
            )
    T_star = np.where(fallback, T_fb, T)
    df = np.where(fallback, np.inf, df)
    if too_few.any():
        which = "" if names is None else f" ({', '.join(str(nm) for nm, t in zip(names, too_few) if t)})"
        warnings.warn(
            f"{int(too_few.sum())} estimand(s){which} have a usable estimate in fewer than 2 datasets; "
            "their combined estimates are NaN",
            SynthinferWarning,
            stacklevel=user_stacklevel(),
        )
    # T* = 0 (every dataset gave the same estimate with zero variance, so v̄ = b = 0): no
    # interval can be formed; NaN rather than a zero-width interval with p = 0.
    degenerate = ~too_few & np.isfinite(T_star) & (T_star <= 0)
    if degenerate.any():
        warnings.warn(
            f"{int(degenerate.sum())} estimand(s) have zero total variance (identical estimates with "
            "zero variance in every dataset); their standard errors and intervals are NaN",
            SynthinferWarning,
            stacklevel=user_stacklevel(),
        )
        T_star = np.where(degenerate, np.nan, T_star)
    nan = np.full_like(q_bar, np.nan)
    for arr in (q_bar, v_bar, b, T, T_star, r, df):
        arr[too_few] = nan[too_few]
    return CombinedEstimate(
        q_bar=q_bar,
        v_bar=v_bar,
        b=b,
        T=T,
        T_star=T_star,
        r=r,
        df=df,
        m=m,
        fallback=fallback,
        names=None if names is None else tuple(names),
    )
