r"""How far the Laplace approximation is from the posterior on the Framingham OLS model, in the analyst's terms.

One fit of ``framingham_ols.py``'s model (``--design tails3``, every pair through the groups, the
numbers' fine 1-ways, ``linear_by_linear=True``) at ``--epsilon``, with the Laplace
approximation. Then, on the same noisy measurements (``resample_posterior``: no new budget):

* PSIS of the importance backend's proposal (built on the Laplace fit), without its fallback to
  NUTS: Pareto k-hat and ESS, how well the Laplace-based proposal covers the posterior;
* NUTS with the given settings.

For the Laplace draws and the NUTS draws (``--draws`` of each, picked at random), the model's
own OLS of ``sysBP ~ age + BMI + male``, exact from its clique table at each draw
(``framingham_ols.model_at_mode``'s computation: no synthetic sampling noise), in real standard
errors from the real estimate: mean, sd and 2.5/97.5% quantiles over the draws. That sd is the
part of a Rubin interval's width the posterior sets. Also the NUTS mean's distance from the
Laplace mode in the Laplace fit's whitened coordinates (its norm; 0 for a Gaussian posterior),
and the parameters whose NUTS sd differs most from their Laplace sd.

    PYTHONPATH=src python benchmarks/napsu/framingham_posterior.py --epsilon 1 --seed 0 \
        --out benchmarks/napsu/results/framingham_posterior.json
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
import framingham_ols as F  # noqa: E402  (the data, designs, marginals and exact OLS)

OUT = Path(__file__).resolve().parent / "results" / "framingham_posterior.json"


def exact_coefficients(gen):
    """``theta -> FORMULA's coefficients``, exact from the model's table over ``COLUMNS``."""
    table_at, mids, widths = F.model_table(gen)
    return lambda theta: F.exact_ols(*F.joint_moments(table_at(theta), mids, widths))


def spread(draws: np.ndarray, coefficients, real: np.ndarray, se: np.ndarray, num: int,
           rng: np.random.Generator) -> dict:
    """The exact OLS over ``num`` random draws, in real se from the real estimate."""
    flat = draws.reshape(-1, draws.shape[-1])
    pick = flat[rng.choice(len(flat), size=min(num, len(flat)), replace=False)]
    err = (np.array([coefficients(t) for t in pick]) - real) / se
    return {"draws": len(pick), "mean": err.mean(0).tolist(), "sd": err.std(0, ddof=1).tolist(),
            "q025": np.quantile(err, 0.025, axis=0).tolist(), "q975": np.quantile(err, 0.975, axis=0).tolist()}


def labels(gen) -> list[str]:
    """Each parameter as ``columns=cell kind`` (its first member's cell of its host marginal)."""
    q = gen.network_.queries
    desc = q.canonical.describe()
    out = []
    for k, mem in enumerate(q.members):
        m, cell = desc[int(mem[0])]
        kind = "trend" if q.is_trend[k] else "slope" if q.is_slope[k] else f"tie of {len(mem)}" if len(mem) > 1 else ""
        out.append(f"{' x '.join(m.columns)}={cell} {kind}".strip())
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--epsilon", type=float, default=1.0)
    ap.add_argument("--design", choices=tuple(F.DESIGNS), default="tails3")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--n-chains", type=int, default=1)
    ap.add_argument("--num-warmup", type=int, default=300)
    ap.add_argument("--num-samples", type=int, default=300)
    ap.add_argument("--draws", type=int, default=300, help="draws of each posterior whose exact OLS is computed")
    ap.add_argument("--out", type=Path, default=OUT)
    a = ap.parse_args()
    warnings.simplefilter("ignore")
    from synthinfer.generate import NapsuMQ
    from synthinfer.napsu.backends import ImportanceBackend, backend_names, register_backend

    df, domain = F.table(a.design)
    real = F.ols(df)
    rq, se = real.params.to_numpy(), real.bse.to_numpy()
    rec = {"command": " ".join(["python", "benchmarks/napsu/framingham_posterior.py", *sys.argv[1:]]),
           "epsilon": a.epsilon, "design": a.design, "seed": a.seed, "coefficients": list(real.params.index),
           "loadavg_before": os.getloadavg()}
    t, cpu = time.perf_counter(), time.process_time()
    gen = NapsuMQ(F.marginals(True), epsilon=a.epsilon, inference="laplace", coarse_interactions="bilinear",
                  linear_by_linear=True, seed=a.seed).fit(df, domain)
    rec["laplace_fit_cpu_s"], rec["laplace_fit_wall_s"] = time.process_time() - cpu, time.perf_counter() - t
    rec["d"] = d = int(gen.network_.dimension)
    coefficients = exact_coefficients(gen)
    rng = np.random.default_rng(a.seed)
    mode, cov = np.asarray(gen.laplace_.mean), np.asarray(gen.laplace_.cov)
    rec["at_mode"] = ((coefficients(mode) - rq) / se).tolist()
    rec["laplace"] = spread(np.asarray(gen.posterior_.posterior["theta"]), coefficients, rq, se, a.draws, rng)

    if "importance_unchecked" not in backend_names():  # the importance backend without its fallback
        register_backend(ImportanceBackend(name="importance_unchecked", fallback=None))
    cpu = time.process_time()
    gen.set_params(inference="importance_unchecked").resample_posterior(seed=a.seed)
    imp = gen.diagnostics_["importance"]
    rec["importance"] = {k: imp[k] for k in ("k_hat", "k_hat_threshold", "ess", "num_proposals", "profiled_parameters")
                         if k in imp} | {"cpu_s": time.process_time() - cpu}

    t, cpu = time.perf_counter(), time.process_time()
    gen.set_params(inference="nuts", n_chains=a.n_chains, num_warmup=a.num_warmup,
                   num_samples=a.num_samples).resample_posterior(seed=a.seed)
    nuts = gen.diagnostics_["nuts"]
    rec["nuts"] = {k: nuts[k] for k in ("step_size", "gradient_evaluations_per_draw", "divergences", "ess_bulk_min",
                                         "rhat_max", "target_accept", "earlier_runs") if k in nuts}
    rec["nuts"] |= {"n_chains": a.n_chains, "num_warmup": a.num_warmup, "num_samples": a.num_samples,
                    "cpu_s": time.process_time() - cpu, "wall_s": time.perf_counter() - t}
    draws = np.asarray(gen.posterior_.posterior["theta"])
    rec["nuts"]["ols"] = spread(draws, coefficients, rq, se, a.draws, rng)
    flat = draws.reshape(-1, d)
    chol = np.linalg.cholesky(cov)
    rec["nuts_mean_whitened_distance"] = float(np.linalg.norm(np.linalg.solve(chol, flat.mean(0) - mode)))
    ratio = flat.std(0, ddof=1) / np.sqrt(np.diag(cov))
    names = labels(gen)
    order = np.argsort(ratio)
    rec["sd_ratio_nuts_over_laplace"] = {
        "median": float(np.median(ratio)),
        "smallest": [[names[k], float(ratio[k])] for k in order[:5]],
        "largest": [[names[k], float(ratio[k]), float((flat[:, k].mean() - mode[k]) / np.sqrt(cov[k, k]))]
                    for k in order[::-1][:8]]}
    rec["loadavg_after"] = os.getloadavg()
    doc = json.loads(a.out.read_text()) if a.out.exists() else {"runs": []}
    doc["runs"].append(rec)
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_text(json.dumps(doc, indent=1))
    for name in ("laplace", "nuts"):
        s = rec[name] if name == "laplace" else rec["nuts"]["ols"]
        print(f"{name:8s} mean {np.round(s['mean'], 1)}  sd {np.round(s['sd'], 1)}  (real se)")
    print("at mode", np.round(rec["at_mode"], 1), "| PSIS k-hat", round(rec["importance"]["k_hat"], 2),
          "| NUTS mean from the mode, whitened:", round(rec["nuts_mean_whitened_distance"], 1))


if __name__ == "__main__":
    main()
