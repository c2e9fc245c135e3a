"""Mixed tabular data <-> a numeric feature matrix in [0, 1]^d, using public bounds only.

Neural generators (DP-GAN, DP-CGAN) and discriminator-based importance weights work on real
vectors. Continuous columns are scaled to [0, 1] with *public* bounds ``(lower, upper)`` given
by the user, never with the min/max of the private data (those would leak the extreme rows;
Ghalebikesabi et al. 2022, Section 4, scale every feature to [0, 1] the same way).
Categorical columns become one-hot blocks over a *public* category list.

A schema is given as a synthinfer :class:`~synthinfer.data.Domain` (every column categorical;
discretised columns take their bin codes) or as a mapping ``name -> spec`` where a spec is

- a ``(lower, upper)`` **tuple** of two numbers: a continuous column with public bounds;
- a **list** of categories, or a :class:`~synthinfer.data.Column`: a categorical column.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import pandas as pd

from synthinfer.data import Column, Domain, encode
from synthinfer.errors import (
    ArgumentTypeError,
    DomainError,
    EmptyDataError,
    MissingValueError,
    NonFiniteError,
    OutOfDomainError,
    UnknownColumnError,
)


SchemaLike = Domain | Mapping[str, object]


@dataclass(frozen=True)
class Continuous:
    """A continuous column with public bounds; scaled as ``(x - lower) / (upper - lower)``."""

    name: str
    lower: float
    upper: float

    def __post_init__(self) -> None:
        lo, hi = self.lower, self.upper
        ok = all(isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, bool) for v in (lo, hi))
        if not ok or not (math.isfinite(lo) and math.isfinite(hi) and lo < hi):
            raise DomainError(
                f"column {self.name!r}: public bounds must be finite numbers with lower < upper, "
                f"got ({lo!r}, {hi!r})"
            )
        object.__setattr__(self, "lower", float(lo))
        object.__setattr__(self, "upper", float(hi))


@dataclass(frozen=True)
class TabularSchema:
    """Ordered columns, each :class:`Continuous` or a categorical :class:`~synthinfer.data.Column`.

    The feature vector is the concatenation, in column order, of one scaled value per
    continuous column and one one-hot block per categorical column; ``blocks`` gives each
    column's ``(start, stop)`` slice.
    """

    columns: tuple[Continuous | Column, ...]

    @classmethod
    def from_spec(cls, spec: SchemaLike) -> TabularSchema:
        """Build from a :class:`Domain` or a ``name -> (lower, upper) | categories | Column`` mapping."""
        if isinstance(spec, TabularSchema):
            return spec
        if isinstance(spec, Domain):
            return cls(tuple(spec.columns))
        if not isinstance(spec, Mapping) or not spec:
            raise DomainError(
                "schema must be a synthinfer Domain or a non-empty dict mapping each column to "
                f"(lower, upper) bounds or a list of categories, got {type(spec).__name__}"
            )
        cols: list[Continuous | Column] = []
        for name, s in spec.items():
            name = str(name)
            if isinstance(s, Column):
                cols.append(s if s.name == name else Column(name, s.categories, s.binning))
            elif isinstance(s, Continuous):
                cols.append(Continuous(name, s.lower, s.upper))
            elif isinstance(s, tuple):
                if len(s) != 2:
                    raise DomainError(
                        f"column {name!r}: a tuple means public (lower, upper) bounds and needs 2 "
                        f"numbers, got {s!r}; give categories as a list"
                    )
                cols.append(Continuous(name, *s))
            elif isinstance(s, (list, np.ndarray, pd.Index)):
                cols.append(Column(name, tuple(s)))
            else:
                raise DomainError(
                    f"column {name!r}: expected (lower, upper) bounds as a tuple or categories as "
                    f"a list, got {type(s).__name__}"
                )
        # Domain() validates names (non-empty, unique) for the categorical part.
        names = [c.name for c in cols]
        dup = sorted({n for n in names if names.count(n) > 1})
        if dup:
            raise DomainError(f"duplicate columns in schema: {dup}")
        return cls(tuple(cols))

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(c.name for c in self.columns)

    @property
    def widths(self) -> tuple[int, ...]:
        return tuple(1 if isinstance(c, Continuous) else c.size for c in self.columns)

    @property
    def n_features(self) -> int:
        return int(sum(self.widths))

    @property
    def blocks(self) -> tuple[tuple[int, int], ...]:
        out, start = [], 0
        for w in self.widths:
            out.append((start, start + w))
            start += w
        return tuple(out)

    def __getitem__(self, name: str) -> Continuous | Column:
        for c in self.columns:
            if c.name == name:
                return c
        raise UnknownColumnError(f"column {name!r} is not in the schema (columns: {list(self.names)})")

    def without(self, name: str) -> TabularSchema:
        self[name]
        return TabularSchema(tuple(c for c in self.columns if c.name != name))

    def transform(self, df: pd.DataFrame) -> np.ndarray:
        """Encode ``df`` to an ``(n, n_features)`` float array in [0, 1].

        Raises :class:`OutOfDomainError` for numbers outside the public bounds (they are not
        clipped silently; clip explicitly with :func:`synthinfer.data.clip_to_bounds`) or
        categories outside the public list, :class:`MissingValueError` for missing values,
        :class:`NonFiniteError` for infinite numbers.
        """
        if not isinstance(df, pd.DataFrame):
            raise ArgumentTypeError(f"expected a pandas DataFrame, got {type(df).__name__}")
        lacking = [n for n in self.names if n not in df.columns]
        if lacking:
            raise UnknownColumnError(f"the table lacks schema column(s) {lacking}")
        if len(df) == 0:
            raise EmptyDataError("the table has no rows")
        parts = []
        for c in self.columns:
            if isinstance(c, Continuous):
                parts.append(self._scale(df[c.name], c)[:, None])
            else:
                codes = encode(df[[c.name]], Domain([c]))[:, 0]
                parts.append(np.eye(c.size)[codes])
        return np.concatenate(parts, axis=1)

    @staticmethod
    def _scale(s: pd.Series, c: Continuous) -> np.ndarray:
        if not pd.api.types.is_numeric_dtype(s.dtype) or pd.api.types.is_bool_dtype(s.dtype):
            raise DomainError(f"column {c.name!r} is continuous in the schema but holds {s.dtype} values")
        x = s.to_numpy(dtype=float, na_value=np.nan)
        if np.isnan(x).any():
            raise MissingValueError(f"column {c.name!r} has {int(np.isnan(x).sum())} missing values")
        if not np.isfinite(x).all():
            raise NonFiniteError(f"column {c.name!r} has non-finite values")
        out = (x < c.lower) | (x > c.upper)
        if out.any():
            raise OutOfDomainError(
                f"column {c.name!r}: {int(out.sum())} row(s) lie outside the public bounds "
                f"[{c.lower:g}, {c.upper:g}], e.g. {x[out][0]:g}; widen the bounds or clip "
                "explicitly with synthinfer.data.clip_to_bounds()"
            )
        return (x - c.lower) / (c.upper - c.lower)

    def inverse_transform(self, scaled: np.ndarray, codes: np.ndarray) -> pd.DataFrame:
        """Build a DataFrame from scaled continuous values and categorical codes.

        ``scaled`` is ``(n, n_continuous)`` in [0, 1] and ``codes`` ``(n, n_categorical)``
        integer codes, both in schema order of their kind.
        """
        data, jc, jk = {}, 0, 0
        for c in self.columns:
            if isinstance(c, Continuous):
                data[c.name] = c.lower + np.clip(scaled[:, jc], 0.0, 1.0) * (c.upper - c.lower)
                jc += 1
            else:
                data[c.name] = pd.Categorical.from_codes(codes[:, jk], categories=list(c.categories))
                jk += 1
        return pd.DataFrame(data)

    def to_dict(self) -> dict:
        """JSON-ready description (public information only)."""
        out = []
        for c in self.columns:
            if isinstance(c, Continuous):
                out.append({"name": c.name, "bounds": [c.lower, c.upper]})
            else:
                out.append(Domain([c]).to_dict()["columns"][0])
        return {"columns": out}
