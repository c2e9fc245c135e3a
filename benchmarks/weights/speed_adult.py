"""Speed of weight estimation at Adult size: 46,043 real + 46,043 synthetic rows.

The real rows are the paper subset of UCI Adult (10 categorical columns, one-hot features); the
"synthetic" rows are a stand-in: each column drawn independently from a Dirichlet-perturbed
version of its real marginal (a crude noisy-marginals generator of the same size; perturbed so
that the classifier has something to find, as exact marginals would make beta_hat = 0). Times exclude data
loading; DP-MLP is timed twice (first call includes JAX compilation). The paper's Table 5
reports 0.8-5.5 s for DP-MLP on small data on a V100. Wall and process CPU time (all threads) are
both recorded: on a shared machine the CPU time is the better guide to the dedicated wall time.

    OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 \
        PYTHONPATH=src python benchmarks/weights/speed_adult.py [--out FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

from synthinfer.files import atomic_write_text
from synthinfer.datasets import load_adult
from synthinfer.weights import BetaDebiased, BetaNoised, DPMLPWeights, LogRegWeights, OutputPerturbedWeights

OUT = Path(__file__).parent / "results"


def main(out: Path = OUT / "speed_adult.json") -> None:
    warnings.simplefilter("ignore")
    ds = load_adult(paper_subset=True)
    real = ds.data
    rng = np.random.default_rng(0)
    synth = {}
    for c in real.columns:
        cats = real[c].cat.categories
        p = real[c].value_counts(normalize=True).reindex(cats).to_numpy()
        synth[c] = pd.Categorical(rng.choice(cats, size=len(real), p=rng.dirichlet(200 * p + 0.5)), categories=cats)
    synth = pd.DataFrame(synth)
    bounds = ds.domain
    n = len(real)
    delta = 1 / n - 1e-6
    timings, cpu = {}, {}

    def timed(name, make):
        t, c = time.perf_counter(), time.process_time()
        est = make().fit(real, synth)
        w = est.weights(synth) if name != "OutputPerturbed" else est.weights(synth.iloc[: est.n_release_])
        timings[name], cpu[name] = time.perf_counter() - t, time.process_time() - c
        print(f"{name:28s} wall {timings[name]:7.2f} s  cpu {cpu[name]:7.2f} s  mean weight {np.mean(w):.3f}", flush=True)
        return est

    timed("LogReg", lambda: LogRegWeights(bounds, lam=0.1))
    timed("BetaNoised", lambda: BetaNoised(bounds, epsilon=0.1, lam=0.1, seed=0))
    timed("BetaDebiased", lambda: BetaDebiased(bounds, epsilon=0.1, lam=0.1, seed=0))
    timed("OutputPerturbed", lambda: OutputPerturbedWeights(bounds, epsilon=0.1, lam=0.1, seed=0))
    for rep in ("DP-MLP (1st, incl. compile)", "DP-MLP (2nd)"):
        est = timed(rep, lambda: DPMLPWeights(bounds, epsilon=0.1, delta=0.3 * delta, epochs=5, lot_size=256, seed=1))
    result = {
        "rows": {"real": n, "synthetic": len(synth)},
        "features": int(len(est.features_.feature_names)),
        "dp_mlp": {"steps": est.steps_, "lot_size": 256, "epochs": 5, "noise_multiplier": est.noise_multiplier_},
        "wall_seconds": timings,
        "cpu_seconds_all_threads": cpu,
        "targets": {"logistic family": "< 1 s", "DP-MLP": "< 30 s on 2 cores"},
        "cpu_count": os.cpu_count(),
        "loadavg": os.getloadavg(),
    }
    out.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(out, json.dumps(result, indent=2))


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", type=Path, default=OUT / "speed_adult.json")
    main(ap.parse_args().out)
