r"""Laplace draws against NUTS draws on the same noisy counts, at AIM's scale, for the analyst.

The coverage study (``adult_coverage.py --table full --marginals aim-analysis``) measures
whether Laplace's intervals cover; this script asks whether they are the *same* intervals the
exact posterior gives. One fit per ``--seeds`` value on the full Adult table (15 columns,
education-num derived, n = 45,222): the analysis' 4-way marginal (age, race, sex, income)
required with ``required_share`` of the budget, AIM's selection (all-2-way workload) with the
rest, epsilon ``--epsilon``, delta n^-2, the interaction prior (``--interaction-sd``), and
``inference="nuts"`` (BlackJAX NUTS whitened by the Laplace fit, ``--n-chains`` chains of
``--num-warmup`` + ``--num-samples``). The fit keeps its Laplace approximation, so both
posteriors condition on the same measurements. From each, ``--m`` synthetic datasets of n
rows (one posterior draw each), the coverage study's logit on each, and Räisä et al.'s
Rubin's rules (``synthinfer.analysis.rubins_rules``). Recorded per coefficient, in units of
the real-data standard error: each posterior's combined estimate minus the real estimate, the
difference between the two combined estimates, and the ratio of their 95% half-widths; per
canonical parameter: the difference of the posterior means in NUTS posterior sd, and the ratio
of the posterior sds (Laplace / NUTS); the NUTS diagnostics and both fits' times.

The seeds follow ``adult_coverage.py``'s (``np.random.default_rng([seed, int(10 epsilon)])``),
but AIM's noise comes from OpenDP's unseeded samplers, so the selection differs from run to run.

    PYTHONPATH=src python benchmarks/napsu/laplace_vs_nuts_aim.py --seeds 0 \
        [--epsilon 1] [--interaction-sd 1] [--required-share 0.5] [--n-chains 4] \
        [--num-warmup 300] [--num-samples 300] [--m 100] \
        [--out benchmarks/napsu/results/laplace_vs_nuts_aim.json]
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import runpy
import sys
import time
import warnings
from pathlib import Path

import numpy as np
from scipy import stats

HERE = Path(__file__).resolve().parent


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seeds", type=int, nargs="+", default=[0])
    ap.add_argument("--epsilon", type=float, default=1.0)
    ap.add_argument("--interaction-sd", type=float, default=1.0)
    ap.add_argument("--required-share", type=float, default=0.5)
    ap.add_argument("--n-chains", type=int, default=4)
    ap.add_argument("--num-warmup", type=int, default=300)
    ap.add_argument("--num-samples", type=int, default=300)
    ap.add_argument("--m", type=int, default=100)
    ap.add_argument("--out", default=str(HERE / "results" / "laplace_vs_nuts_aim.json"))
    a = ap.parse_args()

    from synthinfer.analysis import rubins_rules
    from synthinfer.datasets import adult_domain, load_adult
    from synthinfer.napsu import NapsuMQ
    from synthinfer.napsu.diagnostics import to_inference_data

    study = runpy.run_path(str(HERE / "adult_coverage.py"), run_name="adult_coverage")
    logit, names, analysis, drop_at = study["logit"], study["NAMES"], study["ANALYSIS"], study["DROP_VARIANCE"]
    warnings.simplefilter("ignore")
    data, domain = load_adult(categorical=True).data, adult_domain(derived=True)
    n = len(data)
    real_q, real_v = logit(data, domain)
    real_se = np.sqrt(real_v)
    out = {"command": " ".join(["python", "benchmarks/napsu/laplace_vs_nuts_aim.py", *sys.argv[1:]]),
           "n": n, "epsilon": a.epsilon, "interaction_sd": a.interaction_sd, "required_share": a.required_share,
           "n_chains": a.n_chains, "num_warmup": a.num_warmup, "num_samples": a.num_samples, "m": a.m,
           "coefficients": names, "real": {"estimate": real_q.tolist(), "se": real_se.tolist()}, "fits": []}
    if Path(a.out).exists():  # add to an earlier run's fits
        out["fits"] = json.loads(Path(a.out).read_text())["fits"]

    def combine(gen) -> dict:
        qv = [logit(f, domain) for f in gen.generate(a.m, seed=1)]
        q, v = np.array([x[0] for x in qv]), np.array([x[1] for x in qv])
        drop = ~((v > 0) & (v < drop_at))
        q[drop], v[drop] = np.nan, np.nan
        res = rubins_rules(q, v, n=n, n_syn=n)
        half = {lev: stats.t.ppf(0.5 + lev / 2, res.df) * np.sqrt(res.T_star) for lev in (0.5, 0.95)}
        return {"q_bar": res.q_bar, "half95": half[0.95],
                "covers95": (np.abs(real_q - res.q_bar) <= half[0.95]).tolist(),
                "covers50": (np.abs(real_q - res.q_bar) <= half[0.5]).tolist(),
                "bias_in_real_se": ((res.q_bar - real_q) / real_se).tolist(), "dropped": int(drop.any(axis=1).sum())}

    for seed in a.seeds:
        t, load, cpu = time.perf_counter(), os.getloadavg(), time.process_time()
        gen = NapsuMQ(analysis, epsilon=a.epsilon, delta=n**-2.0, inference="nuts", select_extra="aim",
                      required_share=a.required_share, interaction_sd=a.interaction_sd or None,
                      n_chains=a.n_chains, num_warmup=a.num_warmup, num_samples=a.num_samples,
                      seed=np.random.default_rng([seed, int(a.epsilon * 10)])).fit(data, domain)
        fit_s, fit_cpu = time.perf_counter() - t, time.process_time() - cpu
        nuts_draws = gen.draws_.reshape(-1, gen.draws_.shape[-1])
        laplace_draws = gen.laplace_.sample(nuts_draws.shape[0], np.random.default_rng(seed))
        lap = copy.copy(gen)
        lap.posterior_ = to_inference_data(laplace_draws.reshape(gen.draws_.shape))
        res_nuts, res_lap = combine(gen), combine(lap)
        sd_nuts = nuts_draws.std(axis=0)
        mean_z = (laplace_draws.mean(0) - nuts_draws.mean(0)) / sd_nuts
        sd_ratio = laplace_draws.std(axis=0) / sd_nuts
        diag = gen.diagnostics_
        rec = {"seed": seed, "d": int(gen.network_.dimension),
               "marginals": [list(m.columns) for m in gen.marginals_],
               "nuts": {k: v for k, v in res_nuts.items() if k not in ("q_bar", "half95")},
               "laplace": {k: v for k, v in res_lap.items() if k not in ("q_bar", "half95")},
               "laplace_minus_nuts_in_real_se": ((res_lap["q_bar"] - res_nuts["q_bar"]) / real_se).tolist(),
               "laplace_minus_nuts_in_nuts_half95": ((res_lap["q_bar"] - res_nuts["q_bar"]) / res_nuts["half95"]).tolist(),
               "half95_ratio_laplace_over_nuts": (res_lap["half95"] / res_nuts["half95"]).tolist(),
               "width_ratio_nuts_over_real": (res_nuts["half95"] / (1.959964 * real_se)).tolist(),
               "width_ratio_laplace_over_real": (res_lap["half95"] / (1.959964 * real_se)).tolist(),
               "parameter_mean_z": {"abs_max": float(np.abs(mean_z).max()), "abs_q90": float(np.quantile(np.abs(mean_z), 0.9)),
                                    "abs_median": float(np.median(np.abs(mean_z)))},
               "parameter_sd_ratio": {q: float(np.quantile(sd_ratio, p)) for q, p in
                                      (("min", 0), ("q10", 0.1), ("median", 0.5), ("q90", 0.9), ("max", 1))},
               "nuts_diagnostics": {k: diag["nuts"].get(k) for k in
                                    ("rhat_max", "ess_bulk_min", "ess_tail_min", "divergences", "gradient_evaluations",
                                     "step_size", "seconds") if k in diag.get("nuts", {})},
               "laplace_seconds": diag.get("laplace", {}).get("seconds"),
               "fit_wall_s": fit_s, "fit_cpu_s": fit_cpu, "loadavg_before": load, "loadavg_after": os.getloadavg()}
        out["fits"].append(rec)
        print(seed, "d", rec["d"], "lap-nuts (real se)", np.round(rec["laplace_minus_nuts_in_real_se"], 2).tolist(),
              "half ratio", np.round(rec["half95_ratio_laplace_over_nuts"], 2).tolist(), "nuts", rec["nuts_diagnostics"],
              flush=True)
        Path(a.out).write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
