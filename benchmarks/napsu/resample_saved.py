r"""NUTS again on a saved NAPSU-MQ fit's noisy counts: how often it diverges, and where.

Loads a fit saved by ``NapsuMQ.save`` (``target_accept.py --save-diverged`` saves the fits that
diverged) and samples its posterior again with ``NapsuMQ.resample_posterior`` (post-processing
of the saved noisy counts, no privacy cost) at each
``--targets`` rate and ``--seeds`` seed, one NUTS run each (no retry). Per run: divergent
transitions, passes, largest R-hat, smallest bulk ESS, gradients per draw and seconds, and the
parameters whose draws at divergent transitions sit farthest from the other draws (difference
of means in posterior standard deviations: the numeric form of Stan's pairs-plot check for
divergences, Betancourt 2017, "A conceptual introduction to Hamiltonian Monte Carlo", Section
6.2), named by their marginal and cells.

    PYTHONPATH=src python benchmarks/napsu/resample_saved.py runs/eps1_repeat11.npz \
        --targets 0.8,0.9,0.95 --seeds 0,1 --out runs/eps1_repeat11_resampled.json
"""

from __future__ import annotations

import argparse
import json
import os
import time
import warnings
from pathlib import Path

import numpy as np


def parameter_name(queries, j: int) -> str:
    """Parameter ``j``'s marginal and its cell (categories) or number of cells."""
    marginal = queries.queryset.marginals[int(queries.query_marginal[j])]
    cells = np.asarray(queries.cells[j])
    if cells.size == 1:
        at = np.unravel_index(int(cells[0]), marginal.shape(queries.domain))
        return f"{marginal.columns} = {tuple(queries.domain[c].categories[int(v)] for c, v in zip(marginal.columns, at))}"
    return f"{marginal.columns}: {cells.size} cells"


def where_divergent(theta: np.ndarray, diverging: np.ndarray, names, top: int) -> list[dict]:
    """The ``top`` parameters whose draws at divergent transitions differ most from the others,
    in posterior standard deviations (``theta``: draws x d; ``diverging``: one flag per draw)."""
    if not diverging.any() or diverging.all():
        return []
    sd = theta.std(0)
    shift = (theta[diverging].mean(0) - theta[~diverging].mean(0)) / np.where(sd > 0, sd, 1.0)
    order = np.argsort(-np.abs(shift))[:top]
    return [{"parameter": int(j), "name": names(int(j)), "shift_in_sd": float(shift[j])} for j in order]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("path", type=Path, help="a fit saved by NapsuMQ.save")
    ap.add_argument("--targets", default="0.8,0.9", help="comma-separated target acceptance rates")
    ap.add_argument("--seeds", default="0", help="comma-separated seeds of the NUTS runs")
    ap.add_argument("--top", type=int, default=10, help="parameters listed per run")
    ap.add_argument("--out", type=Path, default=None)
    a = ap.parse_args()
    warnings.simplefilter("ignore")
    from synthinfer.generate import NapsuMQ

    gen = NapsuMQ.load(a.path)
    names = lambda j: parameter_name(gen.queries_, j)  # noqa: E731
    runs = []
    for target in (float(t) for t in a.targets.split(",")):
        for seed in (int(s) for s in a.seeds.split(",")):
            t, cpu = time.perf_counter(), time.process_time()
            gen.set_params(target_accept=target).resample_posterior(seed)  # a given rate: one run, no retry
            nuts = gen.diagnostics_["nuts"]
            theta = np.asarray(gen.posterior_.posterior["theta"].values).reshape(-1, gen.network_.dimension)
            diverging = np.asarray(gen.posterior_.sample_stats["diverging"].values).reshape(-1)
            run = {"target_accept": target, "seed": seed, "divergences": nuts["divergences"],
                   "passes": nuts["passes"], "rhat_max": nuts["rhat_max"], "ess_bulk_min": nuts["ess_bulk_min"],
                   "gradient_evaluations_per_draw": nuts["gradient_evaluations_per_draw"],
                   "wall_s": time.perf_counter() - t, "cpu_s": time.process_time() - cpu,
                   "where_divergent": where_divergent(theta, diverging, names, a.top)}
            runs.append(run)
            print(f"target {target} seed {seed}: {run['divergences']} divergent, {run['passes']} passes, "
                  f"R-hat {run['rhat_max']:.3f}, ESS {run['ess_bulk_min']:.0f}, {run['wall_s']:.0f} s", flush=True)
            for w in run["where_divergent"][:3]:
                print(f"    {w['shift_in_sd']:+.2f} sd  {w['name']}")
    if a.out is not None:
        a.out.write_text(json.dumps({"path": str(a.path), "d": int(gen.network_.dimension),
                                     "loadavg": os.getloadavg(), "runs": runs}, indent=1))


if __name__ == "__main__":
    main()
