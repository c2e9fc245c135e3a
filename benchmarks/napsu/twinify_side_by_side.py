"""Speed of synthinfer's NAPSU-MQ side by side with the reference implementation, twinify 2.0.0.

One run writes the toy data (n = 2000, x1, x2, y binary, logistic coefficients (1, 0), seed 0)
and the Adult paper subset as CSVs of integer codes to a temporary directory; both tools read
the same files. Every measurement group runs in a fresh process for each tool, so "with
compile" (first call) is what a user waits for and "without compile" is an identical second
call in the same process:

  toy_laplace  fit with the Laplace approximation (full 3-way marginal, epsilon 1, delta n^-2)
  toy_nuts     fit with NUTS, 4 chains x (800 + 2000), then 100 datasets of 2000 rows
  adult        the 10 two-way marginals of the paper's Adult runs (130 canonical queries):
               one jitted log-posterior value-and-gradient (compile, then per call); our
               Laplace fit (twinify's is skipped: ~29 min of XLA compilation on a 2-core machine)

Our side runs in this interpreter (``--part``, internal); twinify's in its own venv through
``_twinify_worker.py``. Each record also holds the seconds JAX spent compiling inside the call
(``CompileClock``). Results: ``results/twinify_side_by_side.{json,png}``.

    PYTHONPATH=src /work/main/.venv/bin/python benchmarks/napsu/twinify_side_by_side.py
        [--twinify-python PATH] [--num-warmup 800 --num-samples 2000]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import textwrap
import time
import warnings
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from _twinify_worker import CompileClock  # noqa: E402  (stdlib-only at import time)

RESULTS = HERE / "results"
DEFAULT_TWINIFY_PYTHON = "/work/twinify-venv/bin/python"
VENV_HELP = """twinify's interpreter {path!r} was not found. Create its venv (Python 3.10) with:
  /root/.pyenv/versions/3.10.13/bin/python -m venv /work/twinify-venv
  /work/twinify-venv/bin/pip install -r benchmarks/napsu/twinify_requirements.txt
(twinify 2.0.0's own pins let pip pick jax/numpyro/scipy versions it no longer imports with)
or pass --twinify-python / set TWINIFY_PYTHON (see benchmarks/napsu/README.md)."""
PARTS = ("toy_laplace", "toy_nuts", "adult")


# -- our side (runs in a child process: python this_file --part NAME --config JSON) ------------
def _load(csv: str, domain_json: str):
    import pandas as pd

    from synthinfer.data import Domain, decode

    domain = Domain.from_json(domain_json)
    return decode(pd.read_csv(csv)[list(domain.names)].to_numpy(), domain), domain


def _fit_record(gen, rec: dict) -> dict:
    rec["stages_wall_s"] = gen.diagnostics_["timings"]
    return rec


def ours(part: str, cfg: dict) -> dict:
    import numpy as np

    from synthinfer._jax import jax, jnp
    from synthinfer.errors import ConvergenceWarning
    from synthinfer.generate import NapsuMQ
    from synthinfer.napsu import likelihood

    warnings.simplefilter("ignore", ConvergenceWarning)
    clock = CompileClock()
    out: dict = {}
    if part in ("toy_laplace", "toy_nuts"):
        df, domain = _load(cfg["toy_csv"], cfg["toy_domain"])
        inference = part.split("_")[1]
        for call in ("first", "second"):
            gen, rec = clock.measure(lambda: NapsuMQ(
                [tuple(m) for m in cfg["toy_marginals"]], epsilon=cfg["epsilon"], delta=cfg["delta"],
                inference=inference, n_chains=cfg["num_chains"], num_warmup=cfg["num_warmup"],
                num_samples=cfg["num_samples"], seed=cfg["seed"]).fit(df, domain))
            out[f"fit_{call}"] = _fit_record(gen, rec)
        out["canonical_queries"] = int(gen.queries_.dimension)
        out["sigma_dp"] = gen.sigma_dp_
        if part == "toy_laplace":
            out["laplace"] = {k: v for k, v in gen.diagnostics_["laplace"].items() if k != "attempts"}
            return out
        nd = gen.diagnostics_["nuts"]
        out["nuts_settings"] = {k: cfg[k] for k in ("num_chains", "num_warmup", "num_samples")}
        out["nuts_gradient_evaluations"] = nd["gradient_evaluations"]
        out["nuts_gradient_evaluations_sampling"] = nd["gradient_evaluations"] - nd["gradient_evaluations_warmup"]
        out["rhat_max"] = nd["rhat_max"]
        out["ess_bulk_min"] = nd["ess_bulk_min"]
        for call in ("first", "second"):
            dfs, out[f"generate_{call}"] = clock.measure(
                lambda: gen.generate(cfg["generate_m"], n=cfg["generate_n"], seed=cfg["seed"] + 1))
        out["generated_shape"] = [len(dfs), int(dfs[0].shape[0])]
        for call in ("first", "second"):
            out[f"pipeline_{call}"] = {k: out[f"fit_{call}"][k] + out[f"generate_{call}"][k]
                                       for k in ("wall_s", "xla_compile_s", "trace_lower_s")}
        return out
    df, domain = _load(cfg["adult_csv"], cfg["adult_domain"])
    out["n"] = len(df)
    for call in ("first", "second"):
        gen, rec = clock.measure(lambda: NapsuMQ(
            [tuple(m) for m in cfg["adult_marginals"]], epsilon=cfg["epsilon"], delta=cfg["delta"],
            inference="laplace", seed=cfg["seed"]).fit(df, domain))
        out[f"laplace_fit_{call}"] = _fit_record(gen, rec)
    out["canonical_queries"] = int(gen.queries_.dimension)
    out["laplace"] = {k: v for k, v in gen.diagnostics_["laplace"].items() if k != "attempts"}
    # The log posterior as speed.gradient_ms builds it, timed call by call (median and min,
    # as for twinify: under CPU contention the two differ).
    args = (jnp.asarray(gen.noisy_counts_), jnp.asarray(gen.sigma_dp_), jnp.asarray(float(gen.n_)))
    vg = jax.jit(jax.value_and_grad(lambda th: likelihood.log_posterior(th, *args, gen.network_.mean_and_cov, likelihood.PRIOR_SD)))
    x = jnp.asarray(gen.draws_[0, 0])
    from synthinfer._jax import single_threaded_blas

    with single_threaded_blas():  # as NapsuMQ.fit runs it
        _, out["gradient_first_call"] = clock.measure(lambda: jax.block_until_ready(vg(x)))
        times = [clock.measure(lambda: jax.block_until_ready(vg(x)))[1]["wall_s"] for _ in range(cfg["grad_reps"])]
    out["gradient_ms_median"] = 1e3 * float(np.median(times))
    out["gradient_ms_min"] = 1e3 * float(np.min(times))
    out["gradient_reps"] = cfg["grad_reps"]
    return out


# -- driver -------------------------------------------------------------------------------------
def machine() -> dict:
    info = {"platform": platform.platform(), "cpu_count": os.cpu_count(), "python": sys.version.split()[0],
            "XLA_FLAGS": os.environ.get("XLA_FLAGS")}
    try:
        cpuinfo = Path("/proc/cpuinfo").read_text()
        info["cpu_model"] = next(line.split(":", 1)[1].strip() for line in cpuinfo.splitlines() if line.startswith("model name"))
        meminfo = Path("/proc/meminfo").read_text().split()
        info["mem_total_gib"] = round(int(meminfo[meminfo.index("MemTotal:") + 1]) / 2**20, 1)
    except (OSError, StopIteration, ValueError):
        pass
    return info


def write_inputs(tmp: Path) -> dict:
    """The shared data: CSVs of integer codes, plus our Domain JSONs to decode them."""
    import pandas as pd

    from synthinfer.data import encode
    from synthinfer.datasets import load_adult, make_toy_logistic

    files = {}
    for name, ds in (("toy", make_toy_logistic(2000, (1.0, 0.0), seed=0)), ("adult", load_adult(paper_subset=True))):
        codes = encode(ds.data, ds.domain)
        pd.DataFrame(codes, columns=ds.domain.names).to_csv(tmp / f"{name}.csv", index=False)
        ds.domain.to_json(tmp / f"{name}_domain.json")
        files[f"{name}_csv"] = str(tmp / f"{name}.csv")
        files[f"{name}_domain"] = str(tmp / f"{name}_domain.json")
        files[f"{name}_columns"] = dict(zip(ds.domain.names, ds.domain.shape))
        files[f"{name}_n"] = int(codes.shape[0])
    return files


def run_json(cmd: list[str], label: str) -> dict:
    t = time.perf_counter()
    print(f"[{time.strftime('%H:%M:%S')}] {label} ...", flush=True)
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit(f"{label} failed (exit {p.returncode}):\n{p.stderr[-4000:]}")
    print(f"    done in {time.perf_counter() - t:.1f} s", flush=True)
    return json.loads(p.stdout.strip().splitlines()[-1])


def save(res: dict, out: Path) -> None:
    from synthinfer.files import atomic_write_text

    atomic_write_text(out, json.dumps(res, indent=1, default=str) + "\n")


def measurements(res: dict) -> list[tuple[str, dict]]:
    """Per measurement and tool: (first-call record, second-call record); records have
    ``wall_s`` and (where measured) ``xla_compile_s``; None where not measured."""
    o, t = res["synthinfer"], res["twinify"]
    ot, on, oa = o["toy_laplace"], o["toy_nuts"], o["adult"]
    tt, tn, ta = t["toy_laplace"], t["toy_nuts"], t["adult"]
    s = tn["nuts_settings"]

    def both(a, b, key):
        return {"synthinfer": (a[f"{key}first"], a[f"{key}second"]), "twinify": (b[f"{key}first"], b[f"{key}second"])}

    return [
        ("toy: fit, Laplace", {"synthinfer": (ot["fit_first"], ot["fit_second"]), "twinify": (tt["first"], tt["second"])}),
        (f"toy: fit, NUTS {s['num_chains']}x({s['num_warmup']}+{s['num_samples']})", both(on, tn, "fit_")),
        ("toy: 100 datasets x 2000 rows", both(on, tn, "generate_")),
        ("toy: NUTS fit + 100 datasets", both(on, tn, "pipeline_")),
        ("Adult: log-posterior value+grad (1 call; median)",
         {"synthinfer": (oa["gradient_first_call"], {"wall_s": oa["gradient_ms_median"] / 1e3, "xla_compile_s": 0.0}),
          "twinify": (ta["gradient_first_call"], {"wall_s": ta["gradient_ms_median"] / 1e3, "xla_compile_s": 0.0})}),
        ("Adult: fit, Laplace", {"synthinfer": (oa["laplace_fit_first"], oa["laplace_fit_second"]), "twinify": (None, None)}),
    ]


def table(res: dict) -> str:
    """Markdown table of the measurements (seconds; XLA compile seconds inside each call)."""
    def cell(rec):
        if rec is None:
            return "skipped"
        w = rec["wall_s"]
        txt = f"{w * 1e3:.3g} ms" if w < 1 else f"{w:.3g} s"
        return txt + (f" ({rec['xla_compile_s']:.3g})" if rec.get("xla_compile_s") else "")

    lines = ["| measurement | synthinfer, with compile | synthinfer, without | twinify, with compile | twinify, without |",
             "|---|---|---|---|---|"]
    for name, m in measurements(res):
        lines.append(f"| {name} | " + " | ".join(cell(r) for tool in ("synthinfer", "twinify") for r in m[tool]) + " |")
    return "\n".join(lines)


def plot(res: dict, out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    from synthinfer.files import atomic_write

    groups = [(textwrap.fill(name, 24), {tool: tuple(r["wall_s"] if r else None for r in recs)
                                               for tool, recs in m.items()}) for name, m in measurements(res)]
    series = [("synthinfer", 0, "with compile", "#1f77b4", "//"), ("synthinfer", 1, "without compile", "#9ecae1", None),
              ("twinify", 0, "with compile", "#d62728", "//"), ("twinify", 1, "without compile", "#fcae91", None)]
    fig, ax = plt.subplots(figsize=(12, 5.5))
    x = np.arange(len(groups))
    w = 0.2
    for k, (tool, j, lab, col, hatch) in enumerate(series):
        vals = [g[1][tool][j] for g in groups]
        pos = x + (k - 1.5) * w
        ax.bar([p for p, v in zip(pos, vals) if v], [v for v in vals if v], w, color=col, hatch=hatch,
               edgecolor="black", linewidth=0.5, label=f"{tool}, {lab}")
        for p, v in zip(pos, vals):
            if v:
                ax.text(p, v * 1.15, f"{v:.3g}", ha="center", va="bottom", fontsize=7, rotation=90)
    ax.text(x[-1] + 0.2, 0.05, "twinify:\nskipped\n(~29 min\nof XLA\ncompile)", ha="center", fontsize=7)
    ax.set_yscale("log")
    ax.set_ylim(1e-4, 3e3)
    ax.set_ylabel("seconds (log scale)")
    ax.set_xticks(x, [g[0] for g in groups], fontsize=8)
    la = res["loadavg_start"]
    ax.set_title(f"NAPSU-MQ: synthinfer {res['versions']['synthinfer']} vs twinify {res['twinify_versions']['twinify']}"
                 f" ({res['machine']['cpu_count']} cores; load avg at start {la[0]:.1f})\n"
                 "with compile = first call in a fresh process; without = identical second call", fontsize=10)
    ax.legend(fontsize=8, loc="upper left", ncol=2)
    ax.grid(axis="y", which="major", alpha=0.3)
    fig.tight_layout()
    atomic_write(out, lambda p: fig.savefig(p, format="png", dpi=130))
    plt.close(fig)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--twinify-python", default=os.environ.get("TWINIFY_PYTHON", DEFAULT_TWINIFY_PYTHON))
    ap.add_argument("--num-chains", type=int, default=4)
    ap.add_argument("--num-warmup", type=int, default=800)
    ap.add_argument("--num-samples", type=int, default=2000)
    ap.add_argument("--grad-reps", type=int, default=20)
    ap.add_argument("--parts", default=",".join(PARTS), help="comma-separated subset of " + ",".join(PARTS))
    ap.add_argument("--blas-threads", type=int, help="set OPENBLAS/OMP/MKL_NUM_THREADS for both tools' processes")
    ap.add_argument("--out", default=str(RESULTS / "twinify_side_by_side.json"),
                    help="result JSON (the PNG goes beside it, for a run of all parts)")
    ap.add_argument("--plot-only", action="store_true", help="redraw the PNG and print the table from the JSON")
    ap.add_argument("--part", help=argparse.SUPPRESS)  # internal: run our side of one part
    ap.add_argument("--config", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.part:
        print(json.dumps(ours(a.part, json.loads(a.config)), default=lambda o: o.tolist() if hasattr(o, "tolist") else str(o)))
        return
    out = Path(a.out)
    if a.plot_only:
        res = json.loads(out.read_text())
        plot(res, out.with_suffix(".png"))
        print(table(res))
        return
    if not Path(a.twinify_python).exists():
        sys.exit(VENV_HELP.format(path=a.twinify_python))
    parts = [p for p in a.parts.split(",") if p]
    if set(parts) - set(PARTS):
        sys.exit(f"unknown part(s) {sorted(set(parts) - set(PARTS))}; choose from {PARTS}")

    import synthinfer
    from synthinfer._jax import jax
    from synthinfer.datasets import ADULT_PAPER_MARGINALS

    freeze = subprocess.run([a.twinify_python, "-m", "pip", "freeze"], capture_output=True, text=True).stdout.split()
    commit = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, cwd=HERE).stdout.strip()
    res: dict = {
        "loadavg_start": os.getloadavg(),
        "started": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
        "machine": machine(),
        "versions": {"synthinfer": synthinfer.__version__, "synthinfer_git_commit": commit, "jax": jax.__version__},
        "twinify_python": a.twinify_python,
        "twinify_pip_freeze": freeze,
        "settings": {"toy": "n=2000, (x1, x2, y) binary, coef (1, 0), seed 0; marginal (x1, x2, y); epsilon 1, delta n^-2",
                     "adult": "paper subset, the paper's 10 two-way marginals; epsilon 1, delta n^-2",
                     "nuts": {"num_chains": a.num_chains, "num_warmup": a.num_warmup, "num_samples": a.num_samples},
                     "generate": "100 datasets x 2000 rows", "gradient_reps": a.grad_reps},
        "synthinfer": {}, "twinify": {}, "loadavg_before_part": {},
    }
    if a.blas_threads:
        # Both tools' LAPACK calls (e.g. the Cholesky factorisation in the likelihood) go
        # through OpenBLAS, whose thread pool spins when the cores are shared.
        for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
            os.environ[var] = str(a.blas_threads)
    res["blas_threads_env"] = {v: os.environ.get(v) for v in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")}
    with tempfile.TemporaryDirectory(prefix="twinify_bench_") as tmp:
        files = write_inputs(Path(tmp))
        for part in parts:
            data = "adult" if part == "adult" else "toy"
            cfg = dict(files, part=part, epsilon=1.0, delta=float(files[f"{data}_n"]) ** -2.0, seed=0,
                       num_chains=a.num_chains, num_warmup=a.num_warmup, num_samples=a.num_samples,
                       generate_m=100, generate_n=2000, grad_reps=a.grad_reps,
                       toy_marginals=[["x1", "x2", "y"]], adult_marginals=[list(m) for m in ADULT_PAPER_MARGINALS])
            res["loadavg_before_part"][part] = os.getloadavg()
            res["synthinfer"][part] = run_json([sys.executable, __file__, "--part", part, "--config", json.dumps(cfg)],
                                               f"synthinfer {part}")
            tw = run_json([a.twinify_python, str(HERE / "_twinify_worker.py"), json.dumps(cfg)], f"twinify {part}")
            res["twinify"][part] = tw[part]
            res["twinify_versions"] = tw["versions"]
            res["loadavg_end"] = os.getloadavg()
            save(res, out)
    res["loadavg_end"] = os.getloadavg()
    save(res, out)
    if set(parts) == set(PARTS):
        plot(res, out.with_suffix(".png"))
        print(table(res))


if __name__ == "__main__":
    from synthinfer import float64

    with float64():  # the script calls lower-level JAX code (network passes, likelihoods) directly
        main()
