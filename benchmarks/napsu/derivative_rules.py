r"""The factorisations' derivative rules in NAPSU-MQ's gradient: the library's against JAX's.

The noise-aware likelihood (:mod:`synthinfer.napsu.structured`) factorises one small matrix
``M`` per clique (pivoted LU, or Cholesky where it is symmetric positive definite) and needs
``log |det M|`` and ``M^{-1} B``. The library differentiates that pair by its closed form
(``structured._logdet_solve`` and ``_spd_logdet_solve``: ``tr(M^{-1} dM)`` and
``M^{-1} (dB - dM M^{-1} B)``); JAX's own rules differentiate through the factorisation and
each triangular solve. This script loads fits saved by ``NapsuMQ.save`` (``default_fit.py --save``
keeps them), builds the NUTS objective's value and gradient (``likelihood.objective``, XLA's
default options, as NUTS compiles it) twice per fit: as the library does, and with both
replaced by the plain compositions of ``jax.scipy.linalg.lu_factor`` / ``lu_solve`` and
``jnp.linalg.cholesky`` / ``cho_solve`` (JAX's rules), and records per fit: the two programs'
value and gradient at the fit's last draw (largest relative difference), first call (trace + compile) seconds, HLO
lines, and process CPU and wall time per call: ``--blocks`` blocks of ``--calls`` calls each,
the two programs alternating block by block (so that the shared machine's drift falls on both
alike), minimum and median of the per-call means. One CPU core (``os.sched_setaffinity``) and
XLA's single-threaded Eigen, so CPU time is per core; load average before and after.

    PYTHONPATH=src python benchmarks/napsu/derivative_rules.py fits/fit_4.npz fits/fit_5.npz \
        --out benchmarks/napsu/results/derivative_rules.json
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + " --xla_cpu_multi_thread_eigen=false").strip()

import numpy as np  # noqa: E402

from synthinfer._jax import float64, jax, jnp, single_threaded_blas  # noqa: E402
from synthinfer.napsu import structured  # noqa: E402
from synthinfer.napsu.estimator import NapsuMQ  # noqa: E402
from synthinfer.napsu import likelihood  # noqa: E402
from synthinfer.napsu.likelihood import posterior_args  # noqa: E402


def lu_by_jax(M: jax.Array, B: jax.Array) -> tuple[jax.Array, jax.Array]:
    """``_logdet_solve`` without its derivative rule: JAX differentiates the factorisation."""
    lu = jax.scipy.linalg.lu_factor(M)
    return jnp.sum(jnp.log(jnp.abs(jnp.diagonal(lu[0])))), jax.scipy.linalg.lu_solve(lu, B)


def cholesky_by_jax(C: jax.Array, B: jax.Array) -> tuple[jax.Array, jax.Array]:
    """``_spd_logdet_solve`` without its derivative rule."""
    L = jnp.linalg.cholesky(C)
    return 2.0 * jnp.sum(jnp.log(jnp.diagonal(L))), jax.scipy.linalg.cho_solve((L, True), B)


RULES = {"_logdet_solve": lu_by_jax, "_spd_logdet_solve": cholesky_by_jax}


def program(path: str, rules: str):
    """The fit's NUTS objective's value and gradient, its arguments and the fit's last draw."""
    gen = NapsuMQ.load(path)
    layout, noisy, sigma = gen._likelihood_inputs()  # as the fit's own inference
    args = posterior_args(noisy, sigma, gen.n_, float(gen.prior_sd), float(gen.cell_prior),
                          None if gen.interaction_sd is None else float(gen.interaction_sd))
    theta = jnp.asarray(np.asarray(gen.posterior_.posterior["theta"].values)[0, -1])
    # the objective's loss built anew (``likelihood.objective`` keeps one per network, and both
    # programs here share the network), so that each program traces it with its own rule
    f = jax.jit(jax.value_and_grad(likelihood._OBJECTIVES["neg_log_posterior"](gen.network_, layout)[0]))
    library = {name: getattr(structured, name) for name in RULES}
    for name, plain in RULES.items():
        setattr(structured, name, plain if rules == "jax" else library[name])
    try:  # traced and compiled here, with the chosen rule
        t, c = time.perf_counter(), time.process_time()
        out = jax.block_until_ready(f(theta, *args))
        first = {"wall_s": time.perf_counter() - t, "cpu_s": time.process_time() - c}
        hlo = f.lower(theta, *args).compile().as_text()
    finally:
        for name, rule in library.items():
            setattr(structured, name, rule)
    first["hlo_lines"] = sum(1 for line in hlo.splitlines() if " = " in line)
    return f, args, theta, out, first, gen.network_.dimension


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("fits", nargs="+", help="fits saved by NapsuMQ.save")
    ap.add_argument("--blocks", type=int, default=15)
    ap.add_argument("--calls", type=int, default=20)
    ap.add_argument("--out", type=Path, default=Path("benchmarks/napsu/results/derivative_rules.json"))
    a = ap.parse_args()
    os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[-1]})
    code = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    result = {"command": "python " + " ".join(sys.argv), "code": code, "jax": jax.__version__,
              "threads": "one core, XLA_FLAGS=" + os.environ["XLA_FLAGS"], "fits": []}
    with float64(), single_threaded_blas():
        for path in a.fits:
            load = [os.getloadavg()[0]]
            progs = {rules: program(path, rules) for rules in ("library", "jax")}
            (_, _, _, (v0, g0), _, d), (_, _, _, (v1, g1), _, _) = progs["library"], progs["jax"]
            rec = {"fit": path, "d": d,
                   "value_rel_diff": float(abs(v0 - v1) / abs(v1)),
                   "gradient_rel_diff": float(jnp.max(jnp.abs(g0 - g1)) / jnp.max(jnp.abs(g1)))}
            times = {rules: {"wall": [], "cpu": []} for rules in progs}
            for _ in range(a.blocks):
                for rules, (f, args, theta, *_) in progs.items():
                    t, c = time.perf_counter(), time.process_time()
                    for _ in range(a.calls):
                        out = f(theta, *args)
                    jax.block_until_ready(out)
                    times[rules]["wall"].append((time.perf_counter() - t) / a.calls)
                    times[rules]["cpu"].append((time.process_time() - c) / a.calls)
            for rules, (*_, first, _) in progs.items():
                rec[rules] = {"first_call": first, **{
                    f"{k}_ms_{stat}": 1e3 * float(fn(v)) for k, v in times[rules].items()
                    for stat, fn in (("min", np.min), ("median", np.median))}}
            load.append(os.getloadavg()[0])
            rec["loadavg_1min"] = load
            rec["cpu_min_ratio"] = rec["library"]["cpu_ms_min"] / rec["jax"]["cpu_ms_min"]
            result["fits"].append(rec)
            print(f"{path}: d={d} CPU ms/call min library {rec['library']['cpu_ms_min']:.2f} "
                  f"jax {rec['jax']['cpu_ms_min']:.2f} (ratio {rec['cpu_min_ratio']:.2f}); compile "
                  f"{rec['library']['first_call']['wall_s']:.1f} vs {rec['jax']['first_call']['wall_s']:.1f} s; "
                  f"gradient rel diff {rec['gradient_rel_diff']:.1e}; load {load}", flush=True)
            a.out.parent.mkdir(parents=True, exist_ok=True)
            a.out.write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
