"""``synthinfer generate`` and ``synthinfer baseline``: fit a DP generator to a CSV file and write
its synthetic datasets as a release bundle.

Both commands run one code path through the generator contract (``fit``, ``generate``,
``release_record``, ``write_release``); ``baseline`` is ``generate`` with the baselines'
defaults (PrivBayes, one dataset, epsilon required).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from enum import Enum
from pathlib import Path
from typing import Any

import typer

from synthinfer.cli.common import (UNSAFE_DELTA, UNSAFE_EPSILON, check_output, console, err_console, read_table,
                                   user_errors)
from synthinfer.cli.display import progress_bar, status
from synthinfer.errors import ParameterError


class GeneratorName(str, Enum):
    napsu = "napsu"
    privbayes = "privbayes"
    dpgan = "dpgan"
    dpcgan = "dpcgan"


class BaselineName(str, Enum):
    privbayes = "privbayes"
    dpgan = "dpgan"
    dpcgan = "dpcgan"


#: Options that only some generators take: giving one to another generator is an error, not
#: silently ignored.
_ONLY_FOR: dict[str, tuple[str, ...]] = {
    "--marginals": ("napsu",),
    "--inference": ("napsu",),
    "--select": ("napsu",),
    "--select-mst": ("napsu",),
    "--workload": ("napsu",),
    "--max-model-cells": ("napsu",),
    "--max-likelihood-flops": ("napsu",),
    "--required-share": ("napsu",),
    "--tie-below": ("napsu",),
    "--coarse-interactions": ("napsu",),
    "--slopes-below": ("napsu",),
    "--linear-by-linear": ("napsu",),
    "--smooth-sd": ("napsu",),
    "--mst-budget-fraction": ("napsu",),
    "--num-warmup": ("napsu",),
    "--num-samples": ("napsu",),
    "--chains": ("napsu",),
    "--reference": ("napsu",),
    "--midpoints": ("napsu", "privbayes"),
    "--numbers": ("napsu", "privbayes"),
    "--save-fit": ("napsu",),
    "--edges-share": ("napsu", "privbayes"),
    "--epochs": ("dpgan", "dpcgan"),
    "--label": ("dpcgan",),
}

class CoarseInteractions(str, Enum):
    """NAPSU-MQ's coarse interactions inside a group (``NapsuMQ(coarse_interactions=...)``)."""

    constant = "constant"
    linear = "linear"
    bilinear = "bilinear"


class Engine(str, Enum):
    """Where NAPSU-MQ's marginals are counted."""

    duckdb = "duckdb"
    spark = "spark"


_DATA = typer.Argument(..., help="Private data: a CSV (or .parquet) file with every Domain column; for napsu also a "
                                 "quoted glob of files read as one table ('dir/*.parquet').")
_DOMAIN = typer.Option(..., "--domain", help="Public Domain JSON file.", exists=True, dir_okay=False)
_OUT = typer.Option(..., "--out", help="Release directory to write (a .zip path writes a zip file).")
_DELTA = typer.Option(
    None, "--delta",
    help="Total delta, below 1/n for n private rows (default: 1/n^2; PrivBayes is pure epsilon-DP and takes none).")
_N_SYN = typer.Option(None, "--n-syn", "--n", help="Rows per synthetic dataset (default: the real n).")
_SEED = typer.Option(None, "--seed", help="Fix the randomness (tests only: a real release must not).")
_OVERWRITE = typer.Option(False, "--overwrite", help="Replace an existing release at --out.")
_LABEL = typer.Option(None, "--label", help="Label column (dpcgan only).")
_EPOCHS = typer.Option(None, "--epochs", help="Training epochs (dpgan, dpcgan; default 50).")


def generate_cmd(
    data: Path = _DATA,
    domain: Path = _DOMAIN,
    generator: GeneratorName = typer.Option(GeneratorName.napsu, "--generator", help="Which generator."),
    out: Path = _OUT,
    epsilon: float = typer.Option(1.0, "--epsilon",
                                  help="Total epsilon (for napsu: selection by MST or AIM + measurement)."),
    delta: float = _DELTA,
    m: int = typer.Option(100, "--m", help="Number of synthetic datasets."),
    n_syn: int = _N_SYN,
    seed: int = _SEED,
    overwrite: bool = _OVERWRITE,
    marginals: list[str] = typer.Option(
        None, "--marginals",
        help='napsu: a marginal to measure, columns comma separated (e.g. "age,income"); repeat the option.'),
    inference: str = typer.Option(None, "--inference", help="napsu: auto (default: NUTS for small models, Laplace above 200 parameters), nuts, laplace, importance, or mle (non-noise-aware baseline)."),
    select: str = typer.Option(
        None, "--select", metavar="mst|aim|N",
        help="napsu: choose more marginals privately: mst (MST's 2-way marginals spanning all columns), aim "
             "(AIM: measures marginals of --workload over rounds with the whole budget), or N (N 2-way marginals by MST; --select-mst N is an alias). Default: none."),
    select_mst: int = typer.Option(None, "--select-mst", hidden=True, help="napsu: alias of --select N."),
    workload: list[str] = typer.Option(
        None, "--workload",
        help="napsu, --select aim: a marginal the synthetic data should answer well, columns comma separated; "
             "repeat the option (default: every 2-way marginal; --marginals are always added)."),
    max_model_cells: int = typer.Option(
        None, "--max-model-cells",
        help="napsu, --select aim: cap on the model's junction-tree cells (default 4000); the fit's cost grows with it."),
    max_likelihood_flops: int = typer.Option(
        None, "--max-likelihood-flops",
        help="napsu, --select aim: cap on the noise-aware likelihood's flops per evaluation (default 3000000, "
             "about five minutes for the full Adult table on two cores); the sampler's time grows with it."),
    required_share: float = typer.Option(
        None, "--required-share",
        help="napsu, --select aim: share of the budget spent measuring --marginals before AIM's rounds "
             "(default 0.5; 0: AIM as published, which measures them at its coarsest noise)."),
    tie_below: str = typer.Option(
        None, "--tie-below", metavar="K|none",
        help="napsu, --select: tie the selected marginals' interactions whose noisy counts are below K noise sd "
             "(one parameter per marginal and scope; never --marginals): far fewer parameters for NUTS "
             "(default 3 with --select; none: no ties)."),
    coarse_interactions: CoarseInteractions = typer.Option(
        None, "--coarse-interactions",
        help="napsu: how the interactions of a column named through a many-to-one derived column vary inside a "
             "group: constant (default; one parameter per group), linear (also a slope in a numeric column's "
             "bin midpoints, so a slope fitted on the synthetic data is not flattened within groups) or bilinear "
             "(also the product of two numbers named in one marginal, so they covary within each cell)."),
    slopes_below: float = typer.Option(
        None, "--slopes-below", metavar="K",
        help="napsu, --coarse-interactions linear or bilinear: drop the slopes of coarse cells whose noisy count "
             "is below K noise sd (the data cannot set them; default: keep every slope)."),
    linear_by_linear: bool = typer.Option(
        False, "--linear-by-linear",
        help="napsu: one trend per pair of numeric columns (their linear-by-linear association, under the main "
             "effects' prior), so the pair's interactions shrink towards it: the numbers keep their covariance "
             "at a small epsilon."),
    smooth_sd: str = typer.Option(
        None, "--smooth-sd", metavar="SD|COL=SD,...",
        help="napsu: numeric columns' main effects as penalised splines whose slope changes from one bin to the "
             "next with this sd (every numeric column, or COL=SD pairs separated by commas)."),
    mst_budget_fraction: float = typer.Option(None, "--mst-budget-fraction", help="napsu: share of the budget for MST (default 0.1)."),
    num_warmup: int = typer.Option(
        None, "--num-warmup", help="napsu: NUTS warmup draws per chain (default 800; 400 on a large tied model)."),
    num_samples: int = typer.Option(
        None, "--num-samples", help="napsu: NUTS kept draws per chain (default 2000; 400 on a large tied model; by default "
                                          "chains that fail the convergence check run on, up to 4 times as long; a value given is kept to)."),
    chains: int = typer.Option(None, "--chains", help="napsu: NUTS chains (default 4)."),
    reference: str = typer.Option(
        None, "--reference",
        help="napsu: reference categories of the canonical parametrisation, from the noisy counts: "
             "most_frequent (default), well_measured (moved off categories that leave main-effect cells "
             "near-empty: better mixing, see docs/napsu-sampler.md), first, or COL=CATEGORY pairs separated "
             "by commas (other columns: first category).",
    ),
    midpoints: bool = typer.Option(False, "--midpoints", help="napsu, privbayes: write discretised columns as bin "
                                   "midpoints (default: bin labels, and numbers drawn inside their bins for columns "
                                   'with "bins": "private:K").'),
    numbers: str = typer.Option(
        None, "--numbers", metavar="COL,...|all",
        help="napsu, privbayes: write these discretised columns (or all) as numbers drawn uniformly inside their bins "
             '(whole numbers for "integer": true columns) instead of bin labels; private-bins columns, written as '
             "numbers by default, then only if named."),
    save_fit: Path = typer.Option(
        None, "--save-fit", dir_okay=False,
        help="napsu: also write the fit to this file (its noisy measurements and posterior draws, no rows; "
             "keep it with the data holder: it records the fit's timings, which DP does not cover). "
             "`synthinfer resample` samples its posterior again without new budget."),
    engine: Engine = typer.Option(
        "duckdb", "--engine",
        help="napsu: where the marginals are counted: duckdb (default; the file is never loaded) or spark "
             "(pyspark, pip install 'synthinfer[spark]'; master from $SYNTHINFER_SPARK_MASTER, default local[*])."),
    edges_share: float = typer.Option(
        None, "--edges-share",
        help='napsu, privbayes: share of epsilon spent choosing the edges of Domain columns with '
             '"bins": "private:K" (default 0.1).'),
    epochs: int = _EPOCHS,
    label: str = _LABEL,
    unsafe_allow_large_delta: bool = UNSAFE_DELTA,
    unsafe_allow_large_epsilon: bool = UNSAFE_EPSILON,
) -> None:
    """Fit a DP generator (NAPSU-MQ by default) to DATA and write m synthetic datasets as a release."""
    specific = {
        "--marginals": marginals or None, "--inference": inference, "--select": select, "--select-mst": select_mst,
        "--workload": workload or None, "--max-model-cells": max_model_cells,
        "--max-likelihood-flops": max_likelihood_flops, "--required-share": required_share,
        "--tie-below": tie_below, "--coarse-interactions": coarse_interactions.value if coarse_interactions else None,
        "--slopes-below": slopes_below, "--linear-by-linear": linear_by_linear or None, "--smooth-sd": smooth_sd,
        "--mst-budget-fraction": mst_budget_fraction, "--num-warmup": num_warmup, "--num-samples": num_samples,
        "--chains": chains, "--reference": reference, "--midpoints": midpoints or None,
        "--numbers": numbers, "--save-fit": save_fit,
        "--edges-share": edges_share, "--epochs": epochs,
        "--label": label,
    }
    _generate_release(data, domain, generator.value, out, epsilon=epsilon, delta=delta, m=m, n_syn=n_syn,
                      seed=seed, overwrite=overwrite, specific=specific,
                      unsafe=(unsafe_allow_large_delta, unsafe_allow_large_epsilon), engine=engine.value)


def baseline_cmd(
    data: Path = _DATA,
    domain: Path = _DOMAIN,
    generator: BaselineName = typer.Option(BaselineName.privbayes, "--generator", help="Which baseline."),
    out: Path = _OUT,
    epsilon: float = typer.Option(..., "--epsilon", help="Privacy budget epsilon."),
    delta: float = _DELTA,
    m: int = typer.Option(1, "--m", help="Number of synthetic datasets."),
    n_syn: int = _N_SYN,
    seed: int = _SEED,
    overwrite: bool = _OVERWRITE,
    epochs: int = _EPOCHS,
    label: str = _LABEL,
    unsafe_allow_large_delta: bool = UNSAFE_DELTA,
    unsafe_allow_large_epsilon: bool = UNSAFE_EPSILON,
) -> None:
    """Fit a baseline DP generator (PrivBayes, DP-GAN, DP-CGAN) and write its m datasets as a release:
    `synthinfer generate --generator ...` with one dataset by default.

    Continuous columns can enter as discretised Domain columns (``bounds`` + ``bins``).
    """
    _generate_release(data, domain, generator.value, out, epsilon=epsilon, delta=delta, m=m, n_syn=n_syn,
                      seed=seed, overwrite=overwrite, specific={"--epochs": epochs, "--label": label},
                      unsafe=(unsafe_allow_large_delta, unsafe_allow_large_epsilon))


def _generate_release(
    data: Path, domain: Path, generator: str, out: Path, *, epsilon: float, delta: float | None, m: int,
    n_syn: int | None, seed: int | None, overwrite: bool, specific: dict[str, Any], unsafe: tuple[bool, bool],
    engine: str = "duckdb",
) -> None:
    """The one generation path: check everything cheap first (before any privacy spend), fit,
    generate, write the release with the generator's own record.

    The budget is checked for the table's rows (:meth:`PrivacyLedger.check_budget`) in the
    ledger that the fit then charges, so the manifest records any ``--unsafe-*`` override.
    The exclusive lock on ``--out`` (:func:`synthinfer.files.output_lock`) is held from before
    the fit until the release is written, so two runs never both spend budget on one path."""
    from synthinfer.data import Domain
    from synthinfer.data.counting import FileCounter
    from synthinfer.data.marginals import no_data_file
    from synthinfer.data.private_bins import private_columns
    from synthinfer.files import output_lock
    from synthinfer.privacy import PrivacyBudget, PrivacyLedger, default_delta

    with user_errors(), contextlib.ExitStack() as held:
        given = {flag: v for flag, v in specific.items() if v is not None}
        for flag in given:
            if generator not in _ONLY_FOR[flag]:
                raise ParameterError(f"{flag} applies to --generator {' or '.join(_ONLY_FOR[flag])}, not {generator}")
        for flag, v in (("--m", m), ("--n-syn", n_syn), ("--epochs", specific.get("--epochs"))):
            if v is not None and v < 1:
                raise ParameterError(f"{flag} must be a positive integer, got {v}")
        if generator == "napsu" and "--marginals" not in given:
            raise ParameterError("--generator napsu needs --marginals (repeat it for each marginal)")
        selection = _selection(given) if generator == "napsu" else {}
        if generator == "dpcgan" and "--label" not in given:
            raise ParameterError("--generator dpcgan needs --label")
        if generator == "privbayes" and delta not in (None, 0.0):
            raise ParameterError("PrivBayes is pure epsilon-DP: leave --delta out")
        check_output(out, overwrite=overwrite, directory=True)  # before the lock makes any folder
        if "--save-fit" in given:
            check_output(given["--save-fit"], overwrite=overwrite, option="--save-fit")
        # Before any budget is spent: a second run writing to the same --out fails here at once,
        # and one that finished meanwhile is seen by the second check.
        held.enter_context(output_lock(out))
        check_output(out, overwrite=overwrite, directory=True)
        dom = Domain.from_json(domain)
        numbers = _numbers(given.get("--numbers"), dom, midpoints="--midpoints" in given)  # before any spend
        if any(ch in str(data) for ch in "*?["):
            if generator != "napsu":
                raise ParameterError(f"a glob of files is read by NAPSU-MQ's counting only, not by --generator {generator}")
        elif not data.is_file():
            raise no_data_file(data)
        # NAPSU-MQ reads only marginal counts: DuckDB scans the file and no row is loaded
        # (private bins need the values themselves, so the table is read for them)
        from_file = generator == "napsu" and not private_columns(dom)
        if engine == "spark":
            if not from_file:
                raise ParameterError("--engine spark counts marginals for NAPSU-MQ with public bin edges; "
                                     f"not for --generator {generator} or a Domain with private bins")
            from synthinfer.data.spark import SparkCounter, read_spark

            with status(err_console, f"checking {data.name} against the Domain (Spark) ..."):
                df = SparkCounter(read_spark(data), dom)
        elif from_file:
            with status(err_console, f"checking {data.name} against the Domain (DuckDB) ..."):
                df = FileCounter(data, dom)
        else:
            df = read_table(data)
        n_rows = df.n if from_file else len(df)
        if delta is None and generator != "privbayes":
            delta = default_delta(max(n_rows, 2))  # a table of < 2 rows is refused by the generator
        ledger = PrivacyLedger(PrivacyBudget(epsilon, delta or 0.0), allow_large_delta=unsafe[0],
                               allow_large_epsilon=unsafe[1])
        if n_rows:
            ledger.check_budget(n_rows)
        gen = _make_generator(generator, epsilon, delta, seed, given, selection, dom)
        napsu = generator == "napsu"
        with progress_bar(err_console) as bar:
            fit_task = bar.add_task(f"fitting {gen.mechanism}", total=None)
            fit_extras = {"progress": lambda stage: _show_stage(bar, fit_task, stage)} if napsu else {}
            gen.fit(df, dom, ledger=ledger, **fit_extras)
            bar.update(fit_task, description=f"fitting {gen.mechanism}: done", total=1, completed=1)
            if "--save-fit" in given:  # first: the budget is spent, so the fit outlives a failed write below
                gen.save(given["--save-fit"])
            # fitted from a file, no private row was loaded to compare with: NAPSU-MQ's datasets are
            # sampled from its model, never copied from the rows
            private = {"skip_private_data_check": True} if from_file else {"private_data": df}
            path = _write_datasets(gen, bar, out, m, n_syn, midpoints=bool(given.get("--midpoints")),
                                   numbers=numbers, overwrite=overwrite, **private)
    console.print(gen.summary(), soft_wrap=True, markup=False)  # plain text: no re-wrapping, no markup
    e, dl = gen.ledger_.spent
    console.print(f"wrote {m} dataset(s) to [bold]{path}[/] ({gen.mechanism}, epsilon={e:g}, delta={dl:g})")


def resample_cmd(
    fit: Path = typer.Argument(..., help="A fit written by `synthinfer generate --save-fit`.", exists=True,
                               dir_okay=False),
    out: Path = _OUT,
    m: int = typer.Option(100, "--m", help="Number of synthetic datasets."),
    n_syn: int = _N_SYN,
    inference: str = typer.Option(None, "--inference", help="nuts, laplace, importance or auto (default: the fit's)."),
    target_accept: float = typer.Option(
        None, "--target-accept", help="NUTS's target acceptance rate in (0, 1): higher takes smaller steps, which "
                                      "can remove divergent transitions (default: the fit's)."),
    num_warmup: int = typer.Option(None, "--num-warmup", help="NUTS warmup draws per chain (default: the fit's)."),
    num_samples: int = typer.Option(None, "--num-samples", help="NUTS kept draws per chain (default: the fit's)."),
    chains: int = typer.Option(None, "--chains", help="NUTS chains (default: the fit's)."),
    save_fit: Path = typer.Option(None, "--save-fit", dir_okay=False,
                                  help="Also write the fit with its new posterior to this file."),
    midpoints: bool = typer.Option(False, "--midpoints", help="Write discretised columns as bin midpoints."),
    numbers: str = typer.Option(None, "--numbers", metavar="COL,...|all",
                                help="Write these discretised columns (or all) as numbers drawn inside their bins."),
    seed: int = _SEED,
    overwrite: bool = _OVERWRITE,
) -> None:
    """Sample a saved NAPSU-MQ fit's posterior again and write m new datasets as a release: no new
    privacy cost (post-processing of the fit's noisy measurements). For a fit whose summary warned
    (divergent transitions, R-hat or ESS short of the checks): e.g. --target-accept 0.95."""
    from synthinfer.files import output_lock
    from synthinfer.generate import NapsuMQ

    with user_errors(), contextlib.ExitStack() as held:
        for flag, v in (("--m", m), ("--n-syn", n_syn), ("--num-warmup", num_warmup), ("--num-samples", num_samples),
                        ("--chains", chains)):
            if v is not None and v < (0 if flag == "--num-warmup" else 1):
                raise ParameterError(f"{flag} must be a {'non-negative' if flag == '--num-warmup' else 'positive'} "
                                     f"integer, got {v}")
        check_output(out, overwrite=overwrite, directory=True)
        if save_fit is not None:
            check_output(save_fit, overwrite=overwrite, option="--save-fit")
        held.enter_context(output_lock(out))
        check_output(out, overwrite=overwrite, directory=True)
        gen = NapsuMQ.load(fit)
        numbers = _numbers(numbers, gen.domain_, midpoints=midpoints)
        changes = {"inference": inference, "target_accept": target_accept, "num_warmup": num_warmup,
                   "num_samples": num_samples, "n_chains": chains}
        gen.set_params(**{k: v for k, v in changes.items() if v is not None})
        with progress_bar(err_console) as bar:
            task = bar.add_task("sampling the posterior again", total=None)
            gen.resample_posterior(seed, progress=lambda stage: _show_stage(bar, task, stage))
            bar.update(task, description="sampling the posterior again: done", total=1, completed=1)
            if save_fit is not None:
                gen.save(save_fit)
            # no private table here: NAPSU-MQ's datasets are sampled from its model, never copied from rows
            path = _write_datasets(gen, bar, out, m, n_syn, midpoints=midpoints, numbers=numbers,
                                   overwrite=overwrite, skip_private_data_check=True)
    console.print(gen.summary(), soft_wrap=True, markup=False)
    console.print(f"wrote {m} dataset(s) to [bold]{path}[/] (napsu-mq, posterior sampled again: no new privacy cost)")


def _numbers(text: str | None, domain, *, midpoints: bool) -> bool | list[str] | None:
    """``--numbers``: ``all`` or comma-separated discretised columns of ``domain`` (checked:
    a column with private bins counts, its bins are chosen by the fit); ``None`` when not given."""
    from synthinfer.data import PrivateBins

    if text is None:
        return None
    if midpoints:
        raise ParameterError("--midpoints writes every discretised column as its bins' midpoints; leave out "
                             "--numbers with it")
    if text.strip() == "all":
        return True
    names = [c.strip() for c in text.split(",") if c.strip()]
    if not names:
        raise ParameterError("--numbers names no column (give COL,... or all)")
    for name in domain.check_columns(names):
        col = domain[name]
        if not isinstance(col, PrivateBins) and getattr(col, "binning", None) is None:
            raise ParameterError(f"--numbers: column {name!r} has no bins, so no numbers to draw inside them")
    return names


def _write_datasets(gen, bar, out: Path, m: int, n_syn: int | None, *, midpoints: bool, overwrite: bool,
                    numbers: bool | list[str] | None = None, **private: Any) -> Path:
    """``m`` datasets of the fitted ``gen`` written as a release at ``out``, counted on ``bar``
    (``midpoints``, ``numbers``: as ``NapsuMQ.generate`` and ``PrivBayes.generate`` take them);
    ``private``: ``write_release``'s ``private_data`` or ``skip_private_data_check``."""
    from synthinfer.generate import NapsuMQ, PrivBayes
    from synthinfer.release import DatasetStream, write_release

    task = bar.add_task("generating and writing datasets", total=m)
    if isinstance(gen, NapsuMQ):  # drawn and written chunk by chunk: memory does not grow with m or n
        stream = gen.generate_stream(m, n_syn, midpoints=midpoints, numbers=numbers)
        def written(done: int) -> None:  # the posterior and the report follow the last dataset
            bar.update(task, completed=done, **({"description": "writing the posterior and the report"}
                                                 if done == m else {}))

        datasets = DatasetStream(stream.m, stream.n_syn, stream.chunk_rows, _counted(stream, written))
    elif isinstance(gen, PrivBayes):
        datasets = gen.generate(m, n_syn, midpoints=midpoints, numbers=numbers)
    else:
        datasets = gen.generate(m, n_syn)
    path = write_release(out, datasets, record=gen.release_record(), overwrite=overwrite,
                         zip=str(out).endswith(".zip"), **private)
    bar.update(task, completed=m)
    return path


def _counted(datasets, done: Callable[[int], None]):
    """``datasets`` as they are consumed, calling ``done(k)`` once the ``k``-th has been written
    (the writer asks for the next dataset only then)."""
    for k, ds in enumerate(datasets, start=1):
        yield ds
        done(k)


def _show_stage(bar, task, stage: str) -> None:
    """Show a fit's stage on its bar: a stage that counts its work (a
    :class:`synthinfer.progress.Progress`, e.g. NUTS's draws) fills the bar, whose column
    shows done/total, and adds each part's count, the rate and the time left; any other
    stage empties the bar."""
    from synthinfer.progress import Progress

    if isinstance(stage, Progress):
        bar.update(task, description=f"inference: {stage.stage} {stage.unit} ({stage.details})", total=stage.total,
                   completed=stage.done)
    else:
        next(t for t in bar.tasks if t.id == task).total = None  # update() leaves a total as it is
        bar.update(task, description=f"inference: {stage}", completed=0)


def _selection(given: dict[str, Any]) -> dict[str, Any]:
    """NapsuMQ's selection settings (``select_extra``, ``workload``, ``max_model_cells``,
    ``max_likelihood_flops``) from ``--select`` (or its alias ``--select-mst N``), ``--workload``,
    ``--max-model-cells`` and ``--max-likelihood-flops``,
    checked before any work."""
    if "--select" in given and "--select-mst" in given:
        raise ParameterError("--select-mst N is an alias of --select N: give only one of them")
    select: int | str | None = given.get("--select-mst")
    if "--select" in given:
        text = given["--select"].strip().lower()
        if text in ("mst", "aim"):
            select = text
        else:
            try:
                select = int(text)
            except ValueError:
                raise ParameterError(f"--select: expected mst, aim or a number of 2-way marginals, got "
                                     f"{given['--select']!r}") from None
    if isinstance(select, int) and select < 0:
        flag = "--select" if "--select" in given else "--select-mst"
        raise ParameterError(f"{flag}: the number of 2-way marginals must be >= 0, got {select}")
    aim_only = [f for f in ("--workload", "--max-model-cells", "--max-likelihood-flops", "--required-share")
                if f in given]
    if aim_only and select != "aim":
        verb = "apply" if len(aim_only) > 1 else "applies"
        raise ParameterError(f"{' and '.join(aim_only)} {verb} to --select aim only")
    if "--required-share" in given and not 0 <= given["--required-share"] < 1:
        raise ParameterError(f"--required-share must be in [0, 1), got {given['--required-share']}")
    if select == "aim" and "--mst-budget-fraction" in given:
        raise ParameterError("--mst-budget-fraction applies to MST selection (--select mst or N); AIM spends the "
                             "whole budget over its rounds")
    if "--tie-below" in given and not select:
        raise ParameterError("--tie-below applies to selected marginals: give --select too")
    for flag in ("--max-model-cells", "--max-likelihood-flops"):
        if flag in given and given[flag] < 1:
            raise ParameterError(f"{flag} must be a positive integer, got {given[flag]}")
    kw: dict[str, Any] = {} if select is None else {"select_extra": select}
    if "--workload" in given:
        kw["workload"] = list(given["--workload"])
    if "--max-model-cells" in given:
        kw["max_model_cells"] = given["--max-model-cells"]
    if "--max-likelihood-flops" in given:
        kw["max_likelihood_flops"] = given["--max-likelihood-flops"]
    if "--required-share" in given:
        kw["required_share"] = given["--required-share"]
    if "--tie-below" in given:
        text = str(given["--tie-below"]).strip().lower()
        try:
            kw["tie_below"] = None if text == "none" else float(text)
        except ValueError:
            raise ParameterError(f"--tie-below must be a number of noise sd or 'none', got {given['--tie-below']!r}") \
                from None
    return kw


def _parse_smooth_sd(text: str) -> float | dict[str, float]:
    """``--smooth-sd``: one number, or ``COL=SD`` pairs separated by commas."""
    try:
        if "=" not in text:
            return float(text)
        pairs = [part.split("=", 1) for part in text.split(",") if part.strip()]
        return {col.strip(): float(sd) for col, sd in pairs}
    except ValueError:
        raise ParameterError(f"--smooth-sd must be a number or COL=SD pairs separated by commas, got {text!r}") \
            from None


def _make_generator(name: str, epsilon: float, delta: float, seed: int | None, given: dict[str, Any],
                    selection: dict[str, Any], dom):
    """The generator for ``--generator name``, with the options given on the command line
    (the others keep the generator's own defaults); ``selection`` from :func:`_selection`."""
    from synthinfer.generate import DPCGAN, DPGAN, NapsuMQ, PrivBayes

    if name == "napsu":
        names = {"--inference": "inference", "--mst-budget-fraction": "mst_budget_fraction",
                 "--num-warmup": "num_warmup", "--num-samples": "num_samples", "--chains": "n_chains",
                 "--edges-share": "edges_share", "--coarse-interactions": "coarse_interactions",
                 "--slopes-below": "slopes_below", "--linear-by-linear": "linear_by_linear"}
        kw = {names[f]: v for f, v in given.items() if f in names} | selection
        if "--reference" in given:
            kw["reference"] = _parse_reference(given["--reference"], dom)
        if "--smooth-sd" in given:
            kw["smooth_sd"] = _parse_smooth_sd(given["--smooth-sd"])
        return NapsuMQ(list(given["--marginals"]), epsilon=epsilon, delta=delta, seed=seed, **kw)
    if name == "privbayes":
        kw = {"edges_share": given["--edges-share"]} if "--edges-share" in given else {}
        return PrivBayes(epsilon=epsilon, seed=seed, **kw)
    kw = {"epochs": given["--epochs"]} if "--epochs" in given else {}
    if name == "dpgan":
        return DPGAN(epsilon=epsilon, delta=delta, seed=seed, **kw)
    return DPCGAN(epsilon=epsilon, delta=delta, seed=seed, label=given["--label"], **kw)


def _parse_reference(text: str, dom) -> str | dict:
    """``well_measured``, ``most_frequent``, ``first``, or ``col=cat,col=cat`` matched to the Domain's categories
    by their text (so ``y=1`` finds the integer category 1)."""
    if text in ("most_frequent", "well_measured", "first"):
        return text
    out = {}
    for pair in text.split(","):
        col, sep, cat = pair.partition("=")
        if not sep:
            raise ParameterError(f"--reference: expected most_frequent, well_measured, first or COL=CATEGORY pairs, "
                                 f"got {pair!r}")
        col, cat = col.strip(), cat.strip()
        cats = getattr(dom[col], "categories", ()) if col in dom.names else ()  # NapsuMQ names a bad one
        out[col] = next((c for c in cats if str(c) == cat), cat)  # unmatched: NapsuMQ names it
    return out
