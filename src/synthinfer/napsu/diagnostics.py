"""Posterior containers and MCMC diagnostics of NAPSU-MQ's fits."""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np

from synthinfer.errors import ConvergenceWarning, ParameterError


def to_inference_data(draws: np.ndarray, *, sample_stats: dict[str, np.ndarray] | None = None, attrs: dict | None = None):
    """ArviZ ``InferenceData`` with posterior variable ``theta`` of shape ``(chain, draw, d)``."""
    import arviz as az

    draws = np.asarray(draws, dtype=np.float64)
    if draws.ndim != 3:
        raise ParameterError(f"draws must be (chains, draws, d), got {draws.shape}")
    return az.from_dict(
        posterior={"theta": draws},
        sample_stats=sample_stats or None,
        dims={"theta": ["query"]},
        coords={"query": np.arange(draws.shape[2])},
        attrs=attrs or {},
    )


def convergence_diagnostics(posterior, *, ess_per_chain: float = 100.0, rhat_max: float = 1.01) -> dict[str, Any]:
    """Split R-hat (rank-normalised) and bulk/tail ESS of every theta component (ArviZ).

    Warns with :class:`ConvergenceWarning` when any R-hat exceeds ``rhat_max`` (1.01, Vehtari
    et al. 2021) or any bulk ESS is below ``ess_per_chain`` times the number of chains.
    """
    import arviz as az

    rhat = np.asarray(az.rhat(posterior, var_names=["theta"])["theta"])
    ess_bulk = np.asarray(az.ess(posterior, var_names=["theta"], method="bulk")["theta"])
    ess_tail = np.asarray(az.ess(posterior, var_names=["theta"], method="tail")["theta"])
    n_chains = int(posterior.posterior.sizes["chain"])
    need = ess_per_chain * n_chains
    out = {
        "rhat_max": float(np.max(rhat)),
        "ess_bulk_min": float(np.min(ess_bulk)),
        "ess_tail_min": float(np.min(ess_tail)),
        "rhat": rhat.tolist(),
        "ess_bulk": ess_bulk.tolist(),
        "ess_bulk_required": need,
        "rhat_threshold": rhat_max,
    }
    problems = []
    if not out["rhat_max"] <= rhat_max:
        problems.append(f"max R-hat {out['rhat_max']:.4f} > {rhat_max}")
    if not out["ess_bulk_min"] >= need:
        problems.append(f"min bulk ESS {out['ess_bulk_min']:.0f} < {need:.0f}")
    out["ok"] = not problems
    if problems:
        warnings.warn(
            "NUTS diagnostics failed: " + "; ".join(problems) + ". Run longer chains (num_samples) "
            "or more warmup before trusting the synthetic data.",
            ConvergenceWarning,
            stacklevel=2,
        )
    return out
