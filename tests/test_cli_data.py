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
    assert "outside the Domain" in r.output
