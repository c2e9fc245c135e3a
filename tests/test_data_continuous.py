"""Continuous Domain columns across the package: finite-domain generators refuse them by name
before touching data or budget; releases accept values within their public bounds."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from synthinfer.data import Domain
from synthinfer.errors import DomainError, ReleaseError
from synthinfer.privacy import PrivacyLedger

MIXED = Domain.from_json(
    '{"columns": [{"name": "a", "categories": [0, 1]}, {"name": "x", "bounds": [0, 10]},'
    ' {"name": "k", "bounds": [1, 5], "integer": true}]}'
)


def _data(n: int = 50, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    return pd.DataFrame({"a": rng.integers(0, 2, n), "x": rng.uniform(0, 10, n), "k": rng.integers(1, 6, n)})


@pytest.mark.parametrize("make", ["napsu", "privbayes"])
def test_finite_domain_generators_refuse_a_continuous_column_by_name(make):
    from synthinfer.generate import NapsuMQ, PrivBayes

    gen = NapsuMQ([("a", "x")], epsilon=1.0, delta=1e-6, inference="laplace") if make == "napsu" else PrivBayes(1.0)
    ledger = PrivacyLedger((1.0, 1e-6))
    with pytest.raises(DomainError, match="'x' is continuous.*'bins'"):
        gen.fit(_data(), MIXED, ledger=ledger)
    assert ledger.charges == ()


def test_release_accepts_continuous_values_within_their_bounds(tmp_path):
    from synthinfer.release import ReleaseRecord, open_release, write_release

    def write(path, datasets):
        ledger = PrivacyLedger((1.0, 1e-6))
        ledger.spend("discriminator", 1.0, 1e-6, mechanism="DP-SGD")
        record = ReleaseRecord(mechanism="dpgan", settings={"epsilon": 1.0}, domain=MIXED, ledger=ledger, n=50,
                               seed_fixed=True)
        return write_release(path, datasets, record=record, skip_private_data_check=True)

    ok = [_data(20, seed=s) for s in (1, 2)]
    rel = open_release(write(tmp_path / "ok", ok))
    assert rel.domain == MIXED
    np.testing.assert_allclose(rel.datasets[0]["x"], ok[0]["x"])
    for column, value in (("x", 10.5), ("x", "ten"), ("k", 2.5), ("k", 0)):
        bad = [ok[0], ok[1].astype({column: object}).assign(**{column: value})]
        with pytest.raises(ReleaseError, match=f"column '{column}'"):
            write(tmp_path / f"bad_{column}_{value}", bad)
