"""AIM selection and measurement: sensitivities, accounting, caps, errors, and what it selects."""

from __future__ import annotations

import math
import re

import numpy as np
import pytest

from synthinfer.data import Domain, Marginal, count_codes
from synthinfer.errors import BudgetExceededError, DomainError, ParameterError, UnknownColumnError
from synthinfer.napsu.aim import (
    DEFAULT_MAX_CLIQUE_CELLS,
    MARGINAL_L2_SENSITIVITY,
    MEASURE_SHARE,
    QUALITY_SENSITIVITY_PER_WEIGHT,
    candidate_weights,
    estimate_pgm,
    quality_scores,
    select_aim,
    two_way_workload,
)
from synthinfer.napsu.measurements import Measurement
from synthinfer.privacy import PrivacyBudget, PrivacyLedger, zcdp_rho

DOM = Domain({"a": [0, 1, 2], "b": [0, 1, 2], "c": [0, 1], "d": [0, 1, 2, 3], "e": [0, 1], "f": [0, 1, 2]})


def strong_pairs_table(n: int, seed: int) -> np.ndarray:
    """Rows where (a, b), (c, d) and (e, f) are strongly dependent and the pairs independent."""
    rng = np.random.default_rng(seed)
    codes = np.column_stack([rng.integers(0, k, n) for k in DOM.shape])
    copy = rng.random((n, 3)) < 0.85
    codes[:, 1] = np.where(copy[:, 0], codes[:, 0], codes[:, 1])
    codes[:, 3] = np.where(copy[:, 1], 2 * codes[:, 2] + 1, codes[:, 3])
    codes[:, 5] = np.where(copy[:, 2], 2 * codes[:, 4], codes[:, 5])
    return codes


@pytest.fixture(scope="module")
def codes():
    return strong_pairs_table(3000, 0)


def run(codes, eps=1.0, delta=1e-6, ledger=None, **kw):
    budget = PrivacyBudget(eps, delta)
    ledger = PrivacyLedger(budget) if ledger is None else ledger
    kw.setdefault("estimation_iters", 100)
    return select_aim(codes, DOM, budget=budget, ledger=ledger, **kw), ledger


# -- sensitivities (substitution of one row) ----------------------------------------------------


def test_sensitivities_on_neighbouring_datasets():
    """Substituting one row moves each candidate marginal by at most sqrt(2) in L2 and each
    quality score by at most 2 w_r, and both bounds are attained."""
    rng = np.random.default_rng(1)
    weights = candidate_weights(two_way_workload(DOM), np.ones(15))
    cands = list(weights)
    w = np.array([weights[r] for r in cands])
    worst_l2, worst_q = 0.0, 0.0
    for _ in range(150):
        x = np.column_stack([rng.integers(0, k, 40) for k in DOM.shape])
        y = x.copy()
        y[rng.integers(40)] = [rng.integers(0, k) for k in DOM.shape]
        cx = [count_codes(x, DOM, r.columns) for r in cands]
        cy = [count_codes(y, DOM, r.columns) for r in cands]
        worst_l2 = max(worst_l2, max(np.linalg.norm(a - b) for a, b in zip(cx, cy)))
        estimate = [rng.normal(5, 3, c.size) for c in cx]  # any released estimate
        sigma = rng.uniform(0.5, 5)
        dq = np.abs(quality_scores(cx, estimate, w, sigma) - quality_scores(cy, estimate, w, sigma))
        worst_q = max(worst_q, float(np.max(dq / w)))
    assert worst_l2 <= MARGINAL_L2_SENSITIVITY + 1e-12 and worst_l2 == pytest.approx(math.sqrt(2))
    assert worst_q <= QUALITY_SENSITIVITY_PER_WEIGHT + 1e-9 and worst_q == pytest.approx(2.0)


def test_candidates_and_quality_formula():
    work = (Marginal(("a", "b")), Marginal(("b", "c")), Marginal(("a", "b", "d")))
    w = candidate_weights(work, [1.0, 2.0, 0.5])
    # 1-way candidates weigh at most as the heaviest of two or more columns (bc: 2), unless named
    assert w[Marginal(("b",))] == 2.0 and w[Marginal(("a", "b"))] == 1.5 and w[Marginal(("c",))] == 2.0
    assert w[Marginal(("a",))] == 1.5 and w[Marginal(("d",))] == 0.5
    assert w[Marginal(("a", "b", "d"))] == 0.5 and len(w) == 4 + 4 + 1  # a b c d; ab bc ad bd; abd
    named = candidate_weights(work + (Marginal(("b",)),), [1.0, 2.0, 0.5, 1.0])
    assert named[Marginal(("b",))] == 4.5
    assert set(candidate_weights(two_way_workload(DOM), np.ones(15)).values()) == {1.0}
    q = quality_scores([np.array([3.0, 1.0])], [np.array([1.0, 2.0])], [2.0], 0.5)
    assert q[0] == pytest.approx(2.0 * (3.0 - math.sqrt(2 / math.pi) * 0.5 * 2))


# -- accounting -------------------------------------------------------------------------------


def test_charged_once_and_spends_exactly_rho(codes, monkeypatch):
    from synthinfer.privacy import samplers

    # the variance check below is statistical: one fixed noise draw (the samplers' test stream)
    monkeypatch.setattr(samplers, "_TEST_ONLY_noise_rng", np.random.default_rng(0))
    ledger = PrivacyLedger((3.0, 1e-5))
    ledger.spend("earlier", 0.5, 0.0, mechanism="laplace")
    res, _ = run(codes, eps=1.0, delta=1e-6, ledger=ledger)
    assert len(ledger.charges) == 2
    charge = ledger.charges[-1]
    assert charge.name == "napsu-mq: AIM" and (charge.epsilon, charge.delta) == (1.0, 1e-6)
    rho = zcdp_rho(1.0, 1e-6)
    assert charge.details["rho"] == rho and (res.epsilon, res.delta) == (1.0, 1e-6)
    # rho from the released noise levels, with the substitution sensitivity written out here:
    # Gaussian sqrt(2)^2 / (2 sigma^2) per measurement, epsilon^2 / 8 per selection
    spent = sum(2.0 / (2.0 * m.variance) for m in res.measurements) + sum(r.epsilon**2 / 8 for r in res.rounds)
    assert spent <= rho and spent == pytest.approx(rho, rel=1e-8) and res.rho == pytest.approx(spent)
    # a round costs rho / T at the start: 16 * 6 = 96 rounds bound, 0.9 of it for the measurement
    sigma0 = math.sqrt(res.measurements[0].variance)
    assert 2.0 / (2 * sigma0**2) == pytest.approx(MEASURE_SHARE * rho / 96)
    assert res.rounds[0].epsilon**2 / 8 == pytest.approx((1 - MEASURE_SHARE) * rho / 96)
    # the noise has the variance it claims
    z = np.concatenate([(m.values - count_codes(codes, DOM, m.marginal.columns)) / math.sqrt(m.variance)
                        for m in res.measurements])
    assert z.size > 50 and 0.6 < z.var() < 1.5
    # annealing: sigma halves and epsilon doubles after an annealed round (the last round differs)
    for r, nxt in zip(res.rounds[:-2], res.rounds[1:-1]):
        factor = 2.0 if r.annealed else 1.0
        assert nxt.sigma == pytest.approx(r.sigma / factor) and nxt.epsilon == pytest.approx(r.epsilon * factor)


def test_overspend_refused_before_anything(codes):
    ledger = PrivacyLedger((1.0, 1e-6))
    ledger.spend("earlier", 0.5, 0.0, mechanism="laplace")
    with pytest.raises(BudgetExceededError):
        run(codes, eps=1.0, ledger=ledger)
    assert len(ledger.charges) == 1


# -- what gets measured -----------------------------------------------------------------------


def test_strong_pairs_selected_first_at_large_epsilon(codes):
    res, _ = run(codes, eps=30.0, required=[("b", "c")])
    names = DOM.names
    first = res.measurements[: len(names) + 1]
    assert [m.marginal.columns for m in first] == [(c,) for c in names] + [("b", "c")]  # 1-ways, required
    assert len({m.variance for m in first}) == 1  # all at sigma_0
    picked = {frozenset(r.marginal.columns) for r in res.rounds[:3]}
    assert picked == {frozenset("ab"), frozenset("cd"), frozenset("ef")}
    assert Marginal(("b", "c")) in res.workload  # the required marginal joins the workload
    distinct = [frozenset(m.columns) for m in res.marginals]
    assert len(distinct) == len(set(distinct))
    assert set(distinct) == {frozenset(m.marginal.columns) for m in res.measurements}
    # the estimate recovers the strong pairs
    for pair in ("ab", "cd", "ef"):
        truth = count_codes(codes, DOM, tuple(pair))
        assert np.abs(res.estimate.project(tuple(pair)) - truth).sum() / truth.sum() < 0.05


def test_a_dependent_pair_is_found_among_many_columns_at_epsilon_one(monkeypatch):
    """12 binary columns, one a copy of another, 2,000 rows, epsilon 1: the copied pair is
    measured. With uncapped 1-way weights (11 each) the selection's sensitivity was 11 times a
    pair's, and the pair was picked about as often as any other (1 of these 5 seeds)."""
    from synthinfer.privacy import samplers

    dom = Domain({f"x{i}": [0, 1] for i in range(12)})
    found = 0
    for seed in range(5):
        rng = np.random.default_rng(seed)
        x = rng.integers(0, 2, (2000, 12))
        x[:, 1] = x[:, 0]
        monkeypatch.setattr(samplers, "_TEST_ONLY_noise_rng", np.random.default_rng(seed))
        res = select_aim(x, dom, budget=PrivacyBudget(1.0, 2000 ** -2.0), ledger=PrivacyLedger((1.0, 2000 ** -2.0)),
                         estimation_iters=100)
        found += frozenset(("x0", "x1")) in {frozenset(m.columns) for m in res.marginals}
    assert found == 5


def test_a_required_one_way_marginal_keeps_the_weights_capped(codes):
    """A 1-way required marginal is measured with the others before the rounds and does not
    join the workload, where it would escape the cap (its weight 5 would set the sensitivity)."""
    res, ledger = run(codes, eps=30.0, required=[("a",), ("c", "d")])
    assert Marginal(("a",)) not in res.workload and Marginal(("c", "d")) in res.workload
    assert res.rounds and len(res.workload) == len(two_way_workload(DOM))


def test_model_size_caps_respected():
    rng = np.random.default_rng(5)
    dom = Domain({c: list(range(6)) for c in "pqrstu"})
    x = rng.integers(0, 6, (2000, 6))
    x[:, 1:] = np.where(rng.random((2000, 5)) < 0.6, x[:, :-1], x[:, 1:])  # a chain of strong pairs
    budget = PrivacyBudget(20.0, 1e-6)
    res = select_aim(x, dom, budget=budget, ledger=PrivacyLedger(budget), max_model_cells=150,
                     max_clique_cells=36, estimation_iters=50)
    rho = zcdp_rho(20.0, 1e-6)
    cells = res.estimate.junction_tree.table_cells
    assert res.model_cells == cells <= 150 and res.max_model_cells == 150
    tree = res.estimate.junction_tree
    assert max(math.prod(tree.shape(c)) for c in range(len(tree.cliques))) <= 36  # no 3-way clique
    previous = 36  # the 1-way marginals' tree
    for r in res.rounds:
        assert r.model_cells <= max(r.rho_used / rho * 150, previous) + 1e-9
        previous = r.model_cells
    assert min(r.candidates for r in res.rounds) < len(candidate_weights(two_way_workload(dom), np.ones(15)))


def test_unseeded_integer_noise_and_float_context(codes):
    """AIM's noise comes from OpenDP (integer noisy counts, fresh every run), whatever the JAX
    float context, which it leaves as it was; each measurement carries the discrete noise's variance."""
    import jax

    from synthinfer import float64
    from synthinfer.privacy.samplers import discrete_gaussian_variance

    x64 = jax.config.jax_enable_x64
    a, _ = run(codes)
    with float64():
        b, _ = run(codes)
    assert jax.config.jax_enable_x64 == x64
    for res in (a, b):
        for m in res.measurements:
            assert np.array_equal(m.values, np.round(m.values))  # attainable from every neighbour
        measured = res.measurements[-len(res.rounds):]
        assert [m.variance for m in measured] == [discrete_gaussian_variance(r.sigma) for r in res.rounds]
    assert not np.array_equal(a.measurements[0].values, b.measurements[0].values)


# -- the PGM estimate ---------------------------------------------------------------------------


def test_pgm_estimate_matches_the_max_ent_model():
    """Exact measurements of a chain a-b, b-d plus e-f: the estimate reproduces them, and
    marginals outside a clique follow from the junction tree (a, d) or independence (a, f)."""
    x = strong_pairs_table(4000, 2)
    scopes = [("b", "a"), ("b", "d"), ("e", "f"), ("c",)]
    meas = [Measurement(Marginal(s), count_codes(x, DOM, s), 1e-2) for s in scopes]
    est = estimate_pgm(DOM, meas, 4000, iters=1500)
    for s in scopes:
        assert np.abs(est.project(s) - count_codes(x, DOM, s)).max() < 0.5
    pab = count_codes(x, DOM, ("a", "b")).reshape(3, 3) / 4000
    pbd = count_codes(x, DOM, ("b", "d")).reshape(3, 4) / 4000
    pb = pab.sum(0)
    pad = np.einsum("ab,bd->ad", pab, pbd / pb[:, None])  # sum_b p(a, b) p(d | b)
    assert np.allclose(est.project(("a", "d")) / 4000, pad.ravel(), atol=2e-4)
    assert np.allclose(est.project(("d", "a")) / 4000, pad.T.ravel(), atol=2e-4)
    pa = pab.sum(1)
    pf = count_codes(x, DOM, ("f",)) / 4000
    assert np.allclose(est.project(("a", "f")) / 4000, np.outer(pa, pf).ravel(), atol=2e-4)
    # a repeated measurement at a second variance pulls the estimate to their weighted mean
    y, shift = count_codes(x, DOM, ("c",)), np.array([30.0, -30.0])
    two = [Measurement(Marginal(("c",)), y + shift, 1.0), Measurement(Marginal(("c",)), y - shift, 3.0)]
    est = estimate_pgm(DOM, two, 4000, iters=300)
    assert np.allclose(est.project(("c",)), y + shift / 2, atol=0.5)


# -- bad input ------------------------------------------------------------------------------------


def test_likelihood_work_cap_respected():
    """A cap on the likelihood's work keeps every round's model under it (the measured scopes'
    message-passing plan, priced as the network's own plan prices the same measurements)."""
    from synthinfer.napsu.junction_tree import JunctionTree
    from synthinfer.napsu.network import network_for
    from synthinfer.napsu.structured import TreeLikelihoodPlan, likelihood_flops

    rng = np.random.default_rng(5)
    dom = Domain({c: list(range(6)) for c in "pqrstu"})
    x = rng.integers(0, 6, (2000, 6))
    x[:, 1:] = np.where(rng.random((2000, 5)) < 0.6, x[:, :-1], x[:, 1:])
    budget = PrivacyBudget(20.0, 1e-6)
    free = select_aim(x, dom, budget=budget, ledger=PrivacyLedger(budget), estimation_iters=50)
    cap = free.likelihood_flops - 1  # binds: the uncapped run's model is over it
    res = select_aim(x, dom, budget=budget, ledger=PrivacyLedger(budget), estimation_iters=50,
                     max_likelihood_flops=cap)
    assert res.max_likelihood_flops == cap and res.likelihood_flops <= cap < free.likelihood_flops
    scopes = list(dict.fromkeys(tuple(sorted(dom.index(c) for c in m.marginal.columns)) for m in res.measurements))
    tree = JunctionTree.build(dom, [[dom.names[v] for v in sc] for sc in scopes])
    assert likelihood_flops(tree, dom.shape, scopes) == res.likelihood_flops
    # the same number as the plan of a network holding those marginals, measured in full
    net = network_for(dom, list(res.marginals))
    layout = tuple((sc, tuple(range(math.prod(dom.shape[v] for v in sc)))) for sc in scopes)
    assert TreeLikelihoodPlan(net, layout).flops == res.likelihood_flops


def test_trees_are_regrown_after_a_scope_inside_a_clique(monkeypatch):
    """A round that measures a scope inside the tree's cliques leaves the tree as it is, but the
    trees grown with each candidate change: the next round must price candidates on trees of
    the current scopes (a stale one lacks the new scope and cannot be priced)."""
    from synthinfer.napsu import aim as aim_module

    dom = Domain({c: list(range(k)) for c, k in zip("abcdefg", (7, 8, 3, 5, 3, 6, 6))})
    names = dom.names
    required = [(names[a], names[b]) for a, b in [(2, 4), (1, 6), (0, 3), (3, 4), (3, 6), (0, 1), (3, 5)]]
    picks = iter([(0, 6)])  # inside a clique of the required marginals' tree; then the first eligible

    def pick_in_order(q, *, epsilon, sensitivity):
        import inspect

        caller = inspect.currentframe().f_back.f_locals
        keys = [caller["cand_key"][i] for i in caller["eligible"]]
        return keys.index(next(picks, keys[0]))

    monkeypatch.setattr(aim_module, "exponential_mechanism", pick_in_order)
    x = np.random.default_rng(1).integers(0, 2, (500, 7))
    budget = PrivacyBudget(10.0, 1e-6)
    workload = [(names[0], names[6]), (names[1], names[2])]
    res = select_aim(x, dom, workload, required=required, budget=budget, ledger=PrivacyLedger(budget),
                     max_model_cells=10**7, estimation_iters=5, rounds=200)
    # every later round priced the candidates grown outside the tree (e.g. (1, 2)) afresh
    assert tuple(sorted(dom.index(c) for c in res.rounds[0].marginal.columns)) == (0, 6) and len(res.rounds) > 1


def test_bad_input_raises_before_any_budget(codes):
    ledger = PrivacyLedger((10.0, 1e-5))

    def bad(exc, match, **kw):
        with pytest.raises(exc, match=match):
            run(codes, ledger=ledger, **kw)
        assert not ledger.charges

    bad(UnknownColumnError, "workload: .*'zz'", workload=[("a", "zz")])
    bad(UnknownColumnError, "'zz'", required=[("zz",)])
    bad(ParameterError, "at least one workload marginal", workload=[])
    bad(ParameterError, "listed twice", workload=[("a", "b"), ("b", "a")])
    bad(DomainError, r"workload: marginal \('a', 'b', 'a'\) repeats column\(s\) \['a'\]", workload=[("a", "b", "a")])
    bad(DomainError, "workload: a marginal needs at least one column", workload=[("a", "b"), ()])
    bad(ParameterError, "weights", workload=[("a", "b")], weights=[-1.0])
    bad(ParameterError, "delta > 0", delta=0.0)
    bad(ParameterError, r"rounds=6 is too few: the 7 initial .* use rounds >= 8", rounds=6, required=[("a", "b")])
    # the caps below the model of the required and 1-way marginals alone: both numbers named
    bad(ParameterError, r"max_model_cells=16 is below the 17 clique-table cells .* alone .* >= 17$", max_model_cells=16)
    bad(ParameterError, r"max_model_cells=21 is below the 22 clique-table .* >= 22$", max_model_cells=21,
        required=[("a", "d")])  # 12 cells of (a, d) + b, c, e, f
    bad(ParameterError, r"max_clique_cells=11 is below the 12-cell largest clique .* >= 12$", max_clique_cells=11,
        required=[("a", "d")])
    bad(ParameterError, "rounds", rounds=0)
    for value in (0, -5, 2.5, True, "4000", None):
        bad(ParameterError, f"max_model_cells must be an integer >= 1, got {value!r}", max_model_cells=value)
    for value in (0, 2.5):
        bad(ParameterError, f"max_clique_cells must be an integer >= 1, got {value!r}", max_clique_cells=value)
        bad(ParameterError, f"max_likelihood_flops must be an integer >= 1, got {value!r}", max_likelihood_flops=value)
    bad(ParameterError, r"max_likelihood_flops=5 is below the \d+ flops per likelihood evaluation .* >= \d+$",
        max_likelihood_flops=5)


def test_default_likelihood_cap_leaves_room_beyond_the_required_marginals(monkeypatch):
    """The default cap on the likelihood's work is raised to twice what the required and 1-way
    marginals cost where that is more, instead of refusing the required marginals."""
    import synthinfer.napsu.aim as aim_module
    from synthinfer.napsu.junction_tree import JunctionTree
    from synthinfer.napsu.structured import likelihood_flops

    rng = np.random.default_rng(3)
    dom = Domain({c: list(range(4)) for c in "abcd"})
    x = rng.integers(0, 4, (1500, 4))
    required = [("a", "b", "c")]
    budget = PrivacyBudget(8.0, 1e-6)
    monkeypatch.setattr(aim_module, "DEFAULT_MAX_LIKELIHOOD_FLOPS", 10)
    res = select_aim(x, dom, required=required, budget=budget, ledger=PrivacyLedger(budget), estimation_iters=20)
    scopes = [(0, 1, 2)] + [(i,) for i in range(4)]
    tree = JunctionTree.build(dom, [required[0], *[(c,) for c in "abcd"]])
    initial = likelihood_flops(tree, dom.shape, scopes)
    assert res.max_likelihood_flops == 2 * initial > 10
    assert initial <= res.likelihood_flops <= 2 * initial


def test_budget_too_small_for_the_rounds_names_the_epsilon_needed(codes):
    """The first measurements' noise sd sqrt(T / (0.9 rho)) must not exceed n: refused before any
    spend, naming the smallest epsilon that allows it (rho >= T / (0.9 n^2))."""
    n, rounds = codes.shape[0], 16 * 6
    ledger = PrivacyLedger((1.0, 1e-6))
    with pytest.raises(ParameterError, match=r"^epsilon=0.01 is too small for AIM on 3,000 rows: spread over 96 "
                       r"rounds \(16 per column\), the first measurements' noise sd would be [\d,]+, more than the "
                       r"number of rows.* at delta=1e-06 AIM needs epsilon >= ") as info:
        run(codes, eps=0.01, ledger=ledger)
    assert not ledger.charges
    sigma_0 = float(re.search(r"noise sd would be ([\d,]+)", str(info.value)).group(1).replace(",", ""))
    assert sigma_0 == pytest.approx(math.sqrt(rounds / (MEASURE_SHARE * zcdp_rho(0.01, 1e-6))), abs=1)
    need = float(re.search(r"epsilon >= ([\d.e-]+)$", str(info.value)).group(1))
    rho_needed = rounds / (MEASURE_SHARE * n**2)
    assert zcdp_rho(need, 1e-6) >= rho_needed > zcdp_rho(need * 0.99, 1e-6)
    # just below the named epsilon it is still refused; at it, the check passes and the ledger
    # (with too little left) is what refuses
    with pytest.raises(ParameterError, match="too small for AIM"):
        run(codes, eps=need * 0.99, ledger=ledger)
    with pytest.raises(BudgetExceededError):
        run(codes, eps=need, ledger=PrivacyLedger((need / 2, 1e-6)))
    # an explicit rounds bound is named as given, and fewer rounds need less
    with pytest.raises(ParameterError, match=r"spread over rounds=50, .* needs epsilon >= ([\d.e-]+)$") as fewer:
        run(codes, eps=0.01, ledger=ledger, rounds=50)
    assert float(re.search(r"epsilon >= ([\d.e-]+)$", str(fewer.value)).group(1)) < need
    assert not ledger.charges


def test_required_marginals_larger_than_the_default_clique_cap_are_measured():
    """The default clique cap rises to the required marginals' largest clique (they are
    measured whatever their size); an explicit cap below it is refused, naming both numbers."""
    dom = Domain({"p": list(range(11)), "q": list(range(10)), "r": list(range(10)), "s": [0, 1]})
    x = np.random.default_rng(4).integers(0, 2, (500, 4))
    budget = PrivacyBudget(20.0, 1e-6)
    kw = dict(required=[("p", "q", "r")], rounds=6, estimation_iters=5)
    res = select_aim(x, dom, budget=budget, ledger=PrivacyLedger(budget), **kw)
    assert res.max_clique_cells == 1100 > DEFAULT_MAX_CLIQUE_CELLS
    assert res.measurements[len(dom)].marginal == Marginal(("p", "q", "r"))
    ledger = PrivacyLedger(budget)
    with pytest.raises(ParameterError, match=r"max_clique_cells=1000 is below the 1100-cell largest clique"):
        select_aim(x, dom, budget=budget, ledger=ledger, max_clique_cells=1000, **kw)
    assert not ledger.charges


def test_required_share_measures_the_required_marginals_first_and_spends_exactly_rho(codes):
    """With ``required_share = f``, the k required marginals (of 2+ columns) are measured
    before the 1-way marginals at ``1 / sigma^2 = f rho / k`` each, the rounds start at
    ``(1 - f) rho / T``, and the whole run still spends exactly rho."""
    req = [("a", "b"), ("c", "d"), ("e",)]
    res, ledger = run(codes, eps=1.0, delta=1e-6, required=req, required_share=0.5)
    rho = zcdp_rho(1.0, 1e-6)
    first = res.measurements[:2]
    assert [m.marginal.columns for m in first] == [("a", "b"), ("c", "d")]
    # the discrete noise's variance is a hair below scale^2: compare through the ledger's scales too
    assert 1.0 / first[0].variance == pytest.approx(0.5 * rho / 2, rel=1e-6)
    assert ledger.charges[-1].details["sigma_required"] == pytest.approx(math.sqrt(2 / (0.5 * rho)))
    one_way = res.measurements[2]
    assert one_way.marginal.columns == ("a",)
    assert 1.0 / one_way.variance == pytest.approx(MEASURE_SHARE * 0.5 * rho / 96, rel=1e-6)
    spent = sum(1.0 / m.variance for m in res.measurements) + sum(r.epsilon**2 / 8 for r in res.rounds)
    assert spent == pytest.approx(rho, rel=1e-6) and res.rho <= rho * (1 + 1e-12)
    assert res.required_share == 0.5
    # without required marginals of 2+ columns the share does not apply
    res0, _ = run(codes, eps=1.0, delta=1e-6, required=[("e",)], required_share=0.5)
    assert res0.required_share == 0.0


@pytest.mark.parametrize("share", [-0.1, 1.0, 1.5, float("nan"), "half", True])
def test_bad_required_share_refused_before_any_budget(codes, share):
    ledger = PrivacyLedger((1.0, 1e-6))
    with pytest.raises(ParameterError, match="required_share"):
        run(codes, ledger=ledger, required=[("a", "b")], required_share=share)
    assert not ledger.charges
