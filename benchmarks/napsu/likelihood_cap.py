"""AIM's cap on the noise-aware likelihood's work: what it costs a gradient and what it costs utility.

The default fit (``NapsuMQ([("age", "race", "sex", "income")], epsilon=1, select_extra="aim")``
on the full Adult table) for several seeds under each cap (``max_likelihood_flops``): the
model AIM selects, the message-passing plan's flop estimate of its likelihood, the measured
time of one gradient of the negative log posterior (the unit of work of the Laplace fit and of
NUTS, which takes ~90,000 of them by default; minimum of 20 calls, one BLAS thread, wall and
process CPU), and the utility of the selected measurements: mean and largest total variation
distance over every 1- and 2-way marginal of private-pgm's MirrorDescent estimate on them
(``default_fit.mbi_point_estimate``; the posterior is not sampled here). AIM's noise comes from
OpenDP's samplers, which take no seed, so a seed fixes AIM's own choices but not the noise:
compare the caps over seeds, not seed by seed.

    PYTHONPATH=src python benchmarks/napsu/likelihood_cap.py --caps 100000000,3000000 \\
        --seeds 0,1,2,3,4,5,6,7 --out benchmarks/napsu/results/likelihood_cap.json

and ``--plot`` to draw ``likelihood_cap.png`` from the JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from default_fit import mbi_point_estimate  # noqa: E402  (a sibling benchmark)


class _Captured(Exception):
    """Raised by the capturing backend: the fit stops once its posterior problem is built."""


def capture_problem(data, domain, seed: int, cap: int):
    """The default fit up to inference: the fitted estimator (selection, measurements and
    network) and its :class:`synthinfer.napsu.backends.PosteriorProblem`."""
    from synthinfer.napsu import NapsuMQ
    from synthinfer.napsu.backends import register_backend

    seen = {}

    class Capture:  # a backend that keeps the problem and stops the fit
        name, noise_aware, takes_measurements = "capture-problem", True, True

        def run(self, problem, settings, **kwargs):
            seen["problem"] = problem
            raise _Captured

    register_backend(Capture())
    gen = NapsuMQ([("age", "race", "sex", "income")], epsilon=1.0, select_extra="aim", seed=seed,
                  max_likelihood_flops=cap, inference="capture-problem")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            gen.fit(data, domain)
        except _Captured:
            pass
    return gen, seen["problem"]


def gradient_seconds(problem, repeats: int = 20) -> tuple[float, float, float]:
    """Compile time, and the smallest wall and process-CPU time of one gradient."""
    from synthinfer import float64
    from synthinfer._jax import jax, jnp, single_threaded_blas
    from synthinfer.napsu.likelihood import objective

    net = problem.network
    loss, _ = objective(net, "neg_log_posterior", problem.layout)
    with single_threaded_blas(), float64():
        var = np.broadcast_to(np.asarray(problem.sigma, dtype=float), np.shape(problem.noisy_counts)) ** 2
        args = (jnp.asarray(problem.noisy_counts), jnp.asarray(var), float(problem.n), problem.prior_sd,
                problem.cell_prior, problem.interaction_sd)
        grad = jax.jit(jax.grad(loss))
        theta = jnp.zeros(net.dimension)
        t = time.perf_counter()
        jax.block_until_ready(grad(theta, *args))
        compile_s = time.perf_counter() - t
        walls, cpus = [], []
        for _ in range(repeats):
            t, c = time.perf_counter(), time.process_time()
            jax.block_until_ready(grad(theta, *args))
            walls.append(time.perf_counter() - t)
            cpus.append(time.process_time() - c)
    return compile_s, min(walls), min(cpus)


def run(caps: list[int], seeds: list[int]) -> list[dict]:
    from synthinfer._jax import jax
    from synthinfer.data import encode
    from synthinfer.datasets import adult_domain, load_adult
    from synthinfer.napsu.network import _memory_maps
    from synthinfer.napsu.structured import plan

    data, domain = load_adult(categorical=True).data, adult_domain(derived=True)
    rows = []
    for cap in caps:
        for seed in seeds:
            gen, problem = capture_problem(data, domain, seed, cap)
            net = problem.network
            names = net.queries.domain.names
            compile_s, wall, cpu = gradient_seconds(problem)
            model = net.queries.domain
            rows.append({
                "cap": cap, "seed": seed, "d": int(net.dimension), "loadavg": os.getloadavg(),
                "likelihood_flops": int(plan(net, problem.layout).flops),
                "aim_likelihood_flops": int(gen.aim_.likelihood_flops),
                "gradient_ms": 1e3 * wall, "gradient_cpu_ms": 1e3 * cpu, "gradient_compile_s": compile_s,
                "cliques_over_2_columns": [[names[v] for v in c] for c in net.junction_tree.cliques if len(c) > 2],
                "mbi_utility": mbi_point_estimate(gen, encode(data[list(model.names)], model))["utility"],
            })
            # mbi's programs live in JAX's global caches, one set per model shape: without this
            # a dozen models pass the process's memory-map limit (vm.max_map_count)
            jax.clear_caches()
            rows[-1]["memory_maps"] = _memory_maps()
            print(json.dumps(rows[-1]), flush=True)
    return rows


def plot(res: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = res["rows"]
    caps = sorted({r["cap"] for r in rows}, reverse=True)
    fig, (a, b) = plt.subplots(1, 2, figsize=(10, 4))
    for cap, marker in zip(caps, "os^v"):
        mine = [r for r in rows if r["cap"] == cap]
        label = f"cap {cap:.0e} flops"
        a.scatter([r["likelihood_flops"] for r in mine], [r["gradient_ms"] for r in mine], marker=marker, label=label)
        b.scatter([r["gradient_ms"] for r in mine], [r["mbi_utility"]["tv_2way_mean"] for r in mine], marker=marker,
                  label=label)
    a.set(xscale="log", xlabel="likelihood flops (plan estimate)", ylabel="gradient, ms (min of 20, one core)",
          title="gradient cost of AIM's models")
    b.set(xlabel="gradient, ms", ylabel="mean TV of 2-way marginals (mbi)",
          title="utility of the selected measurements")
    a.legend()
    b.legend()
    fig.suptitle("Full Adult, epsilon 1, default fit: AIM's likelihood cap", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--caps", default="100000000,3000000")
    ap.add_argument("--seeds", default="0,1,2,3,4,5,6,7")
    ap.add_argument("--out", default=str(Path(__file__).resolve().parent / "results" / "likelihood_cap.json"))
    ap.add_argument("--plot", action="store_true", help="only draw the PNG from --out")
    a = ap.parse_args()
    out = Path(a.out)
    if not a.plot:
        rows = run([int(float(c)) for c in a.caps.split(",")], [int(s) for s in a.seeds.split(",")])
        summary = {}
        for cap in sorted({r["cap"] for r in rows}):
            mine = [r for r in rows if r["cap"] == cap]
            summary[str(cap)] = {
                "gradient_ms_median": float(np.median([r["gradient_ms"] for r in mine])),
                "gradient_ms_max": float(max(r["gradient_ms"] for r in mine)),
                "likelihood_flops_max": int(max(r["likelihood_flops"] for r in mine)),
                **{k: float(np.mean([r["mbi_utility"][k] for r in mine])) for k in mine[0]["mbi_utility"]},
            }
        out.write_text(json.dumps({"command": " ".join(["python", "benchmarks/napsu/likelihood_cap.py", *sys.argv[1:]]),
                                   "nproc": os.cpu_count(), "summary": summary, "rows": rows}, indent=1))
    plot(json.loads(out.read_text()), out.with_suffix(".png"))


if __name__ == "__main__":
    main()
