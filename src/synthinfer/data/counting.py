"""Where a fit's marginal counts come from: rows in memory, a file scanned by DuckDB, or Spark.

The marginal counts are the only statistics of the private rows that NAPSU-MQ, MST and AIM
read, so a fit needs no more than a :class:`MarginalCounter`: the number of rows ``n`` and the
counts of any marginal of the Domain. :class:`CodeCounter` counts an in-memory code array;
:class:`FileCounter` counts a CSV or Parquet file without loading it, several marginals per
scan (:func:`synthinfer.data.marginals.count_file_marginals`), and
:class:`synthinfer.data.spark.SparkCounter` a Spark DataFrame, with the same SQL; both first
make one validation scan that checks every Domain column (and every derived column against its
map) and finds ``n``, before the caller spends any budget.
"""

from __future__ import annotations

import os
from abc import ABC, abstractmethod
from collections.abc import Sequence
from pathlib import Path
from typing import Protocol, runtime_checkable

import numpy as np

from synthinfer.data.domain import Domain
from synthinfer.data.encoding import computed_columns
from synthinfer.data.marginals import (
    count_codes, count_file_marginals, counts_through_maps, file_columns, scanned_columns,
)
from synthinfer.errors import ArgumentTypeError, DomainError, OutOfDomainError, UnknownColumnError


@runtime_checkable
class MarginalCounter(Protocol):
    """Counts of the private rows' marginals over ``domain`` (flat, row-major, float64)."""

    domain: Domain
    n: int

    def count(self, columns: Sequence[str]) -> np.ndarray:
        """The counts of the marginal on ``columns``."""

    def prefetch(self, marginals: Sequence[Sequence[str]]) -> None:
        """Count ``marginals`` ahead, together where that saves work (one file scan)."""


class CodeCounter:
    """A :class:`MarginalCounter` of an ``(n, k)`` array of category codes of ``domain``."""

    def __init__(self, codes: np.ndarray, domain: Domain) -> None:
        codes = np.asarray(codes)
        if codes.ndim != 2 or codes.shape[1] != len(domain):
            raise DomainError(f"codes must be an (n, {len(domain)}) array of category codes, got shape {codes.shape}")
        self.codes, self.domain, self.n = codes, domain, int(codes.shape[0])

    def count(self, columns: Sequence[str]) -> np.ndarray:
        return count_codes(self.codes, self.domain, tuple(columns))

    def prefetch(self, marginals: Sequence[Sequence[str]]) -> None:
        """Nothing to do: counting codes in memory is one pass per marginal anyway."""


class _ScanCounter(ABC):
    """A counter over a table that an SQL engine scans: counts cached per marginal, several per
    scan; on construction, one scan of every column's 1-way marginal and of each derived column
    with its source checks every value against the Domain and gives ``n``.

    A derived column that the table lacks (its source present) is computed: a marginal naming
    it is counted on the source's cells and summed through the column's map."""

    def __init__(self, domain: Domain, what: str, have: Sequence[str]) -> None:
        if not isinstance(domain, Domain):
            raise ArgumentTypeError(f"domain must be a synthinfer Domain, got {type(domain).__name__}")
        self.domain, self._what = domain, what
        self._cache: dict[tuple[str, ...], np.ndarray] = {}
        self._computed = computed_columns(have, domain)
        lacking = [c for c in domain.names if c not in have and c not in self._computed]
        if lacking:
            raise UnknownColumnError(f"{what} lacks Domain column(s) {lacking} (has {list(have)})")
        checks = [(c,) for c in domain.names if c not in self._computed] + [
            (src, d) for d, src in domain.derived_sources.items() if d not in self._computed]
        self.prefetch(checks)
        self.n = int(self._cache[checks[0]].sum())
        for name, (src, table) in domain.derived.items():
            if name in self._computed:
                continue
            counts = self._cache[(src, name)].reshape(domain[src].size, domain[name].size)
            agree = counts[np.arange(counts.shape[0]), table].sum()
            if counts.sum() != agree:
                raise OutOfDomainError(f"column {name!r} is derived from {src!r} in the Domain, but "
                                       f"{int(counts.sum() - agree)} row(s) of {what} disagree with its map")

    def count(self, columns: Sequence[str]) -> np.ndarray:
        key = tuple(columns)
        if key not in self._cache:
            self.prefetch([key])
        return self._cache[key]

    def prefetch(self, marginals: Sequence[Sequence[str]]) -> None:
        todo = list(dict.fromkeys(tuple(m) for m in marginals if tuple(m) not in self._cache))
        scanned = [m for m in dict.fromkeys(self._scanned_as(m) for m in todo) if m not in self._cache]
        if scanned:
            for key, counts in zip(scanned, self._scan(scanned)):
                self._cache[key] = counts
        for m in todo:
            if m not in self._cache:
                self._cache[m] = self._through_maps(m)

    def _scanned_as(self, columns: tuple[str, ...]) -> tuple[str, ...]:
        """The marginal the table is scanned for (:func:`synthinfer.data.marginals.scanned_columns`;
        the maps of the derived columns the table has were checked)."""
        return scanned_columns(self.domain, columns, self._computed)

    def _through_maps(self, columns: tuple[str, ...]) -> np.ndarray:
        """Counts of ``columns`` from those of :meth:`_scanned_as`, through the derived columns' maps."""
        base = self._scanned_as(columns)
        return counts_through_maps(self.domain, base, columns, self._cache[base])

    @abstractmethod
    def _scan(self, marginals: list[tuple[str, ...]]) -> list[np.ndarray]:
        """The counts of ``marginals``, in order, from one scan of the table."""


class FileCounter(_ScanCounter):
    """A :class:`MarginalCounter` of a CSV or Parquet file, scanned by DuckDB and never loaded
    (:func:`synthinfer.data.marginals.count_file_marginals`); errors name the column and the
    number of rows, never the values."""

    def __init__(self, path: str | os.PathLike, domain: Domain) -> None:
        self.path = Path(path)
        super().__init__(domain, f"the file {self.path.name}", file_columns(self.path))

    def _scan(self, marginals: list[tuple[str, ...]]) -> list[np.ndarray]:
        return count_file_marginals(self.path, self.domain, marginals)


def as_counter(data, domain: Domain) -> MarginalCounter:
    """``data`` as a :class:`MarginalCounter`: a counter as it is, a code array in memory
    (:class:`CodeCounter`)."""
    if isinstance(data, MarginalCounter):
        return data
    return CodeCounter(data, domain)


def is_spark_frame(data) -> bool:
    """Whether ``data`` is a Spark DataFrame (checked without importing pyspark)."""
    return type(data).__module__.startswith("pyspark.sql") and type(data).__name__ == "DataFrame"
