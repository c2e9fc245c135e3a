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

``--line-jumps 0,default`` runs each seed without and with the jumps along regression lines
(``synthinfer.napsu.nuts.LINE_JUMP_CANDIDATES``: screened after warmup's last slow window and
after each failed check), one after the other; ``--line-tries 1,default`` with one proposal
per iteration of each such jump and with the library's number (``jumps.LINE_TRIES``).

``--num-warmup 200,default`` runs each seed with 200 warmup iterations per chain and with the
fit's own number (the library's choice for the model unless the fit set one).

``--targets default`` samples as a fit does (the library's rate, sampled again at a higher one
after divergent transitions, further passes while the checks fail). ``--reference-draws`` names
the draws ``(chains, draws, d)`` of an earlier run on the same fit (``default_fit.py --save``
keeps them): each run records its parameters' largest mean difference from them in their
standard deviations and, for the reference's slowest parameter (or ``--watch J``), both runs'
quantiles; ``--plot`` draws that parameter's histogram in each.

    PYTHONPATH=src python benchmarks/napsu/resample_saved.py fits/fit_0.npz --targets default \
        --seeds 2 --reference-draws fits/draws_0.npy --plot results/axis_jumps_resample.png \
        --out results/axis_jumps_resample.json
"""

from __future__ import annotations

import argparse
import json
import os
import sys
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
    ap.add_argument("--reference-draws", type=Path, default=None, help="an earlier run's draws (.npy) on this fit")
    ap.add_argument("--watch", type=int, default=None, help="parameter compared in quantiles (default: the "
                    "reference's slowest)")
    ap.add_argument("--plot", type=Path, default=None, help="PNG of the watched parameter's histograms")
    ap.add_argument("--line-jumps", default="default",
                    help="comma-separated numbers of slowest parameters screened for jumps along their regression "
                         "lines after warmup and after a failed check (nuts.LINE_JUMP_CANDIDATES; 0: none, as "
                         "before such jumps); each seed runs with each")
    ap.add_argument("--line-tries", default="default",
                    help="comma-separated proposals per iteration of each line jump (jumps.LINE_TRIES); each "
                         "seed runs with each where line jumps are screened")
    ap.add_argument("--num-warmup", default="default",
                    help="comma-separated warmup iterations per chain (NapsuMQ.set_params(num_warmup=...); default: "
                         "the fit's own setting); each seed runs with each")
    ap.add_argument("--out", type=Path, default=None)
    a = ap.parse_args()
    warnings.simplefilter("ignore")
    from synthinfer.generate import NapsuMQ
    from synthinfer.mcmc import batched_ess
    from synthinfer.napsu import jumps as jumps_module
    from synthinfer.napsu import nuts as nuts_module

    library = nuts_module.LINE_JUMP_CANDIDATES, jumps_module.LINE_TRIES
    line_jumps = [library[0] if x == "default" else int(x) for x in a.line_jumps.split(",")]
    line_tries = [library[1] if x == "default" else int(x) for x in a.line_tries.split(",")]
    warmups = [None if w == "default" else int(w) for w in a.num_warmup.split(",")]
    settings = [(target, seed, lines, tries if lines else library[1], warmup)
                for target in (None if t == "default" else float(t) for t in a.targets.split(","))
                for seed in (int(s) for s in a.seeds.split(",")) for lines in line_jumps
                for tries in (line_tries if lines else line_tries[:1]) for warmup in warmups]

    gen = NapsuMQ.load(a.path)
    names = lambda j: parameter_name(gen.queries_, j)  # noqa: E731
    reference, watch, quantiles = None, a.watch, (0.05, 0.25, 0.5, 0.75, 0.95)
    if a.reference_draws is not None:
        reference = np.load(a.reference_draws)
        ess = batched_ess(np.moveaxis(reference, 2, 0), "bulk")
        watch = int(np.argmin(ess)) if watch is None else watch
        ref_flat = reference.reshape(-1, reference.shape[2])
        ref_record = {"path": str(a.reference_draws), "shape": list(reference.shape), "watch": watch,
                      "watch_name": names(watch), "watch_ess_bulk": float(ess[watch]),
                      "watch_quantiles": np.quantile(ref_flat[:, watch], quantiles).tolist()}
    runs, watched = [], []
    fit_warmup = gen.num_warmup
    for target, seed, lines, tries, warmup in settings:
        nuts_module.LINE_JUMP_CANDIDATES, jumps_module.LINE_TRIES = lines, tries
        t, cpu, load = time.perf_counter(), time.process_time(), os.getloadavg()
        # a given rate: one run, no retry; "default" (None): as a fit samples
        gen.set_params(target_accept=target, num_warmup=fit_warmup if warmup is None else warmup)
        gen.resample_posterior(seed)
        nuts = gen.diagnostics_["nuts"]
        draws = np.asarray(gen.posterior_.posterior["theta"].values)
        theta = draws.reshape(-1, gen.network_.dimension)
        diverging = np.asarray(gen.posterior_.sample_stats["diverging"].values).reshape(-1)
        ess = batched_ess(np.moveaxis(draws, 2, 0), "bulk")
        run = {"target_accept": target, "final_target_accept": nuts["target_accept"], "seed": seed,
               "line_jump_candidates": lines, "line_tries": tries if lines else None,
               "num_warmup": gen.diagnostics_["draws"]["num_warmup"],
               "gradient_evaluations": nuts["gradient_evaluations"],
               "gradient_evaluations_warmup": nuts["gradient_evaluations_warmup"],
               "divergences": nuts["divergences"], "passes": nuts["passes"],
               "draws_per_chain": nuts["draws_per_chain"], "draws_set_aside": nuts.get("draws_set_aside", 0),
               "rhat_max": nuts["rhat_max"],
               "ess_bulk_min": nuts["ess_bulk_min"],
               "gradient_evaluations_per_draw": nuts["gradient_evaluations_per_draw"],
               "jump_parameters": nuts.get("plateau_jump_parameters"),
               "jump_acceptance": nuts.get("plateau_jump_acceptance"),
               "earlier_runs": nuts.get("earlier_runs", []),
               "wall_s": time.perf_counter() - t, "cpu_s": time.process_time() - cpu,
               "loadavg_before": load, "loadavg_after": os.getloadavg(),
               "slowest": [{"parameter": int(j), "name": names(int(j)), "ess_bulk": float(ess[j])}
                           for j in np.argsort(ess)[:5]],
               "where_divergent": where_divergent(theta, diverging, names, a.top)}
        if reference is not None:
            sd = np.where(ref_flat.std(0) > 0, ref_flat.std(0), 1.0)
            shift = np.abs(theta.mean(0) - ref_flat.mean(0)) / sd
            run["max_mean_difference_in_reference_sd"] = float(shift.max())
            run["watch_ess_bulk"] = float(ess[watch])
            run["watch_quantiles"] = np.quantile(theta[:, watch], quantiles).tolist()
            watched.append((run, theta[:, watch]))
        runs.append(run)
        jumps_label = f"{lines} x {tries}" if lines else "off"
        print(f"target {target or 'default'} seed {seed} line jumps {jumps_label}, warmup {run['num_warmup']}: "
              f"{run['divergences']} divergent, {run['passes']} passes, "
              f"R-hat {run['rhat_max']:.3f}, ESS {run['ess_bulk_min']:.0f}, {run['wall_s']:.0f} s", flush=True)
        for w in run["where_divergent"][:3]:
            print(f"    {w['shift_in_sd']:+.2f} sd  {w['name']}")
    if a.plot is not None and reference is not None:
        _plot(a.plot, ref_flat[:, watch], ref_record, watched)
    if a.out is not None:
        a.out.write_text(json.dumps({"command": "python " + " ".join(sys.argv), "path": str(a.path),
                                     "d": int(gen.network_.dimension), "cpu_count": os.cpu_count(),
                                     "reference": ref_record if reference is not None else None, "runs": runs},
                                    indent=1))


def _plot(path: Path, ref: np.ndarray, ref_record: dict, watched: list) -> None:
    """Histograms of the watched parameter: the reference run's draws and each run's."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4))
    every = np.concatenate([ref, *(x for _, x in watched)])
    bins = np.linspace(every.min(), every.max(), 80)
    ax.hist(ref, bins=bins, density=True, histtype="step", lw=2, color="k",
            label=f"reference ({ref_record['shape'][1]} draws per chain), ESS {ref_record['watch_ess_bulk']:.0f}")
    for run, x in watched:
        ax.hist(x, bins=bins, density=True, histtype="step",
                label=f"seed {run['seed']}, line jumps "
                      f"{'x %d' % run['line_tries'] if run['line_jump_candidates'] else 'off'}: "
                      f"{run['passes']} pass(es), {run['draws_per_chain']} draws per chain, "
                      f"ESS {run['watch_ess_bulk']:.0f}, jumps {run['jump_parameters']}")
    ax.set_xlabel(f"parameter {ref_record['watch']}: {ref_record['watch_name']}")
    ax.set_ylabel("density")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


if __name__ == "__main__":
    main()
