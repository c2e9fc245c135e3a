"""Bayesian analysis of synthetic data by mixing per-dataset posteriors.

Räisä, Jälkö & Honkela ("On consistent Bayesian inference from synthetic data", JMLR 2025): an
analyst with a Bayesian model p(y | theta) p(theta) draws from their own posterior on each of
m synthetic datasets ``Z_1 .. Z_m`` (drawn from the data holder's posterior predictive given
the private data X) and pools the draws:

    p_mix(theta) = (1/m) sum_i p(theta | Z_i)  ->  p(theta | X)     as n_syn -> inf, m -> inf,

when the analyst's model is congenial with the data holder's (the synthetic data carry what
the analysis needs, e.g. the marginals its interactions need; ``Release.supports``). Why it
works: on a large synthetic dataset the analyst's posterior concentrates at the parameter
value the dataset's generating distribution implies, and those generating distributions are
draws from the data holder's posterior, noise-aware for NAPSU-MQ (so the DP noise is in the
spread). At finite size the synthetic data's own sampling noise enters twice: in where each
component sits and in its width. For a normal mean with the DP noise negligible the mixture's
variance is ``1/n + 2/n_syn`` against the target ``1/n``, a factor ``1 + 2 n / n_syn`` (tested
in ``tests/test_bayes_mixing.py``). Hence synthetic datasets several times the size of the
private table (:data:`MIN_SIZE_RATIO`) and many of them.

The per-dataset posteriors are sampled by :class:`synthinfer.bayes.GeneralisedPosterior` with
the log loss (Bayes' rule on the synthetic rows), exactly where the model is conjugate and by
NUTS (BlackJAX) otherwise, all datasets in one vectorised program.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from synthinfer.bayes.losses import LogLoss
from synthinfer.bayes.models import LinearRegression, LogisticRegression
from synthinfer.bayes.posterior import GeneralisedPosterior
from synthinfer.errors import AnalysisError, ConvergenceWarning, ParameterError, SynthinferWarning
from synthinfer.mcmc import convergence_diagnostics, import_arviz
from synthinfer.privacy.randomness import SeedLike, seed_fixed

#: Warn below this ratio n_syn / n: the mixture then overstates the posterior variance by up
#: to ``1 + 2 n / n_syn`` (40% at 5, about 18% on interval widths).
MIN_SIZE_RATIO = 5.0
#: Warn with fewer datasets: the mixture's tails come from few components.
MIN_DATASETS = 10
#: Per-dataset convergence check of the NUTS path. Looser than the single-posterior policy of
#: :mod:`synthinfer.mcmc` (1.01, 100 per chain) on purpose: the mixture's Monte Carlo error is
#: averaged over m components, and at 1.01 a few of many well-mixed datasets fail by chance
#: (2 of 10 at 2 x 500 draws in the test); these bounds flag chains that are stuck or barely
#: moving, which the mixture cannot average away.
MIXTURE_RHAT_MAX = 1.05
MIXTURE_ESS_PER_CHAIN = 50.0

_FAMILIES = {"logit": LogisticRegression, "ols": LinearRegression}


def _designs(formula: str, datasets: Sequence[pd.DataFrame], binary: bool) -> tuple[list[tuple[np.ndarray, np.ndarray]], list[str]]:
    """(X without the intercept column, y) per dataset, all on the first dataset's patsy design
    (so every dataset has the same columns; a category absent from one dataset is a zero column)."""
    import patsy

    from synthinfer.analysis.models import outcome_column

    try:
        y0, x0 = patsy.dmatrices(formula, datasets[0], return_type="dataframe", NA_action="raise")
    except patsy.PatsyError as e:
        raise AnalysisError(f"formula {formula!r}: {e}") from None
    out = []
    for i, d in enumerate(datasets):
        try:
            y, X = patsy.build_design_matrices([y0.design_info, x0.design_info], d, return_type="dataframe",
                                               NA_action="raise")
        except patsy.PatsyError as e:
            raise AnalysisError(f"formula {formula!r} on synthetic dataset {i}: {e}") from None
        yv = outcome_column(y.to_numpy(), list(y.columns), binary)
        out.append((X.drop(columns=[c for c in X.columns if c == "Intercept"]).to_numpy(float), yv))
    names = list(x0.columns)
    return out, names


def mix_posteriors(
    datasets: Sequence[pd.DataFrame],
    formula: str,
    model: str = "logit",
    *,
    n: int,
    prior: Any = None,
    num_warmup: int = 300,
    num_samples: int = 500,
    num_chains: int = 2,
    max_tree_depth: int = 8,
    seed: SeedLike = None,
) -> Any:
    """The mixture of the analyst's posteriors on ``datasets`` (module docstring): ArviZ
    InferenceData.

    Parameters
    ----------
    datasets : the m synthetic datasets of a release (equal sizes ``n_syn``), e.g.
        ``Release.datasets``; many and large ones (warnings below ``MIN_DATASETS`` datasets and
        below ``n_syn = MIN_SIZE_RATIO * n``).
    formula : patsy formula ``"y ~ x1 + C(x2)"``; the intercept follows the formula.
    model : ``"logit"`` (binary outcome; prior ``N(0, 10^2)`` on every coefficient by default) or
        ``"ols"`` (normal errors; Normal-Inverse-Gamma prior, sampled exactly).
    n : rows of the private table (the release's ``n``), for the size check.
    prior : a prior of :mod:`synthinfer.bayes.models` for the model (None: its default).
    num_warmup, num_samples, num_chains, max_tree_depth : NUTS settings per dataset (the logit);
        the mixture has ``m * num_chains * num_samples`` draws.
    seed : the sampler's randomness.

    Returns
    -------
    InferenceData whose ``posterior`` holds ``coef`` (dims ``chain, draw, term``; the formula's
    column names) and, for ``"ols"``, ``sigma``; its chains are the ``m * num_chains``
    per-dataset chains (``dataset`` in ``posterior.attrs`` maps them back), so ArviZ's
    summaries describe the mixture. ``attrs`` also record ``m``, ``n``, ``n_syn``, the method
    and, for NUTS, how many datasets' chains missed the convergence check
    (:data:`MIXTURE_RHAT_MAX`, :data:`MIXTURE_ESS_PER_CHAIN`), with a ConvergenceWarning when any did.
    """
    if model not in _FAMILIES:
        raise ParameterError(f"model must be one of {sorted(_FAMILIES)}, got {model!r}")
    if not isinstance(formula, str) or "~" not in formula:
        raise ParameterError(f"formula must be a patsy formula 'y ~ x1 + ...', got {formula!r}")
    datasets = list(datasets)
    if not datasets or not all(isinstance(d, pd.DataFrame) for d in datasets):
        raise ParameterError("datasets must be a non-empty list of pandas DataFrames")
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
        raise ParameterError(f"n (rows of the private table) must be a positive integer, got {n!r}")
    sizes = {len(d) for d in datasets}
    if len(sizes) != 1 or 0 in sizes:
        raise ParameterError(f"the synthetic datasets must have one common, positive size; got sizes {sorted(sizes)}")
    n_syn, m = sizes.pop(), len(datasets)
    if n_syn < MIN_SIZE_RATIO * n:
        warnings.warn(
            f"synthetic datasets of {n_syn} rows for a private table of {n}: the mixture of posteriors "
            f"is consistent as n_syn/n grows, and at n_syn/n = {n_syn / n:.3g} it can overstate the "
            f"posterior variance by up to a factor {1 + 2 * n / n_syn:.3g}; generate datasets of at least "
            f"{math.ceil(MIN_SIZE_RATIO * n)} rows",
            SynthinferWarning, stacklevel=2)
    if m < MIN_DATASETS:
        warnings.warn(f"{m} synthetic datasets: the mixture's tails rest on few components; use at least "
                      f"{MIN_DATASETS}", SynthinferWarning, stacklevel=2)
    designs, names = _designs(formula, datasets, binary=model == "logit")
    intercept = "Intercept" in names
    bmodel = _FAMILIES[model](n_features=len(names) - intercept, fit_intercept=intercept)
    post = GeneralisedPosterior(bmodel, LogLoss(1.0), prior, num_warmup=num_warmup, num_samples=num_samples,
                                num_chains=num_chains, max_tree_depth=max_tree_depth, seed=seed)
    try:
        draws = post.sample_many([(None, d) for d in designs])  # (m, C, S, dim), unconstrained
    except np.linalg.LinAlgError as e:
        raise AnalysisError(f"formula {formula!r}: the design is singular on a synthetic dataset ({e})") from None
    return _to_idata(draws, bmodel, names, post, m=m, n=n, n_syn=n_syn, seed=seed)


def _to_idata(draws: np.ndarray, bmodel: Any, names: list[str], post: GeneralisedPosterior, *, m: int, n: int,
              n_syn: int, seed: SeedLike) -> Any:
    az = import_arviz()
    m_, C, S, dim = draws.shape
    k = len(names)
    coef = draws[..., :k]
    posterior: dict[str, np.ndarray] = {"coef": coef.reshape(m_ * C, S, k)}
    if dim > k:  # the linear model's log sigma
        posterior["sigma"] = np.exp(draws[..., k]).reshape(m_ * C, S)
    idata = az.from_dict(posterior=posterior, coords={"term": names}, dims={"coef": ["term"]})
    attrs = {
        "method": "mixture of per-dataset posteriors (Räisä, Jälkö & Honkela 2025)",
        "sampler": post.method_,
        "model": type(bmodel).__name__,
        "m": m, "n": n, "n_syn": n_syn,
        "dataset": [i for i in range(m) for _ in range(C)],
        "seed_fixed": seed_fixed(seed),
    }
    if post.method_ == "nuts" and C > 1:
        failing = [i for i in range(m) if not convergence_diagnostics(
            az.from_dict(posterior={"coef": coef[i]}), rhat_max=MIXTURE_RHAT_MAX, ess_per_chain=MIXTURE_ESS_PER_CHAIN,
            warn=False)["ok"]]
        attrs["datasets_not_converged"] = len(failing)
        if failing:
            warnings.warn(
                f"NUTS on {len(failing)} of {m} synthetic datasets missed the mixture's convergence check (split "
                f"R-hat < {MIXTURE_RHAT_MAX}, bulk ESS >= {MIXTURE_ESS_PER_CHAIN:g} per chain; datasets {failing[:10]}{'...' if len(failing) > 10 else ''}): "
                "raise num_samples or num_warmup", ConvergenceWarning, stacklevel=3)
    idata.posterior.attrs.update(attrs)
    return idata

