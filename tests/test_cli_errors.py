"""Bad input on the command line: one clean line and exit status 2, before any work or output."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from synthinfer.cli import app
from synthinfer.datasets import make_triangle_square


def _run(args):
    res = CliRunner().invoke(app, [str(a) for a in args])
    assert "Traceback" not in res.output
    return res


def test_generate_refuses_its_output_before_fitting(toy_files, monkeypatch):
    from synthinfer.generate import NapsuMQ

    monkeypatch.setattr(NapsuMQ, "fit", lambda *a, **k: pytest.fail("fitted before checking --out"))
    base = ["generate", toy_files / "toy.csv", "--domain", toy_files / "domain.json", "--marginals", "x1,y", "--inference", "laplace"]
    (toy_files / "exists").mkdir()
    res = _run([*base, "--out", toy_files / "exists"])
    assert res.exit_code == 2 and "exists already" in res.output and "--overwrite" in res.output
    res = _run([*base, "--out", toy_files / "toy.csv" / "sub"])
    assert res.exit_code == 2 and "is a file" in res.output


@pytest.mark.parametrize("content, message", [("", "is empty"), ('a,b\n1,2,3,4\n"x', "could not be read")])
def test_unreadable_tables_are_clean_errors(toy_files, content, message):
    (toy_files / "bad.csv").write_text(content)
    res = _run(["generate", toy_files / "bad.csv", "--domain", toy_files / "domain.json", "--marginals", "x1,y",
                "--out", toy_files / "o"])
    assert res.exit_code == 2 and message in res.output
    (toy_files / "bin.csv").write_bytes(bytes(range(256)) * 4)
    res = _run(["count", toy_files / "bin.csv", "--domain", toy_files / "domain.json", "--marginal", "x1,y"])
    assert res.exit_code == 2
    for bad in ("5", '{"columns": 5}', '{"columns": [{"name": "x", "bin_edges": [0, "a", 2]}]}'):
        (toy_files / "d.json").write_text(bad)
        res = _run(["domain", toy_files / "d.json"])
        assert res.exit_code == 2 and ("columns" in res.output or "bin_edges" in res.output)


def test_weights_output_is_checked_first_and_never_half_written(tmp_path):
    real, synth = make_triangle_square(60, seed=0)
    real.to_csv(tmp_path / "real.csv", index=False)
    synth.to_csv(tmp_path / "synth.csv", index=False)
    (tmp_path / "b.json").write_text(json.dumps({"x1": {"bounds": [0, 1]}, "x2": {"bounds": [0, 1]}}))
    base = ["weights", tmp_path / "real.csv", tmp_path / "synth.csv", "--bounds", tmp_path / "b.json", "--epsilon", "1"]
    (tmp_path / "adir").mkdir()
    res = _run([*base, "--out", tmp_path / "adir"])
    assert res.exit_code == 2 and "is a directory" in res.output
    assert not (tmp_path / "adir.ledger.json").exists()
    assert _run([*base, "--out", tmp_path / "w.csv"]).exit_code == 0
    res = _run([*base, "--out", tmp_path / "w.csv"])
    assert res.exit_code == 2 and "--overwrite" in res.output
    assert _run([*base, "--out", tmp_path / "w.csv", "--overwrite"]).exit_code == 0
    for bad in ("[1, 2]", '{"x1": {"bounds": ["zero", 1]}}', "{"):
        (tmp_path / "bad.json").write_text(bad)
        res = _run([*base[:4], "--bounds", tmp_path / "bad.json", "--epsilon", "1", "--out", tmp_path / "v.csv"])
        assert res.exit_code == 2


def test_choose_m_checks_its_options_and_outputs_first(tmp_path):
    rng = np.random.default_rng(0)
    pd.DataFrame({"x": rng.normal(size=40)}).to_csv(tmp_path / "r.csv", index=False)
    base = ["choose-m", tmp_path / "r.csv", tmp_path / "r.csv", "--loss", "w=1"]
    res = _run([*base, "--m-grid", "a,b"])
    assert res.exit_code == 2 and "--m-grid" in res.output
    (tmp_path / "adir").mkdir()
    res = _run([*base, "--json", tmp_path / "out.json", "--plot", tmp_path / "adir"])
    assert res.exit_code == 2 and "--plot" in res.output and not (tmp_path / "out.json").exists()


def test_choose_m_names_the_bad_value(tmp_path):
    rng = np.random.default_rng(0)
    pd.DataFrame({"x": rng.normal(size=40)}).to_csv(tmp_path / "r.csv", index=False)
    base = ["choose-m", tmp_path / "r.csv", tmp_path / "r.csv"]
    res = _run([*base, "--loss", "beta=-1"])
    assert res.exit_code == 2 and "beta" in res.output and "loss must be" not in res.output
    res = _run([*base, "--loss", "w=1", "--alpha", "2"])
    assert res.exit_code == 2 and "alpha must be in (0, 1)" in res.output
    res = _run([*base, "--loss", "w=1", "--criterion", "kld"])
    assert res.exit_code == 2 and "--criterion" in res.output


def test_parquet_input_is_read_by_suffix(toy_files):
    pd.read_csv(toy_files / "toy.csv").to_parquet(toy_files / "toy.parquet")
    res = _run(["baseline", toy_files / "toy.parquet", "--domain", toy_files / "domain.json", "--generator", "privbayes",
                "--epsilon", "1", "--m", "2", "--out", toy_files / "rel"])
    assert res.exit_code == 0, res.output
    (toy_files / "fake.parquet").write_text("a,b\n1,2\n")
    res = _run(["baseline", toy_files / "fake.parquet", "--domain", toy_files / "domain.json", "--epsilon", "1", "--out", toy_files / "r2"])
    assert res.exit_code == 2 and "could not be read as Parquet" in res.output
