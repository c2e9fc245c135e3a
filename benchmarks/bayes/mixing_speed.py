"""Speed of the Bayesian mixing on a categorical release: each dataset's rows against its
distinct rows weighted by their counts (the same posterior; ``tests/test_bayes_mixing.py``).

NAPSU-MQ on the toy data (n = 2,000, epsilon 1), m datasets of ``ratio * n`` rows, the
analyst's logit ``y ~ x1 + x2`` by NUTS (2 chains x (300 + 500) per dataset, one vectorised
program): :func:`synthinfer.bayes.mix_posteriors` as shipped (distinct rows) and
``GeneralisedPosterior.sample_many`` on the full rows, in one process, each repeated and the
minimum taken; wall and process CPU time, and the load average.

    PYTHONPATH=src python benchmarks/bayes/mixing_speed.py --m 5 --ratio 5 \\
        --out benchmarks/bayes/results/mixing_speed.json
"""

from __future__ import annotations

import argparse
import json
import os
import time
import warnings
from pathlib import Path

import numpy as np

from synthinfer.bayes import GeneralisedPosterior, LogisticRegression, mix_posteriors
from synthinfer.bayes.mixing import _shared_design, distinct_rows
from synthinfer.datasets import make_toy_logistic
from synthinfer.errors import SynthinferWarning
from synthinfer.generate import NapsuMQ

FORMULA = "y ~ x1 + x2"


def clock(fn, repeats: int) -> dict:
    walls, cpus = [], []
    for _ in range(repeats):
        t, c = time.perf_counter(), time.process_time()
        fn()
        walls.append(time.perf_counter() - t)
        cpus.append(time.process_time() - c)
    return {"wall_s": min(walls), "cpu_s": min(cpus), "wall_all": walls, "cpu_all": cpus}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--m", type=int, default=5)
    ap.add_argument("--ratio", type=float, default=5.0)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--out", default="benchmarks/bayes/results/mixing_speed.json")
    a = ap.parse_args()
    warnings.simplefilter("ignore", SynthinferWarning)
    load_before = os.getloadavg()
    real = make_toy_logistic(2000, (1.0, 0.0), seed=np.random.default_rng(0))
    gen = NapsuMQ([("x1", "x2", "y")], epsilon=1.0, delta=2000**-2.0, seed=np.random.default_rng(1)).fit(
        real.data, real.domain)
    datasets = gen.generate(a.m, n=int(a.ratio * 2000), seed=np.random.default_rng(2))
    designs, names = _shared_design(FORMULA, datasets, binary=True)
    post = GeneralisedPosterior(LogisticRegression(n_features=len(names) - 1), num_warmup=300, num_samples=500,
                                num_chains=2, max_tree_depth=8, seed=0)
    distinct = [len(distinct_rows(X, y)[1]) for X, y in designs]
    shipped = clock(lambda: mix_posteriors(datasets, FORMULA, "logit", n=2000, seed=3), a.repeats)
    full = clock(lambda: post.sample_many([(None, d) for d in designs], seed=3), a.repeats)
    res = {"m": a.m, "rows_per_dataset": int(a.ratio * 2000), "distinct_rows_per_dataset": distinct,
           "distinct_rows": shipped, "all_rows": full, "speedup_wall": full["wall_s"] / shipped["wall_s"],
           "speedup_cpu": full["cpu_s"] / shipped["cpu_s"], "loadavg_before": load_before,
           "loadavg_after": os.getloadavg(), "cpu_count": os.cpu_count(),
           "command": f"python benchmarks/bayes/mixing_speed.py --m {a.m} --ratio {a.ratio:g} --repeats {a.repeats}"}
    Path(a.out).write_text(json.dumps(res, indent=1))
    print(json.dumps({k: v for k, v in res.items() if k not in ("distinct_rows", "all_rows")}, indent=1))
    print("distinct rows:", shipped["wall_s"], shipped["cpu_s"], " all rows:", full["wall_s"], full["cpu_s"])


if __name__ == "__main__":
    main()
