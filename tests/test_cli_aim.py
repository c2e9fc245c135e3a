"""`synthinfer generate --select aim`: AIM from the command line, its options, and its bad input
refused before any budget is spent."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import typer
from typer.testing import CliRunner

from synthinfer.cli import app
from synthinfer.data import Domain, as_marginals
from synthinfer.errors import ParameterError
from synthinfer.generate import NapsuMQ
from synthinfer.napsu.aim import DEFAULT_MAX_MODEL_CELLS
from synthinfer.privacy import PrivacyLedger
from synthinfer.release import open_release


@pytest.fixture()
def files(tmp_path):
    """A 400-row, 5-column table with strong (a, b) and (c, d) pairs, and its Domain."""
    rng = np.random.default_rng(0)
    n = 400
    a = rng.integers(0, 3, n)
    b = (a + rng.integers(0, 2, n)) % 3
    c = rng.integers(0, 2, n)
    d = c ^ (rng.random(n) < 0.1)
    e = rng.integers(0, 2, n)
    letters = np.array(list("xyz"))
    pd.DataFrame({k: letters[v.astype(int)] for k, v in zip("abcde", (a, b, c, d, e))}).to_csv(
        tmp_path / "t.csv", index=False)
    Domain({"a": list("xyz"), "b": list("xyz"), "c": list("xy"), "d": list("xy"), "e": list("xy")}).to_json(
        tmp_path / "d.json")
    return tmp_path


def _generate(files, *extra):
    args = ["generate", files / "t.csv", "--domain", files / "d.json", "--marginals", "a,c", "--out", files / "out",
            *extra]
    res = CliRunner().invoke(app, [str(a) for a in args])
    assert "Traceback" not in res.output
    return res


@pytest.mark.filterwarnings("ignore::synthinfer.errors.ConvergenceWarning")  # Laplace on a small table
def test_select_aim_writes_a_release_that_records_aim(files):
    res = _generate(files, "--select", "aim", "--inference", "laplace", "--workload", "a,b,c", "--workload", "d,e",
                    "--max-model-cells", "200", "--epsilon", "2", "--delta", "1e-6", "--seed", "1", "--m", "2",
                    "--num-samples", "20", "--chains", "1")
    assert res.exit_code == 0, res.output
    assert "selected by AIM" in res.output and "AIM:" in res.output
    release = open_release(files / "out")
    settings = release.manifest["settings"]
    assert settings["select_extra"] == "aim" and settings["inference"] == "laplace"
    assert settings["workload"] == [["a", "b", "c"], ["d", "e"]] and settings["max_model_cells"] == 200
    assert settings["marginals"] == [["a", "c"]] and settings["sigma_dp"] is None  # one noise level per measurement
    assert settings["selected_marginals"] and all(set(m) <= set("abcde") for m in settings["selected_marginals"])
    aim = release.diagnostics["aim"]
    assert aim["rounds"] >= 1 and aim["max_model_cells"] == 200 and aim["model_cells"] <= 200
    assert len(aim["sigma"]) == aim["measurements"] and len(set(aim["sigma"])) > 1
    assert [c.name for c in release.ledger.charges] == ["napsu-mq: AIM"]
    assert release.ledger.spent == pytest.approx((2.0, 1e-6)) and release.m == 2
    # the recorded settings are the Python API's for the same options
    gen = NapsuMQ([("a", "c")], epsilon=2.0, delta=1e-6, inference="laplace", select_extra="aim",
                  workload=["a,b,c", "d,e"], max_model_cells=200, num_samples=20, n_chains=1)
    assert settings["workload"] == [list(m.columns) for m in as_marginals(gen.workload)]
    assert {k: settings[k] for k in gen.get_params() if k != "seed"} == {
        k: v if k != "marginals" else [list(m) for m in v] for k, v in gen.get_params().items() if k != "seed"
    } | {"workload": settings["workload"]}


@pytest.mark.parametrize("extra, expected", [
    (["--select", "3"], {"select_extra": 3}),
    (["--select-mst", "3"], {"select_extra": 3}),  # the alias
    (["--select", "mst"], {"select_extra": "mst"}),
    (["--select", "AIM"], {"select_extra": "aim", "workload": None, "max_model_cells": None}),
    (["--select", "aim", "--workload", "a,b", "--workload", "c, d ,e", "--max-model-cells", "300"],
     {"select_extra": "aim", "workload": ["a,b", "c, d ,e"], "max_model_cells": 300}),
    (["--select", "aim", "--required-share", "0.5"], {"select_extra": "aim", "required_share": 0.5}),
    (["--select", "aim", "--max-likelihood-flops", "8000000"], {"select_extra": "aim", "max_likelihood_flops": 8000000}),
    (["--select", "mst", "--tie-below", "2.5"], {"select_extra": "mst", "tie_below": 2.5}),
    (["--select", "mst", "--tie-below", "None"], {"select_extra": "mst", "tie_below": None}),
    (["--select", "mst"], {"tie_below": "auto", "num_warmup": None, "num_samples": None}),
    (["--coarse-interactions", "linear"], {"coarse_interactions": "linear"}),
    (["--coarse-interactions", "linear", "--slopes-below", "3"], {"coarse_interactions": "linear", "slopes_below": 3.0}),
    ([], {"slopes_below": None, "linear_by_linear": False}),
    (["--linear-by-linear"], {"linear_by_linear": True}),
    (["--smooth-sd", "0.2"], {"smooth_sd": 0.2}),
    (["--smooth-sd", "a=0.1, b=0.5"], {"smooth_sd": {"a": 0.1, "b": 0.5}}),
    ([], {"coarse_interactions": "constant"}),
    ([], {"select_extra": 0, "workload": None, "max_model_cells": None}),
])
def test_select_options_become_napsu_settings(files, monkeypatch, extra, expected):
    seen = {}

    def fit(self, *args, **kwargs):
        seen.update(self.get_params())
        raise ParameterError("stopped before fitting")

    monkeypatch.setattr(NapsuMQ, "fit", fit)
    res = _generate(files, *extra)
    assert res.exit_code == 2 and "stopped before fitting" in res.output
    assert {k: seen[k] for k in expected} == expected


@pytest.mark.parametrize("extra, message", [
    # options that belong to AIM, or to MST
    (["--select", "mst", "--workload", "a,b"], r"--workload applies to --select aim only"),
    (["--max-model-cells", "100"], r"--max-model-cells applies to --select aim only"),
    (["--select", "2", "--workload", "a,b", "--max-model-cells", "100"],
     r"--workload and --max-model-cells apply to --select aim only"),
    (["--select", "mst", "--required-share", "0.5"], r"--required-share applies to --select aim only"),
    (["--select", "aim", "--required-share", "1"], r"--required-share must be in \[0, 1\), got 1"),
    (["--tie-below", "3"], r"--tie-below applies to selected marginals: give --select too"),
    (["--smooth-sd", "a=x"], r"--smooth-sd must be a number or COL=SD pairs"),
    (["--slopes-below", "3"], r"slopes_below drops slopes of coarse cells: it needs coarse_interactions='linear'"),
    (["--select", "aim", "--inference", "laplace", "--tie-below", "0"], r"tie_below must be 'auto', None or a finite number > 0"),
    (["--select", "aim", "--inference", "laplace", "--mst-budget-fraction", "0.2"],
     r"--mst-budget-fraction applies to MST selection"),
    # --select's values and its alias
    (["--select", "2", "--select-mst", "2"], r"--select-mst N is an alias of --select N: give only one"),
    (["--select", "tree"], r"--select: expected mst, aim or a number of 2-way marginals, got 'tree'"),
    (["--select", "-1"], r"--select: the number of 2-way marginals must be >= 0, got -1"),
    (["--select-mst", "-2"], r"--select-mst: the number of 2-way marginals must be >= 0, got -2"),
    # AIM's bad input, refused by select_aim before its charge
    (["--select", "aim", "--inference", "laplace", "--max-model-cells", "0"],
     r"--max-model-cells must be a positive integer, got 0"),
    (["--select", "aim", "--inference", "laplace", "--max-likelihood-flops", "0"],
     r"--max-likelihood-flops must be a positive integer, got 0"),
    (["--max-likelihood-flops", "100"], r"--max-likelihood-flops applies to --select aim only"),
    (["--select", "aim", "--inference", "laplace", "--max-model-cells", "10"],
     r"max_model_cells=10 is below the 13 clique-table cells .* required marginals .* alone .* >= 13"),
    (["--select", "aim", "--inference", "laplace", "--workload", "a,zz"], r"workload: column 'zz' is not in the Domain"),
    (["--select", "aim", "--inference", "laplace", "--workload", "a,b,a"],
     r"workload: marginal \('a', 'b', 'a'\) repeats column\(s\) \['a'\]"),
    (["--select", "aim", "--inference", "laplace", "--workload", " , "], r"workload: a marginal needs at least one column"),
    (["--select", "aim", "--inference", "laplace", "--epsilon", "0.001"],
     r"epsilon=0.001 is too small for AIM on 400 rows: .* AIM needs epsilon >= 0\.\d+"),
])
def test_bad_aim_input_exits_2_before_any_budget_is_spent(files, monkeypatch, extra, message):
    import re

    def spend(*args, **kwargs):
        raise AssertionError("budget spent before the error")

    monkeypatch.setattr(PrivacyLedger, "spend", spend)
    res = _generate(files, *extra)
    assert res.exit_code == 2, res.output
    assert res.output.count("error:") == 1 and re.search(message, " ".join(res.output.split()))
    assert not (files / "out").exists()


@pytest.mark.parametrize("flag, value", [("--select", "aim"), ("--workload", "a,b"), ("--max-model-cells", "100")])
def test_aim_options_are_refused_for_other_generators(files, flag, value):
    args = ["generate", files / "t.csv", "--domain", files / "d.json", "--generator", "privbayes", flag, value,
            "--out", files / "out"]
    res = CliRunner().invoke(app, [str(a) for a in args])
    assert res.exit_code == 2 and f"{flag} applies to --generator napsu, not privbayes" in res.output
    assert res.output.count("error:") == 1 and not (files / "out").exists()


def test_a_non_integer_model_cap_is_a_usage_error(files):
    res = _generate(files, "--select", "aim", "--inference", "laplace", "--max-model-cells", "2.5")
    assert res.exit_code == 2 and "--max-model-cells" in res.output and not (files / "out").exists()


def test_help_shows_select_and_hides_its_alias():
    cmd = typer.main.get_command(app).commands["generate"]
    params = {p.name: p for p in cmd.params}
    assert not params["select"].hidden and params["select_mst"].hidden
    assert "--select-mst N is an alias" in params["select"].help
    assert f"default {DEFAULT_MAX_MODEL_CELLS}" in params["max_model_cells"].help
