"""What importing synthinfer does to the process: nothing heavy, no global JAX settings, no
third-party notices."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest


def _run(code: str, tmp_path) -> subprocess.CompletedProcess:
    # a fresh home: ArviZ prints its once-a-day notice only when its stamp file is missing
    env = dict(os.environ, HOME=str(tmp_path), XDG_CACHE_HOME=str(tmp_path / "cache"), PYTHONWARNINGS="default")
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)


def test_import_synthinfer_leaves_jax_alone(tmp_path):
    out = _run("import sys, synthinfer, jax; synthinfer.open_release; synthinfer.analyze;"
               "print(jax.config.jax_enable_x64, 'synthinfer._jax' in sys.modules, 'arviz' in sys.modules)", tmp_path)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["False", "False", "False"]


def test_no_third_party_notice_reaches_the_user(tmp_path):
    out = _run("import numpy as np, synthinfer.bayes;"
               "from synthinfer.napsu.diagnostics import to_inference_data; to_inference_data(np.zeros((1, 2, 3)))",
               tmp_path)
    assert out.returncode == 0, out.stderr
    assert "Warning" not in out.stderr, out.stderr
    # the control: ArviZ does print its notice when imported directly in the same setting
    assert "refactor" in _run("import arviz", tmp_path / "fresh").stderr


def test_a_fit_in_a_fresh_process_prints_nothing(tmp_path):
    # ArviZ is imported during the fit (its InferenceData): its notice must not show
    out = _run("import warnings; from synthinfer.errors import SynthinferWarning;"
               "warnings.simplefilter('ignore', SynthinferWarning); from synthinfer.datasets import make_toy_logistic;"
               "from synthinfer.generate import NapsuMQ; toy = make_toy_logistic(300, (1.0, 0.0), seed=0);"
               "NapsuMQ([('x1', 'x2', 'y')], inference='laplace', seed=0).fit(toy.data, toy.domain);"
               "import sys; print('arviz' in sys.modules)", tmp_path)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["True"] and out.stderr == "", out.stderr


@pytest.mark.filterwarnings("ignore::synthinfer.errors.ConvergenceWarning")  # deliberately short chains
def test_fits_compute_in_float64_and_leave_the_process_setting_alone():
    import jax
    import numpy as np

    from synthinfer.bayes import BetaLoss, GeneralisedPosterior
    from synthinfer.bayes.models import GaussianLocationScale
    from synthinfer.datasets import make_toy_logistic
    from synthinfer.generate import NapsuMQ

    assert not jax.config.jax_enable_x64
    toy = make_toy_logistic(500, (1.0, 0.0), seed=0)
    gen = NapsuMQ([("x1", "x2", "y")], epsilon=1.0, delta=1e-6, inference="laplace", seed=0)
    gen.fit(toy.data, toy.domain)
    assert gen.laplace_.mean.dtype == np.float64 and np.asarray(gen.draws_).dtype == np.float64
    assert len(gen.generate(2, n=10, seed=1)) == 2
    y = np.random.default_rng(0).normal(size=30)
    post = GeneralisedPosterior(GaussianLocationScale(), BetaLoss(0.5), method="nuts", num_warmup=50, num_samples=50,
                                seed=0).fit(y[:10], y[10:])
    assert np.asarray(post.idata_.posterior["mu"]).dtype == np.float64
    assert not jax.config.jax_enable_x64  # the process's own setting, untouched


def test_warnings_point_at_the_callers_line():
    import warnings

    from synthinfer.datasets import make_toy_logistic
    from synthinfer.generate import NapsuMQ

    toy = make_toy_logistic(500, (1.0, 0.0), seed=0)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        NapsuMQ([("x1", "y")], epsilon=1.0, delta=1e-6, inference="laplace", seed=0).fit(toy.data, toy.domain)
    ours = [w for w in caught if "no marginal" in str(w.message)]
    assert ours and all(w.filename == __file__ for w in ours), [(w.filename, str(w.message)) for w in caught]
    import numpy as np
    import pandas as pd

    from synthinfer.analysis import analyze, rubins_rules
    from synthinfer.bayes import mix_posteriors
    from synthinfer.data import Domain
    from synthinfer.errors import SynthinferWarning

    rng = np.random.default_rng(0)
    datasets = [pd.DataFrame({"y": rng.normal(size=50), "x": rng.normal(size=50)}) for _ in range(20)]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        Domain.from_dataframe(toy.data)  # non-private convenience
        rubins_rules(np.zeros((3, 1)), np.zeros((3, 1)))  # zero variance
        analyze([datasets[0]] * 3, "y ~ x", model="ols", progress=False)  # identical datasets: negative T
        mix_posteriors(datasets, "y ~ x", "ols", n=500, seed=0)  # datasets small next to n
    ours = [w for w in caught if issubclass(w.category, SynthinferWarning)]
    assert len(ours) >= 4 and all(w.filename == __file__ for w in ours), [(w.filename, str(w.message)) for w in ours]
