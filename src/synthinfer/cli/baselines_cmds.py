"""`synthinfer baseline`: a release from a baseline DP generator (PrivBayes, DP-GAN, DP-CGAN)."""

from __future__ import annotations

from enum import Enum
from pathlib import Path

import typer

from synthinfer.cli.app import app
from synthinfer.cli.common import check_output, console, read_table, user_errors


class BaselineGenerator(str, Enum):
    privbayes = "privbayes"
    dpgan = "dpgan"
    dpcgan = "dpcgan"


@app.command("baseline")
def baseline_cmd(
    data: Path = typer.Argument(..., help="CSV (or .parquet) file with the private data.", exists=True, dir_okay=False),
    domain: Path = typer.Option(..., "--domain", help="Public Domain JSON file.", exists=True, dir_okay=False),
    generator: BaselineGenerator = typer.Option(BaselineGenerator.privbayes, "--generator", help="Which baseline."),
    epsilon: float = typer.Option(..., "--epsilon", help="Privacy budget epsilon."),
    delta: float = typer.Option(None, "--delta", help="delta (GANs only; default 1/n - 1e-6 as in Ghalebikesabi et al.)."),
    m: int = typer.Option(1, "--m", min=1, help="Number of synthetic datasets."),
    n: int = typer.Option(None, "--n", min=1, help="Rows per dataset (default: as many as the data)."),
    label: str = typer.Option(None, "--label", help="Label column (dpcgan only)."),
    epochs: int = typer.Option(50, "--epochs", min=1, help="Training epochs (GANs only)."),
    out: Path = typer.Option(..., "--out", help="Output directory (must not exist yet)."),
) -> None:
    """Fit a baseline DP generator and write its m datasets as a release (see `synthinfer analyze`).

    Continuous columns can enter as discretised Domain columns (``bounds`` + ``bins``).
    """
    from synthinfer.data import Domain
    from synthinfer.generate import DPCGAN, DPGAN, PrivBayes, release_kwargs
    from synthinfer.release import write_release

    with user_errors():
        check_output(out, directory=True)
        dom = Domain.from_json(domain)
        df = read_table(data)
        if generator is BaselineGenerator.privbayes:
            if delta not in (None, 0.0):
                raise typer.BadParameter("PrivBayes is pure epsilon-DP: leave --delta out")
            gen = PrivBayes(epsilon=epsilon)
        else:
            d = delta if delta is not None else 1.0 / len(df) - 1e-6
            if delta is None and d <= 0:
                raise typer.BadParameter(
                    f"the default delta 1/n - 1e-6 is not positive for n = {len(df):,}; pass --delta "
                    "(much smaller than 1/n)", param_hint="--delta")
            if generator is BaselineGenerator.dpgan:
                gen = DPGAN(epsilon=epsilon, delta=d, epochs=epochs)
            else:
                if label is None:
                    raise typer.BadParameter("dpcgan needs --label")
                gen = DPCGAN(epsilon=epsilon, delta=d, epochs=epochs, label=label)
        with console.status(f"fitting {gen.mechanism} ..."):
            gen.fit(df, dom)
        datasets = gen.generate(m=m, n=n)
        write_release(out, datasets, **release_kwargs(gen), private_data=df)
    e, dl = gen.ledger_.spent
    console.print(f"[green]wrote[/] {m} dataset(s) to {out} ({gen.mechanism}, epsilon={e:g}, delta={dl:g})")
