"""Counting marginals from files in one scan, and NAPSU-MQ fitted from a file."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from synthinfer.data import MISSING, Domain, QuerySet, encode, with_missing_category
from synthinfer.data.counting import CodeCounter, FileCounter
from synthinfer.data.marginals import count_codes, count_file_marginals, read_csv
from synthinfer.errors import DomainError, MissingValueError, OutOfDomainError, ParameterError
from synthinfer.generate import NapsuMQ
from synthinfer.privacy import samplers

DOMAIN = Domain.from_dict({"columns": [
    {"name": "age", "bounds": [17, 90], "bins": 4},
    {"name": "sex", "categories": ["F", "M"]},
    {"name": "grade", "categories": [1, 2, 3]},
    {"name": "level", "categories": ["low", "high"], "derived_from": "grade",
     "map": [[1, "low"], [2, "low"], [3, "high"]]},
    {"name": "y", "categories": ["no", "yes"]},
]})


def _table(n: int = 3000, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    grade = rng.integers(1, 4, n)
    return pd.DataFrame({"age": rng.integers(17, 91, n).astype(float), "sex": rng.choice(["F", "M"], n),
                         "grade": grade, "level": np.where(grade == 3, "high", "low"),
                         "y": rng.choice(["no", "yes"], n, p=[0.7, 0.3])})


@pytest.fixture(params=["csv", "parquet"])
def table_file(request, tmp_path):
    df = _table()
    path = tmp_path / f"t.{request.param}"
    df.to_csv(path, index=False) if request.param == "csv" else df.to_parquet(path)
    return df, path


def test_one_scan_counts_equal_the_in_memory_counts(table_file):
    df, path = table_file
    codes = encode(df, DOMAIN)
    marginals = [("age", "y"), ("sex", "grade", "y"), ("age",), ("grade", "age"), ("level", "y")]
    for m, counts in zip(marginals, count_file_marginals(path, DOMAIN, marginals)):
        np.testing.assert_array_equal(counts, count_codes(codes, DOMAIN, m))


def test_binned_columns_are_read_as_numbers_or_as_their_labels(tmp_path):
    df = _table(500)
    labelled = df.assign(age=pd.Categorical.from_codes(DOMAIN["age"].binning.codes(df["age"]),
                                                       categories=list(DOMAIN["age"].categories)))
    labelled.astype(str).to_csv(tmp_path / "l.csv", index=False)
    np.testing.assert_array_equal(count_file_marginals(tmp_path / "l.csv", DOMAIN, [("age", "y")])[0],
                                  count_codes(encode(df, DOMAIN), DOMAIN, ("age", "y")))


def test_file_counter_checks_every_column_and_derived_map_before_counting(tmp_path):
    df = _table(400)
    df.to_csv(tmp_path / "ok.csv", index=False)
    counter = FileCounter(tmp_path / "ok.csv", DOMAIN)
    assert counter.n == 400
    np.testing.assert_array_equal(counter.count(("sex", "y")), CodeCounter(encode(df, DOMAIN), DOMAIN).count(("sex", "y")))
    df.loc[[3, 9], "level"] = "high"
    df.loc[[3, 9], "grade"] = 1
    df.to_csv(tmp_path / "derived.csv", index=False)
    with pytest.raises(OutOfDomainError, match="'level' is derived from 'grade'.*2 row"):
        FileCounter(tmp_path / "derived.csv", DOMAIN)
    bad = _table(400).assign(age=lambda d: d["age"].where(d.index != 7, 123.0))
    bad.to_csv(tmp_path / "bad.csv", index=False)
    with pytest.raises(OutOfDomainError, match=r"'age' of the file bad.csv: 1 row.*\(allowed: numbers in \[") as info:
        FileCounter(tmp_path / "bad.csv", DOMAIN)
    assert "123" not in str(info.value)
    gap = _table(400).assign(sex=lambda d: d["sex"].where(d.index != 5, None))
    gap.to_csv(tmp_path / "gap.csv", index=False)
    with pytest.raises(MissingValueError, match="'sex': 1"):
        FileCounter(tmp_path / "gap.csv", DOMAIN)


@pytest.mark.filterwarnings("ignore:columns .* are in no marginal")
@pytest.mark.parametrize("select", [0, "mst", "aim"])
def test_napsu_fitted_from_a_file_measures_what_it_measures_from_the_dataframe(table_file, monkeypatch, select):
    """Same privacy noise stream (the samplers' test-only one), same counts: the noisy
    measurements and the selected marginals are identical whichever way the rows come."""
    df, path = table_file
    out = []
    for data in (df, path, str(path)):
        monkeypatch.setattr(samplers, "_TEST_ONLY_noise_rng", np.random.default_rng(3))
        gen = NapsuMQ([("age", "y")], epsilon=2.0, inference="laplace", select_extra=select, seed=0).fit(data, DOMAIN)
        out.append((gen.n_, gen.noisy_counts_, [m.columns for m in gen.marginals_], gen.delta_))
    for o in out[1:]:
        assert o[0] == out[0][0] and o[2] == out[0][2] and o[3] == out[0][3]
        np.testing.assert_array_equal(o[1], out[0][1])
    syn = gen.generate(1, seed=0)[0]
    assert list(syn.columns) == list(DOMAIN.names) and len(syn) == len(df)


def test_private_bins_are_refused_for_files(tmp_path):
    dom = Domain.from_dict({"columns": [{"name": "age", "bounds": [17, 90], "bins": "private:4"},
                                        {"name": "y", "categories": ["no", "yes"]}]})
    _table(100)[["age", "y"]].to_csv(tmp_path / "t.csv", index=False)
    with pytest.raises(ParameterError, match="private bins are chosen from the rows in memory"):
        NapsuMQ([("age", "y")]).fit(tmp_path / "t.csv", dom)


def test_missing_drop_drops_a_row_from_every_marginal(tmp_path):
    df = _table(300)
    df.loc[[1, 2], "sex"] = None
    df.to_csv(tmp_path / "t.csv", index=False)
    counts = count_file_marginals(tmp_path / "t.csv", DOMAIN, [("age", "y"), ("sex", "y")], missing="drop")
    assert counts[0].sum() == counts[1].sum() == 298
    kept = df.dropna()
    np.testing.assert_array_equal(counts[0], QuerySet(DOMAIN, [("age", "y")]).count(kept))


@pytest.mark.parametrize("kind", ["csv", "parquet"])
def test_declared_missing_values_are_counted_in_their_category_as_in_memory(tmp_path, kind):
    """A column whose Domain ends with MISSING counts its missing values there (encode()'s
    rule), whatever the column's kind: numeric categories read as "1.0" by value, text (the
    category's own text too), bins and a derived column; ``missing="drop"`` drops only the rows
    missing in an undeclared column."""
    domain = with_missing_category(DOMAIN, ["age", "sex", "grade"])
    df = _table(600, seed=4)
    df["grade"] = df["grade"].astype(float)  # written as 1.0, 2.0, ...
    df.loc[[1, 5, 8], "grade"] = np.nan
    df.loc[[2, 5], "sex"] = None
    df.loc[3, "sex"] = MISSING
    df.loc[[4, 9], "age"] = np.nan
    df.loc[7, "y"] = None  # y declares no MISSING
    df["level"] = df["grade"].map({1.0: "low", 2.0: "low", 3.0: "high"})
    path = tmp_path / f"t.{kind}"
    df.to_csv(path, index=False) if kind == "csv" else df.to_parquet(path)
    marginals = [("grade", "sex"), ("age", "level", "y"), ("level",)]
    kept = df.drop(index=7)
    for counts, m in zip(count_file_marginals(path, domain, marginals, missing="drop"), marginals):
        np.testing.assert_array_equal(counts, count_codes(encode(kept, domain), domain, m))
    assert count_file_marginals(path, domain, [("grade",)], missing="drop")[0][-1] == 3
    if kind == "csv":  # the file read into memory counts alike
        np.testing.assert_array_equal(count_file_marginals(path, domain, [("sex", "grade")])[0],
                                      count_codes(encode(read_csv(path).fillna({"y": "no"}), domain), domain,
                                                  ("sex", "grade")))
    with pytest.raises(MissingValueError, match="'y': 1"):
        count_file_marginals(path, domain, [("sex", "y")])
    bad = df.assign(grade=df["grade"].where(df.index != 11, 4.0))
    bad.to_csv(tmp_path / "bad.csv", index=False)
    with pytest.raises(OutOfDomainError, match=r"'grade' of the file bad.csv: 1 row.*\(allowed: \[1, 2, 3") as info:
        count_file_marginals(tmp_path / "bad.csv", domain, [("grade",)])
    assert "4" not in str(info.value).split("allowed")[0].split("row(s)")[1]  # the private value is not named


def test_nan_in_a_typed_parquet_column_is_missing_as_in_memory(tmp_path):
    """Parquet written with NaN values (not nulls, as Spark or pyarrow may write them): missing,
    as pandas reads them, in a declared column and in an undeclared one."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    nan = float("nan")
    pq.write_table(pa.table({"age": pa.array([20.0, nan, 70.0, 30.0]), "grade": pa.array([1.0, 2.0, nan, 3.0]),
                             "y": ["no", "yes", "no", "yes"]}), tmp_path / "nan.parquet")
    plain = Domain([c for c in DOMAIN.columns if c.name in ("age", "grade", "y")])
    domain = with_missing_category(plain, ["age", "grade"])
    df = pd.read_parquet(tmp_path / "nan.parquet")
    np.testing.assert_array_equal(count_file_marginals(tmp_path / "nan.parquet", domain, [("age", "grade", "y")])[0],
                                  count_codes(encode(df, domain), domain, ("age", "grade", "y")))
    with pytest.raises(MissingValueError, match="'grade': 1"):
        count_file_marginals(tmp_path / "nan.parquet", plain, [("grade", "y")])
    # empty text is missing too, in memory as in the file (the CSV rule)
    pq.write_table(pa.table({"y": ["no", "", " ", "yes"]}), tmp_path / "blank.parquet")
    declared = with_missing_category(Domain([DOMAIN["y"]]))
    np.testing.assert_array_equal(count_file_marginals(tmp_path / "blank.parquet", declared, [("y",)])[0], [1, 1, 2])
    np.testing.assert_array_equal(count_codes(encode(pd.read_parquet(tmp_path / "blank.parquet"), declared), declared,
                                              ("y",)), [1, 1, 2])
    with pytest.raises(MissingValueError, match="'y': 2"):
        encode(pd.read_parquet(tmp_path / "blank.parquet"), Domain([DOMAIN["y"]]))
    # a categorical column (pandas writes and reads it back as one) with blank categories alike
    pd.DataFrame({"y": pd.Categorical(["no", "", " ", "yes"])}).to_parquet(tmp_path / "cat.parquet")
    np.testing.assert_array_equal(count_codes(encode(pd.read_parquet(tmp_path / "cat.parquet"), declared), declared,
                                              ("y",)), count_file_marginals(tmp_path / "cat.parquet", declared,
                                                                            [("y",)])[0])


@pytest.mark.parametrize("kind", ["csv", "parquet"])
def test_boolean_categories_match_a_csv_text_and_a_typed_column(tmp_path, kind):
    """Boolean categories match True/False as a CSV writes them and a Parquet boolean column
    (whose text in SQL is true/false), as encode() matches the DataFrame."""
    domain = Domain.from_dict({"columns": [{"name": "flag", "categories": [False, True]},
                                           {"name": "y", "categories": ["no", "yes"]}]})
    df = _table(300, seed=5)[["y"]].assign(flag=lambda d: np.arange(len(d)) % 3 == 0)
    path = tmp_path / f"t.{kind}"
    df.to_csv(path, index=False) if kind == "csv" else df.to_parquet(path)
    np.testing.assert_array_equal(count_file_marginals(path, domain, [("flag", "y")])[0],
                                  count_codes(encode(df, domain), domain, ("flag", "y")))


def test_text_that_sql_reads_as_a_category_encode_reads_alike(tmp_path):
    """"1.0" beside "<missing>" text (a column pandas reads as text) and TRUE / false: the file's
    counts and encode() of the file read into memory agree."""
    domain = Domain.from_dict({"columns": [{"name": "grade", "categories": [1, 2], "missing": True},
                                           {"name": "flag", "categories": [False, True]}]})
    (tmp_path / "t.csv").write_text("grade,flag\n1.0,TRUE\n2.0,false\n<missing>,True\n,FALSE\n2,true\n")
    as_text = pd.DataFrame({"grade": ["1.0", "2.0", MISSING, None, "2"],
                            "flag": ["TRUE", "false", "True", "FALSE", "true"]})
    np.testing.assert_array_equal(count_file_marginals(tmp_path / "t.csv", domain, [("grade", "flag")])[0],
                                  count_codes(encode(as_text, domain), domain, ("grade", "flag")))
    np.testing.assert_array_equal(count_file_marginals(tmp_path / "t.csv", domain, [("grade", "flag")])[0],
                                  [0, 1, 1, 1, 1, 1])
    # numbers as text in a binned column (read as text beside "<missing>") by the public edges
    binned = with_missing_category(Domain([DOMAIN["age"], DOMAIN["y"]]), ["age"])
    (tmp_path / "b.csv").write_text("age,y\n20,no\n50.5,yes\n<missing>,no\n,no\n90,yes\n")
    np.testing.assert_array_equal(count_codes(encode(read_csv(tmp_path / "b.csv"), binned), binned, ("age",)),
                                  count_file_marginals(tmp_path / "b.csv", binned, [("age",)])[0])


def test_a_glob_of_parquet_files_is_one_table(tmp_path):
    parts = [_table(200, seed=s) for s in range(3)]
    for i, part in enumerate(parts):
        part.to_parquet(tmp_path / f"part{i}.parquet")
    counter = FileCounter(tmp_path / "part*.parquet", DOMAIN)
    whole = pd.concat(parts, ignore_index=True)
    assert counter.n == 600
    np.testing.assert_array_equal(counter.count(("age", "y")), count_codes(encode(whole, DOMAIN), DOMAIN, ("age", "y")))
    with pytest.raises(FileNotFoundError, match="no file matches"):
        FileCounter(tmp_path / "nothing*.parquet", DOMAIN)
    parts[0].drop(columns="sex").to_parquet(tmp_path / "part9.parquet")
    with pytest.raises(DomainError, match="could not be read"):
        FileCounter(tmp_path / "part*.parquet", DOMAIN)


@pytest.mark.filterwarnings("ignore:columns .* are in no marginal")
def test_cli_generate_takes_a_glob_and_refuses_what_is_missing(tmp_path):
    import json

    from typer.testing import CliRunner

    import synthinfer
    from synthinfer.cli import app

    for s in range(2):
        _table(1000, seed=s).to_parquet(tmp_path / f"part{s}.parquet")
    (tmp_path / "domain.json").write_text(json.dumps(DOMAIN.to_dict()))
    base = ["generate", "--domain", str(tmp_path / "domain.json"), "--marginals", "age,y", "--inference", "laplace",
            "--m", "2", "--seed", "0"]
    res = CliRunner().invoke(app, [base[0], str(tmp_path / "part*.parquet"), *base[1:], "--out", str(tmp_path / "r")])
    assert res.exit_code == 0, res.output
    assert synthinfer.open_release(tmp_path / "r").n == 2000
    # a glob matching nothing fails in the counting step (its progress line, then the error's), a
    # missing file before it
    for data, message, steps in ((tmp_path / "none*.parquet", "no file matches", 1),
                                 (tmp_path / "x.csv", "no data file", 0)):
        res = CliRunner().invoke(app, [base[0], str(data), *base[1:], "--out", str(tmp_path / "o")])
        *progress, error = res.output.splitlines()
        assert res.exit_code == 2 and error.startswith("error:") and message in error
        checking = f"checking {data.name} against the Domain (DuckDB) ..."
        assert [line.split("] ", 1)[1] for line in progress] == [checking] * steps


def test_blank_lines_are_read_as_duckdb_reads_them(tmp_path):
    """A blank line: an empty (missing) cell in a one-column file, no row in a wider one."""
    one = with_missing_category(Domain([DOMAIN["y"]]))
    (tmp_path / "one.csv").write_text("y\nno\n\nyes\n")
    np.testing.assert_array_equal(count_codes(encode(read_csv(tmp_path / "one.csv"), one), one, ("y",)),
                                  count_file_marginals(tmp_path / "one.csv", one, [("y",)])[0])
    assert len(read_csv(tmp_path / "one.csv")) == 3
    (tmp_path / "two.csv").write_text("sex,y\nF,no\n\nM,yes\n")
    assert len(read_csv(tmp_path / "two.csv")) == 2 == count_file_marginals(tmp_path / "two.csv", DOMAIN,
                                                                            [("sex", "y")])[0].sum()
