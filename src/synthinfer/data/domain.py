"""The public Domain: ordered columns, each categorical or continuous with public bounds.

A categorical :class:`Column` has an ordered finite list of categories (a discretised number's
categories are its bins, see :class:`Binning`). A :class:`Continuous` column holds real numbers
in public bounds ``[lower, upper]``; generators that work on real vectors (DP-GAN) and the
feature maps of importance weights use it as it is, while everything that needs a finite
Domain (marginal queries, NAPSU-MQ, PrivBayes, :func:`~synthinfer.data.encode`) refuses it
with a :class:`~synthinfer.errors.DomainError` that names it: discretise it with bins instead.

A Domain is *public knowledge*. It must come from the data holder (in code or a JSON file),
never be read off the private data: the categories present in a table leak which rare values
occur. :meth:`Domain.from_dataframe` exists only as an explicitly non-private convenience.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import warnings
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from synthinfer.errors import (
    DomainError,
    DuplicateColumnError,
    MissingValueError,
    NonFiniteError,
    NonPrivateWarning,
    OutOfDomainError,
    UnknownColumnError,
    user_stacklevel,
)


#: Most bins one discretised column may have. Every marginal over the column allocates a
#: count per bin (and a label string each), so a typo such as ``"bins": 1e9`` would allocate
#: gigabytes; a finer binning than this has no use for the counts of a private table anyway.
MAX_BINS = 100_000


@dataclass(frozen=True)
class Binning:
    """How a continuous column was discretised into the categories of a Domain column.

    ``edges`` has ``k + 1`` increasing finite values for ``k`` bins; bin ``i`` is
    ``[edges[i], edges[i+1])`` except the last, which is closed on both sides. ``midpoints``
    let an analyst map bin codes back to numbers (NAPSU-MQ, Räisä et al. 2023, Supplement F);
    :meth:`sample` maps them back to numbers drawn inside their bins. ``integer``: the column
    holds whole numbers (every bin must contain one), and numbers drawn inside a bin are whole.
    ``private``: the edges are the output of a DP mechanism
    (:func:`synthinfer.data.private_bins.private_bin_edges`), not public knowledge given by the
    data holder; they are public once released, and a release records which they are.
    """

    edges: tuple[float, ...]
    integer: bool = False
    private: bool = False

    def __post_init__(self) -> None:
        e = np.asarray(self.edges, dtype=float)
        if e.ndim != 1 or e.size < 2:
            raise DomainError(f"bin edges need at least two values, got {self.edges!r}")
        if e.size - 1 > MAX_BINS:
            raise DomainError(f"{e.size - 1:,} bins are more than the {MAX_BINS:,} bins a column may have")
        if not np.all(np.isfinite(e)):
            raise DomainError(f"bin edges must be finite, got {self.edges!r}")
        if not np.all(np.diff(e) > 0):
            raise DomainError(f"bin edges must be strictly increasing, got {self.edges!r}")
        for name in ("integer", "private"):
            if not isinstance(getattr(self, name), (bool, np.bool_)):
                raise DomainError(f"Binning.{name} must be True or False, got {getattr(self, name)!r}")
        object.__setattr__(self, "edges", tuple(float(x) for x in e))
        object.__setattr__(self, "integer", bool(self.integer))
        object.__setattr__(self, "private", bool(self.private))
        if self.integer:
            lo, hi = self._integer_ranges()
            empty = np.flatnonzero(lo > hi)
            if empty.size:
                i = int(empty[0])
                raise DomainError(f"bin {self.labels()[i]} holds no whole number, but the column is integer")

    @classmethod
    def uniform(cls, lower: float, upper: float, bins: int, *, integer: bool = False) -> Binning:
        """``bins`` equal-width bins over the public bounds ``[lower, upper]`` (at most
        :data:`MAX_BINS`)."""
        if not (isinstance(bins, (int, np.integer)) and bins >= 1):
            raise DomainError(f"bins must be a positive integer, got {bins!r}")
        if bins > MAX_BINS:
            raise DomainError(f"bins={bins:,} is more than the {MAX_BINS:,} bins a column may have")
        if not (math.isfinite(lower) and math.isfinite(upper) and lower < upper):
            raise DomainError(f"bounds must be finite with lower < upper, got [{lower}, {upper}]")
        return cls(tuple(np.linspace(lower, upper, int(bins) + 1)), integer=integer)

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

    def _integer_ranges(self) -> tuple[np.ndarray, np.ndarray]:
        """The smallest and largest whole number of each bin (``lo > hi``: none)."""
        e = np.asarray(self.edges)
        lo = np.ceil(e[:-1])
        hi = np.ceil(e[1:]) - 1.0  # [e_i, e_{i+1}) excludes e_{i+1}
        hi[-1] = np.floor(e[-1])  # the last bin is closed
        return lo, hi

    def sample(self, codes: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """A number drawn uniformly inside each code's bin (a whole number, uniform over the
        bin's whole numbers, when ``integer``), as floats.

        Decoding a synthetic bin code this way is post-processing: it reads no private data.
        Against midpoints it keeps a covariate's spread within bins, so a regression on the
        synthetic numbers sees the bins' width rather than ``k`` distinct values."""
        codes = np.asarray(codes)
        if self.integer:
            lo, hi = self._integer_ranges()
            return lo[codes] + np.floor(rng.random(codes.shape) * (hi[codes] - lo[codes] + 1.0))
        e = np.asarray(self.edges)
        return e[codes] + rng.random(codes.shape) * (e[codes + 1] - e[codes])

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
    """One Domain column: a name, its ordered categories and, if discretised, its Binning.

    A **derived** column is a public function of another categorical column of its Domain
    (``derived_from``): ``derive`` pairs each of the source's categories with this column's
    category, e.g. Adult's ``education-num`` of ``education`` (a code and its label). Data must
    agree with it (:func:`~synthinfer.data.encode` checks every row); generators that model the
    dependency (NAPSU-MQ) fit the Domain without its derived columns and add them back, which
    keeps synthetic rows consistent and spends no budget on a known dependency."""

    name: str
    categories: tuple[Any, ...]
    binning: Binning | None = None
    derived_from: str | None = None
    derive: tuple[tuple[Any, Any], ...] | None = None

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
        if (self.derived_from is None) != (self.derive is None):
            raise DomainError(f"column {self.name!r}: a derived column needs both 'derived_from' and its map")
        if self.derived_from is not None:
            if self.binning is not None:
                raise DomainError(f"column {self.name!r}: a derived column takes its categories from its map, "
                                  "not from bins")
            pairs = tuple(tuple(p) for p in self.derive)
            if any(len(p) != 2 for p in pairs):
                raise DomainError(f"column {self.name!r}: the map of a derived column is a list of "
                                  "[source category, category] pairs")
            bad = [v for _, v in pairs if v not in seen]
            if bad:
                raise DomainError(f"column {self.name!r}: its map gives values that are not its categories: {bad[:3]!r}")
            object.__setattr__(self, "derive", pairs)

    @property
    def size(self) -> int:
        return len(self.categories)

    @classmethod
    def groups_of(cls, source: Column, cuts: Sequence[float], *, name: str) -> Column:
        """The derived column that groups a discretised column's bins at ``cuts``.

        ``cuts`` are the groups' interior edges, increasing, each an edge of ``source``'s bins
        strictly inside its bounds, so that every bin lies in one group; the groups are labelled
        like bins (``"[17, 30)"``, the last closed). E.g. one-year age bins with
        ``cuts=[30, 45, 60, 75]``: the 5-group column that coarse marginals name (NAPSU-MQ's
        coarse interactions), while the one-year column keeps the number's detail. Domain JSON:
        ``{"name": "age_g", "derived_from": "age", "cuts": [30, 45, 60, 75]}``.
        """
        if not isinstance(source, Column) or source.binning is None or source.derived_from is not None:
            raise DomainError(f"column {name!r}: 'cuts' group the bins of a discretised column (bin_edges, or "
                              f"bounds with bins); {getattr(source, 'name', source)!r} is not one")
        if isinstance(cuts, np.ndarray):
            cuts = cuts.tolist()
        if isinstance(cuts, (str, Mapping)) or not isinstance(cuts, Sequence) or not cuts or not all(
                isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, (bool, np.bool_))
                for v in cuts):
            raise DomainError(f"column {name!r}: 'cuts' must be a non-empty list of numbers, got {cuts!r}")
        b = source.binning
        edges = np.asarray(b.edges)
        c = np.asarray(cuts, dtype=float)
        if not np.all(np.diff(c) > 0) or c[0] <= b.lower or c[-1] >= b.upper:
            raise DomainError(f"column {name!r}: 'cuts' must increase strictly inside {source.name!r}'s bounds "
                              f"[{_fmt(b.lower)}, {_fmt(b.upper)}], got {list(cuts)!r}")
        # a cut is the source's edge it equals up to rounding (an edge of linspace may be 0.30000000000000004)
        at = [np.flatnonzero(np.isclose(edges, v, rtol=1e-12, atol=0.0)) for v in c]
        off = [v for v, i in zip(c, at) if i.size == 0]
        if off:
            raise DomainError(f"column {name!r}: cut {_fmt(off[0])} is not an edge of {source.name!r}'s bins, so a bin "
                              "would lie in two groups")
        c = edges[[int(i[0]) for i in at]]
        groups = Binning((b.lower, *c.tolist(), b.upper), integer=b.integer).labels()
        of = np.searchsorted(c, edges[:-1], side="right")  # a bin's group: the cuts at or below its lower edge
        has_missing = source.categories[-1] == MISSING
        labels = groups + ([MISSING] if has_missing else [])
        pairs = [(cat, groups[k]) for cat, k in zip(source.categories, of)]
        if has_missing:
            pairs.append((MISSING, MISSING))
        return cls(name, tuple(labels), derived_from=source.name, derive=tuple(pairs))


#: Category added to a column's list for missing values (``encode(..., missing="category")``).
MISSING = "<missing>"


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, (bool, np.bool_))


@dataclass(frozen=True)
class Continuous:
    """One Domain column of real numbers with public bounds ``[lower, upper]``.

    The bounds are public knowledge, never the private data's min/max (those would leak the
    extreme rows). Neural generators and weight features scale a value to the unit interval,
    ``u = (x - lower) / (upper - lower)`` (Ghalebikesabi et al. 2022, Section 4, scale every
    feature to [0, 1] this way). With ``integer=True`` the column holds whole numbers: the
    bounds must be whole, fractions are outside the Domain and generated values are rounded
    (post-processing, no privacy cost).

    A continuous column has no categories: marginal queries need bins (:class:`Binning`).
    """

    name: str
    lower: float
    upper: float
    integer: bool = False

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise DomainError(f"column names must be non-empty strings, got {self.name!r}")
        lo, hi = self.lower, self.upper
        if not (_is_number(lo) and _is_number(hi) and math.isfinite(lo) and math.isfinite(hi) and lo < hi):
            raise DomainError(
                f"column {self.name!r}: public bounds must be finite numbers with lower < upper, "
                f"got ({lo!r}, {hi!r})"
            )
        if not isinstance(self.integer, (bool, np.bool_)):
            raise DomainError(f"column {self.name!r}: integer must be True or False, got {self.integer!r}")
        if self.integer and not (float(lo).is_integer() and float(hi).is_integer()):
            raise DomainError(f"column {self.name!r}: an integer column needs whole-number bounds, got ({lo!r}, {hi!r})")
        object.__setattr__(self, "lower", float(lo))
        object.__setattr__(self, "upper", float(hi))
        object.__setattr__(self, "integer", bool(self.integer))

    def contains(self, values: Any) -> np.ndarray:
        """Boolean mask: which values are numbers of this column (finite, within the bounds,
        whole when ``integer``); missing values, text and booleans are not."""
        s = pd.Series(values)
        if pd.api.types.is_bool_dtype(s.dtype):
            return np.zeros(len(s), dtype=bool)
        x = pd.to_numeric(s.astype(object) if isinstance(s.dtype, pd.CategoricalDtype) else s,
                          errors="coerce").to_numpy(dtype=float, na_value=np.nan)
        with np.errstate(invalid="ignore"):
            ok = np.isfinite(x) & (x >= self.lower) & (x <= self.upper)
            if self.integer:
                ok &= np.floor(x) == x
        return ok

    def numbers(self, values: pd.Series, *, clip: bool = False) -> np.ndarray:
        """The values as floats, checked against the public Domain.

        With ``clip=True`` numbers outside the bounds are clipped to them (a public
        transformation, chosen explicitly); otherwise they raise :class:`OutOfDomainError`.
        Missing values raise :class:`MissingValueError`, infinite ones :class:`NonFiniteError`,
        text or booleans :class:`DomainError`; each message names the column.
        """
        s = pd.Series(values)
        if isinstance(s.dtype, pd.CategoricalDtype):
            s = s.astype(object)
        if pd.api.types.is_bool_dtype(s.dtype):
            raise DomainError(f"column {self.name!r} is continuous in the Domain but holds {s.dtype} values")
        try:
            x = pd.to_numeric(s, errors="raise").to_numpy(dtype=float, na_value=np.nan)
        except (ValueError, TypeError) as exc:
            raise DomainError(
                f"column {self.name!r} is continuous in the Domain but holds non-numeric values"
            ) from exc
        if np.isnan(x).any():
            raise MissingValueError(f"column {self.name!r} has {int(np.isnan(x).sum())} missing values")
        if not np.isfinite(x).all():
            raise NonFiniteError(f"column {self.name!r} has non-finite values")
        if clip:
            x = np.clip(x, self.lower, self.upper)
        # the messages name the column and the number of rows, not the values (private)
        outside = (x < self.lower) | (x > self.upper)
        if outside.any():
            raise OutOfDomainError(
                f"column {self.name!r}: {int(outside.sum())} row(s) lie outside the public bounds "
                f"[{self.lower:g}, {self.upper:g}]; widen the bounds or clip "
                "explicitly (clip=True, or synthinfer.data.clip_to_bounds())"
            )
        if self.integer and not (np.floor(x) == x).all():
            raise OutOfDomainError(
                f"column {self.name!r} holds whole numbers only, but {int((np.floor(x) != x).sum())} row(s) have "
                "fractions"
            )
        return x

    def to_unit(self, x: np.ndarray) -> np.ndarray:
        """``(x - lower) / (upper - lower)``: values within the bounds to ``[0, 1]``."""
        return (np.asarray(x, dtype=float) - self.lower) / (self.upper - self.lower)

    def from_unit(self, u: np.ndarray) -> np.ndarray:
        """The inverse of :meth:`to_unit` after clipping ``u`` to ``[0, 1]`` (rounded when
        ``integer``), so that every result lies in the Domain."""
        x = self.lower + np.clip(np.asarray(u, dtype=float), 0.0, 1.0) * (self.upper - self.lower)
        return np.round(x) if self.integer else x


#: Candidate edges scored for each private quantile of a non-integer column
#: (:func:`synthinfer.data.private_bins.candidate_edges`): equal steps between the bounds.
PRIVATE_BIN_GRID = 1000


@dataclass(frozen=True)
class PrivateBins(Continuous):
    """A continuous column with public bounds whose ``bins`` bin edges a DP mechanism chooses.

    The data holder gives the bounds (public) and the number of bins; NapsuMQ's and PrivBayes'
    fits spend part of their budget on the edges (:func:`synthinfer.data.private_bins.resolve_private_bins`:
    the exponential-mechanism quantiles of Smith 2011, one per interior edge, through OpenDP)
    and replaces the column by a discretised :class:`Column` whose :class:`Binning` records the
    chosen edges as private output. Equal-mass bins keep every bin's counts well above the
    noise, where equal-width bins over public bounds leave the tails nearly empty. Synthetic
    values come back as numbers drawn inside their bins (:meth:`Binning.sample`).
    Domain JSON: ``{"name": "age", "bounds": [17, 90], "bins": "private:20", "integer": true}``.
    """

    bins: int = 2

    def __post_init__(self) -> None:
        super().__post_init__()
        b = self.bins
        if isinstance(b, bool) or not isinstance(b, (int, np.integer)) or not 2 <= b <= MAX_BINS:
            raise DomainError(f"column {self.name!r}: private bins must be a whole number from 2 to {MAX_BINS:,}, "
                              f"got {b!r}")
        object.__setattr__(self, "bins", int(b))
        if self.integer and self.bins > self.upper - self.lower:
            raise DomainError(f"column {self.name!r}: {self.bins} bins of whole numbers need at least as many whole "
                              f"numbers in the bounds [{self.lower:g}, {self.upper:g}]")


#: A Domain column: categorical (possibly discretised) or continuous (possibly to be binned privately).
DomainColumn = Column | Continuous


def _numbers(name: str, key: str, value: Any) -> tuple[float, ...]:
    """A Domain description's list of numbers (JSON numbers only: no strings, no booleans)."""
    if isinstance(value, (str, Mapping)) or not isinstance(value, Sequence) or not all(
        isinstance(v, (int, float)) and not isinstance(v, bool) for v in value
    ):
        raise DomainError(f"Domain column {name!r}: {key!r} must be a list of numbers, got {value!r}")
    return tuple(float(v) for v in value)


#: The entries a column of a Domain description may have (see :meth:`Domain.from_json`).
_COLUMN_KEYS = frozenset({"name", "categories", "bin_edges", "bounds", "bins", "integer", "private_edges",
                          "derived_from", "map", "cuts", "missing"})

@dataclass(frozen=True)
class Domain:
    """Ordered columns (public knowledge): categorical :class:`Column` s, whose ordered finite
    category lists span the Domain's cells, and :class:`Continuous` columns with public bounds.

    Examples
    --------
    >>> d = Domain({"sex": ["Female", "Male"], "income": ["<=50K", ">50K"]})
    >>> d.shape, d.size
    ((2, 2), 4)
    >>> Domain.from_spec({"age": (17, 90), "sex": ["Female", "Male"]})
    Domain(age[17, 90], sex[2])
    """

    columns: tuple[DomainColumn, ...] = field(default=())

    def __init__(self, columns: Mapping[str, Sequence[Any] | DomainColumn] | Iterable[DomainColumn]) -> None:
        if isinstance(columns, Mapping):
            cols = tuple(
                c if isinstance(c, (Column, Continuous)) else Column(str(name), tuple(c))
                for name, c in columns.items()
            )
        else:
            cols = tuple(columns)
        for c in cols:
            if not isinstance(c, (Column, Continuous)):
                raise DomainError(f"expected Column or Continuous objects, got {type(c).__name__}")
        names = [c.name for c in cols]
        dup = sorted({n for n in names if names.count(n) > 1})
        if dup:
            raise DuplicateColumnError(f"duplicate column names in Domain: {dup}")
        if not cols:
            raise DomainError("a Domain needs at least one column")
        object.__setattr__(self, "columns", cols)
        object.__setattr__(self, "_derived", self._check_derived())

    def _check_derived(self) -> dict[str, tuple[str, np.ndarray]]:
        """Each derived column's source and its code map (source code -> code), validated."""
        out: dict[str, tuple[str, np.ndarray]] = {}
        by_name = {c.name: c for c in self.columns}
        for c in self.columns:
            if not isinstance(c, Column) or c.derived_from is None:
                continue
            src = by_name.get(c.derived_from)
            if src is None:
                raise DomainError(f"column {c.name!r} is derived from {c.derived_from!r}, which is not in the Domain")
            if not isinstance(src, Column) or src.derived_from is not None or src.name == c.name:
                raise DomainError(f"column {c.name!r} must be derived from a categorical column that is not itself "
                                  f"derived; {src.name!r} is not one")
            given = [a for a, _ in c.derive]
            missing = [v for v in src.categories if v not in given]
            extra = [v for v in given if v not in src.categories]
            twice = sorted({str(v) for v in given if given.count(v) > 1})
            if missing or extra or twice:
                raise DomainError(
                    f"column {c.name!r}: its map must give exactly one value for each category of {src.name!r}"
                    + (f"; missing {missing[:3]!r}" if missing else "") + (f"; not categories {extra[:3]!r}" if extra else "")
                    + (f"; repeated {twice[:3]!r}" if twice else ""))
            to = dict(c.derive)
            code = {v: k for k, v in enumerate(c.categories)}
            out[c.name] = (src.name, np.array([code[to[v]] for v in src.categories], dtype=np.int64))
        return out

    @property
    def derived(self) -> dict[str, tuple[str, np.ndarray]]:
        """``{derived column: (source column, code map)}``: ``map[source code]`` is the derived code."""
        return dict(self._derived)

    @property
    def derived_sources(self) -> dict[str, str]:
        """``{derived column: its source column}``."""
        return {name: src for name, (src, _) in self._derived.items()}

    def source_columns(self, columns: Iterable[str]) -> tuple[str, ...]:
        """``columns`` with each derived column replaced by its source, repeats dropped (a derived
        column's relations are its source's)."""
        return tuple(dict.fromkeys(self._derived[c][0] if c in self._derived else c for c in columns))

    def without_derived(self) -> Domain:
        """The Domain of the columns that are not derived (itself when none is)."""
        if not self._derived:
            return self
        return Domain([c for c in self.columns if c.name not in self._derived])

    def with_derived(self, codes: np.ndarray) -> np.ndarray:
        """Codes of every column from ``codes`` of :meth:`without_derived`'s columns (``(n, k)``),
        the derived columns' codes computed by their maps."""
        if not self._derived:
            return np.asarray(codes)
        base = self.without_derived()
        codes = np.asarray(codes)
        out = np.empty((codes.shape[0], len(self)), dtype=np.int64)
        for j, name in enumerate(self.names):
            if name in self._derived:
                src, table = self._derived[name]
                out[:, j] = table[codes[:, base.index(src)]]
            else:
                out[:, j] = codes[:, base.index(name)]
        return out

    # -- basic accessors -------------------------------------------------------------------
    @property
    def names(self) -> tuple[str, ...]:
        return tuple(c.name for c in self.columns)

    @property
    def is_finite(self) -> bool:
        """Whether every column is categorical, so that the Domain has finitely many cells."""
        return not any(isinstance(c, Continuous) for c in self.columns)

    def check_finite(self, columns: Iterable[str] | None = None, *, purpose: str) -> None:
        """Raise :class:`DomainError` naming the first continuous column among ``columns``
        (default: all), for work that needs categories; the message starts with ``purpose``."""
        cols = self.columns if columns is None else [self[n] for n in columns]
        for c in cols:
            if isinstance(c, PrivateBins):
                raise DomainError(
                    f"{purpose}: column {c.name!r} asks for {c.bins} private bins whose edges are not chosen yet; "
                    "NapsuMQ's and PrivBayes' fits choose them with part of their budget (edges_share); for other "
                    "uses call synthinfer.data.resolve_private_bins() with a ledger first")
            if isinstance(c, Continuous):
                raise DomainError(
                    f"{purpose}: column {c.name!r} is continuous (public bounds [{c.lower:g}, {c.upper:g}]) "
                    "and has no categories; discretise it: give it 'bins' with its 'bounds' (or "
                    "'bin_edges') in the Domain JSON, or build it with synthinfer.data.binned_column()"
                )

    @property
    def shape(self) -> tuple[int, ...]:
        """Number of categories of each column (a finite Domain only)."""
        self.check_finite(purpose="Domain.shape (the number of categories per column)")
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

    def __getitem__(self, name: str) -> DomainColumn:
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
        """The Domain restricted to ``names`` (in the order given); a derived column whose source is
        left out becomes a plain categorical column."""
        names = self.check_columns(names)
        cols = [self[n] for n in names]
        return Domain([Column(c.name, c.categories) if isinstance(c, Column) and c.derived_from is not None
                       and c.derived_from not in names else c for c in cols])

    def midpoints(self, name: str) -> np.ndarray:
        """Bin midpoints of a discretised column (raises for a categorical or continuous one)."""
        col = self[name]
        if isinstance(col, Continuous):
            raise DomainError(f"column {name!r} is continuous; it has no bins and no midpoints")
        if col.binning is None:
            raise DomainError(f"column {name!r} was not discretised from numbers; it has no midpoints")
        return col.binning.midpoints

    # -- construction helpers --------------------------------------------------------------
    @classmethod
    def from_spec(cls, spec: DomainSpec) -> Domain:
        """A Domain from its short spelling, ``{"age": (17, 90), "sex": ["Female", "Male"]}``.

        Each column maps to a **tuple** ``(lower, upper)`` of two numbers (a :class:`Continuous`
        column with those public bounds), a **list** of categories (a :class:`Column`), or a
        :class:`Column` / :class:`Continuous` (renamed to its key). A Domain is returned as it
        is. This is the one parser of the spelling that DP-GAN and the weight feature maps take.
        """
        if isinstance(spec, Domain):
            return spec
        if not isinstance(spec, Mapping) or not spec:
            raise DomainError(
                "a Domain is given as a synthinfer Domain or a non-empty dict mapping each column to "
                f"(lower, upper) bounds or a list of categories, got {type(spec).__name__}"
            )
        cols: list[DomainColumn] = []
        for name, s in spec.items():
            name = str(name)
            if isinstance(s, Column):
                cols.append(s if s.name == name else Column(name, s.categories, s.binning))
            elif isinstance(s, Continuous):
                cols.append(s if s.name == name else dataclasses.replace(s, name=name))
            elif isinstance(s, tuple):
                if len(s) != 2:
                    raise DomainError(
                        f"column {name!r}: a tuple means public (lower, upper) bounds and needs 2 "
                        f"numbers, got {s!r}; give categories as a list"
                    )
                cols.append(Continuous(name, *s))
            elif isinstance(s, (list, np.ndarray, pd.Index)):
                cols.append(Column(name, tuple(_py(v) for v in s)))
            else:
                raise DomainError(
                    f"column {name!r}: expected (lower, upper) bounds as a tuple or categories as "
                    f"a list, got {type(s).__name__}"
                )
        return cls(cols)

    @classmethod
    def from_dataframe(cls, df, columns: Sequence[str] | None = None) -> Domain:
        """Read categories off a table. **Not differentially private.**

        The categories present in private data are themselves private (a rare value reveals
        a person). Use this only on public data, or to draft a Domain that you then review.
        Every column becomes categorical: bounds of a continuous column must be public.
        """
        warnings.warn(
            "Domain.from_dataframe reads the category sets from the data itself; this is NOT "
            "differentially private. Supply the Domain from public knowledge for a real release.",
            NonPrivateWarning,
            stacklevel=user_stacklevel(),
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
            if isinstance(c, Continuous):
                d: dict[str, Any] = {"name": c.name, "bounds": [c.lower, c.upper]}
                if isinstance(c, PrivateBins):
                    d["bins"] = f"private:{c.bins}"
                if c.integer:
                    d["integer"] = True
            else:
                d = {"name": c.name, "categories": [_py(v) for v in c.categories]}
                if c.binning is not None:
                    d["bin_edges"] = list(c.binning.edges)
                    if c.binning.integer:
                        d["integer"] = True
                    if c.binning.private:
                        d["private_edges"] = True
                if c.derived_from is not None:
                    d["derived_from"] = c.derived_from
                    d["map"] = [[_py(a), _py(b)] for a, b in c.derive]
            cols.append(d)
        return {"columns": cols}

    @classmethod
    def from_dict(cls, d: Mapping) -> Domain:
        """A Domain from its description (see :meth:`from_json` for the format)."""
        if not isinstance(d, Mapping) or "columns" not in d:
            raise DomainError("a Domain description must be an object with a 'columns' list")
        if isinstance(d["columns"], (str, Mapping)) or not isinstance(d["columns"], Sequence):
            raise DomainError(f"a Domain description's 'columns' must be a list, got {d['columns']!r}")
        declared = []  # columns with "missing": true
        for i, c in enumerate(d["columns"]):
            if isinstance(c, Mapping) and "missing" in c:
                if not isinstance(c["missing"], bool):
                    raise DomainError(f"Domain column {c.get('name')!r}: 'missing' must be true or false, "
                                      f"got {c['missing']!r}")
                if c["missing"]:
                    declared.append(c.get("name"))
        cols = [_column_from_dict(i, {k: v for k, v in c.items() if k != "missing"} if isinstance(c, Mapping) else c)
                for i, c in enumerate(d["columns"])]
        by_name = {c.name: c for c in cols if not isinstance(c, _Grouped)}
        for i, c in enumerate(cols):  # groups of another column's bins: built once every column is read
            if isinstance(c, _Grouped):
                if c.source not in by_name:
                    raise DomainError(f"column {c.name!r} is derived from {c.source!r}, which is not in the Domain")
                cols[i] = Column.groups_of(by_name[c.source], c.cuts, name=c.name)
        domain = cls(cols)
        if declared:
            from synthinfer.data.encoding import with_missing_category  # encoding imports this module

            for name in declared:
                if name in domain.names and isinstance(domain[name], Continuous):
                    raise DomainError(f"Domain column {name!r}: \"missing\": true needs categories or public bins; a "
                                      "continuous column, or one whose bins a fit chooses privately, has none")

            domain = with_missing_category(domain, declared)
        return domain

    def to_json(self, path: str | os.PathLike | None = None) -> str:
        text = json.dumps(self.to_dict(), indent=2)
        if path is not None:
            from synthinfer.files import atomic_write_text

            atomic_write_text(Path(path), text)
        return text

    @classmethod
    def from_json(cls, path_or_text: str | os.PathLike) -> Domain:
        """Load from a JSON file path or a JSON string.

        Format: ``{"columns": [...]}`` with one object per column:

        - ``{"name": "sex", "categories": ["F", "M"]}``: categorical;
        - ``{"name": "age", "bounds": [17, 90], "bins": 5}`` or ``{"name": "x", "bin_edges":
          [...]}``: a number discretised into bins (labels as categories unless given;
          ``"integer": true`` for whole numbers; ``"private_edges": true`` records edges that a
          DP mechanism chose);
        - ``{"name": "age", "bounds": [17, 90], "bins": "private:20"}``: a number whose 20 bins'
          edges a generator's fit chooses at DP quantiles with part of its budget
          (:class:`PrivateBins`);
        - ``{"name": "x", "bounds": [0, 1]}`` (no bins; ``"integer": true`` for whole numbers):
          continuous with public bounds;
        - ``{"name": "education-num", "categories": [1, ..., 16], "derived_from": "education",
          "map": [["Preschool", 1], ...]}``: derived from another categorical column, one
          ``[source category, category]`` pair per source category (:class:`Column`);
        - ``{"name": "age_g", "derived_from": "age", "cuts": [30, 45, 60, 75]}``: derived by
          grouping a discretised column's bins at the given edges (:meth:`Column.groups_of`;
          written back with its map).

        ``"missing": true`` on a categorical or discretised column appends the :data:`MISSING`
        category, which takes the column's missing values (:func:`with_missing_category`; its
        derived columns follow); it is written back as that last category.
        """
        p = Path(str(path_or_text))
        text = str(path_or_text)
        try:
            if p.exists():
                text = p.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            raise DomainError(f"the Domain file {p} is not a text (UTF-8 JSON) file") from None
        except OSError:
            pass
        try:
            d = json.loads(text)
        except json.JSONDecodeError as e:
            raise DomainError(f"could not parse Domain JSON ({path_or_text!s:.80}): {e}") from e
        return cls.from_dict(d)

    def __repr__(self) -> str:
        inner = ", ".join(
            f"{c.name}[{c.lower:g}, {c.upper:g}]" if isinstance(c, Continuous) else f"{c.name}[{c.size}]"
            for c in self.columns
        )
        return f"Domain({inner}; size={self.size})" if self.is_finite else f"Domain({inner})"


#: What a Domain can be built from: a Domain, or the short spelling of :meth:`Domain.from_spec`.
DomainSpec = Domain | Mapping[str, Any]


@dataclass(frozen=True)
class _Grouped:
    """A column given as groups of another column's bins (``"cuts"``), until that column is read."""

    name: str
    source: str
    cuts: Any


def _column_from_dict(i: int, c: Any) -> DomainColumn | _Grouped:
    """One column of a Domain description; every malformed entry raises, naming the column,
    nothing is coerced."""
    if not isinstance(c, Mapping) or "name" not in c:
        raise DomainError(f"Domain column #{i} needs a 'name'")
    try:
        return _column_entries(c)
    except DomainError as e:  # the column classes' own checks (bounds, edges) do not know the column's name
        if repr(c["name"]) in str(e):
            raise
        raise DomainError(f"Domain column {c['name']!r}: {e}") from None


def _column_entries(c: Mapping) -> DomainColumn | _Grouped:
    name = c["name"]
    unknown = sorted(set(c) - _COLUMN_KEYS)
    if unknown:
        raise DomainError(f"Domain column {name!r}: unknown entries {unknown} (allowed: {sorted(_COLUMN_KEYS)})")
    if "cuts" in c:
        other = sorted(set(c) - {"name", "derived_from", "cuts"})
        if "derived_from" not in c or other:
            raise DomainError(f"Domain column {name!r}: 'cuts' group the bins of the column named by 'derived_from' "
                              f"and take no other entries" + (f" (got {other})" if other else ""))
        if not isinstance(c["derived_from"], str):
            raise DomainError(f"Domain column {name!r}: 'derived_from' must be a column name, got {c['derived_from']!r}")
        return _Grouped(name, c["derived_from"], c["cuts"])
    if "bin_edges" in c and ("bounds" in c or "bins" in c):
        raise DomainError(f"Domain column {name!r}: give either 'bin_edges' or 'bounds'+'bins', not both")
    bounds = None
    if "bounds" in c:
        bounds = _numbers(name, "bounds", c["bounds"])
        if len(bounds) != 2:
            raise DomainError(f"Domain column {name!r}: 'bounds' must be [lower, upper], got {c['bounds']!r}")
    integer = c.get("integer", False)
    if not isinstance(integer, bool):
        raise DomainError(f"Domain column {name!r}: 'integer' must be true or false, got {integer!r}")
    if "integer" in c and "bin_edges" not in c and bounds is None:
        raise DomainError(f"Domain column {name!r}: 'integer' belongs to a number column ('bounds', or 'bin_edges')")
    private_edges = c.get("private_edges", False)
    if not isinstance(private_edges, bool) or ("private_edges" in c and "bin_edges" not in c):
        raise DomainError(f"Domain column {name!r}: 'private_edges' (true or false) says where 'bin_edges' came from; "
                          "to have the edges chosen privately, give 'bounds' and \"bins\": \"private:K\"")
    if bounds is not None and "bins" not in c:
        if "categories" in c:
            raise DomainError(
                f"Domain column {name!r}: 'bounds' without 'bins' is a continuous column, which has no "
                "'categories'; add 'bins' to discretise it"
            )
        return Continuous(name, bounds[0], bounds[1], integer)
    binning = None
    if "bin_edges" in c:
        binning = Binning(_numbers(name, "bin_edges", c["bin_edges"]), integer=integer, private=private_edges)
    elif "bins" in c:
        if bounds is None:
            raise DomainError(f"Domain column {name!r}: 'bins' needs 'bounds'")
        bins = c["bins"]
        if isinstance(bins, str):
            k = bins[len("private:"):] if bins.startswith("private:") else ""
            if not k.isdigit():
                raise DomainError(f"Domain column {name!r}: 'bins' is a whole number (public equal-width bins) or "
                                  f"\"private:K\" (K bins whose edges a DP mechanism chooses), got {bins!r}")
            if "categories" in c:
                raise DomainError(f"Domain column {name!r}: private bins are labelled by their edges once chosen; "
                                  "drop 'categories'")
            return PrivateBins(name, bounds[0], bounds[1], integer, bins=int(k))
        if isinstance(bins, bool) or not (isinstance(bins, int) or (isinstance(bins, float) and bins.is_integer())):
            raise DomainError(f"Domain column {name!r}: 'bins' must be a whole number, got {bins!r}")
        if bins > MAX_BINS:
            raise DomainError(f"Domain column {name!r}: 'bins' is {bins:g}, more than the {MAX_BINS:,} bins a column "
                              "may have")
        binning = Binning.uniform(bounds[0], bounds[1], int(bins), integer=integer)
    elif "integer" in c:
        raise DomainError(f"Domain column {name!r}: 'integer' belongs to a number column ('bounds', or 'bin_edges')")
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
            f"Domain column {name!r} needs 'categories', 'bounds' (continuous), or 'bin_edges' or "
            "'bounds'+'bins' (discretised)"
        )
    if ("derived_from" in c) != ("map" in c):
        raise DomainError(f"Domain column {name!r}: a derived column needs both 'derived_from' and 'map'")
    if "derived_from" in c:
        src, pairs = c["derived_from"], c["map"]
        if not isinstance(src, str):
            raise DomainError(f"Domain column {name!r}: 'derived_from' must be a column name, got {src!r}")
        if isinstance(pairs, (str, Mapping)) or not isinstance(pairs, Sequence) or any(
                isinstance(p, (str, Mapping)) or not isinstance(p, Sequence) or len(p) != 2 for p in pairs):
            raise DomainError(f"Domain column {name!r}: 'map' must be a list of [source category, category] pairs")
        return Column(name, cats, binning, src, tuple((a, b) for a, b in pairs))
    return Column(name, cats, binning)


def _py(v: Any) -> Any:
    """Convert numpy scalars to plain Python for JSON and stable equality."""
    if isinstance(v, np.generic):
        return v.item()
    return v
