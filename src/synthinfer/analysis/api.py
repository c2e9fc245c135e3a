"""``analyze``: run one analysis on each of m synthetic datasets and combine the results."""

from __future__ import annotations

import warnings
from collections import Counter
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import numpy as np
import pandas as pd

from synthinfer.analysis.combining import rubins_rules
from synthinfer.analysis.fastglm import fast_path_applies, fit_fast
from synthinfer.analysis.models import FitOptions, FitRecord, resolve_model
from synthinfer.analysis.parallel import run_fits
from synthinfer.analysis.result import MIResult
from synthinfer.analysis.robust import drop_extreme_variances
from synthinfer.analysis.separation import DEFAULT_SEPARATION, SEPARATION_PENALTY, SEPARATION_REMEDIES
from synthinfer.analysis.support import MISSING_RULES, analysed_columns, complete_cases
from synthinfer.data.weights import check_weight_vectors
from synthinfer.errors import AnalysisError, FitFailedWarning, ParameterError, SynthinferWarning, user_stacklevel
from synthinfer.privacy import make_rng

__all__ = ["analyze"]


#: Rows of synthetic data a lazily read release's ``analyze`` holds at once: its datasets are
#: read and fitted in groups of about this many rows (an in-memory list is one group).
GROUP_ROWS = 5_000_000


def _groups(datasets: Sequence[pd.DataFrame]) -> list[list[int]]:
    """Dataset indices in the groups :func:`analyze` fits together: one group for a list; for a
    lazy sequence (a large release's datasets, with ``load`` and ``rows``) groups of at most
    :data:`GROUP_ROWS` rows."""
    m = len(datasets)
    if isinstance(getattr(datasets, "datasets", datasets), list):  # a _CompleteCases view groups as its list
        return [list(range(m))]
    size = max(1, GROUP_ROWS // max(1, int(datasets.rows(0))))
    return [list(range(s, min(m, s + size))) for s in range(0, m, size)]


class _CompleteCases(Sequence):
    """``datasets[i]`` restricted to its complete cases for ``formula`` (rows with a value in
    every column it names, and in the weight column ``also``), made when a dataset is used, so
    a lazily read release stays lazy; :meth:`rows` is the dataset's row count before the drop
    (what :func:`_groups` sizes its groups by)."""

    def __init__(self, datasets: Sequence[pd.DataFrame], formula: str, also: Sequence[str]) -> None:
        self.datasets, self.formula, self.also = datasets, formula, list(also)

    def __len__(self) -> int:
        return len(self.datasets)

    def __getitem__(self, i):
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(self)))]
        return self.with_mask(i)[0]

    def rows(self, i: int) -> int:
        return self.datasets.rows(i) if hasattr(self.datasets, "rows") else len(self.datasets[i])

    def with_mask(self, i: int) -> tuple[pd.DataFrame, np.ndarray]:
        data = self.datasets[i]
        if not isinstance(data, pd.DataFrame):
            return data, np.ones(0, dtype=bool)  # refused by analyze, naming the dataset
        keep = complete_cases(data, self.formula, self.also)
        return (data if keep.all() else data.loc[keep].reset_index(drop=True)), keep


def _weight_column(weights: Any) -> list[str]:
    return [weights] if isinstance(weights, str) else []


def _refuse_missing(data: pd.DataFrame, i: int, formula: str, weights: Any) -> None:
    """An :class:`AnalysisError` naming the columns where dataset ``i`` lacks values the
    analysis needs, and the complete-case option (``missing="raise"``)."""
    counts = data[analysed_columns(data, formula, _weight_column(weights))].isna().sum()
    gaps = {c: int(k) for c, k in counts.items() if k}
    if gaps:
        where = ", ".join(f"{c!r} ({k:,} rows)" for c, k in gaps.items())
        raise AnalysisError(f"synthetic dataset {i} has missing values in {where}: analyse the complete cases with "
                            "missing='drop' (command line: --missing drop), as statsmodels does by default")


def _weights_per_dataset(weights: Any, datasets: list[pd.DataFrame]) -> list[np.ndarray] | None:
    if weights is None:
        return None
    if isinstance(weights, str):
        missing = [i for i, d in enumerate(datasets) if weights not in d.columns]
        if missing:
            raise AnalysisError(f"weight column {weights!r} is missing from dataset(s) {missing}")
        weights = [d[weights].to_numpy() for d in datasets]
    return check_weight_vectors(weights, datasets, AnalysisError)


def _stack(records: list[FitRecord]) -> tuple[list[str], np.ndarray, np.ndarray]:
    """Align the per-dataset estimates by parameter name: (names, (m, k) q, (m, k, k) U); a
    parameter a dataset lacks (or a failed or dropped fit) is NaN."""
    names: list[str] = []
    for r in records:
        if r.ok:
            names += [nm for nm in r.params.index if nm not in names]
    m, k = len(records), len(names)
    q = np.full((m, k), np.nan)
    U = np.full((m, k, k), np.nan)
    for i, r in enumerate(records):
        if r.used:
            q[i] = r.params.reindex(names).to_numpy()
            U[i] = r.cov.reindex(index=names, columns=names).to_numpy()
    return names, q, U


def _report(records: list[FitRecord]) -> None:
    # One warning per distinct error (not one per dataset: m is often 100).
    failed: dict[str, list[int]] = {}
    for r in records:
        if not r.ok:
            failed.setdefault(r.error, []).append(r.index)
    for error, idx in failed.items():
        which = (f"synthetic dataset {idx[0]}" if len(idx) == 1 else
                 f"{len(idx)} synthetic datasets ({', '.join(map(str, idx[:10]))}{' ...' if len(idx) > 10 else ''})")
        warnings.warn(f"the fit on {which} failed and is left out: {error}", FitFailedWarning,
                      stacklevel=user_stacklevel())
    # warnings of fits that were replaced or left out describe no estimate that is used
    counts = Counter(msg for r in records if r.used and r.remedy is None for msg in r.warnings)
    for msg, c in counts.most_common(5):
        warnings.warn(f"{c} of {len(records)} fits warned: {msg}", SynthinferWarning, stacklevel=user_stacklevel())


def _treat_separation(
    records: list[FitRecord],
    remedy: str,
    datasets: list[pd.DataFrame],
    spec,
    opts: FitOptions,
    w: list[np.ndarray] | None,
    seeds: list[np.random.SeedSequence],
    n_jobs: int | None,
    progress: bool,
) -> list[FitRecord]:
    """Apply ``remedy`` to the separated fits (see :mod:`synthinfer.analysis.separation`)."""
    hit = [r.index for r in records if r.separated]
    if not hit:
        return records
    if remedy == "penalty" and opts.penalty is None:
        penalised = replace(opts, penalty=SEPARATION_PENALTY)
        refits = run_fits(datasets, spec, penalised, w, seeds, n_jobs, progress, indices=hit)
        new = {r.index: replace(r, separated=True, remedy="penalty") for r in refits}
    else:
        # an analysis fitted with the penalty throughout needs nothing more
        done = "penalty" if remedy == "penalty" else remedy
        new = {i: replace(records[i], remedy=done) for i in hit}
    out = [new.get(r.index, r) for r in records]
    if remedy == "ignore":
        warnings.warn(
            f"{len(hit)} of {len(records)} synthetic datasets are (quasi-)completely separated "
            f"({', '.join(map(str, hit[:10]))}{' ...' if len(hit) > 10 else ''}); their estimates are kept "
            "as fitted (separation='ignore'), so the combined intervals may be very wide",
            SynthinferWarning,
            stacklevel=user_stacklevel(),
        )
    return out


def analyze(
    datasets: Sequence[pd.DataFrame],
    formula: str | None = None,
    model: Any = "logit",
    weights: Sequence[np.ndarray] | str | None = None,
    *,
    n: int | None = None,
    n_syn: float | None = None,
    alpha: float = 0.05,
    cov_type: str | None = None,
    drop_variance_above: float | None = None,
    penalty: float | None = None,
    n_bootstrap: int = 50,
    separation: str = DEFAULT_SEPARATION,
    missing: str = "raise",
    seed: int | np.random.Generator | None = None,
    n_jobs: int | None = None,
    fast: bool = True,
    progress: bool = True,
    model_kwargs: dict | None = None,
    fit_kwargs: dict | None = None,
) -> MIResult:
    """Fit ``formula`` on each synthetic dataset and combine with Rubin's rules for synthetic data.

    Parameters
    ----------
    datasets : the m synthetic datasets (m >= 2).
    formula : a patsy formula such as ``"income ~ age + C(race) + C(sex)"`` (for a two-category
        outcome the last category is modelled, e.g. ``income[>50K]``).
    model : ``"logit"``, ``"probit"``, ``"ols"``, ``"poisson"`` (GLMs; without ``penalty``,
        ``model_kwargs``, ``fit_kwargs`` and with ``cov_type`` None, "nonrobust" or "HC0" they are
        fitted on all datasets at once by :mod:`synthinfer.analysis.fastglm`, equal to
        statsmodels), a statsmodels formula model (class or ``statsmodels.formula.api``
        function), or a callable ``f(data[, formula][, weights=w])`` returning
        ``(estimates, covariance)``; see :mod:`synthinfer.analysis.models`.
    weights : per-row weights: one array per dataset, or the name of a column. Weighted GLMs use
        ``var_weights`` with the HC0 sandwich covariance (justified in
        :mod:`synthinfer.analysis.models`).
    n : rows of the private data; ``n_syn`` : rows of a synthetic dataset (default: their mean).
        They give the fallback T* = (n_syn/n) v̄ when T <= 0 (Supplement B eq. 10).
    alpha : default level of the intervals in ``summary`` and ``to_frame``.
    cov_type : statsmodels covariance type (default: model-based, or "HC0" with weights).
    drop_variance_above : Section 5.2 option 1: drop estimates whose variance is at least this
        (the paper uses 1e3) before combining; counts are in ``MIResult.n_dropped``.
    penalty, n_bootstrap : Section 5.2 option 2: fit with the L2 penalty (alpha/2)|β|² added to
        the negative log-likelihood summed over rows (the paper uses 1e-5) and estimate the
        covariance from ``n_bootstrap`` bootstrap refits (the paper uses 50). GLM models only.
    separation : what to do with a logit or probit fit whose dataset is (quasi-)completely
        separated (no finite MLE; detected exactly per dataset, see
        :mod:`synthinfer.analysis.separation`): ``"penalty"`` refits that dataset with the L2
        penalty 1e-5 and ``n_bootstrap`` bootstrap variances (Section 5.2), ``"drop"`` leaves it
        out of the combining rules, ``"ignore"`` keeps it as fitted (with a warning). The
        default was chosen from a measurement (``docs/separation.md``). ``summary()`` and
        :attr:`MIResult.separated` report the datasets affected.
    missing : rows with a missing value (NaN, None) in a column the formula names, or in the
        weight column (a release whose Domain declares ``"<missing>"`` in a numeric column writes
        NaN there): ``"raise"`` refuses them naming the columns; ``"drop"`` fits each dataset's
        complete cases (statsmodels' ``missing="drop"``, the default of its formula API). Then
        ``n`` in the fallback T* is scaled by the datasets' mean share of complete rows (the
        real data's own is not known; the synthetic data estimate it), and ``summary()`` says
        how many rows were dropped.
    seed : seeds the bootstrap resampling (``penalty``, or the ``"penalty"`` remedy).
    n_jobs : worker processes for the fits that go through statsmodels (None: automatic, from the
        time of the first fit and the free cores, see
        :func:`synthinfer.analysis.parallel.choose_n_jobs`; -1: all cores). The batched GLM fit
        runs in this process.
    fast : use the batched GLM fit where it applies (False: statsmodels for every dataset; the
        numbers agree to about 1e-12).
    progress : show a progress bar.
    model_kwargs, fit_kwargs : passed to the statsmodels model constructor and to ``fit``.
    """
    if isinstance(datasets, pd.DataFrame) or not isinstance(datasets, Sequence):
        raise AnalysisError("datasets must be a list of the m synthetic DataFrames")
    if not isinstance(datasets, list) and not hasattr(datasets, "load"):  # a lazy release's datasets stay lazy
        datasets = list(datasets)
    if len(datasets) < 2:
        raise AnalysisError(f"Rubin's rules need at least 2 synthetic datasets, got {len(datasets)}")
    if isinstance(alpha, bool) or not isinstance(alpha, (int, float)) or not 0 < alpha < 1:
        raise ParameterError(f"alpha must be in (0, 1), got {alpha!r}")
    if n_jobs is not None and (isinstance(n_jobs, bool) or not isinstance(n_jobs, int) or n_jobs == 0 or n_jobs < -1):
        raise ParameterError(f"n_jobs must be a positive number of workers, -1 (all cores) or None, got {n_jobs!r}")
    if separation not in SEPARATION_REMEDIES:
        raise ParameterError(f"separation must be one of {list(SEPARATION_REMEDIES)}, got {separation!r}")
    if missing not in MISSING_RULES:
        raise ParameterError(f"missing must be one of {list(MISSING_RULES)}, got {missing!r}")
    for name, value in (("n", n), ("n_syn", n_syn)):  # before any fit: the combining rules use them last
        if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float, np.number))
                                  or not np.isfinite(value) or value <= 0):
            raise ParameterError(f"{name} must be a positive number of rows or None, got {value!r}")
    spec = resolve_model(model)
    if formula is None and spec.kind != "callable":
        raise ParameterError(f"model {spec.name!r} needs a formula")
    if missing == "drop" and formula is None:
        raise ParameterError("missing='drop' needs a formula (which columns the analysis uses); a callable model "
                             "without one handles its own missing values")
    if missing == "drop" and n_syn is not None:
        raise ParameterError("n_syn is the complete cases' row count under missing='drop', which analyze takes "
                             "from the fits; leave n_syn out")
    if missing == "drop":
        datasets = _CompleteCases(datasets, formula, _weight_column(weights))
    kept: dict[int, float] = {}
    if penalty is not None:
        if not spec.supports_penalty:
            raise ParameterError("penalty (L2 + bootstrap) is available for 'logit', 'probit', 'ols' and 'poisson'")
        if not penalty > 0 or int(n_bootstrap) < 2:
            raise ParameterError(f"need penalty > 0 and n_bootstrap >= 2, got {penalty!r}, {n_bootstrap!r}")
    opts = FitOptions(
        formula=formula,
        cov_type=cov_type,
        penalty=penalty,
        n_bootstrap=int(n_bootstrap),
        model_kwargs=dict(model_kwargs or {}),
        fit_kwargs=dict(fit_kwargs or {}),
    )
    # One independent stream per dataset, so results do not depend on n_jobs or on scheduling.
    seeds = np.random.SeedSequence(make_rng(seed).integers(0, 2**63 - 1)).spawn(len(datasets))
    records: list[FitRecord] = []
    w_all: dict[int, np.ndarray] | None = None if weights is None else {}
    for group in _groups(datasets):
        # a group's datasets in memory at once (all of them for a list; a bounded number of rows
        # for a release read lazily); every fit is per dataset, so the grouping changes nothing
        if missing == "drop":
            part, masks = map(list, zip(*(datasets.with_mask(i) for i in group)))
            kept.update((i, float(k.mean()) if k.size else 1.0) for i, k in zip(group, masks))
        else:
            part, masks = [datasets[i] for i in group], None
        for i, d in zip(group, part):
            if not isinstance(d, pd.DataFrame) or len(d) == 0:
                raise AnalysisError(f"dataset {i} is not a non-empty DataFrame" + (
                    "" if missing == "raise" or not isinstance(d, pd.DataFrame) else
                    " after dropping the rows with missing values (missing='drop')"))
            if missing == "raise" and formula is not None and spec.kind != "callable":  # a callable sees all rows
                _refuse_missing(d, i, formula, weights)
        given = None if isinstance(weights, str) or weights is None else [weights[i] for i in group]
        if given is not None and masks is not None:  # arrays for the rows before the drop
            for i, g, k in zip(group, given, masks):
                if len(g) != len(k):
                    raise AnalysisError(f"weights[{i}] has {len(g)} entries for the {len(k)} rows of dataset {i} "
                                        "(weights are given for every row; missing='drop' drops theirs with them)")
            given = [np.asarray(g)[k] for g, k in zip(given, masks)]
        w = _weights_per_dataset(weights if given is None else given, part)
        if w is not None:
            w_all.update(zip(group, w))
        batched = fit_fast(part, spec, opts, w) if fast and fast_path_applies(spec, opts) else [None] * len(part)
        rest = [j for j, r in enumerate(batched) if r is None]
        found = [r for r in batched if r is not None]
        if rest:
            found += run_fits(part, spec, opts, w, [seeds[i] for i in group], n_jobs, progress, indices=rest)
        records += [replace(r, index=group[r.index]) for r in found]
        del part
    records.sort(key=lambda r: r.index)
    w = None if w_all is None else [w_all[i] for i in range(len(datasets))]
    records = _treat_separation(records, separation, datasets, spec, opts, w, seeds, n_jobs, progress)
    good = [r for r in records if r.used]
    if len(good) >= 2:  # else the error below says it all, without a warning before it
        _report(records)
    if len(good) < 2:
        first = next((r.error for r in records if not r.ok), "")
        if any(r.remedy == "drop" for r in records):
            raise AnalysisError(
                f"only {len(good)} of {len(records)} fits can be combined: the others failed or are separated "
                f"and were left out (separation='drop'); try separation='penalty'. First error: {first or '-'}"
            )
        raise AnalysisError(f"only {len(good)} of {len(records)} fits succeeded; first error: {first}")

    names, q, U = _stack(records)
    v = np.diagonal(U, axis1=1, axis2=2).copy()
    n_dropped = np.zeros(len(names), dtype=int)
    if drop_variance_above is not None:
        q_used, v, n_dropped = drop_extreme_variances(q, v, drop_variance_above)
        q_comb = q_used
    else:
        q_comb = q
    if n_syn is None:
        n_syn = float(np.mean([r.nobs for r in good]))
    complete = float(np.mean([kept[r.index] for r in good])) if kept else None
    # the private data's complete cases, as the synthetic data estimate them
    n_complete = n if complete is None or n is None else n * complete
    combined = rubins_rules(q_comb, v, n=n_complete, n_syn=n_syn, names=names)
    return MIResult(
        combined,
        records,
        q_comb,
        U,
        formula=formula,
        model=spec.name,
        n=n,
        n_syn=n_syn,
        alpha=alpha,
        n_dropped=n_dropped,
        options={"penalty": penalty, "n_bootstrap": int(n_bootstrap), "drop_variance_above": drop_variance_above,
                 "separation": separation, "missing": missing, "complete_share": complete},
    )
