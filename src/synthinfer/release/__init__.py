"""Release bundles: the m synthetic datasets, their provenance and privacy record, checksummed.

The data holder calls ``write_release(path, gen.generate(m), record=gen.release_record(), private_data=df)``
(a :class:`ReleaseRecord` carries the mechanism's provenance and privacy record); the analyst
calls :func:`open_release` and then ``release.analyze(formula, model=...)``.
"""

from synthinfer.release.manifest import FORMAT_VERSION, MANIFEST_NAME
from synthinfer.release.reader import LazyDatasets, Release, open_release
from synthinfer.release.record import ReleaseRecord
from synthinfer.release.stream import DatasetStream
from synthinfer.release.writer import PRIVATE_ATTR, mark_private, write_release

__all__ = [
    "DatasetStream",
    "FORMAT_VERSION",
    "LazyDatasets",
    "MANIFEST_NAME",
    "PRIVATE_ATTR",
    "Release",
    "ReleaseRecord",
    "mark_private",
    "open_release",
    "write_release",
]
