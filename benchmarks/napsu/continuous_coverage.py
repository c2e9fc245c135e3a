r"""Continuous covariates on Adult: bin midpoints against numbers inside bins against private edges.

The paper's Adult table (Räisä et al. 2023, Section 5.2: the 10 columns, n = 46,043) and its 10
two-way marginals plus every pair of the analysis' variables (:data:`ANALYSIS_COLUMNS`), with
the analyst's logistic regression on *continuous* age and hours-per-week,
``income ~ age + hours-per-week + C(race) + C(sex)``, compared with the same regression on the
real numbers. Per repeat (epsilon ``--epsilon``, delta n^-2, the library's
defaults otherwise, ``--inference``):

* ``midpoints``: the paper's public Domain (age and hours in 5 equal-width buckets over their
  documented ranges 17-90 and 1-99), the synthetic buckets decoded as their midpoints
  (Supplement F; what the demo did);
* ``uniform``: the same fit, the buckets decoded as whole numbers drawn uniformly inside them
  (``generate(numbers=True)``);
* ``private``: age and hours given as continuous columns with public bounds and
  ``"bins": "private:K"`` (``--bins``), edges at DP quantiles with 10% of epsilon
  (``edges_share``, the default), numbers drawn inside the bins (the default for such columns).

Each variant's ``--m`` datasets are analysed by ``synthinfer.analysis.analyze`` (Rubin's rules
for synthetic data, the library's separation default); recorded per coefficient: whether the
95% and 50% intervals cover the real-data estimate, the ratio of the 95% widths (synthetic /
real), and the error of the combined estimate in real standard errors. OpenDP's noise is
unseeded, so each repeat's measurements are new.

    PYTHONPATH=src python benchmarks/napsu/continuous_coverage.py --repeats 20 --epsilon 1 \
        [--m 100] [--bins 10] [--inference laplace] [--out benchmarks/napsu/results/continuous_coverage.json]
    PYTHONPATH=src python benchmarks/napsu/continuous_coverage.py --plot-only
    PYTHONPATH=src python benchmarks/napsu/continuous_coverage.py --coarsening-only

``--coarsening-only`` measures what binning itself costs, without DP or a model: the real rows'
age and hours are cut into bins (the public 5, and ``K`` equal-mass bins at the real data's own
quantiles: a diagnostic only, those edges are not private), decoded as midpoints or uniformly
inside their bins, and the same logit is fitted; recorded per coefficient, its error in real
standard errors (``results/continuous_coarsening.json``). Inside a bin the synthetic outcome
cannot depend on the number, so every coefficient on a binned covariate is attenuated whatever
the decoder: the bias the DP studies above cannot go below.
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

HERE = Path(__file__).resolve().parent
OUT = HERE / "results" / "continuous_coverage.json"
FORMULA = "income ~ age + Q('hours-per-week') + C(race, Treatment('White')) + C(sex)"
NUMERIC = {"age": (17, 90), "hours-per-week": (1, 99)}
VARIANTS = ("midpoints", "uniform", "private")
#: The analysis' variables: the paper's 10 marginals leave (age, sex), (hours, sex), (age, hours),
#: (age, race) and (hours, race) unmeasured, so the logit's covariates would be conditionally
#: independent in the synthetic data and its coefficients biased whatever the decoding
#: (NAPSU-MQ Section 4.1; ``Release.supports`` names such pairs); every pair of them is added.
ANALYSIS_COLUMNS = ("age", "hours-per-week", "race", "sex", "income")


def load() -> tuple[pd.DataFrame, object]:
    """The paper's Adult rows with age and hours-per-week as numbers, and the paper's public Domain
    (whose 5 equal-width buckets encode those numbers)."""
    from synthinfer.datasets import load_adult

    paper = load_adult(paper_subset=True)
    raw = load_adult().data
    raw = raw[list(paper.domain.names)].dropna().reset_index(drop=True)
    df = paper.data.copy()
    for c in NUMERIC:
        df[c] = raw[c].astype(float).to_numpy()
    return df, paper.domain


def private_domain(public, bins: int):
    from synthinfer.data import Domain, PrivateBins

    return Domain([PrivateBins(c.name, *NUMERIC[c.name], True, bins=bins) if c.name in NUMERIC else c
                   for c in public.columns])


def analyse(datasets, n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    from synthinfer.analysis import analyze

    res = analyze(datasets, FORMULA, model="logit", n=n, progress=False, seed=0)
    return res.params.to_numpy(), res.conf_int(0.05).to_numpy(), res.conf_int(0.5).to_numpy()


def real_fit(df: pd.DataFrame):
    import statsmodels.formula.api as smf

    fit = smf.logit(FORMULA, df.assign(income=(df["income"] == ">50K").astype(float))).fit(disp=0)
    return fit.params, fit.bse


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=20)
    ap.add_argument("--epsilon", type=float, default=1.0)
    ap.add_argument("--m", type=int, default=100)
    ap.add_argument("--bins", type=int, default=10)
    ap.add_argument("--inference", default="auto")
    ap.add_argument("--marginals", default="pairs", choices=["pairs", "joint"],
                    help="pairs: the paper's 10 plus every pair of the analysis' variables; joint: the paper's 10 "
                         "plus the analysis' own 5-way marginal (the logit depends on the data only through it)")
    ap.add_argument("--out", type=Path, default=OUT)
    ap.add_argument("--plot-only", action="store_true")
    ap.add_argument("--coarsening-only", action="store_true", help="the cost of binning alone (no DP); see above")
    a = ap.parse_args()
    if a.coarsening_only:
        coarsening(a.out.with_name("continuous_coarsening.json"))
        return
    if a.plot_only:
        plot(json.loads(a.out.read_text()), a.out.with_suffix(".png"))
        return
    warnings.simplefilter("ignore")
    from synthinfer.generate import NapsuMQ
    from synthinfer.datasets import ADULT_PAPER_MARGINALS

    df, public = load()
    private = private_domain(public, a.bins)
    from itertools import combinations

    if a.marginals == "joint":
        marginals = list(ADULT_PAPER_MARGINALS) + [ANALYSIS_COLUMNS]
    else:
        marginals = list(ADULT_PAPER_MARGINALS) + [p for p in combinations(ANALYSIS_COLUMNS, 2)
                                                   if not any(set(p) == set(m) for m in ADULT_PAPER_MARGINALS)]
    n = len(df)
    real_q, real_se = real_fit(df)
    names = list(real_q.index)
    doc = {"command": " ".join(["python", "benchmarks/napsu/continuous_coverage.py", *sys.argv[1:]]),
           "formula": FORMULA, "marginals": [list(m) for m in marginals], "n": n, "epsilon": a.epsilon, "m": a.m, "bins": a.bins, "inference": a.inference,
           "coefficients": names, "real": {"estimate": real_q.tolist(), "se": real_se.tolist()}, "repeats": []}
    if a.out.exists():
        old = json.loads(a.out.read_text())
        if all(old.get(k) == doc[k] for k in ("epsilon", "m", "bins", "inference", "formula", "marginals")):
            doc["repeats"] = old["repeats"]
    for r in range(len(doc["repeats"]), a.repeats):
        rec = {"repeat": r, "loadavg_before": os.getloadavg()}
        t, cpu = time.perf_counter(), time.process_time()
        kw = dict(epsilon=a.epsilon, inference=a.inference, seed=np.random.default_rng([r, int(a.epsilon * 10)]))
        gen = NapsuMQ(marginals, **kw).fit(df, public)
        gens = {"midpoints": (gen, dict(midpoints=list(NUMERIC))), "uniform": (gen, dict(numbers=True))}
        gen_p = NapsuMQ(marginals, **kw).fit(df, private)
        gens["private"] = (gen_p, {})
        rec["private_edges"] = {c: list(gen_p.domain_[c].binning.edges) for c in NUMERIC}
        rec["d"] = {"public": int(gen.network_.dimension), "private": int(gen_p.network_.dimension)}
        for v, (g, opts) in gens.items():
            q, ci95, ci50 = analyse(g.generate(a.m, seed=r, **opts), n)
            rec[v] = {"estimate": q.tolist(),
                      "covers95": ((ci95[:, 0] <= real_q.to_numpy()) & (real_q.to_numpy() <= ci95[:, 1])).tolist(),
                      "covers50": ((ci50[:, 0] <= real_q.to_numpy()) & (real_q.to_numpy() <= ci50[:, 1])).tolist(),
                      "width_ratio": ((ci95[:, 1] - ci95[:, 0]) / (2 * 1.959964 * real_se.to_numpy())).tolist(),
                      "error_in_real_se": ((q - real_q.to_numpy()) / real_se.to_numpy()).tolist()}
        rec["wall_s"], rec["cpu_s"] = time.perf_counter() - t, time.process_time() - cpu
        rec["loadavg_after"] = os.getloadavg()
        doc["repeats"].append(rec)
        doc["summary"] = summarise(doc)
        a.out.parent.mkdir(parents=True, exist_ok=True)
        a.out.write_text(json.dumps(doc, indent=1))
        print(r, {v: np.round(np.median([x[v]["width_ratio"] for x in doc["repeats"]], axis=0), 2).tolist()
                  for v in VARIANTS}, f"{rec['wall_s']:.0f} s", flush=True)
    plot(doc, a.out.with_suffix(".png"))


def coarsening(path: Path, bins=(5, 10, 20, 30, 50)) -> None:
    """The logit's error (real se) after binning the real rows and decoding them back."""
    from synthinfer.data import Binning

    df, public = load()
    real_q, real_se = real_fit(df)
    rng = np.random.default_rng(0)
    rows = []
    for k in bins:
        for how in ("midpoints", "uniform"):
            d, sizes = df.copy(), {}
            for c, (lo, hi) in NUMERIC.items():
                x = df[c].to_numpy(float)
                if k == 5:  # the paper's public equal-width buckets
                    b = public[c].binning
                    b = Binning(b.edges, integer=True)
                else:  # equal mass at the real quantiles (ties merge bins): NOT private, a diagnostic
                    inner = np.unique(np.round(np.quantile(x, np.arange(1, k) / k)))
                    b = Binning((lo, *inner[(inner > lo) & (inner < hi)], hi), integer=True)
                codes = b.codes(x)
                d[c] = b.midpoints[codes] if how == "midpoints" else b.sample(codes, rng)
                sizes[c] = b.n_bins
            q, _ = real_fit(d)
            rows.append({"bins_asked": k, "edges": "public equal-width" if k == 5 else "real quantiles (diagnostic)",
                         "bins": sizes, "decoder": how,
                         "error_in_real_se": ((q - real_q) / real_se).round(2).tolist()})
            print(k, how, sizes, rows[-1]["error_in_real_se"], flush=True)
    path.write_text(json.dumps({
        "command": "python benchmarks/napsu/continuous_coverage.py --coarsening-only", "formula": FORMULA,
        "coefficients": list(real_q.index), "n": len(df), "rows": rows}, indent=1))
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.5, 4))
    names = list(real_q.index)
    for coef, marker in (("Intercept", "s"), ("age", "o"), ("Q('hours-per-week')", "^")):
        j = names.index(coef)
        for how, ls in (("midpoints", "-"), ("uniform", "--")):
            r = [x for x in rows if x["decoder"] == how]
            ax.plot([x["bins_asked"] for x in r], [x["error_in_real_se"][j] for x in r], ls, marker=marker,
                    label=f"{coef.replace(chr(81) + '(', '').strip(chr(39) + ')')}, {how}")
    ax.axhspan(-1.96, 1.96, color="0.9")
    ax.set_xlabel("bins asked for (5: the paper's public buckets; else equal mass, ties merged)")
    ax.set_ylabel("error of the real-data logit after binning (real se)")
    ax.set_title("Adult: what binning age and hours costs, no DP", fontsize=10)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path.with_suffix(".png"), dpi=110)


def summarise(doc: dict) -> dict:
    out = {}
    for v in VARIANTS:
        reps = [r[v] for r in doc["repeats"]]
        out[v] = {"coverage95": np.mean([r["covers95"] for r in reps], axis=0).tolist(),
                  "coverage50": np.mean([r["covers50"] for r in reps], axis=0).tolist(),
                  "coverage95_all": float(np.mean([r["covers95"] for r in reps])),
                  "coverage50_all": float(np.mean([r["covers50"] for r in reps])),
                  "median_width_ratio": np.median([r["width_ratio"] for r in reps], axis=0).tolist(),
                  "median_abs_error_in_real_se": np.median(np.abs([r["error_in_real_se"] for r in reps]), axis=0).tolist()}
    return out


def plot(doc: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    s, names = doc["summary"], doc["coefficients"]
    short = [n.replace("C(race, Treatment('White'))[T.", "race ").replace("C(sex)[T.", "sex ").replace("]", "")
             .replace("Q('hours-per-week')", "hours") for n in names]
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.5))
    x = np.arange(len(names))
    for i, v in enumerate(VARIANTS):
        axes[0].bar(x + (i - 1) * 0.27, s[v]["median_width_ratio"], 0.27, label=v)
        axes[1].bar(x + (i - 1) * 0.27, s[v]["coverage95"], 0.27, label=f"{v} (all: {s[v]['coverage95_all']:.3f})")
    axes[0].set_yscale("log")
    axes[0].axhline(3, color="k", ls=":", lw=1)
    axes[0].set_ylabel("median 95% width ratio (synthetic / real)")
    axes[1].axhspan(0.92, 0.98, color="0.9")
    axes[1].set_ylabel("95% coverage")
    axes[1].set_ylim(0, 1.05)
    for ax in axes:
        ax.set_xticks(x, short, rotation=35, ha="right", fontsize=8)
        ax.legend(fontsize=8)
    fig.suptitle(f"Adult, continuous age and hours: epsilon {doc['epsilon']}, m = {doc['m']}, "
                 f"{len(doc['repeats'])} repeats, inference {doc['inference']}, private bins {doc['bins']}", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


if __name__ == "__main__":
    main()
