"""`synthinfer analyze RELEASE ...` and Release.analyze on a written bundle."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from synthinfer.analysis import analyze
from synthinfer.cli import app
from synthinfer.privacy import PrivacyLedger
from synthinfer.release import ReleaseRecord, open_release, write_release


def _toy(rng, n=300):
    age = rng.integers(18, 80, n).astype(float)
    race = rng.choice(["Black", "Other", "White"], n, p=[0.2, 0.1, 0.7])
    sex = rng.choice(["Female", "Male"], n)
    eta = -3 + 0.05 * age + 0.4 * (sex == "Male") - 0.3 * (race == "Black")
    income = np.where(rng.random(n) < 1 / (1 + np.exp(-eta)), ">50K", "<=50K")
    return pd.DataFrame(
        {
            "income": pd.Categorical(income, categories=["<=50K", ">50K"]),
            "age": age,
            "race": pd.Categorical(race, categories=["Black", "Other", "White"]),
            "sex": pd.Categorical(sex, categories=["Female", "Male"]),
        }
    )


FORMULA = "income ~ age + C(race) + C(sex)"


@pytest.fixture(scope="module")
def release(tmp_path_factory):
    rng = np.random.default_rng(4)
    datasets = [_toy(rng) for _ in range(5)]
    weights = [rng.uniform(0.5, 1.5, 300) for _ in range(5)]
    ledger = PrivacyLedger((1.0, 1e-6))
    ledger.spend("marginals", 1.0, 1e-6, mechanism="gaussian")
    record = ReleaseRecord(mechanism="toy", settings={"epsilon": 1.0}, ledger=ledger, n=250, seed_fixed=True)
    path = write_release(tmp_path_factory.mktemp("rel") / "adult", datasets, record=record, weights=weights,
                         skip_private_data_check=True)
    return path, datasets, weights


def test_release_analyze_uses_n_and_weights(release):
    path, datasets, weights = release
    res = open_release(path).analyze(FORMULA, model="logit", progress=False)
    ref = analyze(datasets, FORMULA, weights=weights, n=250, progress=False)
    pd.testing.assert_series_equal(res.params, ref.params)
    pd.testing.assert_series_equal(res.bse, ref.bse)
    assert res.n == 250
    unweighted = open_release(path).analyze(FORMULA, use_weights=False, progress=False)
    assert not np.allclose(unweighted.params, res.params)


def test_cli_table(release):
    path, _, _ = release
    out = CliRunner().invoke(app, ["analyze", str(path), "--formula", FORMULA, "--model", "logit", "--no-progress"], env={"COLUMNS": "140"})
    assert out.exit_code == 0, out.output
    for term in ("Intercept", "C(race)[T.White]", "C(sex)[T.Male]", "age", "estimate", "P>|t|"):
        assert term in out.output


def test_cli_json(release):
    path, _, _ = release
    out = CliRunner().invoke(app, ["analyze", str(path), "--formula", FORMULA, "--json", "--no-weights"])
    assert out.exit_code == 0, out.output
    doc = json.loads(out.output)
    assert doc["m"] == 5 and doc["n"] == 250 and doc["failed"] == []
    assert doc["fingerprint"] == open_release(path).fingerprint
    names = [c["name"] for c in doc["coefficients"]]
    assert names == ["Intercept", "C(race)[T.Other]", "C(race)[T.White]", "C(sex)[T.Male]", "age"]
    ref = open_release(path).analyze(FORMULA, use_weights=False, progress=False)
    assert [c["estimate"] for c in doc["coefficients"]] == pytest.approx(ref.params.tolist())


def test_cli_no_fast_fits_with_statsmodels_and_agrees(release, monkeypatch):
    import synthinfer.analysis.api as api

    path, _, _ = release
    calls = []
    real = api.fit_fast
    monkeypatch.setattr(api, "fit_fast", lambda *a, **k: calls.append(1) or real(*a, **k))
    docs = {}
    for opt in ("--fast", "--no-fast"):
        out = CliRunner().invoke(app, ["analyze", str(path), "--formula", FORMULA, "--json", "--no-weights", opt])
        assert out.exit_code == 0, out.output
        docs[opt] = json.loads(out.output)
    assert len(calls) == 1  # --fast only
    fast, slow = ([c[k] for c in docs[o]["coefficients"] for k in ("estimate", "std_err")] for o in ("--fast", "--no-fast"))
    assert fast == pytest.approx(slow, rel=1e-8)


def test_cli_reports_a_tampered_release(release, tmp_path):
    import shutil

    path, _, _ = release
    copy = tmp_path / "copy"
    shutil.copytree(path, copy)
    f = copy / "data" / "synthetic_000.parquet"
    f.write_bytes(f.read_bytes()[:-10] + b"0123456789")
    out = CliRunner().invoke(app, ["analyze", str(copy), "--formula", FORMULA])
    assert out.exit_code == 2
    assert "changed after release" in out.output
    out = CliRunner().invoke(app, ["analyze", str(path), "--formula", FORMULA, "--fingerprint", "ab" * 32])
    assert out.exit_code == 2 and "published" in out.output


def test_cli_checks_alpha_and_jobs_before_fitting(release):
    path, _, _ = release
    for opt, value in (("--alpha", "0"), ("--alpha", "1.5"), ("--jobs", "0")):
        out = CliRunner().invoke(app, ["analyze", str(path), "--formula", FORMULA, "--no-progress", opt, value])
        assert out.exit_code == 2 and "Traceback" not in out.output, out.output


def test_cli_missing_drop_fits_the_complete_cases_of_a_release_with_weights(tmp_path):
    rng = np.random.default_rng(7)
    datasets = [_toy(rng) for _ in range(4)]
    for d in datasets:
        d.loc[rng.random(len(d)) < 0.2, "age"] = np.nan
    weights = [rng.uniform(0.5, 1.5, 300) for _ in range(4)]
    ledger = PrivacyLedger((1.0, 1e-6))
    ledger.spend("marginals", 1.0, 1e-6, mechanism="gaussian")
    record = ReleaseRecord(mechanism="toy", settings={"epsilon": 1.0}, ledger=ledger, n=250, seed_fixed=True)
    path = write_release(tmp_path / "holes", datasets, record=record, weights=weights, skip_private_data_check=True)
    res = CliRunner().invoke(app, ["analyze", str(path), "--formula", FORMULA, "--no-progress"])
    assert res.exit_code == 2 and "missing values in 'age'" in res.output and "--missing drop" in res.output
    res = CliRunner().invoke(app, ["analyze", str(path), "--formula", FORMULA, "--missing", "drop", "--json"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.output)
    kept = [d["age"].notna().to_numpy() for d in datasets]
    ref = analyze([d[k].reset_index(drop=True) for d, k in zip(datasets, kept)], FORMULA,
                  weights=[w[k] for w, k in zip(weights, kept)], n=250 * np.mean([k.mean() for k in kept]),
                  progress=False)
    np.testing.assert_allclose([c["estimate"] for c in out["coefficients"]], ref.params.to_numpy(), rtol=1e-10)
    assert out["missing"]["complete_share"] == pytest.approx(np.mean([k.mean() for k in kept]))
    for extra, message in ((["--missing", "keep"], "--missing must be raise or drop"),
                           (["--missing", "drop", "--bayes"], "--bayes mixes posteriors")):
        res = CliRunner().invoke(app, ["analyze", str(path), "--formula", FORMULA, *extra])
        assert res.exit_code == 2 and message in res.output and res.output.count("error:") == 1


def test_cli_takes_a_statsmodels_model_by_name(release):
    path, datasets, weights = release
    res = CliRunner().invoke(app, ["analyze", str(path), "--formula", "race ~ age", "--model", "mnlogit", "--json",
                                   "--no-weights"])
    assert res.exit_code == 0, res.output
    names = [c["name"] for c in json.loads(res.output)["coefficients"]]
    assert names == ["race=Other: Intercept", "race=Other: age", "race=White: Intercept", "race=White: age"]
    res = CliRunner().invoke(app, ["analyze", str(path), "--formula", "race ~ age", "--model", "tobit"])
    assert res.exit_code == 2 and "unknown model 'tobit'" in res.output
