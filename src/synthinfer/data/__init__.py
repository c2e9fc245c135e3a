"""Data layer: the public Domain (categorical and continuous columns), encoding, discretisation
and marginal counting."""

from synthinfer.data.discretize import binned_column, clip_to_bounds
from synthinfer.data.domain import Binning, Column, Continuous, Domain, DomainColumn, DomainSpec, PrivateBins
from synthinfer.data.encoding import MISSING, decode, encode, with_missing_category
from synthinfer.data.marginals import (
    Marginal,
    QuerySet,
    as_marginals,
    count_codes,
    count_dataframe,
    count_file,
)
from synthinfer.data.private_bins import resolve_private_bins

__all__ = [
    "Binning",
    "Column",
    "Continuous",
    "Domain",
    "DomainColumn",
    "DomainSpec",
    "MISSING",
    "Marginal",
    "PrivateBins",
    "QuerySet",
    "as_marginals",
    "binned_column",
    "clip_to_bounds",
    "count_codes",
    "count_dataframe",
    "count_file",
    "decode",
    "encode",
    "resolve_private_bins",
    "with_missing_category",
]
