r"""Importance sampling (PSIS) of NAPSU-MQ's posterior at AIM's scale, under the interaction prior.

One fit on the full Adult table (15 columns, education-num derived, n = 45,222): the analysis'
4-way marginal (age, race, sex, income) required with ``required_share`` 0.5, AIM's selection
(all-2-way workload) with the rest, epsilon 1, delta n^-2, ``interaction_sd`` ``--tau``, the
Laplace fit; then :func:`synthinfer.napsu.importance.importance_sample` on the same
measurements with the importance backend's proposal as ``inference="importance"`` builds it
under this prior (Student-t on the near-Gaussian axes, exact 1-D profiles on the others;
``--no-profile``: the Student-t alone). Recorded: d, Pareto k-hat against its threshold, PSIS
ESS, the smallest ESS of a parameter's mean, the log-density evaluations, wall and process CPU
time. The ``seed`` feeds NapsuMQ, but AIM's noise is OpenDP's and unseeded.

    PYTHONPATH=src python benchmarks/napsu/importance_aim.py [--tau 1] [--seed 0] [--no-profile] \
        [--out benchmarks/napsu/results/importance_aim.json]
"""

from __future__ import annotations

import argparse
import json
import math
import runpy
import sys
import time
import warnings
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tau", type=float, default=1.0)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--no-profile", action="store_true")
    ap.add_argument("--out", default=str(HERE / "results" / "importance_aim.json"))
    a = ap.parse_args()

    from synthinfer.datasets import adult_domain, load_adult
    from synthinfer.napsu import NapsuMQ
    from synthinfer.napsu.importance import importance_sample
    from synthinfer.napsu.reparam import map_options

    warnings.simplefilter("ignore")
    study = runpy.run_path(str(HERE / "adult_coverage.py"), run_name="adult_coverage")
    data, domain = load_adult(categorical=True).data, adult_domain(derived=True)
    n = len(data)
    gen = NapsuMQ(study["ANALYSIS"], epsilon=1.0, delta=n**-2.0, inference="laplace", select_extra="aim",
                  required_share=0.5, interaction_sd=a.tau, seed=a.seed, num_samples=10).fit(data, domain)
    sigma = np.concatenate([np.full(m.values.size, math.sqrt(max(m.variance, 1 / 12))) for m in gen.measurements_])
    t, c = time.perf_counter(), time.process_time()
    res = importance_sample(gen.network_, gen.noisy_counts_, sigma, n, gen.laplace_, layout=gen.layout_,
                            cell_prior=gen.cell_prior, interaction_sd=a.tau, n_chains=4, num_samples=500,
                            profile=not a.no_profile, rng=np.random.default_rng(a.seed),
                            **map_options(gen.network_, False))
    info = {k: (v.item() if isinstance(v, np.generic) else v) for k, v in res.info().items()
            if isinstance(v, (str, bool, int, float, np.generic))}
    out = {"command": " ".join(["python", "benchmarks/napsu/importance_aim.py", *sys.argv[1:]]),
           "d": int(gen.network_.dimension), "tau": a.tau, "profile": not a.no_profile,
           "wall_s": time.perf_counter() - t, "cpu_s": time.process_time() - c} | info
    print(out, flush=True)
    Path(a.out).write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
