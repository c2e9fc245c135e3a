"""Release bundles: the m synthetic datasets, their provenance and privacy record, checksummed.

The data holder calls :func:`write_release`; the analyst calls :func:`open_release` and then
``release.analyze(formula, model=...)``.
"""

from synthinfer.release.manifest import FORMAT_VERSION, MANIFEST_NAME
from synthinfer.release.reader import Release, open_release
from synthinfer.release.writer import PRIVATE_ATTR, mark_private, write_release

__all__ = [
    "FORMAT_VERSION",
    "MANIFEST_NAME",
    "PRIVATE_ATTR",
    "Release",
    "mark_private",
    "open_release",
    "write_release",
]
