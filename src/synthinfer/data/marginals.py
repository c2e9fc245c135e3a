"""Marginal queries and their counts.

A *full set of marginal queries* on a tuple of columns ``c`` (a "marginal" for short) counts
the rows in every cell of the sub-table on ``c``: it is the vector of indicator queries
``a_v(x) = 1[x_c = v]`` for all ``v`` in the product of the columns' category sets,
summed over rows (NAPSU-MQ, Räisä et al. 2023, Section 3.1). Cells are ordered row-major
(C order) over the columns as given, i.e. by the mixed-radix code
``sum_k v_k * prod_{l>k} |c_l|``.

Counting works on a pandas DataFrame (vectorised ``bincount`` on mixed-radix codes) and on
CSV/Parquet files via DuckDB, without loading the file into pandas. Both give identical counts.
"""

from __future__ import annotations

import csv
import math
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from synthinfer.data.domain import MISSING, Domain
from synthinfer.data.encoding import MissingPolicy, category_text, computed_columns, encode
from synthinfer.errors import (
    DomainError,
    DuplicateColumnError,
    EmptyDataError,
    MissingValueError,
    OutOfDomainError,
    ParameterError,
    UnknownColumnError,
)


@dataclass(frozen=True)
class Marginal:
    """The full set of marginal queries on ``columns`` (a tuple of Domain column names)."""

    columns: tuple[str, ...]

    def __post_init__(self) -> None:
        cols = (self.columns,) if isinstance(self.columns, str) else tuple(self.columns)
        if not cols:
            raise DomainError("a marginal needs at least one column")
        dup = sorted({c for c in cols if cols.count(c) > 1})
        if dup:
            raise DomainError(f"marginal {cols} repeats column(s) {dup}")
        object.__setattr__(self, "columns", cols)

    def shape(self, domain: Domain) -> tuple[int, ...]:
        domain.check_finite(self.columns, purpose=f"marginal {self}")
        return tuple(domain[c].size for c in self.columns)

    def size(self, domain: Domain) -> int:
        return int(math.prod(self.shape(domain)))

    def __str__(self) -> str:
        return "(" + ", ".join(self.columns) + ")"


def as_marginals(marginals: Iterable[Sequence[str] | str | Marginal], what: str = "marginals") -> tuple[Marginal, ...]:
    """Normalise user input (``[("a", "b"), "c", Marginal(...)]``) to a tuple of Marginals.

    A string is one marginal (columns comma separated), so a list of strings is 1-way marginals;
    a lone string, Marginal or tuple of strings, which reads as one marginal where a list of
    them is due, is refused rather than split into 1-way marginals (or characters), naming the
    argument ``what``.
    """
    if isinstance(marginals, (str, Marginal)) or (
            isinstance(marginals, tuple) and marginals and all(isinstance(m, str) for m in marginals)):
        one = marginals.columns if isinstance(marginals, Marginal) else marginals
        raise ParameterError(f"{what} must be a list of marginals, got the one marginal {one!r}: write [{one!r}] "
                             "(a list of strings is 1-way marginals)")
    out = []
    for m in marginals:
        if isinstance(m, Marginal):
            out.append(m)
        elif isinstance(m, str):
            out.append(Marginal(tuple(s.strip() for s in m.split(",") if s.strip())))
        else:
            out.append(Marginal(tuple(m)))
    return tuple(out)


class QuerySet:
    """An ordered list of full marginal sets over one Domain; its answer is their concatenation.

    The L2 sensitivity of the concatenated count vector under substitution of one row is
    ``sqrt(2 * n_marginals)`` (NAPSU-MQ Theorem 3.5): each marginal moves one unit of count
    from one cell to another. The Domain must be finite: the model of the queries (NAPSU-MQ's
    maximum-entropy distribution) spans all of its cells, so a continuous column is refused
    here, before any data or budget is touched.
    """

    def __init__(self, domain: Domain, marginals: Iterable[Sequence[str] | str | Marginal]):
        domain.check_finite(purpose="marginal queries (as NAPSU-MQ measures)")
        self.domain = domain
        self.marginals = as_marginals(marginals)
        if not self.marginals:
            raise DomainError("a QuerySet needs at least one marginal")
        for m in self.marginals:
            domain.check_columns(m.columns)
        seen = set()
        for m in self.marginals:
            key = frozenset(m.columns)
            if key in seen:
                raise DomainError(f"marginal {m} is listed twice (up to column order)")
            seen.add(key)

    def __len__(self) -> int:
        return len(self.marginals)

    def __iter__(self):
        return iter(self.marginals)

    @property
    def sizes(self) -> list[int]:
        return [m.size(self.domain) for m in self.marginals]

    @property
    def dimension(self) -> int:
        """Total number of queries (cells over all marginals)."""
        return int(sum(self.sizes))

    @property
    def unit_changes(self) -> int:
        """``2 n_s``: a substitution moves one count down and one up by 1 in each of the ``n_s``
        full marginals (or none), so neighbouring count vectors differ by +-1 in at most this
        many coordinates (:meth:`unit_changes_for`)."""
        return self.unit_changes_for(len(self.marginals))

    @staticmethod
    def unit_changes_for(n_marginals: int) -> int:
        """:attr:`unit_changes` of ``n_marginals`` full marginals, for plans made before they are chosen."""
        return 2 * int(n_marginals)

    @property
    def l2_sensitivity(self) -> float:
        """``sqrt(2 n_s)`` for ``n_s`` full marginal sets (NAPSU-MQ Theorem 3.5)."""
        return math.sqrt(self.unit_changes)

    def offsets(self) -> np.ndarray:
        return np.concatenate([[0], np.cumsum(self.sizes)]).astype(np.int64)

    def count(self, data: pd.DataFrame | np.ndarray, missing: MissingPolicy = "error") -> np.ndarray:
        """Concatenated counts for a DataFrame (encoded against the Domain) or a code array."""
        codes = data if isinstance(data, np.ndarray) else encode(data, self.domain, missing=missing)
        return np.concatenate([count_codes(codes, self.domain, m.columns) for m in self.marginals])

    def count_file(self, path: str | os.PathLike, missing: MissingPolicy = "error") -> np.ndarray:
        """Concatenated counts for a CSV or Parquet file, in one DuckDB scan
        (:func:`count_file_marginals`)."""
        return np.concatenate(count_file_marginals(path, self.domain, self.marginals, missing=missing))

    def split(self, vector: np.ndarray) -> list[np.ndarray]:
        """Split a concatenated vector into per-marginal arrays shaped like their tables."""
        off = self.offsets()
        return [
            np.asarray(vector[off[i] : off[i + 1]]).reshape(m.shape(self.domain))
            for i, m in enumerate(self.marginals)
        ]


def _radix(shape: Sequence[int]) -> np.ndarray:
    """Row-major strides: ``radix[k] = prod(shape[k+1:])``."""
    r = np.ones(len(shape), dtype=np.int64)
    for k in range(len(shape) - 2, -1, -1):
        r[k] = r[k + 1] * shape[k + 1]
    return r


def count_codes(codes: np.ndarray, domain: Domain, columns: Sequence[str]) -> np.ndarray:
    """Counts of the marginal on ``columns`` for an ``(n, d)`` code array (flat, row-major)."""
    domain.check_finite(columns, purpose="marginal counts")
    idx = [domain.index(c) for c in columns]
    shape = [domain.columns[i].size for i in idx]
    flat = codes[:, idx] @ _radix(shape)
    return np.bincount(flat, minlength=int(math.prod(shape))).astype(np.float64)


def count_dataframe(
    df: pd.DataFrame, domain: Domain, columns: Sequence[str], missing: MissingPolicy = "error"
) -> np.ndarray:
    """Counts of the marginal on ``columns`` for a DataFrame (validated against the Domain)."""
    columns = domain.check_columns(columns)
    sub = domain.project(columns)
    return count_codes(encode(df[list(columns)], sub, missing=missing), sub, columns)


def check_csv_header(path: Path) -> list[str]:
    """Refuse a CSV file whose header names a column twice (DuplicateColumnError naming it);
    return the header's names (empty where the file cannot be read as text).

    Both readers of the command line would otherwise accept it: pandas renames the second
    column to ``name.1``, DuckDB to ``name_1``, so a marginal of ``name`` silently reads one of
    the two. Unreadable content is left to the reader's own error.
    """
    try:
        with open(path, newline="", encoding="utf-8") as f:
            header = next(csv.reader(f), [])
    except (UnicodeDecodeError, csv.Error):
        return []
    seen: set[str] = set()
    for name in header:
        if name in seen:
            raise DuplicateColumnError(f"{path}: column {name!r} appears more than once in the header; "
                                       "rename one of them")
        seen.add(name)
    return header


def read_csv(path: str | os.PathLike) -> pd.DataFrame:
    """A CSV file as a DataFrame, with the missing-value rule of :func:`count_file`.

    Only an empty cell (or one of spaces only) is missing. pandas' default list of missing-value
    strings ("NA", "N/A", "None", "null", "nan", ...) is switched off: a category spelled "NA"
    or "None" is a category, read as text, exactly as DuckDB reads it in :func:`count_file`, so
    both paths count the same file alike; a blank line is a row with an empty cell in a
    one-column file and no row in a wider one, as DuckDB reads it. A column name repeated in
    the header is refused (:func:`check_csv_header`).
    """
    path = Path(path)
    header = check_csv_header(path)
    # a blank line is an empty cell in a one-column file, and no row in a wider one (DuckDB's rule)
    df = pd.read_csv(path, keep_default_na=False, na_values=[""], skip_blank_lines=len(header) != 1)
    for c in df.columns:
        if pd.api.types.is_numeric_dtype(df[c].dtype) or pd.api.types.is_bool_dtype(df[c].dtype):
            continue
        text = df[c].astype("string")
        blank = text.str.strip().eq("").fillna(False).to_numpy(dtype=bool)
        if blank.any():
            df[c] = df[c].mask(blank)
    return df


def count_file(
    path: str | os.PathLike,
    domain: Domain,
    columns: Sequence[str],
    missing: MissingPolicy = "error",
) -> np.ndarray:
    """Counts of the marginal on ``columns`` for a CSV or Parquet file, computed by DuckDB
    (:func:`count_file_marginals` with one marginal)."""
    return count_file_marginals(path, domain, [columns], missing=missing)[0]


def count_file_marginals(
    path: str | os.PathLike,
    domain: Domain,
    marginals: Sequence[Sequence[str] | Marginal],
    missing: MissingPolicy = "error",
) -> list[np.ndarray]:
    """Counts of several marginals of a CSV or Parquet file in **one scan**, computed by DuckDB.

    ``path`` may be a glob (``"dir/*.parquet"``): every matching file is one table (a glob that
    matches nothing, or files whose columns differ, are clear errors). The file is never loaded
    into pandas, so files larger than memory work. One query maps
    every value to its category code (by text form for categorical columns, since CSV has no
    types; by value for numeric categories, as :func:`encode` does; boolean ones by true/false in
    any case; by the public bin edges, or
    a bin's label, for discretised columns; missing values to the :data:`MISSING` category of
    a column that declares one), flags values outside the Domain and undeclared missing values,
    and counts every marginal at once with ``GROUP BY GROUPING SETS``: a CSV file is parsed once
    however many marginals and columns are counted. Errors mirror :func:`encode` and name the
    column and how many rows, never the values (they are private). ``missing="drop"`` drops the
    rows with a missing value in any of the counted columns from every marginal, so all have the
    same total. Returns one flat (row-major) count vector per marginal, in order.
    """
    import duckdb

    wanted, _ = plan_marginals(domain, marginals, missing)
    path = Path(path)
    src = _duckdb_source(path)
    con = duckdb.connect()
    try:
        have = [r[0] for r in con.execute(f"DESCRIBE SELECT * FROM {src}").fetchall()]
        computed = computed_columns(have, domain)
        scanned = [scanned_columns(domain, m, computed) for m in wanted]
        marginals, used = plan_marginals(domain, list(dict.fromkeys(scanned)), missing)
        for c in used:
            if c not in have:
                raise UnknownColumnError(f"the file {path.name} lacks column {c!r} (has {have})")
        rows = con.execute(grouping_sets_sql(src, domain, marginals, used, missing, DUCKDB)).fetchall()
    except duckdb.Error as e:  # an unreadable file (not CSV/Parquet, binary, ragged rows)
        raise DomainError(f"{path.name} could not be read: {str(e).splitlines()[0]}") from None
    finally:
        con.close()
    counts = dict(zip(marginals, collect_counts(rows, domain, marginals, used, missing, f"the file {path.name}")))
    return [counts[m] if m == w else counts_through_maps(domain, m, w, counts[m]) for m, w in zip(scanned, wanted)]


def scanned_columns(domain: Domain, columns: tuple[str, ...], computed: Sequence[str]) -> tuple[str, ...]:
    """The marginal a table is scanned for to count ``columns``: where it names a derived column
    that the table lacks (``computed``, :func:`synthinfer.data.encoding.computed_columns`), every
    derived column replaced by its source (:meth:`Domain.source_columns`)."""
    return domain.source_columns(columns) if any(c in computed for c in columns) else tuple(columns)


def counts_through_maps(domain: Domain, base: Sequence[str], columns: Sequence[str], counts: np.ndarray) -> np.ndarray:
    """Counts of the marginal on ``columns`` from ``counts`` of the marginal on ``base``
    (:func:`scanned_columns`: each derived column of ``columns`` replaced by its source): each
    base cell's count added to the cell its codes map to through the derived columns' public maps."""
    shape = [domain[c].size for c in base]
    grid = np.indices(shape).reshape(len(base), -1)
    codes = []
    for c in columns:
        if c in domain.derived:
            src, table = domain.derived[c]
            codes.append(table[grid[list(base).index(src)]])
        else:
            codes.append(grid[list(base).index(c)])
    cells = np.ravel_multi_index(tuple(codes), [domain[c].size for c in columns])
    return np.bincount(cells, weights=counts, minlength=math.prod(domain[c].size for c in columns))


def file_columns(path: str | os.PathLike) -> list[str]:
    """The column names of a CSV or Parquet file (or glob), read by DuckDB from its header or
    schema, without scanning its rows."""
    import duckdb

    path = Path(path)
    src = _duckdb_source(path)
    con = duckdb.connect()
    try:
        return [r[0] for r in con.execute(f"DESCRIBE SELECT * FROM {src}").fetchall()]
    except duckdb.Error as e:
        raise DomainError(f"{path.name} could not be read: {str(e).splitlines()[0]}") from None
    finally:
        con.close()


def no_data_file(path: Path) -> FileNotFoundError:
    """The error for a data path that is no file (a folder: with the glob form that reads it)."""
    hint = " (it is a folder; a quoted glob 'folder/*.parquet' reads its files as one table)" if path.is_dir() else ""
    return FileNotFoundError(f"no data file {path}{hint}")


def _duckdb_source(path: Path) -> str:
    """DuckDB's table function reading ``path`` (every value of a CSV as text), after checking
    that the file or the glob's files exist and that a CSV has a usable header."""
    if any(ch in str(path) for ch in "*?["):  # a glob: DuckDB reads every match as one table
        import glob

        if not glob.glob(str(path)):
            raise FileNotFoundError(f"no file matches {path}")
    elif not path.is_file():
        raise no_data_file(path)
    suffix = "".join(path.suffixes).lower()
    if ".parquet" in suffix or suffix.endswith(".pq"):
        return f"read_parquet({DUCKDB.string(str(path))})"
    if path.exists():  # one file (a glob's files are left to DuckDB)
        if path.stat().st_size == 0:
            raise EmptyDataError(f"{path} is empty (no header row)")
        check_csv_header(path)
    return f"read_csv({DUCKDB.string(str(path))}, header=true, all_varchar=true)"


@dataclass(frozen=True)
class SqlDialect:
    """What differs between the SQL engines that count marginals (DuckDB, Spark SQL)."""

    quote: str  # identifier quote
    backslash_escapes: bool  # whether a backslash escapes in a string literal
    position: str  # "{array}, {value}" -> 1-based index, or NULL when absent
    array: str  # "{items}" -> an array literal
    grouping: str  # GROUPING-bitmask function

    def ident(self, name: str) -> str:
        return self.quote + name.replace(self.quote, self.quote * 2) + self.quote

    def string(self, s: str) -> str:
        if self.backslash_escapes:
            s = s.replace("\\", "\\\\")
        return "'" + s.replace("'", "''") + "'"

    def find(self, items: str, value: str) -> str:
        return self.position.format(array=self.array.format(items=items), value=value)


DUCKDB = SqlDialect(quote='"', backslash_escapes=False, position="list_position({array}, {value})",
                    array="[{items}]", grouping="GROUPING")
#: Spark SQL: array_position gives 0 for an absent value (NULL in DuckDB)
SPARK = SqlDialect(quote="`", backslash_escapes=True, position="nullif(array_position({array}, {value}), 0)",
                   array="array({items})", grouping="grouping_id")


def plan_marginals(domain: Domain, marginals, missing: MissingPolicy) -> tuple[list[tuple[str, ...]], list[str]]:
    """The marginals as column tuples, checked, and the columns they use, in first-use order."""
    if missing not in ("error", "drop"):
        raise ParameterError(f"count_file supports missing='error' or 'drop', got {missing!r}")
    marginals = [m.columns if isinstance(m, Marginal) else tuple(domain.check_columns(m)) for m in marginals]
    if not marginals:
        raise ParameterError("counting needs at least one marginal")
    used = list(dict.fromkeys(c for m in marginals for c in m))
    domain.check_finite(used, purpose="marginal counts")
    return marginals, used


def grouping_sets_sql(src: str, domain: Domain, marginals: Sequence[tuple[str, ...]], used: Sequence[str],
                      missing: MissingPolicy, d: SqlDialect) -> str:
    """One query over ``src`` that counts every marginal (``GROUP BY GROUPING SETS``) with, per
    group, the number of values outside the Domain and of missing values of each used column
    (:func:`collect_counts` reads it)."""
    exprs = [_code_sql(c, domain[c], d) for c in used]
    any_null = " OR ".join(isnull for _, _, isnull in exprs)
    select = []
    for j, (code, bad, isnull) in enumerate(exprs):
        key = f"CASE WHEN {any_null} THEN NULL ELSE {code} END" if missing == "drop" else code
        select += [f"{key} AS k{j}", f"CAST({bad} AS INTEGER) AS b{j}", f"CAST({isnull} AS INTEGER) AS z{j}"]
    keys = [f"k{j}" for j in range(len(used))]
    sets = ", ".join("(" + ", ".join(f"k{used.index(c)}" for c in m) + ")" for m in marginals)
    sums = ", ".join(f"SUM(b{j}), SUM(z{j})" for j in range(len(used)))
    return (f"SELECT {d.grouping}({', '.join(keys)}), {', '.join(keys)}, COUNT(*), {sums} "
            f"FROM (SELECT {', '.join(select)} FROM {src}) AS coded GROUP BY GROUPING SETS ({sets})")


def collect_counts(rows: Sequence[Sequence], domain: Domain, marginals: Sequence[tuple[str, ...]],
                   used: Sequence[str], missing: MissingPolicy, what: str) -> list[np.ndarray]:
    """The count vectors of :func:`grouping_sets_sql`'s result rows, after its checks: values
    outside the Domain and (``missing="error"``) missing values raise, naming the column and
    how many rows."""
    if not rows:
        raise EmptyDataError(f"{what} has no rows to count")
    k = len(used)
    # every grouping set aggregates all rows: the flags' totals from the first marginal's set
    first = _grouping_mask(marginals[0], used)
    totals = np.sum([[int(v or 0) for v in r[k + 2:]] for r in rows if r[0] == first], axis=0)
    bad, null = totals[0::2], totals[1::2]
    for c, b in zip(used, bad):
        if b:  # the public Domain's side only: the offending values are private
            col = domain[c]
            allowed = (f"numbers in [{col.binning.edges[0]:g}, {col.binning.edges[-1]:g}] or bin labels"
                       if col.binning is not None else
                       f"{list(col.categories)[:10]}{' ...' if col.size > 10 else ''}")
            raise OutOfDomainError(f"column {c!r} of {what}: {int(b)} row(s) have values outside the Domain "
                                   f"(allowed: {allowed})")
    if missing == "error" and null.any():
        per = {c: int(z) for c, z in zip(used, null) if z}
        raise MissingValueError(f"missing values in {what}: {per} (column: rows); give those columns a {MISSING!r} "
                                "category in the Domain (\"missing\": true in its JSON) or pass missing='drop' "
                                "(synthinfer count: --drop-missing)")
    # the result rows once into one array per grouping set, then each marginal by bincount
    by_set: dict[int, list] = {}
    for r in rows:
        by_set.setdefault(r[0], []).append(r)
    out = []
    for m in marginals:
        shape = [domain[c].size for c in m]
        counts = np.zeros(int(math.prod(shape)), dtype=np.float64)
        idx = [1 + used.index(c) for c in m]
        part = by_set.get(_grouping_mask(m, used), [])
        keys = np.array([[r[i] for i in idx] for r in part], dtype=object).reshape(len(part), len(idx))
        kept = np.array([all(v is not None for v in row) for row in keys], dtype=bool)  # None: a dropped row
        if kept.any():
            cells = keys[kept].astype(np.int64) @ _radix(shape)
            counts += np.bincount(cells, weights=np.array([r[k + 1] for r in part], float)[kept],
                                  minlength=counts.size)
        if not counts.any():
            raise EmptyDataError(f"{what} has no rows to count")
        out.append(counts)
    return out


def _grouping_mask(columns: Sequence[str], used: Sequence[str]) -> int:
    """``GROUPING(k0, ..., k_K-1)`` of the set ``columns`` (DuckDB's and Spark's bitmask): bit
    ``K - 1 - j`` set for every key ``j`` not in it."""
    k = len(used)
    return sum(1 << (k - 1 - j) for j, c in enumerate(used) if c not in columns)


def _code_sql(name: str, col, d: SqlDialect) -> tuple[str, str, str]:
    """SQL for one column: its category code (NULL when missing or outside the Domain), a flag
    for a value outside the Domain, and a flag for a missing value (NULL, empty text, or a float
    column's NaN) that the Domain does not declare. A column whose last category is
    :data:`MISSING` declares its missing values: they get that category's code, as in
    :func:`encode`."""
    ident = d.ident(name)
    text = f"CAST({ident} AS STRING)"
    # NULL, empty text, or a typed float column's NaN (pandas reads NaN as missing; a NaN written
    # as text in a CSV stays text there, and here). NaN by its text: every type casts to text in
    # both engines, not every type to DOUBLE (Spark type-checks the whole expression)
    nan = f"(LOWER(typeof({ident})) IN ('double', 'float') AND LOWER({text}) = 'nan')"
    blank = f"({ident} IS NULL OR TRIM({text}) = '' OR {nan})"
    declared = col.categories[-1] == MISSING
    values = col.categories[:-1] if declared else col.categories
    if col.binning is not None:
        # a number inside the public edges, or a bin's label (as encode() takes either); NaN
        # and infinities compare above every edge in both engines
        e = list(col.binning.edges)
        num = f"TRY_CAST({ident} AS DOUBLE)"
        label = d.find(", ".join(d.string(category_text(v)) for v in col.categories), text)
        bad = (f"(NOT {blank} AND {label} IS NULL AND "
               f"({num} IS NULL OR NOT ({num} >= {e[0]!r} AND {num} <= {e[-1]!r})))")
        case = " ".join(f"WHEN {num} < {e[i + 1]!r} THEN {i}" for i in range(len(e) - 2))
        code = (f"CASE WHEN {blank} OR {bad} THEN NULL WHEN {label} IS NOT NULL THEN {label} - 1 "
                f"{case} ELSE {len(e) - 2} END")
    elif values and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values):
        # numeric categories match by value ("1.0" is category 1), as encode() does; a declared
        # MISSING category also by its text
        num = f"TRY_CAST({ident} AS DOUBLE)"
        found = d.find(", ".join(f"CAST({float(v)!r} AS DOUBLE)" for v in values), num)
        if declared:
            found = f"COALESCE({found}, CASE WHEN {text} = {d.string(MISSING)} THEN {len(values) + 1} END)"
    elif values and all(isinstance(v, bool) for v in values):
        # True/False as a CSV writes them, or a typed boolean column's text (true/false)
        found = d.find(", ".join(d.string(str(v).lower()) for v in col.categories), f"LOWER(TRIM({text}))")
    else:
        found = d.find(", ".join(d.string(category_text(v)) for v in col.categories), text)
    if col.binning is None:  # a category's 1-based position, NULL when none matches
        code, bad = f"({found} - 1)", f"(NOT {blank} AND {found} IS NULL)"
    if declared:
        return f"CASE WHEN {blank} THEN {col.size - 1} ELSE {code} END", bad, "FALSE"
    return code, bad, blank


