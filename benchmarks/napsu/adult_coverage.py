"""Adult study of NAPSU-MQ (Räisä et al. 2023, Section 5.2, Fig. 4 and Supplement F).

The 10 discretised Adult columns (n = 46,043), the 10 two-way marginals the authors' code used,
delta = n^-2, epsilon in {0.1, 0.3, 0.5, 1}, NUTS, m = 100 datasets of n_syn = n.
Downstream: logistic regression of income (>50K) on the age-bucket midpoint, race dummies
(reference White), a Male indicator and an intercept. "Truth" is the same fit on the real
discretised data. For each confidence level L in 0.05..0.95: coverage = truth inside the
synthetic interval (Rubin's rules for synthetic data, t with nu df), width ratio = synthetic
interval length / real-data interval length at level L. Estimates with variance >= 1e3 are
dropped before combining (the paper's Fig. S5 variant; their count is recorded).

Results are rewritten after every fit, so an interrupted run leaves a valid JSON.

    PYTHONPATH=src python benchmarks/napsu/adult_coverage.py --repeats 20
    PYTHONPATH=src python benchmarks/napsu/adult_coverage.py --inference laplace \
        --out benchmarks/napsu/results/adult_coverage_laplace.json
    PYTHONPATH=src python benchmarks/napsu/adult_coverage.py --inference laplace --marginals mst \
        --out benchmarks/napsu/results/adult_coverage_laplace_mst.json

Long runs can be split over processes (``--start``, ``--repeats``, ``--epsilons``, one ``--out``
each) and joined afterwards; ``--combine`` only merges (a later file's record of the same repeat
and epsilon wins) and rewrites the summary:

    PYTHONPATH=src python benchmarks/napsu/adult_coverage.py --combine a.json,b.json \
        --out benchmarks/napsu/results/adult_coverage.json

The prior is the library's default (the interaction prior, ``NapsuMQ(interaction_sd=1)``)
unless ``--interaction-sd`` or ``--cell-prior`` say otherwise; the earlier studies
(``adult_coverage.json``, ``_laplace``, ``_vetted``) ran under the paper's prior alone, which
``--cell-prior 0 --interaction-sd 0`` reproduces, and ``_cell_prior{,_laplace}`` under the
cell prior on every marginal's cells (``--interaction-sd 0``):

    PYTHONPATH=src python benchmarks/napsu/adult_coverage.py --cell-prior 0 --interaction-sd 0 --repeats 8 \
        --start 32 --epsilons 1.0 --merge benchmarks/napsu/results/adult_coverage_vetted.json \
        --out benchmarks/napsu/results/adult_coverage_vetted.json
    PYTHONPATH=src python benchmarks/napsu/adult_coverage.py --inference laplace --interaction-sd 0 --epsilons 1.0 \
        --out benchmarks/napsu/results/adult_coverage_cell_prior_laplace.json

Each record carries the git commit that produced it (``code``), and the coverage of the first
synthetic dataset analysed as if it were the real data (``coverage_single``; the paper's Fig. 1
baseline). The Fig. 1 comparison on Adult, the PGM point estimate (not noise-aware) with
repeated datasets:

    PYTHONPATH=src python benchmarks/napsu/adult_coverage.py --inference mle --repeats 10 \
        --out benchmarks/napsu/results/adult_coverage_mle.json

What the coverage is of. By default the real table is fixed and only the DP noise (and the
selection) varies between repeats, and "truth" is the real table's own estimate. A calibrated
posterior then covers *more* than the nominal level: its interval also holds the real data's
sampling variance, which never varies here (with ``T = v_real + v_dp``, the chance that
``|q_bar - q_real| <= half_L`` is ``2 Phi(half_L / sqrt(T - v_real)) - 1 > L``). ``--population
bootstrap`` measures calibration itself: the table is the population, each repeat draws its own
real data as n rows with replacement from it (seeded by the repeat, the same rows at every
epsilon), the fits use that sample, and "truth" is the population's coefficient. Records then
also carry ``coverage_sample``, the coverage of the sample's own estimate (the default's
quantity). ``--expected`` reads studies of the fixed design and sets each level's observed
coverage beside the one a calibrated posterior with the same interval widths would give there
(:func:`calibrated_fixed_coverage`):

    PYTHONPATH=src python benchmarks/napsu/adult_coverage.py --expected \
        benchmarks/napsu/results/adult_coverage_aim_analysis_nuts_tied3.json,... \
        --out benchmarks/napsu/results/adult_coverage_fixed_vs_calibrated.json

    PYTHONPATH=src python benchmarks/napsu/adult_coverage.py --table full --marginals aim-analysis \
        --inference nuts --tie-below 3 --num-warmup 400 --num-samples 400 --population bootstrap \
        --epsilons 1.0 --out benchmarks/napsu/results/adult_coverage_aim_analysis_nuts_tied3_population.json

The default a user gets (``NapsuMQ(ANALYSIS, select_extra="aim")``: the library's sampler, draws
and ties), with either reference coding:

    PYTHONPATH=src python benchmarks/napsu/adult_coverage.py --table full --marginals aim-analysis \
        --inference auto --num-warmup default --num-samples default --population bootstrap \
        --epsilons 1.0 --reference well_measured \
        --out benchmarks/napsu/results/adult_coverage_default_well_measured_population.json

At the scale of real tables: all 15 columns, the paper's marginals forced and AIM's selection
(all-2-way workload), the same downstream logit:

    PYTHONPATH=src python benchmarks/napsu/adult_coverage.py --table full --marginals aim \
        --inference laplace --epsilons 1.0 --out benchmarks/napsu/results/adult_coverage_aim_laplace.json
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import time
import warnings
from pathlib import Path

import numpy as np
import statsmodels.api as sm
from default_fit import slowest_parameters  # noqa: E402 - this folder is the script's
from scipy import stats

from synthinfer.analysis import rubins_rules
from synthinfer.datasets import ADULT_PAPER_MARGINALS, adult_domain, load_adult
from synthinfer.errors import ConvergenceWarning
from synthinfer.generate import NapsuMQ

#: What the authors' code forced before its MST run; with ``--marginals mst`` these are fixed and
#: MST (McKenna et al. 2021) adds 2-way marginals until every column is covered, with 10% of
#: each fit's (epsilon, delta) spent on the selection (the realistic run).
FORCED = [("age", "income"), ("race", "income"), ("sex", "income"), ("race", "sex"), ("hours-per-week", "income")]
#: The analysis' own marginal: the logit below depends on the data only through the joint
#: table of its variables, so a model that measures it is correctly specified for it (with
#: ``--marginals aim-analysis``, forced before AIM's selection).
ANALYSIS = [("age", "race", "sex", "income")]
EPSILONS = [0.1, 0.3, 0.5, 1.0]
LEVELS = np.round(np.arange(0.05, 0.951, 0.05), 2)
NAMES = ["Intercept", "age", "race[Asian-Pac-Islander]", "race[Amer-Indian-Eskimo]", "race[Other]", "race[Black]", "Male"]
DROP_VARIANCE = 1e3


def design(frame, domain) -> tuple[np.ndarray, np.ndarray]:
    age = domain.midpoints("age")[frame["age"].cat.codes.to_numpy()]
    race = frame["race"].cat.codes.to_numpy()  # 0 = White (reference)
    male = (frame["sex"].cat.codes.to_numpy() == 1).astype(float)
    X = np.column_stack([np.ones(len(frame)), age] + [(race == k).astype(float) for k in range(1, 5)] + [male])
    y = frame["income"].cat.codes.to_numpy().astype(float)
    return X, y


def logit(frame, domain) -> tuple[np.ndarray, np.ndarray]:
    X, y = design(frame, domain)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            fit = sm.Logit(y, X).fit(disp=0, method="newton", maxiter=100)
        return np.asarray(fit.params), np.diag(np.asarray(fit.cov_params()))
    except Exception:  # perfect separation or singular Hessian on one synthetic dataset
        return np.full(X.shape[1], np.nan), np.full(X.shape[1], np.nan)


#: The same logit as the analyst writes it for :func:`synthinfer.analysis.analyze` (age at its
#: bucket midpoint), and its terms in the order of :data:`NAMES`.
ANALYST_FORMULA = "income ~ age + C(race, Treatment('White')) + C(sex)"
ANALYST_TERMS = ["Intercept", "age"] + [f"C(race, Treatment('White'))[T.{n[5:-1]}]" for n in NAMES[2:6]] + ["C(sex)[T.Male]"]


def analyst(frames, domain, n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, int]:
    """What an analyst gets from ``analyze()`` with every default (the batched fit, the
    separation remedy, the real-data floor of T): ``(q_bar, se, df, dropped, separated
    datasets)`` in the order of :data:`NAMES`."""
    from synthinfer.analysis import analyze

    mid = domain.midpoints("age")
    data = [f.assign(age=mid[f["age"].cat.codes.to_numpy()]) for f in frames]
    res = analyze(data, ANALYST_FORMULA, "logit", n=n, progress=False)
    order = [list(res.params.index).index(t) for t in ANALYST_TERMS]
    pick = lambda x: np.asarray(x, dtype=np.float64)[order]  # noqa: E731
    return (pick(res.params), pick(res.bse), pick(res.df), pick(res.n_dropped), len(res.separated))


def analyse(frames, domain, n: int, truth: np.ndarray, real_q: np.ndarray, real_v: np.ndarray,
            analysis: str = "statsmodels") -> dict:
    """The downstream logit on the synthetic ``frames``, combined, against ``truth``: per level
    of :data:`LEVELS` and coefficient, ``coverage`` (truth inside the interval),
    ``coverage_sample`` (the real sample's estimate ``real_q`` inside it), ``width_ratio``
    (against the real sample's interval, variance ``real_v``) and ``coverage_single`` (the first
    dataset analysed as if real); with ``q_bar``, ``dropped`` and ``separated_datasets``."""
    qv = [logit(f, domain) for f in frames]
    q = np.array([x[0] for x in qv])
    v = np.array([x[1] for x in qv])
    drop = ~((v > 0) & (v < DROP_VARIANCE))  # also degenerate fits with v <= 0
    q[drop], v[drop] = np.nan, np.nan
    separated = None
    if analysis == "analyze":
        q_bar, se, df, dropped, separated = analyst(frames, domain, n)
    else:
        res = rubins_rules(q, v, n=n, n_syn=n)
        q_bar, se, df, dropped = res.q_bar, np.sqrt(res.T_star), res.df, drop.sum(0)
    cover, cover_sample, ratio, single = [], [], [], []
    for lev in LEVELS:
        tq = stats.t.ppf(0.5 + lev / 2, df)
        zq = stats.norm.ppf(0.5 + lev / 2)
        half = tq * se
        cover.append((np.abs(truth - q_bar) <= half).astype(float).tolist())
        cover_sample.append((np.abs(real_q - q_bar) <= half).astype(float).tolist())
        ratio.append((half / (zq * np.sqrt(real_v))).tolist())
        # the first dataset analysed as if it were the real data (the paper's Fig. 1 baseline)
        single.append((np.abs(truth - q[0]) <= zq * np.sqrt(v[0])).astype(float).tolist())
    return {"coverage": cover, "width_ratio": ratio, "coverage_single": single, "coverage_sample": cover_sample,
            "q_bar": np.asarray(q_bar).tolist(), "dropped": np.asarray(dropped).tolist(),
            "separated_datasets": separated}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=20)
    ap.add_argument("--start", type=int, default=0, help="first repeat index (to continue an interrupted run)")
    ap.add_argument("--merge", help="JSON of earlier repeats to include (e.g. the interrupted run's --out)")
    ap.add_argument("--m", type=int, default=100)
    draws = lambda t: None if t == "default" else int(t)  # noqa: E731  default: the library's choice by model size
    ap.add_argument("--num-warmup", type=draws, default=800, help="NUTS warm-up draws per chain ('default': the library's)")
    ap.add_argument("--num-samples", type=draws, default=2000, help="NUTS draws per chain ('default': the library's)")
    ap.add_argument("--inference", default="nuts",
                    help="a registered NAPSU-MQ inference backend (nuts, laplace, importance, or one --plugin adds)")
    ap.add_argument("--plugin", help="a Python file to run first, e.g. one that registers a variant backend "
                                     "(benchmarks/napsu/variants/profile_draws.py)")
    ap.add_argument("--out", default="benchmarks/napsu/results/adult_coverage.json")
    ap.add_argument("--table", default="paper", choices=["paper", "full"],
                    help="the paper's 10 columns (n = 46,043), or all 15 (n = 45,222; education-num declared "
                         "derived from education)")
    ap.add_argument("--marginals", default="paper", choices=["paper", "mst", "aim", "aim-analysis"],
                    help="paper: the authors' 10 fixed marginals; mst: FORCED plus private MST selection; aim: the "
                         "paper's marginals plus AIM; aim-analysis: the analysis' 4-way marginal plus AIM")
    ap.add_argument("--epsilons", default=",".join(str(e) for e in EPSILONS),
                    help="comma-separated subset of " + ",".join(str(e) for e in EPSILONS))
    ap.add_argument("--cell-prior", type=float, default=None,
                    help="NapsuMQ's cell_prior (default: the library's; 0: the paper's prior alone)")
    ap.add_argument("--interaction-sd", type=float, default=None,
                    help="NapsuMQ's interaction_sd (default: the library's; 0: None, the normal prior on theta)")
    ap.add_argument("--required-share", type=float, default=None,
                    help="with --marginals aim: NapsuMQ's required_share (default: the library's)")
    ap.add_argument("--tie-below", type=lambda t: None if t.lower() == "none" else t if t == "auto" else float(t), default="auto",
                    help="NapsuMQ(tie_below=...): tie the selected marginals' near-empty interactions below K noise "
                         "sd (default: the library's, 3 with selection; none: untied, as the studies before it)")
    ap.add_argument("--analysis", default="statsmodels", choices=["statsmodels", "analyze"],
                    help="statsmodels: each dataset's logit by statsmodels, estimates with variance >= 1e3 dropped, "
                         "Rubin's rules (the paper's study); analyze: synthinfer.analysis.analyze with every default")
    ap.add_argument("--n-chains", type=int, default=4)
    ap.add_argument("--reference", default="most_frequent", choices=["most_frequent", "well_measured", "first"],
                    help="NapsuMQ(reference=...): each column's reference category in the model's coding")
    ap.add_argument("--population", default="fixed", choices=["fixed", "bootstrap"],
                    help="fixed: the table is the real data and truth its estimate; bootstrap: the table is the "
                         "population, each repeat's real data n rows drawn from it with replacement, truth the "
                         "population's estimate")
    ap.add_argument("--expected", help="comma-separated studies of the fixed design: observed coverage against "
                                       "what a calibrated posterior with their widths would give (no fitting)")
    ap.add_argument("--combine", help="comma-separated outputs of earlier runs to merge into --out (no fitting)")
    a = ap.parse_args()
    if a.plugin:
        import runpy

        runpy.run_path(a.plugin)
    if a.combine:
        combine(a.combine.split(","), a.out)
        return
    if a.expected:
        expected(a.expected.split(","), a.out)
        return
    code = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    epsilons = sorted((float(e) for e in a.epsilons.split(",")), reverse=True)  # the weakest privacy samples fastest
    warnings.simplefilter("ignore", ConvergenceWarning)
    if a.table == "full":
        data, domain = load_adult(categorical=True).data, adult_domain(derived=True)
    else:
        ds = load_adult(paper_subset=True)
        data, domain = ds.data, ds.domain
    n = len(data)
    population = data
    truth, truth_v = logit(population, domain)
    real_q, real_v = truth, truth_v
    forced = {"mst": FORCED, "aim-analysis": ANALYSIS}.get(a.marginals, ADULT_PAPER_MARGINALS)
    select = {"paper": 0, "mst": "mst", "aim": "aim", "aim-analysis": "aim"}[a.marginals]
    records = json.loads(Path(a.merge).read_text())["records"] if a.merge else []
    records = [x for x in records if x["repeat"] < a.start]
    t_start = time.time()
    prior = {} if a.cell_prior is None else {"cell_prior": a.cell_prior}
    if a.interaction_sd is not None:
        prior["interaction_sd"] = a.interaction_sd or None
    if a.required_share is not None:
        prior["required_share"] = a.required_share
    prior["tie_below"] = a.tie_below
    prior["reference"] = a.reference
    last = [0.0]

    def report(stage: str) -> None:  # the fit's stages, and NUTS's draws at most every 30 s
        if time.time() - last[0] > 30 or not stage.startswith("NUTS"):
            last[0] = time.time()
            print(f"  {time.strftime('%H:%M:%S')} {stage}", flush=True)

    for r in range(a.start, a.start + a.repeats):
        if a.population == "bootstrap":  # this repeat's real data: n rows of the population, with replacement
            rows = np.random.default_rng([r, 7919]).integers(0, n, size=n)
            data = population.iloc[rows].reset_index(drop=True)
            real_q, real_v = logit(data, domain)
        for eps in epsilons:
            t0 = time.time()
            with warnings.catch_warnings(record=True) as caught:  # what the user would see (ConvergenceWarning)
                warnings.simplefilter("always", ConvergenceWarning)
                gen = NapsuMQ(forced, epsilon=eps, delta=n**-2.0, select_extra=select, inference=a.inference,
                              n_chains=a.n_chains, num_warmup=a.num_warmup, num_samples=a.num_samples, **prior,
                              seed=np.random.default_rng([r, int(eps * 10)])).fit(data, domain, progress=report)
            caught = [w for w in caught if issubclass(w.category, ConvergenceWarning)]
            t_fit = time.time() - t0
            frames = gen.generate(a.m, seed=np.random.default_rng([r, int(eps * 10), 1]))
            coverage = analyse(frames, domain, n, truth, real_q, real_v, a.analysis)
            if a.population != "bootstrap":
                del coverage["coverage_sample"]
            other = gen.diagnostics_.get("laplace", {})
            nd = gen.diagnostics_.get("nuts", {"rhat_max": float("nan"), "ess_bulk_min": float("nan"), "divergences": 0,
                                               "gradient_evaluations": other.get("gradient_evaluations", 0)})
            records.append({
                "repeat": r, "epsilon": eps, **coverage, "analysis": a.analysis,
                **({"real_estimate": real_q.tolist(), "real_variance": real_v.tolist()}
                   if a.population == "bootstrap" else {}),
                "fit_seconds": t_fit, "total_seconds": time.time() - t0,
                "rhat_max": nd["rhat_max"], "ess_bulk_min": nd["ess_bulk_min"], "divergences": nd["divergences"],
                "gradient_evaluations": nd["gradient_evaluations"],
                "marginals": [list(m.columns) for m in gen.marginals_], "d": int(gen.network_.dimension), "code": code,
                "canonical_queries": int(gen.queries_.canonical.dimension), "ties": gen.diagnostics_.get("ties"),
                "sampler": gen.diagnostics_.get("auto", {}).get("sampler", a.inference),
                "step_size": gen.diagnostics_.get("nuts", {}).get("step_size"),
                "gradient_evaluations_per_draw": gen.diagnostics_.get("nuts", {}).get("gradient_evaluations_per_draw"),
                "draws": gen.diagnostics_.get("nuts", {}).get("draws"),
                "passes": gen.diagnostics_.get("nuts", {}).get("passes"),  # NUTS run longer until converged
                # draws that became warmup when a line jump joined after a failed check, and the jumps' parameters
                "draws_set_aside": gen.diagnostics_.get("nuts", {}).get("draws_set_aside"),
                "jump_parameters": gen.diagnostics_.get("nuts", {}).get("plateau_jump_parameters"),
                # NUTS sampled again at a higher target acceptance after divergences (those runs)
                "target_accept": gen.diagnostics_.get("nuts", {}).get("target_accept"),
                "earlier_runs": gen.diagnostics_.get("nuts", {}).get("earlier_runs"),
                # the reference categories the fit chose from its noisy counts (napsu.reference)
                "reference_categories": {c: str(gen.domain_[c].categories[int(v)])
                                         for c, v in gen.queries_.canonical.reference.items()},
                "warnings": [str(w.message) for w in caught],
                # the five parameters that mixed worst and what they set (NUTS fits)
                "slowest_parameters": slowest_parameters(gen),
            })
            payload = {
                "settings": {"marginals": forced if not select else {"forced": forced, "selection": select},
                             "table": a.table,
                             "epsilons": epsilons, "delta": n**-2.0, "n": n, "m": a.m,
                             "levels": LEVELS.tolist(), "coefficients": NAMES, "num_warmup": a.num_warmup,
                             "num_samples": a.num_samples, "n_chains": a.n_chains, "inference": a.inference, "drop_variance_at_least": DROP_VARIANCE,
                             "cell_prior": gen.cell_prior,
                             "interaction_sd": gen.interaction_sd,
                             "required_share": gen.diagnostics_.get("aim", {}).get("required_share"),
                             "tie_below": (gen.diagnostics_.get("ties") or {}).get("tie_below"),
                             "reference": a.reference, "analysis": a.analysis,
                             "repeats_requested": a.repeats, "population": a.population},
                # fixed: the real data's fit; bootstrap: the population's (the truth), each record has its sample's
                "real": {"estimate": truth.tolist(), "variance": truth_v.tolist()},
                "summary": summarise(records, truth), "records": records,
                "elapsed_s": time.time() - t_start, "loadavg": os.getloadavg(),
            }
            tmp = Path(a.out + ".tmp")
            tmp.write_text(json.dumps(payload))
            os.replace(tmp, a.out)
            print(f"repeat {r} eps {eps}: fit {t_fit:.0f} s, total {time.time() - t0:.0f} s, "
                  f"R-hat {nd['rhat_max']:.3f}", flush=True)


def calibrated_fixed_coverage(width_ratio: np.ndarray, real_variance: np.ndarray) -> np.ndarray:
    """The coverage of the *fixed* real-data estimate that a calibrated posterior with these
    intervals gives, per level and coefficient (``width_ratio``: levels x coefficients, as in a
    record).

    The interval's variance ``T`` holds the real data's sampling variance ``v_real`` and what the
    DP noise adds, ``v_dp = T - v_real``. With the real data fixed only the second moves the
    centre: ``q_bar - q_real ~ N(0, T - v_real)``, so the interval ``q_bar +- half_L`` covers
    ``q_real`` with probability ``2 Phi(half_L / sqrt(T - v_real)) - 1``, above ``L``. ``T`` is
    read off the 95% half-width (normal quantile; m = 100 gives tens of degrees of freedom).
    """
    z = stats.norm.ppf(0.5 + LEVELS / 2)[:, None]
    half = np.asarray(width_ratio) * z * np.sqrt(real_variance)[None, :]
    T = (half[-1] / stats.norm.ppf(0.975)) ** 2
    excess = np.maximum(T - real_variance, 1e-300)
    return 2 * stats.norm.cdf(half / np.sqrt(excess)[None, :]) - 1


def expected(paths: list[str], out: str) -> None:
    """Observed coverage of the fixed design's studies against :func:`calibrated_fixed_coverage`."""
    rows = []
    for path in paths:
        doc = json.loads(Path(path).read_text())
        if doc["settings"].get("population", "fixed") != "fixed":
            raise SystemExit(f"{path}: not a study of the fixed design")
        real_v = np.asarray(doc["real"]["variance"])
        for eps in sorted({r["epsilon"] for r in doc["records"]}, reverse=True):
            rs = [r for r in doc["records"] if r["epsilon"] == eps]
            observed = np.nanmean([r["coverage"] for r in rs], axis=(0, 2))
            calibrated = np.nanmean([calibrated_fixed_coverage(r["width_ratio"], real_v) for r in rs], axis=(0, 2))
            rows.append({"study": Path(path).name, "epsilon": eps, "repeats": len(rs),
                         "inference": doc["settings"]["inference"], "tie_below": doc["settings"].get("tie_below"),
                         "observed_by_level": observed.tolist(), "calibrated_by_level": calibrated.tolist()})
            i50, i95 = list(LEVELS).index(0.5), list(LEVELS).index(0.95)
            print(f"{Path(path).name:58s} eps {eps}: 50% {observed[i50]:.3f} (calibrated {calibrated[i50]:.3f})  "
                  f"95% {observed[i95]:.3f} ({calibrated[i95]:.3f})")
    payload = {"levels": LEVELS.tolist(), "rows": rows,
               "command": " ".join(["python", "benchmarks/napsu/adult_coverage.py", "--expected", ",".join(paths),
                                    "--out", out])}
    Path(out).write_text(json.dumps(payload, indent=1))


def combine(paths: list[str], out: str) -> None:
    """Merge the records of several runs (same settings apart from repeats and epsilons)."""
    payloads = [json.loads(Path(p).read_text()) for p in paths]
    merged: dict[tuple, dict] = {}
    for pl in payloads:
        for r in pl["records"]:
            merged[(r["repeat"], r["epsilon"])] = r
    records = sorted(merged.values(), key=lambda r: (r["repeat"], -r["epsilon"]))
    base = payloads[0]
    settings = dict(base["settings"], epsilons=sorted({r["epsilon"] for r in records}, reverse=True),
                    repeats_requested=max(pl["settings"].get("repeats_requested", 0) for pl in payloads),
                    combined_from=[str(p) for p in paths])
    payload = dict(base, settings=settings, summary=summarise(records, base["real"]["estimate"]), records=records,
                   elapsed_s=sum(pl.get("elapsed_s", 0.0) for pl in payloads))
    tmp = Path(out + ".tmp")
    tmp.write_text(json.dumps(payload))
    os.replace(tmp, out)
    print(f"{len(records)} records -> {out}")


def summarise(records: list[dict], truth=None) -> dict:
    """Per epsilon: coverage and widths by level, convergence and cost. In the population design
    (records with their sample's ``real_estimate``) also the real data's own 95% intervals'
    coverage of ``truth`` on the same samples: the baseline the synthetic coverage is read
    against (the logit is misspecified, so the sample's model-based variance can understate its
    sampling variance, and a rare sample is far from the population's fit)."""
    out = {}
    i95 = list(LEVELS).index(0.95)
    for eps in EPSILONS:
        rs = [r for r in records if r["epsilon"] == eps]
        if not rs:
            continue
        cov = np.array([r["coverage"] for r in rs])  # (repeats, levels, coefs)
        rat = np.array([r["width_ratio"] for r in rs])
        single = [r["coverage_single"] for r in rs if "coverage_single" in r]  # records from before lack it
        out[str(eps)] = {
            "repeats": len(rs),
            "coverage_by_level": np.nanmean(cov, axis=(0, 2)).tolist(),
            "coverage_single_dataset_by_level": np.nanmean(np.array(single), axis=(0, 2)).tolist() if single else None,
            "coverage_95_by_coefficient": np.nanmean(cov[:, i95, :], axis=0).tolist(),
            "real_data_coverage_95_by_coefficient": (
                np.mean([np.abs(np.asarray(r["real_estimate"]) - truth) <= stats.norm.ppf(0.975) * np.sqrt(r["real_variance"])
                         for r in rs], axis=0).tolist()
                if truth is not None and all("real_estimate" in r for r in rs) else None),
            "coverage_of_sample_estimate_by_level": (np.nanmean(np.array([r["coverage_sample"] for r in rs]), axis=(0, 2)).tolist()
                                                     if all("coverage_sample" in r for r in rs) else None),
            "median_width_ratio_by_level": np.nanmedian(rat, axis=(0, 2)).tolist(),
            "rhat_max": max(r["rhat_max"] for r in rs),
            # convergence targets per fit: R-hat < 1.01 and bulk ESS >= 400 for every parameter
            "share_fits_rhat_below_1.01": float(np.mean([r["rhat_max"] < 1.01 for r in rs])),
            "share_fits_ess_at_least_400": float(np.mean([r["ess_bulk_min"] >= 400 for r in rs])),
            "share_fits_warned": (float(np.mean([bool(r["warnings"]) for r in rs]))
                                  if all("warnings" in r for r in rs) else None),  # records from before lack it
            "fit_seconds_median": float(np.median([r["fit_seconds"] for r in rs])),
            "gradient_evaluations_median": float(np.median([r["gradient_evaluations"] for r in rs])),
        }
    return out


if __name__ == "__main__":
    main()
