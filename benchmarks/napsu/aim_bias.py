"""Where the bias of NAPSU-MQ + AIM's intervals comes from: the posterior mode or the draws.

On the full Adult table (15 columns, education-num derived, n = 45,222), for ``--repeats``
fits at epsilon 1 of ``NapsuMQ`` with the analysis' own 4-way marginal (age, race, sex,
income) required, AIM's selection (``required_share``) and the ``--inference`` backend
(default Laplace), fits the coverage study's logit (``adult_coverage.py``) on (a) 10 n rows
sampled from the model at the posterior mode (the Laplace mean) and (b) each of
``--datasets`` synthetic datasets from the posterior draws (averaged), and records each coefficient's difference from the real-data estimate in units of
the real standard error. The model is correctly specified for this analysis (the logit reads
the data only through that 4-way table), so what remains is the prior's and the
approximation's.

    PYTHONPATH=src python benchmarks/napsu/aim_bias.py [--repeats 3] [--cell-prior 1.0] [--prior-sd 10] \\
        [--interaction-sd 2] [--required-share 0.5] [--inference laplace] [--num-warmup 800] \\
        [--num-samples 25] [--out benchmarks/napsu/results/aim_bias.json]

About 2 minutes per repeat on 2 cores with Laplace; NUTS at d ~ 430 with 300 + 100
draws per chain took 18 minutes.
"""

from __future__ import annotations

import argparse
import json
import os
import runpy
import sys
import time
import warnings
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--datasets", type=int, default=20)
    ap.add_argument("--cell-prior", type=float, default=None, help="default: the library's")
    ap.add_argument("--prior-sd", type=float, default=None, help="default: the library's")
    ap.add_argument("--interaction-sd", type=float, default=None, help="default: the library's; 0: None")
    ap.add_argument("--required-share", type=float, default=0.5)
    ap.add_argument("--inference", default="laplace", help="NapsuMQ's inference backend")
    ap.add_argument("--num-warmup", type=int, default=800, help="NUTS warmup per chain")
    ap.add_argument("--num-samples", type=int, default=25, help="draws per chain")
    ap.add_argument("--out", default=str(HERE / "results" / "aim_bias.json"))
    a = ap.parse_args()

    import jax

    from synthinfer import float64
    from synthinfer.data import decode
    from synthinfer.datasets import adult_domain, load_adult
    from synthinfer.napsu import NapsuMQ

    study = runpy.run_path(str(HERE / "adult_coverage.py"), run_name="adult_coverage")
    logit, names, analysis = study["logit"], study["NAMES"], study["ANALYSIS"]
    warnings.simplefilter("ignore")
    data, domain = load_adult(categorical=True).data, adult_domain(derived=True)
    fitted = domain.without_derived()
    n = len(data)
    real_q, real_v = logit(data, domain)
    se = np.sqrt(real_v)
    prior = {k: v for k, v in (("cell_prior", a.cell_prior), ("prior_sd", a.prior_sd)) if v is not None}
    if a.interaction_sd is not None:
        prior["interaction_sd"] = a.interaction_sd or None
    out = {"command": " ".join(["python", "benchmarks/napsu/aim_bias.py", *sys.argv[1:]]),
           "n": n, "epsilon": 1.0, "coefficients": names, "real": {"estimate": real_q.tolist(), "se": se.tolist()},
           "fits": []}
    for r in range(a.repeats):
        t, load = time.perf_counter(), os.getloadavg()
        gen = NapsuMQ(analysis, epsilon=1.0, delta=n**-2.0, inference=a.inference, select_extra="aim",
                      required_share=a.required_share, seed=r, num_warmup=a.num_warmup, num_samples=a.num_samples,
                      n_chains=4, **prior).fit(data, domain)
        with float64():
            mode = np.asarray(gen.network_.sample(gen.laplace_.mean, 10 * n, jax.random.key(r)))
        q_mode, _ = logit(decode(mode, fitted), domain)
        q_draws = np.nanmean([logit(f, domain)[0] for f in gen.generate(a.datasets, seed=1)], axis=0)
        rec = {"d": int(gen.network_.dimension), "cell_prior": gen.cell_prior, "prior_sd": gen.prior_sd,
               "interaction_sd": gen.interaction_sd,
               "mode_bias_in_real_se": ((q_mode - real_q) / se).tolist(),
               "draws_bias_in_real_se": ((q_draws - real_q) / se).tolist(),
               "inference": a.inference, "diagnostics": _diagnostics(gen),
               "seconds": time.perf_counter() - t, "loadavg_before": load}
        out["fits"].append(rec)
        print(r, "d", rec["d"], "mode", np.round(rec["mode_bias_in_real_se"], 2).tolist(),
              "draws", np.round(rec["draws_bias_in_real_se"], 2).tolist(), flush=True)
        Path(a.out).write_text(json.dumps(out, indent=1))


def _diagnostics(gen) -> dict:
    """The fit's JSON-ready diagnostics (R-hat, ESS, step size, gradients, timings): scalars,
    and the scalars and short lists of each stage's record."""
    def keep(v):
        return isinstance(v, (int, float, str, bool)) or (isinstance(v, list) and len(v) <= 16)

    return {k: (v if keep(v) else {kk: vv for kk, vv in v.items() if keep(vv)})
            for k, v in gen.diagnostics_.items() if keep(v) or isinstance(v, dict)}


if __name__ == "__main__":
    main()
