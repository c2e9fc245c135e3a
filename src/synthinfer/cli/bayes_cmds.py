"""Bayes commands: choose how much synthetic data to use (Wilde et al. 2021, A.5)."""

from __future__ import annotations

import json
from pathlib import Path

import typer
from rich.table import Table

from synthinfer.cli.common import check_output, console, err_console, read_table, user_errors
from synthinfer.cli.display import status
from synthinfer.errors import ParameterError, SynthinferError


def parse_formula(formula: str, columns: list[str]) -> tuple[str, list[str]]:
    """``"y ~ a + b"`` -> ("y", ["a", "b"]); ``"y ~ ."`` uses every other column."""
    if "~" not in formula:
        raise ParameterError(f"formula must look like 'y ~ a + b', got {formula!r}")
    lhs, rhs = (s.strip() for s in formula.split("~", 1))
    feats = [c for c in columns if c != lhs] if rhs == "." else [s.strip() for s in rhs.split("+") if s.strip()]
    if not lhs or not feats:
        raise ParameterError(f"formula {formula!r} needs a target and at least one covariate")
    return lhs, feats


def parse_loss(spec: str):
    """``log`` | ``w=0.5`` | ``beta=0.5`` (calibrated w_beta) | ``beta=0.5:1.25`` | ``noise-aware=1.0``."""
    from synthinfer.bayes import BetaLoss, LogLoss, NoiseAwareLoss

    s = spec.strip().lower()
    try:
        if s == "log":
            return LogLoss(1.0)
        key, _, val = s.partition("=")
        if key == "w":
            return LogLoss(float(val))
        if key == "beta":
            b, _, wb = val.partition(":")
            return BetaLoss(float(b), "calibrate" if wb in ("", "calibrate") else float(wb))
        if key == "noise-aware":
            return NoiseAwareLoss(float(val))
    except SynthinferError:
        raise  # a well-formed spec with a bad value (e.g. beta=-1): the loss names the problem
    except ValueError:
        pass
    raise ParameterError(f"loss must be log, w=W, beta=B[:W_BETA|calibrate] or noise-aware=LAMBDA; got {spec!r}")


def choose_m_cmd(
    real: Path = typer.Argument(..., help="CSV (or .parquet) of the learner's real data.", exists=True, dir_okay=False),
    synthetic: Path = typer.Argument(..., help="CSV (or .parquet) of synthetic data (same columns).", exists=True,
                                     dir_okay=False),
    model: str = typer.Option("gaussian", help="gaussian | logistic | linear."),
    column: str = typer.Option(None, help="Column for the Gaussian model (default: the only column)."),
    formula: str = typer.Option(None, help="'y ~ a + b' (or 'y ~ .') for the regression models; text or "
                                "categorical columns enter as indicators of their levels but the first, a "
                                "two-level text target of the logistic model as the indicator of its second."),
    loss: str = typer.Option("beta=0.5", help="log | w=W | beta=B[:W_BETA|calibrate] | noise-aware=LAMBDA."),
    test: Path = typer.Option(None, help="CSV of held-out real data; default: hold out --test-fraction of REAL.", exists=True,
                              dir_okay=False),
    test_fraction: float = typer.Option(0.3, help="Share of REAL held out when --test is not given."),
    criterion: str = typer.Option("log_score", help="log_score | brier | auroc (the last two: logistic only)."),
    m_grid: str = typer.Option(None, help="Comma-separated m values (default: ~20 values from 0 to all synthetic "
                               "rows or 10 times the real rows, whichever is fewer)."),
    splits: int = typer.Option(25, min=1, help="Random splits of the held-out data for the test (A.13)."),
    alpha: float = typer.Option(0.05, help="Level of the test that m-hat beats m = 0."),
    num_warmup: int = typer.Option(300, help="NUTS warm-up draws (non-conjugate cases)."),
    num_samples: int = typer.Option(500, help="NUTS draws per chain."),
    seed: int = typer.Option(None, help="Seed for splits and sampling (default: OS entropy)."),
    plot: Path = typer.Option(None, help="Write the learning trajectory plot (PNG) here."),
    json_out: Path = typer.Option(None, "--json", help="Write m-hat, the p-value and the trajectory as JSON here."),
) -> None:
    """Choose how many synthetic rows to use: m-hat, the p-value that it beats m = 0, the trajectory."""
    import numpy as np

    from synthinfer.files import atomic_write_text
    from synthinfer.bayes import (
        BetaLoss,
        GaussianLocationScale,
        GeneralisedPosterior,
        LinearRegression,
        LogisticRegression,
        calibrate_beta_weight,
        choose_m,
    )
    from synthinfer.bayes.models import regression_design
    from synthinfer.privacy import make_rng

    with user_errors():
        for path, option in ((json_out, "--json"), (plot, "--plot")):
            if path is not None:
                check_output(path, overwrite=True, option=option)
        grid = None if m_grid is None else _int_list(m_grid, "--m-grid")
        if criterion not in ("log_score", "brier", "auroc"):
            raise ParameterError(f"--criterion must be log_score, brier or auroc, got {criterion!r}")
        r = read_table(real)
        s = read_table(synthetic)
        if model == "gaussian":
            mdl = GaussianLocationScale(column)
        elif model in ("logistic", "linear"):
            if formula is None:
                raise ParameterError(f"--formula is required for the {model} model")
            target, feats = parse_formula(formula, list(r.columns))
            cls = LogisticRegression if model == "logistic" else LinearRegression
            mdl = cls(target=target, features=feats)
        else:
            raise ParameterError(f"--model must be gaussian, logistic or linear, got {model!r}")
        rng = make_rng(seed)
        if test is None:
            if not (0 < test_fraction < 1):
                raise ParameterError("--test-fraction must be in (0, 1)")
            perm = rng.permutation(len(r))
            k = int(round(test_fraction * len(r)))
            t, r = r.iloc[perm[:k]].reset_index(drop=True), r.iloc[perm[k:]].reset_index(drop=True)
        else:
            t = read_table(test)
        if model != "gaussian":  # categorical features as indicators, on one design for the three tables
            (r, s, t), _ = regression_design([r, s, t], target, feats, binary=model == "logistic",
                                             model=type(mdl).__name__)
        lss = parse_loss(loss)
        if isinstance(lss, BetaLoss) and lss.w_beta == "calibrate":
            w = calibrate_beta_weight(mdl, lss, mdl.prepare(s))
            console.print(f"w_beta calibrated by Fisher-information matching (Lyddon et al. 2019): [bold]{w:.3f}[/]")
            lss = BetaLoss(lss.beta, w)
        post = GeneralisedPosterior(mdl, lss, num_warmup=num_warmup, num_samples=num_samples, seed=rng)
        with status(err_console, "sampling posteriors for every m ..."):
            res = choose_m(post, r, s, t, grid, criterion=criterion, n_splits=splits, alpha=alpha, seed=rng)
    tr = res.trajectory
    better = "higher" if tr.criterion == "auroc" else "lower"
    tab = Table(title="learning trajectory", caption=f"{tr.criterion}: {better} is better")
    tab.add_column("m", justify="right")
    tab.add_column(tr.criterion, justify="right")
    for m, v in zip(tr.m_grid, tr.values):
        style = "bold green" if m == res.m_best else None
        tab.add_row(str(m), f"{v:.4f}", style=style)
    console.print(tab)
    verdict = "use the synthetic data" if res.use_synthetic else "do not use the synthetic data"
    console.print(f"m-hat = [bold]{res.m_hat}[/] (best on the held-out data: {res.m_best}); p = {res.p_value:.4g} -> {verdict} (alpha = {alpha:g})")
    with user_errors():  # writing the outputs can still fail (e.g. a full disk)
        if json_out is not None:
            payload = {
                "m_hat": res.m_hat, "m_best": res.m_best, "p_value": res.p_value, "use_synthetic": res.use_synthetic, "alpha": alpha,
                "criterion": tr.criterion, "loss": lss.label, "m_grid": tr.m_grid.tolist(), "values": np.asarray(tr.values).tolist(),
                "seed_fixed": seed is not None,
            }
            atomic_write_text(json_out, json.dumps(payload, indent=1))
        if plot is not None:
            import matplotlib

            matplotlib.use("Agg")
            import matplotlib.pyplot as plt

            from synthinfer.bayes.plots import plot_trajectory

            fig, ax = plt.subplots(figsize=(6, 4))
            plot_trajectory(tr.m_grid, {lss.label: tr.values}, criterion=tr.criterion, m_hat=res.m_hat, ax=ax)
            fig.tight_layout()
            from synthinfer.files import atomic_write

            atomic_write(plot, lambda p: fig.savefig(p, format="png", dpi=110))
            plt.close(fig)


def _int_list(text: str, option: str) -> list[int]:
    try:
        return [int(v) for v in text.split(",")]
    except ValueError:
        raise ParameterError(f"{option} must be comma-separated whole numbers, got {text!r}") from None
