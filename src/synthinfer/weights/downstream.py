"""Importance-weighted downstream estimation on synthetic data (Section 3.1, Supplement B.5).

Importance-weighted empirical risk minimisation replaces ``(1/N_D) sum h(f, x'_i)`` over real rows
with ``(1/N_G) sum w(x_i) h(f, x_i)`` over synthetic rows (eq. 2). Two front ends:

- :func:`fit_iw_glm`: a GLM from a statsmodels formula, fitted with the weights as
  ``var_weights`` (each row's log-likelihood multiplied by ``w_i``: the IW-MLE of Remark 1), with
  the M-estimation sandwich covariance ``J^-1 K J^-1``, ``J = sum w_i H_i``,
  ``K = sum w_i^2 s_i s_i^T`` (Supp. B.5; ``cov_type="HC0"``). The usual model-based standard
  errors would treat the weights as replicated observations and be wrong.
- :func:`fit_weighted`: any scikit-learn estimator through ``sample_weight``.

Weights are self-normalised to mean 1 first (this changes neither estimate nor sandwich).
"""

from __future__ import annotations

import pandas as pd

from synthinfer.errors import ArgumentTypeError, ParameterError
from synthinfer.weights.diagnostics import self_normalise

_FAMILIES = ("binomial", "gaussian", "poisson")


def _family(family):
    import statsmodels.api as sm

    if isinstance(family, str):
        if family not in _FAMILIES:
            raise ParameterError(f"family must be one of {_FAMILIES} or a statsmodels family, got {family!r}")
        return {"binomial": sm.families.Binomial, "gaussian": sm.families.Gaussian, "poisson": sm.families.Poisson}[family]()
    return family


def fit_iw_glm(formula: str, data: pd.DataFrame, weights, *, family="binomial"):
    """Importance-weighted GLM with sandwich standard errors; returns statsmodels ``GLMResults``.

    Parameters
    ----------
    formula : a patsy formula, e.g. ``"income ~ age + C(sex)"``.
    data : the synthetic table.
    weights : one importance weight per row of ``data`` (e.g. ``estimator.weights(data)``).
    family : ``"binomial"``, ``"gaussian"``, ``"poisson"`` or a statsmodels family.

    The results' ``summary()``, ``params``, ``bse`` and ``conf_int()`` use the sandwich covariance.
    """
    import statsmodels.formula.api as smf

    if not isinstance(data, pd.DataFrame):
        raise ArgumentTypeError(f"data must be a pandas DataFrame, got {type(data).__name__}")
    w = self_normalise(weights)
    if len(w) != len(data):
        raise ParameterError(f"weights has {len(w)} entries for the {len(data)} rows of data")
    return smf.glm(formula, data, family=_family(family), var_weights=w).fit(cov_type="HC0")


def fit_weighted(estimator, X, y, weights):
    """Fit a scikit-learn estimator (or a Pipeline whose last step takes weights) with IW-ERM.

    Raises :class:`~synthinfer.errors.ArgumentTypeError` if the estimator's ``fit`` has no ``sample_weight``.
    """
    from sklearn.pipeline import Pipeline
    from sklearn.utils.validation import has_fit_parameter

    w = self_normalise(weights)
    if len(w) != len(X):
        raise ParameterError(f"weights has {len(w)} entries for the {len(X)} rows of X")
    if isinstance(estimator, Pipeline):
        name, last = estimator.steps[-1]
        if not has_fit_parameter(last, "sample_weight"):
            raise ArgumentTypeError(f"the pipeline's last step {type(last).__name__} does not accept sample_weight")
        return estimator.fit(X, y, **{f"{name}__sample_weight": w})
    if not has_fit_parameter(estimator, "sample_weight"):
        raise ArgumentTypeError(f"{type(estimator).__name__}.fit does not accept sample_weight; it cannot be importance-weighted")
    return estimator.fit(X, y, sample_weight=w)
