"""PrivBayes: budget accounting, sensitivities on neighbouring datasets, fit/generate, errors."""

from __future__ import annotations

import itertools

import numpy as np
import pandas as pd
import pytest

from synthinfer.data import Domain, encode
from synthinfer.errors import BudgetExceededError, NotFittedError, OutOfDomainError, PrivacyError
from synthinfer.generate.privbayes import (
    PrivBayes,
    mutual_information,
    mutual_information_sensitivity,
    table_counts,
)
from synthinfer.privacy import PrivacyLedger

DOMAIN = Domain({"a": ["a0", "a1", "a2"], "b": ["b0", "b1"], "c": ["c0", "c1", "c2", "c3"], "e": ["e0", "e1"]})


def _data(n: int = 400, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    a = rng.integers(0, 3, n)
    b = (a + rng.integers(0, 2, n)) % 2  # depends on a
    c = np.where(rng.random(n) < 0.8, a, rng.integers(0, 4, n))  # mostly a copy of a
    e = rng.integers(0, 2, n)
    codes = np.stack([a, b, c, e], axis=1)
    return pd.DataFrame({name: np.asarray(col.categories, dtype=object)[codes[:, j]] for j, (name, col) in enumerate(zip(DOMAIN.names, DOMAIN.columns))})


# -- accounting ----------------------------------------------------------------------------
@pytest.mark.parametrize("epsilon", [1.0, 6.0])
def test_total_spend_equals_target_and_is_split_by_beta(epsilon):
    pb = PrivBayes(epsilon=epsilon, seed=0, degree=2, beta=0.3).fit(_data(), DOMAIN)
    spent = pb.ledger_.spent
    assert spent[0] == pytest.approx(epsilon, rel=1e-12) and spent[1] == 0.0
    structure, conditionals = pb.ledger_.charges
    assert structure.epsilon == pytest.approx(0.3 * epsilon)
    assert structure.details["selections"] == 3
    assert conditionals.epsilon == pytest.approx(0.7 * epsilon)
    # d - k' = 4 - 2 tables, L1 sensitivity 2 each under substitution
    assert conditionals.details["sensitivity_l1"] == 4.0
    assert pb.laplace_scale_ == pytest.approx(4.0 / (0.7 * epsilon))


def test_degree_zero_spends_everything_on_one_way_tables():
    pb = PrivBayes(epsilon=1.0, seed=0, degree=0).fit(_data(), DOMAIN)
    (charge,) = pb.ledger_.charges
    assert charge.epsilon == pytest.approx(1.0) and charge.details["sensitivity_l1"] == 8.0
    assert all(parents == () for _, parents in pb.network_)


def test_auto_degree_follows_theta_usefulness():
    # n eps2 / (2 (d - k) m_k) >= theta with m_1 = 4*3, m_2 = 4*3*2: n=400, eps2=0.7*10=7
    pb = PrivBayes(epsilon=10.0, seed=0).fit(_data(), DOMAIN)
    # k=1: 400*7/(2*3*12) = 38.9; k=2: 400*7/(2*2*24) = 29.2; k=3: 400*7/(2*1*48) = 29.2
    assert pb.degree_ == 3
    assert PrivBayes(epsilon=0.1, seed=0).fit(_data(), DOMAIN).degree_ == 0  # 400*.07/(2*3*12) < 4


def test_budget_exceeded_spends_nothing():
    ledger = PrivacyLedger((0.5, 0.0))
    with pytest.raises(BudgetExceededError):
        PrivBayes(epsilon=1.0).fit(_data(), DOMAIN, ledger=ledger)
    assert ledger.charges == ()


# -- sensitivities on neighbouring datasets --------------------------------------------------
@pytest.mark.parametrize("sizes, binary", [((2, 2), True), ((3, 4), False), ((2, 3), True), ((4, 3), False)])
def test_mutual_information_sensitivity_bound_holds(sizes, binary):
    rng = np.random.default_rng(sum(sizes))
    n = 25
    worst = 0.0
    for _ in range(30):
        codes = np.stack([rng.integers(0, s, n) for s in sizes], axis=1)
        base = mutual_information(codes, sizes, 0, (1,))
        for i in range(0, n, 5):  # replace row i by every possible row
            for row in itertools.product(*(range(s) for s in sizes)):
                other = codes.copy()
                other[i] = row
                worst = max(worst, abs(mutual_information(other, sizes, 0, (1,)) - base))
    assert worst <= mutual_information_sensitivity(n, binary) + 1e-12
    assert worst > 0.2 * mutual_information_sensitivity(n, binary)  # the bound is not vacuous here


def test_general_mi_sensitivity_dominates_binary_one():
    for n in (2, 10, 1000, 10**6):
        assert mutual_information_sensitivity(n, False) >= mutual_information_sensitivity(n, True)


def test_noisy_tables_have_l1_sensitivity_two_per_table():
    codes = encode(_data(60), DOMAIN)
    shape = DOMAIN.shape
    network = [(0, ()), (2, (0,)), (1, (0, 2)), (3, (1, 2))]
    base = np.concatenate(table_counts(codes, shape, network, 2))
    n_tables = len(table_counts(codes, shape, network, 2))
    assert n_tables == 2
    worst = 0.0
    for i in (0, 17, 59):
        for row in itertools.product(*(range(s) for s in shape)):
            other = codes.copy()
            other[i] = row
            worst = max(worst, np.abs(np.concatenate(table_counts(other, shape, network, 2)) - base).sum())
    assert worst == 2.0 * n_tables


def test_exponential_mechanism_finds_strong_dependence_with_large_epsilon():
    study = PrivacyLedger((200.0, 0.0), allow_large_epsilon=True)  # epsilon > 100: a study, not a release
    pb = PrivBayes(epsilon=200.0, seed=1, degree=1).fit(_data(2000), DOMAIN, ledger=study)
    parents = dict(pb.network_)
    # c is (mostly) a copy of a: whichever comes second has the other as its parent
    assert parents["c"] == ("a",) or parents["a"] == ("c",)


# -- fit / generate --------------------------------------------------------------------------
def test_generate_shapes_categories_and_reproducibility():
    df = _data()
    pb = PrivBayes(epsilon=2.0, seed=0, degree=2).fit(df, DOMAIN)
    out = pb.generate(m=2, n=50, seed=3)
    assert len(out) == 2
    for s in out:
        assert list(s.columns) == list(DOMAIN.names) and len(s) == 50
        for name in DOMAIN.names:
            assert list(s[name].cat.categories) == list(DOMAIN[name].categories)
    pd.testing.assert_frame_equal(pb.generate(1, 30, seed=9)[0], pb.generate(1, 30, seed=9)[0])
    assert len(pb.generate(1)[0]) == len(df)
    for cond in pb.conditionals_:
        assert np.allclose(cond.sum(axis=-1), 1.0) and (cond >= 0).all()


def test_binned_columns_come_back_as_labels_midpoints_or_numbers_inside_their_bins():
    from synthinfer.data import binned_column
    from synthinfer.errors import DomainError, ParameterError

    rng = np.random.default_rng(0)
    domain = Domain([DOMAIN["a"], binned_column("x", bounds=(0.0, 10.0), bins=4)])
    df = pd.DataFrame({"a": rng.choice(["a0", "a1", "a2"], 300), "x": rng.uniform(0, 10, 300)})
    pb = PrivBayes(epsilon=2.0, seed=0, degree=1).fit(df, domain)
    labels = pb.generate(1, 200, seed=1)[0]
    mids = pb.generate(1, 200, seed=1, midpoints=["x"])[0]
    inside = pb.generate(1, 200, seed=1, numbers=True)[0]
    edges = np.asarray(domain["x"].binning.edges)
    assert list(labels["x"].cat.categories) == list(domain["x"].categories)
    assert set(mids["x"]) <= set(domain["x"].binning.midpoints)
    # the same codes (seeded): each number lies inside the bin its label names
    bins = np.searchsorted(edges, inside["x"].to_numpy(), side="right") - 1
    np.testing.assert_array_equal(np.minimum(bins, 3), labels["x"].cat.codes.to_numpy())
    with pytest.raises(DomainError, match="numbers"):
        pb.generate(1, 10, numbers=["a"])  # no bins
    with pytest.raises(ParameterError, match="midpoints and as numbers"):
        pb.generate(1, 10, midpoints=True, numbers=True)


def test_large_epsilon_reproduces_the_joint_distribution():
    df = _data(4000, seed=2)
    pb = PrivBayes(epsilon=1e4, seed=0, degree=3).fit(df, DOMAIN, ledger=PrivacyLedger((1e4, 0.0), allow_large_epsilon=True))
    s = pb.generate(1, 20000, seed=1)[0]
    real = df.value_counts(normalize=True)
    syn = s.astype(str).value_counts(normalize=True)
    tv = 0.5 * real.sub(syn, fill_value=0).abs().sum()
    # sampling error of 48 cells from 20,000 draws is ~ sqrt(48 / 20000) / 2 < 0.03
    assert tv < 0.05


# -- errors ------------------------------------------------------------------------------------
def test_errors_for_bad_input():
    df = _data(50)
    with pytest.raises(NotFittedError):
        PrivBayes().generate(1)
    with pytest.raises(PrivacyError, match="delta"):
        PrivBayes(delta=1e-6).fit(df, DOMAIN)
    with pytest.raises(PrivacyError, match="beta"):
        PrivBayes(beta=1.0).fit(df, DOMAIN)
    with pytest.raises(ValueError, match="degree"):
        PrivBayes(degree=-1).fit(df, DOMAIN)
    with pytest.raises(OutOfDomainError, match="'b'"):
        PrivBayes().fit(df.assign(b="b9"), DOMAIN)
    with pytest.raises(TypeError, match="Domain"):
        PrivBayes().fit(df, {"a": ["a0"]})
    with pytest.raises(ValueError, match="m must"):
        PrivBayes(seed=0).fit(df, DOMAIN).generate(m=0)


def test_binary_sensitivity_only_when_every_candidate_is_binary(monkeypatch):
    """Lemma 4.1 of Zhang et al.: the smaller binary bound holds for a pair with a binary
    child or a binary parent set; one S bounds all candidates of a step, so a step with any
    non-binary candidate must use the general bound."""
    import synthinfer.generate.privbayes as pbm

    domain = Domain({"a": ["a0", "a1"], "b": ["b0", "b1", "b2"], "c": ["c0", "c1", "c2"]})
    rng = np.random.default_rng(0)
    df = pd.DataFrame({c: rng.choice(domain[c].categories, 300) for c in domain.names})
    shape = dict(zip(domain.names, domain.shape))
    used: list[bool] = []
    real = pbm.mutual_information_sensitivity
    monkeypatch.setattr(pbm, "mutual_information_sensitivity", lambda n, binary: used.append(binary) or real(n, binary))
    for seed in range(4):
        used.clear()
        pb = PrivBayes(epsilon=1.0, seed=seed, degree=1).fit(df, domain)
        order = [child for child, _ in pb.network_]
        expected = []
        for step in range(1, len(order)):  # degree 1: the candidates are (x, (p,)) for x left, p chosen
            chosen, left = order[:step], order[step:]
            expected.append(all(shape[x] == 2 or shape[p] == 2 for x in left for p in chosen))
        assert used[-len(expected):] == expected and False in expected  # (the ledger's record asks for both first)
