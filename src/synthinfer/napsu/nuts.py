"""NUTS for NAPSU-MQ's posterior (Hoffman & Gelman 2014; BlackJAX), preconditioned by the Laplace fit.

Sampling runs in whitened coordinates with the one-sided map of near-empty cells
(:mod:`synthinfer.napsu.reparam`) and plateau jumps (:mod:`synthinfer.napsu.jumps`). One
compiled program, held in the network's program cache per settings, runs every chain in
blocks of iterations, so refits with new noisy counts or epsilon do not recompile.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np

from synthinfer._jax import float64, jax, jnp, uses_float64
from synthinfer._system import usable_cores
from synthinfer.errors import ParameterError
from synthinfer.mcmc import batched_ess, import_arviz
from synthinfer.napsu.jumps import PlateauJumps, axis_jumps, jump_sweep, line_jumps, plateau_jumps
from synthinfer.napsu.laplace import LaplaceResult
from synthinfer.napsu.likelihood import PRIOR_SD, batch_size, evaluate_in_batches, objective, posterior_args, values
from synthinfer.napsu.network import compiles_quick
from synthinfer.napsu.reparam import OneSidedMap, one_sided_cells, one_sided_map, to_theta
from synthinfer.napsu.structured import canonical_summary, layout_size
from synthinfer.privacy.randomness import jax_key_data, jax_key_data_spec
from synthinfer.progress import ProgressCounter

if TYPE_CHECKING:
    from synthinfer.napsu.network import MarkovNetwork
    from synthinfer.napsu.structured import Layout

#: Parameters (those with the smallest bulk ESS) examined for jumps along their regression lines
#: after a failed convergence check (:func:`synthinfer.napsu.jumps.line_jumps`).
LINE_JUMP_CANDIDATES = 4

#: NUTS's target acceptance rate for step-size adaptation by default: Stan's and BlackJAX's 0.8
#: (Hoffman & Gelman 2014, Section 3.2; higher means smaller steps and fewer divergences)
TARGET_ACCEPT = 0.8


@dataclass
class NUTSResult:
    """NUTS draws of theta, shape ``(chains, draws, d)``, with sampler statistics."""

    draws: np.ndarray
    diverging: np.ndarray  # (chains, draws) bool, post-warmup
    n_grad_evals: int  # leapfrog steps + gradients after accepted jumps, warmup + sampling, all chains
    n_grad_evals_warmup: int
    step_size: np.ndarray  # (chains,)
    seconds: float  # warmup + sampling, including compilation on the first call
    n_one_sided: int = 0  # parameters sampled through the one-sided map
    n_jump_cells: int = 0  # parameters with jumps: a log-density value (no gradient) per proposal, each iteration
    n_jumps_accepted: int = 0  # post-warmup, all chains
    n_jump_updates: int = 0  # post-warmup jump proposals, all chains (jumps may be added between passes)
    passes: int = 1  # sampling passes: num_samples draws per chain, then further ones while not converged
    set_aside: int = 0  # draws per chain of the passes before jumps were added, set aside as warmup
    warmup: int = 0  # warmup iterations per chain in this run (fewer when resumed)
    states: tuple = ()  # each chain's final state, on the host: what ``nuts_sample(resume=...)`` continues
    jumps: PlateauJumps | None = None  # the jumps' proposals, which a resumed run reuses


def _stan_schedule(num_warmup: int, num_samples: int) -> tuple[np.ndarray, np.ndarray]:
    """Per-iteration flags ``(slow, window_end)`` over warmup and sampling: Stan's warmup
    schedule (BlackJAX's ``build_schedule``: a fast window adapting the step size, doubling
    slow windows that also estimate the mass matrix, a final fast window), all False after
    warmup."""
    from blackjax.adaptation.window_adaptation import build_schedule

    total = num_warmup + num_samples
    slow, end = np.zeros(total, bool), np.zeros(total, bool)
    if num_warmup:
        with jax.ensure_compile_time_eval():  # called while tracing: keep it concrete
            sched = np.asarray(build_schedule(num_warmup))
        slow[:num_warmup], end[:num_warmup] = sched[:, 0] == 1, sched[:, 1].astype(bool)
    return slow, end


class _ChainState(NamedTuple):
    """Everything one chain carries from one call of its program to the next."""

    nuts: Any  # BlackJAX's HMCState: position, log density, its gradient
    step_size_adaptation: Any  # dual averaging state
    mass_adaptation: Any  # Welford state and the current inverse mass matrix
    step_size: jax.Array
    inverse_mass_matrix: jax.Array
    draws: jax.Array  # (num_samples, d): theta after each post-warmup iteration
    diverging: jax.Array  # (num_samples,)
    grads_warmup: jax.Array  # gradient evaluations so far, warmup
    grads: jax.Array  # and sampling
    jumps_accepted: jax.Array  # post-warmup jumps accepted


def _log_density(data, neg_log_posterior) -> Callable[[jax.Array], jax.Array]:
    """The log posterior density of the sampler's coordinates ``u``: of ``theta(u)`` (the
    one-sided map) plus the map's log Jacobian."""
    args, map_arrays, _ = data  # args: likelihood.posterior_args

    def logdensity(u):
        theta, log_jac = to_theta(u, map_arrays)
        return log_jac - neg_log_posterior(theta, *args)

    return logdensity


def _chain_start(z_init, data, *, neg_log_posterior, num_samples) -> _ChainState:
    """A chain's state before its first iteration: at ``z_init``, step size 1, unit mass matrix."""
    import blackjax.mcmc.nuts as nuts
    from blackjax.adaptation.mass_matrix import mass_matrix_adaptation

    d = z_init.shape[0]
    mm0 = mass_matrix_adaptation(True)[0](d)  # diagonal
    da0 = _step_size_adaptation_start(1.0)
    zero = jnp.zeros((), jnp.int64)
    return _ChainState(nuts.init(z_init, _log_density(data, neg_log_posterior)), da0, mm0, jnp.asarray(1.0, z_init.dtype),
                       mm0.inverse_mass_matrix, jnp.zeros((num_samples, d), z_init.dtype), jnp.zeros(num_samples, bool),
                       zero, zero, zero)


def _nuts_chain(state, key_data, z_init, data, start, stop, target_accept, *, neg_log_posterior, num_warmup,
                num_samples, max_tree_depth, jump_moves):
    """Iterations ``start, ..., stop - 1`` of one chain: Stan window adaptation towards the
    acceptance rate ``target_accept``, then NUTS, on the reparametrised posterior ``theta(u)``;
    returns the chain's :class:`_ChainState` after them.

    At ``start == 0`` the chain starts at ``z_init`` (:func:`_chain_start`; ``state`` is then
    only a placeholder of the right shapes). Iterations ``0 .. num_warmup - 1`` are warmup:
    one NUTS kernel whose step size and inverse mass matrix are carried values, updated after
    each step by BlackJAX's dual averaging and Welford mass-matrix estimators on Stan's
    schedule (the algorithm of ``blackjax.window_adaptation``); after them both stay fixed and
    ``theta`` is stored after each iteration. Why not ``window_adaptation`` followed by a
    sampling loop: that traces and compiles the NUTS tree-building loops twice, and compiling
    them is most of a small model's wait. Why a range of iterations per call rather than the
    whole chain: see :func:`nuts_sample`. Iteration ``i`` draws its randomness from
    ``fold_in(key, i)``, so a chain's draws do not depend on how its iterations are split into
    calls. ``key_data`` is the raw data of the chain's PRNG key
    (:func:`synthinfer.privacy.jax_key_data`: making keys with ``jax.random.key``/``split``
    outside would compile two more programs first).
    """
    import blackjax.mcmc.nuts as nuts
    from blackjax.adaptation.mass_matrix import mass_matrix_adaptation
    from blackjax.adaptation.step_size import dual_averaging_adaptation

    _, map_arrays, jump_arrays = data
    logdensity = _log_density(data, neg_log_posterior)
    _, mm_update, mm_final = mass_matrix_adaptation(True)  # diagonal
    da_init, da_update, da_final = dual_averaging_adaptation(target_accept)
    kernel = nuts.build_kernel()
    slow_at, end_at = (jnp.asarray(f) for f in _stan_schedule(num_warmup, num_samples))
    key = jax.random.wrap_key_data(key_data)

    def first():
        return _chain_start(z_init, data, neg_log_posterior=neg_log_posterior, num_samples=num_samples)

    def pick(flag, a, b):
        return jax.tree.map(lambda x, y: jnp.where(flag, x, y), a, b)

    def step(i, c: _ChainState) -> _ChainState:
        k_nuts, k_jump = jax.random.split(jax.random.fold_in(key, i))
        warm, last = i < num_warmup, i == num_warmup - 1
        st, info = kernel(k_nuts, c.nuts, logdensity, c.step_size, c.inverse_mass_matrix,
                          max_num_doublings=max_tree_depth)
        accepted = jnp.asarray(0, jnp.int32)
        if jump_moves:  # jumps (synthinfer.napsu.jumps); a new gradient only if one was accepted
            u, logp, accepted = jump_sweep(k_jump, st.position, st.logdensity, logdensity, *jump_arrays)
            st = jax.lax.cond(accepted > 0, lambda: nuts.init(u, logdensity), lambda: st)
        grads = info.num_integration_steps + (accepted > 0)
        # warmup: dual averaging every step, Welford in slow windows, new mass matrix and a
        # restarted dual averaging at each slow window's end (Stan's schedule)
        ss = da_update(c.step_size_adaptation, info.acceptance_rate)
        mm = pick(slow_at[i], mm_update(c.mass_adaptation, st.position), c.mass_adaptation)
        mm, ss = jax.lax.cond(end_at[i], lambda m, a: (mm_final(m), da_init(da_final(a))), lambda m, a: (m, a), mm, ss)
        eps = jnp.where(last, jnp.exp(ss.log_step_size_avg), jnp.exp(ss.log_step_size))
        adapted = pick(warm, (ss, mm, eps, mm.inverse_mass_matrix),
                       (c.step_size_adaptation, c.mass_adaptation, c.step_size, c.inverse_mass_matrix))
        # theta after every iteration: warmup ones in turn in the draws' buffer (:func:`nuts_sample`
        # reads the last slow window's back for the line-jump screen), overwritten by the sampling ones
        j = jnp.where(warm, i % num_samples, jnp.clip(i - num_warmup, 0, num_samples - 1))
        return _ChainState(
            st, *adapted,
            draws=c.draws.at[j].set(to_theta(st.position, map_arrays)[0]),
            diverging=c.diverging.at[j].set(jnp.where(warm, c.diverging[j], info.is_divergent)),
            grads_warmup=c.grads_warmup + jnp.where(warm, grads, 0),
            grads=c.grads + jnp.where(warm, 0, grads),
            jumps_accepted=c.jumps_accepted + jnp.where(warm, 0, accepted),
        )

    state = jax.lax.cond(start == 0, first, lambda: state)
    return jax.lax.fori_loop(start, stop, step, state)


def _shape_stand_in(theta: jax.Array, *args: Any) -> jax.Array:
    """A log density with the shapes of the real one (:func:`compile_nuts`)."""
    return jnp.sum(theta)


#: The program's static settings. The target acceptance rate is a traced argument: a run again
#: at a higher rate after divergences (``NUTSBackend``) reuses the compiled program.
_NUTS_STATIC = ("num_warmup", "num_samples", "max_tree_depth", "jump_moves")


def _nuts_jit(network: MarkovNetwork, layout: Layout | None) -> Callable:
    """The jitted :func:`_nuts_chain` of one network, held in its program cache. The network is
    bound by a closure: not a static argument, which JAX's caches keep alive, nor a partial,
    whose bound values show in the signature JAX caches (see
    :func:`synthinfer.napsu.likelihood._posterior_objectives`): either would keep the network
    and its programs alive for good. The chain's state is donated: each call updates it in
    place instead of copying the draws. ``layout``: the measured values' (``None``: ``s~``)."""
    neg_log_posterior = objective(network, "neg_log_posterior", layout)[0]  # eq. 6 by message passing, plus the prior

    def chain(state, key_data, z_init, data, start, stop, target_accept, *, num_warmup, num_samples, max_tree_depth,
              jump_moves):
        return _nuts_chain(state, key_data, z_init, data, start, stop, target_accept,
                           neg_log_posterior=neg_log_posterior, num_warmup=num_warmup, num_samples=num_samples,
                           max_tree_depth=max_tree_depth, jump_moves=jump_moves)

    return network.programs.get(("nuts", layout),
                                lambda: jax.jit(chain, static_argnames=_NUTS_STATIC, donate_argnums=0))


def compile_nuts(network: MarkovNetwork, *, num_warmup: int = 800, num_samples: int = 2000,
                 max_tree_depth: int = 12, jump_moves: bool = True, layout: Layout | None = None) -> Future:
    """Start compiling the NUTS program for a network and settings in a background thread.

    The program depends only on the network and the shapes (every datum, and the range of
    iterations a call runs, is a traced argument), so it can be compiled while the Laplace
    approximation, which :func:`nuts_sample` needs first, runs: on two cores the two overlap.
    Returns a future of the compiled program; :func:`nuts_sample` reuses it (one compilation
    per network and settings; the target acceptance rate is an argument of the program, so runs
    at different rates share it). ``jump_moves=False`` compiles the program without jumps, for
    data with no parameter that could get one (:func:`jump_candidates`, known before the Laplace
    fit): a smaller program, which on small models is most of the wait.
    ``layout``: as for :func:`nuts_sample`.
    """
    settings = dict(num_warmup=int(num_warmup), num_samples=int(num_samples), max_tree_depth=int(max_tree_depth),
                    jump_moves=bool(jump_moves))
    d = int(network.dimension)

    def lower():
        # argument shapes and dtypes from the same builders nuts_sample uses, on placeholders
        # the canonical queries' noisy counts (as many as parameters unless some are tied) or AIM's values
        m = network.queries.canonical.dimension if layout is None else layout_size(layout)
        data = (posterior_args(np.zeros(m), 1.0, 1, 1.0),
                OneSidedMap(np.zeros(d, bool), np.zeros(d), np.ones(d), np.zeros(d), np.eye(d)).arrays(),
                PlateauJumps.none(d).arrays())
        shapes = jax.tree.map(lambda a: jax.ShapeDtypeStruct(a.shape, a.dtype), data)
        z = jax.ShapeDtypeStruct((d,), np.float64)
        index = jax.ShapeDtypeStruct((), np.int32)
        rate = jax.ShapeDtypeStruct((), np.float64)
        # the state's shapes do not depend on the density: a stand-in with the same output
        # (a float64 scalar) spares tracing the likelihood once more (most of a small model's wait)
        state = jax.eval_shape(lambda z0, data: _chain_start(z0, data, neg_log_posterior=_shape_stand_in,
                                                             num_samples=settings["num_samples"]), z, shapes)
        return _nuts_jit(network, layout).lower(state, jax_key_data_spec(), z, shapes, index, index, rate,
                                                **settings)

    return network.programs.compile_ahead(("nuts", tuple(sorted(settings.items())), layout), lower,
                                          quick=compiles_quick(d))


#: Seconds a call of the NUTS program should last (see :func:`nuts_sample`): long enough that
#: the per-call overhead (a fraction of a millisecond) is lost in the noise, short enough to
#: bound the memory XLA holds during a call and to report progress a few times a second.
BLOCK_SECONDS = 0.5
#: Iterations of a chain's first call, before its speed is known.
FIRST_BLOCK = 4


def _next_block(size: int, seconds: float) -> int:
    """Iterations of a chain's next call after ``size`` took ``seconds``: aimed at
    :data:`BLOCK_SECONDS`, growing at most 8-fold a call (early warmup iterations cost far more
    than later ones, so one fast block is weak evidence) and shrinking freely."""
    target = size * BLOCK_SECONDS / max(seconds, 1e-6)
    return int(max(1, min(8 * size, target)))


@uses_float64
def nuts_sample(
    network: MarkovNetwork,
    s_tilde: np.ndarray,
    sigma_dp: float | np.ndarray,
    n: int,
    laplace: LaplaceResult,
    *,
    layout: Layout | None = None,
    prior_sd: float = PRIOR_SD,
    cell_prior: float = 0.0,
    interaction_sd: float | None = None,
    n_chains: int = 4,
    num_warmup: int = 800,
    num_samples: int = 2000,
    max_tree_depth: int = 12,
    target_accept: float = TARGET_ACCEPT,
    one_sided_threshold: float = 5.0,
    dropped_cell_jacobian: Callable[[jax.Array], jax.Array] | None = None,
    jump_moves: bool = True,
    max_workers: int | None = None,
    max_passes: int = 1,
    unconverged: Callable[[np.ndarray], Sequence[str]] | None = None,
    pass_draws: Callable[[np.ndarray], int] | None = None,
    until_divergent: bool = False,
    progress: Callable[[str], None] | None = None,
    resume: NUTSResult | None = None,
    rng: np.random.Generator,
) -> NUTSResult:
    """NUTS (Hoffman & Gelman 2014; BlackJAX) on the posterior, preconditioned by the Laplace fit.

    Sampling runs in ``z = chol^{-1} (theta - mean)`` (dense preconditioning, NAPSU-MQ Section
    5.2), where the posterior is close to standard normal, except for the parameters of
    near-empty cells (noisy count below ``one_sided_threshold`` noise standard deviations),
    which get the one-sided map of :mod:`synthinfer.napsu.reparam` (an exact change of
    variables that compresses their prior-dominated flat sides; ``one_sided_threshold=-inf``
    turns it off). ``dropped_cell_jacobian(theta)``, the Jacobian of the log-probabilities of
    the cells the canonical parametrisation dropped
    (``MarkovNetwork.dropped_cell_log_prob_jacobian``), lets the map align the emptying
    directions of such cells with coordinate axes; without it they are left to plain NUTS.
    With ``jump_moves`` (default), each NUTS transition is followed by independence
    Metropolis-Hastings updates that jump one-sided cells between their bulk and their
    empty-cell plateau (:mod:`synthinfer.napsu.jumps`; a barrier NUTS alone crosses a few
    times per chain), one log-density evaluation per such cell and iteration.
    The map and these jumps are shaped for the plateaus of the ``N(0, prior_sd^2)`` prior; with the
    cell prior (``cell_prior > 0``, :func:`synthinfer.napsu.likelihood.log_cell_prior`) or the
    interaction prior (``interaction_sd``), which have none, whitened NUTS without the map is faster
    (``one_sided_threshold=-inf``; measured in docs/napsu-sampler.md). There ``jump_moves``
    updates the parameters of near-empty cells (:func:`synthinfer.napsu.reparam.one_sided_cells`)
    whose conditional posterior has a second region below its bulk, along their own axes
    (:func:`synthinfer.napsu.jumps.axis_jumps`, at most ``MAX_AXIS_JUMPS``; screening them costs
    a few log-density values per near-empty cell before sampling, once per run and its resumed
    runs). Either way the target is the posterior.
    Stan-style window adaptation then tunes the step size and a diagonal mass matrix during
    the ``num_warmup`` draws (a dense one was slower on Adult; see docs/).
    Chains start at independent ``N(u*, I)`` draws around the Laplace mean's position
    ``u*``.

    ``layout=None``: ``s_tilde`` are the canonical queries' noisy counts and ``sigma_dp`` their
    noise sd. Otherwise they are any measured values in the order of ``layout`` (AIM's
    measurements; :mod:`synthinfer.napsu.structured`) with one sd each: the density is eq. 6 on
    them, and the map and the jumps read each canonical query's inverse-variance combination
    of its direct measurements (:func:`synthinfer.napsu.structured.canonical_summary`).

    One compiled program runs every chain (cached per network and settings: refits with new
    noisy statistics or epsilon do not recompile); chains run side by side in
    ``max_workers`` threads (default: one per core the process may use). That beats ``vmap``-ing them: a
    vmapped NUTS step lasts as long as the longest of the chains' trees, and batching gives
    no speed-up per gradient on CPU.

    With ``max_passes > 1`` and ``unconverged(draws)`` (the convergence check's failures, e.g.
    ``["min bulk ESS 150 < 200"]``; empty when the draws pass) not empty after the
    ``num_samples`` draws per chain, every chain continues from where it stopped, with its
    adapted step size and mass matrix and fresh randomness, for a further pass of
    ``pass_draws(draws)`` draws (default and at most ``num_samples``; e.g. sized to the ESS
    still missing), until the check passes on all the draws so far or the chains hold
    ``max_passes * num_samples`` draws each (the progress stage names the failures; "run the
    chains longer", the remedy Stan's diagnostics advise: the adaptation is over, so later
    draws are from the same kernel). Where the axis jumps run, the :data:`LINE_JUMP_CANDIDATES`
    parameters with the smallest bulk ESS are screened for a second region along their
    regression lines in the draws so far, and those that have one get a jump along it from then
    on (:func:`synthinfer.napsu.jumps.line_jumps`): first on the positions of warmup's last slow
    window (the chains wait for each other there; jumps found then are part of the sampling
    kernel from its first draw, the final fast window adapting the step size to them), then
    before each further pass. Each pass's kernel leaves the posterior invariant and it changes
    at most ``max_passes - 1`` times (finite adaptation: Roberts & Rosenthal 2007, "Coupling and
    ergodicity of adaptive MCMC", J. Appl. Probab. 44: after the last change the chains are a
    fixed ergodic kernel's). The program is the same (its sampling iterations run again on a
    new key, a shorter pass stopping early; the jumps are traced arguments), so nothing
    recompiles. With ``until_divergent``, no further pass runs once the draws have a divergent
    transition: a caller that then samples again with smaller steps (``resume``) would set them
    aside.

    ``resume``: an earlier run on the same posterior and settings (e.g. one whose draws had
    divergent transitions), whose chains go on from their final states instead of starting
    again at the Laplace fit: each keeps its position and adapted mass matrix, adapts its step
    size anew towards ``target_accept`` over Stan's final fast window only (dual averaging
    restarted at its last step size, as at the end of each of Stan's slow windows), then
    draws as above. The mass matrix estimates the posterior's scales, which do not depend on
    the target rate; the final window is where Stan's own warmup settles the step size. The
    result counts the gradients of this run only. With no slow window (a warmup too short for
    Stan's schedule) the chains start again from the Laplace fit.

    Each call of the program runs a block of a chain's iterations sized to last about
    :data:`BLOCK_SECONDS`, and the chain's state goes from one call to the next (donated, so
    updated in place). Why blocks: while calls of an XLA:CPU program run side by side, the
    heap memory each holds grows with its running time and is given back only when it
    returns, so one call per chain grew without bound over a long run
    (``benchmarks/napsu/nuts_memory.py``); blocks bound it to a fraction of a second's worth.
    They also let the chains report their draws: ``progress`` receives
    ``"NUTS: compiling"`` while it waits for the program, then a
    :class:`synthinfer.progress.Progress` (a ``str`` with the numbers: draws done of all
    chains, warmup included, per chain, the rate and the time left) when sampling starts and
    at most every half second after.
    """
    d = int(network.dimension)
    # the one-sided map and the jumps read a noisy count and noise sd per parameter
    s_map, sigma_map = _per_parameter(network, s_tilde, sigma_dp, layout)
    mu_mode = np.asarray(network.mean_and_cov(jnp.asarray(laplace.mean))[0])
    jd = None if dropped_cell_jacobian is None else np.asarray(dropped_cell_jacobian(jnp.asarray(laplace.mean)))
    umap = one_sided_map(s_map, sigma_map, n, mu_mode, laplace.mean, laplace.cov,
                         prior_sd=prior_sd, threshold=one_sided_threshold, dropped_jacobian=jd)
    args = posterior_args(s_tilde, sigma_dp, n, prior_sd, cell_prior, interaction_sd)
    line_moves = False  # jumps along regression lines (after warmup, after a failed check): where the axis jumps run
    if one_sided_threshold > -np.inf:  # the map (a threshold of -inf flags no cell): plateau jumps
        jump_moves = bool(jump_moves and umap.mask.any())
        jumps = (plateau_jumps(umap, s_map, sigma_map, n, mu_mode, prior_sd=prior_sd) if jump_moves
                 else PlateauJumps.none(d))
    elif jump_moves and (cell_prior > 0 or interaction_sd is not None):  # jumps along the parameters' axes
        values_program, size = values(network, "neg_log_posterior", layout), batch_size(network)

        def log_posterior(points: np.ndarray) -> np.ndarray:
            return -evaluate_in_batches(values_program, points, args, size)

        if resume is not None and resume.jumps is not None:
            jumps = resume.jumps  # the same posterior and Laplace fit: the same proposals
        else:
            jumps = axis_jumps(log_posterior, umap.loc, umap.linear, _axis_candidates(s_map, sigma_map),
                               prior_scale=interaction_sd)
        line_moves = True
    else:  # the paper's prior without the map: plain NUTS
        jump_moves, jumps = False, PlateauJumps.none(d)
    data = (args, umap.arrays(), jumps.arrays())
    z0 = umap.to_u(laplace.mean) + rng.standard_normal((n_chains, d))
    keys = jax_key_data(rng, n_chains)
    t0 = time.perf_counter()
    program = compile_nuts(network, num_warmup=num_warmup, num_samples=num_samples, max_tree_depth=max_tree_depth,
                           jump_moves=jump_moves, layout=layout)
    if not program.done():
        if progress is not None:
            progress("NUTS: compiling")
        # ArviZ, which holds the posterior next, takes a noticeable time to import: do it while
        # XLA compiles (which releases the GIL) rather than after the chains
        import_arviz()
    program = program.result()
    total = num_warmup + num_samples
    rate = np.float64(target_accept)
    if resume is not None:
        if len(resume.states) != n_chains:
            raise ParameterError(f"resume has {len(resume.states)} chains' states, n_chains is {n_chains}")
        begin, starts = _resume_states(resume.states, num_warmup, num_samples)
    else:
        # the first call's placeholder state: the program's result has the state's shapes
        begin, starts = 0, [jax.tree.map(lambda a: np.zeros(a.shape, a.dtype), program.out_info)] * n_chains
    counter = ProgressCounter("NUTS", n_chains, total - begin, "draws", progress, part_name="chains")

    def run(c: int, state: _ChainState, key: np.ndarray, start: int, count: ProgressCounter,
            end: int = total) -> _ChainState:
        size = FIRST_BLOCK
        with float64():  # a thread of its own: synthinfer's float64 context is per thread
            while start < end:
                stop = min(end, start + size)
                t = time.perf_counter()
                state = jax.block_until_ready(program(state, key, z0[c], data, np.int32(start), np.int32(stop),
                                                      rate))
                size = _next_block(stop - start, time.perf_counter() - t)
                count.add(c, stop - start)
                start = stop
        return state

    counter.start()
    workers = max(1, min(n_chains, max_workers or usable_cores()))
    # where the line jumps run (not on resuming, whose run keeps the earlier one's jumps), the
    # chains stop after warmup's last slow window for a first screen of its positions
    window = _last_slow_window(num_warmup) if line_moves and not begin else None
    start = begin
    with ThreadPoolExecutor(workers) as pool:
        if window is not None:
            first, stop = window
            outs = list(pool.map(lambda c: run(c, starts[c], keys[c], 0, counter, stop), range(n_chains)))
            rows = np.arange(max(first, stop - num_samples), stop) % num_samples  # where _nuts_chain put them
            lined = _screen_lines(log_posterior, jumps, np.stack([np.asarray(o.draws)[rows] for o in outs]))
            if lined is not jumps:  # still warmup: the final fast window adapts the step size to them
                jumps, data = lined, (args, umap.arrays(), lined.arrays())
            starts, start = outs, stop
        outs = list(pool.map(lambda c: run(c, starts[c], keys[c], start, counter), range(n_chains)))
        # copies (np.stack): a next pass donates the states' buffers to the program
        draws = [np.stack([np.asarray(o.draws) for o in outs])]
        diverging = [np.stack([np.asarray(o.diverging, dtype=bool) for o in outs])]
        jump_updates = jumps.count * num_samples * n_chains  # post-warmup, for the acceptance rate
        left = (max_passes - 1) * num_samples  # further draws per chain the passes may still take
        passes, set_aside = 1, 0
        while left > 0 and unconverged is not None and not (until_divergent and any(x.any() for x in diverging)):
            so_far = np.concatenate(draws, axis=1)
            if not (failures := unconverged(so_far)):
                break
            # the same program's sampling iterations again, from each chain's last state: the
            # first k of them (a shorter pass fills the start of the draws buffer)
            k = min(left, num_samples if pass_draws is None else int(np.clip(pass_draws(so_far), 1, num_samples)))
            if line_moves:
                lined = _screen_lines(log_posterior, jumps, so_far)
                if lined is not jumps:
                    jumps, data = lined, (args, umap.arrays(), lined.arrays())
                    if not any(x.any() for x in diverging):  # (draws with divergences stay, for the retry)
                        # a new kernel: the draws so far, which mixed without it, become warmup, and
                        # the check starts again on a whole pass of the new kernel's draws
                        set_aside, draws, diverging = set_aside + so_far.shape[1], [], []
                        k = min(left, num_samples)
            left -= k
            passes += 1
            jump_updates += jumps.count * k * n_chains
            more = ProgressCounter(f"NUTS, more draws (pass {passes}: {'; '.join(failures)})",
                                   n_chains, k, "draws", progress, part_name="chains")
            more.start()
            keys = jax_key_data(rng, n_chains)
            outs = list(pool.map(lambda c: run(c, outs[c], keys[c], num_warmup, more, num_warmup + k),
                                 range(n_chains)))
            draws.append(np.stack([np.asarray(o.draws)[:k] for o in outs]))
            diverging.append(np.stack([np.asarray(o.diverging, dtype=bool)[:k] for o in outs]))
    seconds = time.perf_counter() - t0
    # the states' counters run on across passes, and from a resumed run's (unless it started over)
    before = (0, 0, 0) if not begin else tuple(sum(int(getattr(o, f)) for o in resume.states)
                                                for f in ("grads_warmup", "grads", "jumps_accepted"))
    warm = int(sum(int(o.grads_warmup) for o in outs)) - before[0]
    return NUTSResult(
        draws=np.concatenate(draws, axis=1),
        diverging=np.concatenate(diverging, axis=1),
        n_grad_evals=warm + int(sum(int(o.grads) for o in outs)) - before[1],
        n_grad_evals_warmup=warm,
        step_size=np.array([float(o.step_size) for o in outs]),
        seconds=seconds,
        n_one_sided=umap.n_one_sided,
        n_jump_cells=jumps.parameters,
        n_jumps_accepted=int(sum(int(o.jumps_accepted) for o in outs)) - before[2],
        n_jump_updates=jump_updates,
        passes=passes,
        set_aside=set_aside,
        warmup=num_warmup - begin,
        states=tuple(jax.tree.map(np.array, o) for o in outs),  # copies: the program donates its state
        jumps=jumps,
    )


def _last_slow_window(num_warmup: int) -> tuple[int, int] | None:
    """The iterations ``[first, stop)`` of Stan's last slow warmup window (``None`` without one:
    a warmup too short for the schedule). Its positions come from a kernel whose mass matrix is
    already adapted to the posterior's scales: a fair first look at how the parameters move."""
    slow, end = _stan_schedule(num_warmup, 0)
    ends = np.nonzero(slow & end)[0]
    if not ends.size:
        return None
    before = ends[-2] + 1 if len(ends) > 1 else int(np.argmax(slow))
    return int(before), int(ends[-1]) + 1


def _screen_lines(log_posterior: Callable[[np.ndarray], np.ndarray], jumps: PlateauJumps,
                  draws: np.ndarray) -> PlateauJumps:
    """``jumps`` with line jumps (:func:`synthinfer.napsu.jumps.line_jumps`) for those of the
    :data:`LINE_JUMP_CANDIDATES` parameters that mixed worst in ``draws`` ``(chains, k, d)`` (the
    smallest bulk ESS) which have a second region along their regression lines in them."""
    slowest = np.argsort(batched_ess(np.moveaxis(draws, -1, 0)))[:LINE_JUMP_CANDIDATES]
    return line_jumps(log_posterior, jumps, draws.reshape(-1, draws.shape[-1]), slowest)


def _axis_candidates(s: np.ndarray, sigma: np.ndarray) -> np.ndarray:
    """Parameters whose cell is near-empty but 2 noise sd or more above zero (per parameter: a
    tie's sum), the ones :func:`synthinfer.napsu.jumps.axis_jumps` screens: nearer zero the cell's
    bulk is at the empty side, with no second mode to jump to."""
    return one_sided_cells(s, sigma) & ~one_sided_cells(s, sigma, 2.0)


def jump_candidates(network: MarkovNetwork, s_tilde: np.ndarray, sigma_dp: float | np.ndarray, *,
                    layout: Layout | None = None, plateaus: bool) -> np.ndarray:
    """Per parameter, whether :func:`nuts_sample` may give it jumps, from the noisy counts alone
    (before the Laplace fit, so the program is compiled with jumps only where some may come):
    under the paper's prior alone (``plateaus``) the one-sided map's cells, otherwise those
    :func:`synthinfer.napsu.jumps.axis_jumps` screens."""
    s, sigma = _per_parameter(network, s_tilde, sigma_dp, layout)
    return one_sided_cells(s, sigma) if plateaus else _axis_candidates(s, sigma)


def _per_parameter(network: MarkovNetwork, s_tilde: np.ndarray, sigma_dp: float | np.ndarray,
                   layout: Layout | None) -> tuple[np.ndarray, np.ndarray]:
    """A noisy count and noise sd per parameter (a tie: its sum), from the canonical queries'
    (``layout=None``) or the measured values'."""
    s, sigma = (s_tilde, sigma_dp) if layout is None else canonical_summary(network.queries.canonical, layout,
                                                                          s_tilde, sigma_dp)
    return network.queries.summarise(s, sigma)


def _step_size_adaptation_start(step_size):
    """The dual averaging's state at its (re)start from ``step_size`` (BlackJAX's
    ``dual_averaging_adaptation`` init; it does not depend on the target rate, which enters
    only the updates)."""
    from blackjax.adaptation.step_size import dual_averaging_adaptation

    return dual_averaging_adaptation(TARGET_ACCEPT)[0](step_size)


def _resume_states(states: Sequence[_ChainState], num_warmup: int, num_samples: int) -> tuple[int, list]:
    """Where resumed chains begin (:func:`nuts_sample`'s ``resume``): the first iteration of
    Stan's final fast window, with each chain's dual averaging restarted at its step size.
    Without a slow window: iteration 0, a fresh start."""
    slow, _ = _stan_schedule(num_warmup, num_samples)
    if not slow.any():
        return 0, list(states)
    with float64():
        fresh = [s._replace(step_size_adaptation=jax.tree.map(np.asarray,
                                                              _step_size_adaptation_start(float(s.step_size))))
                 for s in states]
    return int(np.nonzero(slow)[0][-1]) + 1, fresh
