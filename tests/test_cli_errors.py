"""Bad input on the command line: one clean line and exit status 2, before any work or output."""

from __future__ import annotations

import json
import re

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


@pytest.mark.parametrize("content, message", [("", "is empty"),
                                              # DuckDB, which reads the file for NAPSU-MQ, finds one column here
                                              ('a,b\n1,2,3,4\n"x', "lacks Domain column(s) ['x1'")])
def test_unreadable_tables_are_clean_errors(toy_files, content, message):
    (toy_files / "bad.csv").write_text(content)
    res = _run(["generate", toy_files / "bad.csv", "--domain", toy_files / "domain.json", "--marginals", "x1,y",
                "--out", toy_files / "o"])
    _one_error(res, message)
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


#: a plain progress line (output off a terminal, as under CliRunner): ``[elapsed] stage``
PROGRESS_LINE = re.compile(r"\[\d+s\] |\[\d+m\d\ds\] |\[\d+h\d\dm\] ")


def _one_error(res, *fragments):
    """Exit status 2 and a single `error:` line that holds every fragment (after any progress
    lines of the steps done before the error)."""
    lines = [line for line in res.output.splitlines() if line.strip() and not PROGRESS_LINE.match(line)]
    assert res.exit_code == 2, res.output
    assert len(lines) == 1 and lines[0].startswith("error:"), res.output
    for f in fragments:
        assert f in lines[0], res.output


@pytest.mark.parametrize("generator", ["napsu", "privbayes", "dpgan", "dpcgan"])
def test_absurd_epsilon_is_refused_before_any_work(toy_files, generator, monkeypatch):
    from synthinfer.generate import Generator

    for cls in Generator.__subclasses__() + [c for s in Generator.__subclasses__() for c in s.__subclasses__()]:
        monkeypatch.setattr(cls, "fit", lambda *a, **k: pytest.fail("fitted with an absurd epsilon"))
    extra = {"napsu": ["--marginals", "x1,y"], "dpcgan": ["--label", "y"]}.get(generator, [])
    for eps in ("1e300", "101"):
        res = _run(["generate", toy_files / "toy.csv", "--domain", toy_files / "domain.json", "--generator", generator,
                    *extra, "--epsilon", eps, "--out", toy_files / "o"])
        _one_error(res, "is above 100", "--unsafe-allow-large-epsilon")
    res = _run(["generate", toy_files / "toy.csv", "--domain", toy_files / "domain.json", "--generator", generator,
                *extra, "--epsilon", "inf", "--out", toy_files / "o"])
    _one_error(res, "epsilon")
    assert not (toy_files / "o").exists()


@pytest.mark.parametrize("generator", ["napsu", "dpgan"])
def test_delta_from_one_over_n_is_refused_with_n_and_one_over_n(toy_files, generator):
    extra = ["--marginals", "x1,y"] if generator == "napsu" else []
    res = _run(["generate", toy_files / "toy.csv", "--domain", toy_files / "domain.json", "--generator", generator,
                *extra, "--delta", "0.005", "--out", toy_files / "o"])
    _one_error(res, "delta=0.005", "1/n=0.005", "n=200", "--unsafe-allow-large-delta")
    assert not (toy_files / "o").exists()


def test_unsafe_overrides_run_a_study_and_the_manifest_records_them(toy_files):
    res = _run(["baseline", toy_files / "toy.csv", "--domain", toy_files / "domain.json", "--epsilon", "150",
                "--unsafe-allow-large-epsilon", "--seed", "0", "--out", toy_files / "study"])
    assert res.exit_code == 0, res.output
    manifest = json.loads((toy_files / "study" / "manifest.json").read_text())
    assert manifest["privacy"]["unsafe_overrides"] == ["allow_large_epsilon"]
    assert manifest["privacy"]["total"]["epsilon"] == 150.0


def test_bad_domain_files_are_clean_errors(toy_files):
    (toy_files / "bin.json").write_bytes(bytes(range(256)) * 4)
    _one_error(_run(["domain", toy_files / "bin.json"]), "not a text")
    _one_error(_run(["generate", toy_files / "toy.csv", "--domain", toy_files / "bin.json", "--marginals", "x1,y",
                     "--out", toy_files / "o"]), "not a text")
    big = {"columns": [{"name": "x1", "bounds": [0, 1], "bins": 1e9}, {"name": "y", "categories": [0, 1]}]}
    (toy_files / "big.json").write_text(json.dumps(big))
    _one_error(_run(["domain", toy_files / "big.json"]), "'x1'", "100,000 bins")
    # rich must not read bracketed text in the message as markup
    (toy_files / "nan.json").write_text('{"columns": [{"name": "age", "bounds": [NaN, 90.0], "bins": 3}]}')
    res = _run(["domain", toy_files / "nan.json"])
    _one_error(res, "[nan, 90.0]")


def test_bracketed_text_in_errors_is_printed_as_it_is(tmp_path):
    real, synth = make_triangle_square(40, seed=0)
    real.to_csv(tmp_path / "real.csv", index=False)
    synth.to_csv(tmp_path / "synth.csv", index=False)
    (tmp_path / "b.json").write_text(json.dumps({"x1": {"bounds": "wide"}}))
    res = _run(["weights", tmp_path / "real.csv", tmp_path / "synth.csv", "--bounds", tmp_path / "b.json",
                "--epsilon", "1", "--out", tmp_path / "w.csv"])
    _one_error(res, '{"bounds": [lower, upper]}')


def test_duplicated_csv_columns_are_refused_by_count_and_generate(toy_files):
    (toy_files / "dup.csv").write_text("x1,x2,x1,y\n0,1,1,0\n1,0,0,1\n")
    _one_error(_run(["count", toy_files / "dup.csv", "--domain", toy_files / "domain.json", "--marginal", "x1,y"]),
               "'x1' appears more than once")
    _one_error(_run(["generate", toy_files / "dup.csv", "--domain", toy_files / "domain.json", "--generator",
                     "privbayes", "--out", toy_files / "o"]), "'x1' appears more than once")
    from synthinfer.data import Domain, count_file
    from synthinfer.errors import DuplicateColumnError

    with pytest.raises(DuplicateColumnError, match="x1"):
        count_file(toy_files / "dup.csv", Domain.from_json(toy_files / "domain.json"), ["x1", "y"])


def test_edited_manifests_are_clean_errors(toy_files):
    import hashlib
    import shutil

    rel = toy_files / "rel"
    res = _run(["baseline", toy_files / "toy.csv", "--domain", toy_files / "domain.json", "--epsilon", "1",
                "--m", "2", "--seed", "0", "--out", rel])
    assert res.exit_code == 0, res.output
    bad_n, not_parquet = toy_files / "bad_n", toy_files / "not_parquet"
    shutil.copytree(rel, bad_n)
    shutil.copytree(rel, not_parquet)
    manifest = json.loads((rel / "manifest.json").read_text())
    (bad_n / "manifest.json").write_text(json.dumps({**manifest, "n": "abc"}))
    member = manifest["datasets"][1]
    (not_parquet / member).write_text("a,b\n1,2\n")
    manifest["files"][member]["sha256"] = hashlib.sha256(b"a,b\n1,2\n").hexdigest()
    (not_parquet / "manifest.json").write_text(json.dumps(manifest))
    _one_error(_run(["analyze", bad_n, "-f", "y ~ x1"]), "'n' must be a positive integer", "'abc'")
    _one_error(_run(["analyze", not_parquet, "-f", "y ~ x1"]), member, "not a readable Parquet file")
    from synthinfer.errors import ReleaseError
    from synthinfer.release import open_release

    for path in (bad_n, not_parquet):
        with pytest.raises(ReleaseError):
            open_release(path)
