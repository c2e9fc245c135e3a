r"""A continuous outcome: OLS of systolic blood pressure on age, BMI and sex from NAPSU-MQ releases.

The Framingham heart study teaching table (``synthinfer.datasets.load_framingham``; rows with a
missing BMI dropped, n = 4,221) and the analysis ``sysBP ~ age + BMI + male`` by ordinary least
squares, whose truth is the same fit on the real numbers. The data holder releases three numbers
in fine public bins, each with five public groups (derived columns, which the fit computes):

* ``sysBP``: 5 mmHg bins over [80, 300], groups cut at 110, 125, 140, 160;
* ``age``: 2-year bins over [32, 72], groups cut at 40, 46, 52, 58;
* ``BMI``: 1-unit bins over [15, 60], groups cut at 22, 25, 28, 32;

every pair of the four analysis columns through the groups and the numbers' fine 1-ways. With
``--coarse-interactions linear`` the model is piecewise linear in each number inside each group,
measured by the numbers' moments in each coarse cell; with ``bilinear`` (the default) each pair
of numbers also has a product term per coarse cell, measured by its product moment, so that the
numbers covary inside a cell (runs without the field in ``--out`` were ``linear``). ``m``
datasets are drawn with the numbers inside their bins (``numbers=True``) and, side by side, at
the bins' midpoints; ``analyze(..., model="ols")`` combines them by Rubin's rules for synthetic
data. Per coefficient: the error in real standard errors, whether the 95% interval covers the
real estimate, and the width ratio (synthetic / real 95% interval). Also the model's own OLS at
its mode (exact, from its clique table: no synthetic sampling noise) with the covariance ratios
(model / real data binned alike) and the rows in each number's upper tail. One fit per call,
appended to ``--out``; ``--summary`` prints each study's coverage from it (runs that differ
only in ``--seed`` are repeats). ``--design`` picks other public bins (:data:`DESIGNS`): wide
bins in the tails, and three groups per number.

    PYTHONPATH=src python benchmarks/napsu/framingham_ols.py --epsilon 1 --inference laplace --m 20 \
        --coarse-interactions bilinear
    for s in $(seq 0 19); do PYTHONPATH=src python benchmarks/napsu/framingham_ols.py --epsilon 1 \
        --design tails3 --m 100 --seed $s --out benchmarks/napsu/results/framingham_ols_coverage.json; done
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

OUT = Path(__file__).resolve().parent / "results" / "framingham_ols.json"
FORMULA = "sysBP ~ age + BMI + male"


def _edges(lo: float, hi: float, width: float, *, below: tuple = (), above: tuple = ()) -> tuple[float, ...]:
    """Bins of ``width`` over [lo, hi], with the public edges ``below`` lo and ``above`` hi as wider tail bins."""
    return (*below, *np.arange(lo, hi + width / 2, width).tolist(), *above)


#: each design's public bin edges and group cuts per number (nothing read from the data).
#: "uniform": equal fine bins over wide clinical bounds; "tails": the same fine bins over the
#: clinical bulk and a few wide bins in each tail, so that no bin is nearly empty at n = 4,221
#: (sysBP >= 180 and BMI >= 36 or < 18 are clinical categories, not the data's quantiles)
DESIGNS = {
    "uniform": {"sysBP": (_edges(80, 300, 5), (110, 125, 140, 160)),
                "age": (_edges(32, 72, 2), (40, 46, 52, 58)),
                "BMI": (_edges(15, 60, 1), (22, 25, 28, 32))},
    "tails": {"sysBP": (_edges(95, 180, 5, below=(80,), above=(200, 300)), (110, 125, 140, 160)),
              "age": (_edges(32, 72, 2), (40, 46, 52, 58)),
              "BMI": (_edges(18, 36, 1, below=(15,), above=(40, 60)), (22, 25, 28, 32))},
    # as "tails", with three groups per number at clinical thresholds (so each coarse cell of a
    # pair holds more rows): systolic 120 and 140 mmHg, age 44 and 56, BMI 25 and 30
    "tails3": {"sysBP": (_edges(95, 180, 5, below=(80,), above=(200, 300)), (120, 140)),
               "age": (_edges(32, 72, 2), (44, 56)),
               "BMI": (_edges(18, 36, 1, below=(15,), above=(40, 60)), (25, 30))},
    # as "tails3", with the upper tail bins in a group of their own (systolic >= 180, BMI >= 36),
    # so that the moment weights of the bulk's top group are not stretched to the public bound
    "tails4": {"sysBP": (_edges(95, 180, 5, below=(80,), above=(200, 300)), (120, 140, 180)),
               "age": (_edges(32, 72, 2), (44, 56)),
               "BMI": (_edges(18, 36, 1, below=(15,), above=(40, 60)), (25, 30, 36))},
}
NUMBERS = tuple(DESIGNS["uniform"])
COLUMNS = ["sysBP", "age", "BMI", "male"]


def table(design: str = "uniform") -> tuple[pd.DataFrame, object]:
    """The analysis columns (complete rows) and their public Domain in ``design`` (nothing read
    from the data)."""
    from synthinfer.data import Column, Domain, binned_column
    from synthinfer.datasets import load_framingham

    df = load_framingham().data[COLUMNS].dropna().reset_index(drop=True)
    df["male"] = df["male"].astype(int)
    cols = []
    for name, (edges, cuts) in DESIGNS[design].items():
        fine = binned_column(name, edges=edges)
        cols += [fine, Column.groups_of(fine, cuts, name=name + "_g")]
    cols.append(Column("male", (0, 1)))
    return df, Domain(cols)


def marginals(one_ways: bool = True) -> list[tuple[str, ...]]:
    """Every pair of ``COLUMNS`` through the numbers' groups, and (``one_ways``) each number's fine 1-way."""
    group = {c: c + "_g" if c in NUMBERS else c for c in COLUMNS}
    pairs = [(group[a], group[b]) for i, a in enumerate(COLUMNS) for b in COLUMNS[i + 1:]]
    return pairs + ([(c,) for c in NUMBERS] if one_ways else [])


def ols(frame: pd.DataFrame):
    import statsmodels.formula.api as smf

    return smf.ols(FORMULA, frame).fit()


def joint_moments(p: np.ndarray, mids: list[np.ndarray], widths: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """Means and covariance of ``COLUMNS`` under a joint table ``p`` over their bins, the numbers
    uniform inside their bins (as ``numbers=True`` decodes them)."""
    grids = np.meshgrid(*[np.arange(s) for s in p.shape], indexing="ij")
    w = p.ravel() / p.sum()
    v = np.stack([m[g.ravel()] for m, g in zip(mids, grids)], axis=1)
    mean = w @ v
    cov = (v - mean).T @ ((v - mean) * w[:, None])
    cov[np.diag_indices(len(mids))] += [w @ (wd[g.ravel()] ** 2 / 12.0) for wd, g in zip(widths, grids)]
    return mean, cov


def exact_ols(mean: np.ndarray, cov: np.ndarray) -> np.ndarray:
    """``FORMULA``'s population coefficients (intercept, age, BMI, male) from the means and
    covariance of ``COLUMNS`` (sysBP first)."""
    slopes = np.linalg.solve(cov[1:, 1:], cov[1:, 0])
    return np.concatenate([[mean[0] - slopes @ mean[1:]], slopes])


def model_table(gen) -> tuple:
    """``(table_at, mids, widths)``: ``table_at(theta)`` is the model's joint table over
    ``COLUMNS``' bins (exact, from the clique holding them); ``mids`` and ``widths`` are each
    column's bin midpoints and widths (:func:`joint_moments`'s)."""
    from synthinfer._precision import float64

    dom = gen.network_.queries.domain
    mids = [np.asarray(dom.midpoints(c), dtype=float) if c in NUMBERS else np.arange(2.0) for c in COLUMNS]
    widths = [np.diff(np.asarray(dom[c].binning.edges, dtype=float)) if c in NUMBERS else np.zeros(2) for c in COLUMNS]
    jt = gen.network_.junction_tree
    home = next(i for i, c in enumerate(jt.cliques) if {dom.names[v] for v in c} >= set(COLUMNS))
    cols = [dom.names[v] for v in jt.cliques[home]]
    kept = [c for c in cols if c in COLUMNS]

    def table_at(theta) -> np.ndarray:
        with float64():
            table = np.asarray(gen.network_.clique_marginals(np.asarray(theta))[home])
        table = table.reshape([len(dom[c].categories) for c in cols])
        table = table.sum(axis=tuple(i for i, c in enumerate(cols) if c not in COLUMNS))
        return np.moveaxis(table, [kept.index(c) for c in COLUMNS], range(len(COLUMNS)))

    return table_at, mids, widths


def model_at_mode(gen, df: pd.DataFrame) -> dict:
    """The model's own OLS at the Laplace mean, exact from its clique table over the four
    columns, against the real data binned the same way: what the model's structure and prior
    keep of the covariances, free of the synthetic datasets' sampling noise."""
    dom = gen.network_.queries.domain
    table_at, mids, widths = model_table(gen)
    table = table_at(gen.laplace_.mean)  # the Laplace fit's mean (the noise-aware backends all make one)
    codes = [np.asarray(dom[c].binning.codes(df[c].to_numpy())) if c in NUMBERS else df[c].to_numpy() for c in COLUMNS]
    real = np.zeros(table.shape)
    np.add.at(real, tuple(codes), 1.0)
    (mm, cm), (mr, cr) = joint_moments(table, mids, widths), joint_moments(real, mids, widths)
    tails = {}  # rows at or above a public threshold of each number: the model's (expected), the real
    for i, (c, q) in enumerate([("sysBP", 200.0), ("age", 64.0), ("BMI", 40.0)]):
        one_way = table.sum(axis=tuple(j for j in range(len(COLUMNS)) if j != i)) / table.sum()
        tails[c] = [float(one_way[mids[i] >= q].sum() * len(df)), float((df[c] >= q).sum())]
    return {"coef": exact_ols(mm, cm).tolist(), "binned_real_coef": exact_ols(mr, cr).tolist(),
            "cov_ratio": (cm / cr).tolist(), "tail_rows": tails}


#: what makes two runs repeats of one study (``--summary``)
STUDY_KEYS = ("design", "epsilon", "inference", "m", "coarse_interactions", "cell_prior", "smooth_sd", "interaction_sd",
              "marginals", "decoder", "slopes_below", "linear_by_linear",
              "num_warmup", "num_samples", "n_chains")


def summary(runs: list[dict]) -> list[dict]:
    """Each study's coverage (:func:`continuous_fine_coarse.summary`), per decoder."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import continuous_fine_coarse as cfc  # the Adult study's summary

    flat = [{**r, **r[dec], "decoder": dec} for r in runs for dec in ("uniform", "midpoints") if dec in r]
    return cfc.summary(flat, STUDY_KEYS)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--summary", action="store_true", help="print each study's coverage from --out (no fitting)")
    ap.add_argument("--epsilon", type=float, default=1.0)
    ap.add_argument("--inference", default="laplace")
    ap.add_argument("--num-warmup", type=int, default=None, help="NUTS only (default: the library's choice)")
    ap.add_argument("--num-samples", type=int, default=None,
                    help="NUTS only, per chain (default: the library's choice, run longer until converged)")
    ap.add_argument("--n-chains", type=int, default=None, help="NUTS only (default: the library's, 4)")
    ap.add_argument("--m", type=int, default=20, help="synthetic datasets (0: only the model at its mode)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--coarse-interactions", choices=("linear", "bilinear"), default="bilinear")
    ap.add_argument("--cell-prior", type=float, default=None, help="NapsuMQ(cell_prior=...); default the library's")
    ap.add_argument("--interaction-sd", type=float, default=None,
                    help="NapsuMQ(interaction_sd=...); default the library's")
    ap.add_argument("--reference", default=None, metavar="COL=LABEL,...",
                    help="fixed reference categories (NapsuMQ(reference=...); male's labels are 0 and 1)")
    ap.add_argument("--no-one-ways", action="store_true",
                    help="measure no fine 1-ways: inside a group each number is log-linear (its moments)")
    ap.add_argument("--slopes-below", type=float, default=None,
                    help="NapsuMQ(slopes_below=K): drop the slopes of coarse cells whose noisy count is below K noise sd")
    ap.add_argument("--linear-by-linear", action="store_true",
                    help="NapsuMQ(linear_by_linear=True): a trend per pair of numbers under the main effects' prior")
    ap.add_argument("--smooth-sd", type=float, default=None,
                    help="NapsuMQ(smooth_sd=...): the numbers' main effects as penalised splines")
    ap.add_argument("--design", choices=tuple(DESIGNS), default="uniform",
                    help="the numbers' public bins (DESIGNS): uniform; wide tail bins (tails); and 3 or 4 groups (tails3, tails4)")
    ap.add_argument("--out", type=Path, default=OUT)
    a = ap.parse_args()
    if a.summary:
        print(json.dumps(summary(json.loads(a.out.read_text())["runs"]), indent=1))
        return
    warnings.simplefilter("ignore")
    from synthinfer.analysis import analyze
    from synthinfer.generate import NapsuMQ

    df, domain = table(a.design)
    real = ols(df)
    rec = {"command": " ".join(["python", "benchmarks/napsu/framingham_ols.py", *sys.argv[1:]]), "formula": FORMULA,
           "n": len(df), "epsilon": a.epsilon, "inference": a.inference, "m": a.m, "seed": a.seed,
           "coarse_interactions": a.coarse_interactions, "cell_prior": a.cell_prior, "smooth_sd": a.smooth_sd,
           "interaction_sd": a.interaction_sd, "slopes_below": a.slopes_below,
           "linear_by_linear": a.linear_by_linear, "num_warmup": a.num_warmup, "num_samples": a.num_samples, "n_chains": a.n_chains,
           "design": a.design, "numbers": {k: {"edges": list(e), "cuts": list(c)} for k, (e, c) in DESIGNS[a.design].items()},
           "marginals": [list(m) for m in marginals(not a.no_one_ways)], "coefficients": list(real.params.index),
           "real": real.params.tolist(), "real_se": real.bse.tolist(), "loadavg_before": os.getloadavg()}
    t, cpu = time.perf_counter(), time.process_time()
    extra = ({} if a.cell_prior is None else {"cell_prior": a.cell_prior}) | (
        {} if a.smooth_sd is None else {"smooth_sd": a.smooth_sd}) | (
        {} if a.interaction_sd is None else {"interaction_sd": a.interaction_sd}) | (
        {} if a.slopes_below is None else {"slopes_below": a.slopes_below}) | (
        {"linear_by_linear": True} if a.linear_by_linear else {}) | (
        {} if a.num_warmup is None else {"num_warmup": a.num_warmup}) | (
        {} if a.num_samples is None else {"num_samples": a.num_samples}) | (
        {} if a.n_chains is None else {"n_chains": a.n_chains})
    if a.reference:
        pairs = dict(kv.split("=", 1) for kv in a.reference.split(","))
        extra["reference"] = {c: int(v) if c == "male" else v for c, v in pairs.items()}
    gen = NapsuMQ(marginals(not a.no_one_ways), epsilon=a.epsilon, inference=a.inference,
                  coarse_interactions=a.coarse_interactions, seed=a.seed, **extra).fit(df, domain)
    rec["fit_wall_s"], rec["fit_cpu_s"] = time.perf_counter() - t, time.process_time() - cpu
    rec["d"] = int(gen.network_.dimension)
    if "nuts" in gen.diagnostics_:
        rec["nuts"] = {k: gen.diagnostics_["nuts"][k] for k in ("rhat_max", "ess_bulk_min", "divergences", "step_size",
                                                                 "gradient_evaluations_per_draw", "passes", "earlier_runs")
                       if k in gen.diagnostics_["nuts"]}
    rec["reference"] = {c: str(gen.domain_[c].categories[i]) for c, i in gen.queries_.reference.items()}
    jt = gen.network_.junction_tree
    rec["largest_clique_cells"] = int(max(np.prod(jt.shape(c)) for c in range(len(jt.cliques))))
    derived = [c + "_g" for c in NUMBERS]
    rq, se = real.params.to_numpy(), real.bse.to_numpy()
    rec["model_at_mode"] = mode = model_at_mode(gen, df)
    mode["error_in_real_se"] = ((np.asarray(mode["coef"]) - rq) / se).tolist()
    mode["binned_real_error_in_real_se"] = ((np.asarray(mode["binned_real_coef"]) - rq) / se).tolist()
    decoders = (("uniform", {"numbers": True}), ("midpoints", {"midpoints": True})) if a.m > 0 else ()
    for decoder, kw in decoders:
        syn = [s.drop(columns=derived).astype(float) for s in gen.generate(a.m, seed=a.seed, **kw)]
        res = analyze(syn, FORMULA, model="ols", n=len(df), progress=False, seed=0)
        q, ci, ci50 = res.params.to_numpy(), res.conf_int(0.05).to_numpy(), res.conf_int(0.5).to_numpy()
        rec[decoder] = {"estimate": q.tolist(), "error_in_real_se": ((q - rq) / se).tolist(),
                        "covers95": ((ci[:, 0] <= rq) & (rq <= ci[:, 1])).tolist(),
                        "covers50": ((ci50[:, 0] <= rq) & (rq <= ci50[:, 1])).tolist(),
                        "width_ratio": ((ci[:, 1] - ci[:, 0]) / (2 * 1.959964 * se)).tolist()}
    rec["loadavg_after"] = os.getloadavg()
    doc = json.loads(a.out.read_text()) if a.out.exists() else {"runs": []}
    doc["runs"].append(rec)
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_text(json.dumps(doc, indent=1))
    print(f"d = {rec['d']}, largest clique {rec['largest_clique_cells']} cells, fit {rec['fit_cpu_s']:.0f} s CPU")
    print("model at its mode, error in real se:", np.round(mode["error_in_real_se"], 2), "(binned real data:",
          np.round(mode["binned_real_error_in_real_se"], 2), ") rows in the tails (model, real):", mode["tail_rows"])
    for decoder, _ in decoders:
        for name, e, c, w in zip(rec["coefficients"], rec[decoder]["error_in_real_se"], rec[decoder]["covers95"],
                                 rec[decoder]["width_ratio"]):
            print(f"{decoder:9s} {name:10s} error {e:+7.2f} real se  covers95 {c!s:5s}  width ratio {w:6.2f}")


if __name__ == "__main__":
    main()
