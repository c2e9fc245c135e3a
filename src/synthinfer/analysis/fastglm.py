"""The same GLM on m synthetic datasets: designs built once per dataset shape, fits batched.

:func:`analyze` fits one formula on every synthetic dataset. Parsing the formula and fitting
each dataset through statsmodels costs far more than the arithmetic, so for the common GLMs
(logit, probit, Poisson, OLS; with or without per-row weights; model-based or HC0 covariance)

* the patsy design is built once per group of datasets whose factor levels agree (one
  ``design_info``, then ``build_design_matrices`` for the rest), so the columns are the same
  in every dataset of a group;
* the iteratively reweighted least squares of statsmodels' ``GLM.fit`` (McCullagh & Nelder
  1989, Section 2.5) runs on a stack of equally shaped designs at once: with the working
  weights W = w / (g'(μ)² V(μ)) and working response z = η + g'(μ)(y − μ), each step solves
  (XᵀWX) β = XᵀWz for all datasets together. Start, step, deviance and stopping rule are
  statsmodels': μ₀ = (y + 0.5)/2 for the binomial family and (y + ȳ)/2 otherwise; stop when
  the deviance changes by at most 1e-8 (absolute), at most 100 steps. The deviance of a step
  is scaled by the dispersion estimate of the step before, as statsmodels does (this only
  matters for OLS).
* covariances are statsmodels' too. Model-based: φ (XᵀWX)⁻¹ with W from the last step's
  weights and φ = 1 (binomial, Poisson) or the Pearson estimate Σ w (y − μ)² / (n − k) (OLS).
  HC0: H⁻¹ (Σ sᵢ sᵢᵀ) H⁻¹ with the score sᵢ = wᵢ (yᵢ − μᵢ) xᵢ / (g'(μᵢ) V(μᵢ)) and the
  observed information H = Σ wᵢ (1 + (yᵢ − μᵢ)(V g'' + V' g')/(g' V)) xᵢxᵢᵀ / (g'² V) at β̂
  (equal to the expected information for canonical links; the dispersion cancels).

Estimates and standard errors equal statsmodels' to about 1e-12 relative (normal equations
instead of a least-squares solve). A dataset whose fit is not routine is handed back to the
statsmodels path, so that its result and warnings stay exactly what statsmodels gives: a
design statsmodels would refuse or reduce (an all-zero column, rank deficiency, values outside
the family's range), no convergence in 100 steps, fitted values at the edge of the family's
range (a sign of separation), or any non-finite number.
"""

from __future__ import annotations

import re
import time
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from synthinfer.analysis.models import FitOptions, FitRecord, ModelSpec, glm_family

__all__ = ["FAST_MODELS", "fast_path_applies", "fit_fast"]

#: ``model`` names the batched fitter handles.
FAST_MODELS = ("logit", "probit", "poisson", "ols")

_MAXITER = 100
_TOL = 1e-8
#: Fitted probabilities (or Poisson means) this close to the edge of their range mark a fit
#: heading for separation; statsmodels handles those (and warns as it does).
_EDGE = 1e-10
#: Largest |η| before exp() in the inverse links could overflow.
_MAX_ETA = 500.0
#: Bytes of design matrix fitted in one batch (bounds the memory of the stacked arrays).
_BATCH_BYTES = 64 * 2**20


def fast_path_applies(spec: ModelSpec, opts: FitOptions) -> bool:
    """Whether the batched fitter reproduces what the statsmodels path would do."""
    return (
        spec.kind == "glm"
        and spec.name in FAST_MODELS
        and opts.formula is not None
        and opts.penalty is None
        and opts.cov_type in (None, "nonrobust", "HC0")
        and not opts.model_kwargs
        and not opts.fit_kwargs
    )


# --- designs ------------------------------------------------------------------------------

def _level_signature(data: pd.DataFrame, formula: str) -> tuple:
    """What decides the columns patsy builds from ``data``: the category list of every
    categorical column the formula names, and the distinct values of every other
    non-float column it names (patsy takes a factor's levels from them)."""
    tokens = set(re.findall(r"[A-Za-z_][A-Za-z0-9_.]*", formula))
    sig = []
    for col in data.columns:
        if col not in tokens and not (isinstance(col, str) and col in formula):
            continue
        x = data[col]
        if isinstance(x.dtype, pd.CategoricalDtype):
            sig.append((col, "cat", tuple(x.cat.categories), bool(x.cat.ordered)))
        elif pd.api.types.is_float_dtype(x.dtype) and not re.search(r"C\(\s*" + re.escape(str(col)) + r"\b", formula):
            continue
        else:
            sig.append((col, "values", tuple(sorted(pd.unique(x).tolist(), key=repr))))
    return tuple(sig)


@dataclass
class _Design:
    y: np.ndarray
    X: np.ndarray
    names: list[str]


def _designs(formula: str, datasets: Sequence[pd.DataFrame], binary: bool) -> list[_Design | None]:
    """The patsy design of each dataset, parsed once per level signature; None where it
    cannot be built (the statsmodels path then reports the error as it always has)."""
    import patsy

    from synthinfer.analysis.models import outcome_column

    infos: dict[tuple, tuple] = {}
    out: list[_Design | None] = []
    for data in datasets:
        try:
            key = _level_signature(data, formula)
            if key not in infos:
                y, X = patsy.dmatrices(formula, data, return_type="matrix", NA_action="raise")
                infos[key] = (y.design_info, X.design_info)
            else:
                y, X = patsy.build_design_matrices(list(infos[key]), data, NA_action="raise")
            yc = outcome_column(np.asarray(y), list(y.design_info.column_names), binary)
            out.append(_Design(yc, np.asarray(X, dtype=float), list(X.design_info.column_names)))
        except Exception:  # noqa: BLE001 - the statsmodels path produces the error record
            out.append(None)
    return out


# --- the batched fit ----------------------------------------------------------------------

@dataclass
class _Fit:
    params: np.ndarray  # (g, k)
    cov: np.ndarray  # (g, k, k)
    ok: np.ndarray  # (g,) bool: routine fit, else hand back to statsmodels


def _start_mu(name: str, y: np.ndarray) -> np.ndarray:
    if name in ("logit", "probit"):
        return (y + 0.5) / 2
    return (y + y.mean(axis=1, keepdims=True)) / 2


def _deviance(name: str, y: np.ndarray, mu: np.ndarray, w: np.ndarray, scale: np.ndarray) -> np.ndarray:
    """Per-dataset deviance Σ w d(y, μ) / φ with statsmodels' clipping of the logarithms."""
    eps = np.finfo(float).eps
    if name == "ols":
        d = (y - mu) ** 2
    elif name == "poisson":
        d = 2 * (y * np.log(np.clip(y / mu, eps, np.inf)) - (y - mu))
    else:
        a = np.clip(y / (mu + 1e-20), eps, np.inf)
        b = np.clip((1.0 - y) / (1.0 - mu + 1e-20), eps, np.inf)
        d = 2 * (y * np.log(a) + (1 - y) * np.log(b))
    return np.sum(d * w, axis=1) / scale


def _gram(X: np.ndarray, w: np.ndarray) -> np.ndarray:
    """Σ_i w_i x_i x_iᵀ for each dataset: (g, n, k), (g, n) -> (g, k, k)."""
    return np.matmul(np.swapaxes(X * w[..., None], 1, 2), X)


def _irls(name: str, y: np.ndarray, X: np.ndarray, w: np.ndarray, cov_type: str) -> _Fit:
    """statsmodels' ``GLM.fit()`` (IRLS) on a stack of designs: y (g, n), X (g, n, k), w (g, n)."""
    family = glm_family(name)
    link, var = family.link, family.variance
    g, n, k = X.shape
    ols = name == "ols"
    df_resid = n - k

    def scale_of(mu):
        if not ols:
            return np.ones(g)
        return np.sum((y - mu) ** 2 * w / var(mu), axis=1) / df_resid

    mu = _start_mu(name, y)
    eta = link(mu)
    scale = scale_of(mu)
    dev = _deviance(name, y, mu, w, scale)
    beta = np.zeros((g, k))
    gram = np.zeros((g, k, k))
    active = np.ones(g, dtype=bool)
    converged = np.zeros(g, dtype=bool)
    bad = ~(np.isfinite(dev))
    active &= ~bad
    for _ in range(_MAXITER):
        idx = np.flatnonzero(active)
        if idx.size == 0:
            break
        ya, Xa, wa, mua, etaa = y[idx], X[idx], w[idx], mu[idx], eta[idx]
        d = link.deriv(mua)
        ww = wa / (d**2 * var(mua))
        z = etaa + d * (ya - mua)
        G = _gram(Xa, ww)
        rhs = np.einsum("gnk,gn->gk", Xa, ww * z)
        try:
            b = np.linalg.solve(G, rhs[..., None])[..., 0]
        except np.linalg.LinAlgError:
            bad[idx] = True
            active[idx] = False
            continue
        e = np.einsum("gnk,gk->gn", Xa, b)
        with np.errstate(over="ignore", invalid="ignore"):
            m_new = link.inverse(e)
        beta[idx], gram[idx], eta[idx], mu[idx] = b, G, e, m_new
        new_dev = _deviance(name, ya, m_new, wa, scale[idx])
        scale[idx] = scale_of(mu)[idx]
        edge = np.zeros(idx.size, dtype=bool)
        if not ols:
            edge = np.any(np.abs(e) > _MAX_ETA, axis=1) | np.any(m_new < _EDGE, axis=1)
            if name != "poisson":
                edge |= np.any(m_new > 1 - _EDGE, axis=1)
        # statsmodels warns of perfect prediction when every fitted value equals its outcome
        exact = np.all(np.isclose(m_new, ya), axis=1)
        broken = edge | exact | ~np.isfinite(new_dev) | ~np.all(np.isfinite(b), axis=1)
        done = np.abs(new_dev - dev[idx]) <= _TOL
        dev[idx] = new_dev
        bad[idx[broken]] = True
        converged[idx[done & ~broken]] = True
        active[idx[done | broken]] = False
    ok = converged & ~bad
    cov = np.full((g, k, k), np.nan)
    if ok.any():
        i = np.flatnonzero(ok)
        if cov_type == "HC0":
            cov[i] = _hc0(name, y[i], X[i], w[i], beta[i])
        else:
            cov[i] = scale[i, None, None] * np.linalg.inv(gram[i])
        ok[i] &= np.all(np.isfinite(cov[i]), axis=(1, 2))
    return _Fit(beta, cov, ok)


def _hc0(name: str, y: np.ndarray, X: np.ndarray, w: np.ndarray, beta: np.ndarray) -> np.ndarray:
    """statsmodels' HC0 sandwich for a GLM at β̂: H⁻¹ (Σ sᵢsᵢᵀ) H⁻¹ with the observed H."""
    family = glm_family(name)
    link, var = family.link, family.variance
    mu = link.inverse(np.einsum("gnk,gk->gn", X, beta))
    d, v = link.deriv(mu), var(mu)
    score = w * (y - mu) / (d * v)
    info = w / (d**2 * v) * (1 + (y - mu) / (d * v) * (v * link.deriv2(mu) + var.deriv(mu) * d))
    Hinv = np.linalg.inv(_gram(X, info))
    meat = _gram(X, score**2)
    return Hinv @ meat @ Hinv


# --- per dataset --------------------------------------------------------------------------

def _routine(name: str, design: _Design, w: np.ndarray | None) -> bool:
    """A design the batched fit reproduces statsmodels on (anything else goes to statsmodels)."""
    y, X = design.y, design.X
    if not (np.all(np.isfinite(y)) and np.all(np.isfinite(X))):
        return False
    if w is not None and not np.all(np.isfinite(w)):
        return False
    if name in ("logit", "probit") and not np.all((y >= 0) & (y <= 1)):
        return False
    if name == "poisson" and not np.all(y >= 0):
        return False
    # all-zero columns (an absent category) and rank deficiency: the statsmodels path drops or
    # refuses them and records it
    return bool(np.all(np.any(X != 0, axis=0)))


def _full_rank(X: np.ndarray) -> np.ndarray:
    """``np.linalg.matrix_rank(X) == k`` for a stack (g, n, k), with matrix_rank's tolerance."""
    S = np.linalg.svd(X, compute_uv=False)
    tol = S.max(axis=-1, keepdims=True) * max(X.shape[-2:]) * np.finfo(S.dtype).eps
    return np.count_nonzero(S > tol, axis=-1) == X.shape[-1]


def fit_fast(
    datasets: Sequence[pd.DataFrame],
    spec: ModelSpec,
    opts: FitOptions,
    weights: Sequence[np.ndarray] | None,
) -> list[FitRecord | None]:
    """Batched fits of ``opts.formula``; None for each dataset the statsmodels path must fit.

    Datasets are grouped by design (same column names) and row count, and each group is
    fitted in batches of at most ``_BATCH_BYTES`` of design matrix.
    """
    start = time.perf_counter()
    name = spec.name
    cov_type = opts.cov_type or ("HC0" if weights is not None else "nonrobust")
    if weights is not None and cov_type == "nonrobust":
        return [None] * len(datasets)  # the statsmodels path refuses this, with its message
    designs = _designs(opts.formula, datasets, binary=name in ("logit", "probit"))
    groups: dict[tuple, list[int]] = {}
    for i, des in enumerate(designs):
        w = None if weights is None else weights[i]
        if des is not None and _routine(name, des, w):
            groups.setdefault((tuple(des.names), des.X.shape[0]), []).append(i)
    out: list[FitRecord | None] = [None] * len(datasets)
    for (names, rows), members in groups.items():
        per_batch = max(1, _BATCH_BYTES // max(1, rows * len(names) * 8))
        for s in range(0, len(members), per_batch):
            idx = members[s : s + per_batch]
            t0 = time.perf_counter()
            X = np.stack([designs[i].X for i in idx])
            y = np.stack([designs[i].y for i in idx])
            w = np.ones_like(y) if weights is None else np.stack([np.asarray(weights[i], float) for i in idx])
            rank_ok = _full_rank(X)
            fit = _irls(name, y, X, w, cov_type)
            each = (time.perf_counter() - t0) / len(idx)
            for j, i in enumerate(idx):
                if not (rank_ok[j] and fit.ok[j]):
                    continue
                out[i] = FitRecord(
                    index=i,
                    ok=True,
                    params=pd.Series(fit.params[j], index=list(names)),
                    cov=pd.DataFrame(fit.cov[j], index=list(names), columns=list(names)),
                    nobs=len(datasets[i]),
                    seconds=each,
                )
    # design building is shared; spread its cost over the records for the per-fit timing
    share = (time.perf_counter() - start - sum(r.seconds for r in out if r is not None)) / len(datasets)
    return [None if r is None else _with_seconds(r, r.seconds + share) for r in out]


def _with_seconds(r: FitRecord, seconds: float) -> FitRecord:
    from dataclasses import replace

    return replace(r, seconds=seconds)
