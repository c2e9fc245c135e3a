"""What a user waits for with every default: NAPSU-MQ with AIM on the full Adult table.

``NapsuMQ([("age", "race", "sex", "income")], epsilon=1, select_extra="aim")`` fitted to
``load_adult(categorical=True)`` with ``adult_domain(derived=True)`` and nothing else set: the
default ties the selected marginals' near-empty interactions, ``inference="auto"`` samples the
tied model with NUTS and the draws follow the model (4 x (400 + 400) above 200 parameters). One
fit per seed; wall and process CPU time (and the fit's stages), the load average, the sampler's
choice and diagnostics, and the warnings the user sees. Beside each fit, in the same run, the
peer's point estimate on the same measurements: private-pgm's ``MirrorDescent`` (``mbi`` 2.x,
1000 iterations, float64 as synthinfer computes; first call and warm), which gives no
uncertainty, and the utility of both: mean and largest total variation distance over the 1- and
2-way marginals of every column, NAPSU-MQ's over 5 synthetic datasets, the PGM estimate's
from its own marginals. For each fit, the five parameters that mixed worst (smallest bulk ESS)
and what they set.

    PYTHONPATH=src python benchmarks/napsu/default_fit.py --seeds 0,1 \\
        --out benchmarks/napsu/results/default_fit.json
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import subprocess
import sys
import time
import warnings
from pathlib import Path

import numpy as np

from synthinfer.data import encode
from synthinfer.reporting.fidelity import marginal_shares, tv_matrix


def _clock(fn):
    t, c = time.perf_counter(), time.process_time()
    out = fn()
    return out, time.perf_counter() - t, time.process_time() - c


def mbi_point_estimate(gen, real_codes: np.ndarray, iters: int = 1000) -> dict:
    """private-pgm's MirrorDescent on the fit's own measurements (AIM's, each with its noise sd)."""
    from synthinfer import float64
    from synthinfer._jax import jax, single_threaded_blas

    with warnings.catch_warnings():  # mbi warns at import about JAX's float32 default
        warnings.simplefilter("ignore", UserWarning)
        import mbi
        from mbi.estimation import MirrorDescent

    domain = gen.network_.queries.domain
    mdom = mbi.Domain(domain.names, domain.shape)
    measured = []
    for m in gen.measurements_:
        if m.groups is not None or m.cells.size != m.marginal.size(domain):
            raise SystemExit("default_fit.py: mbi takes whole marginals; this fit measured parts of one")
        measured.append(mbi.LinearMeasurement(m.values, tuple(m.marginal.columns), stddev=float(m.variance) ** 0.5))

    def run():
        return jax.block_until_ready(MirrorDescent().estimate(mdom, measured, known_total=float(gen.n_), iters=iters))

    k = len(domain.names)
    tv = np.zeros((k, k))  # the estimate's own marginals against the real ones (codes: real_codes)
    with single_threaded_blas(), float64():
        (_, first_wall, first_cpu), (fitted, warm_wall, warm_cpu) = _clock(run), _clock(run)
        for cols in [(i,) for i in range(k)] + list(itertools.combinations(range(k), 2)):
            p = np.asarray(fitted.project(tuple(domain.names[c] for c in cols)).datavector(), dtype=np.float64)
            tv[cols[0], cols[-1]] = tv[cols[-1], cols[0]] = 0.5 * np.abs(
                p / p.sum() - marginal_shares(real_codes, domain.shape, cols)).sum()
    return {"estimator": f"mbi.estimation.MirrorDescent(), {iters} iterations, float64", "measurements": len(measured),
            "first_wall_s": first_wall, "first_cpu_s": first_cpu, "warm_wall_s": warm_wall, "warm_cpu_s": warm_cpu,
            "utility": _tv_summary(tv)}


def slowest_parameters(gen, k: int = 5) -> list[dict]:
    """The ``k`` parameters with the smallest bulk ESS: what each one sets (its first canonical
    query's marginal and cell, how many queries it ties, its interaction order)."""
    nuts = gen.diagnostics_.get("nuts", {})
    ess, rhat = nuts.get("ess_bulk"), nuts.get("rhat")
    if not ess:
        return []
    params = gen.network_.queries
    canonical = getattr(params, "canonical", params)  # tied networks: InteractionFeatures
    described = canonical.describe()
    out = []
    for j in np.argsort(np.asarray(ess, dtype=float))[:k]:
        first = int(params.members[j][0]) if hasattr(params, "members") else int(j)
        marginal, cell = described[first]
        out.append({"parameter": int(j), "ess_bulk": ess[j], "rhat": None if rhat is None else rhat[j],
                    "marginal": list(marginal.columns), "cell": list(cell),
                    "tied_queries": len(params.members[j]) if hasattr(params, "members") else 1,
                    "order": int(params.order[j]) if hasattr(params, "order") else None})
    return out


def _tv_summary(tv: np.ndarray) -> dict[str, float]:
    one, two = np.diag(tv), tv[np.triu_indices(len(tv), 1)]
    return {"tv_1way_mean": float(one.mean()), "tv_1way_max": float(one.max()),
            "tv_2way_mean": float(two.mean()), "tv_2way_max": float(two.max())}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", default="0,1")
    ap.add_argument("--epsilon", type=float, default=1.0)
    ap.add_argument("--reference", default="most_frequent", help="NapsuMQ's reference (default: its default)")
    ap.add_argument("--out", default=str(Path(__file__).resolve().parent / "results" / "default_fit.json"))
    ap.add_argument("--save", type=Path, default=None,
                    help="folder to keep each fit (fit_SEED.npz) and its draws (draws_SEED.npy) in, for sampling its "
                         "posterior again (NapsuMQ.load(...).resample_posterior) on the same noisy counts")
    a = ap.parse_args()
    from synthinfer._jax import jax
    from synthinfer.datasets import adult_domain, load_adult
    from synthinfer.napsu import NapsuMQ

    data, domain = load_adult(categorical=True).data, adult_domain(derived=True)
    runs = []
    for seed in (int(s) for s in a.seeds.split(",")):
        load = os.getloadavg()
        t, c = time.perf_counter(), time.process_time()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            gen = NapsuMQ([("age", "race", "sex", "income")], epsilon=a.epsilon, select_extra="aim",
                          seed=seed, reference=a.reference).fit(data, domain)
        nuts = gen.diagnostics_.get("nuts", {})
        runs.append({"seed": seed, "reference": {c: gen.domain_[c].categories[k] for c, k in gen.queries_.reference.items()},
                     "fit_wall_s": time.perf_counter() - t, "fit_cpu_s": time.process_time() - c,
                     "loadavg_before": load, "loadavg_after": os.getloadavg(), "d": int(gen.network_.dimension),
                     "auto": gen.diagnostics_.get("auto"), "draws": gen.diagnostics_["draws"],
                     "timings": gen.diagnostics_.get("timings"),
                     "rhat_max": nuts.get("rhat_max"), "rhat_limit_max": nuts.get("rhat_limit_max"),
                     "ess_bulk_min": nuts.get("ess_bulk_min"),
                     "passes": nuts.get("passes"), "draws_set_aside": nuts.get("draws_set_aside"),
                     "jump_parameters": nuts.get("plateau_jump_parameters"), "divergences": nuts.get("divergences"),
                     "target_accept": nuts.get("target_accept"), "earlier_runs": nuts.get("earlier_runs"),
                     "gradients_per_draw": nuts.get("gradient_evaluations_per_draw"),
                     "warnings": [str(w.message)[:120] for w in caught]})
        net = gen.network_.queries.domain
        real_codes = encode(data[list(net.names)], net)
        synthetic = [encode(df[list(net.names)], net) for df in gen.generate(5, seed=seed)]
        runs[-1]["utility"] = _tv_summary(tv_matrix(real_codes, synthetic, net.shape))  # 5 synthetic datasets
        runs[-1]["mbi"] = mbi_point_estimate(gen, real_codes)
        runs[-1]["slowest_parameters"] = slowest_parameters(gen)
        if a.save is not None:  # the noisy measurements and the draws: no rows of the data
            a.save.mkdir(parents=True, exist_ok=True)
            gen.save(a.save / f"fit_{seed}.npz")
            np.save(a.save / f"draws_{seed}.npy", np.asarray(gen.posterior_.posterior["theta"]))
        del gen
        jax.clear_caches()  # mbi's programs, one set per model, stay in JAX's global caches otherwise
        print(json.dumps(runs[-1]), flush=True)
    code = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    Path(a.out).write_text(json.dumps({"command": " ".join(["python", "benchmarks/napsu/default_fit.py", *sys.argv[1:]]),
                                       "commit": code, "nproc": os.cpu_count(), "runs": runs}, indent=1))


if __name__ == "__main__":
    main()
