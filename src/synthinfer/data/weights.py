"""Validation of per-row weight vectors attached to a list of datasets."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from synthinfer.errors import SynthinferError


def check_weight_vectors(
    weights: Sequence, datasets: Sequence[pd.DataFrame], error: type[SynthinferError]
) -> list[np.ndarray]:
    """One finite, non-negative float vector per dataset, of its length; else ``error``."""
    if len(weights) != len(datasets):
        raise error(f"got {len(weights)} weight vectors for {len(datasets)} datasets")
    out = []
    for i, (w, d) in enumerate(zip(weights, datasets, strict=True)):
        w = np.asarray(w, dtype=float)
        if w.shape != (len(d),):
            raise error(f"weights[{i}] has shape {w.shape}; dataset {i} has {len(d)} rows")
        if not np.all(np.isfinite(w)) or np.any(w < 0):
            raise error(f"weights[{i}] must be finite and non-negative")
        out.append(w)
    return out
