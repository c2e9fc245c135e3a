"""Private bin edges: discretise continuous columns at DP quantiles, with the budget in the ledger.

A column given as ``{"name": "age", "bounds": [17, 90], "bins": "private:K"}``
(:class:`~synthinfer.data.domain.PrivateBins`) gets the ``K - 1`` interior edges at its
``i / K``-quantiles (``i = 1, ..., K - 1``), each drawn by the exponential mechanism of Smith
(2011) among public candidate edges (:func:`candidate_edges`) through OpenDP
(:func:`synthinfer.privacy.quantile_mechanism`). The bounds and the candidates are public;
nothing else is read from the private data without budget. Bins of about equal mass keep each
bin's counts large next to the noise of the marginal queries, where equal-width bins over
public bounds leave the tails of a skewed column nearly empty (the rare bins then dominate
the between-dataset variance of any coefficient on the column).

Checks before any spend (:func:`check_private_bins`): the values are numbers inside the
public bounds (an error names the column and how many rows, never the values), no value is
missing, and the budget is large enough for the bins asked for: the exponential mechanism's
typical rank error, ``(2 / epsilon_q) ln G`` rows for ``G`` candidates, must be below a bin's
mass ``n / K``.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from synthinfer.data.domain import PRIVATE_BIN_GRID, Binning, Column, Domain, PrivateBins
from synthinfer.errors import (
    ArgumentTypeError,
    DomainError,
    MissingValueError,
    OutOfDomainError,
    ParameterError,
    SynthinferWarning,
    UnknownColumnError,
    user_stacklevel,
)


def candidate_edges(column: PrivateBins) -> np.ndarray:
    """The public candidate interior edges of a privately binned column.

    Whole numbers strictly inside the bounds for an integer column (an edge ``c`` starts the
    bin ``[c, ...)``; the last bin ``[c, upper]`` then holds at least two numbers), thinned to
    about :data:`~synthinfer.data.domain.PRIVATE_BIN_GRID` when there are more; otherwise
    :data:`~synthinfer.data.domain.PRIVATE_BIN_GRID` - 1 equal steps strictly inside the bounds."""
    lo, hi = column.lower, column.upper
    if column.integer:
        c = np.arange(lo + 1.0, hi)
        if c.size > PRIVATE_BIN_GRID:
            c = np.unique(np.round(np.linspace(lo + 1.0, hi - 1.0, PRIVATE_BIN_GRID)))
        return c
    return lo + (hi - lo) * np.arange(1, PRIVATE_BIN_GRID) / PRIVATE_BIN_GRID


def typical_rank_error(epsilon_each: float, n_candidates: int) -> float:
    """Rows by which an exponential-mechanism quantile typically misses its rank:
    ``(2 / epsilon_each) ln G`` (scale ``2 / epsilon`` of the Gumbel noise on integer rank scores,
    times the log of the number of candidates it must beat)."""
    return 2.0 / epsilon_each * math.log(max(n_candidates, 2))


@dataclass(frozen=True)
class _Request:
    column: PrivateBins
    values: np.ndarray
    candidates: np.ndarray


def private_columns(domain: Domain) -> list[PrivateBins]:
    """The Domain's columns whose bin edges are still to be chosen privately."""
    return [c for c in domain.columns if isinstance(c, PrivateBins)]


def check_private_bins(data: pd.DataFrame, domain: Domain, epsilon: float) -> list[_Request]:
    """Validate every privately binned column of ``domain`` on ``data`` for a spend of
    ``epsilon`` in all (split equally over the columns); spends nothing, raises on bad input."""
    cols = private_columns(domain)
    if not cols:
        return []
    if not isinstance(data, pd.DataFrame):
        raise ArgumentTypeError(f"private bin edges are computed from a pandas DataFrame, got {type(data).__name__}")
    if isinstance(epsilon, bool) or not isinstance(epsilon, (int, float)) or not math.isfinite(epsilon) or epsilon <= 0:
        raise ParameterError(f"the budget for private bin edges must be a number > 0, got {epsilon!r}")
    n = len(data)
    out = []
    for col in cols:
        if col.name not in data.columns:
            raise UnknownColumnError(f"the table lacks Domain column {col.name!r}")
        s = data[col.name]
        if isinstance(s.dtype, pd.CategoricalDtype):
            s = s.astype(object)
        x = pd.to_numeric(s, errors="coerce").to_numpy(dtype=float, na_value=np.nan)
        text = np.isnan(x) & s.notna().to_numpy()
        if text.any():
            raise DomainError(f"column {col.name!r}: {int(text.sum())} row(s) are not numbers; a privately binned "
                              "column holds numbers within its public bounds")
        if np.isnan(x).any():
            raise MissingValueError(f"column {col.name!r} has {int(np.isnan(x).sum())} missing values; a privately "
                                    "binned column has no missing category: remove or impute those rows first")
        outside = ~((x >= col.lower) & (x <= col.upper))  # also infinite values
        if outside.any():
            raise OutOfDomainError(
                f"column {col.name!r}: {int(outside.sum())} row(s) lie outside the public bounds "
                f"[{col.lower:g}, {col.upper:g}]; widen the bounds or clip explicitly "
                "(synthinfer.data.clip_to_bounds())")
        if col.integer and not (np.floor(x) == x).all():
            raise OutOfDomainError(f"column {col.name!r} holds whole numbers only, but "
                                   f"{int((np.floor(x) != x).sum())} row(s) have fractions")
        cands = candidate_edges(col)
        if cands.size < col.bins - 1:
            raise DomainError(f"column {col.name!r}: {col.bins} bins need {col.bins - 1} interior edges, but its "
                              f"bounds allow {cands.size}")
        each = epsilon / len(cols) / (col.bins - 1)
        err = typical_rank_error(each, cands.size)
        if err > n / col.bins:
            raise ParameterError(
                f"column {col.name!r}: {col.bins} private bins are too fine for the budget: each of its "
                f"{col.bins - 1} quantiles gets epsilon {each:.3g}, so it typically misses its rank by about "
                f"{err:,.0f} rows, more than a bin's {n / col.bins:,.0f} of {n:,}; ask for fewer bins or give the "
                "edges a larger share of the budget")
        out.append(_Request(col, x, cands))
    return out


def private_bin_edges(values: np.ndarray, column: PrivateBins, candidates: np.ndarray, *, epsilon: float,
                      ledger) -> Binning:
    """The privately chosen :class:`~synthinfer.data.domain.Binning` of one column (checked
    values, see :func:`check_private_bins`): ``column.bins - 1`` quantiles for ``epsilon``
    (charged to ``ledger`` first), sorted; quantiles that chose the same edge merge their bins
    (post-processing), with a warning."""
    from synthinfer.privacy import quantile_mechanism

    k = column.bins
    picks = quantile_mechanism(values, candidates=candidates, alphas=[i / k for i in range(1, k)], epsilon=epsilon,
                               ledger=ledger, name=f"private bin edges: {column.name}")
    interior = np.unique(picks)
    if interior.size < k - 1:
        warnings.warn(f"column {column.name!r}: {k - 1 - interior.size} of its {k - 1} private quantiles chose an edge "
                      f"another had chosen, so it has {interior.size + 1} bins instead of {k}",
                      SynthinferWarning, stacklevel=user_stacklevel())
    edges = np.concatenate([[column.lower], interior, [column.upper]])
    return Binning(tuple(edges), integer=column.integer, private=True)


def resolve_private_bins(data: pd.DataFrame, domain: Domain, *, epsilon: float, ledger) -> Domain:
    """``domain`` with every :class:`~synthinfer.data.domain.PrivateBins` column replaced by a
    discretised :class:`~synthinfer.data.domain.Column` whose edges are its DP quantiles on
    ``data``, spending ``epsilon`` (``(epsilon, 0)``-DP in all, split equally over the columns)
    through ``ledger``. Every column is checked and the budget verified before the first draw.
    Returns ``domain`` itself when no column asks for private bins (nothing is spent)."""
    requests = check_private_bins(data, domain, epsilon)
    if not requests:
        return domain
    ledger.check("private bin edges", epsilon, 0.0, mechanism="exponential-mechanism quantiles")
    each = epsilon / len(requests)
    resolved = {}
    for r in requests:
        b = private_bin_edges(r.values, r.column, r.candidates, epsilon=each, ledger=ledger)
        resolved[r.column.name] = Column(r.column.name, tuple(b.labels()), b)
    return Domain([resolved.get(c.name, c) for c in domain.columns])


def planned_domain(domain: Domain) -> Domain:
    """``domain`` with each :class:`~synthinfer.data.domain.PrivateBins` column as ``bins``
    equal-width bins: the shape the model will have (or fewer bins, where quantiles coincide),
    for checks that must run before the edges are drawn. Never used to encode data."""
    cols = private_columns(domain)
    if not cols:
        return domain
    planned = {c.name: Column(c.name, tuple(b.labels()), b)
               for c in cols for b in [Binning.uniform(c.lower, c.upper, c.bins, integer=c.integer)]}
    return Domain([planned.get(c.name, c) for c in domain.columns])


def private_bin_columns(domain: Domain) -> Sequence[str]:
    """Columns of a (resolved) Domain whose bin edges were chosen privately."""
    return [c.name for c in domain.columns if isinstance(c, Column) and c.binning is not None and c.binning.private]


def numbers_to_draw(domain: Domain, midpoints: bool | Sequence[str], numbers: bool | Sequence[str] | None
                    ) -> bool | Sequence[str]:
    """A generator's ``numbers=`` for :func:`~synthinfer.data.decode`: as given (checked), or for
    ``None`` the columns the data holder gave as numbers with private bins, unless they are
    asked for as ``midpoints``."""
    from synthinfer.data.encoding import discretised_columns

    if numbers is None:
        mids = set(discretised_columns(domain, midpoints, "midpoints"))
        numbers = [c for c in private_bin_columns(domain) if c not in mids]
    discretised_columns(domain, numbers, "numbers")
    return numbers
