"""DP-GAN / DP-CGAN: privacy accounting, clipping sensitivity, schema handling, fit/generate."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from synthinfer.data import Domain
from synthinfer.errors import (
    BudgetExceededError,
    DomainError,
    NotFittedError,
    OutOfDomainError,
    PrivacyError,
    UnknownColumnError,
)
from synthinfer.generate.dpgan import DPCGAN, DPGAN
from synthinfer.generate.tabular import TabularSchema
from synthinfer.privacy import PrivacyLedger

SCHEMA = {"x": (0.0, 10.0), "colour": ["red", "green", "blue"], "y": ["no", "yes"]}


def _data(n: int = 240, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    x = rng.uniform(0, 10, n)
    colour = rng.choice(["red", "green", "blue"], n, p=[0.6, 0.3, 0.1])
    y = np.where(rng.random(n) < 1 / (1 + np.exp(-(x - 5))), "yes", "no")
    return pd.DataFrame({"x": x, "colour": colour, "y": y})


# -- fit / generate ------------------------------------------------------------------------
@pytest.fixture(scope="module")
def fitted():
    df = _data()
    return df, DPGAN(epsilon=2.0, delta=1e-4, seed=0, epochs=2, batch_size=32).fit(df, SCHEMA)


def test_dpgan_fit_spends_exactly_its_budget(fitted):
    _, g = fitted
    assert g.ledger_.spent == pytest.approx((2.0, 1e-4))
    assert g.epsilon_dpsgd_ == pytest.approx(2.0, rel=0.01)
    assert g.steps_ == 2 * round(240 / 32)
    assert g.n_ == g.n_synthetic_ == 240
    assert g.release_settings_["seed_fixed"] is True and "seed" not in g.release_settings_


def test_dpgan_generate_respects_schema(fitted):
    df, g = fitted
    out = g.generate(m=3, n=50, seed=1)
    assert len(out) == 3
    for s in out:
        assert list(s.columns) == list(SCHEMA) and len(s) == 50
        assert s["x"].between(0, 10).all()
        assert set(s["colour"].astype(str)) <= {"red", "green", "blue"}
        assert list(s["colour"].cat.categories) == ["red", "green", "blue"]
    a, b = g.generate(1, 20, seed=5)[0], g.generate(1, 20, seed=5)[0]
    pd.testing.assert_frame_equal(a, b)
    assert len(g.generate(1)[0]) == len(df)


def test_discriminator_log_odds(fitted):
    df, g = fitted
    lo = g.discriminator_log_odds(df)
    assert lo.shape == (len(df),) and lo.dtype == np.float64 and np.isfinite(lo).all()
    lo_syn = g.discriminator_log_odds(g.generate(1, 100, seed=2)[0])
    assert lo_syn.shape == (100,) and np.isfinite(lo_syn).all()


def test_dpcgan_conditions_on_label_and_accounts_label_histogram():
    df = _data()
    ledger = PrivacyLedger((3.0, 1e-4))
    g = DPCGAN(epsilon=2.0, delta=1e-4, seed=0, label="y", epochs=1, batch_size=32).fit(df, SCHEMA, ledger=ledger)
    assert g.ledger_ is ledger
    names = [c.name for c in ledger.charges]
    assert names == ["DP-CGAN label histogram", "DP-CGAN discriminator"]
    assert ledger.charges[0].epsilon == pytest.approx(0.1)
    assert ledger.charges[0].details["sensitivity_l1"] == 2.0
    assert ledger.spent == pytest.approx((2.0, 1e-4))
    assert g.label_probabilities_.sum() == pytest.approx(1.0)
    s = g.generate(1, 30, seed=0)[0]
    assert list(s.columns) == list(SCHEMA)
    assert set(s["y"].astype(str)) <= {"no", "yes"}
    assert np.isfinite(g.discriminator_log_odds(df)).all()


def test_schema_from_domain_one_hot_encodes_bins_and_round_trips():
    from synthinfer.data import binned_column

    dom = Domain([binned_column("x", bounds=(0, 10), bins=4)] + list(Domain({"y": ["no", "yes"]}).columns))
    schema = TabularSchema.from_spec(dom)
    df = pd.DataFrame({"x": [0.0, 2.6, 10.0], "y": ["yes", "no", "yes"]})
    X = schema.transform(df)
    assert X.shape == (3, 6) and (X.sum(axis=1) == 2).all()
    assert np.argmax(X[:, :4], axis=1).tolist() == [0, 1, 3]
    mixed = TabularSchema.from_spec(SCHEMA)
    Z = mixed.transform(_data(5))
    assert Z.shape == (5, 6) and ((Z[:, 0] >= 0) & (Z[:, 0] <= 1)).all()
    back = mixed.inverse_transform(Z[:, :1], np.stack([Z[:, 1:4].argmax(1), Z[:, 4:].argmax(1)], axis=1))
    np.testing.assert_allclose(back["x"], _data(5)["x"])
    assert back["colour"].astype(str).tolist() == _data(5)["colour"].tolist()


def test_schema_is_a_view_of_a_domain_with_continuous_columns():
    dom = Domain.from_json('{"columns": [{"name": "x", "bounds": [0, 10]}, '
                           '{"name": "colour", "categories": ["red", "green", "blue"]}, '
                           '{"name": "y", "categories": ["no", "yes"]}]}')
    short, view = TabularSchema.from_spec(SCHEMA), TabularSchema.from_domain(dom)
    assert short == view and view.domain is dom and view.to_dict() == dom.to_dict()
    assert view.blocks == ((0, 1), (1, 4), (4, 6))
    np.testing.assert_array_equal(view.transform(_data(7)), short.transform(_data(7)))
    assert view.without("colour").names == ("x", "y")
    # an integer column's generated values are rounded into its bounds
    whole = TabularSchema.from_domain(Domain.from_dict({"columns": [{"name": "k", "bounds": [1, 5], "integer": True}]}))
    back = whole.inverse_transform(np.array([[0.0], [0.4], [1.2]]), np.zeros((3, 0), dtype=int))
    assert back["k"].tolist() == [1.0, 3.0, 5.0]


def test_dpgan_fits_the_same_on_a_domain_and_its_short_spelling():
    df = _data(60)
    dom = TabularSchema.from_spec(SCHEMA).domain
    a = DPGAN(epsilon=1.0, delta=1e-4, seed=3, epochs=1, batch_size=32).fit(df, SCHEMA)
    b = DPGAN(epsilon=1.0, delta=1e-4, seed=3, epochs=1, batch_size=32).fit(df, Domain.from_json(dom.to_json()))
    assert a.schema_ == b.schema_
    # the training noise is OpenDP-keyed (never from the seed): with a's trained generator, b's
    # generation path (the schema's decoding) gives the same rows
    b.generator_params_ = a.generator_params_
    pd.testing.assert_frame_equal(a.generate(1, 30, seed=0)[0], b.generate(1, 30, seed=0)[0])


# -- errors --------------------------------------------------------------------------------
def test_errors_for_bad_input():
    df = _data(60)
    with pytest.raises(NotFittedError):
        DPGAN().generate(1)
    with pytest.raises(PrivacyError, match="delta"):
        DPGAN(epsilon=1.0, delta=0.0).fit(df, SCHEMA)
    with pytest.raises(PrivacyError):
        DPGAN(epsilon=-1.0).fit(df, SCHEMA)
    with pytest.raises(ValueError, match="batch_size"):
        DPGAN(batch_size=0).fit(df, SCHEMA)
    bad = df.copy()
    bad.loc[0, "x"] = 11.0
    with pytest.raises(OutOfDomainError, match="'x'.*public bounds"):
        DPGAN(epochs=1).fit(bad, SCHEMA)
    with pytest.raises(OutOfDomainError, match="colour"):
        DPGAN(epochs=1).fit(df.assign(colour="pink"), SCHEMA)
    with pytest.raises(UnknownColumnError):
        DPGAN(epochs=1).fit(df.drop(columns="x"), SCHEMA)
    with pytest.raises(DomainError, match="lower < upper"):
        TabularSchema.from_spec({"x": (3.0, 1.0)})
    with pytest.raises(DomainError, match="tuple"):
        TabularSchema.from_spec({"x": (1.0, 2.0, 3.0)})
    with pytest.raises(DomainError, match="categorical"):
        DPCGAN(label="x").fit(df, SCHEMA)
    with pytest.raises(PrivacyError, match="label_epsilon_fraction"):
        DPCGAN(label="y", label_epsilon_fraction=1.5).fit(df, SCHEMA)


def test_budget_exceeded_spends_nothing():
    ledger = PrivacyLedger((0.5, 1e-5))
    with pytest.raises(BudgetExceededError):
        DPCGAN(epsilon=1.0, delta=1e-5, label="y", epochs=1).fit(_data(60), SCHEMA, ledger=ledger)
    assert ledger.charges == ()


def test_release_record_holds_the_mixed_schema_as_its_domain(fitted):
    _, g = fitted
    rec = g.release_record()
    assert rec.mechanism == "dpgan" and rec.domain == g.schema_.domain and rec.n == 240
    assert rec.domain.to_dict()["columns"][0] == {"name": "x", "bounds": [0.0, 10.0]}
    assert "schema" not in rec.settings
    assert rec.ledger is g.ledger_ and rec.seed_fixed is True


def test_private_bins_columns_are_continuous_to_the_gan():
    """A ``"bins": "private:K"`` column needs no edges here: the GAN scales it by its public
    bounds and generates numbers, so nothing is spent on quantiles (one DP-SGD charge)."""
    df = _data()
    dom = Domain.from_dict({"columns": [{"name": "x", "bounds": [0, 10], "bins": "private:4"},
                                        {"name": "colour", "categories": ["red", "green", "blue"]},
                                        {"name": "y", "categories": ["no", "yes"]}]})
    g = DPGAN(epsilon=2.0, delta=1e-4, seed=0, epochs=1, batch_size=32).fit(df, dom)
    assert len(g.ledger_.charges) == 1 and g.ledger_.spent == pytest.approx((2.0, 1e-4))
    out = g.generate(1, 30, seed=0)[0]
    assert out["x"].dtype.kind == "f" and out["x"].between(0, 10).all()
