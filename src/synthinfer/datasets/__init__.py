"""Bundled real datasets and toy generators.

The CSV files in ``datasets/data/`` are vendored copies of public datasets; their origin and
licence are in ``datasets/data/ATTRIBUTION.md`` (kept next to the files, as their licences ask).
"""

from synthinfer.datasets.loaders import (
    ADULT_COLUMNS,
    ADULT_NUMBERS_MARGINALS,
    ADULT_NUMBER_GROUPS,
    ADULT_PAPER_COLUMNS,
    ADULT_PAPER_MARGINALS,
    Dataset,
    adult_domain,
    adult_number_edges,
    adult_numbers_domain,
    adult_paper_domain,
    load_adult,
    load_boston,
    load_breast_cancer,
    load_framingham,
    load_heart_cleveland,
    load_iris,
)
from synthinfer.datasets.toy import make_toy_logistic, make_triangle_square

__all__ = [
    "ADULT_COLUMNS",
    "ADULT_PAPER_COLUMNS",
    "ADULT_NUMBER_GROUPS",
    "ADULT_NUMBERS_MARGINALS",
    "ADULT_PAPER_MARGINALS",
    "Dataset",
    "adult_domain",
    "adult_number_edges",
    "adult_numbers_domain",
    "adult_paper_domain",
    "load_adult",
    "load_boston",
    "load_breast_cancer",
    "load_framingham",
    "load_heart_cleveland",
    "load_iris",
    "make_toy_logistic",
    "make_triangle_square",
]
