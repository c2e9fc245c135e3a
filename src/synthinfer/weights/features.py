"""Public feature maps for weight estimation: every row to a vector of L2 norm at most 1.

Ghalebikesabi et al. (2022), Section 3.3, scale the data to ``[0, 1]^d`` and append the
constant 1 for the intercept; the sensitivity of regularised logistic regression (Chaudhuri et
al. 2011, Cor. 8) is stated for ``||x||_2 <= 1``. :class:`FeatureMap` does both steps:

1. each column of a public :class:`~synthinfer.data.Domain` to ``[0, 1]``: a continuous column
   with its public bounds, ``(x - lower) / (upper - lower)``; a categorical column one-hot over
   its public categories with the first category as reference (values in {0, 1}); a discretised
   column takes numbers into their bin by its public edges; values are read as
   :func:`~synthinfer.data.encode` reads them (a declared ``"<missing>"`` category takes the
   missing values, text matches numeric categories by its form);
2. the constant 1 is appended (the intercept of Section 3.3, penalised like every other
   coefficient, as Chaudhuri et al.'s strong-convexity argument requires), and the whole vector
   is divided by ``sqrt(d)`` (``d`` counting the intercept) so that ``||x||_2 <= 1``.

Bounds never come from the private data: a value outside its public bounds raises
:class:`~synthinfer.errors.OutOfDomainError` unless ``clip=True`` is asked for explicitly.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import scipy.sparse

from synthinfer.data import Continuous, Domain, DomainSpec
from synthinfer.data.encoding import encode_column
from synthinfer.errors import DomainError, EmptyDataError, MissingValueError, UnknownColumnError

#: The public description a feature map takes: a Domain or its short spelling
#: ``{"age": (10, 100), "sex": ["F", "M"]}`` (see :meth:`Domain.from_spec`).
Bounds = DomainSpec


class FeatureMap:
    """Map tables to ``(n, d)`` arrays with rows in the unit L2 ball (see module docstring).

    Parameters
    ----------
    bounds : a :class:`~synthinfer.data.Domain`, or its short spelling: a dict ``column ->
        (lower, upper)`` for continuous columns and ``column -> [categories]`` for categorical
        ones. Only these columns are used, in this order.
    clip : clip numeric values to their bounds instead of raising. Clipping is a public
        transformation and keeps the guarantees; it is off by default so that wrong bounds
        are noticed.
    intercept : append the constant 1 (Section 3.3).
    """

    def __init__(self, bounds: Bounds, *, clip: bool = False, intercept: bool = True):
        #: The public Domain the features are a view of.
        self.domain: Domain = Domain.from_spec(bounds)
        self.clip = bool(clip)
        self.intercept = bool(intercept)
        names = []
        for c in self.domain.columns:
            if isinstance(c, Continuous):
                names.append(c.name)
            else:
                names.extend(f"{c.name}={v}" for v in c.categories[1:])
        if intercept:
            names.append("(intercept)")
        if not names:
            raise DomainError("the feature map has no features (single-category columns only and no intercept)")
        #: Names of the output coordinates (before the 1/sqrt(d) scaling).
        self.feature_names: tuple[str, ...] = tuple(names)

    @classmethod
    def from_domain(cls, domain: Domain, *, clip: bool = False, intercept: bool = True) -> FeatureMap:
        """The feature map of a public Domain (the same as ``FeatureMap(domain, ...)``)."""
        if not isinstance(domain, Domain):
            raise DomainError(f"expected a synthinfer Domain, got {type(domain).__name__}")
        return cls(domain, clip=clip, intercept=intercept)

    @property
    def dim(self) -> int:
        """``d``: the number of output coordinates, intercept included."""
        return len(self.feature_names)

    @property
    def max_coordinate(self) -> float:
        """Largest possible absolute coordinate, ``1 / sqrt(d)``."""
        return 1.0 / math.sqrt(self.dim)

    def unit_cube(self, df: pd.DataFrame, *, sparse: bool = False) -> np.ndarray | scipy.sparse.csr_array:
        """The ``[0, 1]^d`` features (intercept included) before scaling to the unit ball; with
        ``sparse=True`` a CSR array (a one-hot row has one entry per column: on tables of
        millions of rows the dense array is most of the memory a fit takes)."""
        if not isinstance(df, pd.DataFrame):
            raise DomainError(f"expected a pandas DataFrame, got {type(df).__name__}")
        if len(df) == 0:
            raise EmptyDataError("the table has no rows")
        n = len(df)
        rows, cols, vals, offset = [], [], [], 0  # the nonzero entries, block by block
        for c in self.domain.columns:
            if c.name not in df.columns:
                raise UnknownColumnError(f"column {c.name!r} is missing from the table (columns: {list(df.columns)})")
            col = df[c.name]
            if isinstance(c, Continuous):
                if col.isna().any():
                    raise MissingValueError(f"column {c.name!r} has {int(col.isna().sum())} missing values")
                rows.append(np.arange(n))
                cols.append(np.full(n, offset))
                vals.append(c.to_unit(c.numbers(col, clip=self.clip)))
                offset += 1
                continue
            if (self.clip and c.binning is not None and col.dtype.name != "category"
                    and pd.api.types.is_numeric_dtype(col.dtype)):
                col = col.clip(c.binning.lower, c.binning.upper)  # missing values stay missing
            codes = encode_column(col, c)  # encode()'s rules, a declared MISSING category included
            hot = np.nonzero(codes > 0)[0]  # the first category is the reference: no coordinate
            rows.append(hot)
            cols.append(offset + codes[hot] - 1)
            vals.append(np.ones(hot.size))
            offset += c.size - 1
        if self.intercept:
            rows.append(np.arange(n))
            cols.append(np.full(n, offset))
            vals.append(np.ones(n))
        rows, cols, vals = np.concatenate(rows), np.concatenate(cols), np.concatenate(vals)
        if sparse:
            return scipy.sparse.csr_array((vals, (rows, cols)), shape=(n, self.dim))
        out = np.zeros((n, self.dim))
        out[rows, cols] = vals
        return out

    def transform(self, df: pd.DataFrame, *, sparse: bool = False) -> np.ndarray | scipy.sparse.csr_array:
        """Features in the unit L2 ball: the ``[0, 1]^d`` vector divided by ``sqrt(d)`` (a CSR
        array with ``sparse=True``)."""
        return self.unit_cube(df, sparse=sparse) / math.sqrt(self.dim)
