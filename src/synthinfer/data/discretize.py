"""Discretisation of continuous columns with *public* bin edges or bounds.

Bounds must be public knowledge (a survey's documented range, a regulation, ...), not the
min/max of the private data, which would leak the extreme records.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

from synthinfer.data.domain import Binning, Column
from synthinfer.errors import DomainError, NonFiniteError, UnknownColumnError


def binned_column(
    name: str,
    *,
    edges: Sequence[float] | None = None,
    bounds: tuple[float, float] | None = None,
    bins: int | None = None,
    labels: Sequence[str] | None = None,
) -> Column:
    """A Domain column for a number discretised by ``edges`` or by ``bounds`` + ``bins``.

    Examples
    --------
    >>> binned_column("age", bounds=(17, 90), bins=5).categories[0]
    '[17, 31.6)'
    """
    if (edges is None) == (bounds is None):
        raise DomainError(f"column {name!r}: give exactly one of edges= or bounds= (with bins=)")
    if edges is not None:
        binning = Binning(tuple(edges))
    else:
        if bins is None:
            raise DomainError(f"column {name!r}: bounds= needs bins=")
        binning = Binning.uniform(float(bounds[0]), float(bounds[1]), bins)
    cats = tuple(labels) if labels is not None else tuple(binning.labels())
    return Column(name, cats, binning)


def clip_to_bounds(df: pd.DataFrame, bounds: Mapping[str, tuple[float, float]]) -> pd.DataFrame:
    """Return a copy with the named numeric columns clipped to public ``(lower, upper)`` bounds.

    Clipping is an explicit, user-chosen step; :func:`encode` never clips silently.
    """
    out = df.copy()
    for name, (lo, hi) in bounds.items():
        if name not in out.columns:
            raise UnknownColumnError(f"column {name!r} is not in the table")
        x = pd.to_numeric(out[name], errors="raise").astype(float)
        if np.isinf(x).any():
            raise NonFiniteError(f"column {name!r} has infinite values")
        out[name] = x.clip(lo, hi)
    return out
