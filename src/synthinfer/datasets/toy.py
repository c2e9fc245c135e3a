"""Toy data generators from the papers."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from synthinfer.data.domain import Domain
from synthinfer.errors import ParameterError
from synthinfer.datasets.loaders import Dataset
from synthinfer.privacy.randomness import SeedLike, make_rng


def make_toy_logistic(n: int = 2000, coef: Sequence[float] = (1.0, 0.0), seed: SeedLike = None) -> Dataset:
    """The toy data of NAPSU-MQ (Räisä et al. 2023, Section 5.1).

    ``x1, x2`` are independent fair coins and ``y ~ Bernoulli(sigmoid(coef . x))`` with no
    intercept. Columns are integers in {0, 1}; the Domain has categories ``[0, 1]`` each.
    """
    if n < 1:
        raise ParameterError(f"n must be >= 1, got {n}")
    coef = np.asarray(coef, dtype=float)
    if coef.shape != (2,):
        raise ParameterError(f"coef must have two entries, got {coef.tolist()}")
    rng = make_rng(seed)
    x = rng.integers(0, 2, size=(n, 2))
    p = 1.0 / (1.0 + np.exp(-(x @ coef)))
    y = (rng.random(n) < p).astype(np.int64)
    df = pd.DataFrame({"x1": x[:, 0], "x2": x[:, 1], "y": y})
    return Dataset(df, Domain({"x1": [0, 1], "x2": [0, 1], "y": [0, 1]}))


def make_triangle_square(n: int = 100, seed: SeedLike = None) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Ghalebikesabi et al. (2022), Section 4.1: (real, synthetic) samples of size ``n`` each.

    Real data are uniform on the lower triangle ``{x1 + x2 < 1}`` of the unit square;
    synthetic data are uniform on the whole square. The true importance weight is
    ``w(x) = 2 * 1[x1 + x2 < 1]``.
    """
    rng = make_rng(seed)
    u = rng.random((n, 2))
    flip = u.sum(axis=1) >= 1  # reflect the upper triangle onto the lower one: still uniform
    u[flip] = 1.0 - u[flip]
    s = rng.random((n, 2))
    return pd.DataFrame(u, columns=["x1", "x2"]), pd.DataFrame(s, columns=["x1", "x2"])
