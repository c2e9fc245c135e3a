"""NAPSU-MQ with Domain columns whose bin edges the fit chooses privately."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

import synthinfer
from synthinfer.cli import app
from synthinfer.data import Domain
from synthinfer.errors import MissingValueError, OutOfDomainError, ParameterError
from synthinfer.generate import NapsuMQ
from synthinfer.privacy import PrivacyBudget, PrivacyLedger

DOMAIN = {"columns": [{"name": "age", "bounds": [17, 90], "bins": "private:4", "integer": True},
                      {"name": "income", "categories": ["<=50K", ">50K"]}]}


@pytest.fixture(scope="module")
def table() -> pd.DataFrame:
    rng = np.random.default_rng(0)
    n = 6000
    age = np.clip(np.round(17 + rng.gamma(4.0, 7.0, n)), 17, 90)
    rich = rng.random(n) < 1 / (1 + np.exp(-(age - 45) / 8))
    return pd.DataFrame({"age": age, "income": np.where(rich, ">50K", "<=50K")})


@pytest.fixture(scope="module")
def fitted(table):
    return NapsuMQ([("age", "income")], epsilon=2.0, inference="laplace", seed=0).fit(table, Domain.from_dict(DOMAIN))


def test_the_fit_spends_the_edges_share_first_and_the_rest_on_the_marginals(fitted):
    charges = fitted.ledger_.charges
    assert [c.name for c in charges] == ["private bin edges: age", "napsu-mq: marginal queries"]
    assert charges[0].epsilon == pytest.approx(0.2) and charges[0].delta == 0
    assert charges[1].epsilon == pytest.approx(1.8)
    assert fitted.spent_[0] == pytest.approx(2.0)
    b = fitted.domain_["age"].binning
    assert b.private and b.integer and (b.lower, b.upper) == (17.0, 90.0) and fitted.domain_["age"].size == b.n_bins
    assert "private bin edges: age" in fitted.summary()


def test_generate_gives_whole_ages_inside_their_bins_by_default(fitted):
    syn = fitted.generate(3, seed=1)
    b = fitted.domain_["age"].binning
    for d in syn:
        assert d["age"].dtype == np.int64 and d["age"].between(17, 90).all()
    # the same draws as numbers, labels and midpoints
    one = fitted.generate(1, seed=1)[0]["age"]
    labels = fitted.generate(1, seed=1, numbers=False)[0]["age"]
    mids = fitted.generate(1, seed=1, midpoints=["age"])[0]["age"]
    assert np.array_equal(b.codes(one), labels.cat.codes)
    assert np.array_equal(b.midpoints[labels.cat.codes.to_numpy()], mids)
    # and the rich are older in the synthetic data as in the real
    assert syn[0].groupby("income", observed=True)["age"].mean().diff().iloc[-1] > 5


def test_the_release_records_the_private_edges_and_the_numbers(fitted, table, tmp_path):
    path = synthinfer.write_release(tmp_path / "r", fitted.generate(2, seed=3), record=fitted.release_record(),
                                    private_data=table)
    rel = synthinfer.open_release(path)
    assert rel.manifest["numbers_in_bins"] == ["age"] and rel.manifest["midpoints"] == []
    age = rel.manifest["domain"]["columns"][0]
    assert age["private_edges"] is True and age["bin_edges"] == list(fitted.domain_["age"].binning.edges)
    assert rel.manifest["settings"]["edges_share"] == 0.1


@pytest.mark.parametrize("change, error, message", [
    (lambda d: d.assign(income=d["income"].where(d.index > 0, "rich")), OutOfDomainError, "'income'"),
    (lambda d: d.assign(age=d["age"].where(d.index > 0, np.nan)), MissingValueError, "'age' has 1 missing"),
    (lambda d: d.assign(age=d["age"].where(d.index > 0, 95.0)), OutOfDomainError, "'age': 1 row"),
])
def test_bad_input_is_refused_before_any_spend(table, change, error, message):
    ledger = PrivacyLedger(PrivacyBudget(2.0, 1e-9))
    with pytest.raises(error, match=message):
        NapsuMQ([("age", "income")], epsilon=2.0, delta=1e-9, inference="laplace").fit(
            change(table), Domain.from_dict(DOMAIN), ledger=ledger)
    assert ledger.charges == ()


def test_bad_settings_are_refused_by_name(table):
    dom = Domain.from_dict(DOMAIN)
    for share in (0, 1, -0.1, "a"):
        with pytest.raises(ParameterError, match="edges_share"):
            NapsuMQ([("age", "income")], edges_share=share).fit(table, dom)
    with pytest.raises(ParameterError, match="reference: column 'age' has private bins"):
        NapsuMQ([("age", "income")], reference={"age": "[17, 30)"}).fit(table, dom)
    fine = Domain.from_dict({"columns": [{**DOMAIN["columns"][0], "bins": "private:60"}, DOMAIN["columns"][1]]})
    with pytest.raises(ParameterError, match="too fine for the budget"):
        NapsuMQ([("age", "income")], epsilon=0.5).fit(table, fine)


def test_cli_shows_and_uses_private_bins(table, tmp_path):
    runner = CliRunner()
    dom = tmp_path / "domain.json"
    dom.write_text(json.dumps(DOMAIN))
    shown = runner.invoke(app, ["domain", str(dom)])
    assert shown.exit_code == 0 and "private bins" in shown.output
    data = tmp_path / "data.csv"
    table.to_csv(data, index=False)
    out = tmp_path / "rel"
    res = runner.invoke(app, ["generate", str(data), "--domain", str(dom), "--marginals", "age,income",
                              "--inference", "laplace", "--epsilon", "2", "--m", "2", "--edges-share", "0.2",
                              "--seed", "0", "--out", str(out)])
    assert res.exit_code == 0, res.output
    rel = synthinfer.open_release(out)
    assert rel.manifest["numbers_in_bins"] == ["age"]
    assert rel.manifest["privacy"]["charges"][0]["epsilon"] == pytest.approx(0.4)
    bad = runner.invoke(app, ["generate", str(data), "--domain", str(dom), "--marginals", "age,income",
                              "--edges-share", "1.5", "--out", str(tmp_path / "x")])
    assert bad.exit_code == 2 and "edges_share" in bad.output


def test_privbayes_chooses_private_edges_too(table, tmp_path):
    from synthinfer.generate import PrivBayes

    gen = PrivBayes(epsilon=2.0, seed=0, edges_share=0.2).fit(table, Domain.from_dict(DOMAIN))
    charges = gen.ledger_.charges
    assert charges[0].name == "private bin edges: age" and charges[0].epsilon == pytest.approx(0.4)
    assert sum(c.epsilon for c in charges) == pytest.approx(2.0)
    assert gen.domain_["age"].binning.private
    syn = gen.generate(2, seed=1)
    assert all(d["age"].dtype == np.int64 and d["age"].between(17, 90).all() for d in syn)
    path = synthinfer.write_release(tmp_path / "pb", syn, record=gen.release_record(), private_data=table)
    assert synthinfer.open_release(path).manifest["numbers_in_bins"] == ["age"]
    with pytest.raises(ParameterError, match="edges_share"):
        PrivBayes(edges_share=1.0).fit(table, Domain.from_dict(DOMAIN))
