import numpy as np
import pandas as pd
import pytest

from synthinfer.data import MISSING, Domain, binned_column, clip_to_bounds, decode, encode, with_missing_category
from synthinfer.data.domain import Column
from synthinfer.errors import (
    DuplicateColumnError,
    EmptyDataError,
    MissingValueError,
    NonFiniteError,
    OutOfDomainError,
    UnknownColumnError,
)

D = Domain([Column("c", ("a", "b", "c")), binned_column("x", edges=[0, 10, 20, 30])])


def test_encode_decode_round_trip():
    df = pd.DataFrame({"c": ["b", "a", "c"], "x": [0.0, 15.0, 30.0], "extra": [1, 2, 3]})
    codes = encode(df, D)
    np.testing.assert_array_equal(codes, [[1, 0], [0, 1], [2, 2]])
    back = decode(codes, D)
    assert list(back["c"]) == ["b", "a", "c"]
    assert list(back["x"]) == ["[0, 10)", "[10, 20)", "[20, 30]"]
    assert list(decode(codes, D, midpoints=True)["x"]) == [5.0, 15.0, 25.0]
    # category labels of a binned column encode too
    np.testing.assert_array_equal(encode(back, D), codes)


def test_out_of_domain_names_column_value_and_count():
    df = pd.DataFrame({"c": ["a", "zz", "zz", "q"], "x": [1, 2, 3, 4]})
    with pytest.raises(OutOfDomainError, match=r"'c'.*3 row\(s\).*'zz'.*'q'"):
        encode(df, D)
    df = pd.DataFrame({"c": ["a", "a"], "x": [1, 31]})
    with pytest.raises(OutOfDomainError, match=r"'x'.*1 row\(s\) lie outside the public bounds") as info:
        encode(df, D)
    assert "31" not in str(info.value)  # a number outside public bounds is an extreme, identifying record


def test_missing_policies():
    df = pd.DataFrame({"c": ["a", None, "b"], "x": [1.0, 2.0, np.nan]})
    with pytest.raises(MissingValueError, match=r"'c': 1.*'x': 1"):
        encode(df, D)
    assert encode(df, D, missing="drop").shape == (1, 2)
    with pytest.raises(MissingValueError, match="with_missing_category"):
        encode(df, D, missing="category")
    dm = with_missing_category(D, ["c"])
    assert dm["c"].categories[-1] == MISSING
    with pytest.raises(EmptyDataError):
        encode(pd.DataFrame({"c": [None], "x": [1.0]}), D, missing="drop")
    with pytest.raises(ValueError):
        encode(df, D, missing="ignore")


def test_missing_category():
    dm = Domain({"c": ["a", "b", MISSING]})
    codes = encode(pd.DataFrame({"c": ["a", None, "b"]}), dm, missing="category")
    np.testing.assert_array_equal(codes[:, 0], [0, 2, 1])
    # a Domain that declares MISSING maps missing values there under every policy
    np.testing.assert_array_equal(encode(pd.DataFrame({"c": ["a", None, "b"]}), dm), codes)
    np.testing.assert_array_equal(encode(pd.DataFrame({"c": ["a", None, "b"]}), dm, missing="drop"), codes)


def test_table_errors():
    with pytest.raises(UnknownColumnError, match="'x'"):
        encode(pd.DataFrame({"c": ["a"]}), D)
    with pytest.raises(EmptyDataError):
        encode(pd.DataFrame({"c": [], "x": []}), D)
    with pytest.raises(UnknownColumnError, match="extra"):
        encode(pd.DataFrame({"c": ["a"], "x": [1], "extra": [0]}), D, extra_columns="error")
    dup = pd.DataFrame([["a", 1, 2]], columns=["c", "x", "x"])
    with pytest.raises(DuplicateColumnError):
        encode(dup, D)
    with pytest.raises(NonFiniteError, match="'x'"):
        encode(pd.DataFrame({"c": ["a"], "x": [np.inf]}), D)


def test_clip_to_bounds():
    df = pd.DataFrame({"x": [-5.0, 5.0, 50.0]})
    assert list(clip_to_bounds(df, {"x": (0, 30)})["x"]) == [0.0, 5.0, 30.0]
    with pytest.raises(UnknownColumnError):
        clip_to_bounds(df, {"y": (0, 1)})


def test_missing_category_keeps_the_bins_of_a_discretised_column(tmp_path):
    d = Domain([binned_column("age", edges=[0, 18, 65, 120])])
    dm = with_missing_category(d)
    assert dm["age"].binning == d["age"].binning and dm["age"].categories[-1] == MISSING
    codes = encode(pd.DataFrame({"age": [10.0, np.nan, 70.0]}), dm, missing="category")
    np.testing.assert_array_equal(codes[:, 0], [0, 3, 2])
    back = decode(codes, dm, midpoints=True)["age"].to_numpy()
    np.testing.assert_array_equal(np.isnan(back), [False, True, False])
    assert back[0] == 9.0 and back[2] == 92.5
    assert Domain.from_json(dm.to_json()) == dm


def test_csv_text_matches_categories_by_their_text_and_only_bad_values_are_reported():
    d = Domain({"g": [0, 1]})
    codes = encode(pd.DataFrame({"g": ["1", "0", "1"]}), d)
    np.testing.assert_array_equal(codes[:, 0], [1, 0, 1])
    with pytest.raises(OutOfDomainError, match=r"1 row\(s\) have values outside the Domain: 'abc'"):
        encode(pd.DataFrame({"g": ["1", "0", "abc"]}), d)


def test_categorical_columns_encode_as_their_values_do():
    """A categorical column is looked up one level at a time: the codes, the missing values and
    the errors must be those of the same values as plain objects."""
    d = with_missing_category(Domain([Column("c", ("a", "b", "c")), Column("k", (1, 2, 3))]), ["c"])
    df = pd.DataFrame({"c": pd.Categorical(["b", None, " ", "a", "b"], categories=["b", "a", " ", "unused"]),
                       "k": pd.Categorical(["1", "3", "3", "2", "1"], categories=["3", "2", "1", "9"])})
    codes = encode(df, d)
    np.testing.assert_array_equal(codes, encode(df.astype(object), d))
    np.testing.assert_array_equal(codes, [[1, 0], [3, 2], [3, 2], [0, 1], [1, 0]])  # None and " " are missing
    bad = df.assign(c=pd.Categorical(["b", "zz", "zz", "a", "q"]))
    with pytest.raises(OutOfDomainError, match=r"'c'.*3 row\(s\).*'zz'.*'q'"):
        encode(bad, d)


def test_numbers_match_text_categories_as_the_file_counts_do(tmp_path):
    """A CSV's numbers under a Domain that lists them as text ("13"): read into memory they must
    encode as count_file (DuckDB's SQL) counts the same file."""
    from synthinfer.data.marginals import count_file, read_csv

    d = Domain([Column("e", ("9", "13", "x"))])
    path = tmp_path / "e.csv"
    path.write_text("e\n13\n9\n13\n")
    codes = encode(read_csv(path), d)
    np.testing.assert_array_equal(codes[:, 0], [1, 0, 1])
    np.testing.assert_array_equal(np.bincount(codes[:, 0], minlength=3), count_file(path, d, ["e"]))
    with pytest.raises(OutOfDomainError, match=r"'e'.*1 row\(s\).*14"):
        encode(pd.DataFrame({"e": [13, 14]}), d)
    # a blank cell makes the column floats in memory (integers in SQL); categories of numbers too
    dm = with_missing_category(d, ["e"])
    path.write_text("e\n13\n\n9\n")
    codes = encode(read_csv(path), dm)[:, 0]
    np.testing.assert_array_equal(np.bincount(codes, minlength=4), count_file(path, dm, ["e"]))
    np.testing.assert_array_equal(codes, [1, 3, 0])
    np.testing.assert_array_equal(encode(pd.DataFrame({"e": pd.Categorical([13, 9])}), d)[:, 0], [1, 0])
    binned = Domain([binned_column("x", edges=[0, 10, 20])])
    np.testing.assert_array_equal(encode(pd.DataFrame({"x": pd.Categorical([3, 15, 20])}), binned)[:, 0], [0, 1, 1])
