"""``synthinfer analyze``: the analyst's command, run on a release bundle."""

from __future__ import annotations

import json
import math
import warnings
from pathlib import Path

import typer
from rich import box
from rich.table import Table

from rich.markup import escape

from synthinfer.analysis.separation import DEFAULT_SEPARATION
from synthinfer.cli.common import console, user_errors
from synthinfer.errors import ParameterError, UnsupportedAnalysisWarning


def _num(x: float, digits: int = 4) -> str:
    if not math.isfinite(x):
        return str(x)
    return f"{x:.2e}" if x != 0 and not 1e-3 <= abs(x) < 1e5 else f"{x:.{digits}f}"


def _json_value(x):
    if isinstance(x, float) and not math.isfinite(x):
        return None if math.isnan(x) else ("inf" if x > 0 else "-inf")
    return x


def analyze_cmd(
    release: Path = typer.Argument(..., help="Release bundle (directory or .zip) written by the data holder."),
    formula: str = typer.Option(..., "--formula", "-f", help='Patsy formula, e.g. "income ~ age + C(race) + C(sex)".'),
    model: str = typer.Option(
        "logit", "--model", "-m", help="logit, probit, ols or poisson, or a statsmodels.formula.api model by name "
        "(mnlogit for a multi-category outcome, negativebinomial, quantreg, ...)."),
    alpha: float = typer.Option(0.05, help="Intervals have level 1 - alpha."),
    drop_variance_above: float | None = typer.Option(
        None, help="Drop estimates with variance >= this before combining (paper: 1e3)."
    ),
    penalty: float | None = typer.Option(None, help="Tiny L2 penalty with bootstrap variances (paper: 1e-5)."),
    n_bootstrap: int = typer.Option(50, help="Bootstrap refits per dataset with --penalty or --separation penalty."),
    separation: str = typer.Option(
        DEFAULT_SEPARATION, help="Logit/probit datasets with (quasi-)complete separation: penalty (refit with L2 "
        "1e-5 and bootstrap variances), drop (leave them out) or ignore (keep as fitted)."
    ),
    missing: str = typer.Option(
        "raise", "--missing", help="Rows lacking a value the model needs (a release with declared missing values): "
        "raise (refuse, naming the columns) or drop (fit each dataset's complete cases, as statsmodels does)."),
    no_weights: bool = typer.Option(False, "--no-weights", help="Ignore the release's per-row weights."),
    jobs: int | None = typer.Option(None, "--jobs", "-j", help="Worker processes (default: automatic)."),
    fast: bool = typer.Option(
        True, "--fast/--no-fast",
        help="Fit logit, probit, ols and poisson on all datasets at once (equal to statsmodels to 1e-8); "
        "--no-fast fits each dataset with statsmodels."),
    fingerprint: str | None = typer.Option(
        None, help="The release's published fingerprint (SHA-256 of manifest.json) to check against. Without "
                   "it the files are checked against the manifest only, so an edited manifest goes unnoticed."
    ),
    as_json: bool = typer.Option(False, "--json", help="Print the results as JSON instead of a table."),
    progress: bool = typer.Option(True, "--progress/--no-progress", help="Show a progress bar."),
    bayes: bool = typer.Option(
        False, "--bayes", help="Bayesian analysis instead: the posterior of the model (logit, probit, poisson "
        "or ols) on every dataset, mixed (Räisä, Jälkö & Honkela 2025; prior N(0, 50) on each GLM coefficient); "
        "credible intervals."),
    seed: int | None = typer.Option(None, help="--bayes: the sampler's seed."),
    plot: Path | None = typer.Option(
        None, "--plot", help="Also write a forest plot of the combined estimates and intervals to this PNG file."),
) -> None:
    """Fit FORMULA on every synthetic dataset of RELEASE and combine with Rubin's rules for
    synthetic data; intervals are for the population, not for the synthetic data. With --bayes,
    mix the per-dataset posteriors instead."""
    from synthinfer.release import open_release

    with user_errors():
        if plot is not None:
            from synthinfer.cli.common import check_output

            check_output(plot, option="--plot")
            if bayes:
                raise ParameterError("--plot draws Rubin's rules' intervals; it does not take --bayes")
        from synthinfer.analysis.support import MISSING_RULES

        if missing not in MISSING_RULES:
            raise ParameterError(f"--missing must be raise or drop, got {missing!r}")
        if bayes and missing != "raise":
            raise ParameterError("--missing drop applies to Rubin's rules; --bayes mixes posteriors of datasets "
                                 "of one size, which complete cases would not keep")
        rel = open_release(release, fingerprint=fingerprint)
        support = rel.supports(formula)
        if not as_json:
            # said before fitting: an unsupported model is worth knowing before waiting for it
            colour = {True: "green", False: "bold red", None: "yellow"}[support.supported]
            console.print(f"[{colour}]Release supports this model:[/] {escape(support.reason)}", soft_wrap=True)
        if bayes:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", UnsupportedAnalysisWarning)
                idata = rel.mix_posteriors(formula, model, seed=seed)
            _print_mixture(idata, formula, model, alpha, rel, support, as_json, release)
            return
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UnsupportedAnalysisWarning)  # printed above, or in the JSON
            res = rel.analyze(
                formula,
                model=model,
                use_weights=False if no_weights else None,
                alpha=alpha,
                drop_variance_above=drop_variance_above,
                penalty=penalty,
                n_bootstrap=n_bootstrap,
                separation=separation,
                missing=missing,
                n_jobs=jobs,
                fast=fast,
                progress=progress and not as_json,
            )
    frame = res.to_frame(alpha)
    if plot is not None:
        _forest_plot(plot, frame, alpha, formula)
    if as_json:
        out = {
            "release": str(release),
            "fingerprint": rel.fingerprint,
            "formula": formula,
            "model": res.model,
            "alpha": alpha,
            "m_used": res.m,
            "m": len(res.records),
            "n": res.n,
            "n_syn": res.n_syn,
            "failed": [{"dataset": r.index, "error": r.error} for r in res.failed],
            "supports": {"supported": support.supported, "missing": [list(s) for s in support.missing],
                         "unmeasured_predictor_pairs": [list(s) for s in support.unmeasured_predictor_pairs],
                         "reason": support.reason},
            "separation": {"remedy": res.separation, "datasets": res.separated},
            "missing": {"rule": missing, "complete_share": res.options.get("complete_share")},
            "absent_categories": {str(i): list(c) for i, c in res.absent_columns.items()},
            "coefficients": [
                {"name": name, **{k: _json_value(v.item() if hasattr(v, "item") else v) for k, v in row.items()}}
                for name, row in frame.iterrows()
            ],
        }
        typer.echo(json.dumps(out, indent=2))
        return
    lo, hi = frame.columns[4], frame.columns[5]
    show_m = bool((frame["m"] != res.m).any())
    show_note = bool(frame["fallback"].any())
    table = Table(
        title=f"{res.model}: {formula}",
        box=box.SIMPLE_HEAD,
        caption=(
            f"{res.m} of {len(res.records)} synthetic datasets, n = {res.n}, n_syn = {res.n_syn:.10g}; "
            f"Rubin's rules for fully synthetic data; release {rel.fingerprint[:12]}"
            + ("; T*: fallback variance (n_syn/n) v̄, normal reference" if show_note else "")
            + (f"; separation: {res.separation_note}" if res.n_separated else "")
            + (f"; absent categories in {len(res.absent_columns)} datasets" if res.absent_columns else "")
            + ("" if res.options.get("complete_share") is None else
               f"; complete cases: {res.options['complete_share']:.1%} of rows (--missing drop; n scaled alike in "
               "T*)")
        ),
    )
    rows = []
    for name, row in frame.iterrows():
        p = row["p_value"]
        cells = [
            str(name),
            _num(row["estimate"]),
            _num(row["std_err"]),
            _num(row["t"], 2),
            "nan" if not math.isfinite(p) else ("<0.001" if p < 1e-3 else f"{p:.3f}"),
            _num(row[lo]),
            _num(row[hi]),
            _num(row["df"], 1),
        ]
        if show_m:
            cells.append(str(int(row["m"])))
        if show_note:
            cells.append("T*" if row["fallback"] else "")
        rows.append(cells)
    headers = ["term", "estimate", "std err", "t", "P>|t|", lo, hi, "df"] + ["m"] * show_m + [""] * show_note
    widths = [max(len(h), *(len(r[j]) for r in rows)) for j, h in enumerate(headers)]
    # each column has 2 padding characters and a divider, plus the table's two edges
    if sum(widths) + 3 * len(widths) + 1 > console.width:
        # a narrow terminal: keep the term names and intervals, leave t and df to --json
        drop = {3, 7}
        headers = [h for j, h in enumerate(headers) if j not in drop]
        rows = [[c for j, c in enumerate(r) if j not in drop] for r in rows]
        table.caption += " (t and df: widen the terminal or use --json)"
    for j, col in enumerate(headers):
        if j == 0:
            # long term names wrap; numbers are never cut
            table.add_column(col, overflow="fold", min_width=min(20, max(len(r[0]) for r in rows)))
        else:
            width = max(len(col), *(len(r[j]) for r in rows))
            table.add_column(col, justify="right", no_wrap=True, min_width=width)
    for cells in rows:
        table.add_row(*cells)
    console.print(table)


def _forest_plot(path: Path, frame, alpha: float, formula: str) -> None:
    """The combined estimates and their (1 - alpha) intervals as a forest plot (PNG, all or nothing)."""
    import matplotlib.pyplot as plt

    from synthinfer.files import atomic_write
    from synthinfer.reporting.figures import forest_figure

    lo, hi = frame.columns[4], frame.columns[5]
    fig = forest_figure([str(n) for n in frame.index], frame["estimate"].to_numpy(),
                        frame[[lo, hi]].to_numpy(), level=f"{100 * (1 - alpha):g}%")
    fig.axes[0].set_title(f"{formula}: combined {100 * (1 - alpha):g}% intervals", fontsize=9)
    atomic_write(path, lambda p: fig.savefig(p, format="png", dpi=110, bbox_inches="tight"))
    plt.close(fig)


def _print_mixture(idata, formula: str, model: str, alpha: float, rel, support, as_json: bool, release: Path) -> None:
    """The mixed posterior's mean, sd and equal-tailed (1 - alpha) credible interval per term."""
    import numpy as np

    post = idata.posterior
    draws = post["coef"].values.reshape(-1, post.sizes["term"])
    names = [str(t) for t in post["term"].values]
    lo, hi = np.quantile(draws, [alpha / 2, 1 - alpha / 2], axis=0)
    rows = [{"name": t, "mean": float(draws[:, j].mean()), "sd": float(draws[:, j].std(ddof=1)),
             "lower": float(lo[j]), "upper": float(hi[j])} for j, t in enumerate(names)]
    a = post.attrs
    tail = a.get("tail_coverage_95")  # nan where there is nothing to judge (one dataset, or B <= W)
    tail = float(tail) if tail is not None and np.isfinite(tail) else None
    if as_json:
        typer.echo(json.dumps({
            "release": str(release), "fingerprint": rel.fingerprint, "formula": formula, "model": model,
            "method": a["method"], "sampler": a["sampler"], "alpha": alpha, "m": a["m"], "n": a["n"],
            "n_syn": a["n_syn"], "draws": int(draws.shape[0]),
            "datasets_not_converged": a.get("datasets_not_converged"),
            "tail_coverage_95": tail,
            "supports": {"supported": support.supported, "missing": [list(x) for x in support.missing],
                         "unmeasured_predictor_pairs": [list(x) for x in support.unmeasured_predictor_pairs],
                         "reason": support.reason},
            "coefficients": rows}, indent=2))
        return
    pct = f"{100 * (1 - alpha):g}%"
    table = Table(title=f"{model} (Bayesian): {formula}", box=box.SIMPLE_HEAD, caption=(
        f"mixture of the posteriors on {a['m']} synthetic datasets ({draws.shape[0]} draws), n = {a['n']}, "
        f"n_syn = {a['n_syn']}; {pct} equal-tailed credible intervals"
        + ("" if tail is None else f" (95% ones expected to cover {tail:.2f})")
        + f"; release {rel.fingerprint[:12]}"))
    for j, col in enumerate(["term", "mean", "sd", f"{pct} lower", f"{pct} upper"]):
        table.add_column(col, overflow="fold") if j == 0 else table.add_column(col, justify="right", no_wrap=True)
    for r in rows:
        table.add_row(r["name"], _num(r["mean"]), _num(r["sd"]), _num(r["lower"]), _num(r["upper"]))
    console.print(table)
