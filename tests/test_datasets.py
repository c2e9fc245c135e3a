import numpy as np
import pytest

from synthinfer import datasets
from synthinfer.data import encode


def test_adult_full():
    df, dom = datasets.load_adult()
    assert df.shape == (48842, 15)
    assert dom is None


def test_adult_paper_subset():
    df, dom = datasets.load_adult(paper_subset=True)
    assert df.shape == (46043, 10)
    assert dom.size == 1_792_000
    assert tuple(df.columns) == datasets.ADULT_PAPER_COLUMNS
    codes = encode(df, dom)  # every value inside the public domain
    assert codes.shape == (46043, 10)
    np.testing.assert_allclose(dom.midpoints("age"), [24.3, 38.9, 53.5, 68.1, 82.7])
    assert set(df["capital-gain"].unique()) == {"0", ">0"}


def test_adult_paper_marginals():
    dom = datasets.adult_paper_domain()
    marginals = datasets.ADULT_PAPER_MARGINALS
    assert len(set(marginals)) == 10 and all(len(set(m)) == 2 for m in marginals)
    assert {c for m in marginals for c in m} == set(datasets.ADULT_PAPER_COLUMNS) == set(dom.names)
    k = {c: len(dom[c].categories) for c in dom.names}
    # 159 marginal cells; the log-linear model of these marginals has one parameter per column
    # category beyond the first and per pair of such categories: the paper's 130 queries.
    assert sum(k[a] * k[b] for a, b in marginals) == 159
    assert sum(k[c] - 1 for c in dom.names) + sum((k[a] - 1) * (k[b] - 1) for a, b in marginals) == 130


@pytest.mark.parametrize("width", [1, 2, 3, 5])
def test_adult_numbers_bins_lie_inside_the_groups(width):
    dom = datasets.adult_numbers_domain(width)
    for col, (lo, hi) in {"age": (17, 90), "hours-per-week": (1, 99)}.items():
        whole = np.arange(lo, hi + 1, dtype=float)  # every whole number of the column, in one bin each
        codes = dom[col].binning.codes(whole)
        sizes = np.bincount(codes)
        assert sizes.sum() == whole.size and sizes.min() >= 1
        assert sizes[:-1].max() <= width and sizes[-1] <= width + 1  # the last bin is closed at the bound
        groups = np.searchsorted(datasets.ADULT_NUMBER_GROUPS[col], whole, side="right")
        assert all(len(set(groups[codes == k])) == 1 for k in range(codes.max() + 1))  # no bin spans two groups
        _, table = dom.derived[col + "_g"]
        np.testing.assert_array_equal(table[codes], groups)
    with pytest.raises(ValueError, match="width"):
        datasets.adult_number_edges("age", 0)
    with pytest.raises(ValueError, match="'workclass'"):
        datasets.adult_number_edges("workclass")


def test_adult_with_numbers():
    df, dom = datasets.load_adult(paper_subset=True, numbers=True)
    paper, _ = datasets.load_adult(paper_subset=True)
    assert df.shape == (46043, 10) and df["age"].dtype.kind == "i" and df["hours-per-week"].between(1, 99).all()
    assert (df["workclass"] == paper["workclass"]).all()
    codes = encode(df, dom)  # the group columns computed from the numbers
    assert codes.shape == (46043, 12)
    assert {c for m in datasets.ADULT_NUMBERS_MARGINALS for c in m} == set(dom.names)
    with pytest.raises(ValueError, match="paper_subset"):
        datasets.load_adult(numbers=True)


def test_other_loaders():
    assert datasets.load_framingham().data.shape == (4240, 16)
    heart = datasets.load_heart_cleveland().data
    assert len(heart) == 303 and heart["target"].sum() == 139
    assert datasets.load_boston().data.shape == (506, 14)
    assert datasets.load_iris().data.shape == (150, 5)
    assert datasets.load_breast_cancer().data.shape == (569, 31)


def test_toy_logistic():
    df, dom = datasets.make_toy_logistic(n=20000, coef=(1.0, 0.0), seed=0)
    assert dom.names == ("x1", "x2", "y")
    assert set(np.unique(df.to_numpy())) <= {0, 1}
    # P(y=1 | x1=1) = sigmoid(1) = 0.731, P(y=1 | x1=0) = 0.5; 5 binomial standard errors
    for x1, p in [(1, 1 / (1 + np.exp(-1))), (0, 0.5)]:
        sub = df.loc[df.x1 == x1, "y"]
        assert abs(sub.mean() - p) < 5 * np.sqrt(p * (1 - p) / len(sub))
    again, _ = datasets.make_toy_logistic(n=20000, seed=0)
    assert again.equals(df)
    with pytest.raises(ValueError):
        datasets.make_toy_logistic(coef=(1.0,))


def test_triangle_square():
    real, syn = datasets.make_triangle_square(n=5000, seed=0)
    assert (real.sum(axis=1) < 1).all()
    assert abs((syn.sum(axis=1) < 1).mean() - 0.5) < 5 * np.sqrt(0.25 / 5000)
