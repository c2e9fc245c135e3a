"""``synthinfer report``: one HTML page about a release (public, or with the private data for the data holder)."""

from __future__ import annotations

from pathlib import Path

import typer

from synthinfer.cli.common import check_output, console, err_console, read_table, user_errors
from synthinfer.cli.display import status
from synthinfer.reporting import MAX_DATASETS


def report_cmd(
    release: Path = typer.Argument(..., help="Release bundle (directory or .zip)."),
    out: Path = typer.Option(..., "--out", "-o", help="The HTML file to write (must not exist)."),
    private: Path | None = typer.Option(
        None, "--private", help="The private table (CSV or Parquet): adds fidelity measures and the real-data "
        "analysis. The page then says it is for the data holder and must not be published."),
    domain: Path | None = typer.Option(
        None, "--domain", help="Domain JSON of the private table; it must be the release's (the default)."),
    formula: str | None = typer.Option(
        None, "--formula", "-f", help='The analyst\'s model, e.g. "income ~ age + C(sex)": whether the release '
        "supports it, and with --private its real and synthetic intervals."),
    model: str = typer.Option(
        "logit", "--model", "-m", help="logit, probit, ols or poisson, or a statsmodels.formula.api model by name, "
        "e.g. mnlogit (with --formula)."),
    keys: str | None = typer.Option(
        None, "--keys", help="Comma-separated columns an intruder may know: with --private and --target, the "
        "disclosure measures repU and DiSCO."),
    target: str | None = typer.Option(None, "--target", help="The column the intruder wants (with --keys)."),
    max_datasets: int = typer.Option(MAX_DATASETS, help="Synthetic datasets read (the first ones)."),
    fingerprint: str | None = typer.Option(None, help="The release's published fingerprint to check against."),
) -> None:
    """Write an HTML report of a release: mechanism, privacy spend, measured marginals, diagnostics and
    the synthetic marginals; with --private, fidelity to the private data (not for publication)."""
    with user_errors():
        from synthinfer.data import Domain
        from synthinfer.errors import DomainError, ParameterError
        from synthinfer.release import open_release
        from synthinfer.reporting import report

        check_output(out)
        if domain is not None and private is None:
            raise ParameterError("--domain describes the private table: give it with --private")
        if max_datasets < 1:
            raise ParameterError(f"--max-datasets must be at least 1, got {max_datasets}")
        rel = open_release(release, fingerprint=fingerprint)
        private_df = None
        if private is not None:
            if domain is not None and Domain.from_json(domain) != rel.domain:
                raise DomainError(f"--domain {domain} is not the release's Domain; omit it to use the release's")
            private_df = read_table(private)
        with status(err_console, "writing the report"):
            page = report(rel, private_df, formula=formula, model=model, max_datasets=max_datasets,
                          keys=None if keys is None else [k.strip() for k in keys.split(",") if k.strip()],
                          target=target)
        page.save(out)
    kind = "with the private data: FOR THE DATA HOLDER ONLY, do not publish" if page.private else "public"
    console.print(f"wrote {out} ({len(page.html.encode()) / 1e6:.2f} MB, {kind})")
