"""Framingham study of NAPSU-MQ with every default an analyst and a data holder get.

The Framingham heart study teaching table (n = 4,240; ``synthinfer.datasets.load_framingham``):
the outcome ``TenYearCHD`` and five covariates without missing values, ``male``,
``currentSmoker``, ``prevalentHyp``, ``diabetes`` (binary) and ``age`` in 4 equal-width bins over
the public range [32, 72). The data holder releases every 2-way marginal of the 6 columns
(15 marginals) with ``NapsuMQ``'s defaults (interaction prior, ``inference="auto"``, delta
n^-2), m = 100 datasets of n_syn = n. The analyst runs ``Release``-style defaults:
``synthinfer.analysis.analyze(datasets, FORMULA, "logit", n=n)`` (the batched fit, separation
handled by the penalty remedy, Rubin's rules for synthetic data with the T floor), and the
same logit on the real discretised table (statsmodels) is the truth. Per coefficient: whether
the 95% and 50% intervals cover the truth, and the width ratio of the synthetic 95% interval
to the real one. Results are rewritten after every fit.

    PYTHONPATH=src python benchmarks/napsu/framingham_coverage.py --repeats 20 --epsilons 1,0.5
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import statsmodels.formula.api as smf

from synthinfer.analysis import analyze
from synthinfer.data import Column, Domain, binned_column
from synthinfer.datasets import load_framingham
from synthinfer.errors import ConvergenceWarning
from synthinfer.generate import NapsuMQ

BINARY = ["TenYearCHD", "male", "currentSmoker", "prevalentHyp", "diabetes"]
COLUMNS = [*BINARY, "age"]
FORMULA = "TenYearCHD ~ C(male) + C(age) + C(currentSmoker) + C(prevalentHyp) + C(diabetes)"
AGE = binned_column("age", bounds=(32, 72), bins=4)  # public range of the study's ages (32-70)
LEVELS = (0.5, 0.95)


def table() -> tuple[pd.DataFrame, Domain]:
    """The discretised table and its public Domain (no bound or category read from the data)."""
    raw = load_framingham().data
    data = pd.DataFrame({c: raw[c].astype(int).astype(str) for c in BINARY})
    data["age"] = pd.Categorical.from_codes(AGE.binning.codes(raw["age"].to_numpy(float)), AGE.categories)
    domain = Domain([*(Column(c, ("0", "1")) for c in BINARY), AGE])
    return data, domain


def numeric_outcome(frame: pd.DataFrame) -> pd.DataFrame:
    return frame.assign(TenYearCHD=(frame["TenYearCHD"].astype(str) == "1").astype(float))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=20)
    ap.add_argument("--start", type=int, default=0)
    ap.add_argument("--epsilons", default="1,0.5")
    ap.add_argument("--m", type=int, default=100)
    ap.add_argument("--out", default=str(Path(__file__).parent / "results" / "framingham_coverage.json"))
    a = ap.parse_args()
    code = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    data, domain = table()
    n = len(data)
    real = smf.logit(FORMULA, numeric_outcome(data)).fit(disp=0)
    names = list(real.params.index)
    real_ci = real.conf_int(0.05)
    real_width = (real_ci[1] - real_ci[0]).to_numpy()
    marginals = [(x, y) for i, x in enumerate(COLUMNS) for y in COLUMNS[i + 1:]]
    epsilons = sorted((float(e) for e in a.epsilons.split(",")), reverse=True)
    records = json.loads(Path(a.out).read_text())["records"] if Path(a.out).exists() else []
    done = {(r["repeat"], r["epsilon"]) for r in records}
    warnings.simplefilter("ignore", ConvergenceWarning)
    t_start = time.time()
    for r in range(a.start, a.start + a.repeats):
        for eps in epsilons:
            if (r, eps) in done:
                continue
            t0, c0 = time.time(), time.process_time()
            gen = NapsuMQ(marginals, epsilon=eps, seed=np.random.default_rng([r, int(eps * 10)])).fit(data, domain)
            t_fit = time.time() - t0
            frames = [numeric_outcome(f) for f in gen.generate(a.m, seed=np.random.default_rng([r, int(eps * 10), 1]))]
            res = analyze(frames, FORMULA, "logit", n=n, progress=False)
            est = res.params.reindex(names).to_numpy()
            cover, width = {}, {}
            for lev in LEVELS:
                ci = res.conf_int(1 - lev).reindex(names)
                lo, hi = ci.iloc[:, 0].to_numpy(), ci.iloc[:, 1].to_numpy()
                cover[str(lev)] = ((lo <= real.params.to_numpy()) & (real.params.to_numpy() <= hi)).astype(float).tolist()
                if lev == 0.95:
                    width = ((hi - lo) / real_width).tolist()
            records.append({
                "repeat": r, "epsilon": eps, "coverage": cover, "width_ratio_95": width, "estimate": est.tolist(),
                "n_separated": res.n_separated, "m_used": res.m, "d": int(gen.network_.dimension),
                "sampler": gen.diagnostics_.get("auto", {}).get("sampler"),
                "rhat_max": gen.diagnostics_.get("nuts", {}).get("rhat_max"),
                "fit_seconds": t_fit, "total_seconds": time.time() - t0, "cpu_seconds": time.process_time() - c0,
                "code": code,
            })
            payload = {
                "command": "PYTHONPATH=src python benchmarks/napsu/framingham_coverage.py "
                           f"--repeats {a.repeats} --epsilons {a.epsilons}",
                "settings": {"n": n, "m": a.m, "columns": COLUMNS, "marginals": "all 2-way", "formula": FORMULA,
                             "epsilons": epsilons, "delta": "n^-2 (NapsuMQ default)", "levels": list(LEVELS),
                             "generator": "NapsuMQ defaults", "analysis": "synthinfer.analysis.analyze defaults"},
                "real": {"names": names, "estimate": real.params.tolist(), "se": real.bse.tolist()},
                "summary": summarise(records, names), "records": records,
                "elapsed_s": time.time() - t_start, "loadavg": os.getloadavg(),
            }
            tmp = Path(a.out + ".tmp")
            tmp.write_text(json.dumps(payload, indent=1))
            os.replace(tmp, a.out)
            print(f"repeat {r} eps {eps}: d {records[-1]['d']}, {records[-1]['sampler']}, fit {t_fit:.0f} s, "
                  f"total {time.time() - t0:.0f} s, separated {res.n_separated}", flush=True)


def summarise(records: list[dict], names: list[str]) -> dict:
    out = {}
    for eps in sorted({r["epsilon"] for r in records}, reverse=True):
        rs = [r for r in records if r["epsilon"] == eps]
        c95 = np.array([r["coverage"]["0.95"] for r in rs])
        c50 = np.array([r["coverage"]["0.5"] for r in rs])
        w = np.array([r["width_ratio_95"] for r in rs])
        out[str(eps)] = {
            "repeats": len(rs), "coverage_95": float(c95.mean()), "coverage_50": float(c50.mean()),
            "coverage_95_by_coefficient": dict(zip(names, c95.mean(0).tolist())),
            "median_width_ratio_95": float(np.median(w)),
            "median_width_ratio_95_by_coefficient": dict(zip(names, np.median(w, 0).tolist())),
            "max_width_ratio_95": float(w.max()),
            "datasets_separated": int(sum(r["n_separated"] for r in rs)),
        }
    return out


if __name__ == "__main__":
    main()
