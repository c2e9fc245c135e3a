"""Fidelity and speed of the baseline DP generators on Adult.

Fidelity: total variation distance (TVD) between the real and the synthetic 1-way and 2-way
marginals of the NAPSU-MQ Adult table (10 discretised columns, n = 46,043), averaged over
columns / the 45 column pairs. The mixed-type DP-GAN gets age and hours-per-week as numbers
(public bounds 17-90 and 1-99); its output is cut into the same public buckets for the TVD.
Speed: wall-clock fit time on this machine (2 cores, shared; the load average is recorded).

Usage: PYTHONPATH=src python benchmarks/baselines/run_baselines.py [--epochs 50] [--out DIR]
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import platform
import time
from pathlib import Path

import numpy as np
import pandas as pd

from synthinfer.files import atomic_write, atomic_write_text
from synthinfer.data import encode
from synthinfer.datasets import load_adult
from synthinfer.generate import DPCGAN, DPGAN, PrivBayes
from synthinfer.reporting.fidelity import marginal_tv


def tvd_marginals(real_codes: np.ndarray, syn_codes: np.ndarray, shape: tuple[int, ...], way: int) -> list[float]:
    """Total variation distance of every ``way``-way marginal (the library's, as the reports use)."""
    return [marginal_tv(real_codes, syn_codes, shape, cols) for cols in itertools.combinations(range(len(shape)), way)]


def summarise(real_codes, syn, domain) -> dict:
    syn_codes = encode(syn, domain)
    one = tvd_marginals(real_codes, syn_codes, domain.shape, 1)
    two = tvd_marginals(real_codes, syn_codes, domain.shape, 2)
    return {"tvd1_mean": float(np.mean(one)), "tvd1_max": float(np.max(one)),
            "tvd2_mean": float(np.mean(two)), "tvd2_max": float(np.max(two))}


def numeric_adult(disc: pd.DataFrame) -> tuple[pd.DataFrame, dict]:
    """The same rows with age and hours-per-week as numbers, and the public mixed schema."""
    full = load_adult(paper_subset=False).data
    cols = list(disc.columns)
    full = full[cols].dropna().reset_index(drop=True)
    assert len(full) == len(disc)
    df = disc.copy()
    df["age"] = full["age"].astype(float).to_numpy()
    df["hours-per-week"] = full["hours-per-week"].astype(float).to_numpy()
    _, dom = load_adult(paper_subset=True)
    schema = {c: list(dom[c].categories) for c in cols}
    schema["age"] = (17.0, 90.0)
    schema["hours-per-week"] = (1.0, 99.0)
    return df, schema


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--epochs", type=int, default=50)
    ap.add_argument("--epsilons", type=float, nargs="+", default=[1.0, 6.0])
    ap.add_argument("--privbayes-repeats", type=int, default=5)
    ap.add_argument("--generators", nargs="+", default=["privbayes", "dpgan", "dpcgan", "dpgan-numeric"],
                    choices=["privbayes", "dpgan", "dpcgan", "dpgan-numeric", "dpgan-sgd"])
    ap.add_argument("--out", default=str(Path(__file__).parent / "results"))
    ap.add_argument("--replot", action="store_true", help="only redraw the PNG from the JSON in --out")
    args = ap.parse_args()
    out = Path(args.out)
    if args.replot:
        rows = json.loads((out / "baselines.json").read_text())["rows"]
        atomic_write(out / "baselines.png", lambda p: plot(rows, p))
        return
    out.mkdir(parents=True, exist_ok=True)

    data, domain = load_adult(paper_subset=True)
    n = len(data)
    real_codes = encode(data, domain)
    delta = 1.0 / n - 1e-6  # Ghalebikesabi et al. (2022), Section 4
    rows = []

    # references: a disjoint half of the real data (sampling noise floor) and independent columns
    rng = np.random.default_rng(0)
    perm = rng.permutation(n)
    half = data.iloc[perm[: n // 2]]
    rows.append({"generator": "real half-sample (reference)", "epsilon": None,
                 **summarise(encode(data.iloc[perm[n // 2:]], domain), half, domain)})
    indep = pd.DataFrame({c: data[c].sample(frac=1.0, random_state=i).to_numpy() for i, c in enumerate(data.columns)})
    rows.append({"generator": "independent columns, non-private (reference)", "epsilon": None,
                 **summarise(real_codes, indep, domain)})

    def save() -> None:
        result = {
            "benchmark": "baselines fidelity and speed on Adult (NAPSU-MQ subset, n=46,043)",
            "command": "PYTHONPATH=src python benchmarks/baselines/run_baselines.py " + " ".join(
                f"--{k.replace('_', '-')} {' '.join(map(str, v)) if isinstance(v, list) else v}"
                for k, v in vars(args).items() if k not in ("out", "replot")),
            "machine": {"cpu_count": os.cpu_count(), "loadavg": os.getloadavg(), "python": platform.python_version()},
            "rows": rows,
        }
        atomic_write_text(out / "baselines.json", json.dumps(result, indent=2))
        atomic_write(out / "baselines.png", lambda p: plot(rows, p))

    numeric, schema = numeric_adult(data)
    for key in args.generators:
        for eps in args.epsilons:
            if key == "privbayes":
                for r in range(args.privbayes_repeats):
                    t0 = time.perf_counter()
                    pb = PrivBayes(epsilon=eps, seed=r).fit(data, domain)
                    fit_s = time.perf_counter() - t0
                    syn = pb.generate(1, seed=100 + r)[0]
                    rows.append({"generator": "PrivBayes", "epsilon": eps, "repeat": r, "fit_seconds": fit_s,
                                 "degree": pb.degree_, "loadavg": os.getloadavg()[0], **summarise(real_codes, syn, domain)})
                    print(rows[-1], flush=True)
                save()
                continue
            gans = {
                "dpgan": ("DPGAN", lambda: DPGAN(epsilon=eps, delta=delta, seed=0, epochs=args.epochs), data, domain),
                "dpgan-numeric": ("DPGAN (age, hours numeric)", lambda: DPGAN(epsilon=eps, delta=delta, seed=0, epochs=args.epochs), numeric, schema),
                "dpgan-sgd": ("DPGAN, generator SGD 0.15 (paper)", lambda: DPGAN(epsilon=eps, delta=delta, seed=0, epochs=args.epochs, generator_optimizer="sgd", generator_learning_rate=0.15), data, domain),
                "dpcgan": ("DPCGAN (label income)", lambda: DPCGAN(epsilon=eps, delta=delta, seed=0, epochs=args.epochs, label="income"), data, domain),
            }
            name, make, df, sch = gans[key]
            g = make()
            t0 = time.perf_counter()
            g.fit(df, sch)
            fit_s = time.perf_counter() - t0
            syn = g.generate(1, seed=1)[0]
            if key == "dpgan-numeric":
                syn = syn.copy()
                for c in ("age", "hours-per-week"):
                    edges = np.asarray(domain[c].binning.edges)
                    codes = np.clip(np.searchsorted(edges, syn[c].to_numpy(), side="right") - 1, 0, len(edges) - 2)
                    syn[c] = pd.Categorical.from_codes(codes, categories=list(domain[c].categories))
            lo_real = g.discriminator_log_odds(df)
            lo_syn = g.discriminator_log_odds(g.generate(1, seed=2)[0])
            rows.append({"generator": name, "epsilon": eps, "delta": delta, "epochs": args.epochs,
                         "fit_seconds": fit_s, "loadavg": os.getloadavg()[0], "noise_multiplier": g.noise_multiplier_,
                         "epsilon_accountant": g.epsilon_dpsgd_, "steps": g.steps_,
                         "mean_logit_D_real": float(lo_real.mean()), "mean_logit_D_synthetic": float(lo_syn.mean()),
                         **summarise(real_codes, syn, domain)})
            print(rows[-1], flush=True)
            save()



def plot(rows: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    df = pd.DataFrame(rows)
    gen = df[df["epsilon"].notna()]
    agg = gen.groupby(["generator", "epsilon"]).agg(tvd1=("tvd1_mean", "mean"), tvd2=("tvd2_mean", "mean"),
                                                    fit=("fit_seconds", "mean")).reset_index()
    refs = df[df["epsilon"].isna()]
    fig, axes = plt.subplots(1, 3, figsize=(15, 4.5))
    names = list(dict.fromkeys(agg["generator"]))
    eps_vals = sorted(agg["epsilon"].unique())
    width = 0.8 / max(len(eps_vals), 1)
    for ax, col, title in ((axes[0], "tvd1", "mean 1-way TVD"), (axes[1], "tvd2", "mean 2-way TVD"), (axes[2], "fit", "fit time (s)")):
        for i, e in enumerate(eps_vals):
            sub = agg[agg["epsilon"] == e].set_index("generator").reindex(names)
            ax.bar(np.arange(len(names)) + i * width, sub[col], width, label=f"epsilon={e:g}")
        if col != "fit":
            for _, r in refs.iterrows():
                ax.axhline(r[f"{col}_mean"], ls="--", lw=1, color="grey")
                ax.text(len(names) - 0.5, r[f"{col}_mean"], r["generator"], fontsize=7, va="bottom", ha="right")
        ax.set_xticks(np.arange(len(names)) + width * (len(eps_vals) - 1) / 2)
        ax.set_xticklabels(names, rotation=20, ha="right", fontsize=8)
        ax.set_title(title)
        if col == "fit":
            ax.set_yscale("log")
    axes[0].legend()
    fig.suptitle("Baseline DP generators on Adult (n=46,043); lower TVD is better")
    fig.tight_layout()
    fig.savefig(path, dpi=120, format="png")
    plt.close(fig)


if __name__ == "__main__":
    main()
