r"""NUTS's run again after divergent transitions: going on from the chains against starting over.

Where NUTS's draws at target acceptance 0.8 have divergent transitions, the library samples
again at 0.95 (``RETRY_TARGET_ACCEPT``). The chains now go on from where they stopped, keeping
their positions and adapted mass matrices, and adapt only the step size anew over Stan's final
fast window (``nuts_sample(resume=...)``); before, the run at 0.95 started over from the
Laplace fit with the whole warmup. This script fits the paper's Adult model (its 10 two-way
marginals, epsilon 1, the library's defaults: NUTS 4 x (800 + 2000)) for each ``--seeds`` seed
and, where the fit sampled again, samples the same posterior at 0.95 from the start as the
earlier policy did (``set_params(target_accept=0.95).resample_posterior``: post-processing of
the fit's noisy counts, no retry, no privacy cost). Per fit and run: divergent transitions,
gradients (warmup and in all), sampling seconds, step sizes, the largest R-hat and smallest bulk
ESS, and how far apart the two runs' posterior means are, in posterior standard deviations
(per parameter; the largest over the parameters).

    PYTHONPATH=src python benchmarks/napsu/retry_resume.py --seeds 0-5 \
        --out benchmarks/napsu/results/retry_resume.json

``--numbers``: the demo's model with age and hours-per-week as numbers
(``ADULT_NUMBERS_MARGINALS``, linear coarse interactions, 2 chains, the library's draws for it),
d = 395. ``--force-retry``: where the run at 0.8 has no divergent transition, it is marked as
having one (a wrapper around ``nuts_sample``), so that every fit samples again; each run goes
on through the library's passes until the convergence check passes, so the records compare
the whole cost of the two forms.

    PYTHONPATH=src python benchmarks/napsu/retry_resume.py --numbers --force-retry --seeds 0 \
        --out benchmarks/napsu/results/retry_resume_numbers_converged.json

``--plot``: only draw ``--out``'s figure (the same name, ``.png``): per fit that sampled again,
the run at 0.95's gradients going on and from the start, and the runs' posterior means apart.
A ``resumed`` record's seconds are the fit's NUTS seconds, its earlier runs' included
(``earlier_runs[i]["seconds"]``); a ``from_the_start`` record's are that run's alone.
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

OUT = Path(__file__).resolve().parent / "results" / "retry_resume.json"


def seeds(text: str) -> list[int]:
    """``"0-7"`` or ``"0,3,5"``."""
    if "-" in text:
        lo, hi = (int(t) for t in text.split("-"))
        return list(range(lo, hi + 1))
    return [int(t) for t in text.split(",")]


def run_record(gen) -> dict:
    nu = gen.diagnostics_["nuts"]
    return {"divergences": nu["divergences"], "gradient_evaluations": nu["gradient_evaluations"],
            "gradient_evaluations_warmup": nu["gradient_evaluations_warmup"], "passes": nu["passes"],
            "step_size": nu["step_size"], "rhat_max": nu.get("rhat_max"), "ess_bulk_min": nu.get("ess_bulk_min"),
            "seconds": gen.diagnostics_["timings"]["nuts"]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=seeds, default=seeds("0-7"))
    ap.add_argument("--epsilon", type=float, default=1.0)
    ap.add_argument("--out", type=Path, default=OUT)
    ap.add_argument("--plot", action="store_true", help="only draw the figure of --out")
    ap.add_argument("--numbers", action="store_true", help="the demo's model with age and hours as numbers")
    ap.add_argument("--force-retry", action="store_true",
                    help="mark a run at 0.8 without divergent transitions as having one, so that every fit samples again")
    a = ap.parse_args()
    if a.plot:
        plot(json.loads(a.out.read_text()), a.out.with_suffix(".png"))
        return
    warnings.simplefilter("ignore")
    from synthinfer.datasets import ADULT_NUMBERS_MARGINALS, ADULT_PAPER_MARGINALS, load_adult
    from synthinfer.generate import NapsuMQ

    if a.force_retry:
        force_retry()
    df, domain = load_adult(paper_subset=True, numbers=a.numbers)
    model: dict = ({"marginals": ADULT_NUMBERS_MARGINALS, "coarse_interactions": "linear", "n_chains": 2} if a.numbers
                   else {"marginals": ADULT_PAPER_MARGINALS})
    doc = {"command": " ".join(["python", "benchmarks/napsu/retry_resume.py", *sys.argv[1:]]), "fits": []}
    for seed in a.seeds:
        rec: dict = {"seed": seed, "loadavg_before": os.getloadavg()}
        cpu = time.process_time()
        gen = NapsuMQ(**model, epsilon=a.epsilon, inference="nuts", seed=seed).fit(df, domain)
        rec["fit_cpu_s"] = time.process_time() - cpu
        nu = gen.diagnostics_["nuts"]
        rec["d"] = int(gen.network_.dimension)
        rec["earlier_runs"] = nu["earlier_runs"]
        rec["resumed"] = run_record(gen)  # the library's run: at 0.95 only where 0.8 diverged
        print(f"seed {seed}: d {rec['d']}, earlier runs {nu['earlier_runs']}, last run {rec['resumed']}", flush=True)
        if nu["earlier_runs"]:
            ours = gen.posterior_.posterior["theta"].values.reshape(-1, rec["d"])
            cpu = time.process_time()
            gen.set_params(target_accept=0.95).resample_posterior(seed=seed + 1000)
            rec["from_the_start_cpu_s"] = time.process_time() - cpu
            rec["from_the_start"] = run_record(gen)
            theirs = gen.posterior_.posterior["theta"].values.reshape(-1, rec["d"])
            sd = np.sqrt((ours.var(0) + theirs.var(0)) / 2)
            apart = np.abs(ours.mean(0) - theirs.mean(0)) / sd
            rec["means_apart_in_sd"] = {"max": float(apart.max()), "median": float(np.median(apart))}
            print(f"  from the start: {rec['from_the_start']}; means apart (sd) max {apart.max():.3f}", flush=True)
        rec["loadavg_after"] = os.getloadavg()
        doc["fits"].append(rec)
        a.out.parent.mkdir(parents=True, exist_ok=True)
        a.out.write_text(json.dumps(doc, indent=1))
    plot(doc, a.out.with_suffix(".png"))


def force_retry() -> None:
    """Mark each run at the library's first target acceptance that has no divergent transition
    as having one (its last draw of chain 0), so that the backend samples again."""
    from synthinfer.napsu import nuts

    original = nuts.nuts_sample

    def marked(*args, **kwargs):
        res = original(*args, **kwargs)
        if kwargs.get("resume") is None and kwargs.get("target_accept") == nuts.TARGET_ACCEPT \
                and not res.diverging.any():
            res.diverging[0, -1] = True
        return res

    nuts.nuts_sample = marked


def plot(doc: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fits = [f for f in doc["fits"] if "from_the_start" in f]
    if not fits:
        return
    x = np.arange(len(fits))
    fig, (ax, bx) = plt.subplots(1, 2, figsize=(10, 3.8))
    for k, (key, label) in enumerate((("resumed", "going on (warmup: final window)"),
                                      ("from_the_start", "from the start (whole warmup)"))):
        warm = np.array([f[key]["gradient_evaluations_warmup"] for f in fits]) / 1e3
        total = np.array([f[key]["gradient_evaluations"] for f in fits]) / 1e3
        ax.bar(x + (k - 0.5) * 0.38, total - warm, 0.38, bottom=warm, label=f"{label}: sampling", alpha=0.8)
        ax.bar(x + (k - 0.5) * 0.38, warm, 0.38, label=f"{label}: warmup", hatch="//", alpha=0.6)
    marked = " (marked)" if "--force-retry" in doc["command"] else ""  # a run without any marked as having one
    ax.set_xticks(x, [f"seed {f['seed']}\n{f['earlier_runs'][-1]['divergences']} div. at 0.8{marked}" for f in fits])
    ax.set_ylabel("gradients of the run at 0.95 (thousands)")
    ax.legend(fontsize=7, loc="lower right")
    ax.set_title(f"NUTS again at 0.95 after divergences (Adult, d = {fits[0]['d']})", fontsize=9)
    bx.bar(x - 0.2, [f["means_apart_in_sd"]["max"] for f in fits], 0.4, label="largest over parameters")
    bx.bar(x + 0.2, [f["means_apart_in_sd"]["median"] for f in fits], 0.4, label="median")
    bx.set_xticks(x, [f"seed {f['seed']}" for f in fits])
    bx.set_ylabel("posterior means apart (posterior sd)")
    bx.legend(fontsize=7)
    bx.set_title("the two runs' posteriors", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


if __name__ == "__main__":
    main()
