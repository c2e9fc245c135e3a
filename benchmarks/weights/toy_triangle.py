"""Toy of Ghalebikesabi et al. (2022), Section 4.1 / Fig. 1: square (synthetic) vs triangle (real).

n = 100 real rows uniform on {x1 + x2 < 1} and 100 synthetic rows uniform on the unit square;
weights with epsilon = 1 (DP-MLP: delta = 1/n - 1e-6, as Section 4.2), lambda = 0.1. For each
method: weight histograms and weighted KDEs (figure, first seed), and over ``--seeds`` repetitions
each weighted sample's distance to the true triangle distribution: exact weighted Wasserstein-1
to 300 reference draws, the weighted mass outside the triangle (truth: 0), and the L1 distance
of the weighted KDE to the true density on a grid.

    PYTHONPATH=src python benchmarks/weights/toy_triangle.py --seeds 20
"""

from __future__ import annotations

import argparse
import json
import os
import time
import warnings
from pathlib import Path

import numpy as np
from scipy.stats import gaussian_kde, wasserstein_distance_nd

from synthinfer.files import atomic_write_text
from synthinfer.datasets import make_triangle_square
from synthinfer.weights import BetaDebiased, BetaNoised, DPMLPWeights, LogRegWeights, MLPWeights, self_normalise

BOUNDS = {"x1": (0.0, 1.0), "x2": (0.0, 1.0)}
OUT = Path(__file__).parent / "results"
METHODS = ["True", "None", "LogReg", "BetaNoised", "BetaDebiased", "MLP", "DP-MLP"]


def weights_for(method: str, real, synth, seed: int) -> np.ndarray:
    n = len(real)
    if method == "True":
        return 2.0 * (synth.x1 + synth.x2 < 1).to_numpy()
    if method == "None":
        return np.ones(len(synth))
    est = {
        "LogReg": lambda: LogRegWeights(BOUNDS, lam=0.1),
        "BetaNoised": lambda: BetaNoised(BOUNDS, epsilon=1.0, lam=0.1, seed=seed),
        "BetaDebiased": lambda: BetaDebiased(BOUNDS, epsilon=1.0, lam=0.1, seed=seed),
        "MLP": lambda: MLPWeights(BOUNDS, seed=seed),
        "DP-MLP": lambda: DPMLPWeights(BOUNDS, epsilon=1.0, delta=1 / n - 1e-6, epochs=20, lot_size=32, seed=seed),
    }[method]()
    return est.fit(real, synth).weights(synth)


GRID = np.stack(np.meshgrid(np.linspace(0.0125, 0.9875, 40), np.linspace(0.0125, 0.9875, 40)), -1).reshape(-1, 2)
TRUE_DENSITY = 2.0 * (GRID.sum(axis=1) < 1)


def kde(points: np.ndarray, w: np.ndarray) -> np.ndarray:
    return gaussian_kde(points.T, weights=w, bw_method=0.3)(GRID.T)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seeds", type=int, default=20)
    args = ap.parse_args()
    warnings.simplefilter("ignore")
    ref, _ = make_triangle_square(300, seed=10_000)
    rows: dict[str, dict[str, list[float]]] = {m: {"wasserstein": [], "outside_mass": [], "kde_l1": []} for m in METHODS}
    example = {}
    t0 = time.time()
    for seed in range(args.seeds):
        real, synth = make_triangle_square(100, seed=seed)
        pts = synth.to_numpy()
        outside = (synth.x1 + synth.x2 >= 1).to_numpy()
        for m in METHODS:
            w = self_normalise(weights_for(m, real, synth, seed))
            rows[m]["wasserstein"].append(float(wasserstein_distance_nd(pts, ref.to_numpy(), u_weights=w)))
            rows[m]["outside_mass"].append(float(w[outside].sum() / w.sum()))
            rows[m]["kde_l1"].append(float(np.mean(np.abs(kde(pts, w) - TRUE_DENSITY))))
            if seed == 0:
                example[m] = w
    summary = {
        m: {k: {"mean": float(np.mean(v)), "se": float(np.std(v, ddof=1) / np.sqrt(len(v)))} for k, v in d.items()}
        for m, d in rows.items()
    }
    result = {
        "setting": {"n": 100, "epsilon": 1.0, "lambda": 0.1, "dp_mlp_delta": 1 / 100 - 1e-6, "seeds": args.seeds,
                    "reference_draws": 300, "kde_bandwidth": 0.3},
        "summary": summary,
        "runtime_s": time.time() - t0,
        "loadavg": os.getloadavg(),
    }
    OUT.mkdir(parents=True, exist_ok=True)
    atomic_write_text(OUT / "toy_triangle.json", json.dumps(result, indent=2))
    plot(example)
    for m in METHODS:
        s = summary[m]
        print(f"{m:13s} W1 {s['wasserstein']['mean']:.4f}±{s['wasserstein']['se']:.4f}  outside "
              f"{s['outside_mass']['mean']:.3f}±{s['outside_mass']['se']:.3f}  KDE-L1 {s['kde_l1']['mean']:.3f}")


def plot(example: dict[str, np.ndarray]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    real, synth = make_triangle_square(100, seed=0)
    pts = synth.to_numpy()
    fig, ax = plt.subplots(2, len(METHODS) + 1, figsize=(2.4 * (len(METHODS) + 1), 5))
    for j, m in enumerate(METHODS):
        ax[0, j].hist(example[m], bins=20, color="C0")
        ax[0, j].set_title(m, fontsize=9)
        dens = kde(pts, example[m]).reshape(40, 40)
        ax[1, j].imshow(dens, origin="lower", extent=(0, 1, 0, 1), cmap="viridis")
        ax[1, j].plot([0, 1], [1, 0], "w--", lw=0.8)
    ax[0, -1].axis("off")
    ax[1, -1].imshow(kde(real.to_numpy(), np.ones(len(real))).reshape(40, 40), origin="lower", extent=(0, 1, 0, 1))
    ax[1, -1].set_title("real (triangle)", fontsize=9)
    ax[0, 0].set_ylabel("weights")
    ax[1, 0].set_ylabel("weighted KDE")
    fig.suptitle("Toy of Sec. 4.1 / Fig. 1: synthetic square weighted towards the real triangle (eps=1, lambda=0.1)")
    fig.tight_layout()
    tmp = OUT / "toy_triangle.tmp.png"
    fig.savefig(tmp, dpi=110)
    os.replace(tmp, OUT / "toy_triangle.png")


if __name__ == "__main__":
    main()
