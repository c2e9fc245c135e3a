"""The ledger's composition: basic, or the privacy loss distributions' where tighter.

Exactness tests compare the composed bounds with closed forms (optimal composition of pure-DP
mechanisms) and with brute-force convolution of discrete Gaussian privacy losses."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from synthinfer.errors import BudgetExceededError, PrivacyError
from synthinfer.privacy import (
    Composition,
    PrivacyBudget,
    PrivacyLedger,
    PrivacyLoss,
    discrete_gaussian_mechanism,
    discrete_gaussian_sigma,
    laplace_mechanism,
)
from test_privacy import _exact_discrete_gaussian_delta


def _optimal_pure_delta(eps0: float, k: int, epsilon: float) -> float:
    """delta(epsilon) of k-fold composition of eps0-DP (Kairouz, Oh & Viswanath 2015): the
    losses of k randomized responses, +-eps0 with probabilities p = e^eps0 / (1 + e^eps0) and
    1 - p; delta = sum over i (losses +eps0 i times) of C(k, i) p^i (1-p)^(k-i) (1 - e^(epsilon - L))_+."""
    p = math.exp(eps0) / (1 + math.exp(eps0))
    out = 0.0
    for i in range(k + 1):
        loss = eps0 * (2 * i - k)
        out += math.comb(k, i) * p**i * (1 - p) ** (k - i) * max(0.0, 1.0 - math.exp(epsilon - loss))
    return out


@pytest.mark.parametrize("eps0, k, epsilon", [(0.6, 2, 1.0), (0.3, 5, 1.0), (1.0, 3, 2.0)])
def test_pure_dp_charges_compose_optimally(eps0, k, epsilon):
    comp = Composition.of([PrivacyLoss.epsilon_delta(eps0, 0.0)] * k)
    exact = _optimal_pure_delta(eps0, k, epsilon)
    assert exact <= comp.delta(epsilon) <= exact + 1e-3  # pessimistic grid of 1e-4 in the losses
    assert comp.delta(k * eps0 + 1e-3) == 0.0  # basic composition's point is reached


def test_ledger_admits_by_either_bound_and_refuses_when_neither_holds():
    # two 0.6-DP charges on a (1, delta) ledger: basic needs 1.2; the optimal composition's delta at
    # epsilon 1 is 0.0756, so they fit at delta 0.1 but not at 0.05
    led = PrivacyLedger(PrivacyBudget(1.0, 0.1), allow_large_delta=True)
    laplace_mechanism(np.zeros(2), sensitivity=1.0, epsilon=0.6, ledger=led)
    laplace_mechanism(np.zeros(2), sensitivity=1.0, epsilon=0.6, ledger=led)
    assert led.spent == (pytest.approx(1.2), 0.0)
    e, d = led.guarantee()
    assert e < 1.0 and d == 0.1
    tight = PrivacyLedger(PrivacyBudget(1.0, 0.05), allow_large_delta=True)
    laplace_mechanism(np.zeros(2), sensitivity=1.0, epsilon=0.6, ledger=tight)
    with pytest.raises(BudgetExceededError, match="privacy loss distributions"):
        laplace_mechanism(np.zeros(2), sensitivity=1.0, epsilon=0.6, ledger=tight)
    assert len(tight.charges) == 1
    # basic composition still admits an exact split (the PLD's grid would round it up)
    exact = PrivacyLedger(PrivacyBudget(1.0, 0.0))
    laplace_mechanism(np.zeros(2), sensitivity=1.0, epsilon=0.9, ledger=exact)
    laplace_mechanism(np.zeros(2), sensitivity=1.0, epsilon=0.1, ledger=exact)
    assert exact.guarantee() == (pytest.approx(1.0), 0.0)


@pytest.mark.parametrize("eps_each, admitted", [(0.6, 2), (0.7, 2), (0.5, 3)])
def test_discrete_gaussian_charges_compose_by_their_exact_loss(eps_each, admitted):
    """Each charge is calibrated to (eps_each, delta / 2) with k = 4 unit changes; the ledger admits
    charges while their PLD composition is within (1, delta), and brute force confirms that what
    it admitted is (1, delta)-DP while one more charge is not."""
    delta, k = 1e-6, 4
    led = PrivacyLedger(PrivacyBudget(1.0, delta))
    for _ in range(admitted):
        discrete_gaussian_mechanism(np.arange(4), sensitivity=2.0, unit_changes=k, epsilon=eps_each,
                                    delta=delta / 2, ledger=led)
    with pytest.raises(BudgetExceededError):
        discrete_gaussian_mechanism(np.arange(4), sensitivity=2.0, unit_changes=k, epsilon=eps_each,
                                    delta=delta / 2, ledger=led)
    assert len(led.charges) == admitted
    sigma = discrete_gaussian_sigma(eps_each, delta / 2, k)
    # the admitted charges: admitted * k unit changes at one sigma, brute force
    assert _exact_discrete_gaussian_delta(sigma, 1.0, admitted * k) <= delta
    assert _exact_discrete_gaussian_delta(sigma, 1.0, (admitted + 1) * k) > delta
    e, d = led.guarantee()
    assert d == delta and e <= 1.0
    assert e < admitted * eps_each  # tighter than basic composition


def test_ledger_record_round_trips_the_losses():
    led = PrivacyLedger(PrivacyBudget(1.0, 1e-6))
    for _ in range(2):
        discrete_gaussian_mechanism(np.arange(4), sensitivity=2.0, unit_changes=4, epsilon=0.6, delta=5e-7,
                                    ledger=led)
    rec = json.loads(json.dumps(led.to_dict()))
    assert rec["charges"][0]["loss"]["kind"] == "discrete_gaussian"
    assert rec["guarantee"]["epsilon"] < 1.0
    again = PrivacyLedger.from_dict(rec)
    assert again.guarantee() == pytest.approx(led.guarantee())
    assert not again.can_spend(0.6, 5e-7, loss=PrivacyLoss.from_dict(rec["charges"][0]["loss"]))
    # a record without losses (older releases) composes its pairs
    for c in rec["charges"]:
        del c["loss"]
    old = PrivacyLedger.from_dict(rec)
    assert old.charges[0].privacy_loss == PrivacyLoss.epsilon_delta(0.6, 5e-7)


def test_privacy_loss_refuses_bad_values():
    with pytest.raises(PrivacyError, match="unit_changes"):
        PrivacyLoss.discrete_gaussian(3.0, 0)
    with pytest.raises(PrivacyError, match="sigma"):
        PrivacyLoss.discrete_gaussian(-1.0, 2)
    with pytest.raises(PrivacyError, match="delta"):
        PrivacyLoss.epsilon_delta(1.0, 1.0)
    with pytest.raises(PrivacyError, match="privacy loss record"):
        PrivacyLoss.from_dict({"kind": "gaussian", "sigma": 1.0})
    with pytest.raises(PrivacyError, match="PrivacyLoss"):
        PrivacyLedger(PrivacyBudget(1.0, 1e-6)).check("x", 0.1, 0.0, mechanism="m", loss={"kind": "epsilon_delta"})


def _discrete_gaussian_losses(sigma: float, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Exact privacy loss (values, probabilities) under P of N_Z(0, sigma^2) on k coordinates each
    shifted by 1: (k - 2 S) / (2 sigma^2), S the sum of the k noises (k-fold convolution)."""
    from scipy.signal import fftconvolve

    t = int(math.ceil(40 * sigma))
    z = np.arange(-t, t + 1)
    pmf = np.exp(-(z.astype(float) ** 2) / (2 * sigma * sigma))
    pmf /= pmf.sum()
    total = pmf
    for _ in range(k - 1):
        total = np.clip(fftconvolve(total, pmf), 0.0, None)
    s = np.arange(-k * t, k * t + 1)
    keep = total > 1e-300
    return (k - 2.0 * s[keep]) / (2 * sigma * sigma), total[keep]


def _exact_delta(parts: list[tuple[np.ndarray, np.ndarray]], epsilon: float) -> float:
    """delta(epsilon) = E_P[(1 - e^(epsilon - L))_+] with L the sum of independent parts' losses."""
    (l0, p0), *rest = parts
    for l1, p1 in rest[:-1]:
        l0, p0 = (l0[:, None] + l1[None, :]).ravel(), (p0[:, None] * p1[None, :]).ravel()
    last_l, last_p = rest[-1]
    out = 0.0
    for i in range(0, l0.size, 4096):
        loss = l0[i:i + 4096, None] + last_l[None, :]
        w = p0[i:i + 4096, None] * last_p[None, :]
        out += float(np.sum(w * np.maximum(0.0, 1.0 - np.exp(np.minimum(epsilon - loss, 700.0)))))
    return out


def test_mst_noise_plan_is_valid_and_tight_by_brute_force():
    """NAPSU-MQ with MST on 4 columns (3 marginals, 2 exponential mechanisms) at (4, 1e-6): the
    jointly calibrated plan is (4, 1e-6)-DP by exact convolution of its privacy losses (the
    exponential mechanisms as their dominating randomized response), 2% less noise is not, and
    it has less noise than the split calibrated by basic composition."""
    from synthinfer.napsu.selection import mst_noise_plan

    epsilon, delta, k_extra = 4.0, 1e-6, 2
    sel, meas = PrivacyBudget(epsilon, delta).split(0.25, 0.75)
    plan = mst_noise_plan(4, 3, k_extra, sel, meas)
    assert plan.measure_sigma < 0.97 * discrete_gaussian_sigma(meas.epsilon, meas.delta, 6)
    p = math.exp(plan.step_epsilon) / (1 + math.exp(plan.step_epsilon))
    em = (np.array([plan.step_epsilon, -plan.step_epsilon]), np.array([p, 1 - p]))

    def exact(c: float) -> float:
        return _exact_delta([_discrete_gaussian_losses(c * plan.one_way_sigma, 8), em, em,
                             _discrete_gaussian_losses(c * plan.measure_sigma, 6)], epsilon)

    assert exact(1.0) <= delta
    assert exact(0.98) > delta
    assert Composition.of(list(plan.losses)).delta(epsilon) <= delta
