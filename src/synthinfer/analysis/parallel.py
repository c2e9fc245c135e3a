"""Running the m fits: in worker processes when a measurement says they pay, with a progress bar."""

from __future__ import annotations

import os
from collections.abc import Sequence

import numpy as np
import pandas as pd
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from synthinfer._system import usable_cores
from synthinfer.analysis.models import FitOptions, FitRecord, ModelSpec, fit_dataset

#: Seconds to start loky workers (each imports statsmodels and patsy) and ship them the data;
#: measured on Adult-sized datasets (benchmarks/analysis/results/speed.json).
PROCESS_START_SECONDS = 3.0
#: Processes are used only when they are predicted to save at least this share of the time.
MIN_SAVING = 0.25


def free_cores() -> float:
    """Cores this process could use now: its affinity mask less the load of other processes
    (the 1-minute load average, counting this process as one of its runnable tasks)."""
    cores = usable_cores()
    try:
        load = os.getloadavg()[0]
    except (AttributeError, OSError):  # no load average on this platform
        return float(cores)
    return float(min(cores, max(1.0, cores - max(0.0, load - 1.0))))


def choose_n_jobs(n_jobs: int | None, n_tasks: int, seconds_per_fit: float | None = None) -> int:
    """Worker processes for ``n_tasks`` fits: ``n_jobs`` as given (-1: all usable cores), or
    (None) from a measurement: with one fit timed at ``seconds_per_fit`` and ``p`` free cores,
    processes are used when ``PROCESS_START_SECONDS + T/p`` is below ``(1 - MIN_SAVING) T``,
    T = n_tasks * seconds_per_fit the time of a loop. Without a measurement, a loop."""
    if n_jobs is not None:
        return usable_cores() if n_jobs < 0 else max(1, min(int(n_jobs), n_tasks))
    if seconds_per_fit is None or n_tasks < 2:
        return 1
    p = int(min(free_cores(), n_tasks))
    serial = n_tasks * seconds_per_fit
    if p < 2 or PROCESS_START_SECONDS + serial / p > (1 - MIN_SAVING) * serial:
        return 1
    return p


def run_fits(
    datasets: Sequence[pd.DataFrame],
    spec: ModelSpec,
    opts: FitOptions,
    weights: Sequence[np.ndarray] | None,
    seeds: Sequence[np.random.SeedSequence],
    n_jobs: int | None,
    progress: bool,
    indices: Sequence[int] | None = None,
) -> list[FitRecord]:
    """Fit the datasets at ``indices`` (default all) through :func:`fit_dataset`; the records
    are in dataset order. With ``n_jobs=None`` the first fit runs here and its time decides
    (:func:`choose_n_jobs`) whether the rest go to worker processes."""
    indices = list(range(len(datasets))) if indices is None else list(indices)
    tasks = [(i, datasets[i], spec, opts, None if weights is None else weights[i], seeds[i]) for i in indices]
    columns = (
        TextColumn("[bold]fitting {task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
    )
    records: list[FitRecord] = []
    with Progress(*columns, disable=not progress, transient=False) as bar:
        task = bar.add_task(f"{spec.name} on {len(tasks)} synthetic datasets", total=len(tasks))
        if n_jobs is None and tasks:
            records.append(fit_dataset(*tasks[0]))
            bar.advance(task)
            tasks = tasks[1:]
            jobs = choose_n_jobs(None, len(tasks), records[0].seconds)
        else:
            jobs = choose_n_jobs(n_jobs, len(tasks))
        if jobs == 1:
            for t in tasks:
                records.append(fit_dataset(*t))
                bar.advance(task)
        else:
            from joblib import Parallel, delayed

            # loky processes sidestep the GIL (statsmodels/patsy work is mostly Python); results
            # arrive as they finish so the bar moves, and are put back in order below.
            run = Parallel(n_jobs=jobs, backend="loky", return_as="generator_unordered")
            for rec in run(delayed(fit_dataset)(*t) for t in tasks):
                records.append(rec)
                bar.advance(task)
    return sorted(records, key=lambda r: r.index)
