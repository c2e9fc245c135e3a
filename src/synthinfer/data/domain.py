"""The public Domain: ordered columns, each with an ordered finite set of categories.

A Domain is *public knowledge*. It must come from the data holder (in code or a JSON file),
never be read off the private data: the categories present in a table leak which rare values
occur. :meth:`Domain.from_dataframe` exists only as an explicitly non-private convenience.
"""

from __future__ import annotations

import json
import math
import os
import warnings
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from synthinfer.errors import (
    DomainError,
    DuplicateColumnError,
    NonPrivateWarning,
    UnknownColumnError,
)


@dataclass(frozen=True)
class Binning:
    """How a continuous column was discretised into the categories of a Domain column.

    ``edges`` has ``k + 1`` increasing finite values for ``k`` bins; bin ``i`` is
    ``[edges[i], edges[i+1])`` except the last, which is closed on both sides. ``midpoints``
    let an analyst map bin codes back to numbers (NAPSU-MQ, Räisä et al. 2023, Supplement F).
    """

    edges: tuple[float, ...]

    def __post_init__(self) -> None:
        e = np.asarray(self.edges, dtype=float)
        if e.ndim != 1 or e.size < 2:
            raise DomainError(f"bin edges need at least two values, got {self.edges!r}")
        if not np.all(np.isfinite(e)):
            raise DomainError(f"bin edges must be finite, got {self.edges!r}")
        if not np.all(np.diff(e) > 0):
            raise DomainError(f"bin edges must be strictly increasing, got {self.edges!r}")
        object.__setattr__(self, "edges", tuple(float(x) for x in e))

    @classmethod
    def uniform(cls, lower: float, upper: float, bins: int) -> Binning:
        """``bins`` equal-width bins over the public bounds ``[lower, upper]``."""
        if not (isinstance(bins, (int, np.integer)) and bins >= 1):
            raise DomainError(f"bins must be a positive integer, got {bins!r}")
        if not (math.isfinite(lower) and math.isfinite(upper) and lower < upper):
            raise DomainError(f"bounds must be finite with lower < upper, got [{lower}, {upper}]")
        return cls(tuple(np.linspace(lower, upper, int(bins) + 1)))

    @property
    def n_bins(self) -> int:
        return len(self.edges) - 1

    @property
    def lower(self) -> float:
        return self.edges[0]

    @property
    def upper(self) -> float:
        return self.edges[-1]

    @property
    def midpoints(self) -> np.ndarray:
        e = np.asarray(self.edges)
        return (e[:-1] + e[1:]) / 2.0

    def codes(self, x: np.ndarray) -> np.ndarray:
        """Bin index of each value in ``[lower, upper]`` (bin ``i`` is ``[e_i, e_{i+1})``, the
        last closed); the caller checks the range and handles missing values."""
        e = np.asarray(self.edges)
        return np.clip(np.searchsorted(e, np.asarray(x, dtype=float), side="right") - 1, 0, self.n_bins - 1)

    def labels(self) -> list[str]:
        """Interval labels such as ``"[17, 31.6)"``, used as category names."""
        e = self.edges
        out = []
        for i in range(self.n_bins):
            close = "]" if i == self.n_bins - 1 else ")"
            out.append(f"[{_fmt(e[i])}, {_fmt(e[i + 1])}{close}")
        return out


def _fmt(x: float) -> str:
    return f"{x:.6g}"


@dataclass(frozen=True)
class Column:
    """One Domain column: a name, its ordered categories and, if discretised, its Binning."""

    name: str
    categories: tuple[Any, ...]
    binning: Binning | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise DomainError(f"column names must be non-empty strings, got {self.name!r}")
        cats = tuple(self.categories)
        if len(cats) < 1:
            raise DomainError(f"column {self.name!r} has no categories")
        seen: set = set()
        for c in cats:
            if c is None or (isinstance(c, float) and math.isnan(c)):
                raise DomainError(
                    f"column {self.name!r}: missing values cannot be a category; use "
                    "missing='category' when encoding instead"
                )
            if c in seen:
                raise DomainError(f"column {self.name!r} lists category {c!r} twice")
            seen.add(c)
        object.__setattr__(self, "categories", cats)
        # A discretised column has one category per bin, plus MISSING last when missing values
        # are encoded as a category (with_missing_category).
        if self.binning is not None and self.binning.n_bins != len(cats) - (cats[-1] == MISSING):
            raise DomainError(
                f"column {self.name!r}: {len(cats)} categories but {self.binning.n_bins} bins"
            )

    @property
    def size(self) -> int:
        return len(self.categories)


#: Category added to a column's list for missing values (``encode(..., missing="category")``).
MISSING = "<missing>"

def _numbers(name: str, key: str, value: Any) -> tuple[float, ...]:
    """A Domain description's list of numbers (JSON numbers only: no strings, no booleans)."""
    if isinstance(value, (str, Mapping)) or not isinstance(value, Sequence) or not all(
        isinstance(v, (int, float)) and not isinstance(v, bool) for v in value
    ):
        raise DomainError(f"Domain column {name!r}: {key!r} must be a list of numbers, got {value!r}")
    return tuple(float(v) for v in value)


#: The entries a column of a Domain description may have (see :meth:`Domain.from_json`).
_COLUMN_KEYS = frozenset({"name", "categories", "bin_edges", "bounds", "bins"})


@dataclass(frozen=True)
class Domain:
    """Ordered columns with ordered finite category lists (public knowledge).

    Examples
    --------
    >>> d = Domain({"sex": ["Female", "Male"], "income": ["<=50K", ">50K"]})
    >>> d.shape, d.size
    ((2, 2), 4)
    """

    columns: tuple[Column, ...] = field(default=())

    def __init__(self, columns: Mapping[str, Sequence[Any]] | Iterable[Column]) -> None:
        if isinstance(columns, Mapping):
            cols = tuple(
                c if isinstance(c, Column) else Column(str(name), tuple(c))
                for name, c in columns.items()
            )
        else:
            cols = tuple(columns)
        for c in cols:
            if not isinstance(c, Column):
                raise DomainError(f"expected Column objects, got {type(c).__name__}")
        names = [c.name for c in cols]
        dup = sorted({n for n in names if names.count(n) > 1})
        if dup:
            raise DuplicateColumnError(f"duplicate column names in Domain: {dup}")
        if not cols:
            raise DomainError("a Domain needs at least one column")
        object.__setattr__(self, "columns", cols)

    # -- basic accessors -------------------------------------------------------------------
    @property
    def names(self) -> tuple[str, ...]:
        return tuple(c.name for c in self.columns)

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(c.size for c in self.columns)

    @property
    def size(self) -> int:
        """Number of cells of the full contingency table (product of column sizes)."""
        return int(math.prod(self.shape))

    def __len__(self) -> int:
        return len(self.columns)

    def __iter__(self):
        return iter(self.names)

    def __contains__(self, name: object) -> bool:
        return name in self.names

    def __getitem__(self, name: str) -> Column:
        for c in self.columns:
            if c.name == name:
                return c
        raise UnknownColumnError(f"column {name!r} is not in the Domain (columns: {list(self.names)})")

    def index(self, name: str) -> int:
        try:
            return self.names.index(name)
        except ValueError:
            raise UnknownColumnError(
                f"column {name!r} is not in the Domain (columns: {list(self.names)})"
            ) from None

    def check_columns(self, names: Iterable[str]) -> tuple[str, ...]:
        """Validate a tuple of column names: known and not repeated."""
        names = tuple(names)
        for n in names:
            self.index(n)
        dup = sorted({n for n in names if names.count(n) > 1})
        if dup:
            raise DuplicateColumnError(f"columns repeated in {names}: {dup}")
        return names

    def project(self, names: Iterable[str]) -> Domain:
        """The Domain restricted to ``names`` (in the order given)."""
        names = self.check_columns(names)
        return Domain([self[n] for n in names])

    def midpoints(self, name: str) -> np.ndarray:
        """Bin midpoints of a discretised column (raises for a categorical one)."""
        col = self[name]
        if col.binning is None:
            raise DomainError(f"column {name!r} was not discretised from numbers; it has no midpoints")
        return col.binning.midpoints

    # -- construction helpers --------------------------------------------------------------
    @classmethod
    def from_dataframe(cls, df, columns: Sequence[str] | None = None) -> Domain:
        """Read categories off a table. **Not differentially private.**

        The categories present in private data are themselves private (a rare value reveals
        a person). Use this only on public data, or to draft a Domain that you then review.
        """
        warnings.warn(
            "Domain.from_dataframe reads the category sets from the data itself; this is NOT "
            "differentially private. Supply the Domain from public knowledge for a real release.",
            NonPrivateWarning,
            stacklevel=2,
        )
        cols = list(df.columns if columns is None else columns)
        out = []
        for name in cols:
            values = df[name].dropna().unique().tolist()
            try:
                values = sorted(values)
            except TypeError:
                values = sorted(values, key=str)
            out.append(Column(str(name), tuple(_py(v) for v in values)))
        return cls(out)

    # -- (de)serialisation -----------------------------------------------------------------
    def to_dict(self) -> dict:
        cols = []
        for c in self.columns:
            d: dict[str, Any] = {"name": c.name, "categories": [_py(v) for v in c.categories]}
            if c.binning is not None:
                d["bin_edges"] = list(c.binning.edges)
            cols.append(d)
        return {"columns": cols}

    @classmethod
    def from_dict(cls, d: Mapping) -> Domain:
        if not isinstance(d, Mapping) or "columns" not in d:
            raise DomainError("a Domain description must be an object with a 'columns' list")
        if isinstance(d["columns"], (str, Mapping)) or not isinstance(d["columns"], Sequence):
            raise DomainError(f"a Domain description's 'columns' must be a list, got {d['columns']!r}")
        cols = []
        for i, c in enumerate(d["columns"]):
            if not isinstance(c, Mapping) or "name" not in c:
                raise DomainError(f"Domain column #{i} needs a 'name'")
            name = c["name"]
            unknown = sorted(set(c) - _COLUMN_KEYS)
            if unknown:
                raise DomainError(f"Domain column {name!r}: unknown entries {unknown} (allowed: {sorted(_COLUMN_KEYS)})")
            binning = None
            if "bin_edges" in c and ("bounds" in c or "bins" in c):
                raise DomainError(f"Domain column {name!r}: give either 'bin_edges' or 'bounds'+'bins', not both")
            if "bin_edges" in c:
                binning = Binning(_numbers(name, "bin_edges", c["bin_edges"]))
            elif "bounds" in c or "bins" in c:
                if not ("bounds" in c and "bins" in c):
                    raise DomainError(f"Domain column {name!r}: 'bounds' and 'bins' go together")
                bounds, bins = _numbers(name, "bounds", c["bounds"]), c["bins"]
                if len(bounds) != 2:
                    raise DomainError(f"Domain column {name!r}: 'bounds' must be [lower, upper], got {c['bounds']!r}")
                if isinstance(bins, bool) or not (isinstance(bins, int) or (isinstance(bins, float) and bins.is_integer())):
                    raise DomainError(f"Domain column {name!r}: 'bins' must be a whole number, got {bins!r}")
                binning = Binning.uniform(bounds[0], bounds[1], int(bins))
            if "categories" in c:
                cats = c["categories"]
                if isinstance(cats, (str, Mapping)) or not isinstance(cats, Sequence):
                    raise DomainError(f"Domain column {name!r}: 'categories' must be a list, got {cats!r}")
                bad = [v for v in cats if not isinstance(v, (str, int, float, bool))]
                if bad:
                    raise DomainError(f"Domain column {name!r}: categories must be strings or numbers, got {bad[:3]!r}")
                cats = tuple(cats)
            elif binning is not None:
                cats = tuple(binning.labels())
            else:
                raise DomainError(
                    f"Domain column {name!r} needs 'categories', or 'bin_edges', or 'bounds'+'bins'"
                )
            cols.append(Column(name, cats, binning))
        return cls(cols)

    def to_json(self, path: str | os.PathLike | None = None) -> str:
        text = json.dumps(self.to_dict(), indent=2)
        if path is not None:
            from synthinfer.files import atomic_write_text

            atomic_write_text(Path(path), text)
        return text

    @classmethod
    def from_json(cls, path_or_text: str | os.PathLike) -> Domain:
        """Load from a JSON file path or a JSON string.

        Format: ``{"columns": [{"name": "sex", "categories": ["F", "M"]},
        {"name": "age", "bounds": [17, 90], "bins": 5}, {"name": "x", "bin_edges": [...]}]}``.
        """
        p = Path(str(path_or_text))
        text = str(path_or_text)
        try:
            if p.exists():
                text = p.read_text()
        except OSError:
            pass
        try:
            d = json.loads(text)
        except json.JSONDecodeError as e:
            raise DomainError(f"could not parse Domain JSON ({path_or_text!s:.80}): {e}") from e
        return cls.from_dict(d)

    def __repr__(self) -> str:
        inner = ", ".join(f"{c.name}[{c.size}]" for c in self.columns)
        return f"Domain({inner}; size={self.size})"


def _py(v: Any) -> Any:
    """Convert numpy scalars to plain Python for JSON and stable equality."""
    if isinstance(v, np.generic):
        return v.item()
    return v
