"""The release manifest: what a bundle contains, how it was made, and the checksum of every file.

``manifest.json`` is the only file of a bundle that is not checksummed (it holds the checksums).
Its ``format_version`` is bumped whenever a reader of an older synthinfer could misread a bundle;
:func:`check_manifest` refuses bundles written in a newer format instead of guessing.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from synthinfer.errors import ReleaseError

FORMAT_NAME = "synthinfer-release"
FORMAT_VERSION = 1
MANIFEST_NAME = "manifest.json"
#: The public HTML report written into a release (synthinfer.reporting), listed and checksummed
#: like every other file
REPORT_NAME = "report.html"

# Settings keys that would carry a seed's value into a public file (COMMON rule: record only
# whether a seed was fixed, never the seed).
_SEED_KEYS = frozenset({"seed", "random_state", "rng", "rng_key", "key", "prng_key"})

_REQUIRED = (
    "format",
    "format_version",
    "synthinfer_version",
    "created",
    "mechanism",
    "settings",
    "privacy",
    "n",
    "n_syn",
    "m",
    "seed_fixed",
    "datasets",
    "files",
)


def sha256_file(path: Path, chunk: int = 1 << 20) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(chunk):
            h.update(block)
    return h.hexdigest()


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def stored_as_text(categories: Sequence[Any]) -> bool:
    """Whether a categorical column's values are stored as their text in a release's Parquet
    files: its categories mix numbers with text (numeric categories with a Domain's
    ``"<missing>"`` appended), which a Parquet dictionary column, of one value type, cannot
    hold. The manifest keeps the categories themselves, and the reader maps the text back."""
    return len({isinstance(c, str) for c in categories}) > 1


def to_jsonable(value: Any, where: str = "settings") -> Any:
    """Convert settings to plain JSON types (numpy scalars/arrays, tuples, Paths, objects with
    ``to_dict``); raise :class:`ReleaseError` naming the entry that cannot be represented."""
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, (int, np.integer)):
        return int(value)
    if isinstance(value, (float, np.floating)):
        v = float(value)
        if not math.isfinite(v):
            return str(v)  # JSON has no inf/nan; keep them readable
        return v
    if isinstance(value, np.bool_):
        return bool(value)
    if isinstance(value, np.ndarray):
        return to_jsonable(value.tolist(), where)
    if isinstance(value, Mapping):
        out = {}
        for k, v in value.items():
            if not isinstance(k, str):
                k = str(k)
            out[k] = to_jsonable(v, f"{where}.{k}")
        return out
    if isinstance(value, (list, tuple, set, frozenset)):
        items = sorted(value, key=str) if isinstance(value, (set, frozenset)) else value
        return [to_jsonable(v, f"{where}[{i}]") for i, v in enumerate(items)]
    if isinstance(value, Path):
        return str(value)
    if hasattr(value, "to_dict"):
        return to_jsonable(value.to_dict(), where)
    raise ReleaseError(
        f"{where}: a {type(value).__name__} cannot be written to manifest.json; "
        "pass plain numbers, strings, lists or dicts"
    )


def check_no_seed(settings: Mapping[str, Any], where: str = "settings") -> None:
    """Refuse settings that contain a seed's value (only ``seed_fixed`` may be published)."""
    for k, v in settings.items():
        if str(k).lower() in _SEED_KEYS and v is not None:
            raise ReleaseError(
                f"{where}.{k}: a seed's value must never be published; drop it from the settings "
                "and pass seed_fixed=True instead"
            )
        if isinstance(v, Mapping):
            check_no_seed(v, f"{where}.{k}")


def check_manifest(manifest: Any) -> dict[str, Any]:
    """Validate a parsed manifest: format name, a format version this reader knows, required keys."""
    if not isinstance(manifest, dict):
        raise ReleaseError("manifest.json is not a JSON object")
    if manifest.get("format") != FORMAT_NAME:
        raise ReleaseError(f"manifest.json: format is {manifest.get('format')!r}, expected {FORMAT_NAME!r}")
    version = manifest.get("format_version")
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise ReleaseError(f"manifest.json: invalid format_version {version!r}")
    if version > FORMAT_VERSION:
        raise ReleaseError(
            f"this release uses format version {version}, newer than the {FORMAT_VERSION} this "
            f"synthinfer understands (written by synthinfer {manifest.get('synthinfer_version', '?')}); "
            "upgrade synthinfer to open it"
        )
    missing = [k for k in _REQUIRED if k not in manifest]
    if missing:
        raise ReleaseError(f"manifest.json lacks required entries {missing}")
    if not isinstance(manifest["files"], dict):
        raise ReleaseError("manifest.json: 'files' must map file names to checksums")
    for key in ("n", "m"):
        if not _positive_int(manifest[key]):
            raise ReleaseError(f"manifest.json: {key!r} must be a positive integer, got {manifest[key]!r}")
    n_syn = manifest["n_syn"]
    if not (_positive_int(n_syn) or (isinstance(n_syn, list) and n_syn and all(map(_positive_int, n_syn)))):
        raise ReleaseError(f"manifest.json: 'n_syn' must be a positive integer or a list of them, got {n_syn!r}")
    datasets = manifest["datasets"]
    if not (isinstance(datasets, list) and datasets and all(isinstance(d, str) for d in datasets)):
        raise ReleaseError(f"manifest.json: 'datasets' must be a non-empty list of file names, got {datasets!r}")
    if not isinstance(manifest["privacy"], dict) or not isinstance(manifest["privacy"].get("total"), dict):
        raise ReleaseError("manifest.json: 'privacy' must be the ledger's record (with its 'total')")
    return manifest


def _positive_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and v >= 1
