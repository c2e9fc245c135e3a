"""The toy pipeline's first run in a new process: NAPSU-MQ on the toy data (n = 2,000, the
3-way marginal, epsilon 1, NUTS 4 x (800 + 2000)) and 100 synthetic datasets, timed from
after the imports, as ``speed.py``'s "with compile" figure, but each run in a fresh process
(so every program compiles and every lazy import loads) and repeated, the minimum taken.

``--compare`` names another checkout's ``src`` (e.g. a git worktree of an earlier commit),
timed in alternation with this one in the same run, for a before/after on the same machine.

    PYTHONPATH=src python benchmarks/napsu/toy_pipeline.py --repeats 3 \\
        --out benchmarks/napsu/results/toy_pipeline.json
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

RUN = """
import json, time, warnings
warnings.simplefilter("ignore")
from synthinfer.datasets import make_toy_logistic
from synthinfer.generate import NapsuMQ
ds = make_toy_logistic(2000, (1.0, 0.0), seed=0)
t, c = time.perf_counter(), time.process_time()
g = NapsuMQ([("x1", "x2", "y")], epsilon=1.0, delta=2000**-2.0, inference="nuts", seed=1).fit(ds.data, ds.domain)
g.generate(100, seed=2)
print(json.dumps({"wall_s": time.perf_counter() - t, "cpu_s": time.process_time() - c,
                  "fit_timings": g.diagnostics_["timings"]}))
"""


def run(src: Path) -> dict:
    env = dict(os.environ, PYTHONPATH=str(src))
    out = subprocess.run([sys.executable, "-c", RUN], env=env, capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--compare", type=Path, help="another checkout's src folder, timed in alternation")
    ap.add_argument("--out", type=Path, default=Path(__file__).resolve().parent / "results" / "toy_pipeline.json")
    a = ap.parse_args()
    here = Path(__file__).resolve().parents[2] / "src"
    trees = {"this": here} | ({"compare": a.compare.resolve()} if a.compare else {})
    res: dict = {"loadavg_start": os.getloadavg(), "cpu_count": os.cpu_count(), "runs": {k: [] for k in trees},
                 "src": {k: str(v) for k, v in trees.items()}}
    for _ in range(a.repeats):
        for name, src in trees.items():
            res["runs"][name].append(run(src))
    res["loadavg_end"] = os.getloadavg()
    res["min_wall_s"] = {k: min(r["wall_s"] for r in v) for k, v in res["runs"].items()}
    res["min_cpu_s"] = {k: min(r["cpu_s"] for r in v) for k, v in res["runs"].items()}
    a.out.write_text(json.dumps(res, indent=1))
    print(json.dumps({k: res[k] for k in ("min_wall_s", "min_cpu_s", "loadavg_start", "loadavg_end")}, indent=1))


if __name__ == "__main__":
    main()
