r"""Where a NUTS fit of the continuous-columns model spends its time: one gradient, part by part.

The model of ``continuous_fine_coarse.py --outcome coarse --coarse-interactions linear`` (age and
hours-per-week as whole numbers, every pair of them through 5 groups with slopes and moments,
their fine 1-ways; 450 parameters) fitted once at epsilon 1 with the Laplace approximation;
then, at the posterior mode, the wall and process CPU time per call (minimum and median of
``--repeats`` warm calls; ``scale_gradient.time_program``) of the value and gradient of

* the negative log posterior as NUTS compiles it (XLA's default options),
* eq. 6 alone (:func:`synthinfer.napsu.structured.structured_log_likelihood`),
* the log partition function and the measured marginals' log tables (the prior's part),

with XLA's own cost analysis (flops, bytes accessed) of the first two and, per clique of the
likelihood's plan, its cells ``K``, separator cells ``t``, block cells ``r`` and the plan's
flop estimate (:attr:`synthinfer.napsu.structured.TreeLikelihoodPlan.flops`).

``--pair-of-numbers`` measures ``(age_g, hours-per-week_g)`` too: the analysis' five columns are
then all pairwise measured, so one clique holds them all (17,500 cells at ``--fine-width 3``).

    PYTHONPATH=src python benchmarks/napsu/continuous_gradient.py \
        --out benchmarks/napsu/results/continuous_gradient.json
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
import continuous_coverage as cc  # noqa: E402  (the study's data)
import continuous_fine_coarse as cfc  # noqa: E402  (the model's domain and marginals)
from scale_gradient import time_program  # noqa: E402  (first call, then warm calls' wall and CPU time)

OUT = Path(__file__).resolve().parent / "results" / "continuous_gradient.json"


def xla_cost(program, *args) -> dict:
    """XLA's cost analysis of a jitted program at ``args``: flops and bytes accessed."""
    cost = program.lower(*args).compile().cost_analysis()
    cost = cost[0] if isinstance(cost, list) else cost
    return {"flops": float(cost.get("flops", float("nan"))), "bytes": float(cost.get("bytes accessed", float("nan")))}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--epsilon", type=float, default=1.0)
    ap.add_argument("--repeats", type=int, default=20)
    ap.add_argument("--fine-width", type=int, default=1, help="age and hours in bins of this many units "
                    "(synthinfer.datasets.adult_number_edges)")
    ap.add_argument("--pair-of-numbers", action="store_true",
                    help="also measure (age_g, hours-per-week_g), as continuous_fine_coarse.py --pair-of-numbers")
    ap.add_argument("--out", type=Path, default=OUT)
    a = ap.parse_args()
    warnings.simplefilter("ignore")
    from synthinfer._jax import float64, jax, jnp
    from synthinfer.generate import NapsuMQ
    from synthinfer.napsu.likelihood import objective, posterior_args
    from synthinfer.napsu.structured import plan, structured_log_likelihood

    marginals = [(c + "_g", "income") if (c in cfc.FINE and o == "income") else (c, o) for c, o in cfc.MARGINALS]
    marginals += [(c,) for c in cfc.FINE] + ([("age_g", "hours-per-week_g")] if a.pair_of_numbers else [])
    df, _ = cc.load()
    domain = cfc.fine_domain(fine_width=a.fine_width)
    data = df  # the group columns are computed from the numbers by the fit
    rec = {"command": " ".join(["python", "benchmarks/napsu/continuous_gradient.py", *sys.argv[1:]]),
           "epsilon": a.epsilon, "repeats": a.repeats, "fine_width": a.fine_width,
           "pair_of_numbers": a.pair_of_numbers, "loadavg_before": os.getloadavg()}
    t, cpu = time.perf_counter(), time.process_time()
    gen = NapsuMQ(marginals, epsilon=a.epsilon, inference="laplace", coarse_interactions="linear").fit(data, domain)
    rec["fit_wall_s"], rec["fit_cpu_s"] = time.perf_counter() - t, time.process_time() - cpu
    net, layout = gen.network_, gen.layout_
    rec["d"] = int(net.dimension)
    sd = np.concatenate([np.full(m.values.size, np.sqrt(m.variance)) for m in gen.measurements_])
    args = posterior_args(gen.noisy_counts_, sd, gen.n_, float(gen.prior_sd), float(gen.cell_prior),
                          float(gen.interaction_sd))
    y, D, n = args[:3]
    tree = plan(net, layout)
    names = net.queries.domain.names
    rec["cliques"] = [{"columns": [names[v] for v in net.junction_tree.cliques[c]], "K": cq.size, "t": cq.sep_size,
                       "r": cq.rank, "blocks": [b.size for b in cq.blocks], "eliminated": cq.eliminated,
                       "plan_flops": cq.flops} for c, cq in enumerate(tree.cliques) if cq.active]
    rec["plan_flops"] = tree.flops
    with float64():
        theta = jnp.asarray(gen.laplace_.mean) if getattr(gen, "laplace_", None) is not None else jnp.zeros(rec["d"])
        programs = {
            "neg_log_posterior": (jax.jit(jax.value_and_grad(objective(net, "neg_log_posterior", layout)[0])),
                                  (theta, *args)),
            "eq6": (jax.jit(jax.value_and_grad(lambda th: structured_log_likelihood(th, y, D, n, tree))), (theta,)),
            "log_partition": (jax.jit(jax.value_and_grad(net.log_partition)), (theta,)),
            "log_query_marginals": (jax.jit(jax.value_and_grad(
                lambda th: sum(jnp.sum(x) for x in net.log_query_marginals(th)))), (theta,)),
        }
        rec["value_and_grad"] = {k: time_program(p, x, a.repeats)[0] for k, (p, x) in programs.items()}
        rec["xla_cost"] = {k: xla_cost(programs[k][0], *programs[k][1]) for k in ("neg_log_posterior", "eq6")}
    rec["loadavg_after"] = os.getloadavg()
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_text(json.dumps(rec, indent=1))
    print(json.dumps({"d": rec["d"], "plan_flops": rec["plan_flops"], "xla_cost": rec["xla_cost"],
                      "value_and_grad_ms": {k: {m: round(v[m], 2) for m in ("call_cpu_min_ms", "call_wall_min_ms")}
                                            for k, v in rec["value_and_grad"].items()}}, indent=1))
    for c in rec["cliques"]:
        print(c)


if __name__ == "__main__":
    main()
