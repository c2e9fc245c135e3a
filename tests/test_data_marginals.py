import itertools

import numpy as np
import pandas as pd
import pytest

from synthinfer.data import Domain, Marginal, QuerySet, binned_column, count_dataframe, count_file
from synthinfer.data.domain import Column
from synthinfer.errors import DomainError, MissingValueError, OutOfDomainError, ParameterError, UnknownColumnError

D = Domain([Column("a", ("u", "v", "w")), Column("b", (0, 1)), binned_column("x", edges=[0, 1, 2, 5])])


def _table(n=500, seed=0):
    rng = np.random.default_rng(seed)
    return pd.DataFrame({
        "a": rng.choice(["u", "v", "w"], n),
        "b": rng.integers(0, 2, n),
        "x": rng.uniform(0, 5, n).round(2),
    })


def test_counts_match_brute_force():
    df = _table()
    counts = count_dataframe(df, D, ("a", "x"))
    xbin = np.clip(np.searchsorted([0, 1, 2, 5], df["x"], side="right") - 1, 0, 2)
    for k, (i, j) in enumerate(itertools.product(range(3), range(3))):
        expect = ((df["a"] == "uvw"[i]) & (xbin == j)).sum()
        assert counts[k] == expect
    assert counts.sum() == len(df)


def test_queryset():
    qs = QuerySet(D, [("a", "b"), "b,x"])
    assert qs.sizes == [6, 6]
    assert qs.dimension == 12
    assert qs.l2_sensitivity == pytest.approx(2.0)
    v = qs.count(_table())
    parts = qs.split(v)
    assert parts[0].shape == (3, 2) and parts[1].shape == (2, 3)
    # both marginals share the b totals
    np.testing.assert_array_equal(parts[0].sum(0), parts[1].sum(1))
    with pytest.raises(DomainError, match="twice"):
        QuerySet(D, [("a", "b"), ("b", "a")])
    with pytest.raises(UnknownColumnError):
        QuerySet(D, [("a", "nope")])
    with pytest.raises(DomainError):
        Marginal(("a", "a"))


@pytest.mark.parametrize("one", [("a", "b"), "a,b", Marginal(("a", "b"))])
def test_one_marginal_where_a_list_is_due_is_refused_not_split(one):
    # ("a", "b") was read as two 1-way marginals, "a,b" as the columns 'a', ',' and 'b'
    with pytest.raises(ParameterError, match=r"list of marginals.*write \["):
        QuerySet(D, one)
    assert [m.columns for m in QuerySet(D, ["a", "b"]).marginals] == [("a",), ("b",)]  # a list of strings: 1-way


@pytest.mark.parametrize("fmt", ["csv", "parquet"])
def test_duckdb_counts_identical(tmp_path, fmt):
    df = _table(2000, seed=1)
    path = tmp_path / f"t.{fmt}"
    df.to_csv(path, index=False) if fmt == "csv" else df.to_parquet(path)
    qs = QuerySet(D, [("a", "b"), ("b", "x"), ("a", "b", "x"), ("x",)])
    np.testing.assert_array_equal(qs.count_file(path), qs.count(df))


def test_duckdb_errors(tmp_path):
    df = _table(50)
    df.loc[3, "a"] = "zz"
    p = tmp_path / "bad.csv"
    df.to_csv(p, index=False)
    with pytest.raises(OutOfDomainError, match="'a'.*1 row"):
        count_file(p, D, ("a",))
    df = _table(50)
    df.loc[[1, 2], "x"] = np.nan
    p = tmp_path / "na.csv"
    df.to_csv(p, index=False)
    with pytest.raises(MissingValueError, match="'x': 2"):
        count_file(p, D, ("x",))
    np.testing.assert_array_equal(
        count_file(p, D, ("a", "x"), missing="drop"), count_dataframe(df, D, ("a", "x"), missing="drop")
    )
    df = _table(50)
    df.loc[0, "x"] = 7.0
    p = tmp_path / "oob.csv"
    df.to_csv(p, index=False)
    with pytest.raises(OutOfDomainError, match="'x'"):
        count_file(p, D, ("x",))
    with pytest.raises(UnknownColumnError):
        count_file(p, Domain({"q": [1]}), ("q",))


def test_duckdb_matches_numeric_categories_by_value_like_encode(tmp_path):
    df = _table(300, seed=2)
    df.assign(b=df.b.astype(float)).to_csv(tmp_path / "f.csv", index=False)  # "0.0" / "1.0"
    qs = QuerySet(D, [("a", "b")])
    np.testing.assert_array_equal(qs.count_file(tmp_path / "f.csv"), qs.count(df))
    df.assign(b=df.b.astype(str).where(df.index != 3, "1.5")).to_csv(tmp_path / "g.csv", index=False)
    with pytest.raises(OutOfDomainError, match="'b'.*1 row"):
        qs.count_file(tmp_path / "g.csv")


def test_marginal_queries_refuse_a_continuous_column_by_name(tmp_path):
    from synthinfer.data import Continuous, Domain, QuerySet, count_dataframe, count_file
    from synthinfer.errors import DomainError

    mixed = Domain([Continuous("x", 0, 1), *Domain({"a": ["u", "v"]}).columns])
    df = pd.DataFrame({"x": [0.5, 0.2], "a": ["u", "v"]})
    path = tmp_path / "t.csv"
    df.to_csv(path, index=False)
    for call in (lambda: QuerySet(mixed, [("a",)]), lambda: Marginal(("x", "a")).shape(mixed),
                 lambda: count_dataframe(df, mixed, ["x"]), lambda: count_file(path, mixed, ["x", "a"])):
        with pytest.raises(DomainError, match="'x' is continuous.*bins"):
            call()
    # the categorical columns of a mixed Domain can still be counted on their own
    np.testing.assert_array_equal(count_dataframe(df, mixed, ["a"]), [1, 1])
    np.testing.assert_array_equal(count_file(path, mixed, ["a"]), [1, 1])
