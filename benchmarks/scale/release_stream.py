r"""Writing a large release in bounded memory: ``generate_stream`` against ``generate``.

NAPSU-MQ is fitted once on the paper's Adult model (Räisä et al. 2023, Section 5.2; the 10
marginals, epsilon 1, Laplace, seed 0) and saved; then, each in a fresh process (so its peak
RSS is its own), a release of ``--m`` datasets of ``--n`` rows is written:

* ``stream``: ``write_release(path, gen.generate_stream(m, n, chunk_rows=...), ...)``: each
  dataset drawn and written in chunks (Parquet row groups, checksums while writing);
* ``list``: ``write_release(path, gen.generate(m, n), ...)``: every dataset in memory first
  (skipped when ``--list-max-rows`` is below ``m * n``).

Then, in a fresh process, the analyst's side on the streamed release: ``open_release`` (lazy
for a release of this size: files verified by streaming them through the hash, datasets read
when used) and ``analyze("income ~ C(age) + C(race) + C(sex)", "logit")``, which fits the
datasets about ``GROUP_ROWS`` rows at a time.

Recorded: wall and process CPU seconds, peak RSS, the release's size on disk, rows per second.

    PYTHONPATH=src python benchmarks/scale/release_stream.py --m 100 --n 1000000 [--chunk-rows 1000000] \
        [--workdir /tmp/synthinfer-release] [--out benchmarks/scale/results/release_stream.json]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
OUT = HERE / "results" / "release_stream.json"


def fit(workdir: Path) -> Path:
    import warnings

    from synthinfer.datasets import ADULT_PAPER_MARGINALS, load_adult
    from synthinfer.generate import NapsuMQ

    saved = workdir / "adult.napsu"
    if not saved.exists():
        warnings.simplefilter("ignore")
        d = load_adult(paper_subset=True)
        NapsuMQ(ADULT_PAPER_MARGINALS, epsilon=1.0, inference="laplace", seed=0).fit(d.data, d.domain).save(saved)
    return saved


def worker(method: str, saved: str, m: int, n: int, chunk_rows: int, out: str) -> dict:
    import synthinfer
    from synthinfer.generate import NapsuMQ

    if method == "analyze":
        t, c = time.perf_counter(), time.process_time()
        rel = synthinfer.open_release(out)
        opened = time.perf_counter() - t
        res = rel.analyze("income ~ C(age) + C(race) + C(sex)", model="logit", progress=False)
        return {"wall_s": time.perf_counter() - t, "cpu_s": time.process_time() - c, "open_s": opened,
                "lazy": type(rel.datasets).__name__, "coefficients": len(res.params),
                "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, "release_mb": 0.0}

    gen = NapsuMQ.load(saved)
    t, c = time.perf_counter(), time.process_time()
    datasets = (gen.generate_stream(m, n, seed=1, chunk_rows=chunk_rows) if method == "stream"
                else gen.generate(m, n, seed=1))
    path = synthinfer.write_release(out, datasets, record=gen.release_record(), skip_private_data_check=True)
    wall, cpu = time.perf_counter() - t, time.process_time() - c
    size = sum(f.stat().st_size for f in Path(path).rglob("*") if f.is_file())
    return {"wall_s": wall, "cpu_s": cpu, "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
            "release_mb": size / 2**20}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--m", type=int, default=100)
    ap.add_argument("--n", type=int, default=1_000_000)
    ap.add_argument("--chunk-rows", type=int, default=1_000_000)
    ap.add_argument("--list-max-rows", type=int, default=30_000_000, help="skip the in-memory path above this m * n")
    ap.add_argument("--workdir", type=Path, default=Path("/tmp/synthinfer-release"))
    ap.add_argument("--out", type=Path, default=OUT)
    ap.add_argument("--worker", nargs=6, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.worker:
        method, saved, m, n, chunk, out = a.worker
        print(json.dumps(worker(method, saved, int(m), int(n), int(chunk), out)))
        return
    a.workdir.mkdir(parents=True, exist_ok=True)
    saved = fit(a.workdir)
    doc = {"command": " ".join(["python", "benchmarks/scale/release_stream.py", *sys.argv[1:]]), "m": a.m, "n": a.n,
           "chunk_rows": a.chunk_rows, "cores": os.cpu_count(), "loadavg_before": os.getloadavg(), "results": []}
    for method in ("stream", "analyze", "list"):
        if method == "list" and a.m * a.n > a.list_max_rows:
            doc["results"].append({"method": method, "skipped": f"m * n = {a.m * a.n:,} > --list-max-rows"})
            continue
        target = a.workdir / f"release_{'stream' if method == 'analyze' else method}"
        if method != "analyze":
            shutil.rmtree(target, ignore_errors=True)
        res = subprocess.run([sys.executable, __file__, "--worker", method, str(saved), str(a.m), str(a.n),
                              str(a.chunk_rows), str(target)], capture_output=True, text=True, check=True)
        r = json.loads(res.stdout.strip().splitlines()[-1]) | {"method": method}
        r["rows_per_s"] = a.m * a.n / r["wall_s"]
        doc["results"].append(r)
        if method != "stream":  # the analyst reads the streamed release next
            shutil.rmtree(target, ignore_errors=True)
        print(f"{method:7s} {r['wall_s']:7.1f} s wall {r['cpu_s']:7.1f} s CPU  peak RSS {r['peak_rss_mb']:7.0f} MB  "
              f"release {r['release_mb']:7.0f} MB  {r['rows_per_s'] / 1e6:5.2f} M rows/s", flush=True)
    doc["loadavg_after"] = os.getloadavg()
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_text(json.dumps(doc, indent=1))


if __name__ == "__main__":
    main()
