"""Importance sampling (PSIS) against NUTS on the paper's Adult model, on the same noisy counts.

For each epsilon (default 1 and 4; delta = n^-2, ``ADULT_PAPER_MARGINALS``, seed 1), one
``NapsuMQ(inference="nuts")`` fit with the defaults (4 x (800 + 2000)) gives the noisy counts
and the reference draws. On the same :class:`~synthinfer.napsu.backends.PosteriorProblem` the
``"importance"`` backend is then run without its NUTS fallback (``fallback=None``, so that
refused draws can be compared too), twice: "with compile" (the first call on this network:
the value program and the map's program compile) and "warm". Recorded per run: wall and
process CPU time (all threads), the load average, k-hat and its threshold, the PSIS ESS, the
proposal's profiled and one-sided coordinates and its log-density evaluations.

Agreement with NUTS, per parameter ``i`` (NUTS mean ``m_i``, variance ``v_i``, bulk ESS ``E_i``;
importance sampling's ESS ``E'_i`` of the parameter's mean and ``M`` resampled draws, from one
more :func:`~synthinfer.napsu.importance.importance_sample` call at the backend's Laplace fit):
``z_i = (mean_IS - m_i) / sqrt(v_i (1/E'_i + 1/M + 1/E_i))`` and the sd ratio ``sd_IS /
sqrt(v_i)``; the same for ``M`` draws of the Laplace approximation (``E'_i = M``) for scale. What the default backend would have done (accept, or warn and
fall back to NUTS) follows from k-hat. ``results/importance_vs_nuts.png`` plots the z-scores
and sd ratios.

    XLA_FLAGS="--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1" \\
        PYTHONPATH=src python benchmarks/napsu/importance_vs_nuts.py [--epsilons 1 4] [--plot-only]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time
import warnings
from pathlib import Path

import numpy as np

from synthinfer._jax import single_threaded_blas
from synthinfer.datasets import ADULT_PAPER_MARGINALS, load_adult
from synthinfer.errors import ConvergenceWarning
from synthinfer.generate import NapsuMQ
from synthinfer.napsu.backends import InferenceSettings, PosteriorProblem
from synthinfer.napsu.backends import ImportanceBackend
from synthinfer.napsu.importance import importance_sample

RESULTS = Path(__file__).resolve().parent / "results"


def timed(f):
    load = os.getloadavg()
    w, c = time.perf_counter(), time.process_time()
    out = f()
    return out, {"wall_s": time.perf_counter() - w, "cpu_s": time.process_time() - c, "loadavg_start": load,
                 "loadavg_end": os.getloadavg()}


def agreement(draws: np.ndarray, ess, ref: np.ndarray, ref_ess: np.ndarray) -> dict:
    """Per-parameter z-scores of the mean difference and sd ratios against the NUTS draws
    (``ess``: the effective sample size of each parameter's mean in ``draws``)."""
    x = draws.reshape(-1, draws.shape[-1])
    m, v = ref.mean(0), ref.var(0)
    z = (x.mean(0) - m) / np.sqrt(v * (1.0 / ess + 1.0 / x.shape[0] + 1.0 / ref_ess))
    ratio = x.std(0) / np.sqrt(v)
    return {"max_abs_z": float(np.abs(z).max()), "params_abs_z_over_4": int((np.abs(z) > 4).sum()),
            "sd_ratio_min": float(ratio.min()), "sd_ratio_max": float(ratio.max()),
            "sd_ratio_median": float(np.median(ratio)), "z": z.tolist(), "sd_ratio": ratio.tolist()}


def save(res: dict, out: Path) -> None:
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".tmp")
    tmp.write_text(json.dumps(res, indent=1, default=str))
    os.replace(tmp, out)


def plot(res: dict, out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    runs = res["runs"]
    fig, axes = plt.subplots(2, len(runs), figsize=(6 * len(runs), 7), squeeze=False)
    for col, r in enumerate(runs):
        for label, key, style in (("importance (PSIS)", "importance_vs_nuts", "o"), ("Laplace", "laplace_vs_nuts", "x")):
            a = r.get(key)
            if a is None:
                continue
            axes[0, col].plot(np.abs(a["z"]), style, ms=4, label=label)
            axes[1, col].plot(a["sd_ratio"], style, ms=4, label=label)
        imp = r["importance_vs_nuts"]
        verdict = "accepted" if imp["k_hat"] <= r["importance"]["warm"]["k_hat_threshold"] else "refused"
        axes[0, col].set_title(f"epsilon = {r['epsilon']}: k-hat {imp['k_hat']:.2f} ({verdict}), "
                               f"{imp['num_proposals']} proposal draws\nPSIS ESS {imp['ess']:.0f}, smallest ESS of a "
                               f"mean {imp['ess_min']:.0f} (z is relative to it)", fontsize=9)
        axes[0, col].axhline(4, color="grey", lw=0.8)
        axes[0, col].set_yscale("log")
        axes[0, col].set_ylabel("|z| of mean difference vs NUTS")
        axes[1, col].axhline(1, color="grey", lw=0.8)
        axes[1, col].set_yscale("log")
        axes[1, col].set_ylabel("sd ratio to NUTS")
        axes[1, col].set_xlabel("parameter")
        axes[0, col].legend(fontsize=8)
    fig.suptitle(f"Adult, paper's 10 marginals (d = {runs[0]['d']}): importance sampling and Laplace vs NUTS "
                 "on the same noisy counts", fontsize=11)
    fig.tight_layout()
    fig.savefig(out, dpi=110)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--epsilons", type=float, nargs="+", default=[1.0, 4.0])
    ap.add_argument("--out", type=Path, default=RESULTS / "importance_vs_nuts.json")
    ap.add_argument("--plot-only", action="store_true", help="redraw the PNG from the JSON")
    a = ap.parse_args()
    if a.plot_only:
        plot(json.loads(a.out.read_text()), a.out.with_suffix(".png"))
        return
    warnings.simplefilter("ignore", ConvergenceWarning)  # recorded in the diagnostics instead
    res: dict = {"loadavg_start": os.getloadavg(), "machine": platform.platform(), "cpu_count": os.cpu_count(),
                 "xla_flags": os.environ.get("XLA_FLAGS"), "runs": []}
    ad = load_adult(paper_subset=True)
    n = len(ad.data)
    for eps in a.epsilons:
        g, t_nuts = timed(lambda: NapsuMQ(ADULT_PAPER_MARGINALS, epsilon=eps, delta=n**-2.0, inference="nuts",
                                          seed=1).fit(ad.data, ad.domain))
        nd = g.diagnostics_["nuts"]
        run = {"epsilon": eps, "n": n, "d": int(g.queries_.dimension),
               "nuts": {**t_nuts, "timings": g.diagnostics_["timings"],
                        **{k: v for k, v in nd.items() if k not in ("rhat", "ess_bulk", "step_size")}}}
        ref = g.draws_.reshape(-1, g.draws_.shape[-1])
        ref_ess = np.asarray(nd["ess_bulk"], dtype=float)
        problem = PosteriorProblem(g.network_, g.noisy_counts_, g.sigma_dp_, g.n_, float(g.prior_sd))
        settings = InferenceSettings(n_chains=4, num_warmup=800, num_samples=2000, max_tree_depth=12,
                                     laplace_max_iter=6000, laplace_max_restarts=5)
        backend = ImportanceBackend(fallback=None)
        run["importance"] = {}
        for label in ("with_compile", "warm"):
            def go():
                with single_threaded_blas():  # as NapsuMQ.fit runs a backend
                    return backend.run(problem, settings, rng=np.random.default_rng(2), progress=lambda _: None,
                                       spare_core=lambda: None)
            out, t = timed(go)
            run["importance"][label] = {**t, "timings": out.timings, **out.diagnostics["importance"]}
        info = out.diagnostics["importance"]
        # the same sampler at the backend's Laplace fit, for the per-parameter ESS of its means
        with single_threaded_blas():
            imp = importance_sample(g.network_, g.noisy_counts_, g.sigma_dp_, g.n_, out.laplace,
                                    prior_sd=float(g.prior_sd), min_ess=info["ess_required"],
                                    dropped_cell_jacobian=g.network_.dropped_cell_log_prob_jacobian,
                                    rng=np.random.default_rng(2))
        run["importance_vs_nuts"] = agreement(imp.draws, imp.ess_per_parameter, ref, ref_ess)
        run["importance_vs_nuts"] |= {"k_hat": imp.k_hat, "ess": imp.ess, "ess_min": imp.ess_min,
                                      "num_proposals": imp.num_proposals}
        lap = out.laplace.sample(imp.draws.shape[0] * imp.draws.shape[1], np.random.default_rng(3))
        run["laplace_vs_nuts"] = agreement(lap[None], float(lap.shape[0]), ref, ref_ess)
        run["default_backend_would"] = ("accept the importance draws" if info["validated"]
                                        else "warn and fall back to NUTS")
        res["runs"].append(run)
        res["loadavg_end"] = os.getloadavg()
        save(res, a.out)
        summary = {k: run["importance"]["warm"][k] for k in ("k_hat", "k_hat_threshold", "ess", "wall_s", "cpu_s")}
        print(eps, json.dumps(summary), "NUTS wall", round(t_nuts["wall_s"], 1),
              "max|z|", round(run["importance_vs_nuts"]["max_abs_z"], 2), flush=True)
    plot(res, a.out.with_suffix(".png"))


if __name__ == "__main__":
    from synthinfer import float64

    with float64():
        main()
