r"""Fine and coarse versions of Adult's age and hours in one NAPSU-MQ model: does the logit's slope survive?

The analyst's logit of ``continuous_coverage.py`` (``income ~ age + hours-per-week + C(race) +
C(sex)`` on the paper's 10 Adult columns, n = 46,043) on a model whose Domain holds age and
hours-per-week as whole numbers (73 and 98 one-unit bins, public edges) and, derived from each,
a 5-group column (``age_g``: 17-29, 30-44, 45-59, 60-74, 75-90; ``hours-per-week_g``: 1-29,
30-39, 40, 41-49, 50-99; public maps). The marginals are the paper's 10 with ``(age, income)``
and ``(hours-per-week, income)`` fine and the other pairs of age with a column through
``age_g``, plus the analysis' pairs ``(age_g, race)``, ``(age_g, sex)``, ``(hours_g, race)``,
``(hours_g, sex)``: a marginal naming a group column is measured as its coarse table and has
coarse interactions (:func:`synthinfer.napsu.interactions.coarse_ties`). One fit
per run (epsilon 1, delta n^-2, Laplace, the given ``--interaction-sd``), ``--m`` datasets
with whole numbers drawn in the bins, ``analyze``'s Rubin's rules; recorded per coefficient:
the estimate, its error in real-data standard errors, 95% coverage of the real estimate, and
the 95% width ratio (synthetic / real).

    PYTHONPATH=src python benchmarks/napsu/continuous_fine_coarse.py --interaction-sd 1 \
        --out benchmarks/napsu/results/continuous_fine_coarse.json   # appends one run per call

``--outcome coarse --coarse-interactions linear`` names the outcome's pairs through the group
columns too, ``(age_g, income)`` and ``(hours-per-week_g, income)``, with a slope per group in
the number (``NapsuMQ(coarse_interactions="linear")``), and adds the fine 1-way marginals
``(age,)`` and ``(hours-per-week,)`` for the shape inside each group: the log-odds of income
are then piecewise linear in age and hours, two parameters per group instead of one per value.
Each coarse table is measured as such, with the moment of the number in each of its cells
(:mod:`synthinfer.napsu.coarse`); the records before moments were measured name no 1-ways.
``--one-way-width 0`` leaves the 1-ways out: each number's distribution inside a group is then
log-linear, set by the groups' totals and moments; ``--one-way-width 5`` measures them in
5-unit groups (log-linear inside each), which the tails' near-empty one-unit cells need, and
``--one-way-width -1`` in one-unit bins where rows are many and wide groups in the tails
(:data:`TAIL_EDGES`):

    PYTHONPATH=src python benchmarks/napsu/continuous_fine_coarse.py --outcome coarse \
        --coarse-interactions linear --out benchmarks/napsu/results/continuous_fine_coarse.json

Each run also records age's profile (the share of rows and the rate of income > 50K in age
bands) in the real data and pooled over the synthetic datasets: where the synthetic rows
differ from the real ones. ``--epsilon 100`` (the ledger's ceiling, a study of the model only)
makes the noise negligible, so what remains is the model's structure. ``--inference nuts``
samples the posterior (the library's draws and passes, or 4 chains of ``--num-warmup`` +
``--num-samples`` each) instead of the Laplace approximation. ``--smooth-sd age=0.1`` makes age's main effects a penalised spline
(``NapsuMQ(smooth_sd=...)``). ``--summary`` prints each study's coverage over the runs in
``--out`` (runs with the same settings are repeats: each fit draws new noise).

The coverage study of the model with the numbers' pair under NUTS (30 repeats, m = 100; one
chain of 300 + 300 draws per repeat, as Framingham's study, where the library's default of
four chains would take over an hour of CPU per fit). Each run also decodes the same draws at
the bins' midpoints (``midpoints`` in the record; ``--summary`` lists both decoders):

    for k in $(seq 0 29); do PYTHONPATH=src python benchmarks/napsu/continuous_fine_coarse.py \
        --outcome coarse --coarse-interactions linear --inference nuts --fine-width 3 --pair-of-numbers \
        --m 100 --n-chains 1 --num-warmup 300 --num-samples 300 --seed $k \
        --out benchmarks/napsu/results/continuous_fine_coarse_nuts.json; done
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
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))
import continuous_coverage as cc  # noqa: E402  (the study's data, logit and analysis)

OUT = Path(__file__).resolve().parent / "results" / "continuous_fine_coarse.json"
#: (lower bound, upper bound) of the whole numbers, whose 5 groups are
#: ``synthinfer.datasets.ADULT_NUMBER_GROUPS``
FINE = {"age": (17, 90), "hours-per-week": (1, 99)}
MARGINALS = [("age", "income"), ("age_g", "marital-status"), ("age_g", "workclass"), ("education", "income"),
             ("race", "income"), ("race", "sex"), ("sex", "income"), ("capital-gain", "income"),
             ("capital-loss", "income"), ("hours-per-week", "income"), ("age_g", "race"), ("age_g", "sex"),
             ("hours-per-week_g", "race"), ("hours-per-week_g", "sex")]


def fine_domain(width: int = 1, fine_width: int = 1):
    """The paper's Domain with age and hours in ``fine_width``-unit bins, each with its 5-group
    column (``_g``; :func:`synthinfer.datasets.adult_numbers_domain`) and, for ``width`` > 1 or
    -1, a column of ``width``-unit groups (``_w``; :data:`TAIL_EDGES` for -1); groups are derived
    columns, which the fit computes from the numbers."""
    from synthinfer.data import Column, Domain
    from synthinfer.datasets import adult_numbers_domain

    base = adult_numbers_domain(fine_width)
    if width in (0, 1):
        return base
    cols = []
    for c in base.columns:
        cols.append(c)
        if c.name.endswith("_g") and c.name[:-2] in FINE:
            lo, hi = FINE[c.name[:-2]]
            edges = list(range(lo, hi, width)) + [hi + 1] if width > 1 else TAIL_EDGES[c.name[:-2]]
            cols.append(Column.groups_of(base[c.name[:-2]], edges[1:-1], name=c.name[:-2] + "_w"))
    return Domain(cols)


#: ``--one-way-width -1``: the 1-ways' group edges (lower edges, then the upper bound + 1): one
#: unit where the rows are many, wide groups in the sparse tails (public choices, as a data
#: holder would make them from published distributions)
TAIL_EDGES = {"age": [17, 20] + list(range(21, 70)) + [70, 80, 91],
              "hours-per-week": [1, 10, 20] + list(range(21, 61)) + [61, 71, 100]}

#: age bands of the profile (lower edges, then the upper bound + 1)
AGE_BANDS = [17, 20, 25, 30, 40, 50, 60, 70, 80, 91]


def age_profile(frame) -> dict:
    """Share of rows and rate of income > 50K in each age band (:data:`AGE_BANDS`)."""
    age = frame["age"].astype(float).to_numpy()
    rich = (frame["income"].astype(str) == ">50K").to_numpy()
    band = np.searchsorted(AGE_BANDS, age, side="right") - 1
    k = len(AGE_BANDS) - 1
    counts = np.bincount(band, minlength=k)[:k]
    return {"share": (counts / len(age)).round(4).tolist(),
            "rate": [round(float(rich[band == b].mean()), 4) if counts[b] else None for b in range(k)]}


#: the settings that make runs repeats of one study (``--summary`` groups by them)
STUDY_KEYS = ("marginals", "epsilon", "m", "outcome", "coarse_interactions", "one_way_width", "fine_width",
              "inference", "interaction_sd", "smooth_sd", "num_warmup", "num_samples", "n_chains", "slopes_below",
              "max_tree_depth", "decoder")


def by_decoder(runs: list[dict]) -> list[dict]:
    """Each run once per decoder, ``decoder`` set: its own fields (numbers inside their bins,
    ``"uniform"``) and, where recorded, those of the same draws at the bins' midpoints."""
    return [{**r, "decoder": "uniform"} for r in runs] + [
        {**r, **r["midpoints"], "decoder": "midpoints"} for r in runs if "midpoints" in r]


def summary(runs: list[dict], keys: tuple[str, ...] = STUDY_KEYS) -> list[dict]:
    """Per study (runs with equal ``keys``): repeats, 95% and 50% coverage over every
    coefficient of every run, and per coefficient the median 95% width ratio, the median error
    in real se and the 95% coverage."""
    groups: dict[str, list[dict]] = {}
    for r in runs:
        groups.setdefault(json.dumps({k: r.get(k) for k in keys}), []).append(r)
    out = []
    for key, rs in groups.items():
        rows = {"study": json.loads(key), "repeats": len(rs),
                "coverage95": float(np.mean([c for r in rs for c in r["covers95"]])),
                "coverage50": (float(np.mean([c for r in rs for c in r["covers50"]]))
                               if all("covers50" in r for r in rs) else None),
                "coefficients": {}}
        for j, name in enumerate(rs[0]["coefficients"]):
            rows["coefficients"][name] = {
                "median_width_ratio": float(np.median([r["width_ratio"][j] for r in rs])),
                "median_error_in_real_se": float(np.median([r["error_in_real_se"][j] for r in rs])),
                "coverage95": float(np.mean([r["covers95"][j] for r in rs]))}
        out.append(rows)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--summary", action="store_true", help="print each study's coverage from --out (no fitting)")
    ap.add_argument("--interaction-sd", type=float, default=1.0)
    ap.add_argument("--epsilon", type=float, default=1.0)
    ap.add_argument("--m", type=int, default=20)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", type=Path, default=OUT)
    ap.add_argument("--outcome", choices=["fine", "coarse"], default="fine",
                    help="the outcome's pairs with age and hours: fine (one parameter per value) or through the groups")
    ap.add_argument("--coarse-interactions", choices=["constant", "linear", "bilinear"], default="constant")
    ap.add_argument("--inference", choices=["laplace", "nuts"], default="laplace")
    ap.add_argument("--slopes-below", type=float, default=None,
                    help="NapsuMQ(slopes_below=K): drop the slopes of coarse cells whose noisy count is below K noise sd")
    ap.add_argument("--smooth-sd", type=lambda t: {k: float(v) for k, v in (kv.split("=") for kv in t.split(","))},
                    default=None, help="NapsuMQ's smooth_sd per column, e.g. age=0.1 (penalised splines)")
    ap.add_argument("--num-warmup", type=int, default=None, help="NUTS only (default: the library's choice)")
    ap.add_argument("--target-accept", type=float, default=None,
                    help="NUTS only: NapsuMQ(target_accept=...) (default: the library's, with its retries)")
    ap.add_argument("--num-samples", type=int, default=None,
                    help="NUTS only, per chain (default: the library's choice, run longer until converged)")
    ap.add_argument("--n-chains", type=int, default=None, help="NUTS only (default: the library's, 4)")
    ap.add_argument("--max-tree-depth", type=int, default=None,
                    help="NUTS only: NapsuMQ(max_tree_depth=...), at most 2^depth - 1 gradients per draw "
                         "(default: the library's, 12)")
    ap.add_argument("--pair-of-numbers", action="store_true",
                    help="with --outcome coarse: also measure (age_g, hours-per-week_g), the analysis' pair of "
                         "numbers (else the synthetic numbers are independent given the other columns)")
    ap.add_argument("--fine-width", type=int, default=1,
                    help="the fine bins of age and hours in this many units (from each group's lower edge)")
    ap.add_argument("--one-way-width", type=int, default=1,
                    help="with --outcome coarse: the 1-ways of age and hours in groups of this many units "
                         "(1: fine; 0: none, so their distributions inside a 5-group follow the pairs' groups; "
                         "-1: one unit in the middle, wide groups in the tails, TAIL_EDGES)")
    a = ap.parse_args()
    if a.summary:
        print(json.dumps(summary(by_decoder(json.loads(a.out.read_text())["runs"])), indent=1))
        return
    marginals = MARGINALS if a.outcome == "fine" else [
        (c + "_g", "income") if (c in FINE and o == "income") else (c, o) for c, o in MARGINALS] + (
        [] if a.one_way_width == 0 else [(c,) if a.one_way_width == 1 else (c + "_w",) for c in FINE]) + (
        [("age_g", "hours-per-week_g")] if a.pair_of_numbers else [])
    if a.pair_of_numbers and a.outcome != "coarse":
        ap.error("--pair-of-numbers goes with --outcome coarse")
    warnings.simplefilter("ignore")
    from synthinfer.generate import NapsuMQ

    df, _ = cc.load()
    if a.fine_width != 1 and a.one_way_width not in (0, 1):
        ap.error("--fine-width goes with --one-way-width 1 (the fine bins) or 0")
    domain = fine_domain(a.one_way_width, a.fine_width)
    derived = [c + s for c in FINE for s in ("_g", "_w") if c + s in domain.names]
    data = df  # the group columns are computed from the numbers by the fit
    real_q, real_se = cc.real_fit(df)
    rec = {"command": " ".join(["python", "benchmarks/napsu/continuous_fine_coarse.py", *sys.argv[1:]]),
           "interaction_sd": a.interaction_sd, "m": a.m, "seed": a.seed, "marginals": [list(m) for m in marginals],
           "outcome": a.outcome, "coarse_interactions": a.coarse_interactions, "epsilon": a.epsilon,
           "one_way_width": a.one_way_width, "fine_width": a.fine_width, "inference": a.inference, "smooth_sd": a.smooth_sd,
           "slopes_below": a.slopes_below,
           **({"num_warmup": a.num_warmup, "num_samples": a.num_samples, "n_chains": a.n_chains,
               "target_accept": a.target_accept,
               **({} if a.max_tree_depth is None else {"max_tree_depth": a.max_tree_depth})}
              if a.inference == "nuts" else {}),
           "loadavg_before": os.getloadavg()}
    t, cpu = time.perf_counter(), time.process_time()
    gen = NapsuMQ(marginals, epsilon=a.epsilon, inference=a.inference, interaction_sd=a.interaction_sd,
                  num_warmup=a.num_warmup, num_samples=a.num_samples, smooth_sd=a.smooth_sd,
                  coarse_interactions=a.coarse_interactions, slopes_below=a.slopes_below, seed=a.seed,
                  **({} if a.target_accept is None else {"target_accept": a.target_accept}),
                  **({} if a.n_chains is None else {"n_chains": a.n_chains}),
                  **({} if a.max_tree_depth is None else {"max_tree_depth": a.max_tree_depth})).fit(data, domain)
    rec["fit_wall_s"], rec["fit_cpu_s"] = time.perf_counter() - t, time.process_time() - cpu
    rec["ties"] = gen.diagnostics_["ties"]
    if a.inference == "laplace":
        rec["laplace_axes_gap_over_1_nat"] = gen.diagnostics_["laplace"]["axes_gap_over_1_nat"]
    else:
        rec["nuts"] = {k: gen.diagnostics_["nuts"][k] for k in ("rhat_max", "ess_bulk_min", "divergences",
                                                                 "gradient_evaluations_per_draw", "passes",
                                                                 "step_size",
                                                                 "earlier_runs") if k in gen.diagnostics_["nuts"]}
    rq, se = real_q.to_numpy(), real_se.to_numpy()
    rec["coefficients"] = list(real_q.index)
    rec["real"] = rq.tolist()
    # the numbers drawn inside their bins (the run's own fields) and, from the same draws, at midpoints
    for decoder, kw in (("uniform", {"numbers": True}), ("midpoints", {"midpoints": True})):
        syn = [s.drop(columns=derived) for s in gen.generate(a.m, seed=a.seed, **kw)]
        q, ci95, ci50 = cc.analyse(syn, len(df))
        res = {"estimate": q.tolist(), "error_in_real_se": ((q - rq) / se).tolist(),
               "covers95": ((ci95[:, 0] <= rq) & (rq <= ci95[:, 1])).tolist(),
               "covers50": ((ci50[:, 0] <= rq) & (rq <= ci50[:, 1])).tolist(),
               "width_ratio": ((ci95[:, 1] - ci95[:, 0]) / (2 * 1.959964 * se)).tolist()}
        if decoder == "uniform":
            rec.update(res)
            rec["age_profile"] = {"bands": AGE_BANDS, "real": age_profile(df), "synthetic": age_profile(pd.concat(syn))}
        else:
            rec[decoder] = res
    rec["loadavg_after"] = os.getloadavg()
    doc = json.loads(a.out.read_text()) if a.out.exists() else {"runs": []}
    doc["runs"].append(rec)
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_text(json.dumps(doc, indent=1))
    for decoder, res in (("uniform", rec), ("midpoints", rec["midpoints"])):
        for name, e, c, w in zip(rec["coefficients"], res["error_in_real_se"], res["covers95"], res["width_ratio"]):
            print(f"{decoder:9s} {name:50s} error {e:+7.2f} real se  covers95 {c!s:5s}  width ratio {w:6.2f}")


if __name__ == "__main__":
    main()
