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
from test_privacy import _discrete_gaussian_losses, _exact_discrete_gaussian_delta


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


def test_ledger_composes_separate_charges_by_basic_composition_only():
    """PLD composition across charges whose parameters may depend on earlier outputs is unsound:
    randomized response RR(0.5) on a (1, 1e-5) ledger, then, depending on its output, either a
    discrete Gaussian at the smallest scale a PLD ledger would admit or an RR(0.5, 1e-5). Each
    branch composes within (1, 1e-5) by PLD, but the adaptive whole does not (exact delta below),
    so the ledger must refuse the discrete Gaussian after RR(0.5) (basic: 0.5 + its epsilon > 1)."""
    total_eps, total_delta, eps1 = 1.0, 1e-5, 0.5
    rr = Composition.of([PrivacyLoss.epsilon_delta(eps1, 0.0)])
    lo, hi = 0.5, 50.0  # the smallest sigma with RR(0.5) then DG(sigma) within (1, 1e-5) by PLD
    for _ in range(40):
        mid = math.sqrt(lo * hi)
        ok = rr.then(PrivacyLoss.discrete_gaussian(mid, 1)).delta(total_eps) <= total_delta
        lo, hi = (lo, mid) if ok else (mid, hi)
    sigma = hi
    # exact delta(1) of the adaptive mechanism: the DG branch after output "+", RR(0.5, 1e-5) after "-"
    p = math.exp(eps1) / (1 + math.exp(eps1))
    dg_l, dg_p = _discrete_gaussian_losses(sigma, 1)
    h_dg = float(np.sum(dg_p * np.maximum(0.0, 1.0 - np.exp(np.minimum(total_eps - eps1 - dg_l, 700.0)))))
    q = math.exp(0.5) / (1 + math.exp(0.5))  # RR(0.5, delta2): losses +-0.5 on 1 - delta2, +inf on delta2
    h_rr = 1e-5 + (1 - 1e-5) * q * max(0.0, 1 - math.exp(total_eps + eps1 - 0.5))
    exact = p * h_dg + (1 - p) * h_rr
    assert exact > 1.1 * total_delta  # the PLD-certified adaptive composition overspends
    led = PrivacyLedger(PrivacyBudget(total_eps, total_delta))
    laplace_mechanism(np.zeros(2), sensitivity=1.0, epsilon=eps1, ledger=led)
    with pytest.raises(BudgetExceededError):
        discrete_gaussian_mechanism(np.arange(2), sensitivity=1.0, unit_changes=1, sigma=sigma, epsilon=None,
                                    delta=total_delta, ledger=led)
    assert len(led.charges) == 1


def _plan(sigma: float, k: int, parts: int) -> list[PrivacyLoss]:
    return [PrivacyLoss.discrete_gaussian(sigma, k)] * parts


def test_a_committed_plan_costs_its_pair_once_and_checks_its_parts():
    delta, k = 1e-6, 4
    sigma = discrete_gaussian_sigma(0.6, delta / 2, k)  # two of these compose to about (0.84, 1e-6)
    led = PrivacyLedger(PrivacyBudget(1.0, delta))
    assert led.commit_plan("two releases", 1.0, delta, _plan(sigma, k, 2), mechanism="test") == "two releases"
    assert led.spent == (1.0, delta) and led.remaining is None
    for _ in range(2):
        discrete_gaussian_mechanism(np.arange(4), sensitivity=2.0, unit_changes=k, sigma=sigma, epsilon=None,
                                    delta=delta / 2, ledger=led, part_of="two releases")
    assert led.spent == (1.0, delta)  # the parts are inside the plan's pair
    assert [c.part_of for c in led.charges] == [None, "two releases", "two releases"]
    with pytest.raises(PrivacyError, match="no committed plan"):  # the plan is used up
        discrete_gaussian_mechanism(np.arange(4), sensitivity=2.0, unit_changes=k, sigma=sigma, epsilon=None,
                                    delta=delta / 2, ledger=led, part_of="two releases")
    rec = json.loads(json.dumps(led.to_dict()))
    assert rec["charges"][0]["details"]["losses"][0]["kind"] == "discrete_gaussian"
    again = PrivacyLedger.from_dict(rec)
    assert again.spent == led.spent and again.charges[1].part_of == "two releases"
    # a record whose parts have no plan to belong to (hand-edited) would hide their spend: refused
    bad = json.loads(json.dumps(rec))
    bad["charges"][0]["details"]["parts"] = 1
    with pytest.raises(PrivacyError, match="corrupt"):
        PrivacyLedger.from_dict(bad)
    bad["charges"] = rec["charges"][1:]
    with pytest.raises(PrivacyError, match="corrupt"):
        PrivacyLedger.from_dict(bad)
    # brute force: the two parts are (1, delta)-DP, three would not be
    assert _exact_discrete_gaussian_delta(sigma, 1.0, 2 * k) <= delta
    assert _exact_discrete_gaussian_delta(sigma, 1.0, 3 * k) > delta


def test_plans_are_refused_before_any_spend():
    delta, k = 1e-6, 4
    sigma = discrete_gaussian_sigma(0.6, delta / 2, k)
    led = PrivacyLedger(PrivacyBudget(1.0, delta))
    with pytest.raises(PrivacyError, match="do not compose"):  # three parts exceed (1, delta)
        led.commit_plan("three", 1.0, delta, _plan(sigma, k, 3), mechanism="test")
    laplace_mechanism(np.zeros(2), sensitivity=1.0, epsilon=0.5, ledger=led)
    with pytest.raises(BudgetExceededError):  # the plan's pair no longer fits by basic composition
        led.commit_plan("two", 1.0, delta, _plan(sigma, k, 2), mechanism="test")
    assert len(led.charges) == 1
    led2 = PrivacyLedger(PrivacyBudget(1.0, delta))
    led2.commit_plan("two", 1.0, delta, _plan(sigma, k, 2), mechanism="test")
    with pytest.raises(PrivacyError, match="not the next one committed"):  # a part with less noise
        discrete_gaussian_mechanism(np.arange(4), sensitivity=2.0, unit_changes=k, sigma=0.9 * sigma, epsilon=None,
                                    delta=delta / 2, ledger=led2, part_of="two")
    # parts state a pair their loss implies, and a finite one
    with pytest.raises(PrivacyError, match="is not"):
        led2.spend("part", 0.1, delta / 2, mechanism="test", loss=PrivacyLoss.discrete_gaussian(sigma, k), part_of="two")
    with pytest.raises(PrivacyError, match="finite"):
        led2.spend("part", math.nan, delta / 2, mechanism="test", loss=PrivacyLoss.discrete_gaussian(sigma, k),
                   part_of="two")
    # a second plan of the same name is numbered
    led3 = PrivacyLedger(PrivacyBudget(2.0, 2 * delta))
    names = [led3.commit_plan("p", 1.0, delta, _plan(sigma, k, 2), mechanism="test") for _ in range(2)]
    assert names == ["p", "p #2"]


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
        PrivacyLedger(PrivacyBudget(1.0, 1e-6)).spend("x", 0.1, 0.0, mechanism="m", loss={"kind": "epsilon_delta"})
    with pytest.raises(PrivacyError, match="PrivacyLoss"):
        PrivacyLedger(PrivacyBudget(1.0, 1e-6)).commit_plan("x", 0.1, 0.0, [], mechanism="m")


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
