"""Type I error of a standard test on DP synthetic data under a true null (after Perez et al. 2024,
"Does differentially private synthetic data lead to synthetic discoveries?").

The toy data of the NAPSU-MQ study (``benchmarks/napsu/toy_coverage.py``: n = 2000 binary rows,
y ~ Bernoulli(sigmoid(x1)), so y is independent of x2 given x1). The test: H0 beta_x2 = 0 in the
logistic regression of y on (x1, x2) without intercept, at alpha = 0.05, from m = 100 synthetic
datasets by Rubin's rules for synthetic data (or from one dataset, analysed as if real). Its
rejection rate is 1 - the 95% coverage of beta_x2, so the NAPSU-MQ rows are read from the toy
study's records; PrivBayes (not noise-aware; its m datasets are drawn from one fit, then
Rubin's rules) is run here on the same data seeds.

    PYTHONPATH=src python benchmarks/validity/type1_error.py --repeats 200

writes ``results/type1_error.json`` and ``.png``: per method and epsilon the rejection rate,
its 95% Clopper-Pearson interval and whether it lies in the binomial band of a 0.05-level test.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import warnings
from pathlib import Path

import numpy as np
from scipy import stats

HERE = Path(__file__).resolve().parent
TOY = HERE.parent / "napsu" / "results"
sys.path.insert(0, str(HERE.parent / "napsu"))
from toy_coverage import M, N, cell_counts, grouped_logit  # noqa: E402

EPSILONS = [0.1, 0.25, 0.5, 1.0, 2.0, 100.0]
LABELS = {
    "napsu_laplace": "NAPSU-MQ (Laplace), noise-aware, Rubin",
    "napsu_laplace_vetted": "NAPSU-MQ (Laplace), OpenDP noise + PLD, Rubin",
    "napsu_nuts": "NAPSU-MQ (NUTS), noise-aware, Rubin",
    "napsu_laplace_not_noise_aware": "NAPSU-MQ, not noise-aware, Rubin",
    "mle_mi": "MLE (PGM) + repeated datasets, Rubin",
    "mle_single": "MLE, one dataset as if real",
    "privbayes_mi": "PrivBayes + repeated datasets, Rubin",
    "privbayes_single": "PrivBayes, one dataset as if real",
}


def toy_rejections() -> dict[tuple[str, float], list[bool]]:
    """Rejections of H0 beta_x2 = 0 from the toy study's records (later files win per repeat)."""
    records = {}
    for f in [TOY / "toy_coverage.json", *sorted(TOY.glob("toy_coverage_part*.json"))]:
        if f.exists():
            for r in json.loads(f.read_text())["records"]:
                records[(r["repeat"], r["epsilon"], r["method"])] = r
    vetted = TOY / "toy_coverage_vetted.json"  # the rerun with OpenDP's discrete noise
    if vetted.exists():
        for r in json.loads(vetted.read_text())["records"]:
            records[(r["repeat"], r["epsilon"], r["method"] + "_vetted")] = r
    out: dict[tuple[str, float], list[bool]] = {}
    for (_, eps, method), r in records.items():
        lo, hi = r["lower"][1], r["upper"][1]
        if np.isfinite(lo) and np.isfinite(hi):
            out.setdefault((method, eps), []).append(not (lo <= 0.0 <= hi))
    return out


def privbayes_rejections(repeats: int) -> dict[tuple[str, float], list[bool]]:
    from synthinfer.analysis import rubins_rules
    from synthinfer.datasets import make_toy_logistic
    from synthinfer.generate import PrivBayes

    out: dict[tuple[str, float], list[bool]] = {}
    dom = make_toy_logistic(1, (1.0, 0.0), seed=0).domain
    z = stats.norm.ppf(0.975)
    for r in range(repeats):
        data = make_toy_logistic(N, (1.0, 0.0), seed=10_000 + r).data
        for eps in EPSILONS:
            gen = PrivBayes(epsilon=eps, seed=np.random.default_rng([r, int(eps * 100)])).fit(data, dom)
            q, v = grouped_logit(cell_counts(gen.generate(M)))
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                res = rubins_rules(q, v, n=N, n_syn=N)
            lo, hi = res.conf_int(0.05)[1]
            if np.isfinite(lo) and np.isfinite(hi):
                out.setdefault(("privbayes_mi", eps), []).append(not (lo <= 0.0 <= hi))
            if np.isfinite(q[0, 1]):
                out.setdefault(("privbayes_single", eps), []).append(abs(q[0, 1]) > z * np.sqrt(v[0, 1]))
        print(f"PrivBayes repeat {r + 1}/{repeats}", flush=True)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=200, help="PrivBayes repeats (the toy study's are read)")
    ap.add_argument("--out", type=Path, default=HERE / "results" / "type1_error.json")
    a = ap.parse_args()
    t0, c0 = time.perf_counter(), time.process_time()
    rej = {**toy_rejections(), **privbayes_rejections(a.repeats)}
    rows = []
    for (method, eps), r in sorted(rej.items(), key=lambda kv: (list(LABELS).index(kv[0][0]), kv[0][1])):
        k, n = int(np.sum(r)), len(r)
        lo = stats.beta.ppf(0.025, k, n - k + 1) if k else 0.0
        hi = stats.beta.ppf(0.975, k + 1, n - k) if k < n else 1.0
        band = stats.binom.ppf([0.0005, 0.9995], n, 0.05) / n  # a 0.05-level test's 99.9% band
        rows.append({"method": method, "label": LABELS[method], "epsilon": eps, "repeats": n, "rejections": k,
                     "rate": k / n, "ci95": [float(lo), float(hi)], "band_999": band.tolist(),
                     "within_band": bool(k / n <= band[1])})
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_text(json.dumps({
        "alpha": 0.05, "n": N, "m": M, "null": "beta_x2 = 0 (y independent of x2 given x1)",
        "sources": {"napsu_*, mle_*": "benchmarks/napsu/results/toy_coverage*.json (numpy noise, 2026-11-22 code)",
                    "napsu_laplace_vetted": "benchmarks/napsu/results/toy_coverage_vetted.json (OpenDP noise)",
                    "privbayes_*": "this run"},
        "wall_s": time.perf_counter() - t0, "cpu_s": time.process_time() - c0, "loadavg": os.getloadavg(),
        "results": rows}, indent=1) + "\n")
    plot(rows, a.out.with_suffix(".png"))
    for r in rows:
        print(f"{r['label']:45s} eps {r['epsilon']:6g}: {r['rate']:.3f} ({r['rejections']}/{r['repeats']})")


def plot(rows: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 4.5))
    for method, label in LABELS.items():
        rs = [r for r in rows if r["method"] == method]
        if rs:
            e = [r["epsilon"] for r in rs]
            ax.errorbar(e, [r["rate"] for r in rs], yerr=np.abs(np.array([r["ci95"] for r in rs]).T
                                                                 - [r["rate"] for r in rs]),
                        marker="o", capsize=2, label=label)
    ax.axhline(0.05, color="k", lw=1)
    ax.set(xscale="log", ylim=(0, 1), xlabel="epsilon", ylabel="type I error at alpha = 0.05",
           title="H0: beta_x2 = 0 on DP synthetic toy data (95% Clopper-Pearson intervals)")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


if __name__ == "__main__":
    main()
