"""The choose-m command on CSV files."""

import json

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from synthinfer.cli import app
from synthinfer.cli.bayes_cmds import parse_formula, parse_loss
from synthinfer.bayes import BetaLoss, LogLoss, NoiseAwareLoss
from synthinfer.errors import ParameterError


def test_choose_m_command_writes_json_and_plot(tmp_path):
    rng = np.random.default_rng(0)
    pd.DataFrame({"x": rng.normal(size=80)}).to_csv(tmp_path / "real.csv", index=False)
    pd.DataFrame({"x": rng.normal(5.0, 0.2, size=100)}).to_csv(tmp_path / "syn.csv", index=False)
    res = CliRunner().invoke(
        app,
        ["choose-m", str(tmp_path / "real.csv"), str(tmp_path / "syn.csv"), "--loss", "w=1", "--seed", "0",
         "--json", str(tmp_path / "out.json"), "--plot", str(tmp_path / "traj.png")],
    )
    assert res.exit_code == 0, res.output
    assert "m-hat = 0" in res.output
    out = json.loads((tmp_path / "out.json").read_text())
    assert out["m_hat"] == 0 and out["use_synthetic"] is False and out["seed_fixed"] is True
    assert (tmp_path / "traj.png").stat().st_size > 1000


def test_bad_model_is_a_clean_error(tmp_path):
    pd.DataFrame({"x": [1.0, 2.0]}).to_csv(tmp_path / "r.csv", index=False)
    res = CliRunner().invoke(app, ["choose-m", str(tmp_path / "r.csv"), str(tmp_path / "r.csv"), "--model", "poisson"])
    assert res.exit_code == 2


def test_text_columns_are_a_clean_error_naming_the_column(tmp_path):
    """Bin labels in the synthetic data (a release written without --numbers) where the model
    needs numbers: one error line naming the column, no traceback."""
    rng = np.random.default_rng(0)
    pd.DataFrame({"y": rng.integers(0, 2, 40), "age": rng.uniform(20, 60, 40)}).to_csv(tmp_path / "r.csv", index=False)
    pd.DataFrame({"y": rng.integers(0, 2, 60), "age": rng.choice(["[20, 40)", "[40, 60]"], 60)}).to_csv(
        tmp_path / "s.csv", index=False)
    res = CliRunner().invoke(app, ["choose-m", str(tmp_path / "r.csv"), str(tmp_path / "s.csv"), "--model", "logistic",
                                   "--formula", "y ~ age", "--seed", "0"])
    assert res.exit_code == 2 and "column 'age' is not numbers" in res.output and "Traceback" not in res.output


def test_parsers():
    assert parse_formula("y ~ a + b", ["y", "a", "b", "c"]) == ("y", ["a", "b"])
    assert parse_formula("y ~ .", ["y", "a", "b"]) == ("y", ["a", "b"])
    assert parse_loss("w=0.5") == LogLoss(0.5)
    assert parse_loss("beta=0.5") == BetaLoss(0.5, "calibrate")
    assert parse_loss("beta=0.25:1.25") == BetaLoss(0.25, 1.25)
    assert parse_loss("noise-aware=0.75") == NoiseAwareLoss(0.75)
    with pytest.raises(ParameterError, match="loss"):
        parse_loss("huber=1")
    with pytest.raises(ParameterError, match="formula"):
        parse_formula("y a b", ["y"])


def test_regression_design_codes_categories_on_one_design():
    from synthinfer.bayes.models import regression_design
    from synthinfer.errors import DomainError, MissingValueError

    real = pd.DataFrame({"y": ["no", "yes", "yes"], "g": ["b", "a", "c"], "k": [13, 9, 13], "x": [0.5, 1.0, 2.0]})
    syn = pd.DataFrame({"y": pd.Categorical(["yes", "no"], categories=["no", "yes"]),
                        "g": pd.Categorical(["b", "b"], categories=["b", "a"]),
                        "k": pd.Categorical(["9", "13"], categories=["9", "13", "16"]), "x": [1.5, 3.0]})
    (r, s), names = regression_design([real, syn], "y", ["g", "k", "x"], binary=True)
    # g: the release's categories in their order (b the reference), then c seen in the real rows;
    # k: numbers in the real table, so numbers in the release too ("13" reads as 13)
    assert names == ["g=a", "g=c", "k", "x"]
    np.testing.assert_array_equal(r[0], [[0, 0, 13, 0.5], [1, 0, 9, 1.0], [0, 1, 13, 2.0]])
    np.testing.assert_array_equal(s[0], [[0, 0, 9, 1.5], [0, 0, 13, 3.0]])  # a and c absent: zero columns
    np.testing.assert_array_equal(r[1], [0, 1, 1])  # the second level, "yes", is 1
    np.testing.assert_array_equal(s[1], [1, 0])
    with pytest.raises(DomainError, match="target 'g' has levels"):
        regression_design([real, syn], "g", ["x"], binary=True)  # three levels
    with pytest.raises(DomainError, match="target 'y' has levels .* numbers"):
        regression_design([real, syn], "y", ["x"])  # not a binary model
    with pytest.raises(DomainError, match="column 'x' is not numbers"):
        regression_design([real, syn.assign(x=["[0, 2)", "[2, 4]"])], "y", ["x"], binary=True)  # bin labels
    with pytest.raises(MissingValueError, match="column 'g' has missing values in table 1"):
        regression_design([real, syn.assign(g=["b", None])], "y", ["g"], binary=True)
    # a release's file lists every Domain category, used or not: only those that occur are levels
    unused = syn.assign(y=pd.Categorical(["yes", "no"], categories=["no", "yes", "<missing>"]),
                        g=pd.Categorical(["b", "a"], categories=["zz", "b", "a"]))
    (_, s), names = regression_design([real.iloc[:2], unused], "y", ["g"], binary=True)
    assert names == ["g=a"]  # b the reference, zz in no table
    np.testing.assert_array_equal(s[0][:, 0], [0, 1])
    np.testing.assert_array_equal(s[1], [1, 0])


def test_choose_m_takes_text_columns(tmp_path):
    """A logistic model on text columns (a release's categories): indicators, a text outcome."""
    rng = np.random.default_rng(1)

    def table(n):
        g = rng.choice(["a", "b", "c"], n)
        p = 1 / (1 + np.exp(-(np.where(g == "b", 1.0, 0.0) - 0.5)))
        return pd.DataFrame({"income": np.where(rng.random(n) < p, ">50K", "<=50K"), "g": g})

    table(60).to_csv(tmp_path / "r.csv", index=False)
    table(200).to_parquet(tmp_path / "s.parquet", index=False)
    res = CliRunner().invoke(app, ["choose-m", str(tmp_path / "r.csv"), str(tmp_path / "s.parquet"), "--model",
                                   "logistic", "--formula", "income ~ g", "--m-grid", "0,50", "--splits", "3",
                                   "--num-warmup", "100", "--num-samples", "100", "--seed", "0"])
    assert res.exit_code == 0, res.output
    assert "m-hat" in res.output
