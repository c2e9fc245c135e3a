"""Synthetic datasets produced chunk by chunk, for releases larger than memory."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass

import pandas as pd


@dataclass
class DatasetStream:
    """``m`` synthetic datasets of ``n_syn`` rows each, produced lazily as chunks of rows.

    ``datasets`` yields one iterable of DataFrame chunks per dataset; the chunks of a dataset
    together have ``n_syn`` rows. Consume it once and in order (dataset 0's chunks, then dataset
    1's, ...): the chunks are drawn as they are asked for. ``write_release`` writes each chunk as
    a Parquet row group and hashes the files while writing, so memory holds one chunk at a time.
    Made by ``NapsuMQ.generate_stream``.
    """

    m: int
    n_syn: int
    chunk_rows: int
    datasets: Iterable[Iterable[pd.DataFrame]]

    def __iter__(self) -> Iterator[Iterable[pd.DataFrame]]:
        return iter(self.datasets)
