"""The cell prior against the paper's prior alone, on the same noisy counts: Laplace check and NUTS.

For each epsilon, one NAPSU-MQ measurement of the paper's Adult model (10 marginals, d = 130,
delta = n^-2; ``--fit-seed`` fixes the reference categories, the noise is OpenDP's), then on
those noisy counts, for each configuration:

* ``normal + map``: the paper's prior alone (``cell_prior=0``) with the sampler made for it
  (one-sided map, rotation, plateau jumps);
* ``normal, plain``: the same prior, plain Laplace-whitened NUTS (epsilon 1 only: slow);
* ``cell, plain``: the cell prior (``cell_prior=1``, the default) with plain NUTS, as
  ``NapsuMQ`` runs it.

Recorded: the Laplace fit's time and its Gaussianity check (max gap, axes over 1 nat), NUTS's
gradients per draw (warmup included), step sizes, divergences, max R-hat, min bulk / tail ESS,
wall and process CPU seconds after compilation, and the load average. Writes ``results/cell_prior.{json,png}``.

    PYTHONPATH=src python benchmarks/napsu/cell_prior.py --epsilons 1.0,0.3
"""

from __future__ import annotations

import argparse
import json
import os
import time
import warnings
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
CONFIGS = {  # name -> (cell_prior, plain NUTS)
    "normal + map": (0.0, False),
    "normal, plain": (0.0, True),
    "cell, plain": (1.0, True),
}


def run_config(gen, n: int, cell_prior: float, plain: bool, a) -> dict:
    import arviz as az

    from synthinfer.napsu import diagnostics, nuts
    from synthinfer.napsu.laplace import laplace_approximation, laplace_gap

    net, s, sigma = gen.network_, np.asarray(gen.noisy_counts_), float(gen.sigma_dp_)
    w0, c0 = time.perf_counter(), time.process_time()
    lap = laplace_approximation(net, s, sigma, n, cell_prior=cell_prior, rng=np.random.default_rng(0))
    gap = laplace_gap(net, s, sigma, n, lap, cell_prior=cell_prior)
    lap_w, lap_c = time.perf_counter() - w0, time.process_time() - c0
    extra = (dict(one_sided_threshold=-np.inf, jump_moves=False) if plain
             else dict(dropped_cell_jacobian=net.dropped_cell_log_prob_jacobian))
    w0, c0 = time.perf_counter(), time.process_time()
    res = nuts.nuts_sample(net, s, sigma, n, lap, cell_prior=cell_prior, n_chains=a.chains, num_warmup=a.warmup,
                           num_samples=a.samples, rng=np.random.default_rng(a.nuts_seed), **extra)
    nuts_w, nuts_c = time.perf_counter() - w0, time.process_time() - c0
    idata = diagnostics.to_inference_data(res.draws)
    return {
        "cell_prior": cell_prior, "plain": plain,
        "laplace": {"wall_s": lap_w, "cpu_s": lap_c, "max_gap_nats": float(gap.max()),
                    "axes_gap_over_1_nat": int((gap > 1).sum())},
        "nuts": {"wall_s": nuts_w, "cpu_s": nuts_c,
                 "gradients_per_draw": res.n_grad_evals / (a.chains * (a.warmup + a.samples)),
                 "step_size": res.step_size.tolist(), "divergences": int(res.diverging.sum()),
                 "rhat_max": float(az.rhat(idata)["theta"].max()),
                 "ess_bulk_min": float(az.ess(idata, method="bulk")["theta"].min()),
                 "ess_tail_min": float(az.ess(idata, method="tail")["theta"].min()),
                 "one_sided_parameters": res.n_one_sided, "jump_parameters": res.n_jump_cells},
    }


def plot(out: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(10, 3.8))
    labels, grads, ess_per_s = [], [], []
    for eps, runs in out["runs"].items():
        for name, r in runs.items():
            labels.append(f"eps {eps}\n{name}")
            grads.append(r["nuts"]["gradients_per_draw"])
            ess_per_s.append(r["nuts"]["ess_bulk_min"] / r["nuts"]["cpu_s"])
    y = np.arange(len(labels))
    axes[0].barh(y, grads, color="tab:blue")
    axes[0].set_xlabel("NUTS gradients per draw")
    axes[1].barh(y, ess_per_s, color="tab:green")
    axes[1].set_xlabel("min bulk ESS per CPU second")
    for ax in axes:
        ax.set_yticks(y, labels, fontsize=8)
        ax.invert_yaxis()
    fig.suptitle("Adult, paper's model (d = 130): the cell prior against the normal prior alone, same noisy counts")
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--epsilons", default="1.0,0.3")
    ap.add_argument("--fit-seed", type=int, default=1)
    ap.add_argument("--nuts-seed", type=int, default=0)
    ap.add_argument("--chains", type=int, default=4)
    ap.add_argument("--warmup", type=int, default=800)
    ap.add_argument("--samples", type=int, default=2000)
    ap.add_argument("--out", default=str(HERE / "results" / "cell_prior.json"))
    a = ap.parse_args()

    from synthinfer import float64
    from synthinfer.datasets import ADULT_PAPER_MARGINALS, load_adult
    from synthinfer.errors import ConvergenceWarning
    from synthinfer.generate import NapsuMQ

    warnings.simplefilter("ignore", ConvergenceWarning)
    ds = load_adult(paper_subset=True)
    n = len(ds.data)
    out = {"command": "PYTHONPATH=src python benchmarks/napsu/cell_prior.py "
                      + " ".join(f"--{k.replace('_', '-')} {v}" for k, v in vars(a).items() if k != "out"),
           "n": n, "delta": n**-2.0, "runs": {}, "loadavg_before": os.getloadavg()}
    for eps in (float(e) for e in a.epsilons.split(",")):
        gen = NapsuMQ(ADULT_PAPER_MARGINALS, epsilon=eps, delta=n**-2.0, inference="laplace", cell_prior=0.0,
                      seed=a.fit_seed).fit(ds.data, ds.domain)
        out["runs"][str(eps)] = {}
        # compile first (the programs are the same for both priors: the weight is a traced
        # argument), so that every configuration's times are run times
        from synthinfer.napsu.laplace import laplace_approximation
        from synthinfer.napsu.nuts import compile_nuts

        with float64():
            laplace_approximation(gen.network_, np.asarray(gen.noisy_counts_), float(gen.sigma_dp_), n,
                                  rng=np.random.default_rng(0))
            for jumps in (True, False):
                compile_nuts(gen.network_, num_warmup=a.warmup, num_samples=a.samples, jump_moves=jumps).result()
        for name, (cell_prior, plain) in CONFIGS.items():
            if name == "normal, plain" and eps < 1:
                continue
            with float64():
                rec = run_config(gen, n, cell_prior, plain, a)
            rec["loadavg_after"] = os.getloadavg()
            out["runs"][str(eps)][name] = rec
            print(eps, name, json.dumps(rec["nuts"]), flush=True)
            Path(a.out).write_text(json.dumps(out, indent=1))
    plot(out, Path(a.out).with_suffix(".png"))


if __name__ == "__main__":
    main()
