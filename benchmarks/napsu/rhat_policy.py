"""The R-hat check on many parameters: how often converged chains fail it, and what it still catches.

Converged chains are simulated exactly: independent stationary AR(1) series (autocorrelation
``rho``) per chain and quantity, so every chain samples the same distribution and any failure is
a false alarm. Two checks side by side (:mod:`synthinfer.mcmc`): the fixed bound (largest split
R-hat <= 1.01) and the policy (each R-hat <= its limit: 1.01, or what converged chains of its
within-chain autocorrelation reach over this many quantities, :func:`synthinfer.mcmc.rhat_null_limits`).
The ESS part of the policy is left out here (it is unchanged). Then power: one chain moved by
``shift`` standard deviations in 3 of the quantities. Settings: NAPSU-MQ's tied-model default
(4 x 400 draws, d ~ 360), Supplement E's Adult run (4 x 2000, d = 130) and a wide model
(4 x 400, d = 1,400).

    PYTHONPATH=src python benchmarks/napsu/rhat_policy.py --out benchmarks/napsu/results/rhat_policy.json
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

SETTINGS = [(4, 400, 360), (4, 2000, 130), (4, 400, 1400)]
RHOS = [0.0, 0.3, 0.5]
SHIFTS = [0.2, 0.3, 0.4, 0.6]


def _chains(rng: np.random.Generator, chains: int, draws: int, k: int, rho: float) -> np.ndarray:
    x = np.empty((chains, draws, k))
    x[:, 0] = rng.standard_normal((chains, k))
    e = rng.standard_normal((chains, draws, k)) * np.sqrt(1 - rho**2)
    for t in range(1, draws):
        x[:, t] = rho * x[:, t - 1] + e[:, t]
    return x


def _check(x: np.ndarray) -> tuple[bool, bool, float, float]:
    """(fixed bound fails, policy fails, largest R-hat, largest limit)."""
    from synthinfer.mcmc import convergence_diagnostics, import_arviz

    out = convergence_diagnostics(import_arviz().from_dict(posterior={"x": x}), ess_per_chain=0.0, warn=False)
    return out["rhat_max"] > 1.01, not out["ok"], out["rhat_max"], out["rhat_limit_max"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--replicates", type=int, default=40)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", type=Path, default=Path(__file__).resolve().parent / "results" / "rhat_policy.json")
    a = ap.parse_args()
    warnings.simplefilter("ignore")
    rng = np.random.default_rng(a.seed)
    res: dict = {"command": " ".join(["python", "benchmarks/napsu/rhat_policy.py", *sys.argv[1:]]),
                 "replicates": a.replicates, "loadavg_start": os.getloadavg(), "null": [], "power": []}
    t0, c0 = time.perf_counter(), time.process_time()
    for chains, draws, k in SETTINGS:
        for rho in RHOS:
            runs = [_check(_chains(rng, chains, draws, k, rho)) for _ in range(a.replicates)]
            row = {"chains": chains, "draws": draws, "quantities": k, "rho": rho,
                   "false_alarm_fixed": float(np.mean([r[0] for r in runs])),
                   "false_alarm_policy": float(np.mean([r[1] for r in runs])),
                   "largest_rhat_median": float(np.median([r[2] for r in runs])),
                   "limit_median": float(np.median([r[3] for r in runs]))}
            res["null"].append(row)
            print(json.dumps(row), flush=True)
    chains, draws, k = SETTINGS[0]
    for shift in SHIFTS:
        runs = []
        for _ in range(a.replicates):
            x = _chains(rng, chains, draws, k, 0.3)
            x[-1, :, :3] += shift
            runs.append(_check(x))
        row = {"chains": chains, "draws": draws, "quantities": k, "rho": 0.3, "shift_sd": shift,
               "flagged_fixed": float(np.mean([r[0] for r in runs])),
               "flagged_policy": float(np.mean([r[1] for r in runs]))}
        res["power"].append(row)
        print(json.dumps(row), flush=True)
    res.update(wall_s=time.perf_counter() - t0, cpu_s=time.process_time() - c0, loadavg_end=os.getloadavg())
    a.out.write_text(json.dumps(res, indent=1))
    plot(res, a.out.with_suffix(".png"))


def plot(res: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax, bx) = plt.subplots(1, 2, figsize=(11, 4))
    labels = [f"{r['chains']}x{r['draws']}, d={r['quantities']}\nrho={r['rho']}" for r in res["null"]]
    xs = np.arange(len(labels))
    ax.bar(xs - 0.2, [r["false_alarm_fixed"] for r in res["null"]], 0.4, label="max R-hat <= 1.01")
    ax.bar(xs + 0.2, [r["false_alarm_policy"] for r in res["null"]], 0.4, label="R-hat <= its limit (policy)")
    ax.axhline(0.01, color="k", lw=0.8, ls=":")
    ax.set_xticks(xs, labels, fontsize=6, rotation=60)
    ax.set_ylabel("share of converged runs flagged")
    ax.set_title("false alarms (chains all converged)")
    ax.legend(fontsize=7)
    shifts = [r["shift_sd"] for r in res["power"]]
    bx.plot(shifts, [r["flagged_fixed"] for r in res["power"]], "o-", label="max R-hat <= 1.01")
    bx.plot(shifts, [r["flagged_policy"] for r in res["power"]], "s-", label="policy")
    p0 = res["power"][0]
    bx.set_xlabel(f"one chain moved by (sd), 3 of {p0['quantities']} quantities")
    bx.set_ylabel("share flagged")
    bx.set_title(f"detection, {p0['chains']} x {p0['draws']} draws, rho = {p0['rho']}")
    bx.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


if __name__ == "__main__":
    main()
