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
"""

from __future__ import annotations

import importlib
import math
import warnings
from collections.abc import Sequence
from types import ModuleType
from typing import Any

import numpy as np

from synthinfer.errors import ConvergenceWarning

#: Largest acceptable rank-normalised split R-hat (Vehtari et al. 2021).
RHAT_MAX = 1.01
#: Smallest acceptable bulk ESS per chain (Vehtari et al. 2021: 400 over four chains).
ESS_BULK_PER_CHAIN = 100.0


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
    stacklevel: int = 2,
) -> dict[str, Any]:
    """Split R-hat (rank-normalised) and bulk/tail ESS of the posterior ``var_names`` (ArviZ).

    Parameters
    ----------
    idata : ArviZ ``InferenceData`` with a ``posterior`` group of shape (chain, draw, ...).
    var_names : the posterior variables to check (default: all of them). Every scalar component
        counts; the lists in the result run over the variables in this order, each flattened.
    rhat_max, ess_per_chain : the policy (defaults :data:`RHAT_MAX`, :data:`ESS_BULK_PER_CHAIN`).
    warn : issue :class:`~synthinfer.errors.ConvergenceWarning` when the policy fails.
    label : the sampler's name in the warning; ``stacklevel`` as for :func:`warnings.warn`.

    Returns
    -------
    A JSON-ready dict: ``rhat_max``, ``ess_bulk_min``, ``ess_tail_min``, ``rhat`` and ``ess_bulk``
    (per component), ``ess_bulk_required`` (``ess_per_chain`` times the chains),
    ``rhat_threshold`` and ``ok`` (the policy holds). Undefined values (R-hat of one chain, or of
    a constant component) are None; an undefined R-hat with two or more chains fails the policy.
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
    out = {
        "rhat_max": None if rhat is None else _json_number(np.max(rhat, initial=-np.inf)),
        "ess_bulk_min": _json_number(np.min(ess_bulk, initial=np.inf)),
        "ess_tail_min": _json_number(np.min(ess_tail, initial=np.inf)),
        "rhat": None if rhat is None else _json_list(rhat),
        "ess_bulk": _json_list(ess_bulk),
        "ess_bulk_required": need,
        "rhat_threshold": float(rhat_max),
    }
    problems = []
    # "not <=" so that NaN (undefined) fails too
    if rhat is not None and not np.max(rhat, initial=-np.inf) <= rhat_max:
        worst = np.max(rhat)
        problems.append(f"max R-hat {worst:.4f} > {rhat_max}" if math.isfinite(worst) else "R-hat undefined")
    if not np.min(ess_bulk, initial=np.inf) >= need:
        problems.append(f"min bulk ESS {np.min(ess_bulk):.0f} < {need:.0f}")
    out["ok"] = not problems
    if problems and warn:
        warnings.warn(
            f"{label} diagnostics failed: " + "; ".join(problems) + ". Run longer chains (num_samples) or more "
            "warm-up before using the draws.",
            ConvergenceWarning,
            stacklevel=stacklevel,
        )
    return out
