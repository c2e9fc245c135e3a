"""Calibration of the combining rules on conjugate models with exact posterior-predictive draws.

Scalar rules (Supplement B eqs. 9-11) - coverage of the true parameter by the (1 - alpha)
intervals, as a function of the number m of synthetic datasets:
  * normal mean, known unit variance, flat prior; analyst: sample mean with variance s²/n_syn;
  * Bernoulli proportion, Beta(1, 1) prior; analyst: p̂ with Wald variance p̂(1-p̂)/n_syn.
Multivariate rules (Reiter 2005, as implemented) - rejection rate of a true H0 at level 0.05 for
a k-dimensional normal mean.

Writes results/calibration.json and results/calibration.png.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
from scipy import stats

from synthinfer.analysis import reiter_wald_test, rubins_rules

OUT = Path(__file__).parent / "results"
LEVELS = (0.5, 0.8, 0.9, 0.95)
MS = (2, 5, 10, 20, 50, 100)


def normal_mean(rng, m, reps, n=200, n_syn=200, mu=1.5):
    x_bar = mu + rng.normal(0, 1 / np.sqrt(n), reps)
    mu_i = x_bar + rng.normal(0, 1 / np.sqrt(n), (m, reps))
    q = mu_i + rng.normal(0, 1 / np.sqrt(n_syn), (m, reps))
    v = rng.chisquare(n_syn - 1, (m, reps)) / (n_syn - 1) / n_syn
    return q, v, mu, n, n_syn


def bernoulli(rng, m, reps, n=500, n_syn=500, theta=0.3):
    s = rng.binomial(n, theta, reps)
    theta_i = rng.beta(1 + s, 1 + n - s, (m, reps))
    p_hat = rng.binomial(n_syn, theta_i) / n_syn
    return p_hat, p_hat * (1 - p_hat) / n_syn, theta, n, n_syn


def scalar_study(rng, reps=4000):
    out = {}
    for name, model in (("normal_mean", normal_mean), ("beta_bernoulli", bernoulli)):
        rows = []
        for m in MS:
            q, v, truth, n, n_syn = model(rng, m, reps)
            c = rubins_rules(q, v, n=n, n_syn=n_syn)
            row = {"m": m, "fallback_fraction": float(c.fallback.mean())}
            for level in LEVELS:
                ci = c.conf_int(1 - level)
                row[f"coverage_{level}"] = float(np.mean((ci[:, 0] <= truth) & (truth <= ci[:, 1])))
                row[f"median_width_{level}"] = float(np.median(ci[:, 1] - ci[:, 0]))
            rows.append(row)
        out[name] = rows
    return out


def wald_study(rng, reps=1000, n=200):
    rows = []
    for k in (1, 3, 5):
        for m in (5, 10, 20, 50, 100):
            pv, pv_lrr, fb = [], [], 0
            t = k * (m - 1)
            for _ in range(reps):
                x_bar = rng.normal(0, 1 / np.sqrt(n), k)
                q = x_bar + rng.normal(0, 1 / np.sqrt(n), (m, k)) + rng.normal(0, 1 / np.sqrt(n), (m, k))
                res = reiter_wald_test(q, np.broadcast_to(np.eye(k) / n, (m, k, k)), n=n, n_syn=n)
                pv.append(res.pvalue)
                fb += res.fallback
                # the rejected alternative: Li et al. (1991)'s refined df with the sign of 1/r flipped
                if res.fallback or t <= 4:
                    pv_lrr.append(res.pvalue)
                else:
                    nu = 4 + (t - 4) * (1 - (1 - 2 / t) / res.r_f) ** 2
                    pv_lrr.append(stats.f.sf(res.statistic, k, nu))
            rows.append(
                {
                    "k": k,
                    "m": m,
                    "size_at_0.05": float(np.mean(np.array(pv) < 0.05)),
                    "size_at_0.05_lrr_style_df": float(np.mean(np.array(pv_lrr) < 0.05)),
                    "fallback_fraction": fb / reps,
                }
            )
    return rows


def main():
    OUT.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(20231)
    start = time.time()
    scalar = scalar_study(rng)
    wald = wald_study(rng)
    result = {
        "scalar_reps": 4000,
        "wald_reps": 1000,
        "scalar": scalar,
        "wald": wald,
        "seconds": time.time() - start,
        "loadavg": os.getloadavg(),
    }
    (OUT / "calibration.json").write_text(json.dumps(result, indent=2))

    fig, axes = plt.subplots(1, 3, figsize=(14, 4))
    for ax, (name, rows) in zip(axes[:2], scalar.items(), strict=True):
        ms = [r["m"] for r in rows]
        for level in LEVELS:
            lo = stats.binom.ppf(0.025, 4000, level) / 4000
            hi = stats.binom.ppf(0.975, 4000, level) / 4000
            line = ax.plot(ms, [r[f"coverage_{level}"] for r in rows], "o-", label=f"nominal {level}")[0]
            ax.fill_between(ms, lo, hi, color=line.get_color(), alpha=0.15)
        ax.set_xscale("log")
        ax.set_xlabel("m (synthetic datasets)")
        ax.set_ylabel("coverage")
        ax.set_title(f"{name}: coverage (band: 95% binomial)")
        ax.legend(fontsize=8)
    ax = axes[2]
    for k in (1, 3, 5):
        rows = [r for r in wald if r["k"] == k]
        line = ax.plot([r["m"] for r in rows], [r["size_at_0.05"] for r in rows], "o-", label=f"k = {k}")[0]
        ax.plot([r["m"] for r in rows], [r["size_at_0.05_lrr_style_df"] for r in rows], "x:", color=line.get_color(),
                label=f"k = {k}, LRR-style df (not used)")
    lo, hi = stats.binom.ppf([0.025, 0.975], 1000, 0.05) / 1000
    ax.axhspan(lo, hi, color="grey", alpha=0.2)
    ax.axhline(0.05, color="k", lw=0.5)
    ax.set_xscale("log")
    ax.set_xlabel("m")
    ax.set_ylabel("rejection rate of a true H0")
    ax.set_title("Reiter (2005) Wald test, level 0.05")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(OUT / "calibration.png", dpi=120)
    print(json.dumps(result, indent=1)[:3000])


if __name__ == "__main__":
    main()
