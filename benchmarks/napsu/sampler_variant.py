"""One Adult NUTS fit with per-parameter diagnostics: for comparing sampler variants.

Fits the Adult model of ``adult_coverage.py`` (10 paper marginals, delta = n^-2, reference
categories from the noisy counts) with the Laplace approximation at ``--eps`` and seed
``--fit-seed`` (seed 1 at epsilon 1 gives ``speed.py``'s noisy counts), runs
:func:`synthinfer.napsu.nuts.nuts_sample` (4 chains x (800 + 2000)) with NUTS seed
``--nuts-seed``, and writes the gradient count, step sizes, divergences, max R-hat, min bulk
and tail ESS and, for the 8 parameters with the lowest bulk ESS, their cell, noisy count,
Laplace mean and sd and posterior quantiles (1, 5, 50, 95, 99%). ``--no-rotate`` leaves out
the rotation onto the dropped cells' emptying directions (the map without it, for comparison);
``--no-jumps`` leaves out the plateau jumps. Draws go to the ``.npy`` beside the JSON.

    PYTHONPATH=src python benchmarks/napsu/sampler_variant.py --fit-seed 1 --eps 1.0 --out run.json

The runs compared in ``docs/napsu-sampler.md`` are in ``results/sampler_variants.json``.
"""

from __future__ import annotations

import argparse
import json
import time
import warnings

import numpy as np

from synthinfer._jax import single_threaded_blas
from synthinfer.datasets import ADULT_PAPER_MARGINALS, load_adult
from synthinfer.errors import ConvergenceWarning
from synthinfer.generate import NapsuMQ
from synthinfer.napsu import diagnostics, nuts

WARMUP, SAMPLES = 800, 2000


def main() -> None:
    import arviz as az

    ap = argparse.ArgumentParser()
    ap.add_argument("--fit-seed", type=int, default=1)
    ap.add_argument("--nuts-seed", type=int, default=0)
    ap.add_argument("--eps", type=float, default=1.0)
    ap.add_argument("--no-rotate", action="store_true")
    ap.add_argument("--no-jumps", action="store_true")
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    warnings.simplefilter("ignore", ConvergenceWarning)
    ds = load_adult(paper_subset=True)
    n = len(ds.data)
    gen = NapsuMQ(ADULT_PAPER_MARGINALS, epsilon=a.eps, delta=n**-2.0, inference="laplace", cell_prior=0.0,
                  seed=a.fit_seed).fit(ds.data, ds.domain)
    lap, net = gen.laplace_, gen.network_
    s = np.asarray(gen.noisy_counts_)
    extra = {} if a.no_rotate else {"dropped_cell_jacobian": net.dropped_cell_log_prob_jacobian}
    t0 = time.perf_counter()
    with single_threaded_blas():
        res = nuts.nuts_sample(net, s, gen.sigma_dp_, n, lap, prior_sd=gen.prior_sd,
                              num_warmup=WARMUP, num_samples=SAMPLES,
                              rng=np.random.default_rng(a.nuts_seed), jump_moves=not a.no_jumps, **extra)
    seconds = time.perf_counter() - t0
    idata = diagnostics.to_inference_data(res.draws)
    rhat = np.asarray(az.rhat(idata)["theta"])
    bulk = np.asarray(az.ess(idata, method="bulk")["theta"])
    tail = np.asarray(az.ess(idata, method="tail")["theta"])
    cells = gen.queries_.describe()
    out = {
        "args": vars(a), "seconds": seconds, "grads": res.n_grad_evals,
        "grad_per_draw": res.n_grad_evals / (res.draws.shape[0] * (WARMUP + SAMPLES)),
        "jump_cells": res.n_jump_cells, "jumps_accepted": res.n_jumps_accepted,
        "div": int(res.diverging.sum()), "step": res.step_size.tolist(), "n_one_sided": res.n_one_sided,
        "rhat_max": float(rhat.max()), "ess_bulk_min": float(bulk.min()), "ess_tail_min": float(tail.min()),
        "sigma_dp": float(gen.sigma_dp_),
        "worst": [{"j": int(j), "cell": str(cells[j]), "s": float(s[j]), "ess_bulk": float(bulk[j]),
                   "ess_tail": float(tail[j]), "rhat": float(rhat[j]),
                   "q": np.quantile(res.draws[:, :, j], [0.01, 0.05, 0.5, 0.95, 0.99]).round(2).tolist(),
                   "lap_mean": float(lap.mean[j]), "lap_sd": float(np.sqrt(lap.cov[j, j]))}
                  for j in np.argsort(bulk)[:8]],
    }
    with open(a.out, "w") as f:
        json.dump(out, f, indent=1)
    np.save(a.out.removesuffix(".json") + ".npy", res.draws)
    print(json.dumps({k: v for k, v in out.items() if k != "worst"}))


if __name__ == "__main__":
    from synthinfer import float64

    with float64():  # the script calls lower-level JAX code (network passes, likelihoods) directly
        main()
