"""AIM's candidate weights: 1-way candidates capped at the heaviest multi-column candidate (the
library's) against the uncapped downward-closure weights (defined here), side by side.

Two tables at epsilon 1, delta = n^-2, the all-2-way workload, ``required_share`` 0.5 (NapsuMQ's
default), each seed running both weightings in turn:

* Framingham (bundled, n = 4,240, 16 columns): the numbers in 4 bins at public clinical cut
  points, a declared missing category where the column has empty cells; required
  (age, TenYearCHD), (sysBP, TenYearCHD), (glucose, TenYearCHD). Two of its columns are near
  copies of each other (currentSmoker and cigsPerDay = 0) and two others strongly associated
  (sysBP, diaBP).
* Adult (n = 45,222, all 15 columns, ``aim_select.load_adult_full``); required the NAPSU-MQ
  paper's 10 marginals.

Records per run the PGM point estimate's total variation distance to the real table over all
1- and 2-way marginals (mean and max), the rounds, the 1-way rounds, the model's clique-table
cells, and wall and process CPU time; the load average before and after. Writes
``results/aim_candidates.{json,png}``.

Run: ``PYTHONPATH=src python benchmarks/napsu/aim_candidates.py [--seeds 5]``.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from itertools import combinations
from pathlib import Path

import matplotlib
import numpy as np

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from aim_select import load_adult_full  # noqa: E402

from synthinfer.data import Domain, Marginal, count_codes, encode  # noqa: E402
from synthinfer.datasets import ADULT_PAPER_MARGINALS, load_framingham  # noqa: E402
from synthinfer.files import atomic_write_text  # noqa: E402
from synthinfer.napsu import aim  # noqa: E402
from synthinfer.privacy import PrivacyBudget, PrivacyLedger  # noqa: E402

RESULTS = Path(__file__).parent / "results"

FRAMINGHAM = {"columns": [
    {"name": "male", "categories": [0, 1]},
    {"name": "age", "bin_edges": [30, 40, 50, 60, 72], "integer": True},
    {"name": "education", "categories": [1, 2, 3, 4], "missing": True},
    {"name": "currentSmoker", "categories": [0, 1]},
    {"name": "cigsPerDay", "bin_edges": [0, 1, 10, 20, 80], "missing": True},
    {"name": "BPMeds", "categories": [0, 1], "missing": True},
    {"name": "prevalentStroke", "categories": [0, 1]},
    {"name": "prevalentHyp", "categories": [0, 1]},
    {"name": "diabetes", "categories": [0, 1]},
    {"name": "totChol", "bin_edges": [100, 200, 240, 280, 700], "missing": True},
    {"name": "sysBP", "bin_edges": [80, 120, 140, 160, 300]},
    {"name": "diaBP", "bin_edges": [40, 80, 90, 100, 150]},
    {"name": "BMI", "bin_edges": [15, 18.5, 25, 30, 60], "missing": True},
    {"name": "heartRate", "bin_edges": [40, 60, 80, 100, 150], "missing": True},
    {"name": "glucose", "bin_edges": [40, 70, 100, 126, 400], "missing": True},
    {"name": "TenYearCHD", "categories": [0, 1]},
]}

LIBRARY = aim.candidate_weights


def uncapped(workload, weights) -> dict[Marginal, float]:
    """The downward-closure weights without the cap on 1-way candidates."""
    out: dict[Marginal, float] = {}
    for s, c in zip(workload, weights):
        for k in range(1, len(s.columns) + 1):
            for sub in combinations(s.columns, k):
                out[Marginal(sub)] = out.get(Marginal(sub), 0.0) + float(c)
    return out


WEIGHTINGS = {"capped": LIBRARY, "uncapped": uncapped}


def tables():
    dom = Domain.from_dict(FRAMINGHAM)
    fram = encode(load_framingham().data[list(dom.names)], dom)
    yield "framingham", fram, dom, [("age", "TenYearCHD"), ("sysBP", "TenYearCHD"), ("glucose", "TenYearCHD")]
    codes, adult = load_adult_full()
    yield "adult", codes, adult, list(ADULT_PAPER_MARGINALS)


def tv(estimate, codes: np.ndarray, domain: Domain, k: int) -> tuple[float, float]:
    """Mean and max total variation distance of the estimate over all k-way marginals."""
    n = len(codes)
    d = [0.5 * np.abs(estimate.project(Marginal(m)) - count_codes(codes, domain, m)).sum() / n
         for m in combinations(domain.names, k)]
    return float(np.mean(d)), float(np.max(d))


def plot(runs: list[dict], path: Path) -> None:
    fig, axes = plt.subplots(1, 3, figsize=(12, 3.6))
    for ax, (key, label) in zip(axes, [("tv2_mean", "mean 2-way TV"), ("tv2_max", "max 2-way TV"),
                                       ("tv1_mean", "mean 1-way TV")]):
        for j, table in enumerate(("framingham", "adult")):
            for i, w in enumerate(WEIGHTINGS):
                ys = [r[key] for r in runs if r["table"] == table and r["weights"] == w]
                x = 2 * j + i + np.linspace(-0.15, 0.15, len(ys))
                ax.scatter(x, ys, color=f"C{i}", s=18, label=w if j == 0 else None)
        ax.set_xticks(range(4), [f"{t}\n{w}" for t in ("Framingham", "Adult") for w in WEIGHTINGS], fontsize=8)
        ax.set_title(label)
        ax.set_ylim(bottom=0)
    axes[0].legend()
    fig.suptitle("AIM at epsilon 1: PGM estimate vs the real table, per seed")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seeds", type=int, default=5)
    a = ap.parse_args()
    out = {"command": "PYTHONPATH=src python benchmarks/napsu/aim_candidates.py --seeds " + str(a.seeds),
           "epsilon": 1.0, "delta": "n^-2", "required_share": 0.5, "loadavg_before": os.getloadavg(), "runs": []}
    for name, codes, domain, required in tables():
        n = len(codes)
        for seed in range(a.seeds):
            for w, fn in WEIGHTINGS.items():
                aim.candidate_weights = fn
                try:
                    t, c = time.perf_counter(), time.process_time()
                    res = aim.select_aim(codes, domain, required=required, budget=PrivacyBudget(1.0, n ** -2.0),
                                         ledger=PrivacyLedger((1.0, n ** -2.0)), required_share=0.5)
                    wall, cpu = time.perf_counter() - t, time.process_time() - c
                finally:
                    aim.candidate_weights = LIBRARY
                m1, x1 = tv(res.estimate, codes, domain, 1)
                m2, x2 = tv(res.estimate, codes, domain, 2)
                run = {"table": name, "n": n, "seed": seed, "weights": w, "tv1_mean": m1, "tv1_max": x1,
                       "tv2_mean": m2, "tv2_max": x2, "rounds": len(res.rounds),
                       "one_way_rounds": sum(len(r.marginal.columns) == 1 for r in res.rounds),
                       "marginals": [list(m.columns) for m in res.marginals], "model_cells": res.model_cells,
                       "wall_s": wall, "cpu_s": cpu}
                out["runs"].append(run)
                print(f"{name} seed {seed} {w:8s} TV 1-way {m1:.4f} (max {x1:.3f}) 2-way {m2:.4f} (max {x2:.3f}) "
                      f"rounds {run['rounds']} ({run['one_way_rounds']} 1-way) cells {res.model_cells} {wall:.1f} s",
                      flush=True)
                out["loadavg_after"] = os.getloadavg()
                atomic_write_text(RESULTS / "aim_candidates.json", json.dumps(out, indent=1))
    summary = {}
    for table in ("framingham", "adult"):
        for w in WEIGHTINGS:
            rs = [r for r in out["runs"] if r["table"] == table and r["weights"] == w]
            summary[f"{table} {w}"] = {k: float(np.mean([r[k] for r in rs])) for k in
                                       ("tv1_mean", "tv1_max", "tv2_mean", "tv2_max", "rounds", "wall_s")}
    out["summary_means_over_seeds"] = summary
    atomic_write_text(RESULTS / "aim_candidates.json", json.dumps(out, indent=1))
    plot(out["runs"], RESULTS / "aim_candidates.png")
    print(json.dumps(summary, indent=1))


if __name__ == "__main__":
    main()
