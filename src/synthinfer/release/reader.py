"""Opening a release bundle: verify every checksum and the format version, then load it."""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import tempfile
import warnings
import zipfile
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from synthinfer.data import Domain, Marginal
from synthinfer.data.encoding import category_text
from synthinfer.errors import ReleaseError, UnsupportedAnalysisWarning, user_stacklevel
from synthinfer.privacy import PrivacyLedger
from synthinfer.release.manifest import MANIFEST_NAME, check_manifest, sha256_bytes, stored_as_text

if TYPE_CHECKING:
    from synthinfer.analysis.support import SupportReport


class Release:
    """An opened, verified release: the m synthetic datasets and how they were made.

    Attributes
    ----------
    path : where the bundle was read from.
    manifest : the parsed ``manifest.json``.
    datasets : the m synthetic datasets (``DataFrame``; categorical columns keep their Domain
        categories): a list, or for a release opened with ``in_memory=False`` (the default for
        large ones) a :class:`LazyDatasets` that reads each when it is used.
    weights : per-row weights, one array per dataset (lazy likewise), or None.
    posterior : the posterior draws as ArviZ ``InferenceData``, or None.
    domain, marginals, ledger : the public Domain, the measured marginals and the privacy record.
    diagnostics : the generator's summary of its fit (e.g. NAPSU-MQ's convergence checks), or None.
    n, n_syn, m : rows of the private data, rows of each synthetic dataset, number of datasets.
    fingerprint : SHA-256 of ``manifest.json``. The manifest checksums every other file, so this
        one hash identifies the whole release; a data holder can publish it out of band so that
        analysts can also detect a rewritten manifest (which the checksums alone cannot).
    """

    def __init__(
        self,
        path: Path,
        manifest: dict[str, Any],
        datasets: list[pd.DataFrame],
        weights: list[np.ndarray] | None,
        posterior: Any,
        fingerprint: str,
    ):
        self.path = path
        self.fingerprint = fingerprint
        self.manifest = manifest
        self.datasets = datasets
        self.weights = weights
        self.posterior = posterior

    @property
    def domain(self) -> Domain | None:
        d = self.manifest.get("domain")
        return None if d is None else Domain.from_dict(d)

    @property
    def marginals(self) -> list[Marginal] | None:
        mg = self.manifest.get("marginals")
        return None if mg is None else [Marginal(tuple(c)) for c in mg]

    @property
    def ledger(self) -> PrivacyLedger:
        return PrivacyLedger.from_dict(self.manifest["privacy"])

    @property
    def diagnostics(self) -> dict[str, Any] | None:
        return self.manifest.get("diagnostics")

    @property
    def n(self) -> int:
        return int(self.manifest["n"])

    @property
    def n_syn(self) -> int | list[int]:
        return self.manifest["n_syn"]

    @property
    def m(self) -> int:
        return int(self.manifest["m"])

    def supports(self, formula: str) -> SupportReport:
        """Whether the measured marginals hold every relation the model of ``formula`` needs.

        Each term of the formula needs a measured marginal containing the outcome's variables
        and the term's (a logit of y on x₁..x_k needs every (y, x_j); an interaction x₁:x₂
        needs (y, x₁, x₂)); the reasoning is in :mod:`synthinfer.analysis.support`. Returns a
        :class:`~synthinfer.analysis.support.SupportReport` whose ``supported`` is True, False,
        or None when the release records no marginals (mechanisms without marginal queries).
        """
        from synthinfer.analysis.support import check_support

        columns = self.manifest.get("columns") or [str(c) for c in self.datasets[0].columns]
        domain = self.domain
        derived = {} if domain is None else domain.derived_sources
        return check_support(formula, columns, self.manifest.get("marginals"), f"the {self.manifest['mechanism']} release",
                             derived=derived)

    def _warn_unsupported(self, formula: str) -> None:
        report = self.supports(formula)
        if report.supported is False:
            warnings.warn(f"this release does not support {formula!r}: {report.reason}",
                          UnsupportedAnalysisWarning, stacklevel=user_stacklevel())

    def mix_posteriors(self, formula: str, model: str = "logit", **kwargs: Any):
        """A Bayesian analysis of the release: the analyst's posterior of ``formula`` on every
        synthetic dataset, mixed (:func:`synthinfer.bayes.mix_posteriors`; ArviZ InferenceData).

        Passes the release's ``n``; other keywords (prior, NUTS settings, seed) go to that
        function. Warns first when the measured marginals do not support the model
        (:meth:`supports`). Per-row weights are not used (the mixture is for unweighted
        releases; :class:`ReleaseError` if the release has them).
        """
        from synthinfer.bayes import mix_posteriors

        if self.weights is not None:
            raise ReleaseError("this release carries per-row weights, which the mixture of posteriors does not "
                               "use; analyse it with analyze()")
        self._warn_unsupported(formula)
        return mix_posteriors(self.datasets, formula, model, n=self.n, **kwargs)

    def analyze(self, formula: str, model: Any = "logit", *, use_weights: bool | None = None, **kwargs: Any):
        """Run ``formula`` on every synthetic dataset and combine with the synthetic-data rules.

        Passes the release's ``n`` (for the T* fallback of Supplement B eq. 10) and, unless
        ``use_weights=False``, its per-row weights. Other keywords go to
        :func:`synthinfer.analysis.analyze`. Before fitting, warns
        (:class:`~synthinfer.errors.UnsupportedAnalysisWarning`) when the measured marginals
        do not support the formula's model (:meth:`supports`).
        """
        from synthinfer.analysis import analyze

        if formula is not None:
            self._warn_unsupported(formula)

        if use_weights is None:
            use_weights = self.weights is not None
        if use_weights and self.weights is None:
            raise ReleaseError("use_weights=True, but this release has no weights")
        kwargs.setdefault("n", self.n)
        return analyze(
            self.datasets, formula, model=model, weights=self.weights if use_weights else None, **kwargs
        )

    def __repr__(self) -> str:
        eps = self.manifest["privacy"].get("spent", {}).get("epsilon")
        return (
            f"Release({str(self.path)!r}, mechanism={self.manifest['mechanism']!r}, m={self.m}, "
            f"n={self.n}, n_syn={self.n_syn}, epsilon_spent={eps}, "
            f"weights={'yes' if self.weights is not None else 'no'}, "
            f"posterior={'yes' if self.posterior is not None else 'no'})"
        )


@contextlib.contextmanager
def _bundle(path: Path) -> Iterator[tuple[list[str], Callable[[str], bytes], Callable[[str], Any]]]:
    """(member files, function reading one, function opening one as a binary stream) for a
    bundle directory or zip file."""
    if path.is_dir():
        names = [p.relative_to(path).as_posix() for p in path.rglob("*") if p.is_file()]
        yield names, lambda name: (path / name).read_bytes(), lambda name: open(path / name, "rb")
    elif zipfile.is_zipfile(path):
        with zipfile.ZipFile(path) as zf:
            yield [i.filename for i in zf.infolist() if not i.is_dir()], zf.read, zf.open
    else:
        raise ReleaseError(f"{path} is neither a release directory nor a zip file")


def _read_member(path: Path, name: str) -> bytes:
    with _bundle(path) as (_, read, _open):
        return read(name)


#: Above this many bytes of dataset files, :func:`open_release` reads datasets on demand
#: (``in_memory=None``): Parquet of categorical rows expands several-fold in memory.
IN_MEMORY_BYTES = 64 << 20


def open_release(path: str | os.PathLike, *, fingerprint: str | None = None,
                 in_memory: bool | None = None) -> Release:
    """Open the release at ``path`` (directory or zip), verifying it before loading anything.

    Raises :class:`ReleaseError` when the manifest is missing or of a newer format version, when
    a listed file is missing or its SHA-256 differs from the manifest (a changed file), when
    the bundle holds files the manifest does not list, or, if ``fingerprint`` (the SHA-256 of
    ``manifest.json`` published by the data holder) is given, when the manifest differs from it.

    ``in_memory``: load every dataset now (``True``), or read each when it is used
    (``False``: ``Release.datasets`` is a :class:`LazyDatasets`, which checks the file's
    SHA-256 again as it reads it, and ``analyze`` fits them a bounded number of rows at a time);
    default: in memory unless the dataset files hold more than :data:`IN_MEMORY_BYTES`. Every
    file is verified at opening either way, by streaming its bytes through the hash.
    """
    path = Path(path)
    if not path.exists():
        raise ReleaseError(f"no release at {path}")
    with _bundle(path) as (names, read, open_member):
        manifest, contents = _verified_contents(path, names, read, open_member, in_memory)
    actual = sha256_bytes(contents.pop(MANIFEST_NAME))
    if fingerprint is not None and fingerprint.lower() != actual:
        raise ReleaseError(f"{path}: manifest.json has SHA-256 {actual}, not the published {fingerprint}")
    for name in manifest["datasets"]:
        if name not in manifest["files"]:
            raise ReleaseError(f"{path}: dataset {name} is not among the checksummed files")
    lazy = LazyDatasets(path, manifest)
    if all(name in contents for name in manifest["datasets"]):  # kept, verified: load now
        loaded = [lazy.decode(i, contents[name]) for i, name in enumerate(manifest["datasets"])]
        datasets = [d for d, _ in loaded]
        weights = [w for _, w in loaded] if manifest.get("weight_column") else None
    else:
        datasets, weights = lazy, (LazyWeights(lazy) if manifest.get("weight_column") else None)
    posterior = None
    if manifest.get("posterior"):
        name = manifest["posterior"]
        if not isinstance(name, str) or name not in contents:
            raise ReleaseError(f"{path}: the posterior {name!r} is not among the checksummed files")
        try:
            posterior = _load_posterior(contents[name])
        except (ValueError, OSError) as e:
            raise ReleaseError(f"{path}: {name} is not a readable netCDF posterior ({str(e).splitlines()[0]})") from None
    return Release(path, manifest, datasets, weights, posterior, actual)


class LazyDatasets(Sequence):
    """A release's synthetic datasets, each read when it is used: ``datasets[i]`` reads dataset
    ``i``'s file, checks its SHA-256 against the manifest again (the file could have changed
    since the release was opened) and decodes it; nothing is cached."""

    def __init__(self, path: Path, manifest: dict[str, Any]) -> None:
        self.path, self.manifest = path, manifest
        self._names = list(manifest["datasets"])

    def __len__(self) -> int:
        return len(self._names)

    def __getitem__(self, i):
        if isinstance(i, slice):
            return [self.load(j) for j in range(*i.indices(len(self)))]
        return self.load(i)

    def rows(self, i: int) -> int:
        """Rows of dataset ``i`` (from the manifest; nothing is read)."""
        n_syn = self.manifest["n_syn"]
        return int(n_syn[i] if isinstance(n_syn, list) else n_syn)

    def load(self, i: int) -> pd.DataFrame:
        return self.read(i)[0]

    def read(self, i: int) -> tuple[pd.DataFrame, np.ndarray | None]:
        """Dataset ``i`` and its weights (None without a weight column), verified and decoded."""
        if not -len(self) <= i < len(self):
            raise IndexError(f"dataset {i} of a release of {len(self)}")
        name = self._names[i]
        data = _read_member(self.path, name)
        if sha256_bytes(data) != self.manifest["files"][name].get("sha256"):
            raise ReleaseError(f"{self.path}: file {name} was changed after release (SHA-256 mismatch)")
        return self.decode(i, data)

    def decode(self, i: int, data: bytes) -> tuple[pd.DataFrame, np.ndarray | None]:
        """Dataset ``i`` from its (verified) file's bytes: the weight column split off, the
        manifest's categories restored."""
        path, manifest, name = self.path, self.manifest, self._names[i]
        try:
            df = pd.read_parquet(io.BytesIO(data))
        except (ValueError, OSError) as e:  # pyarrow's ArrowInvalid is a ValueError
            raise ReleaseError(f"{path}: dataset {name} is not a readable Parquet file ({str(e).splitlines()[0]})") from None
        weight_col, weights = manifest.get("weight_column"), None
        if weight_col:
            if weight_col not in df.columns:
                raise ReleaseError(f"{path}: dataset {name} lacks the weight column {weight_col!r}")
            weights = df.pop(weight_col).to_numpy(dtype=float)
        for col, cats in (manifest.get("categories") or {}).items():
            if cats is not None and col in df.columns:
                if stored_as_text(cats):  # written as the categories' text (the writer's _parquet_ready)
                    stored = df[col].astype(object)
                    back = stored.map({category_text(v): v for v in cats})
                    df[col] = back.where(back.notna(), stored)  # unknown text stays, for the check below
                lost = df[col][df[col].notna() & ~df[col].isin(cats)]
                if len(lost):
                    raise ReleaseError(
                        f"{path}: dataset {name}, column {col!r} holds {sorted(map(str, set(lost)))[:5]}, "
                        f"not among the manifest's categories {cats}"
                    )
                df[col] = pd.Categorical(df[col], categories=cats)
        return df, weights


class LazyWeights(Sequence):
    """The per-row weights of a :class:`LazyDatasets`, read with their dataset when used."""

    def __init__(self, datasets: LazyDatasets) -> None:
        self._datasets = datasets

    def __len__(self) -> int:
        return len(self._datasets)

    def __getitem__(self, i):
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(self)))]
        return self._datasets.read(i)[1]


def _verified_contents(
    path: Path, names: list[str], read: Callable[[str], bytes], open_member: Callable[[str], Any],
    in_memory: bool | None,
) -> tuple[dict[str, Any], dict[str, bytes]]:
    """Parse and check the manifest, then check every listed file's SHA-256; returns the
    manifest and the verified bytes of the files kept: all of them when the datasets are loaded
    now (``in_memory``, or ``None`` and at most :data:`IN_MEMORY_BYTES` of dataset files),
    else all but the dataset files, which are streamed through the hash."""
    if MANIFEST_NAME not in names:
        raise ReleaseError(f"{path} has no {MANIFEST_NAME}; not a synthinfer release")
    try:
        manifest = json.loads(read(MANIFEST_NAME))
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise ReleaseError(f"{path}/{MANIFEST_NAME} is not valid JSON: {e}") from None
    manifest = check_manifest(manifest)
    listed = manifest["files"]
    extra = sorted(set(names) - set(listed) - {MANIFEST_NAME})
    if extra:
        raise ReleaseError(f"{path} holds files the manifest does not list: {extra}")
    datasets = set(manifest.get("datasets") or [])
    if in_memory is None:
        in_memory = sum(int(m.get("bytes", 0)) for f, m in listed.items() if f in datasets and isinstance(m, dict)) \
            <= IN_MEMORY_BYTES
    if in_memory:
        datasets = set()  # read and kept like the other files
    contents: dict[str, bytes] = {}
    for name, meta in listed.items():
        if name not in names:
            raise ReleaseError(f"{path}: file {name} listed in the manifest is missing")
        if name in datasets:
            h = hashlib.sha256()
            with open_member(name) as f:
                while block := f.read(1 << 20):
                    h.update(block)
            digest = h.hexdigest()
        else:
            contents[name] = read(name)
            digest = sha256_bytes(contents[name])
        if not isinstance(meta, dict) or digest != meta.get("sha256"):
            raise ReleaseError(f"{path}: file {name} was changed after release (SHA-256 mismatch)")
    contents[MANIFEST_NAME] = read(MANIFEST_NAME)
    return manifest, contents


def _load_posterior(data: bytes):
    from synthinfer.mcmc import import_arviz

    az = import_arviz()

    # netCDF readers want a file; load everything into memory so the file can go at once.
    with tempfile.TemporaryDirectory() as d:
        f = Path(d) / "posterior.nc"
        f.write_bytes(data)
        idata = az.from_netcdf(str(f))
        for group in idata.groups():
            getattr(idata, group).load()
        for group in idata.groups():
            getattr(idata, group).close()
    return idata
