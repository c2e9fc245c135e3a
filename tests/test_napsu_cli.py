"""`synthinfer generate` CLI smoke test on a small CSV, writing a release bundle."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from typer.testing import CliRunner

from synthinfer.cli import app
from synthinfer.datasets import make_toy_logistic
from synthinfer.release import open_release


def test_generate_writes_a_release(tmp_path):
    ds = make_toy_logistic(300, (1.0, 0.0), seed=0)
    csv = tmp_path / "toy.csv"
    ds.data.to_csv(csv, index=False)
    dom = tmp_path / "domain.json"
    ds.domain.to_json(dom)
    out = tmp_path / "release"
    args = ["generate", str(csv), "--domain", str(dom), "--marginals", "x1,x2,y",
            "--epsilon", "1", "--delta", "1e-6", "--m", "3", "--out", str(out), "--inference", "laplace", "--seed", "1"]
    r = CliRunner().invoke(app, args)
    assert r.exit_code == 0, r.output
    rel = open_release(out)
    assert len(rel.datasets) == 3 and len(rel.datasets[0]) == 300
    man = rel.manifest
    text = json.dumps(man)
    assert "napsu" in text.lower() and '"seed":' not in text
    assert set(man["settings"]["reference_categories"]) == {"x1", "x2", "y"}
    # Refuses to overwrite, and a bad column is a clean error (exit 2), not a traceback.
    assert CliRunner().invoke(app, args).exit_code != 0
    bad = args[:4] + ["--marginals", "x1,nope"] + args[6:]
    bad[bad.index(str(out))] = str(tmp_path / "other")
    r = CliRunner().invoke(app, bad)
    assert r.exit_code == 2 and "nope" in r.output
    # --reference COL=CATEGORY matches the Domain's categories by text (y's are integers)
    fixed = args[:-2] + ["--reference", "y=1"]
    fixed[fixed.index(str(out))] = str(tmp_path / "fixed")
    r = CliRunner().invoke(app, fixed)
    assert r.exit_code == 0, r.output
    assert open_release(tmp_path / "fixed").manifest["settings"]["reference_categories"]["y"] == 1
    fixed[-1] = "y=7"
    fixed[fixed.index(str(tmp_path / "fixed"))] = str(tmp_path / "bad")
    r = CliRunner().invoke(app, fixed)
    assert r.exit_code == 2 and "y" in r.output and "7" in r.output


def test_cli_keeps_compiled_programs_in_the_cache_dir(toy_files):
    tmp_path = toy_files
    cache = tmp_path / "cache"
    env = dict(os.environ, SYNTHINFER_CACHE_DIR=str(cache))
    env.pop("SYNTHINFER_COMPILE_CACHE")
    args = [sys.executable, "-c", "from synthinfer.cli import app; app()", "generate", str(tmp_path / "toy.csv"),
            "--domain", str(tmp_path / "domain.json"), "--marginals", "x1,x2,y", "--epsilon", "1", "--delta", "1e-6",
            "--m", "2", "--inference", "laplace", "--seed", "1"]
    r = subprocess.run(args + ["--out", str(tmp_path / "a")], env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    (tagged,) = cache.iterdir()  # one directory per JAX version and host CPU
    assert tagged.name.startswith("jax") and len(list(tagged.iterdir())) > 3  # the fit's and sampler's programs
    r = subprocess.run([*args[:3], "--no-compile-cache", *args[3:], "--out", str(tmp_path / "b")],
                       env=dict(env, SYNTHINFER_CACHE_DIR=str(tmp_path / "off")), capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, r.stderr
    assert not (tmp_path / "off").exists()


def test_cli_runs_without_the_cache_when_its_directory_cannot_be_made(tmp_path, monkeypatch):
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("")
    monkeypatch.setenv("SYNTHINFER_CACHE_DIR", str(blocker / "cache"))
    dom = tmp_path / "domain.json"
    make_toy_logistic(50, (1.0, 0.0), seed=0).domain.to_json(dom)
    r = CliRunner().invoke(app, ["--compile-cache", "domain", str(dom)])
    assert r.exit_code == 0, r.output
    assert "compilation cache off" in r.output
