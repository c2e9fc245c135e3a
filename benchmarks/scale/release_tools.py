r"""The data holder's and analyst's tools on a release of a census-size table: time and memory.

A table of ``--copies`` copies of the bundled Adult table (categorical, 15 columns, 45,222 rows
each) is written once as Parquet (its categorical columns as such) with its Domain, and a NAPSU-MQ release of it (three 2-way
marginals with income, Laplace inference, ``--m`` datasets of the table's size) is made once.
Then each command runs in a fresh process, with the code under test (``src/``) and, with
``--before DIR``, with the ``src`` folder of an earlier checkout, alternating, ``--repeats``
times each:

* ``report``: ``synthinfer report REL --private data.parquet -f FORMULA`` (fidelity to the private
  table, the formula on the real rows beside the release);
* ``weights``: ``synthinfer weights data.parquet REL/data/synthetic_000.parquet --epsilon 1``
  (beta-debiased logistic-regression weights, one per synthetic row);
* ``analyze``: ``synthinfer analyze REL -f FORMULA`` (Rubin's rules over the datasets).

Recorded per (command, code): wall and process CPU seconds (the child's user + system), the
child's own peak RSS (``wait4``), the minimum over the repeats, the exit status; and the machine's cores and load
average before and after. ``--plot`` draws wall time and peak memory side by side.

    PYTHONPATH=src python benchmarks/scale/release_tools.py --copies 24 --repeats 2 \
        --before /tmp/before/src --out benchmarks/scale/results/release_tools.json
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
SRC = HERE.parents[1] / "src"
FORMULA = "income ~ C(age) + C(sex)"
COMMANDS = ("report", "weights", "analyze")


def _make_inputs(workdir: Path, copies: int, m: int) -> tuple[Path, Path, Path]:
    """The table (Parquet), its Domain (JSON) and a release of it under ``workdir``, made once."""
    table, domain_path = workdir / f"adult_x{copies}.parquet", workdir / "domain.json"
    release = workdir / f"rel_x{copies}"
    if release.exists() and table.exists():
        return table, domain_path, release
    import pandas as pd

    from synthinfer.datasets import adult_domain, load_adult
    from synthinfer.napsu import NapsuMQ
    from synthinfer.release import write_release

    data = load_adult(categorical=True).data
    domain = adult_domain(derived=False)
    big = pd.concat([data] * copies, ignore_index=True)
    big.to_parquet(table, index=False)
    domain_path.write_text(domain.to_json())
    gen = NapsuMQ([("age", "income"), ("sex", "income"), ("race", "income")], epsilon=1.0,
                  inference="laplace").fit(big, domain)
    write_release(release, gen.generate(m), record=gen.release_record(), private_data=big, overwrite=True)
    return table, domain_path, release


def _argv(command: str, table: Path, domain: Path, release: Path, out: Path) -> list[str]:
    if command == "report":
        return ["report", str(release), "--private", str(table), "-f", FORMULA, "--out", str(out / "report.html")]
    if command == "weights":
        return ["weights", str(table), str(release / "data" / "synthetic_000.parquet"), "--bounds", str(domain),
                "--out", str(out / "weights.csv"), "--epsilon", "1"]
    return ["analyze", str(release), "-f", FORMULA]


def _run(src: Path, argv: list[str], out: Path) -> dict:
    """One command in a fresh process on the code in ``src``: wall, CPU, peak RSS (that child's
    own, from ``wait4``), exit status."""
    for f in out.glob("*"):
        f.unlink()
    env = dict(os.environ, PYTHONPATH=str(src))
    with open(out / "stderr.txt", "w+") as err:
        t = time.perf_counter()
        proc = subprocess.Popen([sys.executable, "-c", "from synthinfer.cli import app; app()", *argv], env=env,
                                stdout=subprocess.DEVNULL, stderr=err)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - t
        proc.returncode = os.waitstatus_to_exitcode(status)
        err.seek(0)
        lines = err.read().strip().splitlines()
    return {"wall_s": wall, "cpu_s": usage.ru_utime + usage.ru_stime, "peak_rss_mb": usage.ru_maxrss / 1024,
            "returncode": proc.returncode, "error": lines[-1] if proc.returncode and lines else None}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--copies", type=int, default=24, help="copies of the Adult table (24: 1,085,328 rows)")
    ap.add_argument("--m", type=int, default=3, help="datasets in the release")
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--before", type=Path, default=None, help="src folder of an earlier checkout to compare with")
    ap.add_argument("--commands", default=",".join(COMMANDS))
    ap.add_argument("--workdir", type=Path, default=Path("/tmp/synthinfer-release-tools"))
    ap.add_argument("--out", type=Path, default=HERE / "results" / "release_tools.json")
    ap.add_argument("--plot", type=Path, default=None)
    a = ap.parse_args()
    a.workdir.mkdir(parents=True, exist_ok=True)
    load_before = os.getloadavg()
    # the inputs in a process of its own, so that this parent stays small
    subprocess.run([sys.executable, "-c", f"import sys; sys.path.insert(0, {str(HERE)!r}); import release_tools as r; "
                    f"r._make_inputs(__import__('pathlib').Path({str(a.workdir)!r}), {a.copies}, {a.m})"],
                   env=dict(os.environ, PYTHONPATH=str(SRC)), check=True)
    table, domain, release = _make_inputs(a.workdir, a.copies, a.m)
    codes = {"current": SRC} | ({"before": a.before} if a.before else {})
    out = a.workdir / "outputs"
    out.mkdir(exist_ok=True)
    runs: dict[str, dict[str, list[dict]]] = {}
    for command in a.commands.split(","):
        for _ in range(a.repeats):
            for label, src in codes.items():  # alternating, so both see the same machine
                r = _run(src, _argv(command, table, domain, release, out), out)
                runs.setdefault(command, {}).setdefault(label, []).append(r)
                print(command, label, json.dumps(r), flush=True)
    best = {c: {lab: {k: min(r[k] for r in rs) for k in ("wall_s", "cpu_s", "peak_rss_mb")}
                | {"ok": all(r["returncode"] == 0 for r in rs)} for lab, rs in per.items()}
            for c, per in runs.items()}
    result = {"command": " ".join(["python", "benchmarks/scale/release_tools.py", *sys.argv[1:]]),
              "rows": 45_222 * a.copies, "m": a.m, "formula": FORMULA, "nproc": os.cpu_count(),
              "loadavg_before": load_before, "loadavg_after": os.getloadavg(), "best": best, "runs": runs}
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_text(json.dumps(result, indent=1))
    if a.plot:
        _plot(best, a.plot, result["rows"])


def _plot(best: dict, path: Path, rows: int) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    commands = list(best)
    labels = sorted({lab for per in best.values() for lab in per}, reverse=True)
    fig, axes = plt.subplots(1, 2, figsize=(9, 3.4))
    for ax, key, title in ((axes[0], "wall_s", "wall time (s)"), (axes[1], "peak_rss_mb", "peak memory (MB)")):
        for k, lab in enumerate(labels):
            xs = [i + (k - (len(labels) - 1) / 2) * 0.38 for i in range(len(commands))]
            ax.bar(xs, [best[c].get(lab, {}).get(key, 0) for c in commands], width=0.36, label=lab)
        ax.set_xticks(range(len(commands)), commands)
        ax.set_title(title)
    axes[0].legend()
    fig.suptitle(f"release tools on {rows:,} rows (min of repeats, each command a fresh process)")
    fig.tight_layout()
    fig.savefig(path, dpi=120)


if __name__ == "__main__":
    main()
