"""Memory of a long NUTS run, and the cost of running chains in blocks of iterations.

NAPSU-MQ's NUTS runs each chain as calls of one compiled program, each call a block of
iterations lasting about ``synthinfer.napsu.nuts.BLOCK_SECONDS``
(:func:`synthinfer.napsu.nuts.nuts_sample`). This script compares that with running each chain
in a single call (``--mode single``: the program's first block made as long as the chain,
which is how chains ran before blocks), two ways:

* memory: the CLI's default ``generate`` settings (``NapsuMQ`` defaults: NUTS, 4 chains on the
  process's cores, tree depth 12, epsilon 1) with fewer draws, on a synthetic categorical
  table like the survey table where the problem was seen (5 columns of 3-8 categories,
  n = 7,000, each column drawn from the previous one through sparse transition tables, 6
  two-way marginals, d = 119). Each mode runs in a new process that samples its resident
  memory (``VmRSS``) and the C heap in use (glibc's ``mallinfo2``: what the process holds
  now, which RSS hides once freed pages stay mapped) every second, with the times at which
  chains finish;
* speed: the paper's Adult model (``ADULT_PAPER_MARGINALS``, epsilon 1, delta n^-2) after one
  Laplace fit, ``nuts_sample`` in both modes alternately with the same seed. Iteration ``i`` of
  a chain draws from ``fold_in(key, i)`` in both, so the two do exactly the same work (the
  script checks the draws are identical) and any difference in wall or process CPU time is
  the blocks' overhead (plus the machine's noise: the load average is recorded). The cost of
  one call that runs no iteration is timed too.

Results go to ``results/nuts_memory.json`` and ``results/nuts_memory.png``.

    PYTHONPATH=src python benchmarks/napsu/nuts_memory.py [--num-warmup 200 --num-samples 300]
        [--adult-warmup 200 --adult-samples 400 --adult-repeats 2] [--skip-memory] [--skip-adult]
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import subprocess
import sys
import threading
import time
import warnings
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
OUT = HERE / "results" / "nuts_memory.json"
MARGINALS = [("c0", "c1"), ("c1", "c2"), ("c2", "c3"), ("c3", "c4"), ("c0", "c2"), ("c1", "c3")]
SIZES = (3, 5, 8, 4, 6)
MODES = ("single", "blocks")


def survey_like_table(n: int = 7000, seed: int = 0):
    """Five categorical columns, each drawn from the previous one through Dirichlet(0.4) rows
    (sparse: many near-empty cells in the two-way marginals), with their Domain."""
    import pandas as pd

    from synthinfer.data import Domain

    rng = np.random.default_rng(seed)
    cols, prev = {}, None
    for j, k in enumerate(SIZES):
        if prev is None:
            x = rng.choice(k, n, p=rng.dirichlet(np.full(k, 0.7)))
        else:
            rows = rng.dirichlet(np.full(k, 0.4), size=SIZES[j - 1])
            x = np.array([rng.choice(k, p=rows[v]) for v in prev])
        cols[f"c{j}"], prev = x, x
    df = pd.DataFrame({c: [f"v{i}" for i in v] for c, v in cols.items()})
    return df, Domain({c: [f"v{i}" for i in range(k)] for c, k in zip(cols, SIZES)})


class _MallInfo2(ctypes.Structure):
    _fields_ = [(f, ctypes.c_size_t) for f in ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks",
                                                 "fsmblks", "uordblks", "fordblks", "keepcost")]


def _heap_reader():
    """MiB of C heap in use (glibc ``mallinfo2``), or None where it is not available."""
    try:
        libc = ctypes.CDLL("libc.so.6")
        libc.mallinfo2.restype = _MallInfo2
    except (OSError, AttributeError):
        return lambda: None

    def heap() -> float:
        m = libc.mallinfo2()
        return (m.uordblks + m.hblkhd) / 2**20

    return heap


def _rss_mib() -> float:
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) / 1024 for line in f if line.startswith("VmRSS"))


def _single_call_mode() -> None:
    """Each chain as one call of the program (the first block as long as the chain)."""
    from synthinfer.napsu import nuts

    nuts.FIRST_BLOCK = 10**9


def memory_worker(mode: str, warmup: int, samples: int) -> dict:
    from synthinfer.generate import NapsuMQ

    if mode == "single":
        _single_call_mode()
    df, dom = survey_like_table()
    heap = _heap_reader()
    t0 = time.perf_counter()
    series, events, stop = [], [], threading.Event()

    def sample():
        while not stop.is_set():
            series.append((time.perf_counter() - t0, _rss_mib(), heap()))
            stop.wait(1.0)

    finished = [0]

    def progress(stage: str) -> None:
        now = time.perf_counter() - t0
        if not hasattr(stage, "parts"):  # a stage's name
            events.append((now, str(stage)))
        elif sum(p == stage.part_total for p in stage.parts) > finished[0]:
            finished[0] = sum(p == stage.part_total for p in stage.parts)
            events.append((now, f"chains finished: {finished[0]}"))

    threading.Thread(target=sample, daemon=True).start()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        gen = NapsuMQ(MARGINALS, epsilon=1.0, num_warmup=warmup, num_samples=samples, seed=1)
        gen.fit(df, dom, progress=progress)
    stop.set()
    series.append((time.perf_counter() - t0, _rss_mib(), heap()))
    nuts = gen.diagnostics_["nuts"]
    return {
        "mode": mode, "d": int(gen.queries_.dimension), "num_warmup": warmup, "num_samples": samples,
        "chains": int(gen.n_chains), "seconds": time.perf_counter() - t0, "timings": gen.diagnostics_["timings"],
        "gradient_evaluations": nuts["gradient_evaluations"], "rhat_max": nuts["rhat_max"],
        "series": {"t": [s[0] for s in series], "rss_mib": [s[1] for s in series],
                   "heap_mib": [s[2] for s in series]},
        "events": events, "loadavg": os.getloadavg(),
    }


def adult_speed(warmup: int, samples: int, repeats: int) -> dict:
    from synthinfer._jax import float64, jax, single_threaded_blas
    from synthinfer.datasets import ADULT_PAPER_MARGINALS, load_adult
    from synthinfer.generate import NapsuMQ
    from synthinfer.napsu import nuts

    ad = load_adult(paper_subset=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        gen = NapsuMQ(ADULT_PAPER_MARGINALS, epsilon=1.0, delta=len(ad.data) ** -2.0, inference="laplace",
                      seed=1).fit(ad.data, ad.domain)
    net = gen.network_
    first_block = nuts.FIRST_BLOCK
    calls: list[int] = []
    next_block = nuts._next_block

    def counting(size, seconds):
        calls.append(size)
        return next_block(size, seconds)

    def run(mode: str):
        nuts.FIRST_BLOCK = 10**9 if mode == "single" else first_block
        calls.clear()
        w, c = time.perf_counter(), time.process_time()
        with single_threaded_blas():  # as inside NapsuMQ.fit
            res = nuts.nuts_sample(net, gen.noisy_counts_, gen.sigma_dp_, gen.n_, gen.laplace_, n_chains=4,
                                   num_warmup=warmup, num_samples=samples,
                                   dropped_cell_jacobian=net.dropped_cell_log_prob_jacobian,
                                   rng=np.random.default_rng(7))
        return res, time.perf_counter() - w, time.process_time() - c, len(calls)

    nuts._next_block = counting
    try:
        run("blocks")  # compiles the program (both modes use the same one)
        runs, reference = [], None
        for rep in range(repeats):
            for mode in (MODES if rep % 2 == 0 else MODES[::-1]):
                res, wall, cpu, n_calls = run(mode)
                if reference is None:
                    reference = res.draws
                same = bool(np.array_equal(res.draws, reference))
                runs.append({"mode": mode, "wall_s": wall, "cpu_s": cpu, "calls": n_calls,
                             "gradient_evaluations": res.n_grad_evals, "identical_draws": same,
                             "loadavg": os.getloadavg()})
                print(f"adult {mode}: wall {wall:.1f} s, cpu {cpu:.1f} s, {n_calls} calls, "
                      f"{res.n_grad_evals} gradients, identical draws {same}", flush=True)
    finally:
        nuts._next_block = next_block
        nuts.FIRST_BLOCK = first_block
    # the cost of one call that runs no iteration: the blocks' overhead per call
    program = nuts.compile_nuts(net, num_warmup=warmup, num_samples=samples, jump_moves=True).result()
    state = jax.tree.map(lambda a: np.zeros(a.shape, a.dtype), program.out_info)
    data_args = _adult_data(net, gen)
    key = np.zeros(2, np.uint32)
    reps = 200
    with float64():
        t = time.perf_counter()
        for _ in range(reps):
            state = jax.block_until_ready(program(state, key, np.zeros(net.dimension), data_args, np.int32(1),
                                                  np.int32(1), np.float64(0.8)))
        empty_call_ms = 1e3 * (time.perf_counter() - t) / reps
    return {"d": int(net.dimension), "num_warmup": warmup, "num_samples": samples, "chains": 4, "runs": runs,
            "empty_call_ms": empty_call_ms}


def _adult_data(net, gen):
    """The program's data arguments for the Adult fit (shapes are all that matter for timing)."""
    from synthinfer.napsu.jumps import PlateauJumps
    from synthinfer.napsu.likelihood import posterior_args
    from synthinfer.napsu.reparam import OneSidedMap

    d = int(net.dimension)
    return (posterior_args(gen.noisy_counts_, gen.sigma_dp_, gen.n_, gen.prior_sd),
            OneSidedMap(np.zeros(d, bool), np.zeros(d), np.ones(d), np.zeros(d), np.eye(d)).arrays(),
            PlateauJumps.none(d).arrays())


def save(res: dict) -> None:
    OUT.parent.mkdir(parents=True, exist_ok=True)
    res["loadavg_end"] = os.getloadavg()
    tmp = OUT.with_name(OUT.name + ".tmp")
    tmp.write_text(json.dumps(res, indent=1))
    os.replace(tmp, OUT)


def plot(res: dict) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    runs = res.get("memory", {})
    fig, axes = plt.subplots(1, 3, figsize=(16, 4.5), gridspec_kw={"width_ratios": [3, 3, 2]})
    for mode, color in zip(MODES, ("tab:red", "tab:blue")):
        r = runs.get(mode)
        if not r:
            continue
        s = r["series"]
        label = "one call per chain" if mode == "single" else "blocks of iterations"
        axes[0].plot(s["t"], s["rss_mib"], color=color, label=label)
        if any(h is not None for h in s["heap_mib"]):
            axes[1].plot(s["t"], s["heap_mib"], color=color, label=label)
        for t, text in r["events"]:
            if text.startswith("chains finished"):
                for ax in axes[:2]:
                    ax.axvline(t, color=color, lw=0.8, ls=":")
    axes[0].set(xlabel="seconds since fit() started", ylabel="resident memory (MiB)", title="RSS")
    axes[1].set(xlabel="seconds since fit() started", ylabel="MiB in use", title="C heap in use (mallinfo2)")
    for ax in axes[:2]:
        ax.legend(loc="upper left")
    speed = res.get("adult_speed")
    if speed:
        for k, mode in enumerate(MODES):  # per measure, each mode's runs side by side
            rs = [r for r in speed["runs"] if r["mode"] == mode]
            for j, key in enumerate(("wall_s", "cpu_s")):
                xs = [3 * j + 1.2 * k + 0.5 * i for i in range(len(rs))]
                axes[2].bar(xs, [r[key] for r in rs], width=0.45, color=("tab:red", "tab:blue")[k],
                            label=None if j else ("one call per chain" if mode == "single" else "blocks"))
        axes[2].set_xticks([0.85, 3.85], ["wall", "process CPU"])
        axes[2].set(ylabel="seconds (one bar per run)",
                    title=f"Adult (d = {speed['d']}), 4 x ({speed['num_warmup']} + {speed['num_samples']}), "
                          f"same draws;\none call running no iteration: {speed['empty_call_ms']:.2f} ms")
        axes[2].legend(loc="lower right")
    m = runs.get("blocks") or runs.get("single")
    if m:
        fig.suptitle(f"NAPSU-MQ NUTS on a 5-column table (d = {m['d']}), {m['chains']} chains x "
                     f"({m['num_warmup']} + {m['num_samples']}); dotted: a chain finishes")
    fig.tight_layout()
    fig.savefig(OUT.with_suffix(".png"), dpi=110)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--num-warmup", type=int, default=200)
    ap.add_argument("--num-samples", type=int, default=300)
    ap.add_argument("--adult-warmup", type=int, default=200)
    ap.add_argument("--adult-samples", type=int, default=400)
    ap.add_argument("--adult-repeats", type=int, default=2)
    ap.add_argument("--skip-memory", action="store_true")
    ap.add_argument("--skip-adult", action="store_true")
    ap.add_argument("--worker", choices=MODES, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        print(json.dumps(memory_worker(args.worker, args.num_warmup, args.num_samples)))
        return
    res = json.loads(OUT.read_text()) if OUT.exists() else {}
    if not (args.skip_memory and args.skip_adult):  # both skipped: redraw the figure only
        res["command"] = " ".join(["python", "benchmarks/napsu/nuts_memory.py", *sys.argv[1:]])
        res["cpu_count"] = os.cpu_count()
    if not args.skip_memory:
        res["memory"] = {}
        for mode in MODES:
            out = subprocess.run([sys.executable, __file__, "--worker", mode, "--num-warmup", str(args.num_warmup),
                                  "--num-samples", str(args.num_samples)], capture_output=True, text=True, check=True)
            r = json.loads(out.stdout.strip().splitlines()[-1])
            res["memory"][mode] = r
            print(f"memory {mode}: {r['seconds']:.0f} s, peak RSS {max(r['series']['rss_mib']):.0f} MiB", flush=True)
            save(res)
            plot(res)
    if not args.skip_adult:
        res["adult_speed"] = adult_speed(args.adult_warmup, args.adult_samples, args.adult_repeats)
        save(res)
    plot(res)


if __name__ == "__main__":
    main()
