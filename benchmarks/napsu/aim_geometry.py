"""Where the Laplace-whitened NUTS target of NAPSU-MQ + AIM departs from a standard normal.

On the full Adult table (15 columns, AIM with the all-2-way workload, the paper's 10 marginals
forced, epsilon ``--epsilon``, ``--seed``), fits the Laplace approximation, then in its
whitened coordinates ``z = chol^-1 (theta - mean)`` (where the Laplace Gaussian is N(0, I))
runs BlackJAX's Stan window adaptation (``--warmup`` steps, diagonal mass matrix). Recorded:
the adapted step size and inverse mass matrix (the posterior variance of each whitened
coordinate: 1 where Laplace is right), the leapfrog steps per iteration at the end of the
warmup (what each draw would then cost), the coordinates the adaptation widened most
with the canonical query each belongs to (marginal, cell, its Laplace mean and sd, the fitted
and measured count and the measurement's noise sd), and the log density along those
coordinates' axes from the mode (a Gaussian would give -t^2/2). Process CPU and wall time and
the load average with each stage.

    PYTHONPATH=src python benchmarks/napsu/aim_geometry.py [--epsilon 1.0] [--seed 0] [--warmup 200] \
        [--derived] [--required-share F] [--interaction-sd TAU] [--out ...]

Output: ``results/aim_geometry.json``. Tens of minutes on 2 cores (the warmup dominates).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import warnings
from pathlib import Path

os.environ.setdefault("XLA_FLAGS", "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1")

import numpy as np  # noqa: E402

HERE = Path(__file__).resolve().parent


def _clock(fn):
    w, c, load = time.perf_counter(), time.process_time(), os.getloadavg()
    out = fn()
    return out, {"wall_s": time.perf_counter() - w, "cpu_s": time.process_time() - c, "loadavg_before": load}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--epsilon", type=float, default=1.0)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--warmup", type=int, default=200)
    ap.add_argument("--top", type=int, default=20)
    ap.add_argument("--derived", action="store_true", help="education-num derived from education (as aim_fit.py --derived)")
    ap.add_argument("--required-share", type=float, default=None, help="NapsuMQ's required_share (default: the library's)")
    ap.add_argument("--interaction-sd", type=float, default=None, help="NapsuMQ's interaction_sd (default: the library's; 0: None)")
    ap.add_argument("--out", default=str(HERE / "results" / "aim_geometry.json"))
    a = ap.parse_args()

    import blackjax

    from synthinfer import float64
    from synthinfer._jax import jax, jnp
    from synthinfer.datasets import ADULT_PAPER_MARGINALS, adult_domain, load_adult
    from synthinfer.errors import ConvergenceWarning
    from synthinfer.napsu import NapsuMQ
    from synthinfer.napsu.likelihood import objective, posterior_args
    from synthinfer.napsu.structured import canonical_summary

    warnings.simplefilter("ignore", ConvergenceWarning)
    ds = load_adult(categorical=True)
    n = len(ds.data)
    out: dict = {"command": " ".join(["python", "benchmarks/napsu/aim_geometry.py", *sys.argv[1:]]),
                 "n": n, "epsilon": a.epsilon, "delta": n**-2.0, "nproc": os.cpu_count()}
    share = {} if a.required_share is None else {"required_share": a.required_share}
    if a.interaction_sd is not None:
        share["interaction_sd"] = a.interaction_sd or None
    gen = NapsuMQ(ADULT_PAPER_MARGINALS, epsilon=a.epsilon, delta=n**-2.0, inference="laplace", select_extra="aim",
                  seed=a.seed, num_samples=25, **share)
    domain = adult_domain(derived=True) if a.derived else ds.domain
    _, out["fit"] = _clock(lambda: gen.fit(ds.data, domain))
    net, lap = gen.network_, gen.laplace_
    d = int(net.dimension)
    out["d"] = d
    out["prior"] = {"prior_sd": gen.prior_sd, "cell_prior": gen.cell_prior, "interaction_sd": gen.interaction_sd}
    sigma = np.concatenate([np.full(m.values.size, np.sqrt(max(m.variance, 1 / 12))) for m in gen.measurements_])
    s_can, sd_can = canonical_summary(net.queries, gen.layout_, gen.noisy_counts_, sigma)
    desc = gen.queries_.describe()

    def save():
        Path(a.out).write_text(json.dumps(out, indent=1, default=float))

    with float64():
        args = posterior_args(gen.noisy_counts_, sigma, n, gen.prior_sd, gen.cell_prior, gen.interaction_sd)
        loss = objective(net, "neg_log_posterior", gen.layout_)[0]
        L, mean = jnp.asarray(lap.chol), jnp.asarray(lap.mean)

        def logdensity(z):
            return -loss(mean + L @ z, *args)

        mu = np.asarray(net.mean_and_cov(mean)[0]) * n
        warmup = blackjax.window_adaptation(blackjax.nuts, logdensity, is_mass_matrix_diagonal=True)
        z0 = jnp.asarray(np.random.default_rng(a.seed).standard_normal(d))
        ((state, params), info), out["warmup"] = _clock(
            lambda: jax.block_until_ready(warmup.run(jax.random.key(a.seed), z0, num_steps=a.warmup)))
        steps = np.asarray(info.info.num_integration_steps)
        minv = np.asarray(params["inverse_mass_matrix"])
        out["warmup"].update(step_size=float(params["step_size"]), gradients=int(steps.sum()),
                             steps_last_50=float(steps[-50:].mean()),
                             inverse_mass_quantiles=dict(zip(["0", "1%", "10%", "50%", "90%", "99%", "100%"],
                                                             np.quantile(minv, [0, .01, .1, .5, .9, .99, 1]).tolist())),
                             above_5=int((minv > 5).sum()), above_20=int((minv > 20).sum()))
        save()
        # one point at a time: a vmapped program of this likelihood is slow to compile
        value = jax.jit(logdensity)
        at_mode = float(value(jnp.zeros(d)))
        ts = np.linspace(-20.0, 20.0, 21)
        top = []
        for i in np.argsort(-minv)[: a.top]:
            top.append({"coordinate": int(i), "posterior_variance": float(minv[i]),
                        "marginal": list(desc[i][0].columns), "cell": [str(c) for c in desc[i][1]],
                        "theta_mode": float(lap.mean[i]), "laplace_sd": float(np.sqrt(lap.cov[i, i])),
                        "fitted_count": float(mu[i]), "measured_count": float(s_can[i]), "noise_sd": float(sd_can[i]),
                        "profile_t": ts.tolist(),
                        "profile_logp": [float(value(jnp.zeros(d).at[i].set(t))) - at_mode for t in ts]})
        out["widest"] = top
        save()
    print(json.dumps({k: out[k] for k in ("d", "warmup")}, default=float)[:2000])


if __name__ == "__main__":
    main()
