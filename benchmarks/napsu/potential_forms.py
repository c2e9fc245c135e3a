r"""Dense or sparse clique log-potentials ``B theta``, side by side on the same models.

Every pass over the junction tree starts from the clique log-potentials, the product of the
cell-to-parameter incidence ``B`` (cells x parameters) with ``theta``. Two forms give the same
numbers: a dense matrix product, or a gather of the nonzero entries' parameters and a segment
sum per cell; ``default`` is the library's choice (sparse where ``B`` has at least
``SPARSE_POTENTIALS_MIN_ENTRIES`` entries, at most ``SPARSE_POTENTIALS_MAX_DENSITY`` of them
nonzero). Per model (those of ``gram_forms.py``): the value and gradient of the log partition
function and of the whole negative log posterior as NUTS compiles it, at the Laplace mode,
minimum and median of ``--repeats`` warm calls (wall and process CPU), and the largest
difference in value and gradient between the forms.

    PYTHONPATH=src python benchmarks/napsu/potential_forms.py --out benchmarks/napsu/results/potential_forms.json
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from gram_forms import fit, parse_args, run_models  # noqa: E402  (the models, options and loop)
from scale_gradient import time_program  # noqa: E402  (first call, then warm calls' wall and CPU time)

OUT = Path(__file__).resolve().parent / "results" / "potential_forms.json"
FORMS = {"dense": 2**62, "sparse": 0, "default": None}


def measure(model: str, a: argparse.Namespace) -> dict:
    from synthinfer._jax import float64, jax, jnp
    from synthinfer.napsu import network as network_module
    from synthinfer.napsu.likelihood import objective, posterior_args

    t, cpu = time.perf_counter(), time.process_time()
    gen = fit(model, a.epsilon, a.seed)
    rec = {"model": model, "fit_wall_s": time.perf_counter() - t, "fit_cpu_s": time.process_time() - cpu}
    queries, layout = gen.network_.queries, gen.layout_
    if gen.measurements_ is not None:
        sd = np.concatenate([np.full(m.values.size, np.sqrt(m.variance)) for m in gen.measurements_])
    else:
        sd = gen.sigma_dp_
    args = posterior_args(gen.noisy_counts_, sd, gen.n_, float(gen.prior_sd), float(gen.cell_prior),
                          None if gen.interaction_sd is None else float(gen.interaction_sd))
    rec["d"] = int(queries.dimension)
    default_min, default_density = (network_module.SPARSE_POTENTIALS_MIN_ENTRIES,
                                    network_module.SPARSE_POTENTIALS_MAX_DENSITY)
    out = {}
    with float64():
        theta = jnp.asarray(gen.laplace_.mean)
        for form, threshold in FORMS.items():
            network_module.SPARSE_POTENTIALS_MIN_ENTRIES = default_min if threshold is None else threshold
            network_module.SPARSE_POTENTIALS_MAX_DENSITY = default_density if threshold is None else 1.0
            try:
                net = network_module.MarkovNetwork(queries)
            finally:
                network_module.SPARSE_POTENTIALS_MIN_ENTRIES = default_min
                network_module.SPARSE_POTENTIALS_MAX_DENSITY = default_density
            rec[form] = {"incidence_entries": int(net._incidence.size),
                         "nonzero": int(np.count_nonzero(net._incidence)),
                         "sparse": net._sparse_incidence is not None}
            programs = {"log_partition": (jax.jit(jax.value_and_grad(net.log_partition)), (theta,)),
                        "neg_log_posterior": (jax.jit(jax.value_and_grad(
                            objective(net, "neg_log_posterior", layout)[0])), (theta, *args))}
            for name, (program, x) in programs.items():
                timing, (value, grad) = time_program(program, x, a.repeats)
                rec[form][name] = timing
                out[form, name] = (float(value), np.asarray(grad))
    for form in ("sparse", "default"):
        for name in ("log_partition", "neg_log_posterior"):
            (v0, g0), (v, g) = out["dense", name], out[form, name]
            rec[form][name]["value_rel_diff"] = abs(v - v0) / abs(v0)
            rec[form][name]["grad_rel_diff"] = float(np.max(np.abs(g - g0)) / np.max(np.abs(g0)))
    return rec


def plot(doc: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    runs = doc["models"]
    fig, axes = plt.subplots(1, 2, figsize=(9, 3.6))
    width = 0.27
    for ax, name in zip(axes, ("log_partition", "neg_log_posterior")):
        for k, form in enumerate(FORMS):
            ms = [r[form][name]["call_cpu_min_ms"] for r in runs]
            bars = ax.bar(np.arange(len(runs)) + (k - 1) * width, ms, width, label=form)
            ax.bar_label(bars, fmt="%.1f", fontsize=7)
        ax.set_xticks(np.arange(len(runs)), [f"{r['model']}\nd = {r['d']}" for r in runs], fontsize=7)
        ax.set_yscale("log")
        ax.set_title(f"{name}: value + gradient, CPU ms (min)", fontsize=9)
    axes[0].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main() -> None:
    run_models("potential_forms.py", parse_args(__doc__.splitlines()[0], OUT), measure,
               lambda r: {f: {n: round(r[f][n]["call_cpu_min_ms"], 2) for n in ("log_partition", "neg_log_posterior")}
                          for f in FORMS}, plot)


if __name__ == "__main__":
    main()
