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
