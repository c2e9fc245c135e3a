"""``synthinfer weights``: DP importance weights for a synthetic table (Ghalebikesabi et al. 2022)."""

from __future__ import annotations

import json
from enum import Enum
from pathlib import Path

import typer
from rich.table import Table

from synthinfer.cli.common import (UNSAFE_DELTA, UNSAFE_EPSILON, check_output, console, err_console, read_table,
                                   user_errors)
from synthinfer.cli.display import status


class Method(str, Enum):
    beta_debiased = "beta-debiased"
    beta_noised = "beta-noised"
    dp_mlp = "dp-mlp"


def _read_bounds(path: Path):
    """A Domain JSON (``{"columns": [...]}``) or ``{"col": {"bounds": [lo, hi]} | {"categories": [...]}}``."""
    from synthinfer.data import Domain
    from synthinfer.errors import DomainError

    try:
        spec = json.loads(path.read_text())
    except json.JSONDecodeError as e:
        raise DomainError(f"--bounds {path}: not valid JSON ({e})") from None
    if isinstance(spec, dict) and "columns" in spec:
        return Domain.from_dict(spec)
    if not isinstance(spec, dict) or not spec:
        raise DomainError(f'--bounds {path}: expected {{"column": {{"bounds": [lower, upper]}} | {{"categories": [...]}}, ...}}')
    out = {}
    for name, s in spec.items():
        bounds = s.get("bounds") if isinstance(s, dict) else None
        if isinstance(bounds, list) and len(bounds) == 2 and all(
                isinstance(v, (int, float)) and not isinstance(v, bool) for v in bounds):
            out[name] = (float(bounds[0]), float(bounds[1]))
        elif isinstance(s, dict) and isinstance(s.get("categories"), list):
            out[name] = list(s["categories"])
        else:
            raise DomainError(f'column {name!r}: give {{"bounds": [lower, upper]}} (numbers) or {{"categories": [...]}}, got {s!r}')
    return out


def weights_cmd(
    real: Path = typer.Argument(..., help="Real (private) table, CSV or Parquet.", exists=True, dir_okay=False),
    synthetic: Path = typer.Argument(..., help="Synthetic table to weight, CSV or Parquet.", exists=True, dir_okay=False),
    bounds: Path = typer.Option(..., "--bounds", help="Public bounds/categories JSON, or a Domain JSON.", exists=True, dir_okay=False),
    out: Path = typer.Option(..., "--out", help="Output CSV: one weight per synthetic row (and its log)."),
    method: Method = typer.Option(Method.beta_debiased, help="Weight estimator."),
    epsilon: float = typer.Option(..., help="Privacy budget epsilon spent on the weights."),
    delta: float = typer.Option(0.0, help="delta (needed by dp-mlp and --noise gaussian)."),
    lam: float = typer.Option(0.1, help="L2 regularisation of the logistic-regression weights."),
    noise: str = typer.Option("laplace", help="Coefficient noise of beta-*: laplace or gaussian."),
    clip: bool = typer.Option(False, help="Clip numeric values to their bounds instead of failing."),
    overwrite: bool = typer.Option(False, "--overwrite", help="Replace an existing --out file (and its ledger)."),
    unsafe_allow_large_delta: bool = UNSAFE_DELTA,
    unsafe_allow_large_epsilon: bool = UNSAFE_EPSILON,
) -> None:
    """Estimate DP importance weights w(x) = p_real(x) / p_synthetic(x) for the synthetic rows.

    Writes the weights (never any row of data) and a ledger ``<out>.ledger.json``. The noise is
    drawn from OS entropy (no seed option: a fixed seed would let anyone remove the noise).
    delta must be below 1/n and epsilon at most 100 for n real rows (see ``--unsafe-*``).
    """
    from synthinfer.files import atomic_write_text
    from synthinfer.privacy import PrivacyBudget, PrivacyLedger
    from synthinfer.weights import BetaDebiased, BetaNoised, DPMLPWeights, effective_sample_size, pareto_smooth

    with user_errors():
        spec = _read_bounds(bounds)
        ledger_path = out.with_suffix(out.suffix + ".ledger.json")
        check_output(out, overwrite=overwrite)
        check_output(ledger_path, overwrite=overwrite, option="the ledger file")
        r, s = read_table(real), read_table(synthetic)
        if method is Method.dp_mlp:
            est = DPMLPWeights(spec, epsilon=epsilon, delta=delta, clip=clip)
        else:
            cls = BetaDebiased if method is Method.beta_debiased else BetaNoised
            est = cls(spec, epsilon=epsilon, delta=delta, lam=lam, noise=noise, clip=clip)
        ledger = PrivacyLedger(PrivacyBudget(epsilon, delta), allow_large_delta=unsafe_allow_large_delta,
                               allow_large_epsilon=unsafe_allow_large_epsilon)
        with status(err_console, f"fitting {method.value} weights"):
            est.fit(r, s, ledger=ledger)
        lw = est.log_weights(s)
        import numpy as np
        import pandas as pd

        # The privacy record first: weights on disk always have their spend recorded beside them.
        atomic_write_text(ledger_path, json.dumps(est.ledger_.to_dict(), indent=2))
        atomic_write_text(out, pd.DataFrame({"weight": np.exp(lw), "log_weight": lw}).to_csv(index=False))
        ps = pareto_smooth(lw, warn=False)
    t = Table(title=f"{method.value} weights for {len(s):,} synthetic rows")
    t.add_column("quantity")
    t.add_column("value", justify="right")
    t.add_row("epsilon, delta spent", f"{est.ledger_.spent[0]:g}, {est.ledger_.spent[1]:g}")
    t.add_row("effective sample size", f"{effective_sample_size(log_weights=lw):,.1f}")
    t.add_row("Pareto k-hat", f"{ps.k_hat:.2f}" + (f"  [red](> {ps.threshold:.2f}: unreliable)[/]" if not ps.reliable else ""))
    console.print(t)
    console.print(f"wrote {out} and {out.with_suffix(out.suffix + '.ledger.json')}")
