"""NUTS's target acceptance rate on the default fit, paired on the same noisy counts.

The default a user gets on Adult (``NapsuMQ(ANALYSIS, select_extra="aim")``, the library's
sampler, draws, ties and passes) in the population design of ``adult_coverage.py --population
bootstrap`` (each repeat's real data are n rows drawn with replacement from the full table,
truth the table's own logit). In each fit the posterior problem is sampled once per
``--targets`` value (the first is the fit's own, 0.8 the library's), on the same noisy counts and
selected marginals (the DP noise cannot be seeded, so only a paired design compares samplers
rather than noise draws). Per arm: divergences, passes, R-hat, ESS, gradients, seconds and
warnings, and the downstream logit's coverage from m datasets generated with the same seed, as
``adult_coverage.py`` records it; the summary per arm is ``adult_coverage.summarise``'s. With
``--retry`` each later target is tried only where the one before it diverged, and the summary
adds the policy's own arm (``"retry"``: each fit's last arm), which is the library's default
(``RETRY_TARGET_ACCEPT``); each arm itself is one NUTS run at its target.

    PYTHONPATH=src python benchmarks/napsu/target_accept.py --epsilon 0.5 --repeats 10 \\
        --retry --out benchmarks/napsu/results/target_accept_eps0.5.json

Results are rewritten after every repeat; ``--start`` with ``--merge`` continues a run and
``--combine a.json,b.json`` joins runs split over processes. ``--save-diverged DIR`` saves each
fit that diverged (``NapsuMQ.save``: the noisy counts, which cannot be drawn again), so that
``resample_saved.py`` can sample its posterior again offline.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import subprocess
import sys
import time
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from adult_coverage import ANALYSIS, analyse, logit, summarise  # noqa: E402

from synthinfer.datasets import adult_domain, load_adult  # noqa: E402
from synthinfer.errors import ConvergenceWarning  # noqa: E402
from synthinfer.generate import NapsuMQ  # noqa: E402
from synthinfer.napsu.backends import NUTSBackend, get_backend  # noqa: E402
from synthinfer.napsu.estimator import RETRY_TARGET_ACCEPT  # noqa: E402
from synthinfer.napsu.nuts import TARGET_ACCEPT  # noqa: E402


class PairedNUTS(NUTSBackend):
    """NUTS at each target acceptance rate on the same problem; returns the first's result and
    keeps every arm's (result, wall seconds, CPU seconds, warnings) in ``arms``. With
    ``retry=True`` an arm runs only where the one before it ended with divergent transitions
    (the policy "sample again with smaller steps when NUTS diverged")."""

    def __init__(self, targets: list[float], seed: int, retry: bool):
        self.targets, self.seed, self.retry, self.arms = targets, seed, retry, {}

    def run(self, problem, settings, *, rng, progress, spare_core):
        self.arms = {}
        for i, target in enumerate(self.targets):
            if i and self.retry and not self.arms[self.targets[i - 1]][0].diagnostics["nuts"]["divergences"]:
                break
            t, c = time.perf_counter(), time.process_time()
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always", ConvergenceWarning)
                # one run per arm: the library's own retry is what the arms together measure
                res = super().run(problem, dataclasses.replace(settings, target_accept=target, retry_target_accept=()),
                                  rng=rng if i == 0 else np.random.default_rng([self.seed, i]),
                                  progress=progress, spare_core=spare_core if i == 0 else (lambda: None))
            self.arms[target] = (res, time.perf_counter() - t, time.process_time() - c,
                                 [str(w.message) for w in caught if issubclass(w.category, ConvergenceWarning)])
        return self.arms[self.targets[0]][0]


def arm_record(res, wall: float, cpu: float, caught: list[str]) -> dict:
    nuts = res.diagnostics["nuts"]
    return {"divergences": nuts["divergences"], "passes": nuts["passes"], "rhat_max": nuts["rhat_max"],
            "ess_bulk_min": nuts["ess_bulk_min"], "gradient_evaluations": nuts["gradient_evaluations"],
            "gradient_evaluations_per_draw": nuts["gradient_evaluations_per_draw"], "step_size": nuts["step_size"],
            "target_accept": nuts["target_accept"], "earlier_runs": nuts["earlier_runs"],
            "sampler_wall_s": wall, "sampler_cpu_s": cpu, "warnings": caught}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--epsilon", type=float, default=0.5)
    ap.add_argument("--repeats", type=int, default=10)
    ap.add_argument("--start", type=int, default=0)
    ap.add_argument("--targets", default=",".join(str(t) for t in (TARGET_ACCEPT, *RETRY_TARGET_ACCEPT)),
                    help="comma-separated target acceptance rates; the first is the fit's (default: the library's "
                         "rate and its retry's)")
    ap.add_argument("--retry", action="store_true", help="run a later target only where the one before diverged")
    ap.add_argument("--m", type=int, default=100)
    ap.add_argument("--merge", help="an earlier run's output whose repeats before --start are kept")
    ap.add_argument("--combine", help="comma-separated outputs to join into --out (no fitting)")
    ap.add_argument("--out", required=True)
    ap.add_argument("--save-diverged", type=Path, default=None,
                    help="a folder to save each fit whose NUTS diverged in any arm (NapsuMQ.save, with the "
                         "first arm's draws): its noisy counts, for resample_saved.py")
    a = ap.parse_args()
    targets = [float(t) for t in a.targets.split(",")]
    if a.combine:
        runs = [json.loads(Path(p).read_text()) for p in a.combine.split(",")]
        records = sorted({r["repeat"]: r for run in runs for r in run["records"]}.values(), key=lambda r: r["repeat"])
        notes = list(dict.fromkeys(r["note"] for r in runs if r.get("note")))  # each input's, once
        write(a.out, runs[0]["settings"], records, runs[0]["real"]["estimate"], [c for r in runs for c in r["command"]],
              note=" ".join(notes) or None)
        return
    code = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    warnings.simplefilter("ignore", ConvergenceWarning)
    population, domain = load_adult(categorical=True).data, adult_domain(derived=True)
    n = len(population)
    truth, _ = logit(population, domain)
    records = [r for r in json.loads(Path(a.merge).read_text())["records"] if r["repeat"] < a.start] if a.merge else []
    eps = a.epsilon
    settings = {"epsilon": eps, "delta": n**-2.0, "n": n, "m": a.m, "targets": targets, "marginals": ANALYSIS,
                "selection": "aim", "population": "bootstrap", "table": "full", "retry": a.retry}
    auto = get_backend("auto")
    for r in range(a.start, a.start + a.repeats):
        rows = np.random.default_rng([r, 7919]).integers(0, n, size=n)  # adult_coverage.py's samples
        data = population.iloc[rows].reset_index(drop=True)
        real_q, real_v = logit(data, domain)
        paired = auto._nuts = PairedNUTS(targets, seed=r, retry=a.retry)
        t0, c0 = time.time(), time.process_time()
        gen = NapsuMQ(ANALYSIS, epsilon=eps, delta=n**-2.0, select_extra="aim",
                      seed=np.random.default_rng([r, int(eps * 10)])).fit(data, domain)
        fit_wall, fit_cpu = time.time() - t0, time.process_time() - c0
        record = {"repeat": r, "epsilon": eps, "code": code, "d": int(gen.network_.dimension),
                  "marginals": [list(m.columns) for m in gen.marginals_], "fit_wall_s": fit_wall, "fit_cpu_s": fit_cpu,
                  "loadavg": os.getloadavg(), "real_estimate": real_q.tolist(), "real_variance": real_v.tolist(),
                  "arms": {}}
        means = {}
        for target in paired.arms:
            res, wall, cpu, caught = paired.arms[target]
            gen.posterior_ = res.posterior  # generate() draws from the arm's posterior
            theta = np.asarray(res.posterior.posterior["theta"].values).reshape(-1, gen.network_.dimension)
            means[target] = (theta.mean(0), theta.std(0))
            frames = gen.generate(a.m, seed=np.random.default_rng([r, int(eps * 10), 1]))  # the same seed per arm
            record["arms"][str(target)] = {**arm_record(res, wall, cpu, caught),
                                           **analyse(frames, domain, n, truth, real_q, real_v)}
        if a.save_diverged is not None and any(x["divergences"] for x in record["arms"].values()):
            gen.posterior_ = paired.arms[targets[0]][0].posterior
            a.save_diverged.mkdir(parents=True, exist_ok=True)
            gen.save(a.save_diverged / f"eps{eps:g}_repeat{r}.npz")
        m0, s0 = means[targets[0]]
        for target in list(paired.arms)[1:]:  # the arms' posterior means apart, in the first arm's posterior sds
            record["arms"][str(target)]["max_mean_shift_in_sd"] = float(np.max(np.abs(means[target][0] - m0) / s0))
        records.append(record)
        write(a.out, settings, records, truth.tolist(), [" ".join(sys.argv)])
        print(f"repeat {r}: fit {fit_wall:.0f} s; " + "; ".join(
            f"{t}: {x['divergences']} div, {x['passes']} passes, {x['sampler_wall_s']:.0f} s"
            for t, x in record["arms"].items()), flush=True)


def write(out: str, settings: dict, records: list[dict], truth: list[float], commands: list[str],
          note: str | None = None) -> None:
    """The records and, per arm (the fits that ran it; ``"retry"``: each fit's last arm),
    ``adult_coverage.summarise`` of them plus the sampler's record; ``note`` (kept by
    ``--combine``) says what a reader must know about how the records were made."""
    arms = {}
    pick = {str(t): (lambda r, t=str(t): r["arms"].get(t)) for t in settings["targets"]}
    if settings.get("retry"):
        pick["retry"] = lambda r: list(r["arms"].values())[-1]
    for name, arm in pick.items():
        rs = [{"epsilon": r["epsilon"], "real_estimate": r["real_estimate"], "real_variance": r["real_variance"],
               "fit_seconds": arm(r)["sampler_wall_s"], **arm(r)} for r in records if arm(r) is not None]
        if not rs:
            continue
        summary = summarise(rs, np.asarray(truth))[str(settings["epsilon"])]
        summary.update({
            "fits_with_divergences": sum(r["divergences"] > 0 for r in rs),
            "divergences": [r["divergences"] for r in rs], "passes": [r["passes"] for r in rs],
            "gradient_evaluations_total": float(np.sum([r["gradient_evaluations"] for r in rs])),
            "sampler_cpu_s_median": float(np.median([r["sampler_cpu_s"] for r in rs])),
        })
        arms[name] = summary
    payload = {"command": commands, "settings": settings, "real": {"estimate": truth}, "arms": arms, "records": records,
               **({"note": note} if note else {})}
    tmp = Path(out + ".tmp")
    tmp.write_text(json.dumps(payload))
    os.replace(tmp, out)
    plot(payload, Path(out).with_suffix(".png"))


def plot(payload: dict, path: Path) -> None:
    """Coverage by level per arm (the diagonal is calibration) and each fit's sampler CPU time
    per arm, with its divergences."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from adult_coverage import LEVELS

    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4))
    left.plot([0, 1], [0, 1], color="grey", lw=0.8)
    for name, arm in payload["arms"].items():
        left.plot(LEVELS, arm["coverage_by_level"], marker="o", ms=3,
                  label=f"{name}: {arm['repeats']} fits, {arm['fits_with_divergences']} diverged")
    left.set(xlabel="nominal level", ylabel="coverage of the population's coefficients",
             title=f"epsilon {payload['settings']['epsilon']}, population design")
    left.legend(fontsize=8)
    for k, r in enumerate(payload["records"]):
        for j, (name, a) in enumerate(r["arms"].items()):
            right.bar(k + 0.4 * j, a["sampler_cpu_s"], width=0.4, color=f"C{j}", label=name if k == 0 or j else None)
            right.text(k + 0.4 * j, a["sampler_cpu_s"], str(a["divergences"]), ha="center", va="bottom", fontsize=7)
    right.set(xlabel="fit (repeat)", ylabel="sampler CPU s (label: divergences)",
              xticks=range(len(payload["records"])), xticklabels=[r["repeat"] for r in payload["records"]])
    handles, labels = right.get_legend_handles_labels()
    right.legend(dict(zip(labels, handles)).values(), dict(zip(labels, handles)).keys(), fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


if __name__ == "__main__":
    main()
