"""``synthinfer generate``: NAPSU-MQ synthetic data from a CSV file, written as a release bundle."""

from __future__ import annotations

from pathlib import Path

import typer

from synthinfer.cli.app import app
from synthinfer.cli.common import check_output, console, read_table, user_errors


@app.command("generate")
def generate_cmd(
    data: Path = typer.Argument(..., help="Private data: a CSV (or .parquet) file with every Domain column.",
                                exists=True, dir_okay=False),
    domain: Path = typer.Option(..., "--domain", help="Public Domain JSON file.", exists=True, dir_okay=False),
    marginals: list[str] = typer.Option(
        ..., "--marginals", help='A marginal to measure, columns comma separated (e.g. "age,income"); repeat the option.'
    ),
    epsilon: float = typer.Option(1.0, "--epsilon", help="Total epsilon (MST selection + measurement)."),
    delta: float = typer.Option(1e-9, "--delta", help="Total delta; choose it much smaller than 1/n."),
    m: int = typer.Option(100, "--m", min=1, help="Number of synthetic datasets."),
    n_syn: int = typer.Option(None, "--n-syn", min=1, help="Rows per synthetic dataset (default: the real n)."),
    out: Path = typer.Option(..., "--out", help="Release directory to write (a .zip path writes a zip file)."),
    inference: str = typer.Option("nuts", "--inference", help="nuts, laplace, or mle (non-noise-aware baseline)."),
    select_mst: int = typer.Option(0, "--select-mst", help="Add this many 2-way marginals chosen privately by MST."),
    mst_budget_fraction: float = typer.Option(0.1, "--mst-budget-fraction", help="Share of the budget for MST."),
    num_warmup: int = typer.Option(800, "--num-warmup", help="NUTS warmup draws per chain."),
    num_samples: int = typer.Option(2000, "--num-samples", help="NUTS kept draws per chain."),
    chains: int = typer.Option(4, "--chains", help="NUTS chains."),
    reference: str = typer.Option(
        "most_frequent", "--reference",
        help="Reference categories of the canonical parametrisation: most_frequent (by noisy counts), "
             "first, or COL=CATEGORY pairs separated by commas (other columns: first category).",
    ),
    midpoints: bool = typer.Option(False, "--midpoints", help="Write discretised columns as bin midpoints."),
    seed: int = typer.Option(None, "--seed", help="Fix the randomness (tests only: a real release must not)."),
    overwrite: bool = typer.Option(False, "--overwrite", help="Replace an existing release at --out."),
) -> None:
    """Fit NAPSU-MQ to DATA under (epsilon, delta)-DP and write m synthetic datasets as a release."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    from synthinfer.data import Domain
    from synthinfer.generate import NapsuMQ
    from synthinfer.release import write_release

    with user_errors():
        check_output(out, overwrite=overwrite, directory=True)
        dom = Domain.from_json(domain)
        df = read_table(data)
        gen = NapsuMQ(
            marginals=[s for s in marginals],
            epsilon=epsilon,
            delta=delta,
            inference=inference,  # type: ignore[arg-type]
            select_extra=select_mst,
            mst_budget_fraction=mst_budget_fraction,
            n_chains=chains,
            num_warmup=num_warmup,
            num_samples=num_samples,
            reference=_parse_reference(reference, dom),
            seed=seed,
        )
        # transient: the bars show progress while working, then make way for the summary (or
        # leave an error on its own line)
        with Progress(
            SpinnerColumn(), TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
            TimeElapsedColumn(), console=console, transient=True,
        ) as bar:
            fit_task = bar.add_task("inference", total=None)
            gen.fit(df, dom, progress=lambda stage: bar.update(fit_task, description=f"inference: {stage}"))
            bar.update(fit_task, description="inference: done", total=1, completed=1)
            gen_task = bar.add_task("generating datasets", total=m)
            datasets = gen.generate(
                m, n=n_syn, seed=None if seed is None else seed + 1, midpoints=midpoints,
                progress=lambda done, total: bar.update(gen_task, completed=done),
            )
        settings = gen.release_settings_ | {
            "m": m, "n_syn": n_syn or gen.n_, "midpoints": midpoints,
            "selected_marginals": [list(x.columns) for x in gen.selected_marginals_],
            "sigma_dp": gen.sigma_dp_, "diagnostics": _diag_summary(gen.diagnostics_),
            "reference_categories": {c: dom[c].categories[k] for c, k in gen.queries_.reference.items()},
        }
        path = write_release(
            out, datasets, mechanism="napsu-mq", settings=settings, domain=dom, marginals=list(gen.marginals_),
            ledger=gen.ledger_, n=gen.n_, seed_fixed=seed is not None, posterior=gen.posterior_,
            overwrite=overwrite, zip=str(out).endswith(".zip"), private_data=df,
        )
    console.print(gen.summary(), soft_wrap=True)  # plain text report: no re-wrapping at the terminal width
    console.print(f"wrote {m} datasets to [bold]{path}[/]")


def _diag_summary(diag: dict) -> dict:
    """The diagnostics without per-parameter arrays (those stay in the posterior)."""
    out = {}
    for k, v in diag.items():
        if isinstance(v, dict):
            out[k] = {kk: vv for kk, vv in v.items() if kk not in ("rhat", "ess_bulk", "attempts")}
        else:
            out[k] = v
    return out


def _parse_reference(text: str, dom) -> str | dict:
    """``most_frequent``, ``first``, or ``col=cat,col=cat`` matched to the Domain's categories
    by their text (so ``y=1`` finds the integer category 1)."""
    from synthinfer.errors import SynthinferError

    if text in ("most_frequent", "first"):
        return text
    out = {}
    for pair in text.split(","):
        col, sep, cat = pair.partition("=")
        if not sep:
            raise SynthinferError(f"--reference: expected most_frequent, first or COL=CATEGORY pairs, got {pair!r}")
        col, cat = col.strip(), cat.strip()
        cats = dom[col].categories if col in dom.names else ()
        out[col] = next((c for c in cats if str(c) == cat), cat)  # unmatched: NapsuMQ names it
    return out
