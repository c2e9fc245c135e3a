r"""Counting marginals from files: one DuckDB scan for all marginals, one scan per marginal, pandas.

The counting pass is the only step of a NAPSU-MQ fit that touches the private rows, so its
speed and memory decide what table sizes a data holder can serve. A table of ``--rows`` rows is
made by resampling the paper's Adult rows (the 10 columns of Räisä et al. 2023, Section 5.2,
age and hours-per-week as numbers on the paper's public buckets) and written once as CSV and as
Parquet under ``--workdir``. Then, each method in a fresh process (its peak RSS is its own), the
paper's 10 marginals are counted:

* ``one-scan``: :meth:`synthinfer.data.QuerySet.count_file`, every marginal in one query
  (``GROUP BY GROUPING SETS``, validation and missing-value checks in the same pass);
* ``per-marginal``: :func:`synthinfer.data.count_file` once per marginal (one scan each);
* ``pandas``: ``read_csv`` / ``read_parquet`` of the whole table, then ``QuerySet.count``;
* ``spark``: :class:`synthinfer.data.spark.SparkCounter` on Spark's reader in local mode
  (``local[*]``), the same checks and one query for all marginals; its time excludes starting
  the session (reported apart as ``session_s``); its RSS is the Python driver's only (the JVM
  is a child process).

Recorded per (format, method): wall and process CPU seconds (minimum of ``--repeats``), rows per
second of wall time, the child's peak RSS, and whether its counts equal the one-scan counts.
Machine facts: cores, load average before and after.

    PYTHONPATH=src python benchmarks/scale/count_speed.py --rows 5000000 [--repeats 2] \
        [--workdir /tmp/synthinfer-count] [--out benchmarks/scale/results/count_speed.json]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
OUT = HERE / "results" / "count_speed.json"
METHODS = ("one-scan", "per-marginal", "pandas", "spark")


def make_table(rows: int, workdir: Path) -> dict[str, Path]:
    from synthinfer.datasets import load_adult

    paper = load_adult(paper_subset=True)
    raw = load_adult().data[list(paper.domain.names)].dropna().reset_index(drop=True)
    df = paper.data.astype(str)
    for c in ("age", "hours-per-week"):
        df[c] = raw[c].astype(int)
    paths = {"csv": workdir / f"adult_{rows}.csv", "parquet": workdir / f"adult_{rows}.parquet"}
    if all(p.exists() for p in paths.values()):
        return paths
    workdir.mkdir(parents=True, exist_ok=True)
    idx = np.random.default_rng(0).integers(0, len(df), rows)
    big = df.iloc[idx].reset_index(drop=True)
    big.to_csv(paths["csv"], index=False)
    big.to_parquet(paths["parquet"], row_group_size=1_000_000)
    return paths


def worker(method: str, path: str, repeats: int) -> dict:
    import pandas as pd

    from synthinfer.data import QuerySet, count_file
    from synthinfer.data.marginals import read_csv
    from synthinfer.datasets import ADULT_PAPER_MARGINALS, load_adult

    domain = load_adult(paper_subset=True).domain
    qs = QuerySet(domain, ADULT_PAPER_MARGINALS)

    if method == "spark":
        from synthinfer.data.spark import SparkCounter, read_spark, spark_session

        t = time.perf_counter()
        spark_session()
        session_s = time.perf_counter() - t

    def run():
        if method == "spark":
            counter = SparkCounter(read_spark(path), domain)
            counter.prefetch([m.columns for m in qs.marginals])
            return np.concatenate([counter.count(m.columns) for m in qs.marginals])
        if method == "one-scan":
            return qs.count_file(path)
        if method == "per-marginal":
            return np.concatenate([count_file(path, domain, m.columns) for m in qs.marginals])
        df = read_csv(path) if path.endswith(".csv") else pd.read_parquet(path)
        return qs.count(df)

    best = None
    for _ in range(repeats):
        t, c = time.perf_counter(), time.process_time()
        counts = run()
        r = (time.perf_counter() - t, time.process_time() - c)
        best = r if best is None or r[0] < best[0] else best
    out = {"wall_s": best[0], "cpu_s": best[1], "counts": counts.tolist(),
           "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}
    if method == "spark":
        out["session_s"] = session_s
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=5_000_000)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--workdir", type=Path, default=Path("/tmp/synthinfer-count"))
    ap.add_argument("--out", type=Path, default=OUT)
    ap.add_argument("--worker", nargs=2, help=argparse.SUPPRESS)
    ap.add_argument("--make-table", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.worker:
        print(json.dumps(worker(a.worker[0], a.worker[1], a.repeats)))
        return
    if a.make_table:
        make_table(a.rows, a.workdir)
        return
    # the table is made in a child process: Linux keeps a process's peak RSS across fork and
    # exec, so a parent that had held the table would inflate every worker's figure
    subprocess.run([sys.executable, __file__, "--make-table", "--rows", str(a.rows), "--workdir", str(a.workdir)],
                   check=True, env=os.environ)
    paths = make_table(a.rows, a.workdir)  # exists now: only the paths
    doc = {"command": " ".join(["python", "benchmarks/scale/count_speed.py", *sys.argv[1:]]), "rows": a.rows,
           "cores": os.cpu_count(), "loadavg_before": os.getloadavg(), "results": []}
    for fmt, path in paths.items():
        reference = None
        for method in METHODS:
            out = subprocess.run([sys.executable, __file__, "--worker", method, str(path), "--repeats", str(a.repeats)],
                                 capture_output=True, text=True, check=True, env=os.environ)
            r = json.loads(out.stdout.strip().splitlines()[-1])
            counts = np.asarray(r.pop("counts"))
            reference = counts if reference is None else reference
            r |= {"format": fmt, "method": method, "rows_per_s": a.rows / r["wall_s"],
                  "counts_equal_one_scan": bool(np.array_equal(counts, reference)), "file_mb": path.stat().st_size / 2**20}
            doc["results"].append(r)
            print(f"{fmt:8s} {method:12s} {r['wall_s']:7.2f} s wall {r['cpu_s']:7.2f} s CPU "
                  f"{r['rows_per_s'] / 1e6:5.2f} M rows/s  peak RSS {r['peak_rss_mb']:6.0f} MB  "
                  f"equal {r['counts_equal_one_scan']}", flush=True)
    doc["loadavg_after"] = os.getloadavg()
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_text(json.dumps(doc, indent=1))
    plot(doc, a.out.with_suffix(".png"))


def plot(doc: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(10, 3.8))
    fmts = list(dict.fromkeys(r["format"] for r in doc["results"]))
    x = np.arange(len(fmts))
    for i, m in enumerate(METHODS):
        rs = [next(r for r in doc["results"] if r["format"] == f and r["method"] == m) for f in fmts]
        axes[0].bar(x + (i - 1.5) * 0.2, [r["rows_per_s"] / 1e6 for r in rs], 0.2, label=m)
        axes[1].bar(x + (i - 1.5) * 0.2, [r["peak_rss_mb"] for r in rs], 0.2, label=m)
    axes[0].set_ylabel("million rows per second (wall)")
    axes[1].set_ylabel("peak RSS (MB)")
    for ax in axes:
        ax.set_xticks(x, fmts)
        ax.legend(fontsize=8)
    fig.suptitle(f"Counting the paper's 10 Adult marginals from a {doc['rows']:,}-row file "
                 f"({doc['cores']} cores, load {doc['loadavg_before'][0]:.1f})", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


if __name__ == "__main__":
    main()
