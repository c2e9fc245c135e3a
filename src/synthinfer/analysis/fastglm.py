"""The same GLM on m synthetic datasets: designs built once per dataset shape, fits batched.

:func:`analyze` fits one formula on every synthetic dataset. Parsing the formula and fitting
each dataset through statsmodels costs far more than the arithmetic, so for the common GLMs
(logit, probit, Poisson, OLS; with or without per-row weights; model-based or HC0 covariance)

* the formula is parsed once per group of datasets whose factor levels agree (one
  ``design_info``, then ``build_design_matrices`` for the rest), so the columns are the same
  in every dataset of a group. Each design is built on the dataset's distinct rows (of the
  columns the formula uses): synthetic data of a categorical table repeat a few thousand row
  patterns, and patsy's cost is per row. A row pattern with count c and weights w₁..w_c
  enters every sum below with Σ w (Σ w² in the HC0 meat), which is exact. Formulas with
  stateful transforms (``center``, ``bs``, ...) take their state from each full dataset, as
  statsmodels does, so they are parsed per dataset on all rows;
* the iteratively reweighted least squares of statsmodels' ``GLM.fit`` (McCullagh & Nelder
  1989, Section 2.5) runs on a stack of designs with the same columns at once: with the working
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
instead of a least-squares solve, sums in another order). A dataset whose fit is not routine is handed back to the
statsmodels path, so that its result and warnings stay exactly what statsmodels gives: a
design statsmodels would refuse or reduce (an all-zero column, rank deficiency, values outside
the family's range), no convergence in 100 steps, fitted values at the edge of the family's
range (a sign of separation), or any non-finite number. Binary fits record whether their
design is separated (:mod:`synthinfer.analysis.separation`), as the statsmodels path does.
"""

from __future__ import annotations

import re
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np
import pandas as pd

from synthinfer.analysis.models import FitOptions, FitRecord, ModelSpec, glm_family
from synthinfer.analysis.separation import is_separated

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

def _formula_columns(data: pd.DataFrame, formula: str) -> list:
    """The columns of ``data`` the formula can refer to (every column whose name occurs in it)."""
    return [c for c in data.columns if isinstance(c, str) and c in formula]


def _level_signature(data: pd.DataFrame, cols: list, formula: str) -> tuple:
    """What decides the columns patsy builds from ``data``: the category list of every
    categorical column the formula names, and the distinct values of every other non-float
    column it names (patsy takes a factor's levels from them)."""
    sig = []
    for col in cols:
        x = data[col]
        if isinstance(x.dtype, pd.CategoricalDtype):
            sig.append((col, "cat", tuple(x.cat.categories), bool(x.cat.ordered)))
        elif pd.api.types.is_float_dtype(x.dtype) and not re.search(r"C\(\s*" + re.escape(col) + r"\b", formula):
            continue
        else:
            sig.append((col, "values", tuple(sorted(pd.unique(x).tolist(), key=repr))))
    return tuple(sig)


@dataclass
class _Design:
    """A dataset's design on its distinct rows: outcome y (u,), design X (u, k), the row
    ``codes`` (n,) mapping each of the n rows to its distinct row."""

    y: np.ndarray
    X: np.ndarray
    names: list[str]
    codes: np.ndarray


def _distinct_rows(data: pd.DataFrame, cols: list) -> tuple[pd.DataFrame, np.ndarray]:
    """The distinct rows of ``data[cols]`` and each row's index among them. Synthetic data of
    categorical tables repeat a few thousand patterns, so the design is built on those; when
    most rows are distinct anyway, all rows are kept."""
    n = len(data)
    if not cols:
        return data, np.arange(n)
    # one integer key per row from the columns' codes (missing values get a code of their own)
    key, size = np.zeros(n, dtype=np.int64), 1
    for col in cols:
        x = data[col]
        if isinstance(x.dtype, pd.CategoricalDtype):
            code, k = x.cat.codes.to_numpy().astype(np.int64) + 1, len(x.cat.categories) + 1
        else:
            f = pd.factorize(x, use_na_sentinel=False)[0]
            code, k = f.astype(np.int64), int(f.max()) + 1
        size *= k
        if size >= 2**62:
            return data, np.arange(n)
        key = key * k + code
    _, first, codes = np.unique(key, return_index=True, return_inverse=True)
    if len(first) > n // 2:
        return data, np.arange(n)
    return data.iloc[first], codes.reshape(n)


#: Functions a factor may call and still be computed row by row (each row's value from that row
#: alone): patsy's categorical wrappers and contrasts, and numpy's elementwise functions.
_ROWWISE_CALLS = frozenset({"C", "I", "Q", "Treatment", "Sum", "Diff", "Helmert", "Poly"})
_ROWWISE_NUMPY = frozenset({"log", "log1p", "log2", "log10", "exp", "expm1", "sqrt", "square", "abs", "power",
                            "sin", "cos", "tanh", "maximum", "minimum", "clip", "where", "sign", "floor", "ceil"})


def _rowwise(formula: str) -> bool:
    """Whether every factor of ``formula`` gives each row a value from that row alone, so that
    its design can be built on the distinct rows: names, constants, operators and the calls
    above. Anything else (``x.mean()``, ``pd.qcut(x, 3)``, ``center(x)``) may summarise the
    whole column, whose distinct values are not its rows."""
    import ast

    from synthinfer.analysis.support import factor_codes

    def ok(node: ast.AST) -> bool:
        if isinstance(node, ast.Call):
            f = node.func
            allowed = (isinstance(f, ast.Name) and f.id in _ROWWISE_CALLS) or (
                isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and f.value.id in ("np", "numpy")
                and f.attr in _ROWWISE_NUMPY)
            return allowed and all(ok(a) for a in node.args) and all(ok(k.value) for k in node.keywords)
        if isinstance(node, (ast.Attribute, ast.Subscript, ast.Lambda, ast.NamedExpr)) or isinstance(
                node, (ast.comprehension, ast.ListComp, ast.GeneratorExp, ast.DictComp, ast.SetComp)):
            return False
        return all(ok(child) for child in ast.iter_child_nodes(node))

    try:
        return all(ok(ast.parse(code, mode="eval")) for code in factor_codes(formula))
    except Exception:  # noqa: BLE001 - a formula patsy or Python cannot read: the full path reports it
        return False


def _stateful(y_info, X_info) -> bool:
    """Whether a factor memorised a stateful transform (``center``, ``bs``, ...): its state
    comes from the data, so the design must be built on each full dataset."""
    infos = list(y_info.factor_infos.values()) + list(X_info.factor_infos.values())
    return any(not isinstance(fi.state, dict) or fi.state.get("transforms", True) for fi in infos)


def _designs(formula: str, datasets: Sequence[pd.DataFrame], binary: bool) -> list[_Design | None]:
    """The patsy design of each dataset, parsed once per level signature and built on the
    distinct rows; None where it cannot be built (the statsmodels path then reports the error
    as it always has)."""
    import patsy

    from synthinfer.analysis.models import outcome_column

    infos: dict[tuple, tuple | None] = {}  # None: stateful, parse every dataset in full
    out: list[_Design | None] = []
    rowwise = _rowwise(formula)
    for data in datasets:
        try:
            cols = _formula_columns(data, formula)
            key = _level_signature(data, cols, formula)
            if key in infos and infos[key] is not None:
                rows, codes = _distinct_rows(data, cols) if rowwise else (data, np.arange(len(data)))
                y, X = patsy.build_design_matrices(list(infos[key]), rows, NA_action="raise")
            elif key in infos:
                y, X = patsy.dmatrices(formula, data, NA_action="raise")
                codes = np.arange(len(data))
            else:
                rows, codes = _distinct_rows(data, cols) if rowwise else (data, np.arange(len(data)))
                y, X = patsy.dmatrices(formula, rows, NA_action="raise")
                if _stateful(y.design_info, X.design_info):
                    infos[key] = None
                    y, X = patsy.dmatrices(formula, data, NA_action="raise")
                    codes = np.arange(len(data))
                else:
                    infos[key] = (y.design_info, X.design_info)
            yc = outcome_column(np.asarray(y), list(y.design_info.column_names), binary)
            out.append(_Design(yc, np.asarray(X, dtype=float), list(X.design_info.column_names), codes))
        except Exception:  # noqa: BLE001 - the statsmodels path produces the error record
            out.append(None)
    return out


# --- the batched fit ----------------------------------------------------------------------

@dataclass
class _Fit:
    params: np.ndarray  # (g, k)
    cov: np.ndarray  # (g, k, k)
    ok: np.ndarray  # (g,) bool: routine fit, else hand back to statsmodels


def _deviance(name: str, y: np.ndarray, mu: np.ndarray, a: np.ndarray, scale: np.ndarray) -> np.ndarray:
    """Per-dataset deviance Σ w d(y, μ) / φ with statsmodels' clipping of the logarithms."""
    eps = np.finfo(float).eps
    if name == "ols":
        d = (y - mu) ** 2
    elif name == "poisson":
        d = 2 * (y * np.log(np.clip(y / mu, eps, np.inf)) - (y - mu))
    else:
        d = 2 * (y * np.log(np.clip(y / (mu + 1e-20), eps, np.inf))
                 + (1 - y) * np.log(np.clip((1.0 - y) / (1.0 - mu + 1e-20), eps, np.inf)))
    return np.sum(d * a, axis=1) / scale


def _gram(X: np.ndarray, w: np.ndarray) -> np.ndarray:
    """Σ_i w_i x_i x_iᵀ for each dataset: (g, u, k), (g, u) -> (g, k, k)."""
    return np.matmul(np.swapaxes(X * w[..., None], 1, 2), X)


def _irls(name: str, y, X, a, b, c, nrows, cov_type: str) -> _Fit:
    """statsmodels' ``GLM.fit()`` (IRLS) on a stack of designs over distinct rows.

    y (g, u), X (g, u, k): outcome and design of each distinct row; per distinct row, c (g, u)
    counts its rows, a = Σ w and b = Σ w² sum their weights (w = 1 unweighted). Every sum over
    rows of statsmodels' fit is such a sum over distinct rows (the HC0 meat's with b, the rest
    with a or c). Padding rows have c = a = b = 0. nrows (g,): rows of each dataset.
    """
    family = glm_family(name)
    link, var = family.link, family.variance
    g, u, k = X.shape
    ols = name == "ols"
    real = c > 0
    df_resid = nrows - k

    def scale_of(mu, rows=slice(None)):
        if not ols:
            return np.ones(mu.shape[0])
        return np.sum((y[rows] - mu) ** 2 * a[rows] / var(mu), axis=1) / df_resid[rows]

    if name in ("logit", "probit"):
        mu = (y + 0.5) / 2
    else:
        mu = (y + (np.sum(c * y, axis=1) / nrows)[:, None]) / 2
    eta = link(mu)
    scale = scale_of(mu)
    dev = _deviance(name, y, mu, a, scale)
    beta = np.zeros((g, k))
    gram = np.zeros((g, k, k))
    bad = ~np.isfinite(dev)
    active = ~bad
    converged = np.zeros(g, dtype=bool)
    for _ in range(_MAXITER):
        idx = np.flatnonzero(active)
        if idx.size == 0:
            break
        ya, Xa, aa, mua = y[idx], X[idx], a[idx], mu[idx]
        d = link.deriv(mua)
        ww = aa / (d**2 * var(mua))
        z = eta[idx] + d * (ya - mua)
        G = _gram(Xa, ww)
        rhs = np.einsum("guk,gu->gk", Xa, ww * z)
        bnew = _stacked(lambda g, r: np.linalg.solve(g, r[..., None])[..., 0], rhs.shape, G, rhs)
        keep = np.all(np.isfinite(bnew), axis=1)
        if not keep.all():  # a singular Gram matrix: that fit goes to statsmodels (which refuses it by name)
            bad[idx[~keep]] = True
            active[idx[~keep]] = False
            if not keep.any():
                continue
            idx, ya, Xa, aa, G, bnew = idx[keep], ya[keep], Xa[keep], aa[keep], G[keep], bnew[keep]
        e = np.einsum("guk,gk->gu", Xa, bnew)
        with np.errstate(over="ignore", invalid="ignore"):
            m_new = link.inverse(e)
        beta[idx], gram[idx], eta[idx], mu[idx] = bnew, G, e, m_new
        new_dev = _deviance(name, ya, m_new, aa, scale[idx])  # scaled by the previous φ
        scale[idx] = scale_of(m_new, idx)
        ra = real[idx]
        edge = np.zeros(idx.size, dtype=bool)
        if not ols:
            low = m_new < _EDGE
            if name != "poisson":
                low |= m_new > 1 - _EDGE
            edge = np.any(ra & (low | (np.abs(e) > _MAX_ETA)), axis=1)
        # statsmodels warns of perfect prediction when every fitted value is its outcome
        exact = np.all(~ra | (np.abs(m_new - ya) <= 1e-8), axis=1)
        broken = edge | exact | ~np.isfinite(new_dev) | ~np.all(np.isfinite(bnew), axis=1)
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
            cov[i] = _hc0(name, y[i], X[i], a[i], b[i], beta[i])
        else:
            cov[i] = scale[i, None, None] * _inv(gram[i])
        ok[i] &= np.all(np.isfinite(cov[i]), axis=(1, 2))
    return _Fit(beta, cov, ok)


def _hc0(name: str, y, X, a, b, beta) -> np.ndarray:
    """statsmodels' HC0 sandwich for a GLM at β̂: H⁻¹ (Σ sᵢsᵢᵀ) H⁻¹ with the observed H."""
    family = glm_family(name)
    link, var = family.link, family.variance
    mu = link.inverse(np.einsum("guk,gk->gu", X, beta))
    d, v = link.deriv(mu), var(mu)
    r = (y - mu) / (d * v)  # the score of a row is w r x
    info = a / (d**2 * v) * (1 + r * (v * link.deriv2(mu) + var.deriv(mu) * d))
    Hinv = _inv(_gram(X, info))
    return Hinv @ _gram(X, b * r**2) @ Hinv


def _inv(G: np.ndarray) -> np.ndarray:
    """Inverses of a stack of matrices, NaN for a singular one (:func:`_stacked`)."""
    return _stacked(np.linalg.inv, G.shape, G)


def _stacked(op, shape: tuple[int, ...], *stacks: np.ndarray) -> np.ndarray:
    """``op`` over stacks of matrices (a result of ``shape``); where it raises for the whole
    stack (one singular matrix), item by item, NaN for the items it fails on, so that only
    their fits go to statsmodels' path."""
    try:
        return op(*stacks)
    except np.linalg.LinAlgError:
        out = np.full(shape, np.nan)
        for j in range(shape[0]):
            try:
                out[j] = op(*(a[j] for a in stacks))
            except np.linalg.LinAlgError:
                pass
        return out


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


def _full_rank(X: np.ndarray, c: np.ndarray, nrows: np.ndarray) -> np.ndarray:
    """``np.linalg.matrix_rank(X_full) == k`` for each dataset, with matrix_rank's tolerance.
    The full design (n, k) and diag(√c) X on the distinct rows have the same XᵀX, hence the
    same singular values."""
    S = np.linalg.svd(X * np.sqrt(c)[..., None], compute_uv=False)
    tol = S.max(axis=-1) * np.maximum(nrows, X.shape[-1]) * np.finfo(S.dtype).eps
    return np.count_nonzero(S > tol[:, None], axis=-1) == X.shape[-1]


def _pad(arrays: list[np.ndarray], rows: int) -> np.ndarray:
    out = np.zeros((len(arrays), rows) + arrays[0].shape[1:])
    for j, x in enumerate(arrays):
        out[j, : len(x)] = x
    return out


def fit_fast(
    datasets: Sequence[pd.DataFrame],
    spec: ModelSpec,
    opts: FitOptions,
    weights: Sequence[np.ndarray] | None,
) -> list[FitRecord | None]:
    """Batched fits of ``opts.formula``; None for each dataset the statsmodels path must fit.

    Datasets with the same design columns are fitted together, in batches of at most
    ``_BATCH_BYTES`` of (distinct-row) design matrix.
    """
    start = time.perf_counter()
    name = spec.name
    cov_type = opts.cov_type or ("HC0" if weights is not None else "nonrobust")
    if weights is not None and cov_type == "nonrobust":
        return [None] * len(datasets)  # the statsmodels path refuses this, with its message
    binary = name in ("logit", "probit")
    designs = _designs(opts.formula, datasets, binary=binary)
    groups: dict[tuple, list[int]] = {}
    for i, des in enumerate(designs):
        w = None if weights is None else weights[i]
        if des is not None and _routine(name, des, w):
            groups.setdefault(tuple(des.names), []).append(i)
    out: list[FitRecord | None] = [None] * len(datasets)
    seconds: dict[int, float] = {}
    for names, members in groups.items():
        members.sort(key=lambda i: len(designs[i].y))  # similar sizes share a batch: less padding
        s = 0
        while s < len(members):
            rows = len(designs[members[s]].y)
            per_batch = max(1, _BATCH_BYTES // max(1, rows * len(names) * 8))
            idx = members[s : s + per_batch]
            s += len(idx)
            t0 = time.perf_counter()
            u = max(len(designs[i].y) for i in idx)
            cnt, sw, sw2 = [], [], []
            for i in idx:
                codes, m = designs[i].codes, len(designs[i].y)
                cnt.append(np.bincount(codes, minlength=m).astype(float))
                wi = None if weights is None else np.asarray(weights[i], float)
                sw.append(cnt[-1] if wi is None else np.bincount(codes, wi, minlength=m))
                sw2.append(cnt[-1] if wi is None else np.bincount(codes, wi**2, minlength=m))
            X = _pad([designs[i].X for i in idx], u)
            y = _pad([designs[i].y for i in idx], u)
            c, a, b = _pad(cnt, u), _pad(sw, u), _pad(sw2, u)
            nrows = np.array([len(designs[i].codes) for i in idx], dtype=float)
            # rank-deficient designs go to statsmodels' path (which refuses them by name), not into the stack
            full = np.flatnonzero(_full_rank(X, c, nrows))
            fit = _irls(name, y[full], X[full], a[full], b[full], c[full], nrows[full], cov_type) if full.size else None
            each = (time.perf_counter() - t0) / len(idx)
            for f, j in enumerate(full):
                i = idx[j]
                if fit.ok[f]:
                    out[i] = FitRecord(
                        index=i,
                        ok=True,
                        params=pd.Series(fit.params[f], index=list(names)),
                        cov=pd.DataFrame(fit.cov[f], index=list(names), columns=list(names)),
                        nobs=len(datasets[i]),
                        separated=is_separated(X[j], y[j], a[j]) if binary else None,
                    )
            seconds.update((i, each) for i in idx)
    # the design building is shared; spread its cost over the records' per-fit timings
    share = (time.perf_counter() - start - sum(seconds.values())) / len(datasets)
    return [None if r is None else replace(r, seconds=seconds[r.index] + share) for r in out]
