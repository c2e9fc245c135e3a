"""Running the m fits: in worker processes when that pays, with a rich progress bar."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from synthinfer._system import usable_cores
from synthinfer.analysis.models import FitOptions, FitRecord, ModelSpec, fit_dataset

# Starting loky workers (each imports statsmodels) and shipping the data to them costs seconds,
# more than Adult-sized fits save on a few cores (benchmarks/analysis/results/speed.json). Below
# this many rows in total a loop is used; bootstrapped fits (n_bootstrap refits per dataset)
# reach it sooner.
PARALLEL_MIN_ROWS = 1_000_000


def choose_n_jobs(n_jobs: int | None, datasets: Sequence[pd.DataFrame], opts: FitOptions) -> int:
    """``n_jobs`` as given, or (None) all cores when the work is large enough to pay."""
    cores = usable_cores()
    if n_jobs is not None:
        return cores if n_jobs < 0 else max(1, min(int(n_jobs), len(datasets)))
    work = sum(len(d) for d in datasets) * (1 + (opts.n_bootstrap if opts.penalty is not None else 0))
    if cores < 2 or len(datasets) < 2 or work < PARALLEL_MIN_ROWS:
        return 1
    return min(cores, len(datasets))


def run_fits(
    datasets: Sequence[pd.DataFrame],
    spec: ModelSpec,
    opts: FitOptions,
    weights: Sequence[np.ndarray] | None,
    seeds: Sequence[np.random.SeedSequence],
    n_jobs: int,
    progress: bool,
) -> list[FitRecord]:
    """Fit every dataset; the returned records are in dataset order."""
    tasks = [
        (i, d, spec, opts, None if weights is None else weights[i], seeds[i]) for i, d in enumerate(datasets)
    ]
    columns = (
        TextColumn("[bold]fitting {task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
    )
    records: list[FitRecord] = []
    with Progress(*columns, disable=not progress, transient=False) as bar:
        task = bar.add_task(f"{spec.name} on {len(tasks)} synthetic datasets", total=len(tasks))
        if n_jobs == 1:
            for t in tasks:
                records.append(fit_dataset(*t))
                bar.advance(task)
        else:
            from joblib import Parallel, delayed

            # loky processes sidestep the GIL (statsmodels/patsy work is mostly Python); results
            # arrive as they finish so the bar moves, and are put back in order below.
            run = Parallel(n_jobs=n_jobs, backend="loky", return_as="generator_unordered")
            for rec in run(delayed(fit_dataset)(*t) for t in tasks):
                records.append(rec)
                bar.advance(task)
    return sorted(records, key=lambda r: r.index)
