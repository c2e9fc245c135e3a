r"""``synthinfer generate`` on a 50-million-row Parquet file: the whole job's time and peak memory.

The paper's 10 Adult columns (Räisä et al. 2023, Section 5.2; age and hours as numbers on the
paper's public buckets), the 46,043 rows repeated in random order to ``--rows`` rows, written
by DuckDB (no pandas copy of the table). Then, each in its own process under ``/usr/bin/time``:

* ``count``: the counting pass alone, :class:`synthinfer.data.counting.FileCounter` (one scan
  checking every column) and the paper's 10 marginals (one more scan);
* ``generate``: the CLI's whole job, ``synthinfer generate FILE --domain ... --marginals ...
  (the paper's 10) --inference laplace --m M --n-syn N``: counting, fit, and a streamed release.

Recorded: wall seconds, user + system CPU seconds and peak RSS (``/usr/bin/time -v``; for
``generate`` the largest process), rows per second of the counting pass.

    PYTHONPATH=src python benchmarks/scale/generate_50m.py --rows 50000000 [--m 5] [--n-syn 1000000] \
        [--workdir /tmp/synthinfer-50m] [--out benchmarks/scale/results/generate_50m.json]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
OUT = HERE / "results" / "generate_50m.json"


def make_table(rows: int, workdir: Path) -> tuple[Path, Path]:
    import duckdb

    from synthinfer.datasets import load_adult

    path, domain = workdir / f"adult_{rows}.parquet", workdir / "domain.json"
    paper = load_adult(paper_subset=True)
    paper.domain.to_json(domain)
    if path.exists():
        return path, domain
    workdir.mkdir(parents=True, exist_ok=True)
    raw = load_adult().data[list(paper.domain.names)].dropna().reset_index(drop=True)
    base = paper.data.astype(str)
    for c in ("age", "hours-per-week"):
        base[c] = raw[c].astype(int)
    con = duckdb.connect()
    con.register("base", base)
    reps = -(-rows // len(base))
    con.execute(f"COPY (SELECT b.* FROM base b, range({reps}) r ORDER BY hash(r.range, b.age, random()) "
                f"LIMIT {rows}) TO '{path}' (FORMAT PARQUET, ROW_GROUP_SIZE 1000000)")
    return path, domain


def timed(cmd: list[str]) -> dict:
    t = time.perf_counter()
    res = subprocess.run(["/usr/bin/time", "-v", *cmd], capture_output=True, text=True, env=os.environ)
    wall = time.perf_counter() - t
    if res.returncode:
        raise RuntimeError(res.stderr[-2000:])
    peak = int(re.search(r"Maximum resident set size \(kbytes\): (\d+)", res.stderr).group(1)) / 1024
    cpu = sum(float(re.search(rf"{k} time \(seconds\): ([\d.]+)", res.stderr).group(1)) for k in ("User", "System"))
    return {"wall_s": wall, "cpu_s": cpu, "peak_rss_mb": peak, "stdout_tail": res.stdout[-600:]}


COUNT = """
import sys, time
from synthinfer.data import Domain
from synthinfer.data.counting import FileCounter
from synthinfer.datasets import ADULT_PAPER_MARGINALS
t = time.perf_counter()
c = FileCounter(sys.argv[1], Domain.from_json(sys.argv[2]))
c.prefetch(ADULT_PAPER_MARGINALS)
print("counted", c.n, time.perf_counter() - t)
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=50_000_000)
    ap.add_argument("--m", type=int, default=5)
    ap.add_argument("--n-syn", type=int, default=1_000_000)
    ap.add_argument("--workdir", type=Path, default=Path("/tmp/synthinfer-50m"))
    ap.add_argument("--out", type=Path, default=OUT)
    a = ap.parse_args()
    t = time.perf_counter()
    path, domain = make_table(a.rows, a.workdir)
    doc = {"command": " ".join(["python", "benchmarks/scale/generate_50m.py", *sys.argv[1:]]), "rows": a.rows,
           "file_mb": path.stat().st_size / 2**20, "make_table_s": time.perf_counter() - t, "cores": os.cpu_count(),
           "loadavg_before": os.getloadavg()}
    count = timed([sys.executable, "-c", COUNT, str(path), str(domain)])
    count["rows_per_s"] = a.rows / float(count["stdout_tail"].split()[-1])
    doc["count"] = count
    from synthinfer.datasets import ADULT_PAPER_MARGINALS

    out = a.workdir / "release"
    shutil.rmtree(out, ignore_errors=True)
    cli = [str(Path(sys.executable).parent / "synthinfer"), "generate", str(path), "--domain", str(domain),
           "--inference", "laplace", "--m", str(a.m), "--n-syn", str(a.n_syn), "--out", str(out)]
    for m in ADULT_PAPER_MARGINALS:
        cli += ["--marginals", ",".join(m)]
    doc["generate"] = timed(cli) | {"m": a.m, "n_syn": a.n_syn}
    shutil.rmtree(out, ignore_errors=True)
    doc["loadavg_after"] = os.getloadavg()
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_text(json.dumps(doc, indent=1))
    for k in ("count", "generate"):
        r = doc[k]
        print(f"{k:9s} {r['wall_s']:7.1f} s wall {r['cpu_s']:7.1f} s CPU  peak RSS {r['peak_rss_mb']:6.0f} MB"
              + (f"  {r['rows_per_s'] / 1e6:.2f} M rows/s" if "rows_per_s" in r else ""), flush=True)


if __name__ == "__main__":
    main()
