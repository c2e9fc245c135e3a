"""Does NUTS with the one-sided map sample the same Adult posterior as long plain NUTS?

The map (``synthinfer.napsu.reparam``) is an exact change of variables, so the question
is only whether the sampler explores the posterior as well. For each epsilon this fits the
Adult model of ``adult_coverage.py`` (10 paper marginals, delta = n^-2, reference categories
from the noisy counts), then runs on the same noisy counts

* NUTS with the map, 4 chains x (800 + 2000): what ``NapsuMQ`` does;
* plain NUTS on the Laplace-whitened posterior (``one_sided_threshold=-inf``), longer:
  4 chains x (``--plain-warmup`` + ``--plain-samples``),

and compares the quantiles 2.5, 25, 50, 75, 97.5% of every parameter with two-sample z-scores
``(q_map - q_plain) / sqrt(mcse_map^2 + mcse_plain^2)`` (ArviZ's quantile MCSE). If both
sample the same posterior the z-scores are roughly N(0, 1) (5 x 130 correlated of them per
epsilon); a part of the posterior one sampler never visits shows up as a block of large ones.

    PYTHONPATH=src python benchmarks/napsu/one_sided_check.py --epsilons 1.0,0.1

``--reuse-plain FILE`` takes the plain run's quantiles (and, where recorded, their MCSE) from an
earlier output for the same epsilons instead of running it again (the plain run is the slow
one, ~30 min at epsilon = 1): the fits use fixed seeds, so the noisy counts are the same. Where
the earlier file has no plain MCSE, the z-scores use the map run's MCSE alone, which can only
make them larger in magnitude (conservative).

Outputs ``results/one_sided_check.json`` and ``.png``.
"""

from __future__ import annotations

import argparse
import json
import os
import time
import warnings
from pathlib import Path

import numpy as np

from synthinfer._jax import single_threaded_blas
from synthinfer.datasets import ADULT_PAPER_MARGINALS, load_adult
from synthinfer.errors import ConvergenceWarning
from synthinfer.generate import NapsuMQ
from synthinfer.mcmc import convergence_diagnostics
from synthinfer.napsu import diagnostics, nuts

PROBS = (0.025, 0.25, 0.5, 0.75, 0.975)


def run(gen: NapsuMQ, threshold: float, warmup: int, samples: int, seed: int) -> dict:
    t0 = time.perf_counter()
    res = nuts.nuts_sample(gen.network_, gen.noisy_counts_, gen.sigma_dp_, gen.n_, gen.laplace_,
                          n_chains=4, num_warmup=warmup, num_samples=samples, one_sided_threshold=threshold,
                          dropped_cell_jacobian=gen.network_.dropped_cell_log_prob_jacobian, rng=np.random.default_rng(seed))
    seconds = time.perf_counter() - t0
    post = diagnostics.to_inference_data(res.draws)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        diag = convergence_diagnostics(post, ["theta"])
    return {"post": post, "seconds": seconds, "one_sided": res.n_one_sided,
            "gradients_per_draw": res.n_grad_evals / (4 * (warmup + samples)),
            "divergences": int(res.diverging.sum()), "rhat_max": diag["rhat_max"],
            "ess_bulk_min": diag["ess_bulk_min"], "ess_tail_min": diag["ess_tail_min"],
            "step_size": res.step_size.tolist(), "warmup": warmup, "samples": samples}


def quantiles(post) -> tuple[np.ndarray, np.ndarray]:
    """(quantiles, their MCSE), each (len(PROBS), d)."""
    import arviz as az

    draws = post.posterior["theta"].values.reshape(-1, post.posterior["theta"].shape[-1])
    q = np.array([np.quantile(draws, p, axis=0) for p in PROBS])
    se = np.array([np.asarray(az.mcse(post, method="quantile", prob=p)["theta"]) for p in PROBS])
    return q, se


def compare(a: tuple, b: tuple) -> dict:
    """z-scores of the map's quantiles ``a = (q, se)`` against the plain run's ``b = (q, se or None)``."""
    (qa, sa), (qb, sb) = a, b
    out = {"prob": list(PROBS), "q_map": qa.tolist(), "q_plain": qb.tolist(), "se_map": sa.tolist(),
           "se_plain": None if sb is None else sb.tolist(),
           "z": ((qa - qb) / (sa if sb is None else np.hypot(sa, sb))).tolist()}
    z = np.abs(np.array(out["z"]))
    out["max_abs_z"] = float(z.max())
    out["share_abs_z_over_3"] = float((z > 3).mean())
    return out


def plot(payload: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from scipy import stats

    eps = list(payload["runs"])
    fig, axes = plt.subplots(2, len(eps), figsize=(5 * len(eps), 8.5), squeeze=False)
    for k, e in enumerate(eps):
        c = payload["runs"][e]["compare"]
        qa, qb, z = (np.array(c[key]) for key in ("q_map", "q_plain", "z"))
        ax = axes[0, k]
        for i, p in enumerate(c["prob"]):
            ax.scatter(qb[i], qa[i], s=6, label=f"{p:.3g}")
        lim = [min(qa.min(), qb.min()), max(qa.max(), qb.max())]
        ax.plot(lim, lim, "k-", lw=0.6)
        m, pl = payload["runs"][e]["map"], payload["runs"][e]["plain"]
        ax.set(xlabel=f"plain NUTS 4x({pl['warmup']}+{pl['samples']}) quantile",
               ylabel="NUTS with the one-sided map quantile",
               title=f"epsilon = {e}: theta quantiles\nmap {m['seconds']:.0f} s, {m['gradients_per_draw']:.0f} grad/draw; "
                     f"plain {pl['seconds']:.0f} s, {pl['gradients_per_draw']:.0f} grad/draw")
        ax.legend(title="quantile", fontsize=7)
        ax = axes[1, k]
        ax.hist(z.ravel(), bins=40, density=True, alpha=0.7)
        x = np.linspace(-5, 5, 200)
        ax.plot(x, stats.norm.pdf(x), "k-", lw=1, label="N(0, 1)")
        ax.set(xlabel="z = (q_map - q_plain) / MCSE", ylabel="density",
               title=f"max |z| = {c['max_abs_z']:.2f}, share |z| > 3: {c['share_abs_z_over_3']:.3f}")
        ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--epsilons", default="1.0")
    ap.add_argument("--map-warmup", type=int, default=800)
    ap.add_argument("--map-samples", type=int, default=2000)
    ap.add_argument("--plain-warmup", type=int, default=1000)
    ap.add_argument("--plain-samples", type=int, default=5000)
    ap.add_argument("--out", default="benchmarks/napsu/results/one_sided_check.json")
    ap.add_argument("--reuse-plain", help="earlier output whose plain runs to compare against")
    a = ap.parse_args()
    warnings.simplefilter("ignore", ConvergenceWarning)
    ds = load_adult(paper_subset=True)
    n = len(ds.data)
    payload = {"settings": {"marginals": ADULT_PAPER_MARGINALS, "delta": n**-2.0, "probs": list(PROBS),
                            "command": "python benchmarks/napsu/one_sided_check.py --epsilons " + a.epsilons},
               "runs": {}}
    earlier = json.loads(Path(a.reuse_plain).read_text())["runs"] if a.reuse_plain else None
    if a.reuse_plain:
        payload["settings"]["command"] += f" --reuse-plain {a.reuse_plain}"
    for eps in (float(e) for e in a.epsilons.split(",")):
        gen = NapsuMQ(ADULT_PAPER_MARGINALS, epsilon=eps, delta=n**-2.0, inference="laplace",
                      cell_prior=0.0,  # the map is made for the normal prior's plateaus
                      seed=np.random.default_rng([7, int(eps * 10)])).fit(ds.data, ds.domain)
        with single_threaded_blas():
            m = run(gen, 5.0, a.map_warmup, a.map_samples, seed=1)
            if earlier is None:
                p = run(gen, -np.inf, a.plain_warmup, a.plain_samples, seed=2)
                plain_q = quantiles(p.pop("post"))
            else:
                old = earlier[str(eps)]
                if old["reference"] != gen.queries_.reference:
                    raise SystemExit(f"--reuse-plain: epsilon {eps} was fitted with other reference categories")
                p = dict(old["plain"], reused_from=a.reuse_plain)
                c = old["compare"]
                plain_q = (np.array(c["q_plain"]), None if c.get("se_plain") is None else np.array(c["se_plain"]))
        runs = {"map": {k: v for k, v in m.items() if k != "post"},
                "plain": p,
                "compare": compare(quantiles(m["post"]), plain_q),
                "reference": gen.queries_.reference}
        payload["runs"][str(eps)] = runs
        payload["loadavg"] = os.getloadavg()
        tmp = Path(a.out + ".tmp")
        tmp.write_text(json.dumps(payload))
        os.replace(tmp, a.out)
        plot(payload, Path(a.out).with_suffix(".png"))
        print(f"eps {eps}: map {m['seconds']:.0f} s ({m['gradients_per_draw']:.1f} grad/draw, R-hat {m['rhat_max']:.4f}, "
              f"ESS {m['ess_bulk_min']:.0f}); plain {p['seconds']:.0f} s ({p['gradients_per_draw']:.1f}, "
              f"R-hat {p['rhat_max']:.4f}); max |z| {runs['compare']['max_abs_z']:.2f}", flush=True)


if __name__ == "__main__":
    from synthinfer import float64

    with float64():  # the script calls lower-level JAX code (network passes, likelihoods) directly
        main()
