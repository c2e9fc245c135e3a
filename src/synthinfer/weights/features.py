"""Public feature maps for weight estimation: every row to a vector of L2 norm at most 1.

Ghalebikesabi et al. (2022), Section 3.3, scale the data to ``[0, 1]^d`` and append the
constant 1 for the intercept; the sensitivity of regularised logistic regression (Chaudhuri et
al. 2011, Cor. 8) is stated for ``||x||_2 <= 1``. :class:`FeatureMap` does both steps:

1. each column to ``[0, 1]`` with *public* information only: numeric columns with user-given
   bounds ``(lower, upper)`` (``(x - lower) / (upper - lower)``), categorical columns with a
   public category list, one-hot with the first category as reference (values in {0, 1});
2. the constant 1 is appended (the intercept of Section 3.3, penalised like every other
   coefficient, as Chaudhuri et al.'s strong-convexity argument requires), and the whole vector
   is divided by ``sqrt(d)`` (``d`` counting the intercept) so that ``||x||_2 <= 1``.

Bounds never come from the private data: a value outside its public bounds raises
:class:`~synthinfer.errors.OutOfDomainError` unless ``clip=True`` is asked for explicitly.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from synthinfer.data.domain import Domain
from synthinfer.errors import (
    DomainError,
    EmptyDataError,
    MissingValueError,
    NonFiniteError,
    OutOfDomainError,
    UnknownColumnError,
)

#: What a column's public description may be: numeric bounds or a category list.
ColumnSpec = tuple[float, float] | Sequence[Any]
Bounds = Mapping[str, ColumnSpec] | Domain


def _is_bounds(spec: Any) -> bool:
    return (
        isinstance(spec, tuple)
        and len(spec) == 2
        and all(isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, bool) for v in spec)
    )


def bounds_from_domain(domain: Domain) -> dict[str, ColumnSpec]:
    """Column specs of a :class:`Domain`: every column categorical with its public categories
    (a discretised column's categories are its bins; numbers are binned by its public edges)."""
    return {c.name: list(c.categories) for c in domain.columns}


class FeatureMap:
    """Map tables to ``(n, d)`` arrays with rows in the unit L2 ball (see module docstring).

    Parameters
    ----------
    bounds : dict ``column -> (lower, upper)`` for numeric columns or ``column -> [categories]``
        for categorical ones, or a :class:`~synthinfer.data.Domain` (all categorical; numbers in
        a discretised column are binned by its public edges). Only these columns are used, in
        this order.
    clip : clip numeric values to their bounds instead of raising. Clipping is a public
        transformation and keeps the guarantees; it is off by default so that wrong bounds
        are noticed.
    intercept : append the constant 1 (Section 3.3).
    """

    def __init__(self, bounds: Bounds, *, clip: bool = False, intercept: bool = True):
        specs = bounds_from_domain(bounds) if isinstance(bounds, Domain) else dict(bounds)
        # numbers in a Domain's discretised column are binned by its public edges
        self._binnings = {c.name: c.binning for c in bounds.columns if c.binning is not None} if isinstance(
            bounds, Domain) else {}
        if not specs:
            raise DomainError("bounds must describe at least one column")
        self.specs: dict[str, ColumnSpec] = {}
        for name, spec in specs.items():
            if _is_bounds(spec):
                lo, hi = float(spec[0]), float(spec[1])
                if not (math.isfinite(lo) and math.isfinite(hi) and lo < hi):
                    raise DomainError(f"column {name!r}: bounds must be finite with lower < upper, got {spec!r}")
                self.specs[str(name)] = (lo, hi)
            elif isinstance(spec, (list, tuple, pd.Index, np.ndarray)) and len(spec) >= 1:
                cats = list(spec)
                if len(set(map(repr, cats))) != len(cats):
                    raise DomainError(f"column {name!r}: categories repeat: {cats!r}")
                self.specs[str(name)] = cats
            else:
                raise DomainError(
                    f"column {name!r}: give public bounds (lower, upper) or a list of categories, got {spec!r}"
                )
        self.clip = bool(clip)
        self.intercept = bool(intercept)
        names = []
        for name, spec in self.specs.items():
            if isinstance(spec, tuple):
                names.append(name)
            else:
                names.extend(f"{name}={c}" for c in spec[1:])
        if intercept:
            names.append("(intercept)")
        if not names:
            raise DomainError("the feature map has no features (single-category columns only and no intercept)")
        #: Names of the output coordinates (before the 1/sqrt(d) scaling).
        self.feature_names: tuple[str, ...] = tuple(names)

    @property
    def dim(self) -> int:
        """``d``: the number of output coordinates, intercept included."""
        return len(self.feature_names)

    @property
    def max_coordinate(self) -> float:
        """Largest possible absolute coordinate, ``1 / sqrt(d)``."""
        return 1.0 / math.sqrt(self.dim)

    def unit_cube(self, df: pd.DataFrame) -> np.ndarray:
        """The ``[0, 1]^d`` features (intercept included) before scaling to the unit ball."""
        if not isinstance(df, pd.DataFrame):
            raise DomainError(f"expected a pandas DataFrame, got {type(df).__name__}")
        if len(df) == 0:
            raise EmptyDataError("the table has no rows")
        blocks = []
        for name, spec in self.specs.items():
            if name not in df.columns:
                raise UnknownColumnError(f"column {name!r} is missing from the table (columns: {list(df.columns)})")
            col = df[name]
            if col.isna().any():
                raise MissingValueError(f"column {name!r} has {int(col.isna().sum())} missing values")
            binning = self._binnings.get(name)
            if isinstance(spec, tuple):
                lo, hi = spec
                x = self._numbers(name, col, lo, hi)
                blocks.append(((x - lo) / (hi - lo))[:, None])
            else:
                if binning is not None and col.dtype.name != "category" and pd.api.types.is_numeric_dtype(col.dtype):
                    codes = binning.codes(self._numbers(name, col, binning.lower, binning.upper))
                else:
                    codes = pd.Index(spec).get_indexer(col.astype(object) if col.dtype.name == "category" else col)
                if (codes < 0).any():
                    bad_vals = sorted({repr(v) for v in col[codes < 0].unique()})[:5]
                    raise OutOfDomainError(f"column {name!r}: values {', '.join(bad_vals)} are not among its public categories")
                onehot = np.zeros((len(col), len(spec) - 1))
                rows = np.nonzero(codes > 0)[0]
                onehot[rows, codes[rows] - 1] = 1.0
                blocks.append(onehot)
        if self.intercept:
            blocks.append(np.ones((len(df), 1)))
        return np.hstack(blocks)

    def _numbers(self, name: str, col: pd.Series, lo: float, hi: float) -> np.ndarray:
        """A numeric column as floats within its public bounds (clipped if asked, else checked)."""
        try:
            x = pd.to_numeric(col, errors="raise").to_numpy(dtype=float)
        except (ValueError, TypeError) as exc:
            raise DomainError(f"column {name!r} has bounds ({lo:g}, {hi:g}) but non-numeric values") from exc
        if not np.all(np.isfinite(x)):
            raise NonFiniteError(f"column {name!r} has infinite values")
        if self.clip:
            return np.clip(x, lo, hi)
        bad = (x < lo) | (x > hi)
        if bad.any():
            raise OutOfDomainError(
                f"column {name!r}: {int(bad.sum())} values outside the public bounds [{lo:g}, {hi:g}] "
                "(fix the bounds, or pass clip=True)"
            )
        return x

    def transform(self, df: pd.DataFrame) -> np.ndarray:
        """Features in the unit L2 ball: the ``[0, 1]^d`` vector divided by ``sqrt(d)``."""
        return self.unit_cube(df) / math.sqrt(self.dim)
