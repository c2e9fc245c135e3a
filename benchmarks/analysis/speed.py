"""Wall time of analyze()'s statsmodels path (``fast=False``) on Adult-sized data: sequential
vs worker processes, and the penalised-bootstrap option (Section 5.2) per dataset.

Stand-in "synthetic" datasets are bootstrap resamples of the discretised Adult table (46,043
rows; the analysis is the paper's logistic regression of income on age, race and sex, with age
at its bin midpoints as in Supplement F). Only the timings matter here, not the estimates.

Writes results/speed.json (or ``--out FILE``).

    PYTHONPATH=src python benchmarks/analysis/speed.py
"""

from __future__ import annotations

import argparse
import json
import os
import time
import warnings
from pathlib import Path

import numpy as np

from synthinfer.analysis import analyze
from synthinfer.datasets import load_adult

OUT = Path(__file__).parent / "results"
FORMULA = "income ~ age + C(race) + C(sex)"


def main(out: Path = OUT / "speed.json", m: int = 8) -> None:
    ds = load_adult(paper_subset=True)
    data = ds.data.copy()
    data["age"] = ds.domain.midpoints("age")[data["age"].cat.codes.to_numpy()]
    rng = np.random.default_rng(0)
    datasets = [data.iloc[rng.integers(0, len(data), len(data))].reset_index(drop=True) for _ in range(m)]
    result = {"rows_per_dataset": len(data), "m": m, "formula": FORMULA, "cpu_count": os.cpu_count()}
    warnings.simplefilter("ignore")
    for n_jobs in (1, 2):
        t = time.perf_counter()
        res = analyze(datasets, FORMULA, n=len(data), n_jobs=n_jobs, fast=False, progress=False)
        result[f"seconds_n_jobs_{n_jobs}"] = time.perf_counter() - t
        result[f"mean_fit_seconds_n_jobs_{n_jobs}"] = float(np.mean([r.seconds for r in res.records]))
    t = time.perf_counter()
    analyze(datasets[:2], FORMULA, n=len(data), penalty=1e-5, n_bootstrap=10, seed=0, n_jobs=1, progress=False)
    result["seconds_penalised_bootstrap10_per_dataset"] = (time.perf_counter() - t) / 2
    result["loadavg"] = os.getloadavg()
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2))
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", type=Path, default=OUT / "speed.json")
    main(ap.parse_args().out)
