"""Speed of the exact MED_theta engine on the Adult query set (NAPSU-MQ Section 5.2).

Reports, for the 10 two-way Adult marginals (130 canonical queries, 1,792,000 domain cells):
compile time (wall and process CPU) and per-call time of ``log_partition``, its value and
gradient, ``mean_and_cov``, the gradient of a NAPSU-MQ-shaped log-likelihood (eq. 6) through
``mean_and_cov``, the same vmapped over 4 thetas (vectorised chains), and ``sample_many`` for
100 thetas x 46,043 rows. Writes ``results/engine_speed.json`` and ``.png`` (or ``--out FILE``).

Run: ``PYTHONPATH=src python benchmarks/napsu/engine_speed.py`` (see README.md).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path

import numpy as np

from synthinfer.files import atomic_write_text
from synthinfer._jax import jax, jnp
from synthinfer.datasets import ADULT_PAPER_MARGINALS, load_adult
from synthinfer.napsu import CanonicalQueries, MarkovNetwork

RESULTS = Path(__file__).parent / "results"


def timed(fn, *args, reps: int) -> dict:
    """Compile (first call) and steady-state timings; the median resists CPU contention."""
    lowered = fn.lower(*args)
    w0, c0 = time.perf_counter(), time.process_time()
    compiled = lowered.compile()
    compile_wall, compile_cpu = time.perf_counter() - w0, time.process_time() - c0
    jax.block_until_ready(compiled(*args))
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        jax.block_until_ready(compiled(*args))
        times.append(time.perf_counter() - t0)
    return {
        "compile_wall_s": compile_wall,
        "compile_cpu_s": compile_cpu,
        "call_median_ms": 1e3 * float(np.median(times)),
        "call_min_ms": 1e3 * float(np.min(times)),
        "reps": reps,
    }


def main() -> dict:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", type=Path, default=RESULTS / "engine_speed.json")
    a = ap.parse_args()
    ds = load_adult(paper_subset=True)
    t0 = time.perf_counter()
    queries = CanonicalQueries(ds.domain, ADULT_PAPER_MARGINALS)
    net = MarkovNetwork(queries)
    build_s = time.perf_counter() - t0
    d, n = net.dimension, len(ds.data)
    rng = np.random.default_rng(0)
    theta = jnp.asarray(0.5 * rng.normal(size=d))
    thetas4 = jnp.asarray(0.5 * rng.normal(size=(4, d)))
    thetas100 = jnp.asarray(0.5 * rng.normal(size=(100, d)))
    s_noisy = jnp.asarray(queries.count(ds.data) + rng.normal(size=d) * 20.0)
    sigma_dp = 20.0

    def log_lik(t):  # NAPSU-MQ eq. 6 with the N(0, 10^2 I) prior
        mu, sigma = net.mean_and_cov(t)
        cov = n * sigma + sigma_dp**2 * jnp.eye(d)
        chol = jnp.linalg.cholesky(cov)
        r = jax.scipy.linalg.solve_triangular(chol, s_noisy - n * mu, lower=True)
        return -0.5 * r @ r - jnp.log(jnp.diag(chol)).sum() - 0.5 * t @ t / 100.0

    w = jnp.asarray(rng.normal(size=(d, d)))

    def functional(t):  # engine only: a linear functional of (mu, Sigma), as any likelihood uses
        mu, sigma = net.mean_and_cov(t)
        return jnp.sum(mu * w[0]) + jnp.sum(sigma * w)

    cases = {
        "log_partition": (jax.jit(net.log_partition), (theta,), 500),
        "value_and_grad(log_partition)": (
            jax.jit(jax.value_and_grad(net.log_partition)), (theta,), 500),
        "mean": (jax.jit(net.mean), (theta,), 500),
        "mean_and_cov": (jax.jit(net.mean_and_cov), (theta,), 200),
        # the alternatives for Sigma that the covariance passes replace (for comparison)
        "jacfwd(mean) [alternative Sigma]": (jax.jit(jax.jacfwd(net.mean)), (theta,), 50),
        "hessian(log_partition) [alternative Sigma]": (
            jax.jit(jax.hessian(net.log_partition)), (theta,), 50),
        "value_and_grad(<w, (mu, Sigma)>)": (
            jax.jit(jax.value_and_grad(functional)), (theta,), 200),
        "vmap4 value_and_grad(<w, (mu, Sigma)>)": (
            jax.jit(jax.vmap(jax.value_and_grad(functional))), (thetas4,), 100),
        "value_and_grad(log_lik eq.6)": (jax.jit(jax.value_and_grad(log_lik)), (theta,), 200),
        "vmap4 value_and_grad(log_lik eq.6)": (
            jax.jit(jax.vmap(jax.value_and_grad(log_lik))), (thetas4,), 100),
        "sample_many(100 x 46043)": (
            jax.jit(lambda t, k: net.sample_many(t, n, k)), (thetas100, jax.random.key(0)), 3),
    }
    out = {
        "network": repr(net),
        "dimension": d,
        "domain_cells": ds.domain.size,
        "clique_table_cells": net.junction_tree.table_cells,
        "tree_width": net.junction_tree.width,
        "build_s": build_s,
        "timings": {},
        "python": sys.version.split()[0],
        "jax": jax.__version__,
        "machine": platform.machine(),
        "cpu_count": os.cpu_count(),
        "xla_flags": os.environ.get("XLA_FLAGS", ""),
        "loadavg_before": os.getloadavg(),
    }
    for name, (fn, args, reps) in cases.items():
        out["timings"][name] = timed(fn, *args, reps=reps)
        print(f"{name:40s} {out['timings'][name]}", flush=True)
    out["loadavg_after"] = os.getloadavg()
    a.out.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(a.out, json.dumps(out, indent=2) + "\n")
    plot(out, a.out.with_suffix(".png"))
    return out


def plot(out: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(out["timings"])
    t = out["timings"]
    fig, axes = plt.subplots(1, 2, figsize=(11, 3.8), sharey=True)
    y = np.arange(len(names))
    h = 0.38
    axes[0].barh(y - h / 2, [t[k]["call_min_ms"] for k in names], h, label="min", color="tab:blue")
    axes[0].barh(y + h / 2, [t[k]["call_median_ms"] for k in names], h, label="median",
                 color="lightsteelblue")
    axes[0].set_xscale("log")
    axes[0].set_xlabel("per call (ms, log scale)")
    axes[0].set_yticks(y, names, fontsize=8)
    axes[0].invert_yaxis()
    axes[0].legend(fontsize=8)
    axes[1].barh(y - h / 2, [t[k]["compile_cpu_s"] for k in names], h, label="process CPU",
                 color="tab:orange")
    axes[1].barh(y + h / 2, [t[k]["compile_wall_s"] for k in names], h, label="wall",
                 color="navajowhite")
    axes[1].set_xlabel("XLA compile (s)")
    axes[1].legend(fontsize=8)
    load = out["loadavg_before"][0]
    fig.suptitle(f"MED_theta engine on Adult: d={out['dimension']}, {out['domain_cells']:,} cells, "
                 f"{out['clique_table_cells']} clique cells (load avg {load:.1f}, "
                 f"{out['cpu_count']} CPUs)", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


if __name__ == "__main__":
    from synthinfer import float64

    with float64():  # the script calls lower-level JAX code (network passes, likelihoods) directly
        main()
