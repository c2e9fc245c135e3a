"""Logistic regression from real + DP synthetic data (Wilde et al. 2021, Section 4 / A.6.3 / Figs A.13-A.16).

Datasets: Framingham (TenYearCHD) and UCI Heart, Cleveland (target = num > 0), a fixed subset of
6 covariates each, with public bounds set by hand from domain knowledge (not from the data).
Synthetic data at epsilon = 6 from one of our DP generators (``--generator``):
``privbayes`` (default; ``synthinfer.generate.PrivBayes``, degree 2, continuous columns in 5
equal-width bins over the public bounds, synthetic values at the bin midpoints) or ``laplace``
(the truncated Laplace mechanism of A.3 over the 7 released columns, epsilon_j = 6/7 each by basic
composition, binary columns thresholded back to {0, 1}). 5-fold cross-validation: the training folds are the private data (the synthetic data
are generated from them; the learner's own real data are the first n rows of them); the held-out
fold gives AUROC and the log score (mean log posterior predictive probability).
Models: l_w with w in {0 (real only), 0.5, 1}, l_beta with beta in {0.25, 0.5, 0.75} and w_beta = 1.25.
Posteriors: BlackJAX NUTS, vmapped over all (fold, n, m) configurations of a model in one run.

    PYTHONPATH=src python benchmarks/bayes/logistic_experiment.py
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

import numpy as np
import pandas as pd

FEATURES = {
    "framingham": {
        "target": "TenYearCHD",
        "bounds": {"male": (0, 1), "age": (30, 80), "sysBP": (80, 300), "totChol": (100, 700), "cigsPerDay": (0, 70), "glucose": (40, 400)},
        "binary": ["male"],
    },
    "heart": {
        "target": "target",
        "bounds": {"age": (20, 90), "male": (0, 1), "cp_asymptomatic": (0, 1), "thalch": (60, 220), "oldpeak": (0, 7), "exang": (0, 1)},
        "binary": ["male", "cp_asymptomatic", "exang"],
    },
}
N_FRACS = (0.05, 0.25)
M_FRACS = (0.0, 0.05, 0.1, 0.2, 0.4, 1.0)
EPSILON = 6.0


def load(name: str) -> pd.DataFrame:
    from synthinfer.datasets import load_framingham, load_heart_cleveland

    spec = FEATURES[name]
    if name == "framingham":
        df = load_framingham().data
    else:
        h = load_heart_cleveland().data
        df = pd.DataFrame(
            {
                "age": h["age"], "male": (h["sex"] == "Male").astype(float), "cp_asymptomatic": (h["cp"] == "asymptomatic").astype(float),
                "thalch": h["thalch"], "oldpeak": h["oldpeak"], "exang": h["exang"].astype(float), "target": h["target"],
            }
        )
    cols = [*spec["bounds"], spec["target"]]
    return df[cols].dropna().reset_index(drop=True).astype(float)


def scale(df: pd.DataFrame, name: str) -> tuple[np.ndarray, np.ndarray]:
    """Covariates mapped to [0, 1] by the public bounds (never by data statistics)."""
    spec = FEATURES[name]
    X = np.column_stack([(df[c] - a) / (b - a) for c, (a, b) in spec["bounds"].items()])
    return X, df[spec["target"]].to_numpy()


def synthesize(train: pd.DataFrame, name: str, generator: str, rng: np.random.Generator) -> pd.DataFrame:
    """One synthetic dataset of len(train) rows at epsilon = EPSILON from the private ``train``."""
    from synthinfer.data import Domain, decode, encode
    from synthinfer.data.discretize import binned_column, clip_to_bounds
    from synthinfer.data.domain import Column
    from synthinfer.generate import LaplaceMechanismGenerator, PrivBayes

    spec = FEATURES[name]
    if generator == "laplace":
        gen = LaplaceMechanismGenerator({**spec["bounds"], spec["target"]: (0, 1)}, epsilon=EPSILON, binary=[*spec["binary"], spec["target"]], seed=rng)
        return gen.fit(train).generate(1)[0]
    cols = [Column(c, (0.0, 1.0)) if c in spec["binary"] else binned_column(c, bounds=(a, b), bins=5) for c, (a, b) in spec["bounds"].items()]
    dom = Domain([*cols, Column(spec["target"], (0.0, 1.0))])
    pb = PrivBayes(epsilon=EPSILON, seed=rng, degree=2).fit(clip_to_bounds(train, spec["bounds"]), dom)
    syn = pb.generate(1, n=len(train), seed=rng)[0]
    return decode(encode(syn, dom), dom, midpoints=True).astype(float)


def main() -> None:
    import arviz as az
    from sklearn.model_selection import StratifiedKFold

    from synthinfer.bayes import BetaLoss, GeneralisedPosterior, LogLoss, LogisticRegression, auroc
    from synthinfer.bayes.posterior import log_predictive_density, predictive_proba
    from synthinfer._jax import jnp

    ap = argparse.ArgumentParser()
    ap.add_argument("--datasets", default="heart,framingham")
    ap.add_argument("--folds", type=int, default=5)
    ap.add_argument("--warmup", type=int, default=250)
    ap.add_argument("--samples", type=int, default=400)
    ap.add_argument("--max-tree-depth", type=int, default=6)
    ap.add_argument("--generator", choices=("privbayes", "laplace"), default="privbayes")
    ap.add_argument("--out", default=str(Path(__file__).parent / "results"))
    args = ap.parse_args()
    outdir = Path(args.out)
    outdir.mkdir(parents=True, exist_ok=True)
    losses = {
        "w=0.5": LogLoss(0.5), "w=1": LogLoss(1.0),
        "beta=0.25": BetaLoss(0.25, 1.25), "beta=0.5": BetaLoss(0.5, 1.25), "beta=0.75": BetaLoss(0.75, 1.25),
    }
    results: dict = {"meta": {"epsilon": EPSILON, "generator": args.generator, "n_fracs": N_FRACS, "m_fracs": M_FRACS,
                              "folds": args.folds, "nuts": {"warmup": args.warmup, "samples": args.samples, "chains": 2, "max_tree_depth": args.max_tree_depth}, "seed_fixed": True,
                              "loadavg_before": os.getloadavg(), "cpu_count": os.cpu_count()}}
    t_all = time.perf_counter()
    for name in args.datasets.split(","):
        spec = FEATURES[name]
        df = load(name)
        folds = list(StratifiedKFold(args.folds, shuffle=True, random_state=0).split(df, df[spec["target"]]))
        rng = np.random.default_rng(1)
        cfgs, tests = [], []
        for k, (tr, te) in enumerate(folds):
            train = df.iloc[rng.permutation(tr)].reset_index(drop=True)
            syn = synthesize(train, name, args.generator, rng)
            Xr, yr = scale(train, name)
            Xs, ys = scale(syn, name)
            tests.append(scale(df.iloc[te], name))
            for nf in N_FRACS:
                n = int(round(nf * len(train)))
                for mf in M_FRACS:
                    m = int(round(mf * len(train)))
                    cfgs.append((k, nf, mf, (Xr[:n], yr[:n]), (Xs[:m], ys[:m]) if m else None))
        res = {"n_rows": len(df), "n_train": len(folds[0][0]), "models": {}}
        timings = {}
        for label, loss in losses.items():
            t0 = time.perf_counter()
            post = GeneralisedPosterior(LogisticRegression(n_features=len(spec["bounds"])), loss, num_warmup=args.warmup, num_samples=args.samples, num_chains=2, max_tree_depth=args.max_tree_depth, seed=2)
            draws = post.sample_many([(c[3], c[4]) for c in cfgs])
            timings[label] = round(time.perf_counter() - t0, 1)
            rhat = [float(az.rhat(az.convert_to_dataset({"u": dr}))["u"].max()) for dr in draws]
            rows = []
            for c, dr in zip(cfgs, draws):
                Xt, yt = tests[c[0]]
                u = jnp.asarray(dr.reshape(-1, dr.shape[-1]))
                d = {"X": Xt, "y": yt}
                rows.append({"fold": c[0], "n_frac": c[1], "m_frac": c[2], "auroc": auroc(yt, predictive_proba(post.model, u, d)),
                             "log_score": float(log_predictive_density(post.model, u, d).mean())})
            tab = pd.DataFrame(rows).groupby(["n_frac", "m_frac"])[["auroc", "log_score"]].agg(["mean", "std"])
            res.setdefault("max_rhat", {})[label] = round(max(rhat), 3)
            res["models"][label] = {f"{nf}": {f"{mf}": {k2[0] + "_" + k2[1]: float(tab.loc[(nf, mf), k2]) for k2 in tab.columns} for mf in M_FRACS} for nf in N_FRACS}
            print(name, label, timings[label], "s", flush=True)
        res["nuts_seconds"] = timings
        results[name] = res
    results["meta"]["wall_seconds"] = round(time.perf_counter() - t_all, 1)
    results["meta"]["loadavg_after"] = os.getloadavg()
    tag = f"{args.generator}_{args.datasets.replace(',', '_')}"
    (outdir / f"logistic_experiment_{tag}.json").write_text(json.dumps(results, indent=1))
    plot(results, outdir, tag)


def plot(results: dict, outdir: Path, tag: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from synthinfer.bayes.plots import model_comparison_plot

    names = [k for k in results if k != "meta"]
    if not names:
        return
    fig, axes = plt.subplots(len(names) * 2, len(N_FRACS), figsize=(11, 4.2 * len(names) * 2), squeeze=False)
    for i, name in enumerate(names):
        r = results[name]
        for j, nf in enumerate(N_FRACS):
            for q, crit in enumerate(("auroc", "log_score")):
                ax = axes[2 * i + q, j]
                curves = {lab: [r["models"][lab][str(nf)][str(mf)][f"{crit}_mean"] for mf in M_FRACS] for lab in r["models"]}
                m_rows = [mf * r["n_train"] for mf in M_FRACS]
                base = r["models"]["w=1"][str(nf)]["0.0"][f"{crit}_mean"]
                model_comparison_plot(m_rows, curves, baseline=base, criterion="AUROC" if crit == "auroc" else "log score (mean log p, higher better)", title=f"{name}: n = {round(nf * r['n_train'])} real rows", ax=ax)
                ax.set_xscale("symlog", linthresh=10)
                ax.set_xlim(0, max(m_rows) * 1.1)
    fig.suptitle(f"Logistic regression, {results['meta']['generator']} synthetic data, epsilon = {EPSILON:g}; mean over folds")
    fig.tight_layout()
    fig.savefig(outdir / f"logistic_model_comparison_{tag}.png", dpi=100)
    plt.close(fig)


if __name__ == "__main__":
    main()
