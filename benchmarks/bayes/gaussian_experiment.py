"""The Gaussian experiment of Wilde et al. (2021), A.6.3: learning N(0, 1) from real + Laplace-mechanism data.

Real data x ~ N(0, 1); synthetic data z = clip(x', -3, 3) + Laplace(0, lambda) from an independent
private sample x' ~ N(0, 1) (bounds of width 6: epsilon = 6 / lambda, so lambda = 1 -> epsilon = 6,
lambda = 0.75 -> epsilon = 8). Prior of A.6.3: sigma^2 ~ IG(2, 4), mu | sigma ~ N(0, (10 sigma)^2).
n in the paper's 16 values, m in {0, 1, ..., 100, 120, ..., 200}; models: l_w with w in {1, 0.5}
(exact NIG posterior), l_beta with beta in {0.25, 0.5, 0.75} and w_beta = 1.25 (the paper's fixed
weight), l_beta with beta = 0.5 and w_beta calibrated by Fisher-information matching, and the
noise-aware Normal-Laplace likelihood with known lambda (grid quadrature, all (n, m) per pass).
Criteria: KLD(F0 || predictive), log score on 500 held-out N(0, 1) points, 1-Wasserstein.

    PYTHONPATH=src python benchmarks/bayes/gaussian_experiment.py --repeats 50 --workers 2
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np

N_GRID = np.array([2, 4, 6, 8, 10, 13, 16, 19, 22, 25, 30, 35, 40, 50, 75, 100])
M_GRID = np.r_[0:101, 120:201:20]
N_REAL = np.arange(1, 301)  # real-only curve, for n-effective up to n + m = 300
SETTINGS = {"eps6": 1.0, "eps8": 0.75}
BOUNDS = (-3.0, 3.0)
CRITERIA = ("kld", "log_score", "wasserstein")


def model_specs():
    from synthinfer.bayes import BetaLoss

    return {
        "w=1 (l_0)": ("exact", 1.0),
        "w=0.5": ("exact", 0.5),
        "beta=0.25": ("grid", BetaLoss(0.25, 1.25)),
        "beta=0.5": ("grid", BetaLoss(0.5, 1.25)),
        "beta=0.75": ("grid", BetaLoss(0.75, 1.25)),
        "beta=0.5 calibrated": ("grid", "calibrate"),
        "noise-aware": ("grid", "noise-aware"),
    }


def one_repeat(task: tuple[str, int]) -> dict:
    from synthinfer.bayes import BetaLoss, GaussianLocationScale, LogLoss, NoiseAwareLoss, NormalInverseGammaPrior, calibrate_beta_weight
    from synthinfer.bayes.quadrature import conjugate_predictive, grid_trajectories
    from synthinfer.generate import laplace_synthetic

    setting, rep = task
    lam = SETTINGS[setting]
    rng = np.random.default_rng([rep, int(lam * 100)])
    prior = NormalInverseGammaPrior(mean=0.0, scale=10.0, shape=2.0, rate=4.0)
    x = rng.normal(size=N_REAL.max())
    z = laplace_synthetic(rng.normal(size=M_GRID.max()), BOUNDS, lam)
    test = rng.normal(size=500)
    dgp = (0.0, 1.0)
    out: dict = {}
    t0 = time.perf_counter()
    real = conjugate_predictive(x, z, N_REAL, np.array([0]), 1.0, prior, dgp, test)
    out["real_only"] = {c: getattr(real, c)[:, 0] for c in CRITERIA}
    w_cal = None
    for name, (kind, spec) in model_specs().items():
        if kind == "exact":
            crit = conjugate_predictive(x, z, N_GRID, M_GRID, spec, prior, dgp, test)
        else:
            if spec == "calibrate":
                w_cal = calibrate_beta_weight(GaussianLocationScale(), BetaLoss(0.5), {"y": z})
                loss = BetaLoss(0.5, w_cal)
            elif spec == "noise-aware":
                loss = NoiseAwareLoss(lam)
            else:
                loss = spec
            crit = grid_trajectories(x, z, N_GRID, M_GRID, loss, prior, dgp, test)
        out[name] = {c: getattr(crit, c) for c in CRITERIA}
    # At m = 0 every model is the real-data-only posterior: use its exact (conjugate) value.
    for name in model_specs():
        for c in CRITERIA:
            out[name][c][:, 0] = out["w=1 (l_0)"][c][:, 0]
    # Accuracy check of the quadrature against the exact conjugate answer (l_0).
    chk = grid_trajectories(x, z, N_GRID, M_GRID, LogLoss(1.0), prior, dgp, test)
    out["grid_error"] = {c: float(np.max(np.abs(getattr(chk, c) - out["w=1 (l_0)"][c])[:, 1:])) for c in CRITERIA}
    out["w_beta_calibrated"] = w_cal
    out["seconds"] = time.perf_counter() - t0
    out["setting"], out["rep"] = setting, rep
    return out


def bootstrap_n_eff(real: np.ndarray, curves: np.ndarray, n_boot: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """A.6.4: bootstrap over repeats; per n, min over m of the mean curve matched on the mean real curve."""
    from synthinfer.bayes import n_effective

    R = curves.shape[0]
    vals = np.empty((n_boot, len(N_GRID)))
    for b in range(n_boot):
        idx = rng.integers(0, R, R)
        rc = real[idx].mean(axis=0)
        cc = curves[idx].mean(axis=0)
        for a, n in enumerate(N_GRID):
            v = n_effective(N_REAL, rc, n, cc[a].min())
            vals[b, a] = min(v, N_REAL.max() - n)  # inf = beyond the real-only grid
    return vals.mean(axis=0), vals.std(axis=0)


def plots(summary: dict, outdir: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from synthinfer.bayes.plots import branching_plot, model_comparison_plot, n_effective_plot

    names = list(model_specs())
    for setting in SETTINGS:
        s = summary[setting]
        fig, axes = plt.subplots(2, 4, figsize=(17, 7.5), sharey=True)
        for ax, name in zip(axes.ravel(), names):
            branching_plot(N_REAL, s["real_only"]["kld"], N_GRID, M_GRID, np.array(s["models"][name]["kld"]), criterion="KLD(F0 || p)", title=name, ax=ax)
            ax.set_ylim(0, 0.35)
        axes.ravel()[-1].axis("off")
        fig.suptitle(f"Branching plots, KLD, {setting} (lambda={SETTINGS[setting]}), mean of {s['repeats']} repeats")
        fig.tight_layout()
        fig.savefig(outdir / f"gaussian_branching_kld_{setting}.png", dpi=110)
        plt.close(fig)
        for crit in CRITERIA:
            fig, axes = plt.subplots(1, 4, figsize=(17, 4))
            for ax, n in zip(axes, (2, 10, 25, 100)):
                a = int(np.nonzero(N_GRID == n)[0][0])
                curves = {name: np.array(s["models"][name][crit])[a] for name in names}
                model_comparison_plot(M_GRID, curves, baseline=s["real_only"][crit][n - 1], criterion=crit, title=f"n = {n}", ax=ax)
            fig.suptitle(f"Model comparison, {crit}, {setting}")
            fig.tight_layout()
            fig.savefig(outdir / f"gaussian_model_comparison_{crit}_{setting}.png", dpi=110)
            plt.close(fig)
        fig, ax = plt.subplots(figsize=(7, 4.5))
        n_effective_plot(N_GRID, {k: (v["mean"], v["sd"]) for k, v in s["n_effective_kld"].items()}, title=f"n-effective (KLD), {setting}", ax=ax)
        fig.tight_layout()
        fig.savefig(outdir / f"gaussian_n_effective_{setting}.png", dpi=110)
        plt.close(fig)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=50)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--out", default=str(Path(__file__).parent / "results"))
    args = ap.parse_args()
    outdir = Path(args.out)
    outdir.mkdir(parents=True, exist_ok=True)
    tasks = [(s, r) for s in SETTINGS for r in range(args.repeats)]
    load_before = os.getloadavg()
    t0 = time.perf_counter()
    import multiprocessing as mp

    with ProcessPoolExecutor(args.workers, mp_context=mp.get_context("spawn")) as ex:
        results = []
        for k, res in enumerate(ex.map(one_repeat, tasks)):
            results.append(res)
            print(f"\r{k + 1}/{len(tasks)} repeats", end="", file=sys.stderr, flush=True)
    wall = time.perf_counter() - t0
    print(file=sys.stderr)
    names = list(model_specs())
    rng = np.random.default_rng(12345)
    summary: dict = {}
    for setting in SETTINGS:
        rs = [r for r in results if r["setting"] == setting]
        real = {c: np.stack([r["real_only"][c] for r in rs]) for c in CRITERIA}
        s = {"lambda": SETTINGS[setting], "epsilon": (BOUNDS[1] - BOUNDS[0]) / SETTINGS[setting], "repeats": len(rs)}
        s["real_only"] = {c: real[c].mean(axis=0).tolist() for c in CRITERIA}
        s["models"], s["n_effective_kld"], s["m_hat_kld"], s["kld_at_m200"], s["best_kld"] = {}, {}, {}, {}, {}
        for name in names:
            arr = {c: np.stack([r[name][c] for r in rs]) for c in CRITERIA}
            mean = {c: arr[c].mean(axis=0) for c in CRITERIA}
            s["models"][name] = {c: mean[c].round(6).tolist() for c in CRITERIA}
            s["models"][name]["kld_se"] = (arr["kld"].std(axis=0) / np.sqrt(len(rs))).round(6).tolist()
            s["m_hat_kld"][name] = dict(zip(map(str, N_GRID), M_GRID[mean["kld"].argmin(axis=1)].tolist()))
            s["best_kld"][name] = dict(zip(map(str, N_GRID), mean["kld"].min(axis=1).round(5).tolist()))
            s["kld_at_m200"][name] = dict(zip(map(str, N_GRID), mean["kld"][:, -1].round(5).tolist()))
            m_, sd_ = bootstrap_n_eff(real["kld"], arr["kld"], 200, rng)
            s["n_effective_kld"][name] = {"mean": m_.round(2).tolist(), "sd": sd_.round(2).tolist()}
        s["w_beta_calibrated"] = {
            "mean": float(np.mean([r["w_beta_calibrated"] for r in rs])),
            "sd": float(np.std([r["w_beta_calibrated"] for r in rs])),
        }
        s["grid_max_abs_error_vs_exact"] = {c: float(max(r["grid_error"][c] for r in rs)) for c in CRITERIA}
        summary[setting] = s
    n_post = len(N_GRID) * len(M_GRID) * len(names) * len(tasks)
    summary["meta"] = {
        "n_grid": N_GRID.tolist(),
        "m_grid": M_GRID.tolist(),
        "models": names,
        "posteriors_computed": n_post,
        "wall_seconds": round(wall, 1),
        "worker_seconds_total": round(sum(r["seconds"] for r in results), 1),
        "workers": args.workers,
        "cpu_count": os.cpu_count(),
        "loadavg_before": load_before,
        "loadavg_after": os.getloadavg(),
        "seed_fixed": True,
        "command": "PYTHONPATH=src python benchmarks/bayes/gaussian_experiment.py --repeats %d --workers %d" % (args.repeats, args.workers),
    }
    (outdir / "gaussian_experiment.json").write_text(json.dumps(summary, indent=1))
    plots(summary, outdir)
    print(json.dumps(summary["meta"], indent=1))


if __name__ == "__main__":
    main()
