"""The ``synthinfer weights`` command: writes weights and a ledger, fails cleanly on bad bounds."""

import json

import pandas as pd
from typer.testing import CliRunner

from synthinfer.cli.app import app
from synthinfer.datasets import make_triangle_square


def test_weights_command_writes_weights_and_ledger(tmp_path):
    real, synth = make_triangle_square(100, seed=0)
    real.to_csv(tmp_path / "real.csv", index=False)
    synth.to_csv(tmp_path / "synth.csv", index=False)
    (tmp_path / "bounds.json").write_text(json.dumps({"x1": {"bounds": [0, 1]}, "x2": {"bounds": [0, 1]}}))
    out = tmp_path / "w.csv"
    res = CliRunner().invoke(app, ["weights", str(tmp_path / "real.csv"), str(tmp_path / "synth.csv"),
                                   "--bounds", str(tmp_path / "bounds.json"), "--out", str(out), "--epsilon", "1"])
    assert res.exit_code == 0, res.output
    w = pd.read_csv(out)
    assert list(w.columns) == ["weight", "log_weight"] and len(w) == 100
    ledger = json.loads((tmp_path / "w.csv.ledger.json").read_text())
    assert ledger["spent"]["epsilon"] == 1.0
    (tmp_path / "bad.json").write_text(json.dumps({"x1": {"bounds": [0, 0.5]}, "x2": {"bounds": [0, 1]}}))
    res = CliRunner().invoke(app, ["weights", str(tmp_path / "real.csv"), str(tmp_path / "synth.csv"),
                                   "--bounds", str(tmp_path / "bad.json"), "--out", str(out), "--epsilon", "1",
                                   "--overwrite"])
    assert res.exit_code == 2 and "x1" in res.output
