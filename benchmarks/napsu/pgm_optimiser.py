"""The PGM point estimate's optimiser on an AIM model: plain L-BFGS against the Gauss-Newton
preconditioned L-BFGS with several dampings of its metric (``likelihood.PGM_DAMPING``).

One AIM selection on the full Adult table (the analysis marginal (age, race, sex, income)
required, ``NapsuMQ``'s defaults, epsilon 1, seed 0); then, on its canonical noisy counts, each
optimiser from theta = 0 with the same budget of iterations and no restarts. Reported: wall and
process CPU, iterations, convergence (per-iteration improvement below 1e-12), the final loss and
the RMS residual of ``n mu(theta)`` against the noisy counts in noise standard deviations.

    PYTHONPATH=src python benchmarks/napsu/pgm_optimiser.py
"""

from __future__ import annotations

import argparse
import json
import os
import time
from functools import partial
from pathlib import Path

import numpy as np

from synthinfer import float64
from synthinfer._jax import jax
from synthinfer.datasets import adult_domain, load_adult
from synthinfer.generate import NapsuMQ
from synthinfer.napsu import backends, likelihood
from synthinfer.napsu.backends import MLEBackend
from synthinfer.napsu.optimize import lbfgs_minimize


class _Capture(MLEBackend):
    """Keeps the posterior problem NapsuMQ hands its backend and stops the fit there."""

    name = "capture-problem"
    problem = None

    def run(self, problem, settings, *, rng, progress, spare_core):
        type(self).problem = problem
        raise _Stop


class _Stop(Exception):
    pass


def aim_problem(epsilon: float, seed: int):
    backends.register_backend(_Capture())
    data, domain = load_adult(categorical=True).data, adult_domain(derived=True)
    n = len(data)
    gen = NapsuMQ([("age", "race", "sex", "income")], epsilon=epsilon, delta=n**-2.0, select_extra="aim",
                  inference=_Capture.name, seed=np.random.default_rng(seed))
    try:
        gen.fit(data, domain)
    except _Stop:
        pass
    return _Capture.problem


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--max-iter", type=int, default=6000)
    ap.add_argument("--dampings", default="1e-3,1e-6")
    ap.add_argument("--out", default=str(Path(__file__).parent / "results" / "pgm_optimiser.json"))
    a = ap.parse_args()
    problem = aim_problem(1.0, 0)
    net = problem.network
    s, sig = problem.canonical
    args = likelihood.pgm_args(s, problem.n)
    d = net.dimension
    rows = []
    with float64():
        vg = likelihood.value_and_grad(net, "pgm")
        vg(np.zeros(d), *args)  # compile outside the clocks
        variants = {"plain L-BFGS": None}
        for lam in (float(x) for x in a.dampings.split(",")):
            # the library's curvature (likelihood._gauss_newton_pgm) at another damping
            curv = jax.jit(partial(likelihood._gauss_newton_pgm, mean=net.mean, damping=lam))
            curv(np.zeros(d), *args)
            variants[f"Gauss-Newton, damping {lam:g}"] = curv
        for name, curv in variants.items():
            t0, c0 = time.perf_counter(), time.process_time()
            res = lbfgs_minimize(vg, np.zeros(d), args, curvature_fn=curv, max_iter=a.max_iter, tol=1e-12,
                                 max_restarts=0, rng=np.random.default_rng(0))
            wall, cpu = time.perf_counter() - t0, time.process_time() - c0
            mu = np.asarray(net.mean(res.x))
            rows.append({"optimiser": name, "wall_s": wall, "cpu_s": cpu, "iterations": res.n_iterations,
                         "evaluations": res.n_grad_evals, "converged": bool(res.converged), "loss": res.loss,
                         "rms_residual_over_sigma": float(np.sqrt(np.mean(((problem.n * mu - s) / sig) ** 2)))})
            print(json.dumps(rows[-1]), flush=True)
    Path(a.out).write_text(json.dumps({
        "command": f"PYTHONPATH=src python benchmarks/napsu/pgm_optimiser.py --max-iter {a.max_iter} "
                   f"--dampings {a.dampings}",
        "model": {"d": int(d), "n": int(problem.n), "epsilon": 1.0, "selection": "AIM, (age, race, sex, income) required",
                  "noisy_counts_below_zero": int((s < 0).sum())},
        "library_damping": likelihood.PGM_DAMPING, "loadavg": os.getloadavg(), "results": rows}, indent=1) + "\n")


if __name__ == "__main__":
    main()
