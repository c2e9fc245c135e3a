"""Sequential vs batched Hessian and Gaussianity check of the NAPSU-MQ Laplace fit.

The Laplace fit needs the Hessian of the negative log posterior at the mode (``2 d`` gradients
for central differences) and :func:`synthinfer.napsu.laplace.laplace_gap`'s ``2 d + 1``
values. The library evaluates them in blocks with the network's batched programs
(:func:`synthinfer.napsu.likelihood.gradients`, :func:`~synthinfer.napsu.likelihood.values`);
this script keeps the sequential loops (one compiled value-and-gradient call per point) to
compare with the vmapped programs and with the library's default on this backend
(:data:`PATHS`), on two models:

* ``adult10``: the paper's Adult subset with its 10 two-way marginals (d = 130);
* ``adult12+mst``: the same rows (those of the subset with a known occupation) with two more
  columns of the full table, occupation and relationship, and ``--select-extra`` (default 2)
  further 2-way marginals chosen by private MST (the paper's 10 already span its 10 columns).

Each (model, path) runs in a new process, so "with compile" is a first call there: the whole
``NapsuMQ(inference="laplace").fit`` twice (with compile, then warm), then the Hessian and the
check at the fitted mode (first call, then the minimum of warm repeats). Wall and process CPU
time, the load average and the process's peak resident memory are recorded in
``results/laplace_batch.json``; ``results/laplace_batch.png`` plots them.

    python benchmarks/napsu/laplace_batch.py [--select-extra 2] [--repeats 3]
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

os.environ.setdefault("XLA_FLAGS", "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1")

import numpy as np  # noqa: E402

HERE = Path(__file__).resolve().parent
#: sequential: the loops the library replaced; batched: vmapped gradients for the Hessian and
#: vmapped values for the check; default: what the library does on this backend
PATHS = ("sequential", "batched", "default")
OUT = HERE / "results" / "laplace_batch.json"


def _clock(fn):
    w, c = time.perf_counter(), time.process_time()
    out = fn()
    return out, time.perf_counter() - w, time.process_time() - c


# ---- the sequential loops the library replaced (kept here only, for comparison) ----------
def sequential_hessian(vg, x, args, step=1e-5):
    from synthinfer._jax import jnp

    d = x.shape[0]
    h = np.empty((d, d))
    for i in range(d):
        e = np.zeros(d)
        e[i] = step
        g_plus, g_minus = (np.asarray(vg(jnp.asarray(x + s * e), *args)[1]) for s in (1.0, -1.0))
        h[i] = (g_plus - g_minus) / (2.0 * step)
    return 0.5 * (h + h.T)


def sequential_gap(network, s_tilde, sigma_dp, n, laplace, *, prior_sd, radius=2.0):
    from synthinfer._jax import jnp
    from synthinfer.napsu.likelihood import posterior_args, value_and_grad

    vg = value_and_grad(network, "neg_log_posterior")
    args = posterior_args(s_tilde, sigma_dp, n, prior_sd)

    def loss(x):
        return float(vg(jnp.asarray(x), *args)[0])

    x = np.asarray(laplace.mean, dtype=np.float64)
    base = loss(x)
    steps = radius * np.asarray(laplace.chol).T
    plus = np.array([loss(x + e) for e in steps])
    minus = np.array([loss(x - e) for e in steps])
    expected = radius**2 / 2.0
    return np.maximum(np.abs(plus - base - expected), np.abs(minus - base - expected))


def _use_batched_gradients() -> None:
    """Make the library's Laplace fit use the vmapped gradient program whatever the backend."""
    from synthinfer.napsu import laplace as lap_mod
    from synthinfer.napsu.likelihood import gradients

    lap_mod.gradients = lambda network, name: gradients(network, name, batched=True)


def _use_sequential() -> None:
    """Route the library's Laplace fit through the sequential loops."""
    from synthinfer._jax import uses_float64
    from synthinfer.napsu import laplace as lap_mod
    from synthinfer.napsu.likelihood import value_and_grad

    lap_mod.gradients = lambda network, name: value_and_grad(network, name)  # vg goes to hessian
    lap_mod.hessian = lambda vg, x, args: sequential_hessian(vg, np.asarray(x, dtype=np.float64), args)
    lap_mod.laplace_gap = uses_float64(sequential_gap)


EXTRA_COLUMNS = ("occupation", "relationship")


def adult12():
    """The paper's Adult subset plus :data:`EXTRA_COLUMNS` (categorical, as in the full table),
    on the subset's rows where they are known."""
    import pandas as pd

    from synthinfer.data import Column, Domain
    from synthinfer.datasets import Dataset, load_adult
    from synthinfer.datasets.loaders import ADULT_PAPER_COLUMNS

    full = load_adult().data
    rows = full[list(ADULT_PAPER_COLUMNS)].notna().all(axis=1).to_numpy()
    paper = load_adult(paper_subset=True)
    extra = full.loc[rows, list(EXTRA_COLUMNS)].reset_index(drop=True)
    keep = extra.notna().all(axis=1).to_numpy()
    df = paper.data[keep].reset_index(drop=True)
    cols = list(paper.domain.columns)
    for name in EXTRA_COLUMNS:
        cats = sorted(extra[name][keep].unique())
        df[name] = pd.Categorical(extra[name][keep].to_numpy(), categories=cats)
        cols.append(Column(name, cats))
    return Dataset(df, Domain(cols))


def worker(model: str, path: str, select_extra: int, repeats: int) -> dict:
    from synthinfer import float64
    from synthinfer._jax import single_threaded_blas
    from synthinfer.datasets import load_adult
    from synthinfer.datasets.loaders import ADULT_PAPER_MARGINALS
    from synthinfer.napsu import NapsuMQ
    from synthinfer.napsu import laplace as lap_mod
    from synthinfer.napsu.likelihood import gradients, posterior_args, value_and_grad
    from synthinfer.napsu.optimize import hessian

    if path == "sequential":
        _use_sequential()
    elif path == "batched":
        _use_batched_gradients()
    ds = load_adult(paper_subset=True) if model == "adult10" else adult12()
    extra = select_extra if model == "adult12+mst" else 0
    rec: dict = {"model": model, "path": path, "select_extra": extra, "n": len(ds.data)}

    def fit():
        return NapsuMQ(list(ADULT_PAPER_MARGINALS), epsilon=1.0, delta=len(ds.data) ** -2.0, inference="laplace",
                       select_extra=extra, seed=0).fit(ds.data, ds.domain)

    gen, rec["fit_wall_compile"], rec["fit_cpu_compile"] = _clock(fit)
    _, rec["fit_wall_warm"], rec["fit_cpu_warm"] = _clock(fit)
    rec["d"] = int(gen.queries_.dimension)
    rec["selected"] = [list(m.columns) for m in gen.selected_marginals_]
    rec["fit_info"] = {k: gen.diagnostics_["laplace"].get(k) for k in
                       ("iterations", "gradient_evaluations", "max_log_density_gap", "axes_gap_over_1_nat")}
    lap = gen.laplace_
    args = posterior_args(gen.noisy_counts_, gen.sigma_dp_, gen.n_, gen.prior_sd)
    x = np.asarray(lap.mean, dtype=np.float64)
    with float64(), single_threaded_blas():
        if path == "sequential":
            vg = value_and_grad(gen.network_, "neg_log_posterior")
            h_fn = lambda: sequential_hessian(vg, x, args)  # noqa: E731
            g_fn = lambda: sequential_gap(gen.network_, gen.noisy_counts_, gen.sigma_dp_, gen.n_, lap,  # noqa: E731
                                          prior_sd=gen.prior_sd)
        else:
            grads = gradients(gen.network_, "neg_log_posterior", batched=(path == "batched") or None)
            h_fn = lambda: hessian(grads, x, args)  # noqa: E731
            g_fn = lambda: lap_mod.laplace_gap(gen.network_, gen.noisy_counts_, gen.sigma_dp_, gen.n_, lap,  # noqa: E731
                                               prior_sd=gen.prior_sd)
        for name, fn in (("hessian", h_fn), ("gap", g_fn)):
            value, rec[f"{name}_wall_first"], rec[f"{name}_cpu_first"] = _clock(fn)
            warm = [_clock(fn)[1:] for _ in range(repeats if rec[f"{name}_wall_first"] < 5.0 else 1)]
            rec[f"{name}_wall_warm"] = min(w for w, _ in warm)
            rec[f"{name}_cpu_warm"] = min(c for _, c in warm)
            np.save(f"/tmp/laplace_batch_{model}_{path}_{name}.npy", value)
    rec["max_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    rec["loadavg_end"] = os.getloadavg()
    return rec


def plot(results: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    stages = [("hessian_wall_warm", "Hessian (warm)"), ("gap_wall_warm", "gap check (warm)"),
              ("fit_wall_compile", "fit (with compile)"), ("fit_wall_warm", "fit (warm)")]
    models = sorted({r["model"] for r in results}, key=lambda m: len(m))
    fig, axes = plt.subplots(1, len(models), figsize=(5.5 * len(models), 3.8), squeeze=False)
    for ax, model in zip(axes[0], models):
        rows = {r["path"]: r for r in results if r["model"] == model}
        pos = np.arange(len(stages))
        for k, p in enumerate(PATHS):
            if p in rows:
                ax.bar(pos + (k - 1) * 0.27, [rows[p][s] for s, _ in stages], 0.27, label=p)
        d = next(iter(rows.values()))["d"]
        ax.set_title(f"{model} (d = {d})")
        ax.set_xticks(pos, [lab for _, lab in stages], rotation=20, fontsize=8)
        ax.set_ylabel("wall time (s)")
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--select-extra", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--models", nargs="+", default=["adult10", "adult12+mst"])
    ap.add_argument("--worker", nargs=2, metavar=("MODEL", "PATH"))
    ap.add_argument("--out", type=Path, default=OUT)
    a = ap.parse_args()
    if a.worker:
        print(json.dumps(worker(a.worker[0], a.worker[1], a.select_extra, a.repeats)))
        return
    # records of models not run this time are kept from an earlier run's file
    results: list[dict] = ([r for r in json.loads(a.out.read_text())["results"] if r["model"] not in a.models]
                           if a.out.exists() else [])
    doc = {"command": " ".join(["python", "benchmarks/napsu/laplace_batch.py", *sys.argv[1:]]),
           "loadavg_start": os.getloadavg(), "cpu_count": os.cpu_count(), "results": results}
    for model in a.models:
        for path in PATHS:
            out = subprocess.run([sys.executable, __file__, "--worker", model, path, "--select-extra",
                                  str(a.select_extra), "--repeats", str(a.repeats)],
                                 stdout=subprocess.PIPE, text=True, check=True)
            rec = json.loads(out.stdout.strip().splitlines()[-1])
            results.append(rec)
            print(json.dumps({k: v for k, v in rec.items() if k not in ("selected", "fit_info")}), flush=True)
        seq_h, seq_g = (np.load(f"/tmp/laplace_batch_{model}_sequential_{c}.npy") for c in ("hessian", "gap"))
        for rec in results[-len(PATHS) + 1:]:
            h, g = (np.load(f"/tmp/laplace_batch_{model}_{rec['path']}_{c}.npy") for c in ("hessian", "gap"))
            rec["hessian_max_rel_diff_vs_sequential"] = float(np.abs(seq_h - h).max() / np.abs(seq_h).max())
            rec["gap_max_abs_diff_vs_sequential"] = float(np.abs(seq_g - g).max())
        doc["loadavg_end"] = os.getloadavg()
        a.out.parent.mkdir(parents=True, exist_ok=True)
        a.out.write_text(json.dumps(doc, indent=1))
    plot(results, a.out.with_suffix(".png"))


if __name__ == "__main__":
    main()
