"""Release.supports(formula): the measured marginals against what the formula's model needs."""

from __future__ import annotations

import json
import warnings

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from synthinfer.analysis.support import check_support, required_marginals
from synthinfer.cli import app
from synthinfer.errors import ParameterError, UnsupportedAnalysisWarning
from synthinfer.privacy import PrivacyLedger
from synthinfer.release import ReleaseRecord, open_release, write_release

COLUMNS = ["income", "age", "race", "sex", "hours"]
FORMULA = "income ~ age + C(race) + C(sex)"


def _toy(rng, n=300):
    age = rng.choice([25.0, 45.0, 65.0], n)
    race = rng.choice(["Black", "Other", "White"], n, p=[0.2, 0.1, 0.7])
    sex = rng.choice(["Female", "Male"], n)
    eta = -3 + 0.05 * age + 0.4 * (sex == "Male") - 0.3 * (race == "Black")
    income = np.where(rng.random(n) < 1 / (1 + np.exp(-eta)), ">50K", "<=50K")
    return pd.DataFrame({
        "income": pd.Categorical(income, categories=["<=50K", ">50K"]),
        "age": age,
        "race": pd.Categorical(race, categories=["Black", "Other", "White"]),
        "sex": pd.Categorical(sex, categories=["Female", "Male"]),
        "hours": rng.choice([20.0, 40.0], n),
    })


def _release(tmp_path, name, marginals):
    rng = np.random.default_rng(3)
    ledger = PrivacyLedger((1.0, 1e-6))
    ledger.spend("marginals", 1.0, 1e-6, mechanism="gaussian")
    record = ReleaseRecord(mechanism="toy", settings={}, ledger=ledger, n=300, seed_fixed=True, marginals=marginals)
    return write_release(tmp_path / name, [_toy(rng) for _ in range(4)], record=record, skip_private_data_check=True)


def test_required_marginals_of_formulas():
    assert required_marginals(FORMULA, COLUMNS) == (
        ("income",), [("age", "income"), ("income", "race"), ("income", "sex")])
    # an interaction needs the outcome with both variables; its main effects are implied
    assert required_marginals("income ~ C(race) * C(sex)", COLUMNS)[1] == [("income", "race", "sex")]
    # transforms and Q() name their columns; an intercept-only model needs the outcome alone
    assert required_marginals("income ~ np.log(age) + Q('hours')", COLUMNS)[1] == [("age", "income"),
                                                                                    ("hours", "income")]
    assert required_marginals("income ~ 1", COLUMNS)[1] == [("income",)]
    with pytest.raises(ParameterError, match="left-hand side"):
        required_marginals("salary ~ age", COLUMNS)
    # a term naming no column (a typo) is refused before any fit, not read as "supported"
    with pytest.raises(ParameterError, match="the term\\(s\\) agee name none"):
        required_marginals("income ~ agee + C(race)", COLUMNS)
    # a string literal is not a column, even where a column has its name
    assert required_marginals("income ~ C(race, Treatment('sex'))", COLUMNS)[1] == [("income", "race")]


def test_check_support_answers():
    measured = [("income", "age", "race"), ("income", "sex"), ("race", "sex")]
    yes = check_support(FORMULA, COLUMNS, measured)
    assert yes.supported is True and yes.missing == ()
    no = check_support(FORMULA + " + hours", COLUMNS, measured)
    assert no.supported is False and no.missing == (("hours", "income"),) and "(hours, income)" in str(no)
    # (race, sex) without income does not carry the outcome's interaction
    inter = check_support("income ~ C(race):C(sex)", COLUMNS, measured)
    assert inter.supported is False and inter.missing == (("income", "race", "sex"),)
    # the predictors' pairs: (race, sex) measured, age with neither: a caveat, not a refusal
    assert yes.unmeasured_predictor_pairs == (("age", "sex"),) and "caveat" in yes.reason
    assert "(age, sex)" in yes.reason and "independent given income" in yes.reason
    full = check_support(FORMULA, COLUMNS, measured + [("age", "sex")])
    assert full.supported is True and full.unmeasured_predictor_pairs == () and "caveat" not in full.reason
    unknown = check_support(FORMULA, COLUMNS, None, "the privbayes release")
    assert unknown.supported is None and "unknown" in unknown.reason and "privbayes" in unknown.reason


def _ipf(target: np.ndarray, margins: list[tuple[int, ...]], iters: int = 500) -> np.ndarray:
    """The maximum-entropy table matching ``target``'s marginals on ``margins`` (iterative
    proportional fitting from the uniform table)."""
    q = np.full(target.shape, 1.0 / target.size)
    for _ in range(iters):
        for m in margins:
            other = tuple(a for a in range(target.ndim) if a not in m)
            q = q * target.sum(axis=other, keepdims=True) / q.sum(axis=other, keepdims=True)
    return q


def test_the_predictor_pair_caveat_is_real():
    # y depends on x1 only; x2 is x1's correlate. A model of (x1, y) and (x2, y) alone makes
    # x1 and x2 independent given y and hands x2 part of x1's effect: exactly, by IPF.
    px = np.array([[0.4, 0.1], [0.1, 0.4]])  # (x1, x2), strongly associated
    py1 = 1 / (1 + np.exp(-(-1.0 + 2.0 * np.arange(2))))  # P(y = 1 | x1)
    p = np.stack([px * (1 - py1)[:, None], px * py1[:, None]], axis=-1)  # axes (x1, x2, y)

    def x2_coefficient(q):  # the logit's x2 coefficient; the models here are additive on the logit scale
        lo = np.log(q[..., 1] / q[..., 0])
        return lo[0, 1] - lo[0, 0]

    assert x2_coefficient(p) == pytest.approx(0.0, abs=1e-12)
    assert abs(x2_coefficient(_ipf(p, [(0, 2), (1, 2)]))) > 0.5  # biased without (x1, x2)
    assert x2_coefficient(_ipf(p, [(0, 2), (1, 2), (0, 1)])) == pytest.approx(0.0, abs=1e-6)


def test_release_supports_and_warns_before_fitting(tmp_path):
    good = open_release(_release(tmp_path, "good", [["income", "age"], ["income", "race", "sex"]]))
    bad = open_release(_release(tmp_path, "bad", [["income", "age"], ["race", "sex"]]))
    none = open_release(_release(tmp_path, "none", None))
    assert good.supports(FORMULA).supported is True
    report = bad.supports(FORMULA)
    assert report.supported is False and report.missing == (("income", "race"), ("income", "sex"))
    assert none.supports(FORMULA).supported is None
    with warnings.catch_warnings():
        warnings.simplefilter("error", UnsupportedAnalysisWarning)
        good.analyze(FORMULA, progress=False)
        none.analyze(FORMULA, progress=False)
    with pytest.warns(UnsupportedAnalysisWarning, match=r"\(income, race\)"):
        bad.analyze(FORMULA, progress=False)


def test_cli_says_whether_the_release_supports_the_model(tmp_path):
    cases = {
        "good": ([["income", "age"], ["income", "race", "sex"]], "supports this model: yes"),
        "bad": ([["income", "age"], ["race", "sex"]], "supports this model: no"),
        "none": (None, "supports this model: unknown"),
    }
    for name, (marginals, line) in cases.items():
        path = _release(tmp_path, name, marginals)
        out = CliRunner().invoke(app, ["analyze", str(path), "-f", FORMULA, "--no-progress"], env={"COLUMNS": "200"})
        assert out.exit_code == 0, out.output
        text = " ".join(out.output.split())
        assert line in text
        assert text.index(line) < text.index("Intercept")  # said before the results
        doc = json.loads(CliRunner().invoke(app, ["analyze", str(path), "-f", FORMULA, "--json"]).output)
        assert doc["supports"]["supported"] == {"good": True, "bad": False, "none": None}[name]
