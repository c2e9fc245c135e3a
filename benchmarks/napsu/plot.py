"""Figures for the NAPSU-MQ studies from their JSON results (merging split toy runs).

    PYTHONPATH=src python benchmarks/napsu/plot.py
"""

from __future__ import annotations

import json
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

R = Path(__file__).resolve().parent / "results"  # wherever it is run from
TRUE = np.array([1.0, 0.0])
LABELS = {
    "napsu_laplace": "NAPSU-MQ (Laplace)",
    "napsu_nuts": "NAPSU-MQ (NUTS)",
    "napsu_laplace_not_noise_aware": "NAPSU-MQ -NA (sigma=0.005)",
    "mle_mi": "MLE (PGM objective) + MI",
    "mle_single": "MLE, one dataset (-NA-MI)",
}


def _toy_coverage(rs: list[dict]) -> tuple[np.ndarray, np.ndarray]:
    """Coverage of TRUE and median width of the 95% intervals in ``rs``, per coefficient."""
    if not rs:
        return np.full(2, np.nan), np.full(2, np.nan)
    lo = np.array([r["lower"] for r in rs], float)
    hi = np.array([r["upper"] for r in rs], float)
    ok = np.isfinite(lo) & np.isfinite(hi)
    c = np.where(ok, (lo <= TRUE) & (TRUE <= hi), np.nan)
    return np.nanmean(c, axis=0), np.nanmedian(np.where(ok, hi - lo, np.nan), axis=0)


def _merged_records(files) -> dict[tuple, dict]:
    """Toy records of a run split over files, keyed (repeat, epsilon, method); later files win."""
    records = {}
    for f in files:
        if f.exists():
            for rec in json.loads(f.read_text())["records"]:
                records[(rec["repeat"], rec["epsilon"], rec["method"])] = rec
    return records


def toy() -> None:
    records = _merged_records([R / "toy_coverage.json", *sorted(R.glob("toy_coverage_part*.json"))])
    if not records:
        return
    eps = sorted({k[1] for k in records})
    summary = {}
    fig, axes = plt.subplots(1, 4, figsize=(18, 4))
    for method, label in LABELS.items():
        cov, wid, counts = [], [], []
        for e in eps:
            rs = [r for k, r in records.items() if k[1] == e and k[2] == method]
            c, w = _toy_coverage(rs)
            cov.append(c)
            wid.append(w)
            counts.append(len(rs))
        cov, wid = np.array(cov), np.array(wid)
        summary[method] = {"epsilons": eps, "repeats": counts, "coverage_x1": cov[:, 0].tolist(),
                           "coverage_x2": cov[:, 1].tolist(), "median_width_x1": wid[:, 0].tolist(),
                           "median_width_x2": wid[:, 1].tolist()}
        for j in range(2):
            axes[j].plot(eps, cov[:, j], marker="o", label=label)
            axes[2 + j].plot(eps, wid[:, j], marker="o", label=label)
    for j, name in enumerate(["x1 (coef 1)", "x2 (coef 0)"]):
        axes[j].axhline(0.95, color="k", lw=1)
        axes[j].axhspan(0.92, 0.98, color="0.9")
        axes[j].set(xscale="log", ylim=(0, 1.02), xlabel="epsilon", ylabel="95% CI coverage", title=f"coverage, {name}")
        axes[2 + j].set(xscale="log", yscale="log", xlabel="epsilon", ylabel="median CI width", title=f"width, {name}")
    axes[0].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(R / "toy_coverage.png", dpi=110)
    (R / "toy_coverage_summary.json").write_text(json.dumps(summary, indent=1))


def toy_vetted() -> None:
    """The toy study's Laplace method before and after OpenDP's discrete noise and the PLD
    calibration, on the same data seeds (``toy_coverage_before_vetted.json``: the same command
    at commit 0306e68; ``toy_coverage_vetted.json``: after)."""
    files = {"numpy Gaussian noise (before)": R / "toy_coverage_before_vetted.json",
             "OpenDP discrete Gaussian, PLD (after)": R / "toy_coverage_vetted.json"}
    if not all(f.exists() for f in files.values()):
        return
    fig, axes = plt.subplots(1, 4, figsize=(18, 4))
    for label, f in files.items():
        records = _merged_records([f])
        eps = sorted({k[1] for k in records})
        cw = [_toy_coverage([r for k, r in records.items() if k[1] == e]) for e in eps]
        cov, wid = np.array([c for c, _ in cw]), np.array([w for _, w in cw])
        for j in range(2):
            axes[j].plot(eps, cov[:, j], marker="o", label=label)
            axes[2 + j].plot(eps, wid[:, j], marker="o", label=label)
    for j, name in enumerate(["x1 (coef 1)", "x2 (coef 0)"]):
        axes[j].axhspan(0.92, 0.98, color="0.9")
        axes[j].set(xscale="log", ylim=(0.85, 1.0), xlabel="epsilon", ylabel="95% CI coverage", title=f"coverage, {name}")
        axes[2 + j].set(xscale="log", yscale="log", xlabel="epsilon", ylabel="median CI width", title=f"width, {name}")
    axes[0].legend(fontsize=7)
    fig.suptitle("NAPSU-MQ (Laplace), toy data, 200 repeats per epsilon")
    fig.tight_layout()
    fig.savefig(R / "toy_coverage_vetted.png", dpi=110)


def toy_nuts_defaults() -> None:
    """NUTS with the library's defaults (reference categories from the noisy counts, the
    one-sided map): 95% coverage per epsilon with exact (Clopper-Pearson) 95% intervals."""
    from scipy.stats import binomtest

    merged = _merged_records([R / "toy_coverage_nuts_defaults.json",
                              *sorted(R.glob("toy_coverage_nuts_defaults_part*.json"))])
    if not merged:
        return
    recs = list(merged.values())
    eps = sorted({r["epsilon"] for r in recs})
    fig, ax = plt.subplots(figsize=(6, 4))
    summary = {}
    for j, name in enumerate(["x1 (coef 1)", "x2 (coef 0)"]):
        cov, lo, hi, counts = [], [], [], []
        for e in eps:
            rs = [r for r in recs if r["epsilon"] == e]
            c = float(_toy_coverage(rs)[0][j])
            k = int(round(c * len(rs)))
            ci = binomtest(k, len(rs)).proportion_ci(0.95)
            cov.append(c)
            lo.append(c - ci.low)
            hi.append(ci.high - c)
            counts.append(len(rs))
        summary[name] = {"epsilons": eps, "repeats": counts, "coverage": cov}
        ax.errorbar(np.array(eps) * (1.06 if j else 1 / 1.06), cov, yerr=[lo, hi], marker="o", capsize=3, label=name)
    ax.axhline(0.95, color="k", lw=1)
    ax.axhspan(0.92, 0.98, color="0.9")
    ax.set(xscale="log", ylim=(0.75, 1.0), xlabel="epsilon", ylabel="95% CI coverage",
           title=f"Toy, NAPSU-MQ NUTS, library defaults ({min(summary[name]['repeats'])}+ repeats)")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(R / "toy_coverage_nuts_defaults.png", dpi=110)
    (R / "toy_coverage_nuts_defaults_summary.json").write_text(json.dumps(summary, indent=1))


def adult(stem: str) -> None:
    f = R / f"{stem}.json"
    if not f.exists():
        return
    d = json.loads(f.read_text())
    levels = d["settings"]["levels"]
    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    for eps, s in d["summary"].items():
        axes[0].plot(levels, s["coverage_by_level"], marker=".", label=f"eps={eps} ({s['repeats']} repeats)")
        axes[1].plot(levels, s["median_width_ratio_by_level"], marker=".", label=f"eps={eps}")
    axes[0].plot([0, 1], [0, 1], "k--", lw=1)
    st = d["settings"]
    model = (f", {st['marginals']['selection'].upper()}-selected marginals" if isinstance(st["marginals"], dict)
             else ", paper's marginals")
    model += ", all 15 columns" if st.get("table") == "full" else ""
    prior = {None: "", 0.0: ", normal prior"}.get(st.get("cell_prior"), ", cell prior")
    axes[0].set(xlabel="confidence level", ylabel="coverage of real-data coefficient")
    axes[0].set_title(f"Adult: coverage ({st.get('inference', 'nuts')}{model}{prior})", fontsize=9)
    axes[1].axhline(1, color="k", ls="--", lw=1)
    axes[1].set(xlabel="confidence level", ylabel="median width ratio (syn / real)", title="Adult: interval width ratio")
    axes[0].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(R / f"{stem}.png", dpi=110)


def aim_analysis_samplers() -> None:
    """The AIM analysis model on the full table: noise-aware NUTS on the tied model, noise-aware
    Laplace on the untied one and the not-noise-aware PGM estimate, coverage and width by level."""
    runs = [("NUTS, tied interactions (tie_below=3)", ["adult_coverage_aim_analysis_nuts_tied3.json",
                                                       "adult_coverage_aim_analysis_nuts_tied3_eps05.json"]),
            ("Laplace, untied", ["adult_coverage_aim_analysis_laplace_interaction1.json",
                                 "adult_coverage_aim_analysis_laplace_interaction1_eps05.json"]),
            ("PGM point estimate (not noise-aware)", ["adult_coverage_aim_analysis_mle.json"])]
    if not (R / runs[0][1][0]).exists():
        return
    fig, axes = plt.subplots(1, 3, figsize=(14, 4))
    styles = {"1.0": "-", "0.5": "--"}
    for k, (label, files) in enumerate(runs):
        for f in files:
            if not (R / f).exists():
                continue
            d = json.loads((R / f).read_text())
            levels = d["settings"]["levels"]
            for eps, s in d["summary"].items():
                kw = {"color": f"C{k}", "ls": styles.get(eps, ":"), "marker": "."}
                name = f"{label}, eps {eps} ({s['repeats']})"
                axes[0].plot(levels, s["coverage_by_level"], label=name, **kw)
                axes[1].plot(levels, np.array(s["coverage_by_level"]) - np.array(levels), **kw)
                axes[2].plot(levels, s["median_width_ratio_by_level"], **kw)
    axes[0].plot([0, 1], [0, 1], "k--", lw=1)
    axes[1].axhline(0, color="k", lw=1)
    axes[2].axhline(1, color="k", ls="--", lw=1)
    axes[0].set(xlabel="confidence level", ylabel="coverage of real-data coefficient",
                title="AIM analysis model, full Adult: coverage")
    axes[1].set(xlabel="confidence level", ylabel="coverage - level", title="calibration")
    axes[2].set(xlabel="confidence level", ylabel="median width ratio (syn / real)", title="interval width",
                yscale="log")
    axes[0].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(R / "adult_coverage_aim_analysis_samplers.png", dpi=110)


def aim_analysis_population() -> None:
    """The AIM analysis model in the population design (``adult_coverage.py --population
    bootstrap``: each repeat's real data drawn from the table, truth the table's coefficient),
    beside the fixed design's observed coverage and what a calibrated posterior would give there."""
    runs = [("NUTS, tied interactions (tie_below=3)", "adult_coverage_aim_analysis_nuts_tied3_population.json"),
            ("Laplace, untied", "adult_coverage_aim_analysis_laplace_population.json"),
            ("PGM point estimate (not noise-aware)", "adult_coverage_aim_analysis_mle_population.json")]
    runs = [(label, json.loads((R / f).read_text())) for label, f in runs if (R / f).exists()]
    fixed = R / "adult_coverage_fixed_vs_calibrated.json"
    if not runs or not fixed.exists():
        return
    fig, axes = plt.subplots(1, 3, figsize=(15, 4.2))
    names = runs[0][1]["settings"]["coefficients"]
    width = 0.8 / len(runs)
    for k, (label, d) in enumerate(runs):
        levels = np.array(d["settings"]["levels"])
        for eps, ls in (("1.0", "-"), ("0.5", "--")):  # the second epsilon where a run has it
            if eps in d["summary"]:
                s = d["summary"][eps]
                axes[0].plot(levels, s["coverage_by_level"], marker=".", ls=ls, color=f"C{k}",
                             label=f"{label}, epsilon {float(eps):g} ({s['repeats']})")
        cov = np.array([r["coverage"] for r in d["records"] if r["epsilon"] == 1.0])[:, -1, :].mean(axis=0)  # 95%
        axes[2].bar(np.arange(len(names)) + (k - (len(runs) - 1) / 2) * width, cov, width, color=f"C{k}", label=label)
    f = json.loads(fixed.read_text())
    for row in f["rows"]:
        if row["epsilon"] != 1.0 or row["study"] not in ("adult_coverage_aim_analysis_nuts_tied3.json",
                                                         "adult_coverage_aim_analysis_laplace_interaction1.json"):
            continue
        k = 0 if "tied" in row["study"] else 1
        axes[1].plot(f["levels"], row["observed_by_level"], marker=".", color=f"C{k}",
                     label=f"{'tied NUTS' if k == 0 else 'Laplace'}: observed")
        axes[1].plot(f["levels"], row["calibrated_by_level"], ls=":", color=f"C{k}",
                     label=f"{'tied NUTS' if k == 0 else 'Laplace'}: a calibrated posterior with these widths")
    for ax in axes[:2]:
        ax.plot([0, 1], [0, 1], "k--", lw=1)
        ax.set_xlabel("confidence level")
    axes[0].set(ylabel="coverage of the population's coefficient",
                title="population design: real data drawn anew each repeat")
    axes[1].set(ylabel="coverage of the fixed real estimate", title="fixed design: observed vs calibrated (epsilon 1)")
    axes[2].axhspan(0.92, 0.98, color="0.9")
    axes[2].set_xticks(np.arange(len(names)), [n.replace("race[", "").rstrip("]") for n in names], rotation=30,
                       ha="right", fontsize=8)
    axes[2].set(ylabel="95% coverage", ylim=(0, 1.05),
                title="population design: 95% coverage per coefficient, epsilon 1")
    for ax, where in zip(axes, ("upper left", "upper left", "lower left")):
        ax.legend(fontsize=7, loc=where)
    fig.tight_layout()
    fig.savefig(R / "adult_coverage_aim_analysis_population.png", dpi=110)


def default_reference(results: Path = R) -> None:
    """The default fit (``NapsuMQ(ANALYSIS, select_extra="aim")``, every other setting the
    library's) in the population design under the two automatic reference codings, and the most
    frequent one's sampler as it grew (run longer; jumps): coverage by level, 95% coverage per
    coefficient, and each fit's smallest bulk ESS against its time, the fits that warned marked."""
    runs = [(label, results / f"adult_coverage_default_{ref}_population.json")
            for label, ref in (("most frequent categories", "most_frequent"),
                               ("well measured (moved off structural zeros)", "well_measured"),
                               ("most frequent, run longer until converged", "run_longer"),
                               ("most frequent, the sampler now (its jumps between modes)", "line_jumps"))]
    runs = [(label, json.loads(f.read_text())) for label, f in runs if f.exists()]
    if not runs:
        return
    fig, axes = plt.subplots(1, 3, figsize=(15, 4.2))
    names = runs[0][1]["settings"]["coefficients"]
    width = 0.8 / len(runs)
    for k, (label, d) in enumerate(runs):
        s = d["summary"]["1.0"]
        axes[0].plot(d["settings"]["levels"], s["coverage_by_level"], marker=".", color=f"C{k}",
                     label=f"{label} ({s['repeats']} fits; 95% width ratio {s['median_width_ratio_by_level'][-1]:.2f})")
        cov = np.array([r["coverage"] for r in d["records"]])[:, -1, :].mean(axis=0)
        axes[1].bar(np.arange(len(names)) + (k - (len(runs) - 1) / 2) * width, cov, width, color=f"C{k}", label=label)
        warned = np.array([bool(r["warnings"]) for r in d["records"]])
        ess = np.array([r["ess_bulk_min"] for r in d["records"]])
        secs = np.array([r["fit_seconds"] for r in d["records"]])
        short = label.split(" (")[0]
        axes[2].scatter(secs[~warned], ess[~warned], color=f"C{k}", label=f"{short}: passed")
        axes[2].scatter(secs[warned], ess[warned], color=f"C{k}", marker="x",
                        label=f"{short}: warned ({warned.sum()} of {warned.size})")
    real = runs[0][1]["summary"]["1.0"].get("real_data_coverage_95_by_coefficient")
    if real is not None:  # the real data's own intervals on the same bootstrap samples
        axes[1].scatter(np.arange(len(names)), real, color="k", marker="_", s=300, zorder=3,
                        label=f"the real data's own intervals ({runs[0][1]['summary']['1.0']['repeats']} samples)")
    axes[0].plot([0, 1], [0, 1], "k--", lw=1)
    axes[0].set(xlabel="confidence level", ylabel="coverage of the population's coefficient",
                title="the default fit, population design, epsilon 1")
    axes[1].axhspan(0.92, 0.98, color="0.9")
    axes[1].set_xticks(np.arange(len(names)), [n.replace("race[", "").rstrip("]") for n in names], rotation=30,
                       ha="right", fontsize=8)
    axes[1].set(ylabel="95% coverage", ylim=(0, 1.05), title="95% coverage per coefficient")
    axes[2].axhline(400, color="0.5", lw=1, ls=":")
    axes[2].set(xlabel="fit seconds (AIM + Laplace + NUTS, beside other studies)",
                ylabel="smallest bulk ESS", yscale="log", title="each fit's mixing (ESS 400: the check)")
    for ax, where in zip(axes[:2], ("upper left", "lower left")):
        ax.legend(fontsize=7, loc=where)
    axes[2].legend(fontsize=6, loc="lower right")
    fig.tight_layout()
    fig.savefig(results / "adult_coverage_default_reference.png", dpi=110)


def adult_fig1() -> None:
    """The NAPSU-MQ paper's Fig. 1 on Adult: noise-aware NUTS against the PGM point estimate with
    m = 100 repeated datasets (Rubin's rules) and one of its datasets analysed as if real."""
    files = {"noise-aware (NUTS)": R / "adult_coverage.json", "MLE (PGM) + 100 datasets": R / "adult_coverage_mle.json"}
    if not all(f.exists() for f in files.values()):
        return
    runs = {k: json.loads(f.read_text()) for k, f in files.items()}
    levels = runs["noise-aware (NUTS)"]["settings"]["levels"]
    epsilons = sorted(set.intersection(*(set(d["summary"]) for d in runs.values())), key=float)
    fig, axes = plt.subplots(1, len(epsilons), figsize=(3.2 * len(epsilons), 3.4), sharey=True)
    for ax, eps in zip(np.atleast_1d(axes), epsilons):
        for (label, d), colour in zip(runs.items(), ("C0", "C3")):
            s = d["summary"][eps]
            ax.plot(levels, s["coverage_by_level"], marker=".", color=colour, label=f"{label} ({s['repeats']})")
        single = runs["MLE (PGM) + 100 datasets"]["summary"][eps]["coverage_single_dataset_by_level"]
        ax.plot(levels, single, marker=".", color="C7", ls=":", label="MLE, one dataset as if real")
        ax.plot([0, 1], [0, 1], "k--", lw=1)
        ax.set(title=f"epsilon = {eps}", xlabel="confidence level")
    np.atleast_1d(axes)[0].set_ylabel("coverage of real-data coefficient")
    np.atleast_1d(axes)[0].legend(fontsize=7)
    fig.suptitle("Adult, the paper's 10 marginals: Fig. 1 of Räisä et al. (2023)", fontsize=9)
    fig.tight_layout()
    fig.savefig(R / "adult_coverage_fig1.png", dpi=110)


def speed() -> None:
    f = R / "speed.json"
    if not f.exists():
        return
    d = json.loads(f.read_text())
    t, a = d["toy"], d.get("adult", {})
    rows = [("toy: fit NUTS + 100 datasets", t["with_compile"]["total_s"], t["without_compile"]["total_s"], 3)]
    if "laplace_without_compile_s" in a:
        rows.append(("Adult: Laplace", a["laplace_with_compile_s"], a["laplace_without_compile_s"], 15))
    if "generate_100_without_compile_s" in a:
        rows.append(("Adult: 100 datasets", a["generate_100_with_compile_s"], a["generate_100_without_compile_s"], 10))
    if "nuts_fit_with_compile_s" in a:
        rows.append(("Adult: Laplace + NUTS 4x(800+2000)", a["nuts_fit_with_compile_s"],
                     a["nuts_fit_with_compile_s"] - a["nuts_compile_estimate_s"], 300))
    fig, ax = plt.subplots(figsize=(9, 3.5))
    y = np.arange(len(rows))
    ax.barh(y - 0.2, [r[1] for r in rows], 0.4, label="with JIT compile")
    ax.barh(y + 0.2, [r[2] for r in rows], 0.4, label="without")
    ax.scatter([r[3] for r in rows], y, marker="|", s=400, color="k", label="target")
    ax.set_yticks(y, [r[0] for r in rows])
    ax.set(xscale="log", xlabel="seconds", title=f"NAPSU-MQ speed (load average {d['loadavg_start'][0]:.1f} on {d['cpu_count']} cores)")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(R / "speed.png", dpi=110)


def intervals_in_real_se(stem: str, study: dict, out: str, title: str) -> None:
    """Each repeat's 95% interval per coefficient, in real standard errors around the real
    estimate (``error +- 1.96 width_ratio``), for the runs of ``results/<stem>.json`` whose
    settings equal ``study``; numbers inside their bins (filled) and at midpoints (hollow)
    where recorded. A study of ``framingham_ols.py`` or ``continuous_fine_coarse.py``."""
    f = R / f"{stem}.json"
    if not f.exists():
        return
    runs = [r for r in json.loads(f.read_text())["runs"] if all(r.get(k) == v for k, v in study.items())]
    if not runs:
        return
    names = runs[0]["coefficients"]
    cols = min(4, len(names))
    rows = -(-len(names) // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(2.9 * cols, 3.4 * rows), squeeze=False)
    for ax in axes.flat[len(names):]:
        ax.set_visible(False)
    for j, (ax, name) in enumerate(zip(axes.flat, names)):
        for k, (decoder, style) in enumerate((("uniform", "o"), ("midpoints", "s"))):
            recs = [r.get(decoder, r if decoder == "uniform" else None) for r in runs]
            recs = [x for x in recs if x is not None]
            if not recs:
                continue
            err = np.array([x["error_in_real_se"][j] for x in recs])
            half = 1.959964 * np.array([x["width_ratio"][j] for x in recs])
            cov = np.mean([x["covers95"][j] for x in recs])
            xs = np.arange(len(recs)) + 0.3 * k
            ax.errorbar(xs, err, yerr=half, fmt=style, ms=3, lw=0.8, mfc="C0" if k == 0 else "none",
                        color="C0" if k == 0 else "C1", label=f"{decoder}: {cov:.2f}")
        ax.axhline(0, color="k", lw=0.8)
        ax.set_title(name.replace("C(race, Treatment('White'))", "race").replace("Q('hours-per-week')", "hours"),
                     fontsize=9)
        ax.set_xlabel("repeat", fontsize=8)
        ax.legend(fontsize=7, title="95% coverage", title_fontsize=7, loc="best", framealpha=0.6)
    for row in axes:
        row[0].set_ylabel("interval - real estimate (real se)", fontsize=8)
    fig.suptitle(f"{title} ({len(runs)} repeats)", fontsize=9)
    fig.tight_layout()
    fig.savefig(R / out, dpi=110)
    plt.close(fig)


if __name__ == "__main__":
    toy()
    toy_vetted()
    toy_nuts_defaults()
    adult("adult_coverage")
    adult("adult_coverage_laplace")
    adult("adult_coverage_laplace_mst")
    adult("adult_coverage_cell_prior")
    adult("adult_coverage_cell_prior_laplace")
    adult("adult_coverage_aim_laplace")
    aim_analysis_samplers()
    aim_analysis_population()
    default_reference()
    adult_fig1()
    speed()
    intervals_in_real_se("framingham_ols_coverage",
                         {"design": "tails3", "inference": "nuts", "linear_by_linear": True, "n_chains": 1,
                          "num_warmup": 300, "num_samples": 300, "m": 100, "epsilon": 1.0},
                         "framingham_ols_nuts.png", "Framingham OLS, linear-by-linear model, NUTS (1 chain, 300 + 300), "
                         "epsilon 1, m = 100")
    intervals_in_real_se("continuous_fine_coarse_nuts",
                         {"inference": "nuts", "fine_width": 3, "n_chains": 1, "num_warmup": 300, "num_samples": 300,
                          "m": 100, "epsilon": 1.0},
                         "continuous_fine_coarse_nuts.png", "Adult logit, age and hours as numbers with their pair, "
                         "NUTS (1 chain, 300 + 300), epsilon 1, m = 100")
