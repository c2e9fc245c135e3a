"""NAPSU-MQ's NUTS run in blocks of iterations: the same chains however they are split, one
compiled program, nothing kept between runs, and progress with draws, rate and time left."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from synthinfer._jax import jax
from synthinfer.data import Domain, Marginal
from synthinfer.napsu import nuts
from synthinfer.napsu.laplace import laplace_approximation
from synthinfer.napsu.network import network_for
from synthinfer.progress import Progress, ProgressCounter, format_seconds

pytestmark = pytest.mark.usefixtures("float64")

# the toy domain and marginal of test_napsu_mq (the cached network is shared between files)
DOMAIN = Domain({"x1": [0, 1], "x2": [0, 1], "y": [0, 1]})


@pytest.fixture(scope="module")
def problem():
    """Noisy counts of the toy network with a near-empty cell (so the program has plateau
    jumps), and their Laplace fit."""
    net = network_for(DOMAIN, [Marginal(("x1", "x2", "y"))])
    n, sigma = 500, 5.0
    counts = np.array([120.0, 12.0, 90.0, 60.0, 80.0, 40.0, 70.0])
    s_tilde = counts + np.random.default_rng(0).normal(0.0, sigma, counts.shape)
    lap = laplace_approximation(net, s_tilde, sigma, n, rng=np.random.default_rng(1))
    return net, s_tilde, sigma, n, lap


def _sample(problem, seed=7, **kw):
    net, s_tilde, sigma, n, lap = problem
    kw = {"n_chains": 2, "num_warmup": 60, "num_samples": 80, **kw}
    return nuts.nuts_sample(net, s_tilde, sigma, n, lap, rng=np.random.default_rng(seed), **kw)


def _block_sizes(monkeypatch, sizes):
    """Make every chain's calls run blocks of these sizes in turn (then 1s); returns the list
    of (start-of-call) sizes used."""
    used: list[int] = []
    seq = iter(sizes)
    lock = threading.Lock()

    def fixed(size, seconds):
        with lock:
            used.append(size)
            return next(seq, 1)

    monkeypatch.setattr(nuts, "_next_block", fixed)
    return used


def test_a_chain_is_the_same_however_its_iterations_are_split_into_calls(problem, monkeypatch):
    monkeypatch.setattr(nuts, "FIRST_BLOCK", 10**9)  # one call per chain
    whole = _sample(problem)
    monkeypatch.setattr(nuts, "FIRST_BLOCK", 3)
    used = _block_sizes(monkeypatch, [1, 7, 50, 2, 61, 13] * 4)
    split = _sample(problem)
    assert len(used) > 2 * 6  # both chains ran many calls, across the end of warmup
    np.testing.assert_array_equal(split.draws, whole.draws)
    np.testing.assert_array_equal(split.diverging, whole.diverging)
    np.testing.assert_array_equal(split.step_size, whole.step_size)
    assert (split.n_grad_evals, split.n_grad_evals_warmup, split.n_jumps_accepted) == (
        whole.n_grad_evals, whole.n_grad_evals_warmup, whole.n_jumps_accepted)
    assert split.n_jump_cells > 0  # the program under test had plateau jumps
    assert split.draws.shape == (2, 80, problem[0].dimension) and np.all(np.isfinite(split.draws))
    assert 0 < split.n_grad_evals_warmup < split.n_grad_evals


def test_chains_run_on_in_passes_while_not_converged(problem):
    one = _sample(problem)
    seen: list[tuple] = []
    stages: list[str] = []
    more = _sample(problem, max_passes=3, unconverged=lambda d: seen.append(d.shape) or [f"ESS {len(seen)} < 9"],
                   progress=stages.append)
    d = problem[0].dimension
    assert more.passes == 3 and more.draws.shape == (2, 240, d) and more.diverging.shape == (2, 240)
    assert seen == [(2, 80, d), (2, 160, d)]  # every check on all the draws so far
    # each further pass says why it runs: the check's failures
    assert [s for s in dict.fromkeys(getattr(s, "stage", s) for s in stages) if "more draws" in s] == [
        "NUTS, more draws (pass 2: ESS 1 < 9)", "NUTS, more draws (pass 3: ESS 2 < 9)"]
    # the first pass is the one-pass run; later ones continue it with the adapted kernel, new randomness
    np.testing.assert_array_equal(more.draws[:, :80], one.draws)
    np.testing.assert_array_equal(more.step_size, one.step_size)
    assert more.n_grad_evals_warmup == one.n_grad_evals_warmup < one.n_grad_evals < more.n_grad_evals
    assert not np.array_equal(more.draws[:, 80:160], more.draws[:, :80])
    assert not np.array_equal(more.draws[:, 160:], more.draws[:, 80:160])
    assert np.all(np.isfinite(more.draws))
    done = _sample(problem, max_passes=3, unconverged=lambda d: [])
    assert done.passes == 1 and done.draws.shape == (2, 80, d)


def test_further_passes_take_the_draws_asked_for_up_to_max_passes_times_num_samples(problem):
    """``pass_draws``: a further pass of that many draws per chain (at most ``num_samples``),
    the same chains as whole passes, until the chains hold ``max_passes * num_samples``."""
    d = problem[0].dimension
    whole = _sample(problem, max_passes=3, unconverged=lambda draws: ["short"])
    asked: list[int] = []
    sized = _sample(problem, max_passes=3, unconverged=lambda draws: ["short"],
                    pass_draws=lambda draws: asked.append(draws.shape[1]) or 30)
    # 80 + 5 x 30 + 10 = 3 x 80: the last pass takes what is left
    assert asked == [80, 110, 140, 170, 200, 230] and sized.passes == 7
    assert sized.draws.shape == (2, 240, d) and sized.diverging.shape == (2, 240)
    # a shorter pass runs the same iterations as the start of a whole one (on its own key)
    np.testing.assert_array_equal(sized.draws[:, :80], whole.draws[:, :80])
    assert np.all(np.isfinite(sized.draws)) and not np.array_equal(sized.draws[:, 80:110], sized.draws[:, 110:140])
    assert whole.n_grad_evals_warmup == sized.n_grad_evals_warmup
    big = _sample(problem, max_passes=2, unconverged=lambda draws: ["short"], pass_draws=lambda draws: 10**6)
    assert big.passes == 2 and big.draws.shape == (2, 160, d)  # never more than num_samples a pass


def test_no_further_pass_once_the_draws_have_divergences_where_they_would_be_set_aside(problem):
    """``until_divergent`` (the backend's runs before a retry at a higher rate): a failed check
    runs no further pass over draws that have divergent transitions (target acceptance 0.3
    makes steps too long for this posterior); without it the passes go on as usual."""
    def failing(draws):
        return ["short"]

    on = _sample(problem, target_accept=0.3, max_passes=3, unconverged=failing)
    assert on.diverging[:, :80].any() and on.passes == 3
    stopped = _sample(problem, target_accept=0.3, max_passes=3, unconverged=failing, until_divergent=True)
    assert stopped.passes == 1 and stopped.draws.shape[1] == 80
    np.testing.assert_array_equal(stopped.draws, on.draws[:, :80])
    calm = _sample(problem, max_passes=3, unconverged=failing, until_divergent=True)
    assert not calm.diverging.any() and calm.passes == 3  # no divergences: the passes go on


def test_a_higher_target_acceptance_adapts_smaller_steps(problem):
    """The rate reaches the adaptation (a traced argument of the one program)."""
    bold, careful = _sample(problem, target_accept=0.6), _sample(problem, target_accept=0.95)
    assert careful.step_size.max() < bold.step_size.min()
    assert careful.n_grad_evals > bold.n_grad_evals  # smaller steps, longer trajectories


def test_a_resumed_run_goes_on_from_the_chains_with_a_new_step_size(problem):
    """``resume``: the chains keep their positions and mass matrices and adapt their step size
    anew over Stan's final fast window only, towards the new rate; the same posterior."""
    first = _sample(problem, num_warmup=200, num_samples=400)
    fresh = _sample(problem, seed=8, num_warmup=200, num_samples=400, target_accept=0.95)
    again = _sample(problem, seed=8, num_warmup=200, num_samples=400, target_accept=0.95, resume=first)
    slow, _ = nuts._stan_schedule(200, 400)
    window = 200 - (int(np.nonzero(slow)[0][-1]) + 1)
    assert (first.warmup, fresh.warmup, again.warmup) == (200, 200, window) and 0 < window < 200
    assert again.draws.shape == first.draws.shape and np.all(np.isfinite(again.draws))
    assert np.all(again.step_size < first.step_size)  # each chain's adapted towards 0.95, not kept at 0.8's
    # the mass matrices went on: each chain's is the one it had, not re-estimated
    for a, b in zip(again.states, first.states):
        np.testing.assert_array_equal(a.inverse_mass_matrix, b.inverse_mass_matrix)
    # this run's gradients only: a short warmup
    assert 0 < again.n_grad_evals_warmup < fresh.n_grad_evals_warmup / 2
    # the same posterior: means within 5 Monte Carlo standard errors (draws' sd / sqrt(draws))
    for run in (fresh, again):
        a, b = run.draws.reshape(-1, run.draws.shape[-1]), first.draws.reshape(-1, first.draws.shape[-1])
        se = np.sqrt(a.var(0) / len(a) + b.var(0) / len(b))
        assert np.all(np.abs(a.mean(0) - b.mean(0)) < 5 * se)
    with pytest.raises(ValueError, match="resume has 2 chains' states, n_chains is 3"):
        _sample(problem, n_chains=3, resume=first)


def test_a_chain_runs_as_calls_of_a_fraction_of_a_second_each(problem, monkeypatch):
    calls: list[tuple[int, float]] = []
    next_block = nuts._next_block

    def spy(size, seconds):
        calls.append((size, seconds))
        return next_block(size, seconds)

    monkeypatch.setattr(nuts, "_next_block", spy)
    monkeypatch.setattr(nuts, "BLOCK_SECONDS", 2e-3)  # a few iterations of the toy model
    _sample(problem, n_chains=1, num_warmup=300, num_samples=300)
    assert sum(size for size, _ in calls) == 600 and len(calls) >= 10  # not one call for the whole chain
    assert calls[0][0] == nuts.FIRST_BLOCK


def test_blocks_aim_at_a_fraction_of_a_second():
    assert nuts._next_block(10, nuts.BLOCK_SECONDS) == 10  # on target: keep the size
    assert nuts._next_block(10, nuts.BLOCK_SECONDS * 4) == 2  # too slow: shrink freely
    assert nuts._next_block(10, 1e-9) == 80  # fast: grow at most 8-fold a call
    assert nuts._next_block(1, 100.0) == 1  # never below one iteration
    assert nuts.BLOCK_SECONDS <= 0.5  # a call holds what XLA keeps during it for a fraction of a second


def test_one_compiled_program_runs_every_block_refit_and_target_acceptance(problem, monkeypatch):
    _sample(problem)  # compiled (or taken from the network's cache) here
    compiles: list[str] = []

    def listener(event, duration, **kw):
        if "backend_compile" in event:
            compiles.append(event)

    jax.monitoring.register_event_duration_secs_listener(listener)
    try:
        monkeypatch.setattr(nuts, "FIRST_BLOCK", 1)
        _block_sizes(monkeypatch, [2, 5, 9, 40])
        _sample(problem, seed=3)
        monkeypatch.setattr(nuts, "FIRST_BLOCK", 10**9)
        _sample(problem, seed=4)
        _sample(problem, seed=5, target_accept=0.9)  # a run again at a higher rate (after divergences)
    finally:
        jax.monitoring.unregister_event_duration_listener(listener)
    assert compiles == []


def test_nothing_is_kept_between_runs(problem):
    import gc

    _sample(problem)
    gc.collect()
    before = len(jax.live_arrays())
    for seed in range(3):
        _sample(problem, seed=seed)
    gc.collect()
    assert len(jax.live_arrays()) <= before


def test_progress_reports_draws_per_chain_rate_and_time_left(problem):
    messages: list[str] = []
    res = _sample(problem, progress=messages.append, n_chains=3)
    reports = [r for r in messages if isinstance(r, Progress)]
    assert set(messages[: len(messages) - len(reports)]) <= {"NUTS: compiling"}  # while the program compiles
    assert all(r.stage == "NUTS" for r in reports)
    first, last = reports[0], reports[-1]
    total = 3 * (60 + 80)  # warmup draws count
    assert (first.done, first.total, first.parts, first.rate, first.eta) == (0, total, (0, 0, 0), None, None)
    assert (last.done, last.parts, last.part_total) == (total, (140, 140, 140), 140)
    assert last.rate > 0 and last.eta == 0 and last.fraction == 1.0
    assert all(sum(r.parts) == r.done for r in reports)
    assert [r.done for r in reports] == sorted(r.done for r in reports)
    assert str(last).startswith(f"NUTS: {total:,}/{total:,} draws, chains 140 140 140 of 140 each, ")
    assert res.draws.shape[0] == 3


def test_progress_counter_throttles_and_measures_the_recent_rate():
    now = [0.0]
    seen: list[Progress] = []
    counter = ProgressCounter("NUTS", 2, 100, "draws", seen.append, part_name="chains", min_interval=0.5,
                              window=10.0, clock=lambda: now[0])
    counter.start()
    for _ in range(8):  # 16 draws a second for 1 s, added every 1/8 s
        now[0] += 0.125
        counter.add(0, 2)
    assert [r.done for r in seen] == [0, 8, 16]  # the start, then one report per 0.5 s
    assert seen[-1].rate == pytest.approx(16.0)
    for k in range(30):  # then one draw a second: the rate follows within the 10 s window
        now[0] += 1.0
        counter.add(k % 2, 1)
    last = seen[-1]
    assert last.done == 46 and last.parts == (31, 15)
    assert last.rate == pytest.approx(1.0) and last.eta == pytest.approx(154.0) and last.elapsed == pytest.approx(31.0)
    now[0] += 0.01  # the last draw is always reported, however soon after the one before
    counter.add(0, 69)
    assert seen[-1] is last  # not yet
    counter.add(1, 85)
    assert seen[-1].done == 200 and seen[-1].eta == 0 and seen[-1].parts == (100, 100)


def test_progress_counter_is_safe_to_share_between_threads():
    seen: list[Progress] = []
    counter = ProgressCounter("NUTS", 4, 500, "draws", seen.append, min_interval=0.0)
    counter.start()
    threads = [threading.Thread(target=lambda c=c: [counter.add(c, 1) for _ in range(500)]) for c in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert seen[-1].done == 2000 and seen[-1].parts == (500,) * 4
    assert [r.done for r in seen] == sorted(r.done for r in seen)  # a late, older report is dropped


def test_progress_is_a_string_that_keeps_its_numbers():
    import copy
    import pickle

    p = Progress("NUTS", done=5600, total=11200, unit="draws", parts=(2800, 2800, 0, 0), part_total=2800,
                 part_name="chains", rate=52.25, eta=108.0, elapsed=90.0)
    assert p == "NUTS: 5,600/11,200 draws, chains 2,800 2,800 0 0 of 2,800 each, 52.2 draws/s, 1m48s left"
    assert p.details == "chains 2,800 2,800 0 0 of 2,800 each, 52.2 draws/s, 1m48s left"
    for q in (pickle.loads(pickle.dumps(p)), copy.copy(p)):
        assert q == p and (q.parts, q.rate, q.eta, q.fraction) == ((2800, 2800, 0, 0), 52.25, 108.0, 0.5)
    assert [format_seconds(s) for s in (0.4, 59, 61, 3599, 7620)] == ["0s", "59s", "1m01s", "59m59s", "2h07m"]


def test_measurements_in_a_layout_give_the_same_chains_as_the_canonical_queries(problem):
    """The same values passed as measurements (the canonical layout, one sd per value) define
    the same density, map and jumps: the chains agree draw for draw."""
    from synthinfer.napsu.structured import canonical_layout

    net, s_tilde, sigma, n, lap = problem
    plain = _sample(problem, num_warmup=30, num_samples=30)
    layout = canonical_layout(net.queries)
    as_measured = nuts.nuts_sample(net, s_tilde, np.full(s_tilde.size, sigma), n, lap, layout=layout, n_chains=2,
                                   num_warmup=30, num_samples=30, rng=np.random.default_rng(7))
    np.testing.assert_allclose(as_measured.draws, plain.draws, rtol=0, atol=1e-8)
    assert as_measured.n_one_sided == plain.n_one_sided and as_measured.n_jump_cells == plain.n_jump_cells


def test_repeated_measurements_change_the_map_as_their_combination(problem):
    """A query measured twice: the map and jumps read the inverse-variance combination."""
    from synthinfer.napsu.structured import canonical_layout, canonical_summary

    net, s_tilde, sigma, n, _ = problem
    layout = canonical_layout(net.queries)
    twice = layout + layout
    y = np.concatenate([s_tilde, s_tilde + 4.0])
    sd = np.concatenate([np.full(s_tilde.size, sigma), np.full(s_tilde.size, 2.0 * sigma)])
    s, s_sd = canonical_summary(net.queries, twice, y, sd)
    np.testing.assert_allclose(s, s_tilde + 4.0 * 0.2)  # weights 1 and 1/4 of the total 5/4
    np.testing.assert_allclose(s_sd, sigma / np.sqrt(1.25))
