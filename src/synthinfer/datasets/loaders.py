"""Loaders for the vendored datasets (see ``data/ATTRIBUTION.md``) and scikit-learn's."""

from __future__ import annotations

from importlib import resources
from typing import NamedTuple

import pandas as pd

from synthinfer.data.domain import Column, Domain
from synthinfer.data.discretize import binned_column


class Dataset(NamedTuple):
    """A table and, where one is known publicly, its Domain."""

    data: pd.DataFrame
    domain: Domain | None = None


def _read(name: str) -> pd.DataFrame:
    with resources.files("synthinfer.datasets").joinpath("data", name).open("rb") as f:
        return pd.read_csv(f, compression="gzip")


# Category sets of UCI Adult as documented in the dataset's public description (adult.names),
# i.e. public knowledge, not read off the data.
_ADULT_CATEGORIES = {
    "workclass": ["Federal-gov", "Local-gov", "Never-worked", "Private", "Self-emp-inc",
                  "Self-emp-not-inc", "State-gov", "Without-pay"],
    "education": ["Preschool", "1st-4th", "5th-6th", "7th-8th", "9th", "10th", "11th", "12th",
                  "HS-grad", "Some-college", "Assoc-voc", "Assoc-acdm", "Bachelors", "Masters",
                  "Prof-school", "Doctorate"],
    "marital-status": ["Divorced", "Married-AF-spouse", "Married-civ-spouse",
                       "Married-spouse-absent", "Never-married", "Separated", "Widowed"],
    "race": ["White", "Asian-Pac-Islander", "Amer-Indian-Eskimo", "Other", "Black"],
    "sex": ["Female", "Male"],
    "income": ["<=50K", ">50K"],
    "occupation": ["Adm-clerical", "Armed-Forces", "Craft-repair", "Exec-managerial", "Farming-fishing",
                   "Handlers-cleaners", "Machine-op-inspct", "Other-service", "Priv-house-serv",
                   "Prof-specialty", "Protective-serv", "Sales", "Tech-support", "Transport-moving"],
    "relationship": ["Husband", "Not-in-family", "Other-relative", "Own-child", "Unmarried", "Wife"],
    "native-country": ["Cambodia", "Canada", "China", "Columbia", "Cuba", "Dominican-Republic", "Ecuador",
                       "El-Salvador", "England", "France", "Germany", "Greece", "Guatemala", "Haiti",
                       "Holand-Netherlands", "Honduras", "Hong", "Hungary", "India", "Iran", "Ireland", "Italy",
                       "Jamaica", "Japan", "Laos", "Mexico", "Nicaragua", "Outlying-US(Guam-USVI-etc)", "Peru",
                       "Philippines", "Poland", "Portugal", "Puerto-Rico", "Scotland", "South", "Taiwan",
                       "Thailand", "Trinadad&Tobago", "United-States", "Vietnam", "Yugoslavia"],
}
#: The 15 columns of the full UCI Adult table, in its order.
ADULT_COLUMNS = ("age", "workclass", "fnlwgt", "education", "education-num", "marital-status", "occupation",
                 "relationship", "race", "sex", "capital-gain", "capital-loss", "hours-per-week",
                 "native-country", "income")
#: The 10 columns of the NAPSU-MQ paper's Adult experiment (Räisä et al. 2023, Supplement F).
ADULT_PAPER_COLUMNS = ("age", "workclass", "education", "marital-status", "race", "sex",
                       "capital-gain", "capital-loss", "hours-per-week", "income")
#: The 10 two-way marginals the NAPSU-MQ paper measures on Adult (Räisä et al. 2023, Section 5.2
#: and Supplement F, as listed in the authors' code): income with age, education, race, sex,
#: capital gain, capital loss and hours per week; age with marital status and workclass; race
#: with sex. On :func:`adult_paper_domain` they give 130 canonical queries.
ADULT_PAPER_MARGINALS: tuple[tuple[str, str], ...] = (
    ("age", "income"), ("age", "marital-status"), ("age", "workclass"), ("education", "income"),
    ("race", "income"), ("race", "sex"), ("sex", "income"), ("capital-gain", "income"),
    ("capital-loss", "income"), ("hours-per-week", "income"),
)
_BINARY = ["0", ">0"]
#: Public groups of Adult's numbers (their interior cuts): age 17-29, 30-44, 45-59, 60-74,
#: 75-90; hours-per-week 1-29, 30-39, 40, 41-49, 50-99 (40 is a third of the rows).
ADULT_NUMBER_GROUPS: dict[str, tuple[int, ...]] = {"age": (30, 45, 60, 75), "hours-per-week": (30, 40, 41, 50)}
_ADULT_NUMBER_BOUNDS = {"age": (17, 90), "hours-per-week": (1, 99)}
#: The marginals of the continuous-columns model on :func:`adult_numbers_domain`: the paper's 10
#: (:data:`ADULT_PAPER_MARGINALS`) with every pair of age or hours through its groups (``_g``),
#: every other pair of the analyst's variables (age, hours, race, sex: NAPSU-MQ Section 4.1;
#: without ``(age_g, hours-per-week_g)`` the synthetic numbers are independent given the other
#: columns, and the logit's age slope was biased by 2 real standard errors with the noise
#: negligible), and the fine 1-ways of age and hours (each number's shape inside its groups).
#: With ``NapsuMQ(coarse_interactions="linear")`` the log-odds of income are piecewise linear
#: in age and hours.
ADULT_NUMBERS_MARGINALS: tuple[tuple[str, ...], ...] = (
    ("age_g", "income"), ("age_g", "marital-status"), ("age_g", "workclass"), ("education", "income"),
    ("race", "income"), ("race", "sex"), ("sex", "income"), ("capital-gain", "income"),
    ("capital-loss", "income"), ("hours-per-week_g", "income"), ("age_g", "race"), ("age_g", "sex"),
    ("hours-per-week_g", "race"), ("hours-per-week_g", "sex"), ("age_g", "hours-per-week_g"), ("age",),
    ("hours-per-week",),
)


def adult_paper_domain() -> Domain:
    """The public Domain of the NAPSU-MQ Adult subset (1,792,000 cells).

    Age and hours-per-week are cut into 5 equal-width buckets over their documented ranges
    (17-90 and 1-99 years/hours), capital gain and loss into "0" / ">0" (Supplement F).
    """
    cols = []
    for name in ADULT_PAPER_COLUMNS:
        if name == "age":
            cols.append(binned_column("age", bounds=(17, 90), bins=5))
        elif name == "hours-per-week":
            cols.append(binned_column("hours-per-week", bounds=(1, 99), bins=5))
        elif name in ("capital-gain", "capital-loss"):
            cols.append(Column(name, tuple(_BINARY)))
        else:
            cols.append(Column(name, tuple(_ADULT_CATEGORIES[name])))
    return Domain(cols)


def adult_domain(*, derived: bool = False) -> Domain:
    """The public Domain of all 15 Adult columns, categorical (about 5.6e14 cells).

    As :func:`adult_paper_domain` for its 10 columns; fnlwgt in 5 equal-width bins over its
    documented range [12285, 1490400], education-num as 16 categories 1..16, occupation,
    relationship and native-country with the category sets of the dataset's description.
    ``derived=True``: education-num is declared a derived column of education (the dataset's
    documented code of each level, 1 for Preschool to 16 for Doctorate, in the order of
    education's categories), so generators that model the dependency keep it exact.
    """
    paper = {c.name: c for c in adult_paper_domain().columns}
    cols = []
    for name in ADULT_COLUMNS:
        if name in paper:
            cols.append(paper[name])
        elif name == "fnlwgt":
            cols.append(binned_column("fnlwgt", bounds=(12285, 1490400), bins=5))
        elif name == "education-num":
            levels = tuple(str(v) for v in range(1, 17))
            if derived:  # the documented code of each education level, in education's order
                cols.append(Column(name, levels, derived_from="education",
                                   derive=tuple(zip(paper["education"].categories, levels))))
            else:
                cols.append(Column(name, levels))
        else:
            cols.append(Column(name, tuple(_ADULT_CATEGORIES[name])))
    return Domain(cols)


def adult_number_edges(column: str, width: int = 3) -> tuple[int, ...]:
    """Edges of ``width``-unit bins of Adult's ``"age"`` or ``"hours-per-week"`` (whole numbers):
    ``width`` units from the lower bound and from each group's cut (:data:`ADULT_NUMBER_GROUPS`),
    so that every bin lies in one group; the last bin is closed at the upper bound."""
    if column not in ADULT_NUMBER_GROUPS:
        raise ValueError(f"Adult's numbers in groups are {sorted(ADULT_NUMBER_GROUPS)}, got {column!r}")
    if isinstance(width, bool) or not isinstance(width, int) or width < 1:
        raise ValueError(f"width must be a positive whole number of units, got {width!r}")
    lo, hi = _ADULT_NUMBER_BOUNDS[column]
    starts = (lo, *ADULT_NUMBER_GROUPS[column], hi + 1)
    return tuple(sorted({e for a, b in zip(starts[:-1], starts[1:]) for e in range(a, b, width) if e < hi} | {hi}))


def adult_numbers_domain(width: int = 3) -> Domain:
    """The Domain of the paper's Adult subset with age and hours-per-week as whole numbers.

    As :func:`adult_paper_domain`, but age (17-90) and hours-per-week (1-99) are integer
    columns in ``width``-unit bins (:func:`adult_number_edges`; numbers drawn back inside them
    by ``generate(numbers=...)``), each followed by its public groups, ``age_g`` and
    ``hours-per-week_g`` (:data:`ADULT_NUMBER_GROUPS`; derived columns, which fits compute from
    the numbers). The model is :data:`ADULT_NUMBERS_MARGINALS`.
    """
    from synthinfer.data.domain import Binning

    cols = []
    for c in adult_paper_domain().columns:
        if c.name not in ADULT_NUMBER_GROUPS:
            cols.append(c)
            continue
        b = Binning(tuple(float(e) for e in adult_number_edges(c.name, width)), integer=True)
        fine = Column(c.name, tuple(b.labels()), binning=b)
        cols += [fine, Column.groups_of(fine, ADULT_NUMBER_GROUPS[c.name], name=c.name + "_g")]
    return Domain(cols)


def load_adult(paper_subset: bool = False, *, categorical: bool = False, numbers: bool = False) -> Dataset:
    """UCI Adult (Kohavi & Becker 1996; CC BY 4.0), train and test parts together.

    ``paper_subset=False``: the full 48,842 x 15 table with missing values as NaN, domain None.
    ``paper_subset=True``: the NAPSU-MQ paper's version (Räisä et al. 2023, Section 5.2 and
    Supplement F): the 10 columns of :data:`ADULT_PAPER_COLUMNS`, rows with a missing value
    dropped (n = 46,043), age and hours-per-week in 5 buckets and capital gain/loss binary,
    every column categorical, returned with :func:`adult_paper_domain`. Map the buckets back
    to numbers with ``decode(..., midpoints=True)`` or ``domain.midpoints("age")``.
    ``categorical=True`` (without the subset): all 15 columns on :func:`adult_domain`, rows with
    a missing value dropped (n = 45,222). ``numbers=True`` (with the subset): the same rows with
    age and hours-per-week as whole numbers, returned with :func:`adult_numbers_domain`.
    """
    df = _read("adult.csv.gz").drop(columns=["split"])
    if paper_subset and categorical:
        raise ValueError("choose paper_subset or categorical, not both")
    if numbers and not paper_subset:
        raise ValueError("numbers=True goes with paper_subset=True")
    if not (paper_subset or categorical):
        return Dataset(df, None)
    domain = adult_paper_domain() if paper_subset else adult_domain()
    df = df[list(domain.names)].dropna().reset_index(drop=True)
    out = {}
    for col in domain.columns:
        x = df[col.name]
        if col.binning is not None:
            codes = col.binning.codes(x.to_numpy(float))
        elif col.name in ("capital-gain", "capital-loss"):
            codes = (x.to_numpy() > 0).astype(int)
        elif col.name == "education-num":
            codes = x.to_numpy(int) - 1
        else:
            codes = pd.Index(col.categories).get_indexer(x)
            assert (codes >= 0).all(), col.name  # the documented category sets cover the data
        out[col.name] = pd.Categorical.from_codes(codes, categories=list(col.categories))
        if numbers and col.name in ADULT_NUMBER_GROUPS:
            out[col.name] = x.to_numpy(int)
    return Dataset(pd.DataFrame(out), adult_numbers_domain() if numbers else domain)


def load_framingham() -> Dataset:
    """Framingham heart study teaching data, 4,240 x 16, target ``TenYearCHD`` (has missing values)."""
    return Dataset(_read("framingham.csv.gz"))


def load_heart_cleveland() -> Dataset:
    """UCI Heart Disease, Cleveland (CC BY 4.0), 303 rows; adds binary ``target = num > 0``."""
    df = _read("heart_cleveland.csv.gz")
    df["target"] = (df["num"] > 0).astype(int)
    return Dataset(df)


def load_boston() -> Dataset:
    """Boston housing (Harrison & Rubinfeld 1978), 506 x 14, target ``MEDV``.

    Kept because Ghalebikesabi et al. (2022) use it; note its known ethical problem (the
    ``B`` column encodes a racial proportion).
    """
    return Dataset(_read("boston.csv.gz"))


def _sklearn_frame(bunch) -> pd.DataFrame:
    df = pd.DataFrame(bunch.data, columns=[str(c) for c in bunch.feature_names])
    df["target"] = bunch.target
    return df


def load_iris() -> Dataset:
    """Iris, from scikit-learn: 150 x 4 features and ``target`` in {0, 1, 2}."""
    from sklearn import datasets

    return Dataset(_sklearn_frame(datasets.load_iris()))


def load_breast_cancer() -> Dataset:
    """Breast Cancer Wisconsin (diagnostic), from scikit-learn: 569 x 30 features and ``target``."""
    from sklearn import datasets

    return Dataset(_sklearn_frame(datasets.load_breast_cancer()))
