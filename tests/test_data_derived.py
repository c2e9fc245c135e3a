"""Derived columns: a public function of another categorical column, declared in the Domain."""

from __future__ import annotations

import json
import warnings

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from synthinfer.cli import app
from synthinfer.data import Column, Domain, encode
from synthinfer.errors import DomainError, OutOfDomainError, ParameterError, UnknownColumnError
from synthinfer.generate import NapsuMQ

LEVEL = Column("level", ("low", "mid", "high", "top"))
CODE = Column("code", (1, 2, 3), derived_from="level", derive=(("low", 1), ("mid", 2), ("high", 3), ("top", 3)))


def _table(n: int = 600, seed: int = 0) -> tuple[pd.DataFrame, Domain]:
    rng = np.random.default_rng(seed)
    level = rng.choice(["low", "mid", "high", "top"], size=n, p=[0.4, 0.3, 0.2, 0.1])
    y = (rng.random(n) < np.where(np.isin(level, ["high", "top"]), 0.7, 0.3)).astype(int)
    code = pd.Series(level).map({"low": 1, "mid": 2, "high": 3, "top": 3})
    df = pd.DataFrame({"level": level, "code": code, "y": y, "z": rng.integers(0, 2, n)})
    return df, Domain([LEVEL, CODE, Column("y", (0, 1)), Column("z", (0, 1))])


def test_domain_knows_its_derived_columns_and_round_trips():
    _, d = _table()
    src, table = d.derived["code"]
    assert src == "level" and table.tolist() == [0, 1, 2, 2]
    assert d.without_derived().names == ("level", "y", "z")
    codes = np.array([[3, 1, 0], [0, 0, 1]])
    full = d.with_derived(codes)
    assert full.tolist() == [[3, 2, 1, 0], [0, 0, 0, 1]]
    again = Domain.from_json(d.to_json())
    assert again == d and again.derived["code"][1].tolist() == [0, 1, 2, 2]
    # a projection without the source keeps the column as a plain categorical one
    assert d.project(["code", "y"]).derived == {}


@pytest.mark.parametrize("spec, match", [
    ({"name": "c", "categories": [1, 2], "derived_from": "nope", "map": [["a", 1]]}, "not in the Domain"),
    ({"name": "c", "categories": [1, 2], "derived_from": "s", "map": [["a", 1]]}, r"missing \['b'\]"),
    ({"name": "c", "categories": [1, 2], "derived_from": "s", "map": [["a", 1], ["b", 2], ["b", 1]]}, "repeated"),
    ({"name": "c", "categories": [1, 2], "derived_from": "s", "map": [["a", 1], ["b", 7]]}, "not its categories"),
    ({"name": "c", "categories": [1, 2], "derived_from": "s"}, "both 'derived_from' and 'map'"),
    ({"name": "c", "categories": [1, 2], "derived_from": "s", "map": {"a": 1, "b": 2}}, "pairs"),
    ({"name": "c", "bounds": [0, 2], "bins": 2, "derived_from": "s", "map": [["a", "[0, 1)"], ["b", "[1, 2]"]]},
     "not from bins"),
    ({"name": "c", "categories": [1, 2], "derived_from": "c", "map": [[1, 1], [2, 2]]}, "not itself derived"),
])
def test_bad_derived_columns_are_refused(spec, match):
    with pytest.raises(DomainError, match=match):
        Domain.from_dict({"columns": [{"name": "s", "categories": ["a", "b"]}, spec]})


def test_encode_checks_every_row_against_the_map():
    df, d = _table()
    encode(df, d)
    bad = df.copy()
    bad.loc[[3, 7], "code"] = 1
    bad.loc[[3, 7], "level"] = "top"
    with pytest.raises(OutOfDomainError, match=r"'code' is derived from 'level'.*2 row\(s\).*level='top' with code=1 "
                                               r"\(the map gives 3\)"):
        encode(bad, d)


@pytest.mark.filterwarnings("ignore::synthinfer.errors.ConvergenceWarning")
def test_napsu_mq_models_the_source_and_keeps_synthetic_rows_consistent(tmp_path):
    df, d = _table()
    g = NapsuMQ([("code", "y"), ("level", "code", "z")], epsilon=2.0, inference="laplace", seed=0).fit(df, d)
    # marginals on the model's columns: code replaced by level, repeats dropped
    assert [m.columns for m in g.marginals_] == [("level", "y"), ("level", "z")]
    assert g.queries_.queryset.domain.names == ("level", "y", "z")
    syn = g.generate(3, seed=1)
    for s in syn:
        assert list(s.columns) == list(d.names)
        expect = s["level"].astype(str).map({"low": 1, "mid": 2, "high": 3, "top": 3})
        assert (s["code"].astype(int) == expect).all()
    # a release: the Domain records the derivation, and relations of the derived column are supported
    from synthinfer.release import open_release, write_release

    rel = open_release(write_release(tmp_path / "rel", syn, record=g.release_record(), private_data=df))
    assert rel.domain == d
    assert rel.supports("y ~ C(code)").supported is True
    assert rel.supports("y ~ C(z)").supported is False
    path = tmp_path / "g.nc"
    g.save(path)
    h = NapsuMQ.load(path)
    assert h.domain_ == d
    pd.testing.assert_frame_equal(h.generate(1, seed=4)[0], g.generate(1, seed=4)[0])
    # the user's reference must name the modelled column
    with pytest.raises(ParameterError, match="derived from 'level'"):
        NapsuMQ([("level", "y")], epsilon=1.0, inference="laplace", reference={"code": 2}).fit(df, d)
    with pytest.raises(UnknownColumnError):
        NapsuMQ([("nope", "y")], epsilon=1.0, inference="laplace").fit(df, d)


def test_napsu_mq_with_mst_never_selects_a_derived_column():
    df, d = _table()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        g = NapsuMQ([("level", "y")], epsilon=2.0, inference="mle", select_extra="mst", seed=0).fit(df, d)
    assert all("code" not in m.columns for m in g.marginals_)
    assert {c for m in g.marginals_ for c in m.columns} == {"level", "y", "z"}


def test_cli_domain_shows_derived_columns(tmp_path):
    _, d = _table()
    dj = tmp_path / "d.json"
    dj.write_text(json.dumps(d.to_dict()))
    r = CliRunner().invoke(app, ["domain", str(dj)], env={"COLUMNS": "200"})
    assert r.exit_code == 0, r.output
    assert "derived from level" in next(line for line in r.output.splitlines() if " code " in line)


def test_aim_workloads_name_derived_columns_by_their_source():
    df, d = _table(2000)

    def no_inference(self, *args, **kwargs):  # only AIM's selection is under test
        raise StopIteration

    g = NapsuMQ([("level", "y")], epsilon=4.0, inference="laplace", select_extra="aim",
                workload=[("code", "y"), ("level", "code"), ("z", "y")])
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(NapsuMQ, "_infer", no_inference)
        with pytest.raises(StopIteration):
            g.fit(df, d)
    assert {m.columns for m in g.aim_.workload} == {("level", "y"), ("level",), ("y", "z")}
    assert all("code" not in m.marginal.columns for m in g.aim_.measurements)


def test_cuts_group_a_discretised_columns_bins_like_brute_force():
    d = Domain.from_dict({"columns": [AGE_JSON, {"name": "age_g", "derived_from": "age", "cuts": [30, 45, 60, 75]}]})
    g = d["age_g"]
    assert g.categories == ("[17, 30)", "[30, 45)", "[45, 60)", "[60, 75)", "[75, 90]")
    mapped = dict(g.derive)
    assert (mapped["[29, 30)"], mapped["[30, 31)"], mapped["[88, 89)"], mapped["[89, 90]"]) == (
        "[17, 30)", "[30, 45)", "[75, 90]", "[75, 90]")
    ages = np.arange(17, 91, dtype=float)  # every whole number of the column, the closed upper bound included
    codes = encode(pd.DataFrame({"age": ages}), d)
    expect = np.searchsorted([30, 45, 60, 75], ages, side="right")  # the group of each number
    np.testing.assert_array_equal(codes[:, 1], expect)
    assert Domain.from_json(d.to_json()) == d  # written back with its map
    # a source with a missing-value category keeps it in the groups, before or after grouping
    from synthinfer.data import with_missing_category

    m = Column.groups_of(with_missing_category(Domain([d["age"]]))["age"], [45], name="age_g")
    assert m.categories[-1] == "<missing>" and dict(m.derive)["<missing>"] == "<missing>"
    for w in (with_missing_category(d), with_missing_category(d, ["age"])):
        assert w.derived_sources == {"age_g": "age"} and w["age_g"].categories[-1] == "<missing>"
        codes = encode(pd.DataFrame({"age": [17.0, None, 90.0]}), w)  # age_g computed, missing to missing
        assert codes[:, 1].tolist() == [0, 5, 4]
    with pytest.raises(DomainError, match="give 'age' the missing category"):
        with_missing_category(d, ["age_g"])
    # cuts equal to the source's edges up to rounding; numpy numbers
    x = Domain.from_dict({"columns": [{"name": "x", "bounds": [0, 1], "bins": 10},
                                      {"name": "x_g", "derived_from": "x", "cuts": [0.3]}]})
    assert x["x_g"].categories == ("[0, 0.3)", "[0.3, 1]")
    assert Column.groups_of(d["age"], [np.int64(30)], name="g").size == 2


AGE_JSON = {"name": "age", "bin_edges": list(range(17, 91)), "integer": True}


@pytest.mark.parametrize("spec, match", [
    ({"derived_from": "age", "cuts": [30.5]}, "not an edge of 'age'"),
    ({"derived_from": "age", "cuts": [45, 30]}, "increase strictly inside"),
    ({"derived_from": "age", "cuts": [17, 30]}, "increase strictly inside"),
    ({"derived_from": "age", "cuts": []}, "non-empty list of numbers"),
    ({"derived_from": "age", "cuts": "30"}, "non-empty list of numbers"),
    ({"derived_from": "sex", "cuts": [1]}, "'sex' is not one"),
    ({"derived_from": "x", "cuts": [0.5]}, "'x' is not one"),
    ({"derived_from": "nope", "cuts": [30]}, "'nope', which is not in the Domain"),
    ({"derived_from": "age", "cuts": [30], "categories": ["a", "b"]}, "take no other entries"),
    ({"cuts": [30]}, "named by 'derived_from'"),
])
def test_bad_cuts_are_refused_by_name(spec, match):
    cols = [AGE_JSON, {"name": "sex", "categories": ["F", "M"]}, {"name": "x", "bounds": [0, 1], "bins": "private:4"}]
    with pytest.raises(DomainError, match=match):
        Domain.from_dict({"columns": [*cols, {"name": "g", **spec}]})


def test_a_derived_column_the_table_lacks_is_computed_from_its_source(tmp_path):
    from synthinfer.data.counting import FileCounter
    from synthinfer.data.marginals import count_codes

    df, d = _table()
    codes = encode(df, d)
    lacking = df.drop(columns="code")
    np.testing.assert_array_equal(encode(lacking, d), codes)
    with pytest.raises(UnknownColumnError, match=r"lacks Domain column\(s\) \['level', 'code'\]"):
        encode(df.drop(columns=["level", "code"]), d)  # without its source it cannot be computed
    path = tmp_path / "t.csv"
    lacking.to_csv(path, index=False)
    counter = FileCounter(path, d)
    assert counter.n == len(df)
    for m in [("code", "y"), ("level", "code"), ("z", "code", "y"), ("level", "y")]:
        np.testing.assert_array_equal(counter.count(m), count_codes(codes, d, m))
    # count_file and `synthinfer count` compute it too (the file's own columns are counted as before)
    from synthinfer.data import count_file
    from synthinfer.data.marginals import count_file_marginals

    for m in [("code", "y"), ("level", "code"), ("z", "code", "y"), ("level", "y")]:
        np.testing.assert_array_equal(count_file(path, d, m), count_codes(codes, d, m))
    both = count_file_marginals(path, d, [("code",), ("level",), ("code",)], missing="drop")
    np.testing.assert_array_equal(both[0], count_codes(codes, d, ("code",)))
    np.testing.assert_array_equal(both[2], both[0])
    d.to_json(tmp_path / "d.json")
    r = CliRunner().invoke(app, ["count", str(path), "--domain", str(tmp_path / "d.json"), "--marginal", "code,y"])
    assert r.exit_code == 0, r.output
    expected = count_codes(codes, d, ("code", "y")).astype(int)
    assert all(f"{k:,}" in r.output for k in expected)
    # where the file has the column, every row is still checked against the map
    bad = df.assign(code=1)
    bad.to_csv(path, index=False)
    with pytest.raises(OutOfDomainError, match="'code' is derived from 'level'"):
        FileCounter(path, d)


@pytest.mark.filterwarnings("ignore::synthinfer.errors.ConvergenceWarning")
def test_cli_fits_a_grouped_column_that_the_file_lacks(tmp_path):
    """The data holder declares groups of one-year ages by their cuts and gives only the ages."""
    rng = np.random.default_rng(1)
    n = 800
    age = rng.integers(17, 91, n)
    y = (rng.random(n) < 0.2 + 0.5 * (age > 45)).astype(int)
    pd.DataFrame({"age": age, "y": y}).to_csv(tmp_path / "t.csv", index=False)
    (tmp_path / "d.json").write_text(json.dumps({"columns": [
        {"name": "age", "bounds": [17, 90], "bins": 73, "integer": True},
        {"name": "age_g", "derived_from": "age", "cuts": [30, 45, 60, 75]}, {"name": "y", "categories": [0, 1]}]}))
    r = CliRunner().invoke(app, ["generate", str(tmp_path / "t.csv"), "--domain", str(tmp_path / "d.json"),
                                 "--marginals", "age_g,y", "--marginals", "age", "--epsilon", "2", "--inference",
                                 "laplace", "--m", "2", "--out", str(tmp_path / "rel"), "--seed", "0", "--numbers",
                                 "age"])
    assert r.exit_code == 0, r.output
    from synthinfer.release import open_release

    rel = open_release(tmp_path / "rel")
    s = rel.datasets[0]
    assert list(s.columns) == ["age", "age_g", "y"]
    ages = s["age"].to_numpy()  # whole numbers drawn inside the bins (--numbers)
    assert (ages == np.round(ages)).all() and ages.min() >= 17 and ages.max() <= 90
    groups = {c: k for k, c in enumerate(rel.domain["age_g"].categories)}
    lower = np.array([17, 30, 45, 60, 75])
    np.testing.assert_array_equal(lower[s["age_g"].astype(str).map(groups).to_numpy()],
                                  lower[np.searchsorted(lower, ages, side="right") - 1])
    for bad, message in ((["--numbers", "y"], "'y' has no bins"), (["--numbers", "nope"], "nope"),
                         (["--numbers", "age", "--midpoints"], "leave out --numbers")):
        r = CliRunner().invoke(app, ["generate", str(tmp_path / "t.csv"), "--domain", str(tmp_path / "d.json"),
                                     "--marginals", "age_g,y", "--epsilon", "2", "--out", str(tmp_path / "r2"), *bad])
        assert r.exit_code == 2 and message in r.output and not (tmp_path / "r2").exists()


@pytest.mark.filterwarnings("ignore::synthinfer.errors.ConvergenceWarning")
def test_release_refuses_the_private_rows_when_the_private_table_lacks_a_derived_column(tmp_path):
    from synthinfer.errors import ReleaseError
    from synthinfer.release import write_release

    df, d = _table()
    private = df.drop(columns="code")
    g = NapsuMQ([("code", "y"), ("z", "y")], epsilon=2.0, inference="laplace", seed=0).fit(private, d)
    assert list(g.generate(1, seed=0)[0].columns) == list(d.names)
    with pytest.raises(ReleaseError, match="exactly the rows of the private input"):
        write_release(tmp_path / "r", [df.copy()], record=g.release_record(), private_data=private)
    assert not (tmp_path / "r").exists()
