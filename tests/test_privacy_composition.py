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
