import re

import pandas as pd
from typer.testing import CliRunner

from synthinfer.cli import app
from synthinfer.data import Domain

runner = CliRunner()


def test_help():
    r = runner.invoke(app, ["--help"])
    assert r.exit_code == 0
    assert "count" in r.output


def test_domain_and_count(tmp_path):
    d = Domain({"a": ["x", "y"], "b": [0, 1]})
    dj = tmp_path / "d.json"
    d.to_json(dj)
    csv = tmp_path / "t.csv"
    pd.DataFrame({"a": ["x", "y", "y"], "b": [0, 1, 1]}).to_csv(csv, index=False)
    r = runner.invoke(app, ["domain", str(dj)])
    assert r.exit_code == 0 and "4 cells" in r.output
    r = runner.invoke(app, ["count", str(csv), "--domain", str(dj), "--marginal", "a,b"])
    assert r.exit_code == 0, r.output
    bad = tmp_path / "bad.csv"
    pd.DataFrame({"a": ["zz"], "b": [0]}).to_csv(bad, index=False)
    r = runner.invoke(app, ["count", str(bad), "--domain", str(dj), "--marginal", "a"])
    assert r.exit_code == 2
    assert "outside the Domain" in r.output and "allowed: ['x', 'y']" in r.output and "zz" not in r.output
    # a quoted glob of files is one table, as generate reads it; no match is one error line
    parts = tmp_path / "parts"
    parts.mkdir()
    for i, rows in enumerate([["x", "y"], ["y"]]):
        pd.DataFrame({"a": rows, "b": [1] * len(rows)}).to_parquet(parts / f"p{i}.parquet")
    r = runner.invoke(app, ["count", str(parts / "*.parquet"), "--domain", str(dj), "--marginal", "a"])
    assert r.exit_code == 0, r.output
    assert re.search(r"x\s.*\s1\s", r.output) and re.search(r"y\s.*\s2\s", r.output)
    for missing in (parts / "*.csv", tmp_path / "none.csv", parts):  # a glob matching nothing, no file, a folder
        r = runner.invoke(app, ["count", str(missing), "--domain", str(dj), "--marginal", "a"])
        assert r.exit_code == 2 and r.output.startswith("error: no ") and "Traceback" not in r.output


def test_domain_shows_continuous_columns(tmp_path):
    dj = tmp_path / "d.json"
    dj.write_text('{"columns": [{"name": "sex", "categories": ["F", "M"]}, {"name": "age", "bounds": [17, 90], '
                  '"integer": true}, {"name": "h", "bounds": [0, 2], "bins": 4}]}')
    r = runner.invoke(app, ["domain", str(dj)], env={"COLUMNS": "200"})
    assert r.exit_code == 0, r.output
    assert "1 continuous" in r.output and "bins" in r.output
    row = next(line for line in r.output.splitlines() if "age" in line)
    assert "continuous, integer" in row and "[17, 90]" in row
    assert "discretised" in next(line for line in r.output.splitlines() if " h " in line)
