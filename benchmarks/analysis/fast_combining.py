"""Fast combining: ``analyze`` on 100 Adult-sized datasets, the statsmodels path (one fit per
dataset, as ``fast=False``) against the batched GLM fit, in one run.

Stand-in "synthetic" datasets are bootstrap resamples of the discretised Adult table (46,043
rows, every column categorical as NAPSU-MQ releases them; age at its bin midpoints as in
Supplement F). The analysis is a 13-coefficient logit of income on age, race, sex, hours per
week and the capital gain/loss indicators. Both paths run in this process with ``n_jobs=1``
(the faster of the statsmodels path's settings on a loaded 2-core machine, results/speed.json).
Wall and process CPU seconds are the minimum over repeats; the load average is recorded before
and after each timing. Estimates and standard errors of the two paths are compared.

Writes results/fast_combining.json and results/fast_combining.png.

    PYTHONPATH=src python benchmarks/analysis/fast_combining.py   # ~2.5 min on 2 cores
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
import warnings
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np

from synthinfer.analysis import analyze
from synthinfer.datasets import load_adult

OUT = Path(__file__).parent / "results"
FORMULA = "income ~ age + C(race) + C(sex) + C(hours) + C(capital_gain) + C(capital_loss)"


def _datasets(m: int, seed: int = 0):
    ds = load_adult(paper_subset=True)
    data = ds.data.copy()
    data["age"] = ds.domain.midpoints("age")[data["age"].cat.codes.to_numpy()]
    data = data.rename(columns={"capital-gain": "capital_gain", "capital-loss": "capital_loss",
                                "hours-per-week": "hours"})
    rng = np.random.default_rng(seed)
    return [data.iloc[rng.integers(0, len(data), len(data))].reset_index(drop=True) for _ in range(m)]


def _time(fn, repeats: int) -> dict:
    walls, cpus, loads, out = [], [], [], None
    for _ in range(repeats):
        load_before = os.getloadavg()[0]
        w, c = time.perf_counter(), time.process_time()
        out = fn()
        walls.append(time.perf_counter() - w)
        cpus.append(time.process_time() - c)
        loads.append([load_before, os.getloadavg()[0]])
    return {"wall_s": min(walls), "cpu_s": min(cpus), "wall_all_s": walls, "cpu_all_s": cpus,
            "loadavg_1min_before_after": loads, "result": out}


def _plot(result: dict, out_dir: Path) -> None:
    old, new = result["statsmodels"], result["batched"]
    fig, ax = plt.subplots(figsize=(6, 3.2))
    labels = ["wall", "process CPU"]
    x = np.arange(2)
    ax.bar(x - 0.2, [old["wall_s"], old["cpu_s"]], 0.4, label="statsmodels per dataset")
    ax.bar(x + 0.2, [new["wall_s"], new["cpu_s"]], 0.4, label="batched GLM fit")
    for i, (o, q) in enumerate([(old["wall_s"], new["wall_s"]), (old["cpu_s"], new["cpu_s"])]):
        ax.text(i + 0.2, q, f"{q:.1f} s\n({o / q:.0f}x)", ha="center", va="bottom", fontsize=8)
        ax.text(i - 0.2, o, f"{o:.0f} s", ha="center", va="bottom", fontsize=8)
    ax.set_xticks(x, labels)
    ax.set_yscale("log")
    ax.set_ylabel("seconds (min over repeats)")
    load = max(v for pair in new["loadavg_1min_before_after"] + old["loadavg_1min_before_after"] for v in pair)
    ax.set_title(f"analyze(): {result['m']} logit fits, {result['coefficients']} coef., "
                 f"{result['rows_per_dataset']:,} rows each (load <= {load:.1f})", fontsize=9)
    ax.set_ylim(0.3, 30 * old["wall_s"])
    ax.legend(fontsize=8, loc="upper right")
    fig.tight_layout()
    fig.savefig(out_dir / "fast_combining.png", dpi=120)


def main(m: int, repeats: int, old_repeats: int, out_dir: Path) -> dict:
    datasets = _datasets(m)
    n = len(datasets[0])
    warnings.simplefilter("ignore")
    analyze(datasets[:2], FORMULA, n=n, n_jobs=1, progress=False)  # imports, outside the timings
    new = _time(lambda: analyze(datasets, FORMULA, n=n, n_jobs=1, progress=False), repeats)
    old = _time(lambda: analyze(datasets, FORMULA, n=n, n_jobs=1, fast=False, progress=False), old_repeats)
    a, b = new.pop("result"), old.pop("result")
    rel = lambda x, y: float(np.max(np.abs(x / y - 1)))  # noqa: E731
    per_fit = [rel(ra.params.to_numpy(), rb.params.to_numpy()) for ra, rb in zip(a.records, b.records, strict=True)]
    per_se = [rel(np.sqrt(np.diag(ra.cov)), np.sqrt(np.diag(rb.cov))) for ra, rb in zip(a.records, b.records, strict=True)]
    result = {
        "command": "PYTHONPATH=src python " + " ".join(sys.argv),
        "m": m,
        "rows_per_dataset": n,
        "coefficients": len(a.params),
        "formula": FORMULA,
        "repeats": {"batched": repeats, "statsmodels": old_repeats},
        "batched": new,
        "statsmodels": old,
        "speedup_wall": old["wall_s"] / new["wall_s"],
        "speedup_cpu": old["cpu_s"] / new["cpu_s"],
        "max_rel_diff_estimates_per_fit": max(per_fit),
        "max_rel_diff_std_errors_per_fit": max(per_se),
        "max_rel_diff_combined_estimate": rel(a.params.to_numpy(), b.params.to_numpy()),
        "max_rel_diff_combined_std_error": rel(a.bse.to_numpy(), b.bse.to_numpy()),
        "fits_ok": [int(sum(r.ok for r in a.records)), int(sum(r.ok for r in b.records))],
        "usable_cores": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count(),
        "python": platform.python_version(),
        "numpy": np.__version__,
    }
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "fast_combining.json").write_text(json.dumps(result, indent=2))

    _plot(result, out_dir)
    print(json.dumps({k: v for k, v in result.items() if not isinstance(v, dict)}, indent=2))
    return result


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--m", type=int, default=100)
    ap.add_argument("--repeats", type=int, default=3, help="repeats of the batched path")
    ap.add_argument("--old-repeats", type=int, default=1,
                    help="repeats of the statsmodels path (~2 min each at m = 100 on 2 loaded cores)")
    ap.add_argument("--out", type=Path, default=OUT)
    ap.add_argument("--plot-only", action="store_true", help="redraw the PNG from the JSON in --out")
    args = ap.parse_args()
    if args.plot_only:
        _plot(json.loads((args.out / "fast_combining.json").read_text()), args.out)
    else:
        main(args.m, args.repeats, args.old_repeats, args.out)
