"""Posterior container of NAPSU-MQ's fits (convergence checks: :mod:`synthinfer.mcmc`)."""

from __future__ import annotations

import numpy as np

from synthinfer.errors import ParameterError


def to_inference_data(draws: np.ndarray, *, sample_stats: dict[str, np.ndarray] | None = None, attrs: dict | None = None):
    """ArviZ ``InferenceData`` with posterior variable ``theta`` of shape ``(chain, draw, d)``."""
    from synthinfer.mcmc import import_arviz

    az = import_arviz()

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
