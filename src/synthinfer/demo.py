"""The end-to-end demo run by ``make demo``: NA+MI on the bundled UCI Adult data.

Data holder: NAPSU-MQ (Räisä et al. 2023) measures marginals of Adult under
(epsilon, delta)-DP, infers the noise-aware posterior and writes a release of m synthetic
datasets. Analyst: opens the release (checksums verified) and fits a logistic regression of
income on every dataset, combining with Rubin's rules for synthetic data. For comparison only,
the same model is fitted on the real data (something an analyst could not do).

By default age and hours-per-week are whole numbers: 3-unit bins inside public groups, every
pair of a number with another column measured through its groups with a slope in the number
(coarse interactions, ``coarse_interactions="linear"``), each number's own 1-way marginal in its
bins (:data:`~synthinfer.datasets.ADULT_NUMBERS_MARGINALS`); the release's ages and hours are
numbers drawn inside their bins, and the analyst's logit is on the numbers. NUTS on this model
takes most of the demo's time (docs/continuous-columns.md, "`make demo` with the numbers").

``--buckets``: the paper's model instead (its 10 two-way marginals, age and hours-per-week in 5
buckets, age decoded at the buckets' midpoints; Supplement F), a few minutes; its age slope is
on the buckets' midpoints, a coarser covariate than the numbers.

``--chains``: NUTS's chains (default 2 with the numbers, one per core of a 2-core machine; the
library's 4 with ``--buckets``), with the library's draws.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.table import Table

from synthinfer.cli.display import status

if TYPE_CHECKING:
    import pandas as pd

    from synthinfer.data import Domain
    from synthinfer.generate import NapsuMQ

console = Console()

#: ``--buckets``: the paper's downstream model (Supplement F): age bucket midpoint, race dummies
#: (reference White), a Male indicator and an intercept.
FORMULA = "income ~ age + C(race, Treatment('White')) + C(sex)"
#: The default: the same with age and hours-per-week as numbers.
NUMBERS_FORMULA = "income ~ age + Q('hours-per-week') + C(race, Treatment('White')) + C(sex)"
#: The columns written as numbers (all but ``--buckets``)
NUMBERS = ["age", "hours-per-week"]
#: ``--chains``'s default with the numbers: NUTS's chains run side by side, one per core; two fill
#: a 2-core machine (``--buckets`` keeps the library's 4, minutes either way)
NUMBERS_CHAINS = 2


def hold_release(
    df: pd.DataFrame,
    domain: Domain,
    out: Path,
    *,
    marginals: Sequence[Sequence[str]],
    epsilon: float,
    delta: float,
    inference: str = "auto",
    m: int = 20,
    midpoints: bool | Sequence[str] = False,
    numbers: bool | Sequence[str] | None = None,
    seed: int | None = None,
    overwrite: bool = False,
    **settings: Any,
) -> tuple[NapsuMQ, Path]:
    """The data holder's part: fit NAPSU-MQ to ``df``, generate ``m`` datasets and write them as a
    release at ``out``; return the fitted generator and the release's path. ``settings``: more
    of ``NapsuMQ``'s (e.g. ``coarse_interactions``).

    The same steps as ``synthinfer generate`` (same settings -> same manifest): the datasets come
    from ``generate_stream`` under the generator's ``seed`` (drawn and written chunk by chunk)
    and the release records ``gen.release_record()``.
    """
    from synthinfer.generate import NapsuMQ
    from synthinfer.release import write_release

    t0 = time.perf_counter()
    gen = NapsuMQ(marginals, epsilon=epsilon, delta=delta, inference=inference, seed=seed, **settings)
    with status(console, "measuring the marginals and inferring the posterior ...") as shown:
        gen.fit(df, domain, progress=shown.update)
    console.print(f"fitted in {time.perf_counter() - t0:.1f} s")
    console.print(gen.summary(), soft_wrap=True)  # plain text report: no re-wrapping at the terminal width
    t0 = time.perf_counter()
    path = write_release(out, gen.generate_stream(m, midpoints=midpoints, numbers=numbers),
                         record=gen.release_record(), overwrite=overwrite, private_data=df)
    console.print(f"generated {m} datasets of {gen.n_:,} rows and wrote them to [bold]{path}[/] in "
                  f"{time.perf_counter() - t0:.1f} s")
    return gen, path


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", type=Path, default=Path("demo-output"))
    parser.add_argument("--epsilon", type=float, default=1.0)
    parser.add_argument("--m", type=int, default=20, help="number of synthetic datasets")
    parser.add_argument("--inference", choices=["auto", "nuts", "laplace"], default="auto",
                        help="auto (default: the library's choice, NUTS for these models), nuts, or laplace (fast, "
                             "an approximation)")
    which = parser.add_mutually_exclusive_group()
    which.add_argument("--numbers", dest="numbers", action="store_true", default=True,
                       help="(the default) age and hours-per-week as numbers (fine bins, groups with slopes); NUTS on "
                            "this model takes about a quarter of an hour of wall time on an idle 2-core machine, more "
                            "where its convergence check asks for further draws")
    which.add_argument("--buckets", dest="numbers", action="store_false",
                       help="the paper's model instead: age and hours-per-week in 5 buckets, age at their midpoints "
                            "(a few minutes; the slope on age is then on the buckets' midpoints)")
    parser.add_argument("--chains", type=int, default=None,
                        help=f"NUTS chains, each on a core of its own (default {NUMBERS_CHAINS} with the numbers, the "
                             "library's 4 with --buckets)")
    parser.add_argument("--seed", type=int, default=None, help="fix the randomness (testing only)")
    args = parser.parse_args(argv)

    import statsmodels.formula.api as smf

    from synthinfer.data import decode, encode
    from synthinfer.datasets import ADULT_NUMBERS_MARGINALS, ADULT_PAPER_MARGINALS, load_adult
    from synthinfer.release import open_release

    if args.chains is not None and args.chains < 1:
        parser.error(f"--chains must be at least 1, got {args.chains}")
    chains = args.chains or (NUMBERS_CHAINS if args.numbers else None)
    df, domain = load_adult(paper_subset=True, numbers=args.numbers)
    n = len(df)
    delta = 1.0 / n**2
    console.rule("[bold]Data holder: NAPSU-MQ on UCI Adult")
    console.print(f"n = {n:,} rows; public {domain!r}")
    if not args.numbers:
        formula, marginals = FORMULA, ADULT_PAPER_MARGINALS
        model: dict[str, Any] = {"midpoints": ["age"]}
        what = f"the paper's {len(marginals)} two-way marginals (age and hours in 5 buckets)"
    else:
        formula, marginals = NUMBERS_FORMULA, ADULT_NUMBERS_MARGINALS
        model = {"numbers": NUMBERS, "coarse_interactions": "linear"}
        what = (f"{len(marginals)} marginals, age and hours-per-week as numbers in 3-unit bins, "
                "their pairs through 5 groups with slopes")
    console.print(f"budget: epsilon = {args.epsilon:g}, delta = 1/n^2 = {delta:.3g}; {what}; "
                  f"inference = {args.inference}" + (f", {chains} NUTS chains" if chains else ""))
    if args.numbers and args.inference != "laplace":
        console.print("NUTS on this model takes about 12 minutes of wall time on an idle 2-core machine for its first "
                      "sampling pass, up to about 5 for each further pass while the convergence check fails (sized "
                      "to what it missed, at most 3 passes' worth), and 6 more and up to 5 for each further pass if "
                      "it samples again with smaller steps after divergent transitions (--buckets: the paper's "
                      "model, a few minutes)")
    _, path = hold_release(df, domain, args.out / "release", marginals=marginals, epsilon=args.epsilon,
                           delta=delta, inference=args.inference, m=args.m, seed=args.seed, overwrite=True,
                           **({"n_chains": chains} if chains else {}), **model)

    console.print(f"release written to {path}; its public report: {path / 'report.html'}")

    console.rule("[bold]Analyst: Rubin's rules on the release")
    release = open_release(path)
    result = release.analyze(formula, model="logit", drop_variance_above=1e3, progress=False)
    console.print(str(result.summary()), soft_wrap=True)

    # For comparison only: the same fit on the real data (the numbers themselves, or the buckets'
    # midpoints as the paper's release writes them), with the group columns the release has.
    rows = decode(encode(df, domain), domain, midpoints=model.get("midpoints", False))
    for c in model.get("numbers", []):
        rows[c] = df[c].to_numpy()
    real = rows.assign(income=(rows["income"] == ">50K").astype(float))
    fit = smf.logit(formula, data=real).fit(disp=0)
    ci_syn = result.conf_int(0.05)
    ci_real = fit.conf_int(0.05)
    table = Table(title="95% intervals: synthetic (NA+MI) vs real data (not available to analysts)")
    table.caption = ("syn. = synthetic (Rubin's rules over the release); ratio = syn. CI width / real CI width"
                     + ("; the paper's 5 age buckets at their midpoints instead: --buckets" if args.numbers else ""))
    for col in ["term", "real", "syn.", "syn. CI", "covers", "ratio"]:
        table.add_column(col, justify="right" if col != "term" else "left", no_wrap=True)
    for name in result.params.index:
        real_name = name.replace("income[>50K]", "").strip() or name
        if real_name not in fit.params.index:
            continue
        lo, hi = ci_syn.loc[name]
        rlo, rhi = ci_real.loc[real_name]
        truth = fit.params[real_name]
        table.add_row(_short(name), _num(truth), _num(result.params[name]), f"[{_num(lo)}, {_num(hi)}]",
                      "yes" if lo <= truth <= hi else "no", f"{(hi - lo) / (rhi - rlo):.2f}")
    console.print(table)

    # The data holder's own report: fidelity and the analysis against the private data (not for publication)
    from synthinfer.reporting import report

    holder = report(release, rows, formula=formula, keys=["age", "sex", "race"], target="income")
    holder.save(args.out / "holder_report.html")
    console.print(f"data holder's report (with the private data: do not publish): {args.out / 'holder_report.html'}")


def _num(x: float) -> str:
    """Two decimals, three for small values (the age slope is ~0.04)."""
    return f"{x:.2f}" if abs(x) >= 0.1 else f"{x:.3f}"


def _short(term: str) -> str:
    """``C(race, Treatment('White'))[T.Black]`` -> ``race[Black]``, ``Q('hours-per-week')`` ->
    ``hours-per-week`` (fits an 80-column terminal)."""
    if term.startswith("C(") and "[T." in term:
        var = term[2:].split(",")[0].split(")")[0]
        return f"{var}[{term.rsplit('[T.', 1)[1].rstrip(']')}]"
    if term.startswith("Q('") and term.endswith("')"):
        return term[3:-2]
    return term


if __name__ == "__main__":
    main()
