"""Guards on what a mechanism is given: the budget refusals of the weight estimators, and the
missing-value rule shared by the two CSV readers (pandas for fitting, DuckDB for counting)."""

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from synthinfer.cli import app
from synthinfer.cli.common import read_table
from synthinfer.data import Domain, count_dataframe, count_file
from synthinfer.datasets import make_triangle_square
from synthinfer.errors import MissingValueError, OutOfDomainError, ParameterError
from synthinfer.privacy import PrivacyBudget, PrivacyLedger
from synthinfer.weights import BetaDebiased, BetaNoised, DPMLPWeights, OutputPerturbedWeights

BOUNDS = {"x1": (0.0, 1.0), "x2": (0.0, 1.0)}
ESTIMATORS = [
    lambda eps, delta: BetaNoised(BOUNDS, epsilon=eps, delta=delta, noise="gaussian", seed=0),
    lambda eps, delta: BetaDebiased(BOUNDS, epsilon=eps, delta=delta, noise="gaussian", seed=0),
    lambda eps, delta: OutputPerturbedWeights(BOUNDS, epsilon=eps, delta=delta, noise="gaussian", seed=0),
    lambda eps, delta: DPMLPWeights(BOUNDS, epsilon=eps, delta=delta, epochs=1, seed=0),
]


@pytest.mark.parametrize("make", ESTIMATORS, ids=["beta-noised", "beta-debiased", "output-perturbed", "dp-mlp"])
def test_weight_estimators_refuse_delta_at_least_one_over_n_and_huge_epsilon(make):
    real, synth = make_triangle_square(100, seed=0)  # n = 100 real rows: 1/n = 0.01
    for eps, delta, what in ((1.0, 0.01, "delta=0.01 is not below 1/n"), (101.0, 1e-6, "epsilon=101 is above")):
        ledger = PrivacyLedger(PrivacyBudget(max(eps, 1.0), 1e-6))
        with pytest.raises(ParameterError, match=what):
            make(eps, delta).fit(real, synth)
        with pytest.raises(ParameterError, match=what):  # a caller's ledger is checked too
            make(eps, delta).fit(real, synth, ledger=ledger)
        assert ledger.charges == ()
    # the overrides, for studies of the mechanism, lift the refusals and are recorded
    ledger = PrivacyLedger(PrivacyBudget(1.0, 0.01), allow_large_delta=True)
    make(1.0, 0.01).fit(real, synth, ledger=ledger)
    assert ledger.spent == pytest.approx((1.0, 0.01))
    assert ledger.to_dict()["unsafe_overrides"] == ["allow_large_delta"]


def test_weights_cli_refuses_large_delta_unless_overridden(tmp_path):
    real, synth = make_triangle_square(100, seed=0)
    rp, sp, bp = tmp_path / "r.csv", tmp_path / "s.csv", tmp_path / "b.json"
    real.to_csv(rp, index=False)
    synth.to_csv(sp, index=False)
    bp.write_text('{"x1": {"bounds": [0, 1]}, "x2": {"bounds": [0, 1]}}')
    base = ["weights", str(rp), str(sp), "--bounds", str(bp), "--epsilon", "1", "--delta", "0.02",
            "--noise", "gaussian"]
    r = CliRunner().invoke(app, [*base, "--out", str(tmp_path / "w.csv")])
    assert r.exit_code == 2 and "not below 1/n" in r.output and not (tmp_path / "w.csv").exists()
    r = CliRunner().invoke(app, [*base, "--out", str(tmp_path / "w2.csv"), "--unsafe-allow-large-delta"])
    assert r.exit_code == 0, r.output
    assert "allow_large_delta" in (tmp_path / "w2.csv.ledger.json").read_text()


def test_categories_spelled_like_missing_values_count_alike_through_both_readers(tmp_path):
    cats = ["NA", "None", "null", "N/A", "nan", "x"]
    domain = Domain({"a": cats, "b": ["NA", "y"]})
    rows = [("NA", "y"), ("None", "NA"), ("None", "NA"), ("null", "y"), ("N/A", "y"), ("nan", "NA"), ("x", "y")]
    path = tmp_path / "t.csv"
    path.write_text("a,b\n" + "".join(f"{a},{b}\n" for a, b in rows))
    df = read_table(path)
    assert df["a"].tolist() == [a for a, _ in rows]  # none of them became missing
    by_pandas = count_dataframe(df, domain, ["a", "b"])
    by_duckdb = count_file(path, domain, ["a", "b"])
    np.testing.assert_array_equal(by_pandas, by_duckdb)
    assert by_pandas.sum() == len(rows) and by_pandas[cats.index("None") * 2 + 0] == 2


def test_only_empty_cells_are_missing_in_both_readers(tmp_path):
    domain = Domain({"a": ["NA", "x"], "v": [0, 1]})
    path = tmp_path / "t.csv"
    path.write_text("a,v\nNA,0\n,1\n  ,1\nx,\nx,1\n")
    df = read_table(path)
    assert df["a"].isna().tolist() == [False, True, True, False, False]
    assert df["v"].isna().tolist() == [False, False, False, True, False]
    for count in (lambda m: count_dataframe(df, domain, ["a", "v"], missing=m),
                  lambda m: count_file(path, domain, ["a", "v"], missing=m)):
        with pytest.raises(MissingValueError):
            count("error")
        np.testing.assert_array_equal(count("drop"), [1, 0, 0, 1])
    # a missing-value word in a numeric column is a bad value, not a missing one, for both
    bad = tmp_path / "bad.csv"
    bad.write_text("a,v\nx,NA\n")
    with pytest.raises(OutOfDomainError):
        count_dataframe(read_table(bad), domain, ["v"])
    with pytest.raises(OutOfDomainError):
        count_file(bad, domain, ["v"])
    assert isinstance(pd.read_csv(bad)["v"][0], float)  # what pandas' default would have done
