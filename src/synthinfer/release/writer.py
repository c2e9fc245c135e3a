"""Writing a release bundle: the unit a data holder publishes.

Layout of a bundle (a directory, or the same tree inside a ``.zip``)::

    manifest.json                  format, provenance, privacy record, SHA-256 of every other file
    data/synthetic_000.parquet     the m synthetic datasets (optionally with a weight column)
    ...
    posterior.nc                   optional posterior draws (ArviZ InferenceData, netCDF4)

The bundle is assembled in a hidden staging folder beside the target, made durable (``fsync``
of every file and folder) and renamed into place, all under an exclusive lock on the target
(:func:`synthinfer.files.output_lock`): a failure at any point, a full disk included, leaves
nothing behind and an existing release untouched, and a reader sees the old release or the new
one at every instant (see :mod:`synthinfer.files` for the replacement and its fallback).
Staging items that an interrupted write left beside the target are swept by the next write.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import errno
import hashlib
import io
import json
import os
import zipfile
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from synthinfer.data import Continuous, Domain, decode
from synthinfer.data.encoding import category_text
from synthinfer.data.weights import check_weight_vectors
from synthinfer.errors import ArgumentTypeError, ParameterError, ReleaseError
from synthinfer.files import exchange, fsync_path, fsync_tree, output_lock, remove, staging_path, sweep_staging
from synthinfer.release.manifest import (FORMAT_NAME, FORMAT_VERSION, MANIFEST_NAME, REPORT_NAME, sha256_file,
                                        stored_as_text, to_jsonable)
from synthinfer.release.record import ReleaseRecord
from synthinfer.release.stream import DatasetStream

#: ``DataFrame.attrs`` key marking a frame as private input. A release refuses such frames.
PRIVATE_ATTR = "synthinfer.private"
DATA_DIR = "data"
POSTERIOR_NAME = "posterior.nc"
#: errno values of a full disk, a full quota and a file-size limit.
_NO_SPACE = {errno.ENOSPC, errno.EDQUOT, errno.EFBIG}


def mark_private(df: pd.DataFrame) -> pd.DataFrame:
    """Mark ``df`` (in place, and return it) as private input that must never be released."""
    df.attrs[PRIVATE_ATTR] = True
    return df


def _synthinfer_version() -> str:
    from synthinfer import __version__

    return __version__


def _as_frames(datasets: Any, domain: Domain | None, private_data: Any) -> list[pd.DataFrame]:
    if isinstance(datasets, (pd.DataFrame, np.ndarray)) or not isinstance(datasets, Sequence):
        raise ReleaseError(
            "datasets must be a list of the m synthetic datasets (DataFrames, or (n, d) code arrays "
            f"with a domain) or a DatasetStream, got {type(datasets).__name__}"
        )
    if len(datasets) == 0:
        raise ReleaseError("a release needs at least one synthetic dataset")
    frames: list[pd.DataFrame] = []
    for i, ds in enumerate(datasets):
        frames.append(_checked_chunk(i, ds, domain, private_data, None, frames[0] if frames else None))
    return frames


def _checked_chunk(i: int, ds: Any, domain: Domain | None, private_data: Any, offset: int | None,
                   first: pd.DataFrame | None) -> pd.DataFrame:
    """Dataset ``i`` (``offset`` None), or its chunk of rows from ``offset`` on (a stream),
    checked before it is written: never private data (the object itself, marked, or the private
    rows at the same positions), not empty, the columns and categories of the release's first
    dataset ``first`` (None: this is it), every value in the Domain."""
    if private_data is not None and ds is private_data:
        raise ReleaseError(f"dataset {i} is the private input itself; a release holds synthetic data only")
    if isinstance(ds, np.ndarray):
        if domain is None:
            raise ReleaseError(f"dataset {i} is a code array; pass the domain to decode it")
        ds = decode(ds, domain)
    if not isinstance(ds, pd.DataFrame):
        raise ReleaseError(f"dataset {i} is a {type(ds).__name__}, expected a pandas DataFrame")
    if ds.attrs.get(PRIVATE_ATTR):
        raise ReleaseError(f"dataset {i} is marked as private input ({PRIVATE_ATTR}); refusing to release it")
    if len(ds) == 0 or ds.shape[1] == 0:
        raise ReleaseError(f"dataset {i} is empty")
    if private_data is not None:
        cols = _compared_columns(ds, private_data, domain)
        if cols is None:
            same = False
        elif offset is None:  # a whole dataset
            same = _is_private_table(ds[cols], private_data)
        else:  # a chunk: against the private rows at its positions
            same = _same_rows(ds[cols], private_data[cols].iloc[offset:offset + len(ds)])
        if same:
            raise ReleaseError(f"dataset {i} has exactly the rows of the private input; refusing to release it")
    if first is not None:
        cols = list(first.columns)
        if list(ds.columns) != cols:
            raise ReleaseError(f"dataset {i} has columns {list(ds.columns)}, dataset 0 has {cols}")
        # The manifest records one category list per column, which the reader restores on every
        # dataset: a dataset with other categories would lose its values to NaN there.
        for c in cols:
            if _category_list(ds[c]) != _category_list(first[c]):
                raise ReleaseError(
                    f"column {c!r}: dataset {i} has categories {_category_list(ds[c])}, dataset 0 has "
                    f"{_category_list(first[c])}; every dataset needs the same categorical dtype"
                )
    if domain is not None:
        unknown = [c for c in ds.columns if c not in domain.names]
        if unknown:
            raise ReleaseError(f"dataset columns {unknown} are not in the release's Domain {list(domain.names)}")
        _check_values(i, ds, domain)
    return ds


def _check_values(i: int, frame: pd.DataFrame, domain: Domain) -> None:
    """Every value of a Domain column is one of its categories, or, for a continuous column or
    a discretised one written as numbers (bin midpoints, or numbers drawn inside the bins), lies
    within its public bounds."""
    for c in frame.columns:
        col, s = domain[c], frame[c].dropna()
        if isinstance(col, Continuous):
            bad = s[~col.contains(s)]
        elif col.binning is not None and pd.api.types.is_numeric_dtype(s.dtype) and not isinstance(
                s.dtype, pd.CategoricalDtype):
            bad = s[(s < col.binning.lower) | (s > col.binning.upper)]
        else:
            bad = s[~s.isin(list(col.categories))]
        if len(bad):
            raise ReleaseError(
                f"dataset {i}, column {c!r}: values {sorted(map(str, set(bad)))[:5]} are not in the release's "
                "Domain"
            )


def _compared_columns(ds: pd.DataFrame, private: Any, domain: Domain | None) -> list[str] | None:
    """The columns on which ``ds`` is compared with the private table: all of its columns, less
    derived columns that the private table lacks (computed from their sources, which are
    compared); ``None`` when the private table lacks any other."""
    have = set(getattr(private, "columns", ()))
    derived = set(domain.derived) if domain is not None else set()
    lacking = [c for c in ds.columns if c not in have]
    if any(c not in derived for c in lacking):
        return None
    cols = [c for c in ds.columns if c in have]
    return cols or None


def _is_private_table(ds: pd.DataFrame, private: pd.DataFrame) -> bool:
    """Whether ``ds`` holds exactly the rows of ``private`` on its columns: row by row, or row
    by row once both are sorted by their index (a shuffled copy keeps its index)."""
    cols = list(ds.columns)
    if len(ds) != len(private):
        return False
    priv = private[cols]
    if _same_rows(ds, priv):
        return True
    try:
        return _same_rows(ds.sort_index(), priv.sort_index())
    except TypeError:  # an index of mixed types has no order
        return False


def _same_rows(a: pd.DataFrame, b: pd.DataFrame) -> bool:
    if a.shape != b.shape or list(a.columns) != list(b.columns):
        return False
    try:
        return bool((a.reset_index(drop=True).astype(str) == b.reset_index(drop=True).astype(str)).all().all())
    except (TypeError, ValueError):
        return False


def _category_list(column: pd.Series) -> list | None:
    dtype = column.dtype
    return list(dtype.categories) if isinstance(dtype, pd.CategoricalDtype) else None


def _categories(frame: pd.DataFrame) -> dict[str, list | None]:
    out: dict[str, list | None] = {}
    for c in frame.columns:
        cats = _category_list(frame[c])
        out[str(c)] = None if cats is None else to_jsonable(cats, f"categories of column {c!r}")
    return out


def _check_weights(weights: Any, frames: list[pd.DataFrame]) -> list[np.ndarray] | None:
    if weights is None:
        return None
    return check_weight_vectors(weights, frames, ReleaseError)


def _weight_column(columns: Sequence[str]) -> str:
    name = "weight"
    while name in columns:
        name = "_" + name
    return name


def _posterior_idata(posterior: Any):
    from synthinfer.mcmc import import_arviz

    az = import_arviz()

    if isinstance(posterior, az.InferenceData):
        return posterior
    if isinstance(posterior, Mapping):
        return az.from_dict(posterior={k: np.asarray(v) for k, v in posterior.items()})
    raise ReleaseError(
        f"posterior must be an ArviZ InferenceData or a dict of draw arrays, got {type(posterior).__name__}"
    )


def _numeric_columns(frame: pd.DataFrame, domain: Domain | None) -> tuple[list[str] | None, list[str] | None]:
    """The discretised Domain columns that the datasets hold as numbers rather than bin labels:
    ``(as bin midpoints, as numbers inside their bins)``, e.g. from ``NapsuMQ.generate(midpoints=...)``
    and ``generate(numbers=...)``; ``(None, None)`` without a Domain.

    Read from the datasets themselves, so the manifest states what was released whoever
    generated it."""
    if domain is None:
        return None, None
    mids, inside = [], []
    for c in frame.columns:
        col = domain[c]
        if (isinstance(col, Continuous) or col.binning is None or not pd.api.types.is_numeric_dtype(frame[c].dtype)
                or isinstance(frame[c].dtype, pd.CategoricalDtype)):
            continue
        x = frame[c].dropna().to_numpy(dtype=float)
        (mids if np.isin(x, col.binning.midpoints).all() else inside).append(str(c))
    return mids, inside


def write_release(
    path: str | os.PathLike,
    datasets: Sequence[pd.DataFrame | np.ndarray],
    *,
    record: ReleaseRecord,
    weights: Sequence[np.ndarray] | None = None,
    overwrite: bool = False,
    zip: bool = False,  # noqa: A002 - shadows the builtin inside this function only
    private_data: pd.DataFrame | None = None,
    skip_private_data_check: bool = False,
    report: bool = True,
) -> Path:
    """Write the m synthetic ``datasets`` as a release bundle at ``path``; return its path.

    ``write_release(path, gen.generate(m), record=gen.release_record(), private_data=df)``.

    A release never holds the private table: ``private_data`` (the DataFrame the generator
    was fitted to) is required, and every dataset is compared with it before anything is
    written. Only a caller that has no private table at hand (datasets made elsewhere, test
    fixtures) may pass ``skip_private_data_check=True`` instead, which gives up that check.

    Parameters
    ----------
    path : target directory (or zip file with ``zip=True``; ``.zip`` is appended if missing).
    datasets : the m synthetic datasets, as DataFrames (or ``(n_syn, d)`` code arrays, decoded
        with the record's Domain), or a :class:`~synthinfer.release.stream.DatasetStream`
        (``NapsuMQ.generate_stream``), written chunk by chunk as Parquet row groups in bounded
        memory (each chunk checked as below, against the private rows at its positions). Never the private data: frames marked with
        :func:`mark_private`, the object passed as ``private_data``, or a frame with exactly its
        rows are refused.
    record : the :class:`~synthinfer.release.ReleaseRecord` of the fitted generator
        (``generator.release_record()``): mechanism, settings (never a seed's value), Domain,
        marginals, the :class:`PrivacyLedger` whose record (total, spent, and ``(epsilon,
        delta)`` per component) goes into the manifest, the private row count ``n``,
        ``seed_fixed``, posterior draws (stored as netCDF) and a diagnostics summary.
    weights : optional per-row weights, one vector per dataset, stored as a column of the
        dataset files and named in the manifest.
    overwrite : replace an existing release at ``path`` (otherwise :class:`ReleaseError`).
    zip : write a single zip file instead of a directory.
    private_data : the private input (a DataFrame), required unless
        ``skip_private_data_check``: a dataset that is this object, or that has its rows (in
        its order or in the order of its index), is refused.
    skip_private_data_check : write without ``private_data``, giving up the guard above
        (:class:`~synthinfer.errors.ParameterError` when both or neither are given).
    report : also write the public HTML report (:func:`synthinfer.report` of the release
        alone, never of ``private_data``) as ``report.html``, listed and checksummed in the
        manifest. It cannot name the manifest's own SHA-256 (the release's fingerprint), and
        it draws the synthetic marginals only when the datasets total at most
        ``IN_MEMORY_BYTES`` (the reader's in-memory limit), so its cost stays bounded.
    """
    if skip_private_data_check not in (True, False):
        raise ParameterError(f"skip_private_data_check must be True or False, got {skip_private_data_check!r}")
    if private_data is None and not skip_private_data_check:
        raise ParameterError(
            "write_release needs private_data= (the private DataFrame the generator was fitted to), so that no "
            "dataset can be the private table; without one at hand, pass skip_private_data_check=True"
        )
    if private_data is not None and skip_private_data_check:
        raise ParameterError("give either private_data= or skip_private_data_check=True, not both")
    if private_data is not None and not isinstance(private_data, pd.DataFrame):
        raise ArgumentTypeError(f"private_data must be the private pandas DataFrame, got {type(private_data).__name__}")
    if report not in (True, False):
        raise ParameterError(f"report must be True or False, got {report!r}")
    if not isinstance(record, ReleaseRecord):
        raise ReleaseError(
            f"record must be a ReleaseRecord (a fitted generator's release_record()), got {type(record).__name__}"
        )
    domain = record.domain
    if isinstance(datasets, DatasetStream):
        if weights is not None:
            raise ParameterError("weights are not supported for a DatasetStream; write a list of datasets")
        chunks, m, wts, weight_col = _checked_stream(datasets, domain, private_data), datasets.m, None, None
    else:
        frames = _as_frames(datasets, domain, private_data)
        chunks, m, wts = ([f] for f in frames), len(frames), _check_weights(weights, frames)
        weight_col = _weight_column(list(frames[0].columns)) if wts is not None else None
    idata = None if record.posterior is None else _posterior_idata(record.posterior)

    target = Path(path)
    if zip and target.suffix.lower() != ".zip":
        target = target.with_name(target.name + ".zip")
    with output_lock(target):
        sweep_staging(target)
        if (target.exists() or target.is_symlink()) and not overwrite:
            raise ReleaseError(f"{target} already exists; pass overwrite=True to replace it")
        tmp = staging_path(target)
        tmp_zip: Path | None = None
        try:
            tmp.mkdir()
            files = _write_bundle(tmp, chunks, m, record, wts, weight_col, idata, report)
            fsync_tree(tmp)
            if zip:
                tmp_zip = staging_path(target)
                # Parquet and netCDF are compressed already: storing is as small and much faster.
                with zipfile.ZipFile(tmp_zip, "w", compression=zipfile.ZIP_STORED) as zf:
                    for f in [MANIFEST_NAME, *files]:
                        zf.write(tmp / f, arcname=f)
                fsync_path(tmp_zip)
                _install(tmp_zip, target)
                tmp_zip = None
            else:
                _install(tmp, target)
                tmp = None  # type: ignore[assignment]
        except OSError as e:
            if e.errno in _NO_SPACE:
                raise ReleaseError(
                    f"{target}: no space left on the device while writing the release ({e.strerror}); nothing was "
                    "written" + (" and the existing release is unchanged" if overwrite else "")
                ) from e
            raise
        finally:
            for leftover in (tmp, tmp_zip):
                if leftover is not None:
                    remove(leftover)
    return target


def _checked_stream(stream: DatasetStream, domain: Domain | None, private_data: Any) -> Iterator[Iterator[pd.DataFrame]]:
    """The stream's datasets, each an iterator of checked chunks (:func:`_checked_chunk`, run
    as each chunk is written: a bad chunk stops the write, and nothing is installed)."""
    if not (isinstance(stream.m, int) and stream.m >= 1):
        raise ReleaseError("a release needs at least one synthetic dataset")
    first: list[pd.DataFrame] = []

    def dataset(i: int, chunks: Iterable[pd.DataFrame]) -> Iterator[pd.DataFrame]:
        offset = 0
        for chunk in chunks:
            chunk = _checked_chunk(i, chunk, domain, private_data, offset, first[0] if first else None)
            if not first:
                first.append(chunk)
            offset += len(chunk)
            yield chunk
        if offset != stream.n_syn:
            raise ReleaseError(f"dataset {i} of the stream has {offset} rows, the stream says {stream.n_syn}")

    count = 0
    for i, chunks in enumerate(stream):
        count += 1
        yield dataset(i, chunks)
    if count != stream.m:
        raise ReleaseError(f"the stream gave {count} datasets, it says {stream.m}")


class _HashingFile:
    """A binary file that hashes (SHA-256) and counts what is written to it, so a release's
    checksums cost no second read of its files."""

    def __init__(self, f) -> None:
        self._f, self._hash, self.bytes = f, hashlib.sha256(), 0

    def write(self, data) -> int:
        self._hash.update(data)
        self.bytes += len(data)
        return self._f.write(data)

    def tell(self) -> int:
        return self.bytes

    def flush(self) -> None:
        self._f.flush()

    def close(self) -> None:
        self._f.close()

    @property
    def closed(self) -> bool:
        return self._f.closed

    def hexdigest(self) -> str:
        return self._hash.hexdigest()


def _parquet_ready(frame: pd.DataFrame) -> pd.DataFrame:
    """``frame`` with each categorical column whose categories mix numbers and text
    (:func:`~synthinfer.release.manifest.stored_as_text`) as the categories' text."""
    for c in frame.columns:
        cats = _category_list(frame[c])
        if cats is not None and stored_as_text(cats):
            text = [category_text(v) for v in cats]
            if len(set(text)) < len(text):
                raise ReleaseError(f"column {c!r}: categories {cats} have the same text form, which a release "
                                   "stores for categories that mix numbers and text")
            frame = frame.assign(**{c: frame[c].cat.rename_categories(text)})
    return frame


def _write_dataset(path: Path, chunks: Iterable[pd.DataFrame], weights: np.ndarray | None,
                   weight_col: str | None) -> tuple[pd.DataFrame | None, int, dict[str, Any]]:
    """Write one dataset's chunks to ``path`` as Parquet row groups; return its first chunk,
    its row count and its manifest entry (SHA-256 and size, computed while writing)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    first, rows, writer, schema = None, 0, None, None
    with open(path, "wb") as f:
        sink = _HashingFile(f)
        try:
            for chunk in chunks:
                out = _parquet_ready(chunk.reset_index(drop=True))
                if weights is not None:
                    out = out.assign(**{weight_col: weights[rows:rows + len(out)]})
                table = pa.Table.from_pandas(out, schema=schema, preserve_index=False)
                if writer is None:
                    first, schema = chunk, table.schema
                    writer = pq.ParquetWriter(sink, schema)
                writer.write_table(table)
                rows += len(out)
        finally:
            if writer is not None:
                writer.close()
    if writer is None:
        raise ReleaseError(f"{path.name}: a dataset with no rows")
    return first, rows, {"sha256": sink.hexdigest(), "bytes": sink.bytes}


def _write_bundle(tmp: Path, datasets: Iterable[Iterable[pd.DataFrame]], m: int, record: ReleaseRecord,
                  wts: list[np.ndarray] | None, weight_col: str | None, idata: Any, report: bool) -> list[str]:
    """Write the ``m`` datasets (each an iterable of chunks of rows), the posterior, the public
    report (``report``) and the manifest into the empty folder ``tmp``; return the names of the
    files besides the manifest."""
    domain = record.domain
    width = max(3, len(str(m - 1)))
    (tmp / DATA_DIR).mkdir()
    names, n_syn, info, frame0 = [], [], {}, None
    for i, chunks in enumerate(datasets):
        rel = f"{DATA_DIR}/synthetic_{i:0{width}d}.parquet"
        first, rows, info[rel] = _write_dataset(tmp / rel, chunks, None if wts is None else wts[i], weight_col)
        frame0 = first if frame0 is None else frame0
        names.append(rel)
        n_syn.append(rows)
    if idata is not None:
        (tmp / POSTERIOR_NAME).write_bytes(_netcdf_bytes(idata))
        info[POSTERIOR_NAME] = {"sha256": sha256_file(tmp / POSTERIOR_NAME), "bytes": (tmp / POSTERIOR_NAME).stat().st_size}
    files = sorted(names + ([POSTERIOR_NAME] if idata is not None else []))
    as_midpoints, in_bins = _numeric_columns(frame0, domain)
    manifest = {
        "format": FORMAT_NAME,
        "format_version": FORMAT_VERSION,
        "synthinfer_version": _synthinfer_version(),
        "created": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "mechanism": record.mechanism,
        "settings": record.settings,
        "domain": None if domain is None else domain.to_dict(),
        "marginals": record.marginals,
        "privacy": to_jsonable(record.ledger.to_dict(), "privacy"),
        "n": record.n,
        "n_syn": n_syn[0] if len(set(n_syn)) == 1 else n_syn,
        "m": m,
        "seed_fixed": record.seed_fixed,
        "midpoints": as_midpoints,
        "numbers_in_bins": in_bins,
        "diagnostics": record.diagnostics,
        "columns": [str(c) for c in frame0.columns],
        # Parquet loses the categorical dtype of non-string categories (and so the unused
        # categories a fixed design matrix needs); record the categories to restore them.
        "categories": _categories(frame0),
        "weight_column": weight_col,
        "datasets": names,
        "posterior": POSTERIOR_NAME if idata is not None else None,
        "files": {f: info[f] for f in files},
    }
    if report:
        (tmp / REPORT_NAME).write_text(_public_report(tmp, manifest), encoding="utf-8")
        manifest["report"] = REPORT_NAME
        manifest["files"][REPORT_NAME] = {"sha256": sha256_file(tmp / REPORT_NAME),
                                          "bytes": (tmp / REPORT_NAME).stat().st_size}
        files = sorted([*files, REPORT_NAME])
    (tmp / MANIFEST_NAME).write_text(json.dumps(manifest, indent=2, allow_nan=False) + "\n")
    return files


def _public_report(tmp: Path, manifest: dict[str, Any]) -> str:
    """The public report of the bundle being written in ``tmp`` (from its synthetic datasets and
    manifest only), its datasets read back as the reader decodes them, when small enough."""
    from synthinfer.release.reader import IN_MEMORY_BYTES, LazyDatasets, Release
    from synthinfer.reporting import MAX_DATASETS, report

    files = manifest["files"]
    small = sum(int(files[name]["bytes"]) for name in manifest["datasets"]) <= IN_MEMORY_BYTES
    lazy = LazyDatasets(tmp, manifest)
    datasets = [lazy.load(i) for i in range(min(len(manifest["datasets"]), MAX_DATASETS))] if small else []
    return report(Release(tmp, manifest, datasets, None, None, None)).html


def _netcdf_bytes(idata: Any) -> bytes:
    """The posterior as a netCDF4 file (one HDF5 group per InferenceData group, numeric
    variables zlib-compressed: what ``InferenceData.to_netcdf`` writes), built in memory.

    HDF5 aborts the whole process when a disk write fails (a full disk ends in SIGSEGV), so
    it never writes to the disk: the bytes are written by Python, whose failure is an
    ``OSError``."""
    import xarray as xr

    buf = io.BytesIO()
    mode = "w"
    if idata.attrs:
        xr.Dataset(attrs=idata.attrs).to_netcdf(buf, mode=mode, engine="h5netcdf")
        mode = "a"
    for group in idata.groups():
        data = getattr(idata, group)
        encoding = {name: {"zlib": True} for name, v in data.variables.items() if v.dtype.kind in "biufcS"}
        data.to_netcdf(buf, mode=mode, group=group, engine="h5netcdf", encoding=encoding)
        mode = "a"
    return buf.getvalue()


def _install(built: Path, target: Path) -> None:
    """Put the durable ``built`` release at ``target``, replacing any release there so that
    one of the two is at ``target`` at every instant, and make the change durable.

    The replacement is an atomic exchange of the two paths, after which ``built`` holds the
    old release and is removed (a crash before that leaves it to :func:`sweep_staging`).
    Without exchange the old release is renamed to a ``.old`` staging name first, and
    restored if the second rename fails."""
    if not target.exists() and not target.is_symlink():
        os.rename(built, target)
    elif exchange(built, target):
        fsync_path(target.parent)
        with contextlib.suppress(OSError):  # the new release is in place; the next write sweeps the old
            remove(built)
    else:
        old = staging_path(target, ".old")
        os.rename(target, old)
        try:
            os.rename(built, target)
        except BaseException:
            os.rename(old, target)
            raise
        fsync_path(target.parent)
        with contextlib.suppress(OSError):
            remove(old)
    fsync_path(target.parent)
