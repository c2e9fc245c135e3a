"""Validate a table against its public Domain and convert between categories and integer codes.

The code of a value is its position in the column's ordered category list. Discretised
columns are encoded by their public bin edges; numbers outside the edges are errors (never
silently clipped: clipping to public bounds is a modelling choice the user makes explicitly,
see :func:`synthinfer.data.discretize.clip_to_bounds`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Literal

import numpy as np
import pandas as pd

from synthinfer.data.domain import MISSING, Column, Domain
from synthinfer.errors import (
    ArgumentTypeError,
    DomainError,
    DuplicateColumnError,
    EmptyDataError,
    MissingValueError,
    NonFiniteError,
    OutOfDomainError,
    ParameterError,
    UnknownColumnError,
)

MissingPolicy = Literal["error", "drop", "category"]


def with_missing_category(domain: Domain, columns: Sequence[str] | None = None) -> Domain:
    """The Domain with a :data:`MISSING` category appended to ``columns`` (default: every
    categorical column; a continuous column has no categories to extend). A derived column
    follows its source: it gets the category, mapped from the source's, where its source does."""
    derived = domain.derived_sources
    if columns is None:
        columns = tuple(c.name for c in domain.columns if isinstance(c, Column) and c.name not in derived)
    else:
        columns = domain.check_columns(columns)
        domain.check_finite(columns, purpose="with_missing_category()")
        named = [c for c in columns if c in derived]
        if named:
            raise DomainError(f"column {named[0]!r} is derived from {derived[named[0]]!r}: give {derived[named[0]]!r} "
                              "the missing category and the derived column follows")
    inside = [c for c in columns if MISSING in domain[c].categories[:-1]]
    if inside:
        raise DomainError(f"column {inside[0]!r} has {MISSING!r} among its categories but not last, where it "
                          "would take the missing values; put it last")
    sources = {c for c in columns if MISSING not in domain[c].categories}
    out = []
    for c in domain.columns:
        if c.name in sources:
            out.append(dataclasses.replace(c, categories=c.categories + (MISSING,)))
        elif derived.get(c.name) in sources and MISSING not in c.categories:
            out.append(dataclasses.replace(c, categories=c.categories + (MISSING,),
                                           derive=c.derive + ((MISSING, MISSING),)))
        else:
            out.append(c)
    return Domain(out)


def computed_columns(have: Sequence[str], domain: Domain) -> tuple[str, ...]:
    """The derived columns of ``domain`` that a table with columns ``have`` lacks but whose source
    it holds: they are computed from the source by their public maps (no private input beyond
    the source), so a table need not carry them."""
    return tuple(n for n, s in domain.derived_sources.items() if n not in have and s in have)


def _check_table(df: pd.DataFrame, domain: Domain) -> None:
    if not isinstance(df, pd.DataFrame):
        raise ArgumentTypeError(f"expected a pandas DataFrame, got {type(df).__name__}")
    cols = list(df.columns)
    dup = sorted({str(c) for c in cols if cols.count(c) > 1})
    if dup:
        raise DuplicateColumnError(f"the table has duplicate columns: {dup}")
    computed = computed_columns(cols, domain)
    missing = [n for n in domain.names if n not in df.columns and n not in computed]
    if missing:
        raise UnknownColumnError(
            f"the table lacks Domain column(s) {missing} (table columns: {[str(c) for c in cols]})"
        )
    if len(df) == 0:
        raise EmptyDataError("the table has no rows")


def encode(
    df: pd.DataFrame,
    domain: Domain,
    missing: MissingPolicy = "error",
    extra_columns: Literal["error", "ignore"] = "ignore",
) -> np.ndarray:
    """Encode ``df`` into an ``(n, d)`` integer array of category codes, in Domain order.

    Parameters
    ----------
    df : the table; it must hold every Domain column, except derived columns, which are
        computed from their sources where the table lacks them (and checked where it has them).
    domain : the public Domain.
    missing : what to do with missing values (NA, or text that is empty or spaces only:
        :func:`missing_values`) in columns whose Domain has no :data:`MISSING`
        category (in a column that has it, as its last category, they always map there: the
        data holder declared them; see :func:`with_missing_category`). ``"error"`` (default)
        raises :class:`MissingValueError` naming the columns and counts; ``"drop"`` drops such
        rows (their number then depends on the private data: not for DP counts under a public
        n); ``"category"`` raises too, naming the column without the category.
    extra_columns : columns of ``df`` not in the Domain are ignored by default; ``"error"``
        raises :class:`UnknownColumnError`.

    Raises
    ------
    DomainError : the Domain has a continuous column (codes need categories: discretise it).
    OutOfDomainError : a value is not a category of its column (or lies outside the bin
        edges), or a derived column disagrees with its map; the message names the column,
        example values and how many rows.
    NonFiniteError : infinite numbers in a discretised column.
    EmptyDataError : no rows (also after dropping missing values).
    """
    if missing not in ("error", "drop", "category"):
        raise ParameterError(f"missing must be 'error', 'drop' or 'category', got {missing!r}")
    domain.check_finite(purpose="encode() (category codes)")
    _check_table(df, domain)
    if extra_columns == "error":
        extra = [str(c) for c in df.columns if c not in domain.names]
        if extra:
            raise UnknownColumnError(f"the table has columns not in the Domain: {extra}")
    computed = computed_columns(df.columns, domain)
    given = [c for c in domain.columns if c.name not in computed]
    sub = df[[c.name for c in given]]
    isna = np.column_stack([missing_values(sub.iloc[:, k]) for k in range(sub.shape[1])]) if sub.shape[1] else (
        np.zeros((len(sub), 0), dtype=bool))
    # A column whose public Domain ends with MISSING declares missing values as a category:
    # they map there under every policy.
    declared = np.array([c.categories[-1] == MISSING for c in given], dtype=bool)
    undeclared = isna & ~declared
    if undeclared.any():
        if missing == "error":
            counts = {c.name: int(k) for c, k in zip(given, undeclared.sum(axis=0)) if k}
            raise MissingValueError(
                f"missing values in column(s) {counts} (column: rows); give those columns a "
                f"{MISSING!r} category in the Domain (with_missing_category), remove or impute the "
                "rows first, or pass missing='drop'"
            )
        if missing == "drop":
            keep = ~undeclared.any(axis=1)
            sub, isna = sub.loc[keep], isna[keep]
            if len(sub) == 0:
                raise EmptyDataError("no rows are left after dropping rows with missing values")
    codes = np.empty((len(sub), len(domain)), dtype=np.int64)
    for k, col in enumerate(given):
        codes[:, domain.index(col.name)] = _encode_column(sub.iloc[:, k], col, isna[:, k])
    for name, (source, table) in domain.derived.items():
        j, i = domain.index(name), domain.index(source)
        if name in computed:
            codes[:, j] = table[codes[:, i]]
            continue
        bad = np.flatnonzero(codes[:, j] != table[codes[:, i]])
        if bad.size:
            src, col = domain[source], domain[name]
            r = bad[0]
            raise OutOfDomainError(
                f"column {name!r} is derived from {source!r} in the Domain, but {bad.size} row(s) disagree with its "
                f"map, e.g. {source}={src.categories[codes[r, i]]!r} with {name}={col.categories[codes[r, j]]!r} "
                f"(the map gives {col.categories[table[codes[r, i]]]!r})")
    return codes


def encode_column(values: pd.Series, col: Column) -> np.ndarray:
    """Category codes of one column's values by :func:`encode`'s rules: missing values to a
    declared :data:`MISSING` category (else :class:`MissingValueError`), numbers in a
    discretised column by its public edges, text matching categories by their text form."""
    s = pd.Series(values)
    return _encode_column(s, col, missing_values(s))


def missing_values(values: pd.Series) -> np.ndarray:
    """Where ``values`` are missing: NA (None, NaN, NaT) or text that is empty or spaces only,
    the rule of CSV files (:func:`~synthinfer.data.marginals.read_csv`) and of the file counts."""
    out = values.isna().to_numpy()
    if isinstance(values.dtype, pd.CategoricalDtype):  # blank categories, looked up by code
        blank = np.append(missing_values(pd.Series(values.cat.categories)), False)  # code -1: NA
        return out | blank[values.cat.codes.to_numpy()]
    if values.dtype == object or pd.api.types.is_string_dtype(values.dtype):
        try:
            return out | values.str.strip().eq("").to_numpy(dtype=bool, na_value=False)
        except AttributeError:  # an object column without text
            pass
    return out


def _encode_column(s: pd.Series, col: Column, isna: np.ndarray) -> np.ndarray:
    if isna.any() and col.categories[-1] != MISSING:
        raise MissingValueError(
            f"column {col.name!r} has {int(isna.sum())} missing values but its Domain has no "
            f"{MISSING!r} category; build the Domain with with_missing_category()"
        )
    numeric_levels = isinstance(s.dtype, pd.CategoricalDtype) and _numbers_not_bools(s.cat.categories.dtype)
    if col.binning is not None and numeric_levels:
        s = s.astype(float)  # categories that are numbers: binned by the public edges like any numbers
    if col.binning is not None and not isinstance(s.dtype, pd.CategoricalDtype) and (
        pd.api.types.is_numeric_dtype(s.dtype)
    ):
        return _encode_binned(s, col, isna)
    if isinstance(s.dtype, pd.CategoricalDtype):
        # One lookup per level, gathered by the rows' level codes: a release's datasets are
        # categorical, and looking up millions of rows one by one dominated reading them.
        levels = pd.Series(s.cat.categories, dtype=s.cat.categories.dtype if numeric_levels else object)
        per_level = _lookup(levels, col, np.zeros(len(levels), dtype=bool))
        codes = np.append(per_level, -1)[s.cat.codes.to_numpy()]  # code -1 (NA): isna, set below
    else:
        codes = _lookup(s, col, isna)
    if isna.any():
        codes[isna] = col.size - 1  # the MISSING category (checked above)
    bad = (codes < 0) & ~isna
    if bad.any() and isinstance(s.dtype, pd.CategoricalDtype):
        s = s.astype(object)  # the messages below see values, as for any other column
    if bad.any() and col.binning is not None:  # numbers: name the rows, not the values (_encode_binned)
        raise OutOfDomainError(
            f"column {col.name!r}: {int(bad.sum())} row(s) are neither numbers inside the public bounds "
            f"[{col.binning.edges[0]:g}, {col.binning.edges[-1]:g}] nor bin labels")
    if bad.any():
        values = pd.unique(s[bad])
        shown = ", ".join(repr(_plain(v)) for v in values[:5])
        more = f" and {len(values) - 5} more" if len(values) > 5 else ""
        numeric = [c for c in col.categories if isinstance(c, (int, float)) and not isinstance(c, bool)]
        fractional = pd.api.types.is_float_dtype(s.dtype) and bool(np.any(np.asarray(s[bad]) % 1))
        hint = ""
        if len(numeric) == 2 == col.size and fractional:  # {"x": [0, 10]}: a list is categories
            hint = (f"; if {list(col.categories)} are the bounds of a number, give them as a tuple "
                    f"({_plain(numeric[0])}, {_plain(numeric[1])}) or as \"bounds\" in a Domain JSON")
        raise OutOfDomainError(
            f"column {col.name!r}: {int(bad.sum())} row(s) have values outside the Domain: "
            f"{shown}{more} (allowed: {list(col.categories)[:10]}"
            f"{' ...' if col.size > 10 else ''}){hint}"
        )
    return codes.astype(np.int64)


def _lookup(s: pd.Series, col: Column, isna: np.ndarray) -> np.ndarray:
    """Codes of ``s`` among ``col``'s categories (``-1`` where none matches; missing rows, where
    ``isna``, are left to the caller): by value, then as count_file matches them: text read from
    a CSV (e.g. ``'1'`` in a column where one cell is not a number) by its text form, numbers
    against text categories by their text."""
    codes = pd.Index(col.categories).get_indexer(s.where(~isna, other=None) if isna.any() else s)
    bad = (codes < 0) & ~isna
    if bad.any() and not pd.api.types.is_numeric_dtype(s.dtype):
        text = pd.Index([category_text(c) for c in col.categories])
        if text.is_unique:
            strings = bad & s.map(lambda v: isinstance(v, str)).to_numpy()
            codes[strings] = text.get_indexer(s[strings])
            bad = (codes < 0) & ~isna
        if bad.any():
            codes[bad] = _text_as_sql_reads_it(s[bad], col)
    elif bad.any() and _numbers_not_bools(s.dtype):
        # numbers against text categories (a CSV's 13 where the Domain lists "13"): the number's
        # text, as count_file's SQL casts it, so the file and its rows in memory encode alike;
        # then a whole number's text without ".0" (a CSV's integer column with a blank cell
        # reads as floats here, as integers in SQL)
        text = pd.Index([category_text(c) for c in col.categories])
        if text.is_unique:
            codes[bad] = text.get_indexer(s[bad].map(str))
            bad = (codes < 0) & ~isna
            if bad.any():
                codes[bad] = text.get_indexer(s[bad].map(category_text))
    return codes


def _numbers_not_bools(dtype) -> bool:
    return pd.api.types.is_numeric_dtype(dtype) and not pd.api.types.is_bool_dtype(dtype)


def _text_as_sql_reads_it(values: pd.Series, col: Column) -> np.ndarray:
    """Codes of text values matched as :func:`~synthinfer.data.marginals.count_file` matches
    them in SQL: a discretised column's numbers by its public edges, numeric categories by the
    number the text reads as (``"1.0"`` is 1), boolean ones by ``true``/``false`` in any case;
    ``-1`` where nothing matches."""
    out = np.full(len(values), -1, dtype=np.int64)
    cats = [c for c in col.categories if c != MISSING]
    strings = values.map(lambda v: isinstance(v, str)).to_numpy()
    if not cats or not strings.any():
        return out
    text = values[strings]
    if col.binning is not None:  # a number inside the public edges (a bin's label matched before)
        x = pd.to_numeric(text, errors="coerce").to_numpy(dtype=float, na_value=np.nan)
        edges = col.binning.edges
        inside = np.isfinite(x) & (x >= edges[0]) & (x <= edges[-1])
        codes = np.full(len(x), -1, dtype=np.int64)
        codes[inside] = col.binning.codes(x[inside])
        out[strings] = codes
    elif all(isinstance(c, bool) for c in cats):
        out[strings] = pd.Index([str(c).lower() for c in col.categories]).get_indexer(text.str.strip().str.lower())
    elif all(isinstance(c, (int, float)) for c in cats) and len({float(c) for c in cats}) == len(cats):
        found = pd.Index([float(c) for c in cats]).get_indexer(pd.to_numeric(text, errors="coerce"))
        position = np.array([i for i, c in enumerate(col.categories) if c != MISSING])
        out[strings] = np.where(found >= 0, position[found], -1)
    return out


def _encode_binned(s: pd.Series, col: Column, isna: np.ndarray) -> np.ndarray:
    x = s.to_numpy(dtype=float, na_value=np.nan)
    fin = np.isfinite(x) | isna
    # the messages name the column and the number of rows, not the values: a number outside
    # public bounds is an extreme record, the most identifying kind
    if not fin.all():
        raise NonFiniteError(f"column {col.name!r}: {int((~fin).sum())} row(s) have non-finite values")
    edges = np.asarray(col.binning.edges)
    outside = ((x < edges[0]) | (x > edges[-1])) & ~isna
    if outside.any():
        raise OutOfDomainError(
            f"column {col.name!r}: {int(outside.sum())} row(s) lie outside the public bounds "
            f"[{edges[0]:g}, {edges[-1]:g}]; widen the bounds or clip explicitly with clip_to_bounds()"
        )
    codes = col.binning.codes(x)
    codes[isna] = col.size - 1
    return codes.astype(np.int64)


def category_text(v) -> str:
    """Text form of a category as it appears in a CSV file (ints without '.0')."""
    if isinstance(v, bool):
        return str(v)
    if isinstance(v, float) and v.is_integer():
        return str(int(v))
    return str(v)


def _plain(v):
    return v.item() if isinstance(v, np.generic) else v


def decode(
    codes: np.ndarray,
    domain: Domain,
    midpoints: bool | Sequence[str] = False,
    *,
    numbers: bool | Sequence[str] = False,
    rng: np.random.Generator | None = None,
) -> pd.DataFrame:
    """Turn an ``(n, d)`` code array back into a DataFrame of categories or numbers.

    Categorical columns come back as pandas ``Categorical`` with the Domain's category order.
    Discretised columns named by ``numbers`` (``True``: all of them) come back as numbers drawn
    uniformly inside their bins (:meth:`~synthinfer.data.domain.Binning.sample`: whole numbers
    for an integer column, always inside the bounds; needs ``rng``), those named by
    ``midpoints`` as their bin midpoints, as the NAPSU-MQ paper does for the downstream
    analysis (Räisä et al. 2023, Supplement F). A column cannot be in both. A missing-value
    code maps to NaN either way.
    """
    domain.check_finite(purpose="decode() (category codes)")
    codes = np.asarray(codes)
    if codes.ndim != 2 or codes.shape[1] != len(domain):
        raise ParameterError(f"codes must have shape (n, {len(domain)}), got {codes.shape}")
    mids, nums = discretised_columns(domain, midpoints, "midpoints"), discretised_columns(domain, numbers, "numbers")
    both = sorted(mids & nums)
    if both:
        raise ParameterError(f"columns {both} are asked for as midpoints and as numbers inside their bins; choose one")
    if nums and rng is None:
        raise ParameterError("decode(numbers=...) draws numbers inside bins and needs rng (a numpy Generator)")
    data = {}
    for j, col in enumerate(domain.columns):
        cj = codes[:, j]
        if cj.size and (cj.min() < 0 or cj.max() >= col.size):
            raise OutOfDomainError(f"column {col.name!r}: codes outside 0..{col.size - 1}")
        if col.name in mids or col.name in nums:
            b = col.binning
            missing = cj >= b.n_bins  # the MISSING code (the last, after the bins)
            inside = np.where(missing, 0, cj)
            if col.name in mids:
                data[col.name] = np.where(missing, np.nan, b.midpoints[inside])
            elif b.integer:  # whole numbers as integers (nullable where a value is missing)
                x = b.sample(inside, rng).astype(np.int64)
                data[col.name] = pd.array(x, dtype="Int64").where(~missing) if missing.any() else x
            else:
                data[col.name] = np.where(missing, np.nan, b.sample(inside, rng))
        else:
            data[col.name] = pd.Categorical.from_codes(cj, categories=list(col.categories))
    return pd.DataFrame(data)


def discretised_columns(domain: Domain, which: bool | Sequence[str] | None, arg: str) -> set[str]:
    """The discretised columns ``which`` names (``True``: all, ``False`` or ``None``: none);
    :class:`DomainError` naming ``arg`` for a column without bins."""
    if which is True:
        return {c.name for c in domain.columns if c.binning is not None}
    if which is False or which is None:
        return set()
    if isinstance(which, str):
        which = [which]
    names = set(domain.check_columns(which))
    plain = sorted(n for n in names if domain[n].binning is None)
    if plain:
        raise DomainError(f"{arg}: columns {plain} were not discretised from numbers; they have no bins")
    return names
