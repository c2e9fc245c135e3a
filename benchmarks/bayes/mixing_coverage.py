"""Coverage of the Bayesian analyst's mixed posterior on NAPSU-MQ releases (toy data).

Räisä, Jälkö & Honkela (JMLR 2025): an analyst with a Bayesian model draws from their posterior
on each of m synthetic datasets and pools the draws (:func:`synthinfer.bayes.mix_posteriors`);
with a noise-aware generator the mixture approaches the analyst's posterior on the real data as
the datasets grow. This measures what an analyst gets at finite sizes.

Each repeat draws the real data anew (the toy data of NAPSU-MQ Section 5.1: ``x1, x2`` fair
coins, ``y ~ Bernoulli(sigmoid(x1))``, n = 2,000), fits NAPSU-MQ on the 3-way marginal
(every default but epsilon), releases m datasets of ``n_syn = ratio * n`` rows and mixes the
analyst's logit posterior ``y ~ x1 + x2`` (prior N(0, 50) per coefficient, NUTS). Recorded per
repeat, for the central credible intervals at several levels: whether each holds the true
coefficients (0, 1, 0: the analyst's model is the generating one), and its width relative to the
same analyst's posterior on the real data. Beside it, in the same repeat: that real-data
posterior (what the mixture aims at), and one synthetic dataset of n rows analysed as if it were
the real data (the naive Bayesian analyst).

The mixture's variance exceeds the target's by up to a factor ``1 + 2 n / n_syn`` from the
synthetic data's own sampling noise (the module docstring of :mod:`synthinfer.bayes.mixing`), so
at ``ratio = 5`` the intervals are expected to be conservative and close to nominal as the
ratio grows. Results are rewritten after every repeat; the figure (``.png`` beside the JSON) at
the end, or with ``--plot-only``.

    PYTHONPATH=src python benchmarks/bayes/mixing_coverage.py --repeats 40 --epsilons 1.0 --ratios 5,20 \\
        --out benchmarks/bayes/results/mixing_coverage.json
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import time
import warnings
from pathlib import Path

import numpy as np

from synthinfer.bayes import mix_posteriors
from synthinfer.datasets import make_toy_logistic
from synthinfer.errors import ConvergenceWarning, SynthinferWarning
from synthinfer.generate import NapsuMQ

FORMULA = "y ~ x1 + x2"
TRUTH = np.array([0.0, 1.0, 0.0])  # Intercept, x1, x2
LEVELS = np.array([0.5, 0.8, 0.9, 0.95])


def intervals(idata) -> tuple[np.ndarray, np.ndarray]:
    """Central credible intervals of ``coef`` at :data:`LEVELS`: ``(lower, upper)``, levels x terms."""
    draws = np.asarray(idata.posterior["coef"].values).reshape(-1, len(TRUTH))
    return np.quantile(draws, 0.5 - LEVELS / 2, axis=0), np.quantile(draws, 0.5 + LEVELS / 2, axis=0)


def record(lo: np.ndarray, hi: np.ndarray, real_width: np.ndarray) -> dict:
    return {"covered": ((lo <= TRUTH) & (TRUTH <= hi)).astype(float).tolist(),
            "width_ratio": ((hi - lo) / real_width).tolist()}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=50)
    ap.add_argument("--start", type=int, default=0, help="first repeat index (to continue an interrupted run)")
    ap.add_argument("--merge", help="JSON of earlier repeats to include (e.g. the interrupted run's --out)")
    ap.add_argument("--n", type=int, default=2000)
    ap.add_argument("--m", type=int, default=20, help="synthetic datasets mixed per repeat")
    ap.add_argument("--epsilons", default="1.0")
    ap.add_argument("--ratios", default="5,20", help="n_syn / n, comma-separated")
    ap.add_argument("--out", default="benchmarks/bayes/results/mixing_coverage.json")
    ap.add_argument("--plot-only", action="store_true", help="redraw the figure (--out with .png) from --out")
    a = ap.parse_args()
    if a.plot_only:
        plot(a.out)
        return
    epsilons = [float(e) for e in a.epsilons.split(",")]
    ratios = [float(r) for r in a.ratios.split(",")]
    code = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    records = [x for x in json.loads(Path(a.merge).read_text())["records"] if x["repeat"] < a.start] if a.merge else []
    t_start = time.time()
    for r in range(a.start, a.start + a.repeats):
        real = make_toy_logistic(a.n, (1.0, 0.0), seed=np.random.default_rng([r, 11]))
        with warnings.catch_warnings():  # one dataset of n rows: the mixing checks warn by design
            warnings.simplefilter("ignore", SynthinferWarning)
            target = mix_posteriors([real.data], FORMULA, "logit", n=a.n, seed=np.random.default_rng([r, 12]))
        t_lo, t_hi = intervals(target)
        real_width = t_hi - t_lo
        for eps in epsilons:
            t0 = time.time()
            gen = NapsuMQ([("x1", "x2", "y")], epsilon=eps, delta=a.n**-2.0,
                          seed=np.random.default_rng([r, int(eps * 10)])).fit(real.data, real.domain)
            fit_s = time.time() - t0
            row = {"repeat": r, "epsilon": eps, "fit_seconds": fit_s, "code": code,
                   "sampler": gen.diagnostics_.get("auto", {}).get("sampler"),
                   "real_data": record(t_lo, t_hi, real_width)}
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", SynthinferWarning)
                naive = mix_posteriors(gen.generate(1, seed=np.random.default_rng([r, int(eps * 10), 1])), FORMULA, "logit", n=a.n,
                                       seed=np.random.default_rng([r, 13]))
            row["one_dataset_as_if_real"] = record(*intervals(naive), real_width)
            for ratio in ratios:
                t1 = time.time()
                datasets = gen.generate(a.m, n=int(ratio * a.n), seed=np.random.default_rng([r, int(eps * 10), int(ratio)]))
                with warnings.catch_warnings(record=True) as caught:
                    warnings.simplefilter("always", ConvergenceWarning)
                    mixed = mix_posteriors(datasets, FORMULA, "logit", n=a.n, seed=np.random.default_rng([r, 14, int(ratio)]))
                row[f"mixture_ratio_{ratio:g}"] = {**record(*intervals(mixed), real_width),
                                                   "seconds": time.time() - t1,
                                                   "datasets_not_converged": mixed.posterior.attrs.get(
                                                       "datasets_not_converged", 0),
                                                   "warnings": [str(w.message)[:200] for w in caught]}
            records.append(row)
            payload = {"settings": {"n": a.n, "m": a.m, "epsilons": epsilons, "ratios": ratios, "formula": FORMULA,
                                    "truth": TRUTH.tolist(), "levels": LEVELS.tolist(),
                                    "repeats_requested": a.start + a.repeats},
                       "summary": summarise(records, epsilons, ratios), "records": records,
                       "elapsed_s": time.time() - t_start, "loadavg": os.getloadavg()}
            tmp = Path(a.out + ".tmp")
            tmp.write_text(json.dumps(payload, indent=1))
            os.replace(tmp, a.out)
            s = payload["summary"][str(eps)]
            print(f"repeat {r} eps {eps}: fit {fit_s:.1f} s; 95% coverage so far " +
                  ", ".join(f"{k} {v['coverage_by_level'][-1]:.3f}" for k, v in s.items() if k != "repeats"), flush=True)
    plot(a.out)


def plot(path: str) -> None:
    """Coverage against the nominal level per posterior (one panel per epsilon), to ``.png``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    doc = json.loads(Path(path).read_text())
    levels = np.asarray(doc["settings"]["levels"])
    summary = doc["summary"]
    fig, axes = plt.subplots(1, len(summary), figsize=(4.8 * len(summary), 4.2), squeeze=False)
    for ax, (eps, s) in zip(axes[0], summary.items()):
        ax.plot([0.4, 1], [0.4, 1], color="0.6", lw=1, ls="--", label="nominal")
        for key, v in s.items():
            if key == "repeats":
                continue
            label = key.replace("_", " ").replace("mixture ratio ", "mixture, n_syn / n = ")
            ax.plot(levels, v["coverage_by_level"], marker="o", label=label)
        ax.set(xlabel="nominal level", ylabel="coverage of the true coefficients",
               title=f"epsilon {eps}, m = {doc['settings']['m']}, {s['repeats']} repeats")
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(str(Path(path).with_suffix(".png")), dpi=120)


def summarise(records: list[dict], epsilons: list[float], ratios: list[float]) -> dict:
    out = {}
    for eps in epsilons:
        rs = [r for r in records if r["epsilon"] == eps]
        if not rs:
            continue
        s: dict = {"repeats": len(rs)}
        for key in ["real_data", "one_dataset_as_if_real"] + [f"mixture_ratio_{x:g}" for x in ratios]:
            cov = np.array([r[key]["covered"] for r in rs])  # repeats x levels x terms
            wid = np.array([r[key]["width_ratio"] for r in rs])
            s[key] = {"coverage_by_level": cov.mean(axis=(0, 2)).tolist(),
                      "coverage_by_level_and_term": cov.mean(axis=0).tolist(),
                      "median_width_ratio_by_level": np.median(wid, axis=(0, 2)).tolist()}
        out[str(eps)] = s
    return out


if __name__ == "__main__":
    main()
