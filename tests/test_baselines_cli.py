"""`synthinfer baseline` command: writes datasets and the privacy record, refuses bad input."""

from __future__ import annotations


import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from synthinfer.cli.app import app
from synthinfer.data import Domain
from synthinfer.release import open_release


def _files(tmp_path):
    dom = Domain({"a": ["x", "y"], "b": ["u", "v", "w"]})
    dom.to_json(tmp_path / "domain.json")
    rng = np.random.default_rng(0)
    pd.DataFrame({"a": rng.choice(["x", "y"], 200), "b": rng.choice(["u", "v", "w"], 200)}).to_csv(tmp_path / "d.csv", index=False)
    return tmp_path / "d.csv", tmp_path / "domain.json"


def test_baseline_privbayes_writes_release_files(tmp_path):
    data, dom = _files(tmp_path)
    out = tmp_path / "out"
    res = CliRunner().invoke(app, ["baseline", str(data), "--domain", str(dom), "--generator", "privbayes",
                                   "--epsilon", "1.0", "--m", "2", "--n", "30", "--out", str(out)])
    assert res.exit_code == 0, res.output
    release = open_release(out)
    assert release.manifest["mechanism"] == "privbayes" and release.m == 2
    assert release.ledger.spent[0] == pytest.approx(1.0)
    assert release.manifest["seed_fixed"] is False and len(release.datasets[1]) == 30


def test_baseline_refuses_existing_output_and_bad_domain_values(tmp_path):
    data, dom = _files(tmp_path)
    (tmp_path / "exists").mkdir()
    res = CliRunner().invoke(app, ["baseline", str(data), "--domain", str(dom), "--epsilon", "1", "--out", str(tmp_path / "exists")])
    assert res.exit_code == 2 and "exists" in res.output
    pd.DataFrame({"a": ["x", "z"], "b": ["u", "u"]}).to_csv(tmp_path / "bad.csv", index=False)
    res = CliRunner().invoke(app, ["baseline", str(tmp_path / "bad.csv"), "--domain", str(dom), "--epsilon", "1", "--out", str(tmp_path / "o2")])
    assert res.exit_code == 2 and "'a'" in res.output
    assert not (tmp_path / "o2").exists()


def test_baseline_checks_counts_before_fitting(tmp_path):
    data, dom = _files(tmp_path)
    for opt in ("--m", "--n", "--epochs"):
        res = CliRunner().invoke(app, ["baseline", str(data), "--domain", str(dom), "--generator", "dpgan",
                                       "--epsilon", "1", opt, "0", "--out", str(tmp_path / "o")])
        assert res.exit_code == 2 and opt in res.output and "Traceback" not in res.output
    assert not (tmp_path / "o").exists()


def test_bad_settings_raise_synthinfer_errors():
    from synthinfer.errors import ArgumentTypeError, ParameterError
    from synthinfer.generate import DPGAN, PrivBayes
    from synthinfer.privacy import make_rng

    df = pd.DataFrame({"a": ["x", "y"]})
    with pytest.raises(ParameterError, match="generator_optimizer"):
        DPGAN(epsilon=1.0, delta=1e-5, generator_optimizer="rmsprop").fit(df, {"a": ["x", "y"]})
    with pytest.raises(ParameterError, match="theta"):
        PrivBayes(epsilon=1.0, theta=-1).fit(df, Domain({"a": ["x", "y"]}))
    with pytest.raises(ArgumentTypeError, match="Domain"):
        PrivBayes(epsilon=1.0).fit(df, {"a": ["x", "y"]})
    with pytest.raises(ArgumentTypeError, match="seed"):
        make_rng("42")
