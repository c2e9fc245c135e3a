"""Data commands: inspect a Domain and count marginals of a file (DuckDB)."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.table import Table

from synthinfer.cli.common import console, user_errors


def domain_cmd(domain: Path = typer.Argument(..., help="Domain JSON file.", exists=True, dir_okay=False)) -> None:
    """Show a Domain: its columns (categorical, discretised with public or private edges, derived
    from another column, continuous with public bounds, or to be binned privately), category
    counts and the number of cells."""
    from synthinfer.data import Continuous, Domain, PrivateBins

    with user_errors():
        d = Domain.from_json(domain)
    n_cont = sum(isinstance(c, Continuous) and not isinstance(c, PrivateBins) for c in d.columns)
    n_private = sum(isinstance(c, PrivateBins) for c in d.columns)
    if n_private and not n_cont:
        title = (f"Domain: {len(d)} columns, {n_private} with bin edges to be chosen privately by the fit "
                 "(part of its budget: NapsuMQ's edges_share, --edges-share)")
    elif n_cont:
        title = (f"Domain: {len(d)} columns, {n_cont} continuous (no finite cells: NAPSU-MQ, PrivBayes and "
                 "marginal counts need them discretised with bins)")
    else:
        title = f"Domain: {len(d)} columns, {d.size:,} cells"
    t = Table(title=title)
    t.add_column("column")
    t.add_column("kind")
    t.add_column("size", justify="right")
    t.add_column("categories / bounds")
    for c in d.columns:
        if isinstance(c, PrivateBins):
            kind = "private bins, integer" if c.integer else "private bins"
            t.add_row(c.name, kind, str(c.bins), f"[{c.lower:g}, {c.upper:g}]; edges: private output of the fit")
        elif isinstance(c, Continuous):
            kind = "continuous, integer" if c.integer else "continuous"
            t.add_row(c.name, kind, "-", f"[{c.lower:g}, {c.upper:g}]")
        else:
            cats = ", ".join(map(str, c.categories[:6])) + (" ..." if c.size > 6 else "")
            edges = "" if c.binning is None else (", private edges" if c.binning.private else ", public edges")
            kind = ("categorical" if c.binning is None else "discretised" + edges) if c.derived_from is None else (
                f"derived from {c.derived_from}")
            t.add_row(c.name, kind, str(c.size), cats)
    console.print(t)


def count_cmd(
    data: Path = typer.Argument(..., help="CSV or Parquet file, or a quoted glob of files read as one table "
                                          "('dir/*.parquet')."),
    domain: Path = typer.Option(..., "--domain", help="Domain JSON file.", exists=True, dir_okay=False),
    marginal: str = typer.Option(..., "--marginal", help='Columns, comma separated, e.g. "age,income".'),
    drop_missing: bool = typer.Option(False, help="Drop rows with missing values instead of failing."),
) -> None:
    """Exact (non-private) marginal counts of a file, computed by DuckDB without loading it."""
    from synthinfer.data import Domain, Marginal, count_file

    with user_errors():
        d = Domain.from_json(domain)
        m = Marginal(tuple(s.strip() for s in marginal.split(",")))
        counts = count_file(data, d, m.columns, missing="drop" if drop_missing else "error")
    import itertools

    t = Table(title=f"counts of {m} (exact, not private)")
    for c in m.columns:
        t.add_column(c)
    t.add_column("count", justify="right")
    cells = itertools.product(*[d[c].categories for c in m.columns])
    for cell, k in zip(cells, counts):
        t.add_row(*map(str, cell), f"{int(k):,}")
    console.print(t)
