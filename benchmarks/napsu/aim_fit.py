"""NAPSU-MQ with AIM on the full Adult table: selection + noise-aware fit, time and utility.

``NapsuMQ(ADULT_PAPER_MARGINALS, select_extra="aim")`` on ``load_adult(categorical=True)``
(15 columns, n = 45,222; the all-2-way workload; epsilon = 1, delta = n^-2), once per
inference backend with the same seed, so every backend conditions on the same AIM
measurements: ``laplace`` (noise-aware) and ``mle`` (the PGM point estimate on the same
measurements, not noise-aware). Recorded per backend: wall and process CPU time of the fit
(AIM's selection and measurement included) and of generating one dataset of n rows, the model
(d, marginals, AIM's rounds and clique cells), the Laplace diagnostics, and the utility of
synthetic data: the mean total variation distance over all 1-way and all 2-way marginals of
the 15 columns, for ``--datasets`` synthetic datasets (one posterior draw each) and, for the
Laplace fit, for the posterior mode. Load average before and after. Writes
``results/aim_fit.json``.

    python benchmarks/napsu/aim_fit.py [--seed 0] [--datasets 5]
    python benchmarks/napsu/aim_fit.py --inferences nuts --chains 4 --num-warmup 300 --num-samples 300 \
        --out benchmarks/napsu/results/aim_fit_nuts.json
    python benchmarks/napsu/aim_fit.py --derived --inferences nuts,mle --tie-below 3 --num-warmup 400 \
        --num-samples 400 --out benchmarks/napsu/results/aim_fit_tied3.json
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import sys
import time
import warnings
from pathlib import Path

os.environ.setdefault("XLA_FLAGS", "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1")

import numpy as np  # noqa: E402

HERE = Path(__file__).resolve().parent
OUT = HERE / "results" / "aim_fit.json"


def _clock(fn):
    w, c = time.perf_counter(), time.process_time()
    out = fn()
    return out, time.perf_counter() - w, time.process_time() - c


def _tv(real, syn, cols) -> float:
    r = real.groupby(list(cols), observed=False).size()
    s = syn.groupby(list(cols), observed=False).size()
    r, s = r / r.sum(), (s / s.sum()).reindex(r.index, fill_value=0.0)
    return float(0.5 * np.abs(r - s).sum())


def utility(real, syn) -> dict[str, float]:
    cols = list(real.columns)
    one = [_tv(real, syn, [c]) for c in cols]
    two = [_tv(real, syn, p) for p in itertools.combinations(cols, 2)]
    return {"tv_1way_mean": float(np.mean(one)), "tv_1way_max": float(np.max(one)),
            "tv_2way_mean": float(np.mean(two)), "tv_2way_max": float(np.max(two))}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--datasets", type=int, default=5)
    ap.add_argument("--epsilon", type=float, default=1.0)
    ap.add_argument("--inferences", default="laplace,mle", help="comma-separated backends, each on its own AIM run")
    ap.add_argument("--chains", type=int, default=4)
    ap.add_argument("--num-warmup", type=int, default=800)
    ap.add_argument("--num-samples", type=int, default=None, help="default: max(datasets, 25) for laplace/mle")
    ap.add_argument("--cell-prior", type=float, default=None, help="NapsuMQ's cell_prior (default: the library's)")
    ap.add_argument("--derived", action="store_true",
                    help="declare education-num derived from education (adult_domain(derived=True)), as the "
                         "coverage study does: no budget on a known dependency")
    ap.add_argument("--required-share", type=float, default=None, help="NapsuMQ's required_share (default: the library's)")
    ap.add_argument("--tie-below", type=lambda t: None if t.lower() == "none" else t if t == "auto" else float(t), default="auto",
                    help="NapsuMQ's tie_below for the noise-aware backends (default: the library's, 3 with AIM; none: "
                         "untied, as the runs before it; the PGM baseline fits the canonical queries)")
    ap.add_argument("--out", default=str(OUT))
    args = ap.parse_args()

    from synthinfer.datasets import ADULT_PAPER_MARGINALS, adult_domain, load_adult
    from synthinfer.napsu import NapsuMQ

    ds = load_adult(categorical=True)
    domain = adult_domain(derived=True) if args.derived else ds.domain
    n = len(ds.data)
    out = {"command": " ".join(["python", "benchmarks/napsu/aim_fit.py", *sys.argv[1:]]),
           "n": n, "epsilon": args.epsilon, "delta": n**-2.0, "nproc": os.cpu_count(), "runs": []}
    prior = {} if args.cell_prior is None else {"cell_prior": args.cell_prior}
    if args.required_share is not None:
        prior["required_share"] = args.required_share
    for inference in args.inferences.split(","):
        load0 = os.getloadavg()
        gen = NapsuMQ(ADULT_PAPER_MARGINALS, epsilon=args.epsilon, delta=n**-2.0, inference=inference,
                      select_extra="aim", num_samples=args.num_samples or max(args.datasets, 25), n_chains=args.chains,
                      num_warmup=args.num_warmup, seed=args.seed, **prior,
                      **({"tie_below": args.tie_below} if inference != "mle" else {}))
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            _, fit_w, fit_c = _clock(lambda: gen.fit(ds.data, domain))
        syn, gen_w, gen_c = _clock(lambda: gen.generate(args.datasets, seed=1))
        rec = {
            "inference": inference, "cell_prior": gen.cell_prior, "fit_wall_s": fit_w, "fit_cpu_s": fit_c,
            "generate_wall_s": gen_w, "generate_cpu_s": gen_c, "d": gen.network_.dimension,
            "canonical_queries": gen.queries_.canonical.dimension, "ties": gen.diagnostics_.get("ties"),
            "marginals": [list(m.columns) for m in gen.marginals_],
            "clique_cells": [int(np.prod(gen.network_.junction_tree.shape(c)))
                             for c in range(len(gen.network_.junction_tree.cliques))],
            "aim": {k: v for k, v in gen.diagnostics_["aim"].items() if k != "sigma"},
            "timings": gen.diagnostics_["timings"],
            "warnings": sorted({str(w.message)[:160] for w in caught}),
            "utility_per_dataset": [utility(ds.data, s) for s in syn],
        }
        if "nuts" in gen.diagnostics_:
            rec["nuts"] = gen.diagnostics_["nuts"]
        if inference in ("laplace", "nuts"):
            rec["laplace"] = {k: v for k, v in gen.diagnostics_["laplace"].items() if k != "attempts"}
            import jax

            from synthinfer import float64
            from synthinfer.data import decode

            with float64():
                mode = np.asarray(gen.network_.sample(gen.laplace_.mean, n, jax.random.key(3)))
            fitted = domain.without_derived()  # the network's columns (derived ones are added back by generate)
            rec["utility_mode"] = utility(ds.data[list(fitted.names)], decode(mode, fitted))
        rec["load_before_after"] = [load0, os.getloadavg()]
        out["runs"].append(rec)
        print(json.dumps({k: rec[k] for k in ("inference", "fit_wall_s", "fit_cpu_s", "d")}),
              json.dumps(rec["utility_per_dataset"][0]), flush=True)
        Path(args.out).write_text(json.dumps(out, indent=1, default=float))


if __name__ == "__main__":
    main()
