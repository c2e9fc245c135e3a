"""Privacy audits of every mechanism, driven through the public functions (see privacy_audit.py).

For each mechanism: record and replay on neighbouring datasets (one row substituted) checks that
the control flow ignores the private difference and that the measured sensitivity is at most the
declared one; a threshold test bounds epsilon from below on the worst-case pair and must stay
under the declared epsilon, while the same test flags the mechanism with its sensitivity
understated by 2x.
"""

import numpy as np
import pandas as pd
import pytest
from privacy_audit import (
    ControlFlowError,
    audit_additive,
    audit_exponential,
    measured_sensitivity,
    record_and_replay,
    worst_exponential_scores,
)

from synthinfer.data import Domain, QuerySet
from synthinfer.datasets import make_triangle_square
from synthinfer.generate import LaplaceMechanismGenerator, PrivBayes
from synthinfer.napsu import NapsuMQ
from synthinfer.privacy import discrete_gaussian_epsilon
from synthinfer.weights import OutputPerturbedWeights

DOMAIN = Domain({"a": ["0", "1", "2"], "b": ["x", "y"], "c": ["p", "q"], "d": ["u", "v", "w"]})


def _table(n: int = 300, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    return pd.DataFrame({c: rng.choice(col.categories, size=n) for c, col in zip(DOMAIN.names, DOMAIN.columns)})


def _neighbours(df: pd.DataFrame, seed: int = 1, k: int = 3):
    """Substitute one row: by a row that differs in every column (the worst case), and at random."""
    rng = np.random.default_rng(seed)
    for j in range(k):
        i = int(rng.integers(len(df)))
        other = df.copy()
        for c, col in zip(DOMAIN.names, DOMAIN.columns):
            cats = [v for v in col.categories if v != df.at[i, c]]
            other.at[i, c] = cats[0] if j == 0 else rng.choice(col.categories)
        yield other


# -- the audit itself: the threshold test --------------------------------------------------------

@pytest.mark.parametrize("kind", ["gaussian", "discrete_gaussian", "laplace", "discrete_laplace"])
def test_threshold_audit_accepts_the_mechanism_and_flags_half_the_sensitivity(kind):
    f_d = np.array([10.0, 4.0, 7.0, 0.0])
    f_n = np.array([9.0, 5.0, 7.0, 0.0])  # one row moved from cell 0 to cell 1: L1 = 2, L2 = sqrt(2)
    sens = np.sqrt(2) if "gaussian" in kind else 2.0
    eps, delta = 1.0, (1e-6 if "gaussian" in kind else 0.0)
    # the discrete Gaussian's loss takes few values on this pair: more draws for the same power
    draws = 1_000_000 if kind == "discrete_gaussian" else 200_000
    assert audit_additive(kind, f_d, f_n, sensitivity=sens, epsilon=eps, delta=delta, draws=draws) <= eps
    lb = audit_additive(kind, f_d, f_n, sensitivity=sens / 2, epsilon=eps, delta=delta, draws=draws)
    assert lb > eps  # the broken mechanism is rejected


@pytest.mark.parametrize("kind", ["discrete_gaussian", "discrete_laplace"])
def test_threshold_audit_of_opendps_exact_samplers(kind):
    # the samplers a release uses, at fewer draws (OpenDP's exact samplers take ~10 us a draw)
    f_d, f_n = np.array([10.0, 4.0]), np.array([9.0, 5.0])
    sens, delta = (np.sqrt(2), 1e-6) if kind == "discrete_gaussian" else (2.0, 0.0)
    assert audit_additive(kind, f_d, f_n, sensitivity=sens, epsilon=1.0, delta=delta, draws=20_000,
                          exact=True) <= 1.0


def test_threshold_audit_of_the_exponential_mechanism():
    s_d, s_n = worst_exponential_scores(10, 2.0)
    assert audit_exponential(s_d, s_n, sensitivity=2.0, epsilon=1.0, draws=10_000) <= 1.0
    assert audit_exponential(s_d, s_n, sensitivity=1.0, epsilon=1.0, draws=10_000) > 1.0


# -- NAPSU-MQ with MST selection: Gaussian 1-ways, exponential mechanisms, Gaussian marginals -------

def _napsu(df):
    NapsuMQ([("a", "b")], epsilon=1.0, select_extra="mst", inference="laplace", seed=3).fit(df, DOMAIN)


def test_napsu_mq_and_mst_record_and_replay(monkeypatch):
    df = _table()
    for other in _neighbours(df):
        pairs = record_and_replay(_napsu, df, other, monkeypatch, stop_after="estimator.discrete_gaussian_mechanism")
        kinds = [a.where.rsplit(".", 1)[1] for a, _ in pairs]
        assert kinds == ["discrete_gaussian_mechanism"] + ["exponential_mechanism"] * 2 + ["discrete_gaussian_mechanism"]
        for a, b in pairs:
            norm = "linf" if "exponential" in a.where else "l2"
            assert measured_sensitivity(a, b, norm) <= a.params["sensitivity"] + 1e-9, a.where
    # the worst-case neighbour attains the marginal counts' sensitivity sqrt(2 n_s)
    worst = record_and_replay(_napsu, df, next(_neighbours(df)), monkeypatch,
                              stop_after="estimator.discrete_gaussian_mechanism")
    a, b = worst[-1]
    assert measured_sensitivity(a, b, "l2") == pytest.approx(a.params["sensitivity"])
    assert measured_sensitivity(*worst[0], "l2") == pytest.approx(worst[0][0].params["sensitivity"])
    # the threshold test on that pair, with the calibration the measurement used
    p = a.params
    assert p["unit_changes"] == 6  # (a, b) and MST's two pairs
    declared = discrete_gaussian_epsilon(p["sigma"], p["delta"], p["unit_changes"])  # jointly calibrated
    assert audit_additive("discrete_gaussian", a.values, b.values, sensitivity=p["sensitivity"],
                          epsilon=declared, delta=p["delta"], draws=100_000,
                          unit_changes=p["unit_changes"], sigma=p["sigma"]) <= declared


def test_napsu_mq_with_understated_sensitivity_is_flagged(monkeypatch):
    df = _table()
    # one unit change declared where a substitution makes 2 per marginal (L2 1 for sqrt(6)); the
    # jointly calibrated plan is made with the same (understated) count
    monkeypatch.setattr(QuerySet, "unit_changes_for", staticmethod(lambda n: max(1, n // 2)))
    (_, _, _, (a, b)) = record_and_replay(_napsu, df, next(_neighbours(df)), monkeypatch,
                                          stop_after="estimator.discrete_gaussian_mechanism")
    assert measured_sensitivity(a, b, "l2") > a.params["sensitivity"]
    p = a.params
    declared = discrete_gaussian_epsilon(p["sigma"], p["delta"], p["unit_changes"])
    assert audit_additive("discrete_gaussian", a.values, b.values, sensitivity=p["sensitivity"],
                          epsilon=declared, delta=p["delta"], unit_changes=p["unit_changes"],
                          sigma=p["sigma"]) > declared


@pytest.mark.filterwarnings("ignore::synthinfer.errors.SynthinferWarning")
def test_replay_detects_control_flow_that_depends_on_the_private_difference(monkeypatch):
    df = _table()

    def leaky(data):  # a mechanism whose number of measured marginals depends on a private count
        extra = [("c", "d")] if (data["a"] == "0").sum() % 2 else []
        NapsuMQ([("a", "b"), *extra], epsilon=1.0, inference="laplace", seed=0).fit(data, DOMAIN)

    other = df.copy()
    other.at[int(np.flatnonzero(df["a"] == "0")[0]), "a"] = "1"
    with pytest.raises(ControlFlowError):
        record_and_replay(leaky, df, other, monkeypatch, stop_after="estimator.discrete_gaussian_mechanism")


# -- PrivBayes: mutual-information scores of its exponential mechanism, and the noisy counts --------

def _privbayes(df):
    PrivBayes(epsilon=1.0, degree=1, seed=5).fit(df, DOMAIN)


def test_privbayes_record_and_replay(monkeypatch):
    from synthinfer.generate.privbayes import mutual_information_sensitivity

    df = _table()
    for other in _neighbours(df):
        pairs = record_and_replay(_privbayes, df, other, monkeypatch)
        scores = [(a, b) for a, b in pairs if a.where.endswith("mutual_information")]
        (counts,) = [(a, b) for a, b in pairs if a.where.endswith("laplace_mechanism")]
        binary = all(DOMAIN[c].size == 2 for c in DOMAIN.names)
        assert len(scores) > 0
        assert max(measured_sensitivity(a, b, "linf") for a, b in scores) <= mutual_information_sensitivity(
            len(df), binary)
        a, b = counts
        assert measured_sensitivity(a, b, "l1") <= a.params["sensitivity"]
    a, b = next(  # worst-case neighbour: the L1 sensitivity 2 * (number of tables) is attained
        (a, b) for a, b in record_and_replay(_privbayes, df, next(_neighbours(df)), monkeypatch)
        if a.where.endswith("laplace_mechanism"))
    assert measured_sensitivity(a, b, "l1") == pytest.approx(a.params["sensitivity"])
    p = a.params
    assert audit_additive("discrete_laplace", a.values, b.values, sensitivity=p["sensitivity"],
                          epsilon=p["epsilon"], draws=100_000) <= p["epsilon"]
    assert audit_additive("discrete_laplace", a.values, b.values, sensitivity=p["sensitivity"] / 2,
                          epsilon=p["epsilon"], draws=100_000) > p["epsilon"]


# -- the Laplace-mechanism generator: its released rows are the audit's draws ------------------------

def _laplace_release(value: float, n: int, monkeypatch=None, halve: bool = False) -> np.ndarray:
    import synthinfer.generate.laplace_mechanism as module

    gen = LaplaceMechanismGenerator({"x": (0.0, 1.0)}, epsilon=1.0, seed=11 if value else 12)
    if halve:  # the noise drawn for half the sensitivity the ledger is charged for
        laplace = module.laplace
        monkeypatch.setattr(module, "laplace", lambda x, *, sensitivity, epsilon: laplace(
            x, sensitivity=sensitivity / 2, epsilon=epsilon))
    return gen.fit(pd.DataFrame({"x": np.full(n, value)})).synthetic_["x"].to_numpy()


@pytest.mark.parametrize("halve", [False, True])
def test_laplace_generator_releases(monkeypatch, halve):
    # Each released value is its row's clamped value plus Laplace noise, so one fit of n identical
    # rows at the bound 0 (at 1) gives n draws of the release of a row on D (on D').
    from privacy_audit import epsilon_lower_bound

    draws = [_laplace_release(v, 100_000, monkeypatch, halve) for v in (1.0, 0.0)]
    eps = 1.0  # one column: epsilon_1 = epsilon
    t = [d[: len(d) // 2] for d in draws], [d[len(d) // 2:] for d in draws]
    lb = epsilon_lower_bound(t[1][0], t[1][1], t[0][0], t[0][1], 0.0)
    assert (lb > eps) if halve else (lb <= eps)


def test_laplace_generator_record_and_replay(monkeypatch):
    # substitution of a row from one bound to the other moves one released value by b - a; both
    # fits draw their noise from one seeded test stream, so that only the substituted row differs
    from synthinfer.privacy import samplers

    df = pd.DataFrame({"x": np.linspace(0, 1, 50), "y": np.linspace(-2, 2, 50)})
    other = df.copy()
    other.loc[7, ["x", "y"]] = [1.0 - df.at[7, "x"], 9.0]  # y clamps to its bound 2
    bounds = {"x": (0.0, 1.0), "y": (-2.0, 2.0)}
    monkeypatch.setattr(samplers, "_TEST_ONLY_noise_rng", np.random.default_rng(4))
    g1 = LaplaceMechanismGenerator(bounds, epsilon=1.0, seed=4).fit(df)
    monkeypatch.setattr(samplers, "_TEST_ONLY_noise_rng", np.random.default_rng(4))
    g2 = LaplaceMechanismGenerator(bounds, epsilon=1.0, seed=4).fit(other)
    diff = (g1.synthetic_ - g2.synthetic_).abs()
    assert (diff > 1e-12).any(axis=1).sum() == 1  # one row, wherever the permutation put it
    for c in bounds:
        (charge,) = [ch for ch in g1.ledger_.charges if ch.name.endswith(f"[{c}]")]
        assert diff[c].max() <= charge.details["sensitivity_l1"] + 1e-9
        assert charge.details["scale"] == pytest.approx(charge.details["sensitivity_l1"] / charge.epsilon)


# -- output-perturbed weights --------------------------------------------------------------------

@pytest.mark.parametrize("noise", ["laplace", "gaussian"])
def test_output_perturbed_weights_record_and_replay(monkeypatch, noise):
    real, synth = make_triangle_square(2000, seed=0)
    bounds = {"x1": (0.0, 1.0), "x2": (0.0, 1.0)}
    delta = 1e-6 if noise == "gaussian" else 0.0

    def run(r):
        OutputPerturbedWeights(bounds, epsilon=1.0, delta=delta, noise=noise, seed=2).fit(r, synth)

    for i in (0, 17, 101):
        other = real.copy()
        other.iloc[i] = [1.0, 1.0] if real.iloc[i].sum() < 1 else [0.0, 0.0]
        ((a, b),) = record_and_replay(run, real, other, monkeypatch)
        norm = "l1" if noise == "laplace" else "l2"
        assert 0 < measured_sensitivity(a, b, norm) <= a.params["sensitivity"]
    p = a.params
    assert audit_additive(noise, a.values, b.values, sensitivity=p["sensitivity"], epsilon=p["epsilon"],
                          delta=p.get("delta", 0.0), draws=50_000) <= p["epsilon"]
