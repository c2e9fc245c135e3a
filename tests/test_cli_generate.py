"""`synthinfer generate --generator ...`: one generation path for every generator, options checked
per generator; the command line registered in one place, without private imports."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from typer.testing import CliRunner

import synthinfer.cli
from synthinfer.cli import app
from synthinfer.release import open_release

CLI_DIR = Path(synthinfer.cli.__file__).parent


def _run(args):
    res = CliRunner().invoke(app, [str(a) for a in args])
    assert "Traceback" not in res.output
    return res


def test_generate_runs_a_baseline_through_the_same_path(toy_files):
    res = _run(["generate", toy_files / "toy.csv", "--domain", toy_files / "domain.json", "--generator", "privbayes",
                "--epsilon", "0.5", "--m", "2", "--n-syn", "30", "--seed", "3", "--out", toy_files / "pb"])
    assert res.exit_code == 0, res.output
    assert "PrivBayes fit (privbayes): n = 200" in res.output and "network (degree" in res.output  # its summary
    release = open_release(toy_files / "pb")
    assert release.manifest["mechanism"] == "privbayes" and release.m == 2 and release.n_syn == 30
    assert release.ledger.spent[0] == pytest.approx(0.5) and release.manifest["seed_fixed"] is True
    # `baseline` is the same command with the baselines' defaults (one dataset of n rows)
    res = _run(["baseline", toy_files / "toy.csv", "--domain", toy_files / "domain.json", "--epsilon", "0.5", "--seed", "3",
                "--out", toy_files / "b"])
    assert res.exit_code == 0, res.output
    baseline = open_release(toy_files / "b")
    assert baseline.manifest["mechanism"] == "privbayes" and baseline.m == 1 and baseline.n_syn == 200


@pytest.mark.parametrize("extra, generator, named", [
    (["--marginals", "x1,y"], "privbayes", "--marginals"),
    (["--inference", "laplace"], "dpgan", "--inference"),
    (["--midpoints"], "dpgan", "--midpoints"),
    (["--marginals", "x1,y", "--epochs", "2"], "napsu", "--epochs"),
    (["--label", "y"], "dpgan", "--label"),
    ([], "napsu", "--marginals"),
    ([], "dpcgan", "--label"),
    (["--delta", "1e-6"], "privbayes", "--delta"),
    (["--marginals", "x1,y", "--m", "0"], "napsu", "--m"),
])
def test_options_for_other_generators_are_refused_before_any_work(toy_files, monkeypatch, extra, generator, named):
    from synthinfer.data import Domain

    monkeypatch.setattr(Domain, "from_json", lambda *a, **k: pytest.fail("read the Domain before checking options"))
    res = _run(["generate", toy_files / "toy.csv", "--domain", toy_files / "domain.json", "--generator", generator, *extra,
                "--out", toy_files / "out"])
    assert res.exit_code == 2 and named in res.output
    assert res.output.count("error:") == 1 and not (toy_files / "out").exists()


def test_baseline_refuses_napsu_options_and_keeps_its_spellings(toy_files):
    res = _run(["baseline", toy_files / "toy.csv", "--domain", toy_files / "domain.json", "--marginals", "x1,y",
                "--epsilon", "1", "--out", toy_files / "o"])
    assert res.exit_code == 2 and "--marginals" in res.output  # baseline has no NAPSU-MQ options at all
    res = _run(["baseline", toy_files / "toy.csv", "--domain", toy_files / "domain.json", "--generator", "dpgan",
                "--label", "y", "--epsilon", "1", "--out", toy_files / "o"])
    assert res.exit_code == 2 and "--label" in res.output and "dpcgan" in res.output


def test_commands_are_registered_in_one_place():
    names = [c.name for c in app.registered_commands]
    assert names == ["domain", "count", "generate", "resample", "baseline", "weights", "report", "analyze", "choose-m"]
    assert {c.callback.__module__ for c in app.registered_commands} == {
        f"synthinfer.cli.{m}_cmds" for m in ("data", "generate", "weights", "report", "analyze", "bayes")}


def test_cli_imports_no_private_module_and_no_command_module_imports_the_app():
    for path in CLI_DIR.glob("*.py"):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module:
                modules = [node.module]
            elif isinstance(node, ast.Import):
                modules = [a.name for a in node.names]
            else:
                continue
            for module in modules:
                if module.startswith("synthinfer"):
                    assert not any(part.startswith("_") for part in module.split(".")), (path.name, module)
                if path.name.endswith("_cmds.py"):
                    assert module != "synthinfer.cli.app" and module != "synthinfer.cli", (path.name, module)


def test_the_fit_bar_shows_draws_per_chain_rate_and_time_left():
    from rich.progress import BarColumn, MofNCompleteColumn, Progress as Bar, TextColumn

    from synthinfer.cli.generate_cmds import _show_stage
    from synthinfer.progress import Progress

    with Bar(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), disable=True) as bar:
        task = bar.add_task("fitting", total=None)
        _show_stage(bar, task, "Laplace approximation")
        assert bar.tasks[0].total is None and bar.tasks[0].description == "inference: Laplace approximation"
        _show_stage(bar, task, Progress("NUTS", done=5600, total=11200, unit="draws", parts=(2800, 2800, 0, 0),
                                        part_total=2800, part_name="chains", rate=52.25, eta=108.0))
        t = bar.tasks[0]
        assert (t.completed, t.total) == (5600, 11200)
        assert t.description == "inference: NUTS draws (chains 2,800 2,800 0 0 of 2,800 each, 52.2 draws/s, 1m48s left)"
        assert str(MofNCompleteColumn().render(t)).strip() == "5600/11200"
        _show_stage(bar, task, "done")  # a stage without counts empties the bar again
        assert bar.tasks[0].total is None


def test_a_saved_fit_is_sampled_again_without_new_budget(toy_files):
    res = _run(["generate", toy_files / "toy.csv", "--domain", toy_files / "domain.json", "--marginals", "x1,x2,y",
                "--inference", "laplace", "--m", "2", "--seed", "3", "--save-fit", toy_files / "fit.npz",
                "--out", toy_files / "rel"])
    assert res.exit_code == 0, res.output
    first = open_release(toy_files / "rel")
    res = _run(["resample", toy_files / "fit.npz", "--inference", "nuts", "--num-warmup", "100", "--num-samples", "100",
                "--chains", "2", "--target-accept", "0.9", "--m", "3", "--seed", "4",
                "--save-fit", toy_files / "fit2.npz", "--out", toy_files / "rel2"])
    assert res.exit_code == 0, res.output
    assert "no new privacy cost" in res.output and "inference 'laplace' -> 'nuts'" in res.output
    again = open_release(toy_files / "rel2")
    assert again.m == 3 and again.ledger.spent == first.ledger.spent  # the fit's spend, once
    assert again.manifest["settings"]["inference"] == "nuts" and again.manifest["settings"]["target_accept"] == 0.9
    assert (toy_files / "fit2.npz").is_file()
    # bad input: one error line, exit 2, nothing written
    for args, named in ((["--target-accept", "1.5"], "target_accept"), (["--chains", "0"], "--chains")):
        res = _run(["resample", toy_files / "fit.npz", *args, "--out", toy_files / "rel3"])
        assert res.exit_code == 2 and res.output.count("error:") == 1 and named in res.output, res.output
        assert not (toy_files / "rel3").exists()
    res = _run(["resample", toy_files / "fit.npz", "--out", toy_files / "rel2"])
    assert res.exit_code == 2 and "exists already" in res.output
    (toy_files / "not_a_fit.npz").write_text("rows")
    res = _run(["resample", toy_files / "not_a_fit.npz", "--out", toy_files / "rel3"])
    assert res.exit_code == 2 and "not a saved NapsuMQ generator" in res.output


def test_a_file_with_declared_missing_values_makes_a_release(toy_files):
    """A CSV whose numeric column is written as 1.0 with empty cells, under a Domain that
    declares them ("<missing>" after numeric categories): counted, fitted, written and read
    back; synthinfer's warnings print as one ``warning:`` line."""
    import json

    import numpy as np
    import pandas as pd

    df = pd.read_csv(toy_files / "toy.csv").astype({"x1": float})
    df.loc[np.arange(0, 200, 9), "x1"] = np.nan
    df.to_csv(toy_files / "gaps.csv", index=False)
    dom = json.loads((toy_files / "domain.json").read_text())
    dom["columns"][0]["categories"] = [0, 1, "<missing>"]
    (toy_files / "gaps.json").write_text(json.dumps(dom))
    res = _run(["generate", toy_files / "gaps.csv", "--domain", toy_files / "gaps.json", "--marginals", "x1,y",
                "--inference", "laplace", "--m", "2", "--seed", "0", "--out", toy_files / "r"])
    assert res.exit_code == 0, res.output
    assert "warning: columns ['x2'] are in no marginal" in res.output and "SynthinferWarning" not in res.output
    release = open_release(toy_files / "r")
    assert list(release.datasets[0]["x1"].cat.categories) == [0, 1, "<missing>"]
