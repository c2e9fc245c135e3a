"""Speed of NAPSU-MQ on the toy problem and on Adult, with and without JIT compilation.

"with compile" is the first call in a fresh process, what a user waits for after
``import synthinfer`` (BlackJAX and ArviZ, which synthinfer imports lazily while programs
compile, are counted); "without" is a second identical call, which hits JAX's compilation
cache. For NUTS on Adult only one full run is made; its compile time is estimated by a
10 + 10 draw run (whose sampling time is negligible). ``--skip-adult-nuts`` leaves out the full
4 x (800 + 2000) Adult run (minutes; the quick check of ``make bench``). The JSON is rewritten
after each section, so partial results survive. ``persistent_cache`` runs the toy pipeline
and the Adult Laplace fit + 100 datasets in two new processes sharing an empty directory as
JAX's persistent compilation cache (``synthinfer.enable_compilation_cache``, on by default in
the CLI): the first process fills it, the second is what a later run waits for (the import of
synthinfer itself excluded).

    PYTHONPATH=src python benchmarks/napsu/speed.py [--skip-adult-nuts] [--out FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

from synthinfer._jax import jax, jnp, single_threaded_blas
from synthinfer.datasets import ADULT_PAPER_MARGINALS, load_adult, make_toy_logistic
from synthinfer.errors import ConvergenceWarning
from synthinfer.generate import NapsuMQ
from synthinfer.napsu import likelihood

RESULTS = Path(__file__).resolve().parent / "results"


def timed(f):
    t = time.perf_counter()
    out = f()
    return out, time.perf_counter() - t


def gradient_ms(gen: NapsuMQ, reps: int = 50) -> tuple[float, float]:
    """(compile s, ms per call) of the jitted value-and-gradient of the log posterior."""
    args = (jnp.asarray(gen.noisy_counts_), jnp.asarray(gen.sigma_dp_), jnp.asarray(float(gen.n_)), jnp.asarray(10.0))
    mc = gen.network_.mean_and_cov
    vg = jax.jit(jax.value_and_grad(lambda th: likelihood.log_posterior(th, *args[:3], mc, args[3])))
    x = jnp.asarray(gen.draws_[0, 0])
    with single_threaded_blas():  # as inside NapsuMQ.fit
        _, tc = timed(lambda: jax.block_until_ready(vg(x)))
        _, tr = timed(lambda: [jax.block_until_ready(vg(x)) for _ in range(reps)])
    return tc, 1e3 * tr / reps


def save(res: dict, out: Path) -> None:
    out.parent.mkdir(parents=True, exist_ok=True)
    res["loadavg_end"] = os.getloadavg()
    tmp = out.with_name(out.name + ".tmp")
    tmp.write_text(json.dumps(res, indent=1, default=str))
    os.replace(tmp, out)


_CACHED_RUN = """
import json, sys, time, warnings
import synthinfer
from synthinfer.datasets import ADULT_PAPER_MARGINALS, load_adult, make_toy_logistic
from synthinfer.generate import NapsuMQ
warnings.simplefilter("ignore")
synthinfer.enable_compilation_cache(sys.argv[1])
t = time.perf_counter()
ds = make_toy_logistic(2000, (1.0, 0.0), seed=0)
NapsuMQ([("x1", "x2", "y")], epsilon=1.0, delta=2000**-2.0, inference="nuts", seed=1).fit(ds.data, ds.domain).generate(100, seed=2)
toy = time.perf_counter() - t
ad = load_adult(paper_subset=True)
t = time.perf_counter()
NapsuMQ(ADULT_PAPER_MARGINALS, epsilon=1.0, delta=len(ad.data)**-2.0, inference="laplace", seed=1).fit(ad.data, ad.domain).generate(100, seed=3)
print(json.dumps({"toy_pipeline_s": toy, "adult_laplace_and_100_datasets_s": time.perf_counter() - t}))
"""


def persistent_cache() -> dict:
    """Both pipelines in a new process with an empty, then a filled, persistent compilation cache."""
    out = {}
    with tempfile.TemporaryDirectory() as cache:
        for label in ("empty_cache", "filled_cache"):
            r = subprocess.run([sys.executable, "-c", _CACHED_RUN, cache],
                               capture_output=True, text=True, check=True)
            out[label] = json.loads(r.stdout.strip().splitlines()[-1])
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--skip-adult-nuts", action="store_true", help="leave out the full Adult NUTS fit")
    ap.add_argument("--out", type=Path, default=RESULTS / "speed.json")
    a = ap.parse_args()
    warnings.simplefilter("ignore", ConvergenceWarning)
    res: dict = {"loadavg_start": os.getloadavg(), "machine": platform.platform(), "cpu_count": os.cpu_count()}

    # -- toy: the whole pipeline, NUTS 4 x (800 + 2000) and 100 datasets of n = 2000 ---------
    ds = make_toy_logistic(2000, (1.0, 0.0), seed=0)
    toy = {}
    for label in ("with_compile", "without_compile"):
        def run():
            g = NapsuMQ([("x1", "x2", "y")], epsilon=1.0, delta=2000**-2.0, inference="nuts", seed=1).fit(ds.data, ds.domain)
            return g, g.generate(100, seed=2)
        (g, _), t = timed(run)
        toy[label] = {"total_s": t, "fit_timings": g.diagnostics_["timings"]}
    toy["nuts_gradient_evaluations"] = g.diagnostics_["nuts"]["gradient_evaluations"]
    toy["laplace_gradient_evaluations"] = g.diagnostics_["laplace"]["gradient_evaluations"]
    toy["rhat_max"] = g.diagnostics_["nuts"]["rhat_max"]
    toy["ess_bulk_min"] = g.diagnostics_["nuts"]["ess_bulk_min"]
    toy["gradient_compile_s"], toy["gradient_ms"] = gradient_ms(g)
    res["toy"] = toy
    save(res, a.out)
    print(json.dumps(toy, indent=1), flush=True)
    res["persistent_cache"] = persistent_cache()
    save(res, a.out)
    print(json.dumps(res["persistent_cache"], indent=1), flush=True)

    # -- Adult --------------------------------------------------------------------------------
    ad = load_adult(paper_subset=True)
    n = len(ad.data)
    adult: dict = {"n": n, "marginals": ADULT_PAPER_MARGINALS}
    res["adult"] = adult
    for label in ("with_compile", "without_compile"):
        g, t = timed(lambda: NapsuMQ(ADULT_PAPER_MARGINALS, epsilon=1.0, delta=n**-2.0, inference="laplace", seed=1).fit(ad.data, ad.domain))
        adult[f"laplace_{label}_s"] = t
        adult[f"laplace_{label}_timings"] = g.diagnostics_["timings"]
    adult["canonical_queries"] = int(g.queries_.dimension)
    adult["laplace"] = {k: v for k, v in g.diagnostics_["laplace"].items() if k != "attempts"}
    adult["gradient_compile_s"], adult["gradient_ms"] = gradient_ms(g)
    save(res, a.out)
    print(json.dumps(adult, indent=1, default=str), flush=True)
    for label in ("with_compile", "without_compile"):
        _, t = timed(lambda: g.generate(100, seed=3))
        adult[f"generate_100_{label}_s"] = t
    save(res, a.out)
    print(adult["generate_100_with_compile_s"], adult["generate_100_without_compile_s"], flush=True)
    small = NapsuMQ(ADULT_PAPER_MARGINALS, epsilon=1.0, delta=n**-2.0, inference="nuts", num_warmup=10,
                    num_samples=10, seed=1).fit(ad.data, ad.domain)
    adult["nuts_compile_estimate_s"] = small.diagnostics_["timings"]["nuts"]
    adult["nuts_10_10_gradient_evaluations"] = small.diagnostics_["nuts"]["gradient_evaluations"]
    if a.skip_adult_nuts:
        res["skipped"] = ["adult NUTS 4 x (800 + 2000)"]
    save(res, a.out)
    if a.skip_adult_nuts:
        return
    gn, t = timed(lambda: NapsuMQ(ADULT_PAPER_MARGINALS, epsilon=1.0, delta=n**-2.0, inference="nuts", seed=1).fit(ad.data, ad.domain))
    nd = gn.diagnostics_["nuts"]
    adult["nuts_fit_with_compile_s"] = t
    adult["nuts_fit_timings"] = gn.diagnostics_["timings"]
    adult["nuts"] = {k: v for k, v in nd.items() if k not in ("rhat", "ess_bulk")}
    save(res, a.out)
    print(json.dumps(adult, indent=1, default=str))


if __name__ == "__main__":
    from synthinfer import float64

    with float64():  # the script calls lower-level JAX code (network passes, likelihoods) directly
        main()
