"""Counting marginals on Spark: a data holder whose table lives in a cluster fits NAPSU-MQ there.

:class:`SparkCounter` is a :class:`~synthinfer.data.counting.MarginalCounter` of a Spark
DataFrame: the same checks and the same SQL as the DuckDB path
(:func:`synthinfer.data.marginals.grouping_sets_sql` in Spark SQL's dialect), so the same
table gives the same counts on either engine. Only the aggregated counts leave the cluster.
``NapsuMQ().fit(spark_frame, domain)`` uses it; so does ``synthinfer generate --engine spark``,
which reads the file through :func:`spark_session` (``local[*]`` unless
``SYNTHINFER_SPARK_MASTER`` names a cluster's master URL, e.g. ``spark://host:7077`` or
``yarn``). pyspark is an optional extra: ``pip install synthinfer[spark]``.
"""

from __future__ import annotations

import contextlib
import os
import uuid
import warnings
from pathlib import Path

import numpy as np

from synthinfer.data.counting import _ScanCounter
from synthinfer.data.domain import Domain
from synthinfer.data.marginals import SPARK, collect_counts, grouping_sets_sql, plan_marginals
from synthinfer.errors import DomainError, ParameterError, SynthinferError

#: Environment variable naming the Spark master URL of :func:`spark_session`.
MASTER_ENV = "SYNTHINFER_SPARK_MASTER"


def _pyspark():
    try:
        import pyspark  # noqa: F401
    except ImportError:
        raise ParameterError("the Spark engine needs pyspark: pip install 'synthinfer[spark]'") from None
    with _pandas_warning_ignored():
        from pyspark.sql import SparkSession

    return SparkSession


@contextlib.contextmanager
def _pandas_warning_ignored():
    """pyspark warns (at import and when a session starts) that its pandas conversions do not
    support pandas 3; the counts come back as Spark rows (``collect()``), never through pandas."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*support pandas", category=FutureWarning)
        yield


def spark_session():
    """The active Spark session, or a new one on ``$SYNTHINFER_SPARK_MASTER`` (default
    ``local[*]``: this machine's cores); a session that cannot start is a clear error."""
    SparkSession = _pyspark()
    active = SparkSession.getActiveSession()
    if active is not None:
        return active
    from pyspark import SparkContext

    # a context of the user's that is not this thread's active session is theirs to configure
    ours = SparkContext._active_spark_context is None
    try:
        # A session started here is synthinfer's own: no web UI, no console progress bars (they
        # would cut through the command's own progress lines) and only Spark's errors logged
        # (e.g. not the stack trace of a harmless metadata lookup on every glob it reads).
        with _pandas_warning_ignored():
            session = (SparkSession.builder.master(os.environ.get(MASTER_ENV, "local[*]")).appName("synthinfer")
                       .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
                       .getOrCreate())
    except Exception as e:  # no Java, a master that does not answer, ...
        raise SynthinferError(f"Spark could not start ({MASTER_ENV}={os.environ.get(MASTER_ENV, 'local[*]')}): "
                              f"{str(e).splitlines()[0] if str(e) else type(e).__name__}") from None
    if ours:
        session.sparkContext.setLogLevel("ERROR")
    return session


def read_spark(path: str | os.PathLike):
    """A CSV (header row, every value as text, as DuckDB reads it) or Parquet file as a Spark
    DataFrame, on :func:`spark_session`."""
    path = Path(path)
    spark = spark_session()
    parquet = path.suffix.lower() in (".parquet", ".pq")
    try:
        return spark.read.parquet(str(path)) if parquet else spark.read.csv(str(path), header=True)
    except Exception as e:
        raise DomainError(f"{path.name} could not be read by Spark: {str(e).splitlines()[0]}") from None


class SparkCounter(_ScanCounter):
    """A :class:`~synthinfer.data.counting.MarginalCounter` of a Spark DataFrame over ``domain``:
    one Spark SQL query (``GROUP BY GROUPING SETS``) per batch of marginals, after one that checks
    every column; errors name the column and the number of rows, never the values."""

    def __init__(self, frame, domain: Domain) -> None:
        self.frame = frame
        self._view = f"synthinfer_{uuid.uuid4().hex}"
        frame.createOrReplaceTempView(self._view)
        try:
            super().__init__(domain, "the Spark DataFrame", list(frame.columns))
        except Exception:  # a refused table leaves no view behind in the user's session
            frame.sparkSession.catalog.dropTempView(self._view)
            raise

    def _scan(self, marginals: list[tuple[str, ...]]) -> list[np.ndarray]:
        marginals, used = plan_marginals(self.domain, marginals, "error")
        sql = grouping_sets_sql(self._view, self.domain, marginals, used, "error", SPARK)
        rows = [tuple(r) for r in self.frame.sparkSession.sql(sql).collect()]
        return collect_counts(rows, self.domain, marginals, used, "error", self._what)
