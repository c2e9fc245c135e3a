"""The downstream analysis on one synthetic dataset: which model, and how it is fitted.

``model`` may be

* ``"logit"``, ``"probit"``, ``"ols"``, ``"poisson"``: a statsmodels GLM (Binomial/logit,
  Binomial/probit, Gaussian/identity, Poisson/log) on the patsy design of the formula, fitted
  for all datasets at once by :mod:`synthinfer.analysis.fastglm` where that reproduces
  statsmodels (the probit's model-based covariance is the GLM's expected information, not the
  observed one ``sm.Probit`` uses);
* a statsmodels model class with ``from_formula`` (``sm.Probit``, ``sm.GLM``, ...) or a
  ``statsmodels.formula.api`` function (``smf.probit``);
* any other callable ``f(data[, formula][, weights=w]) -> (estimates, covariance)``; estimates
  as a ``pd.Series`` name the parameters.

Per-row weights (importance weights of Ghalebikesabi et al. 2022) are supported for the GLMs.
The weighted estimate solves Σ w_i ψ_i(β) = 0, an M-estimator whose valid covariance is the
sandwich A⁻¹ (Σ w_i² ψ_i ψ_iᵀ) A⁻¹ with A = Σ w_i ∂ψ_i/∂β. statsmodels' GLM with
``var_weights=w`` multiplies each row's log-likelihood (and so its score) by w_i, and
``cov_type="HC0"`` then computes exactly that sandwich. ``freq_weights`` would be wrong here: it
treats w_i as a count of identical independent rows, so the model-based covariance shrinks with
Σ w_i and the nominal sample size becomes Σ w_i. The sandwich is invariant to rescaling w, so
unnormalised weights are fine.
"""

from __future__ import annotations

import inspect
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from synthinfer.analysis.separation import is_separated
from synthinfer.errors import AnalysisError, ParameterError, SynthinferWarning, user_stacklevel

_GLM_FAMILIES = {"logit": "Binomial", "probit": "Binomial", "ols": "Gaussian", "poisson": "Poisson"}


def glm_family(name: str):
    """The statsmodels family of a ``model`` name in ``_GLM_FAMILIES`` (default links, probit
    for ``"probit"``)."""
    import statsmodels.api as sm

    if name == "probit":
        return sm.families.Binomial(link=sm.families.links.Probit())
    return getattr(sm.families, _GLM_FAMILIES[name])()


def outcome_column(y: np.ndarray, names: list[str], binary: bool) -> np.ndarray:
    """The outcome vector of a patsy outcome design ``y`` (n, c) with column ``names``.

    A two-category outcome expands to two indicator columns; for binary families the last
    category is modelled (e.g. ``income[>50K]``), as statsmodels does for a 0/1 outcome coded
    this way. A binary family's numeric outcome must lie in [0, 1] (0/1, or proportions as
    statsmodels' Binomial takes them): one outside it is refused, naming the outcome (not its
    values: this also runs on private rows), where the fits would otherwise all separate.
    """
    if y.shape[1] == 2 and binary:
        return y[:, 1]
    if y.shape[1] == 2:
        raise AnalysisError(f"the outcome is a two-category column {names}: model it with 'logit' or 'probit' "
                            "(or code it 0/1 for a linear probability model)")
    if y.shape[1] != 1:
        raise AnalysisError(
            f"the outcome expands to {y.shape[1]} columns {names}; a multi-category outcome takes model='mnlogit' "
            "(a numeric one 'ols' or 'poisson', two categories 'logit')"
        )
    col = y[:, 0]
    if binary and np.any((col < 0) | (col > 1)):
        raise AnalysisError(
            f"the outcome {names[0]!r} has values outside [0, 1]; a logit or probit model needs 0/1 values (or a "
            "two-category column): use model='ols' for a numeric outcome"
        )
    return col


@dataclass(frozen=True)
class ModelSpec:
    """A resolved ``model`` argument: kind is ``"glm"``, ``"statsmodels"`` or ``"callable"``."""

    kind: str
    name: str
    target: Any = None

    @property
    def supports_penalty(self) -> bool:
        return self.kind == "glm"


def resolve_model(model: Any) -> ModelSpec:
    """Interpret the ``model`` argument of :func:`synthinfer.analysis.analyze`."""
    if isinstance(model, str):
        key = model.lower()
        if key in _GLM_FAMILIES:
            return ModelSpec("glm", key, _GLM_FAMILIES[key])
        import statsmodels.formula.api as smf

        # any other statsmodels formula model by its name there ("mnlogit", "negativebinomial")
        found = getattr(smf, key, None) if key.isidentifier() else None
        owner = getattr(found, "__self__", None)
        if getattr(found, "__name__", "") == "from_formula" and inspect.isclass(owner):
            return ModelSpec("statsmodels", owner.__name__, owner)
        raise ParameterError(f"unknown model {model!r}; use one of {sorted(_GLM_FAMILIES)}, the name of a "
                             "statsmodels.formula.api model (e.g. 'mnlogit'), a statsmodels model or a callable")
    if inspect.isclass(model) and hasattr(model, "from_formula"):
        return ModelSpec("statsmodels", model.__name__, model)
    owner = getattr(model, "__self__", None)
    if getattr(model, "__name__", "") == "from_formula" and inspect.isclass(owner):
        return ModelSpec("statsmodels", owner.__name__, owner)
    if callable(model):
        return ModelSpec("callable", getattr(model, "__name__", type(model).__name__), model)
    raise AnalysisError(f"model must be a name, a statsmodels model or a callable, got {type(model).__name__}")


@dataclass(frozen=True)
class FitOptions:
    formula: str | None
    cov_type: str | None = None
    penalty: float | None = None
    n_bootstrap: int = 50
    model_kwargs: dict = field(default_factory=dict)
    fit_kwargs: dict = field(default_factory=dict)


@dataclass(frozen=True)
class FitRecord:
    """What happened on one synthetic dataset.

    ok : whether the fit produced finite estimates and covariance (then used in combining).
    params, cov : the estimates and their covariance (None when the fit failed).
    error : the failure message; warnings : messages of warnings raised during the fit.
    dropped_columns : design columns that were all zero in this dataset (a category absent from
        it); their parameters are missing (NaN) for this dataset.
    separated : for binary models (logit, probit), whether the design is (quasi-)completely
        separated (:func:`synthinfer.analysis.separation.is_separated`); None when not checked.
    remedy : what was done about the separation: ``"penalty"`` (refitted with the L2 penalty
        and bootstrap variances), ``"drop"`` (left out of the combining rules), ``"ignore"``
        (kept as fitted), or None.
    """

    index: int
    ok: bool
    params: pd.Series | None = None
    cov: pd.DataFrame | None = None
    nobs: int = 0
    error: str | None = None
    warnings: tuple[str, ...] = ()
    dropped_columns: tuple[str, ...] = ()
    seconds: float = 0.0
    separated: bool | None = None
    remedy: str | None = None

    @property
    def used(self) -> bool:
        """Whether this fit enters the combining rules (it succeeded and was not dropped)."""
        return self.ok and self.remedy != "drop"


def _design(formula: str, data: pd.DataFrame, binary: bool):
    import patsy

    from synthinfer.analysis.support import formula_message

    text = [c for c in _factor_only_columns(formula, data)
            if not isinstance(data[c].dtype, pd.CategoricalDtype) and pd.api.types.infer_dtype(data[c]) == "string"]
    if text:
        # patsy checks text values one by one in Python (seconds per million rows) but takes a
        # categorical's codes as they are; pandas sorts text categories as patsy sorts its
        # levels, so the design and its column names are the same
        data = data.assign(**{c: data[c].astype("category") for c in text})
    try:
        y, X = patsy.dmatrices(formula, data, return_type="dataframe", NA_action="raise")
    except patsy.PatsyError as e:
        raise AnalysisError(formula_message(formula, e)) from None
    try:
        col = outcome_column(y.to_numpy(), list(y.columns), binary)
    except AnalysisError as e:
        raise AnalysisError(f"formula {formula!r}: {e}") from None
    return pd.Series(col, index=y.index, name=y.columns[-1 if binary and y.shape[1] == 2 else 0]), X


def _factor_only_columns(formula: str, data: pd.DataFrame) -> list[str]:
    """The columns ``formula`` uses only as factors as they are (``x`` or ``C(x, ...)``), never
    inside an expression (``I(x + "a")``, ``x.str.lower()``), where a categorical would not act
    as text does; none when the formula does not parse (patsy's own error follows)."""
    import re

    from synthinfer.analysis.support import _variables, factor_codes

    try:
        codes = factor_codes(formula)
    except ParameterError:
        return []
    columns = [str(c) for c in data.columns]
    uses: dict[str, bool] = {}
    for code in codes:
        for c in _variables(code, columns):
            plain = code == c or re.fullmatch(rf"C\(\s*{re.escape(c)}\s*(,.*)?\)", code, flags=re.S) is not None
            uses[c] = uses.get(c, True) and plain
    return [c for c in columns if uses.get(c, False)]


def _check_full_rank(X: np.ndarray, names: list[str]) -> None:
    if np.linalg.matrix_rank(X) < X.shape[1]:
        # a non-intercept column with one value in every row: a factor with all rows in one
        # non-reference category, or the reference category absent (the usual cause)
        const = [nm for nm, col in zip(names, X.T, strict=True)
                 if nm != "Intercept" and col.size and np.all(col == col[0])]
        which = f"; constant column(s) {const}" if const else ""
        raise AnalysisError(
            "the design matrix is rank deficient (e.g. the reference category of a "
            f"factor is absent from this dataset){which}"
        )


def _check_weighted_cov(w, cov_type: str | None) -> None:
    if w is not None and cov_type == "nonrobust":
        raise AnalysisError(
            "cov_type='nonrobust' with per-row weights gives invalid standard errors for an "
            "importance-weighted fit; leave cov_type unset (sandwich HC0) or use HC1-HC3"
        )


def _glm_fit(spec: ModelSpec, y, X, w, opts: FitOptions, rng: np.random.Generator | None):
    import statsmodels.api as sm

    _check_weighted_cov(w, opts.cov_type)

    model = sm.GLM(y, X, family=glm_family(spec.name), var_weights=w, **opts.model_kwargs)
    if opts.penalty is None:
        cov_type = opts.cov_type or ("HC0" if w is not None else "nonrobust")
        res = model.fit(cov_type=cov_type, **opts.fit_kwargs)
        return np.asarray(res.params), np.asarray(res.cov_params())
    return _penalized_bootstrap(spec, y.to_numpy(), X.to_numpy(), w, opts, rng)


def _penalized_fit(spec: ModelSpec, y, X, w, alpha: float):
    import statsmodels.api as sm

    model = sm.GLM(y, X, family=glm_family(spec.name), var_weights=w)
    # statsmodels' elastic net minimises -loglik/nobs + (alpha'/2)|β|²; alpha' = alpha/nobs gives
    # our scale -Σ loglik_i + (alpha/2)|β|² (the intercept is penalised too; negligible at 1e-5).
    res = model.fit_regularized(method="elastic_net", alpha=alpha / len(y), L1_wt=0.0, refit=False)
    return np.asarray(res.params)


#: Largest share of failed bootstrap refits that still gives a covariance (with a warning).
_MAX_BOOTSTRAP_FAILURES = 0.1


def _penalized_bootstrap(spec, y, X, w, opts: FitOptions, rng):
    """Section 5.2 of Räisä et al. (2023): a tiny L2 penalty keeps separated coefficients finite;
    the penalised fit has no model-based variance, so take the covariance of n_bootstrap
    nonparametric bootstrap refits (rows resampled with replacement, weights carried along)."""
    est = _penalized_fit(spec, y, X, w, opts.penalty)
    nobs = len(y)
    draws = []
    for _ in range(opts.n_bootstrap):
        idx = rng.integers(0, nobs, nobs)
        try:
            draws.append(_penalized_fit(spec, y[idx], X[idx], None if w is None else w[idx], opts.penalty))
        except (ValueError, np.linalg.LinAlgError, FloatingPointError):
            continue
    draws = np.asarray(draws)
    failed = opts.n_bootstrap - len(draws)
    # Failures concentrate in extreme resamples, so skipping them biases the variance down.
    if len(draws) < 2 or failed > _MAX_BOOTSTRAP_FAILURES * opts.n_bootstrap:
        raise AnalysisError(f"only {len(draws)} of {opts.n_bootstrap} bootstrap refits succeeded")
    if failed:
        warnings.warn(f"{failed} of {opts.n_bootstrap} bootstrap refits failed and were skipped; "
                      "the variance may be too small", SynthinferWarning, stacklevel=user_stacklevel())
    return est, np.atleast_2d(np.cov(draws, rowvar=False, ddof=1))


def _statsmodels_fit(spec: ModelSpec, data, w, opts: FitOptions):
    kwargs = dict(opts.model_kwargs)
    cov_type = opts.cov_type
    _check_weighted_cov(w, cov_type)
    if w is not None:
        import statsmodels.api as sm

        if not issubclass(spec.target, sm.GLM):
            raise AnalysisError(
                f"per-row weights need a GLM ('logit', 'ols', 'poisson' or sm.GLM), not {spec.name}"
            )
        kwargs["var_weights"] = w
        cov_type = cov_type or "HC0"
    model, equations = _formula_model(spec.target, opts.formula, data, kwargs)
    k = model.exog.shape[1]
    design = list(getattr(getattr(model.data, "design_info", None), "column_names", None) or model.exog_names[:k])
    params_named = list(model.exog_names)  # the design's and the model's own (NegativeBinomial's alpha)
    separated = is_separated(model.exog, model.endog, w) if _binary_model(model) else None
    zero = ~np.any(model.exog, axis=0)
    absent = [nm for nm, z in zip(design, zero, strict=True) if z]
    if absent:
        if params_named[:k] != design:  # ZeroInflatedPoisson: its own design would be lost in the refit
            raise AnalysisError(f"{spec.name}: the design column(s) {absent} are all zero in this dataset (a "
                                "category absent from it), and this model cannot be refitted without them")
        # a category absent from this dataset: refit without its all-zero design column
        model = spec.target(model.endog, model.exog[:, ~zero], **kwargs)
    # statsmodels would fall back to a pseudo-inverse: an arbitrary split of aliased coefficients
    _check_full_rank(model.exog, [nm for nm in design if nm not in absent])
    fit_kwargs = dict(opts.fit_kwargs)
    if "disp" in inspect.signature(model.fit).parameters:
        fit_kwargs.setdefault("disp", 0)
    if cov_type is not None:
        fit_kwargs["cov_type"] = cov_type
    res = model.fit(**fit_kwargs)
    values = np.asarray(res.params)
    full = params_named
    kept = [nm for nm in full if nm not in absent]
    if values.ndim == 2:
        # one column of coefficients per equation (MNLogit: each level of the outcome against the
        # first), stacked equation by equation as statsmodels' cov_params orders them; an outcome
        # level absent from this dataset has no equation here (its coefficients are missing)
        every, fitted = equations
        full = [f"{eq}: {nm}" for eq in every for nm in design]
        kept = [f"{eq}: {nm}" for eq in fitted for nm in design if nm not in absent]
        values = values.ravel(order="F")
    params = pd.Series(values, index=kept).reindex(full)
    cov = pd.DataFrame(np.asarray(res.cov_params()), index=kept, columns=kept).reindex(index=full, columns=full)
    return params, cov, tuple(nm for nm in full if nm not in set(kept)), separated


def _formula_model(target, formula: str, data, kwargs: dict):
    """``(target.from_formula(...), None)``; for a multinomial model (MNLogit), the model with
    the outcome's levels made explicit and ``(every equation, the equations fitted)``, named
    ``"y=level"``. A categorical outcome, which statsmodels' formulas refuse (patsy expands it
    to one column per level), keeps its categories: the first is the reference, which the
    dataset must hold, and a level it lacks has no equation here. A numeric outcome's levels are
    the values present, the smallest the reference, which its equations' names say
    (``"y=2 vs 0"``), so that datasets with other references are not combined with them."""
    import patsy
    import statsmodels.api as sm

    if not issubclass(target, sm.MNLogit):
        return target.from_formula(formula, data=data, **kwargs), None
    y, X = patsy.dmatrices(formula, data, return_type="dataframe", NA_action="raise")
    name = y.columns[0].split("[", 1)[0]
    if y.shape[1] > 1:
        levels = [c.split("[", 1)[1][:-1] if "[" in c else c for c in y.columns]
        codes = y.to_numpy().argmax(axis=1)
        present = np.unique(codes)
        if present[0] != 0:
            raise AnalysisError(f"the outcome {name!r} lacks its first level {levels[0]!r} in this dataset: the "
                                "multinomial model's reference (each equation is a level against it)")
        endog = pd.Series(pd.Categorical.from_codes(codes, categories=levels).remove_unused_categories(), name=name,
                          index=y.index)
        every = [f"{name}={lv}" for lv in levels[1:]]
        fitted = [f"{name}={levels[c]}" for c in present[1:]]
    else:
        values = y.iloc[:, 0]
        present = np.unique(values)
        endog = pd.Series(pd.Categorical(values, categories=present), name=name, index=y.index)
        every = fitted = [f"{name}={_plain_number(v)} vs {_plain_number(present[0])}" for v in present[1:]]
    return target(endog, X, **kwargs), (every, fitted)


def _plain_number(v: Any) -> str:
    return f"{v:g}" if isinstance(v, (float, np.floating)) else str(v)


def _binary_model(model) -> bool:
    """A statsmodels binary regression (Logit, Probit, or a Binomial GLM) on a 0/1 outcome."""
    import statsmodels.api as sm

    binary = isinstance(model, (sm.Logit, sm.Probit)) or (
        isinstance(model, sm.GLM) and isinstance(model.family, sm.families.Binomial)
    )
    endog = np.asarray(model.endog)
    return binary and endog.ndim == 1 and bool(np.all((endog >= 0) & (endog <= 1)))


def _callable_fit(fn: Callable, data, w, opts: FitOptions):
    args = (data,) if opts.formula is None else (data, opts.formula)
    out = fn(*args, weights=w) if w is not None else fn(*args)
    if not isinstance(out, tuple) or len(out) != 2:
        raise AnalysisError("a model callable must return (estimate vector, covariance matrix)")
    est, cov = out
    names = list(est.index) if isinstance(est, pd.Series) else None
    est = np.atleast_1d(np.asarray(est, dtype=float))
    cov = np.atleast_2d(np.asarray(cov, dtype=float))
    if est.ndim != 1 or cov.shape != (est.size, est.size):
        raise AnalysisError(f"model callable returned estimates {est.shape} and covariance {cov.shape}")
    names = names or [f"x{i}" for i in range(est.size)]
    return pd.Series(est, index=names), pd.DataFrame(cov, index=names, columns=names)


def fit_dataset(
    index: int,
    data: pd.DataFrame,
    spec: ModelSpec,
    opts: FitOptions,
    weights: np.ndarray | None,
    seed: np.random.SeedSequence | None,
) -> FitRecord:
    """Fit the analysis on one dataset; never raises for a failing fit (returns ``ok=False``)."""
    start = time.perf_counter()
    dropped: tuple[str, ...] = ()
    separated: bool | None = None
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            if spec.kind == "glm":
                y, X = _design(opts.formula, data, binary=spec.name in ("logit", "probit"))
                names = list(X.columns)
                zero = [c for c in names if not np.any(X[c].to_numpy())]
                if zero:
                    dropped = tuple(zero)
                    X = X.drop(columns=zero)
                if spec.name in ("logit", "probit"):
                    separated = is_separated(X.to_numpy(), y.to_numpy(), weights)
                _check_full_rank(X.to_numpy(), list(X.columns))
                rng = np.random.default_rng(seed) if opts.penalty is not None else None
                est, cov = _glm_fit(spec, y, X, weights, opts, rng)
                kept = list(X.columns)
                params = pd.Series(est, index=kept).reindex(names)
                cov = pd.DataFrame(cov, index=kept, columns=kept).reindex(index=names, columns=names)
            elif spec.kind == "statsmodels":
                params, cov, dropped, separated = _statsmodels_fit(spec, data, weights, opts)
            else:
                params, cov = _callable_fit(spec.target, data, weights, opts)
            # only the all-zero columns dropped above may be missing; any other NaN is a failed fit
            present = ~params.index.isin(dropped)
            if not (np.all(np.isfinite(params.to_numpy()[present]))
                    and np.all(np.isfinite(cov.to_numpy()[np.ix_(present, present)]))):
                raise AnalysisError("the fit returned non-finite estimates or covariance")
            ok, error = True, None
        except Exception as e:  # noqa: BLE001 - any failure of one fit becomes a record
            params, cov, ok = None, None, False
            error = f"{type(e).__name__}: {e}"
    msgs = tuple(dict.fromkeys(f"{w.category.__name__}: {w.message}" for w in caught))
    return FitRecord(
        index=index,
        ok=ok,
        params=params,
        cov=cov,
        nobs=len(data),
        error=error,
        warnings=msgs,
        dropped_columns=dropped,
        seconds=time.perf_counter() - start,
        separated=separated,
    )
