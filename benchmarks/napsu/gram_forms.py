r"""The two forms of a projected clique's Gram tables in eq. 6, side by side on the same models.

A junction-tree clique without a measurement of its whole scope works in the coordinates of
its blocks (:func:`synthinfer.napsu.structured._projected_clique`), which need the tables
``G_X^T diag(p) G_Y`` of every pair of blocks. Two forms give the same numbers:

* ``scatter``: one scatter-add of ``(1 + B)^2`` entries per clique cell (``B`` blocks);
* ``factorised``: per pair of blocks, the clique table's marginal on the union of their scopes
  contracted with the two blocks' factors (an einsum);

and ``default`` is the library's choice (factorised where the scatter would have at least
``FACTORISED_GRAM_MIN_ENTRIES`` entries). Per model: the value and gradient of eq. 6 alone
(:func:`synthinfer.napsu.structured.structured_log_likelihood`) at the fit's point, XLA's
default options, minimum and median of ``--repeats`` warm calls (wall and process CPU), the
first call (compile), XLA's flop and byte counts, and the largest difference in value and
gradient between the forms. Models (each fitted once with ``inference="laplace"``; only its
network, layout, measurements and mode are used):

* ``continuous-pair``: Adult with age and hours as numbers in 3-unit bins, every pair of the
  analysis' columns through the 5 groups with slopes and moments, ``(age_g, hours_g)`` included
  (``continuous_fine_coarse.py --outcome coarse --coarse-interactions linear --fine-width 3
  --pair-of-numbers``): one clique of 17,500 cells with 20 blocks;
* ``continuous``: the same without ``(age_g, hours_g)``;
* ``adult15-aim``: the default fit's model on the full Adult table (``default_fit.py``: the
  analysis marginal fixed, AIM selecting the rest at epsilon 1).

    PYTHONPATH=src python benchmarks/napsu/gram_forms.py --out benchmarks/napsu/results/gram_forms.json
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
import continuous_coverage as cc  # noqa: E402  (the continuous model's data)
import continuous_fine_coarse as cfc  # noqa: E402  (its domain and marginals)
from scale_gradient import time_program  # noqa: E402  (first call, then warm calls' wall and CPU time)

OUT = Path(__file__).resolve().parent / "results" / "gram_forms.json"
MODELS = ("continuous-pair", "continuous", "adult15-aim")
FORMS = {"scatter": 2**62, "factorised": 0, "default": None}


def fit(model: str, epsilon: float, seed: int):
    from synthinfer.datasets import adult_domain, load_adult
    from synthinfer.generate import NapsuMQ

    if model == "adult15-aim":
        ds = load_adult(categorical=True)
        return NapsuMQ([("age", "race", "sex", "income")], epsilon=epsilon, select_extra="aim", inference="laplace",
                       seed=seed).fit(ds.data, adult_domain(derived=True))
    marginals = [(c + "_g", "income") if (c in cfc.FINE and o == "income") else (c, o) for c, o in cfc.MARGINALS]
    marginals += [(c,) for c in cfc.FINE] + ([("age_g", "hours-per-week_g")] if model == "continuous-pair" else [])
    df, _ = cc.load()
    return NapsuMQ(marginals, epsilon=epsilon, inference="laplace", coarse_interactions="linear",
                   seed=seed).fit(df, cfc.fine_domain(fine_width=3))


def measure(model: str, a: argparse.Namespace) -> dict:
    from synthinfer._jax import float64, jax, jnp
    from synthinfer.napsu.structured import TreeLikelihoodPlan, canonical_layout, structured_log_likelihood

    t, cpu = time.perf_counter(), time.process_time()
    gen = fit(model, a.epsilon, a.seed)
    rec = {"model": model, "fit_wall_s": time.perf_counter() - t, "fit_cpu_s": time.process_time() - cpu}
    net = gen.network_
    layout = gen.layout_ if gen.layout_ is not None else canonical_layout(net.queries)
    if gen.measurements_ is not None:
        y = np.concatenate([m.values for m in gen.measurements_])
        D = np.concatenate([np.full(m.values.size, m.variance) for m in gen.measurements_])
    else:
        y, D = np.asarray(gen.noisy_counts_, float), np.full(len(gen.noisy_counts_), gen.sigma_dp_**2)
    rec["d"] = int(net.dimension)
    out = {}
    with float64():
        theta = jnp.asarray(gen.laplace_.mean)
        for form, threshold in FORMS.items():
            tree = TreeLikelihoodPlan(net, layout, factorised_gram_min=threshold)
            cliques = [cq for cq in tree.cliques if cq.active and cq.gram_index is not None]
            program = jax.jit(jax.value_and_grad(
                lambda th, tree=tree: structured_log_likelihood(th, jnp.asarray(y), jnp.asarray(D), gen.n_, tree)))
            timing, (value, grad) = time_program(program, (theta,), a.repeats)
            cost = program.lower(theta).compile().cost_analysis()
            cost = cost[0] if isinstance(cost, list) else cost
            rec[form] = {**timing, "plan_flops": tree.flops, "xla_flops": float(cost.get("flops", np.nan)),
                         "xla_bytes": float(cost.get("bytes accessed", np.nan)),
                         "projected_cliques": [{"K": cq.size, "blocks": len(cq.blocks), "r": cq.rank,
                                                "factorised": cq.gram_factors is not None} for cq in cliques]}
            out[form] = (float(value), np.asarray(grad))
    v0, g0 = out["scatter"]
    for form in ("factorised", "default"):
        v, g = out[form]
        rec[form]["value_rel_diff"] = abs(v - v0) / abs(v0)
        rec[form]["grad_rel_diff"] = float(np.max(np.abs(g - g0)) / np.max(np.abs(g0)))
    return rec


def plot(doc: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    runs = doc["models"]
    fig, ax = plt.subplots(figsize=(7, 3.6))
    width = 0.27
    for k, form in enumerate(FORMS):
        ms = [r[form]["call_cpu_min_ms"] for r in runs]
        bars = ax.bar(np.arange(len(runs)) + (k - 1) * width, ms, width, label=form)
        ax.bar_label(bars, fmt="%.1f", fontsize=7)
    ax.set_xticks(np.arange(len(runs)), [f"{r['model']}\nd = {r['d']}" for r in runs])
    ax.set_yscale("log")
    ax.set_ylabel("eq. 6 value + gradient, CPU ms (min)")
    ax.set_title("Gram tables of projected cliques: one scatter vs marginals on pairs", fontsize=9)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def parse_args(description: str, out: Path) -> argparse.Namespace:
    """The options of this script and of ``potential_forms.py`` (the same models and repeats)."""
    ap = argparse.ArgumentParser(description=description)
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--epsilon", type=float, default=1.0)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--repeats", type=int, default=10)
    ap.add_argument("--out", type=Path, default=out)
    return ap.parse_args()


def run_models(script: str, a: argparse.Namespace, measure, summary, plot) -> None:
    """``measure(model, a)`` for each model, a line per model (``summary(record)``), then the
    JSON record (with the command and the load average) and its plot."""
    warnings.simplefilter("ignore")
    doc = {"command": " ".join(["python", f"benchmarks/napsu/{script}", *sys.argv[1:]]), "epsilon": a.epsilon,
           "seed": a.seed, "repeats": a.repeats, "cpu_count": os.cpu_count(), "loadavg_before": os.getloadavg(),
           "models": []}
    for model in a.models.split(","):
        doc["models"].append(measure(model, a))
        print(model, doc["models"][-1]["d"], summary(doc["models"][-1]), flush=True)
    doc["loadavg_after"] = os.getloadavg()
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_text(json.dumps(doc, indent=1))
    plot(doc, a.out.with_suffix(".png"))


def main() -> None:
    run_models("gram_forms.py", parse_args(__doc__.splitlines()[0], OUT), measure,
               lambda r: {f: round(r[f]["call_cpu_min_ms"], 2) for f in FORMS}, plot)


if __name__ == "__main__":
    main()
