"""The convergence policy for every MCMC sampler in synthinfer (NAPSU-MQ, generalised Bayes, IW
posteriors).

Vehtari, Gelman, Simpson, Carpenter & Bürkner (2021), "Rank-normalization, folding, and
localization: an improved R-hat for assessing convergence of MCMC", Bayesian Analysis 16(2):

- the rank-normalised split R-hat of every scalar quantity must be below :data:`RHAT_MAX` = 1.01
  (their Section 4.1; the classic 1.1 lets visibly unmixed chains through);
- the bulk effective sample size must be at least :data:`ESS_BULK_PER_CHAIN` = 100 per chain
  (Section 4.3: 400 for four chains), so that R-hat itself and posterior means are reliable. The
  tail ESS (of the 5% and 95% quantiles) is reported alongside.

Split R-hat needs at least two chains in ArviZ (one chain gives NaN); with one chain only the ESS
part of the policy is checked and R-hat is reported as None.

Many parameters. 1.01 is a bound for one quantity: chains that have converged exceed it by
chance once their effective length is short relative to the number of quantities checked (four
stationary AR(1) chains of 400 draws, ESS ~ 870 per quantity, 360 quantities: the largest
R-hat is above 1.01 in every replicate; ``docs/napsu-sampler.md``). So each quantity's R-hat is
compared with ``max(1.01, q)``, where ``q`` is what chains that all sample the same stationary
distribution, with that quantity's own within-chain autocorrelation, exceed with probability
:data:`RHAT_FAMILY_ALPHA` over all quantities checked (:func:`rhat_null_limits`), capped at
:data:`RHAT_CEILING`. With few quantities or long chains the limit is 1.01 itself.
"""

from __future__ import annotations

import importlib
import math
import warnings
from collections.abc import Sequence
from types import ModuleType
from typing import Any

import numpy as np

from synthinfer.errors import ConvergenceWarning, user_stacklevel

#: Largest acceptable rank-normalised split R-hat (Vehtari et al. 2021).
RHAT_MAX = 1.01
#: Smallest acceptable bulk ESS per chain (Vehtari et al. 2021: 400 over four chains).
ESS_BULK_PER_CHAIN = 100.0
#: Family-wise level of the R-hat check over many quantities (:func:`rhat_null_limits`): the
#: chance that converged chains fail it.
RHAT_FAMILY_ALPHA = 0.01
#: The R-hat no number of quantities excuses (the bound rstan's ``Rhat`` documentation
#: recommends): chains whose R-hat exceeds it disagree whatever their autocorrelation.
RHAT_CEILING = 1.05
#: A further pass sized to the bulk ESS still missing (:func:`further_draws`) aims this many
#: times above the requirement: the ESS of short chains is a noisy estimate, and a pass that
#: falls short costs another check and pass.
ESS_MARGIN = 1.25


def _split_halves(x: np.ndarray) -> np.ndarray:
    """Draws ``(chains, draws, k)`` as the ``(2 chains, draws // 2, k)`` halves split R-hat compares."""
    half = x.shape[1] // 2
    return np.concatenate([x[:, :half], x[:, x.shape[1] - half:]], axis=0)


def rhat_null_limits(draws: np.ndarray, *, alpha: float = RHAT_FAMILY_ALPHA) -> np.ndarray:
    """The R-hat each quantity of converged chains stays below, jointly with probability ``1 - alpha``.

    ``draws``: ``(chains, draws, k)``. Split R-hat compares ``M = 2 * chains`` half-chains of
    ``N`` draws: with ``W`` the mean within-half variance and ``B / N`` the variance of their
    means, ``R^2 = (N - 1) / N + (B / N) / W``. When every half samples the same stationary
    distribution with effective size ``n_e`` (each half's own ESS, from its autocorrelation
    alone), ``(B / N) / W ~ chi^2_{M - 1} / ((M - 1) n_e)`` approximately (the means of the halves
    are nearly normal with variance ``W / n_e``; Gelman & Rubin 1992, Sec. 3). ArviZ's rank R-hat
    is the larger of the bulk and the folded statistic: ``2 k`` statistics, so each gets level
    ``alpha / (2 k)`` (Bonferroni); the limit is ``sqrt((N - 1) / N + q / ((M - 1) n_e))`` with
    ``q`` the chi-square quantile and ``n_e`` the smaller of the two statistics' ESS (ArviZ's bulk
    and folded ESS of each half alone, averaged over the halves), which bounds both. At
    ``alpha = 0.5`` it is about the median of the largest R-hat: on stationary AR(1) chains
    (4 x 200 draws, 100 quantities) the two agree to 3e-3 (``tests/test_mcmc.py``); false alarms
    and power in ``benchmarks/napsu/rhat_policy.py``. The approximation is Gelman & Rubin's
    (1992, Sec. 3) and the bound Bonferroni's; the test (a maximum of chi-square statistics over
    quantities) is ours: ArviZ gives the statistics, not their spread under convergence.
    """
    from scipy.stats import chi2

    x = np.asarray(draws, dtype=np.float64)
    x = x.reshape(x.shape[0], x.shape[1], -1)
    halves = _split_halves(x)
    m, n, k = halves.shape
    # each half as one chain of its own. The folded statistic (|x - median|) needs its own ESS:
    # NUTS is often antithetic in location (bulk ESS above the draws) but not in scale, and the
    # smaller ESS gives the larger, safe limit for the larger of the two R-hats.
    series = np.moveaxis(halves, 2, 0).reshape(k * m, 1, n)  # quantity-major, one chain each
    ess = np.minimum(batched_ess(series, "bulk"), batched_ess(series, "folded"))
    n_e = np.clip(np.nan_to_num(ess, nan=1.0).reshape(k, m).mean(axis=1), 1.0, None)
    q = chi2.isf(alpha / (2 * k), m - 1)
    return np.sqrt((n - 1) / n + q / ((m - 1) * n_e))


def batched_ess(x: np.ndarray, method: str = "bulk") -> np.ndarray:
    """ArviZ's split effective sample size (``az.ess(method="bulk" | "folded")``) of many series at once.

    ``x``: ``(series, chains, draws)``; returns ``(series,)``. Each series' chains are split in
    halves, its draws rank-normalised (Blom's offset 3/8) after folding about the median for
    ``"folded"``, and the ESS is ``C N / tau`` with ``tau = -1 + 2 sum_t rho_t`` over Geyer's
    initial positive and monotone sequences of the autocorrelations ``rho_t`` (Vehtari et al.
    2021, Section 3.2; Geyer 1992), exactly as ArviZ 0.x computes it. Why not ArviZ: it loops
    over quantities in Python, a few milliseconds each, and :func:`rhat_null_limits` needs the
    ESS of every half-chain of every quantity (``2 x 8 x d`` of them at ``d`` parameters: seconds
    per check, once per NUTS pass). Equal to ArviZ's to rounding (``tests/test_mcmc.py``).
    """
    from scipy.fft import irfft, next_fast_len, rfft
    from scipy.stats import norm, rankdata

    if method not in ("bulk", "folded"):
        raise ValueError(f"method must be 'bulk' or 'folded', got {method!r}")
    x = np.asarray(x, dtype=np.float64)
    s, c, n = x.shape
    if n < 4:  # ArviZ's least number of draws
        return np.full(s, np.nan)
    half = n // 2
    x = np.concatenate([x[:, :, :half], x[:, :, n - half:]], axis=1)  # split chains
    c, n = 2 * c, half
    flat = x.reshape(s, c * n)
    bad = np.isnan(flat).any(axis=1)
    if method == "folded":
        flat = np.abs(flat - np.median(flat, axis=1, keepdims=True))
    constant = (flat.max(axis=1, initial=-np.inf) - flat.min(axis=1, initial=np.inf)) < np.finfo(float).resolution
    with np.errstate(invalid="ignore", divide="ignore"):
        z = norm.ppf((rankdata(np.where(bad[:, None], 0.0, flat), axis=1) - 0.375) / (c * n + 0.25)).reshape(s, c, n)
        # autocovariances by FFT, as ArviZ's autocov (biased, divided by n)
        centred = z - z.mean(axis=2, keepdims=True)
        f = rfft(centred, n=next_fast_len(2 * n), axis=2)
        acov = irfft(f * np.conjugate(f), n=next_fast_len(2 * n), axis=2)[:, :, :n] / n
        mean_var = acov[:, :, 0].mean(axis=1) * n / (n - 1.0)
        var_plus = mean_var * (n - 1.0) / n + (z.mean(axis=2).var(axis=1, ddof=1) if c > 1 else 0.0)
        rho = 1.0 - (mean_var[:, None] - acov.mean(axis=1)) / var_plus[:, None]  # (s, n): rho_0 = 1
    rho[:, 0] = 1.0
    # Geyer's initial positive sequence: pairs P_j = rho_2j + rho_2j+1 while positive, the loop
    # ArviZ runs over j = 1 .. j_max (t = 2j - 1 < n - 3)
    j_max = max(0, (n - 3) // 2)
    pairs = rho[:, 0:2 * j_max + 1:2] + rho[:, 1:2 * j_max + 2:2]  # P_0 .. P_j_max, (s, j_max + 1)
    nonpositive = pairs <= 0
    first = np.where(nonpositive.any(axis=1), nonpositive.argmax(axis=1), j_max + 1)  # first P_K <= 0
    j_last = np.minimum(first, j_max)  # the last pair the loop computed
    # Geyer's initial monotone sequence: the running minimum of the pairs before the last
    monotone = np.minimum.accumulate(pairs, axis=1)
    before = np.arange(pairs.shape[1])[None, :] < j_last[:, None]
    rows = np.arange(s)
    even = rho[rows, 2 * j_last]
    last = np.where((pairs[rows, j_last] >= 0) | (even > 0), even, 0.0)
    tau = -1.0 + 2.0 * np.where(before, monotone, 0.0).sum(axis=1) + last
    total = c * n
    ess = total / np.maximum(tau, 1.0 / np.log10(total))
    ess = np.where(np.isnan(rho).any(axis=1), np.nan, ess)
    ess = np.where(constant, float(total), ess)
    return np.where(bad, np.nan, ess)


def further_draws(diagnostics: dict[str, Any], draws_per_chain: int, most: int) -> int:
    """Draws per chain of a further pass after a failed check (:func:`convergence_diagnostics`'s
    result on chains of ``draws_per_chain`` draws): at most ``most``.

    Where only the bulk ESS fell short, the pass is sized to what is missing: the ESS of a
    stationary chain grows in proportion to its draws, so ``N (ESS_MARGIN * need / ess - 1)``
    more, but at least a quarter of ``most`` (a pass costs a check, and a few draws add
    little). Where R-hat failed, whose excess does not shrink at a rate one can predict (a
    chain still drifting, or one that has not found a mode), or the ESS is undefined: ``most``.
    """
    need, ess = diagnostics.get("ess_bulk_required"), diagnostics.get("ess_bulk_min")
    if not diagnostics.get("rhat_ok", False) or not need or ess is None or not ess > 0:
        return int(most)
    k = math.ceil(draws_per_chain * (ESS_MARGIN * need / ess - 1.0))
    return int(min(most, max(math.ceil(most / 4), k)))


def import_arviz() -> ModuleType:
    """ArviZ, imported without the notice it prints once a day on import (a FutureWarning about
    its coming refactor, which is ArviZ's news and not something a synthinfer user can act
    on). synthinfer imports ArviZ only through this function; once imported it is cached."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=r"\s*ArviZ is undergoing a major refactor", category=FutureWarning)
        return importlib.import_module("arviz")


def _flat(dataset: Any, names: Sequence[str]) -> np.ndarray:
    return np.concatenate([np.ravel(np.asarray(dataset[v])) for v in names]) if names else np.zeros(0)


def _json_list(values: np.ndarray) -> list[float | None]:
    return [float(v) if math.isfinite(v) else None for v in values]


def _json_number(value: float) -> float | None:
    return float(value) if math.isfinite(value) else None


def convergence_diagnostics(
    idata: Any,
    var_names: Sequence[str] | None = None,
    *,
    rhat_max: float = RHAT_MAX,
    ess_per_chain: float = ESS_BULK_PER_CHAIN,
    warn: bool = True,
    label: str = "NUTS",
    stacklevel: int | None = None,
) -> dict[str, Any]:
    """Split R-hat (rank-normalised) and bulk/tail ESS of the posterior ``var_names`` (ArviZ).

    Parameters
    ----------
    idata : ArviZ ``InferenceData`` with a ``posterior`` group of shape (chain, draw, ...).
    var_names : the posterior variables to check (default: all of them). Every scalar component
        counts; the lists in the result run over the variables in this order, each flattened.
    rhat_max, ess_per_chain : the policy (defaults :data:`RHAT_MAX`, :data:`ESS_BULK_PER_CHAIN`);
        each component's R-hat limit is ``rhat_max`` or, where converged chains would exceed it
        by chance over this many components, their limit (:func:`rhat_null_limits`, at most
        :data:`RHAT_CEILING`; module docstring).
    warn : issue :class:`~synthinfer.errors.ConvergenceWarning` when the policy fails.
    label : the sampler's name in the warning; ``stacklevel`` as for :func:`warnings.warn` (default:
        the first line outside synthinfer, :func:`~synthinfer.errors.user_stacklevel`).

    Returns
    -------
    A JSON-ready dict: ``rhat_max``, ``ess_bulk_min``, ``ess_tail_min``, ``rhat`` and ``ess_bulk``
    (per component), ``ess_bulk_required`` (``ess_per_chain`` times the chains),
    ``rhat_threshold`` (``rhat_max``), ``rhat_limit_max`` (the largest component's limit),
    ``rhat_ok`` (the R-hat part holds), ``ok`` (the policy holds) and ``problems`` (what failed,
    in the warning's words). Undefined values (R-hat of one chain, or of a constant component)
    are None; an undefined R-hat with two or more chains fails the policy.
    """
    az = import_arviz()

    posterior = idata.posterior
    names = list(posterior.data_vars) if var_names is None else list(var_names)
    n_chains = int(posterior.sizes["chain"])
    # a constant component divides 0 by 0 inside ArviZ: its R-hat is NaN, reported below
    with np.errstate(divide="ignore", invalid="ignore"):
        ess_bulk = _flat(az.ess(idata, var_names=names, method="bulk"), names)
        ess_tail = _flat(az.ess(idata, var_names=names, method="tail"), names)
        rhat = _flat(az.rhat(idata, var_names=names), names) if n_chains >= 2 else None
    need = float(ess_per_chain * n_chains)
    limit = None
    if rhat is not None and (rhat_max >= RHAT_CEILING or not names):  # the limit cannot rise above rhat_max
        limit = np.full(rhat.shape, float(rhat_max))
    elif rhat is not None:  # rhat_max, or what converged chains reach by chance over this many quantities
        null = rhat_null_limits(np.concatenate([np.asarray(posterior[v].values, dtype=np.float64).reshape(
            n_chains, posterior.sizes["draw"], -1) for v in names], axis=-1))
        limit = np.clip(null, rhat_max, RHAT_CEILING)
    out = {
        "rhat_max": None if rhat is None else _json_number(np.max(rhat, initial=-np.inf)),
        "ess_bulk_min": _json_number(np.min(ess_bulk, initial=np.inf)),
        "ess_tail_min": _json_number(np.min(ess_tail, initial=np.inf)),
        "rhat": None if rhat is None else _json_list(rhat),
        "ess_bulk": _json_list(ess_bulk),
        "ess_bulk_required": need,
        "rhat_threshold": float(rhat_max),
        "rhat_limit_max": None if limit is None else _json_number(np.max(limit, initial=rhat_max)),
    }
    problems = []
    # "not <=" so that NaN (undefined) fails too
    out["rhat_ok"] = rhat is None or bool(np.all(rhat <= limit))
    if not out["rhat_ok"]:
        bad = ~(rhat <= limit)
        worst = int(np.argmax(np.where(bad, np.nan_to_num(rhat - limit, nan=np.inf), -np.inf)))
        if not math.isfinite(rhat[worst]):
            problems.append("R-hat undefined")
        elif limit[worst] >= RHAT_CEILING:
            problems.append(f"R-hat {rhat[worst]:.4f} > {RHAT_CEILING} (more than converged chains reach, whatever "
                            "their number or autocorrelation)")
        elif limit[worst] > rhat_max:
            problems.append(f"R-hat {rhat[worst]:.4f} > {limit[worst]:.4f} (the limit for converged chains of this "
                            f"autocorrelation over {rhat.size} quantities)")
        else:
            problems.append(f"max R-hat {np.max(rhat):.4f} > {rhat_max}")
    if not np.min(ess_bulk, initial=np.inf) >= need:
        problems.append(f"min bulk ESS {np.min(ess_bulk):.0f} < {need:.0f}")
    out["ok"] = not problems
    out["problems"] = problems
    if warn:
        warn_unconverged(out, label=label, stacklevel=stacklevel)
    return out


def warn_unconverged(diagnostics: dict[str, Any], *, label: str = "NUTS", stacklevel: int | None = None,
                     remedy: str = "Run longer chains (num_samples) or more warm-up before using the draws.") -> None:
    """The :class:`~synthinfer.errors.ConvergenceWarning` of :func:`convergence_diagnostics`'
    result where its policy failed (nothing where it held), for a result computed with
    ``warn=False``; ``remedy``: what the caller can do, in the caller's terms."""
    if diagnostics["ok"]:
        return
    warnings.warn(
        f"{label} diagnostics failed: " + "; ".join(diagnostics["problems"]) + ". " + remedy,
        ConvergenceWarning,
        stacklevel=user_stacklevel() if stacklevel is None else stacklevel + 1,
    )
