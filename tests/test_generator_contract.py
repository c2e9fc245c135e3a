"""The generator contract, checked once for every generator: fit, generate (m frames of n rows,
the seed rule), release_record (no seed value), write_release, open_release, analyze. And the
demo's data-holder path and `synthinfer generate` write the same manifest for the same settings."""

from __future__ import annotations

import inspect
import json
import re
import warnings

import numpy as np
import pandas as pd
import pytest
from sklearn.base import clone
from typer.testing import CliRunner

from synthinfer.data import Domain
from synthinfer.datasets import make_toy_logistic
from synthinfer.errors import (
    AnalysisError,
    ArgumentTypeError,
    BudgetExceededError,
    NotFittedError,
    ParameterError,
    SynthinferWarning,
)
from synthinfer.generate import (
    DPCGAN,
    DPGAN,
    CallableGenerator,
    Generator,
    LaplaceMechanismGenerator,
    NapsuMQ,
    PrivBayes,
)
from synthinfer.privacy import PrivacyLedger, laplace_mechanism
from synthinfer.release import ReleaseRecord, open_release, write_release

N = 300
#: A seed whose digits would be noticed anywhere in a release (a record must never hold it).
SEED = 918273
TOY = make_toy_logistic(N, (1.0, 0.0), seed=0)
NUMERIC = TOY.data.astype(float)  # the Laplace mechanism releases numbers within public bounds


def independent_marginals(df, domain, *, epsilon, delta, rng):
    """A small DP mechanism to wrap: Laplace-noised 1-way marginals (L1 sensitivity 2 each)
    of every column, returned as a sampler of independent columns."""
    scratch = PrivacyLedger((epsilon, 0.0))  # the adapter already charged the caller's ledger
    probs = {}
    for col in domain.columns:
        counts = df[col.name].value_counts().reindex(col.categories, fill_value=0).to_numpy(float)
        noisy, _ = laplace_mechanism(counts, sensitivity=2.0, epsilon=epsilon / len(domain), ledger=scratch)
        p = np.clip(noisy, 0, None) + 1e-9
        probs[col.name] = p / p.sum()

    def sample(n, rng):
        return pd.DataFrame({
            name: pd.Categorical.from_codes(rng.choice(len(p), size=n, p=p), categories=list(domain[name].categories))
            for name, p in probs.items()
        })

    return sample


# name -> (make the generator, data to fit, domain argument, expected mechanism)
CASES = {
    "napsu": (lambda seed: NapsuMQ([("x1", "x2", "y")], epsilon=1.0, delta=1e-6, inference="laplace",
                                   n_chains=2, num_samples=50, seed=seed), TOY.data, TOY.domain, "napsu-mq"),
    "privbayes": (lambda seed: PrivBayes(epsilon=1.0, seed=seed, degree=1), TOY.data, TOY.domain, "privbayes"),
    "dpgan": (lambda seed: DPGAN(epsilon=2.0, delta=1e-5, seed=seed, epochs=1, batch_size=50), TOY.data, TOY.domain,
              "dpgan"),
    "dpcgan": (lambda seed: DPCGAN(epsilon=2.0, delta=1e-5, seed=seed, epochs=1, batch_size=50, label="y"),
               TOY.data, TOY.domain, "dpcgan"),
    "laplace": (lambda seed: LaplaceMechanismGenerator({"x1": (0, 1), "x2": (0, 1), "y": (0, 1)}, epsilon=6.0,
                                                       binary=["x1", "x2", "y"], seed=seed), NUMERIC, None,
                "laplace-mechanism"),
    "callable": (lambda seed: CallableGenerator(independent_marginals, epsilon=1.0, mechanism_name="independent-laplace",
                                                seed=seed), TOY.data, TOY.domain, "independent-laplace"),
}


@pytest.fixture(scope="module", params=list(CASES))
def case(request):
    make, data, domain, mechanism = CASES[request.param]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SynthinferWarning)  # e.g. the Laplace fit's adequacy check on a tiny table
        gen = make(SEED)
        assert gen.fit(data, domain) is gen
    return request.param, gen, make, data, domain, mechanism


def _n_for_seed_checks(name: str) -> int:
    # The Laplace mechanism releases one dataset: a random draw is a subset of its rows.
    return N // 2 if name == "laplace" else 40


def test_is_a_generator_with_the_contract_attributes(case):
    name, gen, _, data, _, mechanism = case
    assert isinstance(gen, Generator)
    assert gen.mechanism == mechanism
    assert gen.n_ == len(data) and gen.seed_fixed_ is True
    assert isinstance(gen.ledger_, PrivacyLedger) and gen.ledger_.spent[0] > 0
    assert "seed" not in gen.release_settings_
    assert inspect.signature(type(gen).generate).parameters["m"].default is inspect.Parameter.empty


def test_summary_names_the_mechanism_and_this_fits_spend_only(case):
    name, gen, make, data, domain, _ = case
    text = gen.summary()
    title = "NAPSU-MQ" if name == "napsu" else type(gen).__name__
    assert text.splitlines()[0].startswith(f"{title} fit") and f"n = {N}" in text
    e, d = gen.ledger_.spent
    assert (f"epsilon = {e:.4g}" in text) and "ledger:" not in text
    if name != "napsu":  # NAPSU-MQ's own summary, tested with its fit
        assert all(c.name in text for c in gen.ledger_.charges if c.part_of is None)
    shared = PrivacyLedger((20.0, 1e-4))
    shared.spend("an earlier release", 1.5, 0.0, mechanism="test")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SynthinferWarning)
        again = make(SEED).fit(data, domain, ledger=shared)
    # the earlier release's spend is the ledger's, not this fit's
    assert f"epsilon = {e:.4g}" in again.summary() and "an earlier release" not in again.summary()
    if name != "napsu":
        assert f"epsilon = {e + 1.5:.4g}" in again.summary()  # the whole ledger named beside it
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SynthinferWarning)
        later = make(SEED).fit(data, domain, ledger=shared)  # a later fit's charges are not this one's
    assert f"epsilon = {e:.4g}," in again.summary() and f"epsilon = {e:.4g}," in later.summary()


def test_generate_returns_m_frames_of_n_rows(case):
    name, gen, *_ = case
    m = 1 if name == "laplace" else 3
    out = gen.generate(m)
    assert isinstance(out, list) and len(out) == m
    assert all(isinstance(d, pd.DataFrame) and len(d) == N for d in out)
    assert all(list(d.columns) == ["x1", "x2", "y"] for d in out)
    small = gen.generate(1, 25)
    assert isinstance(small, list) and len(small[0]) == 25
    with pytest.raises(ParameterError, match="m must"):
        gen.generate(0)
    with pytest.raises(ParameterError, match="n must"):
        gen.generate(1, 0)


def test_seed_rule(case):
    name, gen, make, data, domain, _ = case
    n = _n_for_seed_checks(name)
    # an integer seed (the generator's, or this call's): the same datasets on every call
    for a, b in zip(gen.generate(1, n), gen.generate(1, n), strict=True):
        pd.testing.assert_frame_equal(a, b)
    for a, b in zip(gen.generate(1, n, seed=5), gen.generate(1, n, seed=5), strict=True):
        pd.testing.assert_frame_equal(a, b)
    assert not gen.generate(1, n, seed=5)[0].equals(gen.generate(1, n, seed=6)[0])
    # a numpy Generator is advanced: new datasets on each call, the same sequence from the same state
    rng = np.random.default_rng(3)
    first, second = gen.generate(1, n, seed=rng)[0], gen.generate(1, n, seed=rng)[0]
    assert not first.equals(second)
    again = np.random.default_rng(3)
    pd.testing.assert_frame_equal(gen.generate(1, n, seed=again)[0], first)
    pd.testing.assert_frame_equal(gen.generate(1, n, seed=again)[0], second)
    # the seed never reaches privacy noise (OpenDP's CSPRNG): a refit with the same seed differs
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SynthinferWarning)
        refit = clone(gen).fit(data, domain)
    if name.startswith("dp"):  # a few noisy steps on a toy table may not move the decoded rows
        import jax

        leaves = [jax.tree_util.tree_leaves(g.discriminator_params_) for g in (refit, gen)]
        assert any(not np.array_equal(a, b) for a, b in zip(*leaves))
    else:
        # on 40 rows a small change in the noisy marginals often moves no row (a flaky check, seen
        # in CI for the 1-way callable); on 2,000 rows the chance that none moves is about e^-100
        big = n if name == "laplace" else 2000
        assert not refit.generate(1, big)[0].equals(gen.generate(1, big)[0])


def test_no_seed_draws_fresh_entropy(case):
    name, gen, *_ = case
    n = _n_for_seed_checks(name)
    gen.set_params(seed=None)  # generate() reads the setting when called, as scikit-learn's random_state
    try:
        assert not gen.generate(1, n)[0].equals(gen.generate(1, n)[0])
    finally:
        gen.set_params(seed=SEED)


def test_release_record_write_open_and_analyze(case, tmp_path):
    name, gen, _, data, domain, mechanism = case
    record = gen.release_record()
    assert isinstance(record, ReleaseRecord)
    assert record.mechanism == mechanism and record.n == len(data) and record.seed_fixed is True
    assert record.ledger is gen.ledger_
    text = json.dumps({"settings": record.settings, "diagnostics": record.diagnostics, "marginals": record.marginals})
    assert str(SEED) not in text and '"seed"' not in text
    if name == "laplace":
        assert record.domain is None and record.settings["bounds"]["y"] == [0.0, 1.0]
    else:
        assert record.domain == domain
    m = 1 if name == "laplace" else 3
    datasets = gen.generate(m)
    path = write_release(tmp_path / "release", datasets, record=record, private_data=data)
    assert str(SEED) not in (path / "manifest.json").read_text()
    release = open_release(path)
    manifest = release.manifest
    assert manifest["mechanism"] == mechanism and release.m == m and release.n == len(data)
    assert manifest["seed_fixed"] is True and manifest["settings"] == record.settings
    assert release.ledger.to_dict() == gen.ledger_.to_dict()
    assert (release.posterior is not None) == (name == "napsu")
    for got, made in zip(release.datasets, datasets, strict=True):
        pd.testing.assert_frame_equal(got, made.reset_index(drop=True), check_categorical=False)
    if m == 1:  # one released dataset: Rubin's rules do not apply, and analyze says so
        with pytest.raises(AnalysisError, match="at least 2"):
            release.analyze("y ~ x1 + x2", model="logit", progress=False)
        return
    result = release.analyze("y ~ x1 + x2", model="logit", progress=False)
    assert result.m == m and len(result.params) == 3 and np.isfinite(result.params).all()


def test_unfitted_generators_refuse_generate_and_release_record():
    for make, *_ in CASES.values():
        gen = make(None)
        with pytest.raises(NotFittedError):
            gen.generate(1)
        with pytest.raises(NotFittedError):
            gen.release_record()


@pytest.mark.parametrize("name", list(CASES))
def test_a_refit_refused_by_the_ledger_leaves_the_generator_unfitted(name):
    # otherwise release_record() would pair the first fit's data with the refused fit's ledger
    make, data, domain, _ = CASES[name]
    gen = make(SEED)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SynthinferWarning)
        gen.fit(data, domain)
        tiny = PrivacyLedger((1e-3, 1e-12))
        with pytest.raises(BudgetExceededError):
            gen.fit(data, domain, ledger=tiny)
    assert tiny.charges == ()
    with pytest.raises(NotFittedError):
        gen.release_record()
    with pytest.raises(NotFittedError):
        gen.generate(1)


@pytest.mark.parametrize("name", list(CASES))
@pytest.mark.parametrize("total, message", [((1.0, 0.01), "delta=0.01 is not below 1/n=0.00333333 (n=300"),
                                            ((1e3, 1e-6), "epsilon=1000 is above 100")])
def test_an_unsafe_budget_is_refused_before_any_spend(name, total, message):
    make, data, domain, _ = CASES[name]
    ledger = PrivacyLedger(total)
    with pytest.raises(ParameterError, match=re.escape(message)):
        make(SEED).fit(data, domain, ledger=ledger)
    assert ledger.charges == ()


@pytest.mark.parametrize("name", list(CASES))
def test_a_generators_own_unsafe_budget_is_refused_and_can_be_overridden_for_a_study(name):
    make, data, domain, _ = CASES[name]
    gen = make(SEED).set_params(epsilon=150.0)
    with pytest.raises(ParameterError, match="epsilon=150 is above 100"):
        gen.fit(data, domain)
    assert not hasattr(gen, "ledger_")
    if name in ("napsu", "dpgan", "dpcgan", "callable"):
        with pytest.raises(ParameterError, match="delta=0.5 is not below 1/n"):
            make(SEED).set_params(delta=0.5).fit(data, domain)
    if name == "privbayes":  # a quick fit: the override lets it run and the record names it
        study = PrivacyLedger((150.0, 0.0), allow_large_epsilon=True)
        assert gen.fit(data, domain, ledger=study).release_record().ledger.unsafe_overrides == ["allow_large_epsilon"]


def test_default_delta_is_one_over_n_squared():
    gan = DPGAN(epsilon=2.0, seed=SEED, epochs=1, batch_size=50).fit(TOY.data, TOY.domain)
    assert gan.ledger_.total.delta == pytest.approx(1 / N**2) and gan.release_settings_["delta"] == gan.ledger_.total.delta
    assert gan.get_params()["delta"] is None


@pytest.mark.parametrize("seed", [True, -1])
def test_a_bool_or_negative_seed_is_refused_before_any_spend(seed):
    # True would silently be seed 1, and generate() would replay the fit's noise stream
    ledger = PrivacyLedger((1.0, 1e-6))
    with pytest.raises((ArgumentTypeError, ParameterError)):
        PrivBayes(epsilon=1.0, seed=seed).fit(TOY.data, TOY.domain, ledger=ledger)
    assert ledger.charges == ()


@pytest.mark.parametrize("case", ["napsu"], indirect=True)
def test_napsu_record_holds_the_fit_facts_and_a_summary_of_diagnostics(case):
    _, gen, *_ = case
    record = gen.release_record()
    assert record.settings["sigma_dp"] == pytest.approx(gen.sigma_dp_)
    assert record.settings["selected_marginals"] == []
    assert set(record.settings["reference_categories"]) == {"x1", "x2", "y"}
    assert record.marginals == [["x1", "x2", "y"]] and record.posterior is gen.posterior_
    laplace = record.diagnostics["laplace"]
    assert laplace["converged"] == gen.diagnostics_["laplace"]["converged"]
    # per-parameter arrays stay in the posterior; wall-clock times are not released
    assert "attempts" not in laplace and "seconds" not in laplace and "timings" not in record.diagnostics


def test_write_release_takes_a_record_only(tmp_path):
    frame = TOY.data.sample(20, random_state=0)
    with pytest.raises(TypeError):
        write_release(tmp_path / "r", [frame], mechanism="x", settings={})  # the old keyword form is gone
    from synthinfer.errors import ReleaseError

    with pytest.raises(ReleaseError, match="ReleaseRecord"):
        write_release(tmp_path / "r", [frame], record={"mechanism": "x"}, skip_private_data_check=True)
    assert not (tmp_path / "r").exists()


def test_manifest_names_the_columns_released_as_midpoints(tmp_path):
    domain = Domain.from_dict({"columns": [{"name": "age", "bounds": [0, 100], "bins": 4},
                                           {"name": "y", "categories": [0, 1]}]})
    rng = np.random.default_rng(0)
    df = pd.DataFrame({"age": rng.uniform(0, 100, 200), "y": rng.integers(0, 2, 200)})
    gen = PrivBayes(epsilon=1.0, seed=0, degree=1).fit(df, domain)
    labels = gen.generate(1)
    as_numbers = [d.assign(age=domain.midpoints("age")[d["age"].cat.codes.to_numpy()]) for d in labels]
    for datasets, expected in ((labels, []), (as_numbers, ["age"])):
        path = write_release(tmp_path / f"r{len(expected)}", datasets, record=gen.release_record(), private_data=df)
        assert open_release(path).manifest["midpoints"] == expected


# -- demo and CLI: one path, one manifest ---------------------------------------------------------
def test_demo_and_cli_write_identical_manifests(tmp_path, monkeypatch):
    from synthinfer.cli import app
    from synthinfer.demo import hold_release
    from synthinfer.privacy import samplers

    TOY.data.to_csv(tmp_path / "toy.csv", index=False)
    TOY.domain.to_json(tmp_path / "domain.json")
    settings = dict(marginals=[("x1", "x2", "y")], epsilon=1.0, delta=1e-6, inference="laplace", m=3, seed=11)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SynthinferWarning)
        # the same privacy noise on both paths (test-only hook: OpenDP's noise is never seeded)
        monkeypatch.setattr(samplers, "_TEST_ONLY_noise_rng", np.random.default_rng(0))
        _, demo_path = hold_release(TOY.data, TOY.domain, tmp_path / "demo", **settings)
        monkeypatch.setattr(samplers, "_TEST_ONLY_noise_rng", np.random.default_rng(0))
        res = CliRunner().invoke(app, [
            "generate", str(tmp_path / "toy.csv"), "--domain", str(tmp_path / "domain.json"), "--marginals", "x1,x2,y",
            "--epsilon", "1", "--delta", "1e-6", "--inference", "laplace", "--m", "3", "--seed", "11",
            "--out", str(tmp_path / "cli"),
        ])
    assert res.exit_code == 0, res.output
    demo = _without_timestamps(json.loads((demo_path / "manifest.json").read_text()))
    cli = _without_timestamps(json.loads((tmp_path / "cli" / "manifest.json").read_text()))
    assert demo == cli
    # the comparison could fail: the manifests hold the fit's facts and the generated data's checksums
    assert demo["settings"]["sigma_dp"] > 0 and demo["diagnostics"]["laplace"] and len(demo["files"]) == 3
    assert demo["report"] == cli["report"] == "report.html"
    draws = [open_release(p).posterior.posterior["theta"].values for p in (demo_path, tmp_path / "cli")]
    np.testing.assert_array_equal(*draws)


def _without_timestamps(manifest: dict) -> dict:
    """The manifest less its clock readings: when it was written, when each charge was made, and
    the posterior file's checksum (ArviZ writes its creation time into the file; the draws are
    compared instead) and the report's (it says when it was made)."""
    manifest.pop("created")
    for charge in manifest["privacy"]["charges"]:
        charge.pop("time")
    manifest["files"].pop("posterior.nc")
    manifest["files"].pop("report.html")
    return manifest
