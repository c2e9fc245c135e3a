"""AIM selection time on the full Adult table (issue #19's setting).

The table: all 48,842 rows of the bundled UCI Adult less those with a missing value (n = 45,222)
and all 15 columns: age and hours-per-week in 5 equal-width buckets over their documented
ranges, capital gain / loss as "0" / ">0", fnlwgt in 5 bins with fixed round edges (0, 100k,
150k, 200k, 300k, 1.5M), education-num as its 16 values, native-country with its 41 values,
the other columns with their documented categories. AIM (``synthinfer.napsu.aim.select_aim``)
runs with the all-2-way workload, the NAPSU-MQ paper's 10 marginals required, epsilon 1,
delta = n^-2 and the default caps, once per seed.

Records per run: wall and process CPU time (the first run in the process includes the lazy
imports), the rounds (marginal, sigma, selection epsilon, annealed), the distinct measured
marginals, the final junction tree (clique-table cells, largest clique, width) and the model's
parameter count d (canonical queries of the measured marginals), and, as a utility check of
the between-round point estimate only, its mean total variation distance over all 1- and 2-way
marginals. Load average before and after. Writes ``results/aim_select.json`` after each run.

Run: ``PYTHONPATH=src python benchmarks/napsu/aim_select.py [--seeds 3]``.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import sys
import time
from itertools import combinations
from pathlib import Path

import numpy as np
import pandas as pd

from synthinfer.data import Column, Domain, binned_column, count_codes
from synthinfer.datasets import ADULT_PAPER_MARGINALS
from synthinfer.datasets.loaders import _ADULT_CATEGORIES, _read
from synthinfer.files import atomic_write_text
from synthinfer.napsu.aim import DEFAULT_MAX_MODEL_CELLS, select_aim
from synthinfer.napsu.queries import CanonicalQueries
from synthinfer.privacy import PrivacyBudget, PrivacyLedger

RESULTS = Path(__file__).parent / "results"


def load_adult_full() -> tuple[np.ndarray, Domain]:
    """The 15-column Adult table as category codes, and its Domain (module docstring)."""
    df = _read("adult.csv.gz").drop(columns=["split"]).dropna().reset_index(drop=True)
    cols = []
    for name in df.columns:
        if name in ("age", "hours-per-week"):
            cols.append(binned_column(name, bounds=(17, 90) if name == "age" else (1, 99), bins=5))
        elif name == "fnlwgt":
            cols.append(binned_column(name, edges=(0, 1e5, 1.5e5, 2e5, 3e5, 1.5e6)))
        elif name in ("capital-gain", "capital-loss"):
            cols.append(Column(name, ("0", ">0")))
        elif name == "education-num":
            cols.append(Column(name, tuple(str(i) for i in range(1, 17))))
        elif name in _ADULT_CATEGORIES:
            cols.append(Column(name, tuple(_ADULT_CATEGORIES[name])))
        else:  # occupation, relationship, native-country: their documented categories all occur
            cols.append(Column(name, tuple(sorted(df[name].unique()))))
    domain = Domain(cols)
    codes = np.empty((len(df), len(cols)), dtype=np.int64)
    for j, col in enumerate(domain.columns):
        x = df[col.name]
        if col.binning is not None:
            c = col.binning.codes(x.to_numpy(float))
        elif col.name in ("capital-gain", "capital-loss"):
            c = (x.to_numpy() > 0).astype(np.int64)
        elif col.name == "education-num":
            c = x.to_numpy() - 1
        else:
            c = pd.Index(col.categories).get_indexer(x)
        assert (c >= 0).all(), col.name
        codes[:, j] = c
    return codes, domain


def mean_tv(estimate, codes: np.ndarray, domain: Domain, k: int) -> float:
    n = codes.shape[0]
    tvs = [0.5 * np.abs(estimate.project(m) - count_codes(codes, domain, m)).sum() / n
           for m in combinations(domain.names, k)]
    return float(np.mean(tvs))


def main() -> dict:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--epsilon", type=float, default=1.0)
    ap.add_argument("--out", type=Path, default=RESULTS / "aim_select.json")
    a = ap.parse_args()
    codes, domain = load_adult_full()
    n = codes.shape[0]
    budget = PrivacyBudget(a.epsilon, 1.0 / n**2)
    out = {
        "table": "UCI Adult, 15 columns, rows with a missing value dropped",
        "n": n,
        "domain_shape": dict(zip(domain.names, domain.shape)),
        "epsilon": budget.epsilon,
        "delta": budget.delta,
        "workload": "all 2-way marginals",
        "required": [list(m) for m in ADULT_PAPER_MARGINALS],
        "max_model_cells": DEFAULT_MAX_MODEL_CELLS,
        "python": sys.version.split()[0],
        "machine": platform.machine(),
        "cpu_count": os.cpu_count(),
        "loadavg_before": os.getloadavg(),
        "runs": [],
    }
    a.out.parent.mkdir(parents=True, exist_ok=True)
    for seed in range(a.seeds):
        load = os.getloadavg()
        w0, c0 = time.perf_counter(), time.process_time()
        res = select_aim(codes, domain, required=ADULT_PAPER_MARGINALS, budget=budget,
                         ledger=PrivacyLedger(budget), seed=seed)
        wall, cpu = time.perf_counter() - w0, time.process_time() - c0
        tree = res.estimate.junction_tree
        run = {
            "seed": seed,
            "wall_s": wall,
            "process_cpu_s": cpu,
            "loadavg_at_start": load,
            "max_clique_cells": res.max_clique_cells,
            "rounds": [{"round": r.round, "marginal": list(r.marginal.columns), "sigma": r.sigma,
                        "epsilon": r.epsilon, "annealed": r.annealed, "eligible_candidates": r.candidates,
                        "model_cells": r.model_cells} for r in res.rounds],
            "n_rounds": len(res.rounds),
            "n_measurements": len(res.measurements),
            "marginals": [list(m.columns) for m in res.marginals],
            "rho": res.rho,
            "d": CanonicalQueries(domain, [m.columns for m in res.marginals]).dimension,
            "clique_table_cells": tree.table_cells,
            "largest_clique_cells": max(math.prod(tree.shape(c)) for c in range(len(tree.cliques))),
            "tree_width": tree.width,
            "pgm_estimate_mean_tv_1way": mean_tv(res.estimate, codes, domain, 1),
            "pgm_estimate_mean_tv_2way": mean_tv(res.estimate, codes, domain, 2),
        }
        out["runs"].append(run)
        print(f"seed {seed}: {wall:.1f} s wall, {cpu:.1f} s CPU, {run['n_rounds']} rounds, d = {run['d']}, "
              f"{run['clique_table_cells']} cells (largest {run['largest_clique_cells']}), "
              f"TV 1-way {run['pgm_estimate_mean_tv_1way']:.4f} 2-way {run['pgm_estimate_mean_tv_2way']:.4f}",
              flush=True)
        out["loadavg_after"] = os.getloadavg()
        atomic_write_text(a.out, json.dumps(out, indent=2) + "\n")
    return out


if __name__ == "__main__":
    main()
