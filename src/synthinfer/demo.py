"""The end-to-end demo run by ``make demo`` on the bundled Adult data."""

from __future__ import annotations

import argparse
from pathlib import Path

from rich.console import Console

console = Console()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", type=Path, default=Path("demo-output"))
    parser.add_argument("--seed", type=int, default=None, help="fix the randomness (testing only)")
    args = parser.parse_args(argv)

    from synthinfer.data import QuerySet
    from synthinfer.datasets import load_adult
    from synthinfer.privacy import PrivacyBudget, PrivacyLedger, gaussian_mechanism

    df, domain = load_adult(paper_subset=True)
    console.rule("[bold]synthinfer demo: UCI Adult (NAPSU-MQ subset)")
    console.print(f"n = {len(df):,} rows, {domain!r}")
    queries = QuerySet(domain, [("age", "income"), ("race", "income"), ("sex", "income")])
    ledger = PrivacyLedger(PrivacyBudget(1.0, 1.0 / len(df) ** 2))
    counts = queries.count(df)
    noisy, sigma = gaussian_mechanism(
        counts, sensitivity=queries.l2_sensitivity, epsilon=1.0, delta=ledger.total.delta,
        ledger=ledger, seed=args.seed, name="marginals",
    )
    console.print(f"{queries.dimension} marginal queries released with sigma = {sigma:.2f}")
    console.print(ledger)


if __name__ == "__main__":
    main()
