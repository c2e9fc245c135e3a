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

The per-dataset posteriors of a formula GLM (:func:`mix_posteriors`) are sampled by
:class:`synthinfer.bayes.GeneralisedPosterior` with the log loss (Bayes' rule on the synthetic
rows), exactly where the model is conjugate and by NUTS (BlackJAX) otherwise, each dataset
collapsed to its distinct rows with their counts (:func:`distinct_rows`); an analyst's own
log-density (:func:`mix_logdensity_posteriors`) by NUTS. Either way all datasets run in one
vectorised program (:func:`synthinfer.bayes.nuts.nuts_batch`).
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pandas as pd

from synthinfer._jax import jax, uses_float64
from synthinfer.bayes.losses import LogLoss
from synthinfer.bayes.models import LinearRegression, LogisticRegression, PoissonRegression, ProbitRegression
from synthinfer.bayes.nuts import nuts_batch
from synthinfer.bayes.posterior import GeneralisedPosterior
from synthinfer.errors import AnalysisError, ConvergenceWarning, ParameterError, SynthinferWarning, user_stacklevel
from synthinfer.mcmc import convergence_diagnostics, import_arviz
from synthinfer.privacy.randomness import SeedLike, jax_key, make_rng, seed_fixed

#: Warn below this ratio n_syn / n: the mixture then overstates the posterior variance by up
#: to ``1 + 2 n / n_syn`` (40% at 5, about 18% on interval widths).
MIN_SIZE_RATIO = 5.0
#: Warn with fewer datasets: the mixture's tails come from few components.
MIN_DATASETS = 10
#: Warn where the mixture's 95% intervals are expected to cover less than this
#: (:func:`mixture_coverage`): their ends rest on too few datasets for how narrow the datasets'
#: posteriors are (large synthetic datasets need many of them).
MIN_TAIL_COVERAGE = 0.94
#: Per-dataset convergence check of the NUTS path. Looser than the single-posterior policy of
#: :mod:`synthinfer.mcmc` (1.01, 100 per chain) on purpose: the mixture's Monte Carlo error is
#: averaged over m components, and at 1.01 a few of many well-mixed datasets fail by chance
#: (2 of 10 at 2 x 500 draws in the test); these bounds flag chains that are stuck or barely
#: moving, which the mixture cannot average away.
MIXTURE_RHAT_MAX = 1.05
MIXTURE_ESS_PER_CHAIN = 50.0

_FAMILIES = {"logit": LogisticRegression, "probit": ProbitRegression, "poisson": PoissonRegression,
             "ols": LinearRegression}


def _shared_design(formula: str, datasets: Sequence[pd.DataFrame],
                   binary: bool) -> tuple[list[tuple[np.ndarray, np.ndarray]], list[str]]:
    """(X without the intercept column, y) per dataset, all on the first dataset's patsy design
    (so every dataset has the same columns; a category absent from one dataset is a zero column).
    Why not :func:`synthinfer.analysis.fastglm._designs`: its designs may differ in columns
    between datasets (one per level signature), and one vectorised posterior needs one design."""
    import patsy

    from synthinfer.analysis.models import outcome_column
    from synthinfer.analysis.support import formula_message

    try:
        y0, x0 = patsy.dmatrices(formula, datasets[0], return_type="dataframe", NA_action="raise")
    except patsy.PatsyError as e:
        raise AnalysisError(formula_message(formula, e)) from None
    out = []
    for i, d in enumerate(datasets):
        try:
            y, X = patsy.build_design_matrices([y0.design_info, x0.design_info], d, return_type="dataframe",
                                               NA_action="raise")
        except patsy.PatsyError as e:
            raise AnalysisError(formula_message(formula, e, f" on synthetic dataset {i}")) from None
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
    model : ``"logit"`` or ``"probit"`` (binary outcome), ``"poisson"`` (counts, log link), all
        with prior ``N(0, 50)`` on every coefficient by default (:class:`NormalPrior`) and sampled by NUTS; or
        ``"ols"`` (normal errors; Normal-Inverse-Gamma prior, sampled exactly).
    n : rows of the private table (the release's ``n``), for the size check.
    prior : a prior of :mod:`synthinfer.bayes.models` for the model (None: its default).
    num_warmup, num_samples, num_chains, max_tree_depth : NUTS settings per dataset (all but ols);
        the mixture has ``m * num_chains * num_samples`` draws.
    seed : the sampler's randomness.

    Returns
    -------
    InferenceData whose ``posterior`` holds ``coef`` (dims ``chain, draw, term``; the formula's
    column names) and, for ``"ols"``, ``sigma``; its chains are the ``m * num_chains``
    per-dataset chains (``dataset`` in ``posterior.attrs`` maps them back), so ArviZ's
    summaries describe the mixture. ``attrs`` also record ``m``, ``n``, ``n_syn``, the method
    and, for NUTS, how many datasets' chains missed the convergence check
    (:data:`MIXTURE_RHAT_MAX`, :data:`MIXTURE_ESS_PER_CHAIN`), with a ConvergenceWarning when any did,
    and ``tail_coverage_95``, the 95% intervals' expected coverage (:func:`mixture_coverage`, the
    lowest over the parameters), with a warning below :data:`MIN_TAIL_COVERAGE` that says how
    many datasets would do: many large datasets are needed together (on the toy study, 20
    datasets of 20 n rows covered 0.91, 20 of 5 n rows 0.95; benchmarks/bayes/README.md).
    """
    if model not in _FAMILIES:
        raise ParameterError(f"model must be one of {sorted(_FAMILIES)}, got {model!r}")
    if not isinstance(formula, str) or "~" not in formula:
        raise ParameterError(f"formula must be a patsy formula 'y ~ x1 + ...', got {formula!r}")
    datasets, n_syn, m = _check_release(datasets, n)
    designs, names = _shared_design(formula, datasets, binary=model in ("logit", "probit"))
    intercept = "Intercept" in names
    bmodel = _FAMILIES[model](n_features=len(names) - intercept, fit_intercept=intercept)
    post = GeneralisedPosterior(bmodel, LogLoss(1.0), prior, num_warmup=num_warmup, num_samples=num_samples,
                                num_chains=num_chains, max_tree_depth=max_tree_depth, seed=seed)
    collapsed = [distinct_rows(X, y) for X, y in designs]
    try:  # (m, C, S, dim), unconstrained
        draws = post.sample_many([(None, (X, y)) for X, y, _ in collapsed], counts=[c for *_, c in collapsed])
    except np.linalg.LinAlgError as e:
        raise AnalysisError(f"formula {formula!r}: the design is singular on a synthetic dataset ({e})") from None
    k = len(names)
    posterior: dict[str, np.ndarray] = {"coef": draws[..., :k]}
    if draws.shape[-1] > k:  # the linear model's log sigma
        posterior["sigma"] = np.exp(draws[..., k])
    return _to_idata(posterior, {"coef": ["term"]}, {"term": names}, type(bmodel).__name__, post.method_,
                     m=m, n=n, n_syn=n_syn, seed=seed)


def distinct_rows(X: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(X, y)`` as its distinct rows and their multiplicities. The log loss is a sum over
    rows, so weighting each distinct row by its count gives the same posterior; with
    categorical columns, as every NAPSU-MQ release has, a dataset of any size has at most as
    many distinct rows as its design has cells (e.g. 200 for the Adult logit), so each
    likelihood evaluation costs that many rows instead of ``n_syn``."""
    rows, counts = np.unique(np.column_stack([X, y]), axis=0, return_counts=True)
    return rows[:, :-1], rows[:, -1], counts.astype(np.float64)


def _check_release(datasets: Sequence[pd.DataFrame], n: int) -> tuple[list[pd.DataFrame], int, int]:
    """The datasets as a list, their common size and number; warns when they are small or few."""
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
            SynthinferWarning, stacklevel=user_stacklevel())
    if m < MIN_DATASETS:
        warnings.warn(f"{m} synthetic datasets: the mixture's tails rest on few components; use at least "
                      f"{MIN_DATASETS}", SynthinferWarning, stacklevel=user_stacklevel())
    return datasets, n_syn, m


def _columns_as_arrays(data: pd.DataFrame) -> dict[str, np.ndarray]:
    """Every column as a float64 array; categorical columns as their integer codes (as floats)."""
    return {str(c): (data[c].cat.codes if isinstance(data[c].dtype, pd.CategoricalDtype) else data[c])
            .to_numpy(dtype=np.float64) for c in data.columns}


@uses_float64
def mix_logdensity_posteriors(
    datasets: Sequence[pd.DataFrame],
    logdensity: Callable[[Any, Any], Any],
    init: Any,
    *,
    n: int,
    to_arrays: Callable[[pd.DataFrame], Any] | None = None,
    num_warmup: int = 300,
    num_samples: int = 500,
    num_chains: int = 2,
    max_tree_depth: int = 8,
    seed: SeedLike = None,
) -> Any:
    """The mixture of an analyst's own posteriors on ``datasets`` (module docstring), by NUTS.

    Parameters
    ----------
    logdensity : ``logdensity(params, data) -> scalar``, the analyst's log posterior density
        (log prior plus log likelihood, up to a constant) in unconstrained coordinates, written
        in JAX (BlackJAX's convention); ``data`` is ``to_arrays(dataset)``. A NumPyro model can
        be wrapped as ``lambda p, d: -numpyro.infer.util.potential_energy(model, (d,), {}, p)``
        with ``p`` in NumPyro's unconstrained space (``potential_energy`` adds the Jacobians).
    init : the initial position, a pytree (an array, or a dict of arrays); chains start at
        ``init`` plus N(0, 0.1^2) jitter.
    to_arrays : dataset -> the pytree of arrays ``logdensity`` reads (default: a dict of every
        column as float64, categorical columns as integer codes). Every dataset must give the
        same shapes (the datasets have one size).
    n, num_warmup, num_samples, num_chains, max_tree_depth, seed : as :func:`mix_posteriors`.

    Returns
    -------
    InferenceData whose ``posterior`` holds ``init``'s entries (``theta`` for a bare array) with
    the ``m * num_chains`` per-dataset chains as its chains, and the attributes of
    :func:`mix_posteriors`.
    """
    if not callable(logdensity):
        raise ParameterError(f"logdensity must be a function logdensity(params, data), got {type(logdensity).__name__}")
    datasets, n_syn, m = _check_release(datasets, n)
    for name, v in (("num_warmup", num_warmup), ("num_samples", num_samples), ("num_chains", num_chains),
                    ("max_tree_depth", max_tree_depth)):
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 1:
            raise ParameterError(f"{name} must be a positive integer, got {v!r}")
    arrays = [(to_arrays or _columns_as_arrays)(d) for d in datasets]
    shapes = [jax.tree.map(np.shape, a) for a in arrays]
    if any(s != shapes[0] for s in shapes):
        raise ParameterError("to_arrays gave different shapes on different datasets; it must give one shape")
    batch = jax.tree.map(lambda *xs: np.stack(xs), *arrays)
    rng = make_rng(seed)
    init_arr = jax.tree.map(lambda x: np.asarray(x, dtype=np.float64), init)
    inits = jax.tree.map(lambda x: x + 0.1 * rng.standard_normal((m, num_chains, *x.shape)), init_arr)
    try:
        lp = float(logdensity(init_arr, jax.tree.map(lambda x: x[0], batch)))
    except Exception as e:  # the analyst's function: say where it failed, before compiling the batch
        raise AnalysisError(f"logdensity(init, data of dataset 0) failed: {type(e).__name__}: {e}") from None
    if not np.isfinite(lp):
        raise AnalysisError(f"logdensity(init, data of dataset 0) = {lp}: start where the density is finite")
    keys = jax.random.split(jax_key(rng), m * num_chains).reshape(m, num_chains)
    pos, _, _ = nuts_batch(logdensity, keys, inits, batch, num_warmup=int(num_warmup),
                           num_samples=int(num_samples), max_tree_depth=int(max_tree_depth))
    posterior = {k: np.asarray(v) for k, v in pos.items()} if isinstance(pos, dict) else {"theta": np.asarray(pos)}
    return _to_idata(posterior, None, None, "log-density", "nuts", m=m, n=n, n_syn=n_syn, seed=seed)


def mixture_coverage(m: int, between: float, within: float, level: float = 0.95, repeats: int = 400) -> float:
    """Expected coverage of the central ``level`` interval of a mixture of ``m`` per-dataset
    posteriors, from the variance of their means (``between``, ``B``) and their mean variance
    (``within``, ``W``), in the large-sample theory of the module docstring.

    Each component is ``N(c_i, W)``: its width is the synthetic data's own sampling variance, and
    its centre ``c_i ~ N(c, B)`` varies by the data holder's posterior plus that same sampling
    noise, so the analyst's target, the posterior on the real data, has variance ``B - W`` (the
    subtraction of Rubin's rules for synthetic data). The interval's ends, the finite mixture's
    quantiles, are computed for ``repeats`` draws of the centres (a fixed seed: a numerical
    integral, not a random output) and the coverage is the mean probability they hold under
    ``N(c, B - W)``. Two effects meet: small synthetic datasets (``W`` large) make the mixture
    wider than the target (conservative, by ``1 + 2 n / n_syn`` in variance with the DP noise
    negligible); few datasets with narrow posteriors make its tails order statistics of the ``m``
    centres (the ``k``-th and ``(m + 1 - k)``-th, ``k = ceil(m (1 - level) / 2)``, which hold
    ``(m + 1 - 2k) / (m + 1)`` of the centres' own distribution on average: 0.905 at ``m = 20``,
    0.941 at ``m = 100`` for 95%). It depends on ``B`` and ``W`` only through ``B / W``, falling as
    that grows. ``nan`` where ``B <= W`` (no variance left for the target)."""
    from scipy.special import ndtr

    if not (between > within >= 0):
        return float("nan")
    scale = between + within
    c = np.random.default_rng(0).standard_normal((repeats, m)) * math.sqrt(between / scale)
    w, t = math.sqrt(within / scale), math.sqrt((between - within) / scale)
    p = np.array([(1 - level) / 2, (1 + level) / 2])[:, None]
    lo, hi = np.full((2, repeats), c.min(axis=1) - 10.0), np.full((2, repeats), c.max(axis=1) + 10.0)
    for _ in range(60):  # bisection for both quantiles of every repeat's mixture CDF at once
        mid = (lo + hi) / 2
        cdf = ndtr((mid[..., None] - c) / w).mean(axis=-1) if w > 0 else (mid[..., None] >= c).mean(axis=-1)
        below = cdf < p
        lo, hi = np.where(below, mid, lo), np.where(below, hi, mid)
    q = (lo + hi) / 2
    return float(np.mean(ndtr(q[1] / t) - ndtr(q[0] / t)))


def _to_idata(posterior: dict[str, np.ndarray], dims: dict | None, coords: dict | None, model: str, sampler: str,
              *, m: int, n: int, n_syn: int, seed: SeedLike) -> Any:
    """InferenceData of per-dataset draws ``(m, C, S, ...)``: the m * C chains as ArviZ chains."""
    az = import_arviz()
    first = next(iter(posterior.values()))
    C = first.shape[1]
    flat = {k: v.reshape(m * C, *v.shape[2:]) for k, v in posterior.items()}
    idata = az.from_dict(posterior=flat, coords=coords, dims=dims)
    attrs = {
        "method": "mixture of per-dataset posteriors (Räisä, Jälkö & Honkela 2025)",
        "sampler": sampler,
        "model": model,
        "m": m, "n": n, "n_syn": n_syn,
        "dataset": [i for i in range(m) for _ in range(C)],
        "seed_fixed": seed_fixed(seed),
    }
    if sampler == "nuts" and C > 1:
        failing = [i for i in range(m) if not convergence_diagnostics(
            az.from_dict(posterior={k: v[i] for k, v in posterior.items()}), rhat_max=MIXTURE_RHAT_MAX,
            ess_per_chain=MIXTURE_ESS_PER_CHAIN, warn=False)["ok"]]
        attrs["datasets_not_converged"] = len(failing)
        if failing:
            warnings.warn(
                f"NUTS on {len(failing)} of {m} synthetic datasets missed the mixture's convergence check (split "
                f"R-hat < {MIXTURE_RHAT_MAX}, bulk ESS >= {MIXTURE_ESS_PER_CHAIN:g} per chain; datasets "
                f"{failing[:10]}{'...' if len(failing) > 10 else ''}): raise num_samples or num_warmup",
                ConvergenceWarning, stacklevel=user_stacklevel())
    if m > 1:
        attrs["tail_coverage_95"] = _check_tails(posterior, m)
    idata.posterior.attrs.update(attrs)
    return idata


def _check_tails(posterior: dict[str, np.ndarray], m: int) -> float:
    """The lowest :func:`mixture_coverage` at 95% over the scalar parameters (draws ``(m, C, S,
    ...)``); warns below :data:`MIN_TAIL_COVERAGE` with the number of datasets that brings it
    there (up to 2,000). The coverage depends on ``B`` and ``W`` only through ``B / W`` and falls
    as it grows, so the parameter with the largest ratio is the one to evaluate."""
    ratios = []
    for v in posterior.values():
        x = v.reshape(m, -1, int(np.prod(v.shape[3:], dtype=int)))  # (m, draws, scalars)
        between, within = x.mean(axis=1).var(axis=0, ddof=1), x.var(axis=1).mean(axis=0)
        ratios.append(between / np.maximum(within, 1e-300))
    ratio = float(np.max(np.concatenate(ratios)))
    if not ratio > 1:  # no variance left for the target anywhere: nothing to judge
        return float("nan")
    worst = mixture_coverage(m, ratio, 1.0)
    if worst < MIN_TAIL_COVERAGE:
        need = next((k for k in (2 * m, 5 * m, 10 * m, 20 * m, 50 * m, 100 * m) if k <= 2000
                     and mixture_coverage(k, ratio, 1.0) >= MIN_TAIL_COVERAGE), None)
        advice = f"use about {need} datasets" if need else "use many more datasets"
        warnings.warn(
            f"the mixture's 95% intervals are expected to cover about {worst:.2f}: the {m} datasets' posteriors are "
            f"narrow next to their spread, so the intervals' ends rest on a few of them; {advice} (or smaller "
            f"ones, down to {MIN_SIZE_RATIO:g} times the private table)", SynthinferWarning,
            stacklevel=user_stacklevel())
    return worst
