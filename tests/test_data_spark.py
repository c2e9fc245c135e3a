"""Counting on Spark (local mode): the same counts and the same fit as DuckDB and pandas."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

pytest.importorskip("pyspark")
# createDataFrame from pandas (the tests' way of making Spark tables) warns about pandas 3, and
# JAX warns on any fork; pyspark forks only to exec the JVM at once, which is safe
pytestmark = [pytest.mark.filterwarnings("ignore:PySpark does not yet fully support pandas"),
              pytest.mark.filterwarnings("ignore:os.fork\\(\\) was called:RuntimeWarning")]

from synthinfer.data import MISSING, Domain, encode, with_missing_category  # noqa: E402
from synthinfer.data.counting import FileCounter  # noqa: E402
from synthinfer.data.marginals import count_codes  # noqa: E402
from synthinfer.data.spark import SparkCounter, read_spark  # noqa: E402
from synthinfer.errors import OutOfDomainError, UnknownColumnError  # noqa: E402
from synthinfer.generate import NapsuMQ  # noqa: E402
from synthinfer.privacy import samplers  # noqa: E402

DOMAIN = Domain.from_dict({"columns": [
    {"name": "age", "bounds": [17, 90], "bins": 4},
    {"name": "sex", "categories": ["F", "M"]},
    {"name": "grade", "categories": [1, 2, 3]},
    {"name": "level", "categories": ["low", "high"], "derived_from": "grade",
     "map": [[1, "low"], [2, "low"], [3, "high"]]},
    {"name": "y", "categories": ["it's", "a\\b"]},  # quotes and backslashes reach Spark SQL intact
]})


@pytest.fixture(scope="module")
def spark():
    from pyspark.sql import SparkSession

    session = (SparkSession.builder.master("local[1]").appName("synthinfer-tests").config("spark.ui.enabled", "false")
               .config("spark.sql.shuffle.partitions", "2").getOrCreate())
    yield session
    session.stop()


@pytest.fixture(scope="module")
def table(tmp_path_factory):
    rng = np.random.default_rng(0)
    n = 2000
    grade = rng.integers(1, 4, n)
    df = pd.DataFrame({"age": rng.integers(17, 91, n).astype(float), "sex": rng.choice(["F", "M"], n),
                       "grade": grade, "level": np.where(grade == 3, "high", "low"),
                       "y": rng.choice(["it's", "a\\b"], n)})
    path = tmp_path_factory.mktemp("spark") / "t.csv"
    df.to_csv(path, index=False)
    return df, path


def test_spark_counts_equal_duckdb_and_pandas(spark, table):
    df, path = table
    marginals = [("age", "y"), ("sex", "grade", "y"), ("level", "y")]
    by_spark, by_duckdb = SparkCounter(read_spark(path), DOMAIN), FileCounter(path, DOMAIN)
    codes = encode(df, DOMAIN)
    assert by_spark.n == by_duckdb.n == len(df)
    by_spark.prefetch(marginals)
    for m in marginals:
        np.testing.assert_array_equal(by_spark.count(m), by_duckdb.count(m))
        np.testing.assert_array_equal(by_spark.count(m), count_codes(codes, DOMAIN, m))
    typed = spark.createDataFrame(df)  # typed columns (doubles, longs) count alike
    np.testing.assert_array_equal(SparkCounter(typed, DOMAIN).count(("age", "grade")), by_duckdb.count(("age", "grade")))


def test_spark_counts_declared_missing_values_in_their_category(spark, table, tmp_path):
    """Empty cells of columns whose Domain ends with MISSING are that category, as in DuckDB
    and encode() (numeric categories written as 1.0, text, bins)."""
    df, _ = table
    domain = with_missing_category(DOMAIN, ["age", "sex", "grade"])
    gaps = df.assign(grade=df["grade"].astype(float)).drop(columns="level")
    gaps.loc[[1, 5], "grade"] = np.nan
    gaps.loc[[2, 5], "sex"] = None
    gaps.loc[3, "sex"] = MISSING
    gaps.loc[[4, 9], "age"] = np.nan
    path = tmp_path / "gaps.csv"
    gaps.to_csv(path, index=False)
    marginals = [("grade", "sex"), ("age", "level", "y")]
    by_spark, by_duckdb = SparkCounter(read_spark(path), domain), FileCounter(path, domain)
    by_spark.prefetch(marginals)
    for m in marginals:
        np.testing.assert_array_equal(by_spark.count(m), by_duckdb.count(m))
        np.testing.assert_array_equal(by_spark.count(m), count_codes(encode(gaps, domain), domain, m))
    # a typed double column's NaN (not null: rows, not pandas, keep it) is missing, as pandas reads it
    nan = float("nan")
    rows = [(20.0, 1.0, "F", "it's"), (nan, 2.0, "M", "a\\b"), (70.0, nan, "F", "it's"), (30.0, 3.0, "M", "a\\b")]
    typed = spark.createDataFrame(rows, "age double, grade double, sex string, y string")
    assert typed.filter("isnan(age)").count() == 1
    np.testing.assert_array_equal(SparkCounter(typed, domain).count(("age", "grade")),
                                  count_codes(encode(pd.DataFrame(rows, columns=["age", "grade", "sex", "y"]), domain),
                                              domain, ("age", "grade")))
    # a typed boolean column (text true/false in Spark SQL) matches boolean categories
    flags = Domain.from_dict({"columns": [{"name": "flag", "categories": [False, True]},
                                          {"name": "sex", "categories": ["F", "M"]}]})
    typed = df[["sex"]].assign(flag=np.arange(len(df)) % 3 == 0)
    np.testing.assert_array_equal(SparkCounter(spark.createDataFrame(typed), flags).count(("flag", "sex")),
                                  count_codes(encode(typed, flags), flags, ("flag", "sex")))


def test_spark_refuses_bad_tables_by_column_and_count(spark, table):
    df, _ = table

    def views() -> set[str]:
        return {t.name for t in spark.catalog.listTables() if t.name.startswith("synthinfer_")}

    before = views()
    with pytest.raises(OutOfDomainError, match="'age' of the Spark DataFrame: 2 row"):
        SparkCounter(spark.createDataFrame(df.assign(age=df["age"].where(df.index > 1, 200.0))), DOMAIN)
    with pytest.raises(OutOfDomainError, match="'level' is derived from 'grade'"):
        SparkCounter(spark.createDataFrame(df.assign(level="high")), DOMAIN)
    with pytest.raises(UnknownColumnError, match="lacks Domain column"):
        SparkCounter(spark.createDataFrame(df.drop(columns="sex")), DOMAIN)
    assert views() == before  # a refused table leaves no view behind
    # a derived column it lacks is computed from its source, as for DuckDB and pandas
    without = SparkCounter(spark.createDataFrame(df.drop(columns="level")), DOMAIN)
    np.testing.assert_array_equal(without.count(("level", "y")), count_codes(encode(df, DOMAIN), DOMAIN, ("level", "y")))


@pytest.mark.filterwarnings("ignore:columns .* are in no marginal")
def test_napsu_fitted_on_spark_measures_what_it_measures_from_pandas(spark, table, monkeypatch):
    df, _ = table
    out = []
    for data in (df, spark.createDataFrame(df)):
        monkeypatch.setattr(samplers, "_TEST_ONLY_noise_rng", np.random.default_rng(3))
        gen = NapsuMQ([("age", "y")], epsilon=2.0, inference="laplace", select_extra="mst", seed=0).fit(data, DOMAIN)
        out.append((gen.n_, gen.noisy_counts_, [m.columns for m in gen.marginals_]))
    assert out[0][0] == out[1][0] and out[0][2] == out[1][2]
    np.testing.assert_array_equal(out[0][1], out[1][1])


def test_cli_generate_counts_on_spark(spark, table, tmp_path):
    import json

    from typer.testing import CliRunner

    import synthinfer
    from synthinfer.cli import app

    _, path = table
    dom = tmp_path / "domain.json"
    dom.write_text(json.dumps(DOMAIN.to_dict()))
    base = ["generate", str(path), "--domain", str(dom), "--marginals", "age,y", "--marginals", "sex,grade",
            "--inference", "laplace", "--m", "2", "--seed", "0"]
    res = CliRunner().invoke(app, [*base, "--engine", "spark", "--out", str(tmp_path / "r")])
    assert res.exit_code == 0, res.output
    assert synthinfer.open_release(tmp_path / "r").manifest["n"] == 2000
    res = CliRunner().invoke(app, ["generate", str(path), "--domain", str(dom), "--generator", "privbayes",
                                   "--engine", "spark", "--out", str(tmp_path / "p")])
    assert res.exit_code == 2 and "--engine spark" in res.output
