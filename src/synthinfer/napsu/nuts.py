"""NUTS for NAPSU-MQ's posterior (Hoffman & Gelman 2014; BlackJAX), preconditioned by the Laplace fit.

Sampling runs in whitened coordinates with the one-sided map of near-empty cells
(:mod:`synthinfer.napsu.reparam`) and plateau jumps (:mod:`synthinfer.napsu.jumps`). Each chain
is one compiled program, held in the network's program cache per settings, so refits with new
noisy counts or epsilon do not recompile.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from synthinfer._jax import float64, jax, jnp, uses_float64
from synthinfer._system import usable_cores
from synthinfer.mcmc import import_arviz
from synthinfer.napsu.jumps import PlateauJumps, jump_sweep, plateau_jumps
from synthinfer.napsu.laplace import LaplaceResult
from synthinfer.napsu.likelihood import PRIOR_SD, objective, posterior_args
from synthinfer.napsu.network import compiles_quick
from synthinfer.napsu.reparam import OneSidedMap, one_sided_map, to_theta
from synthinfer.privacy.randomness import jax_key_data, jax_key_data_spec

if TYPE_CHECKING:
    from synthinfer.napsu.network import MarkovNetwork


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
    n_jump_cells: int = 0  # parameters with plateau jumps: as many log-density values (no gradient) per iteration
    n_jumps_accepted: int = 0  # post-warmup, all chains


def _stan_schedule(num_warmup: int, num_samples: int) -> tuple[np.ndarray, ...]:
    """Per-step flags of one scan over warmup and sampling: ``(slow, window_end, warm, last)``.

    ``slow``/``window_end`` follow Stan's warmup schedule (BlackJAX's ``build_schedule``: a fast
    window adapting the step size, doubling slow windows that also estimate the mass matrix,
    a final fast window); ``warm`` marks the warmup steps and ``last`` the final one, after
    which the averaged step size is fixed for sampling.
    """
    from blackjax.adaptation.window_adaptation import build_schedule

    total = num_warmup + num_samples
    slow, end = np.zeros(total, bool), np.zeros(total, bool)
    if num_warmup:
        with jax.ensure_compile_time_eval():  # called while tracing: keep it concrete
            sched = np.asarray(build_schedule(num_warmup))
        slow[:num_warmup], end[:num_warmup] = sched[:, 0] == 1, sched[:, 1].astype(bool)
    warm = np.arange(total) < num_warmup
    return slow, end, warm, np.arange(total) == num_warmup - 1


def _nuts_chain(key_data, z_init, data, *, neg_log_posterior, num_warmup, num_samples, max_tree_depth, target_accept,
                jump_moves):
    """Stan window adaptation and NUTS for one chain on the reparametrised posterior ``theta(u)``.

    One ``lax.scan`` runs warmup and sampling with a single NUTS kernel whose step size and
    inverse mass matrix are carried values; during warmup they are updated after each step
    by BlackJAX's dual averaging and Welford mass-matrix estimators on Stan's schedule (the
    algorithm of ``blackjax.window_adaptation``), after it they stay fixed. Why not
    ``window_adaptation`` followed by a sampling scan: that traces and compiles the NUTS
    tree-building loops twice, and compiling them is most of a small model's wait.
    ``key_data`` is the raw data of the chain's PRNG key (:func:`synthinfer.privacy.jax_key_data`:
    making keys with ``jax.random.key``/``split`` would compile two more programs first).
    """
    import blackjax.mcmc.nuts as nuts
    from blackjax.adaptation.mass_matrix import mass_matrix_adaptation
    from blackjax.adaptation.step_size import dual_averaging_adaptation

    args, map_arrays, jump_arrays = data  # args: likelihood.posterior_args

    def logdensity(u):
        theta, log_jac = to_theta(u, map_arrays)
        return log_jac - neg_log_posterior(theta, *args)

    mm_init, mm_update, mm_final = mass_matrix_adaptation(True)  # diagonal
    da_init, da_update, da_final = dual_averaging_adaptation(target_accept)
    kernel = nuts.build_kernel()
    mm0 = mm_init(z_init.shape[0])
    carry0 = (nuts.init(z_init, logdensity), da_init(1.0), mm0, jnp.asarray(1.0, z_init.dtype),
              mm0.inverse_mass_matrix)

    def pick(flag, a, b):
        return jax.tree.map(lambda x, y: jnp.where(flag, x, y), a, b)

    def step(carry, xs):
        st, ss, mm, eps, imm = carry
        k, slow, end, warm, last = xs
        k_nuts, k_jump = jax.random.split(k)
        st, info = kernel(k_nuts, st, logdensity, eps, imm, max_num_doublings=max_tree_depth)
        accepted = jnp.asarray(0, jnp.int32)
        if jump_moves:  # plateau jumps (synthinfer.napsu.jumps); a new gradient only if one was accepted
            u, logp, accepted = jump_sweep(k_jump, st.position, st.logdensity, logdensity, *jump_arrays)
            st = jax.lax.cond(accepted > 0, lambda: nuts.init(u, logdensity), lambda: st)
        # warmup: dual averaging every step, Welford in slow windows, new mass matrix and a
        # restarted dual averaging at each slow window's end (Stan's schedule)
        ss_w = da_update(ss, info.acceptance_rate)
        mm_w = pick(slow, mm_update(mm, st.position), mm)
        mm_w, ss_w = jax.lax.cond(end, lambda m, a: (mm_final(m), da_init(da_final(a))), lambda m, a: (m, a),
                                  mm_w, ss_w)
        eps_w = jnp.where(last, jnp.exp(ss_w.log_step_size_avg), jnp.exp(ss_w.log_step_size))
        carry_w = (st, ss_w, mm_w, eps_w, mm_w.inverse_mass_matrix)
        out = (to_theta(st.position, map_arrays)[0], info.num_integration_steps, info.is_divergent, accepted)
        return pick(warm, carry_w, (st, ss, mm, eps, imm)), out

    flags = tuple(jnp.asarray(f) for f in _stan_schedule(num_warmup, num_samples))
    keys = jax.random.split(jax.random.wrap_key_data(key_data), num_warmup + num_samples)
    (_, _, _, eps, _), (theta, steps, div, jumps) = jax.lax.scan(step, carry0, (keys, *flags))
    # a gradient is recomputed after each iteration with an accepted jump
    return (theta[num_warmup:], steps[num_warmup:].sum() + (jumps[num_warmup:] > 0).sum(), div[num_warmup:], eps,
            steps[:num_warmup].sum() + (jumps[:num_warmup] > 0).sum(), jumps[num_warmup:].sum())




_NUTS_STATIC = ("num_warmup", "num_samples", "max_tree_depth", "target_accept", "jump_moves")


def _nuts_jit(network: MarkovNetwork) -> Callable:
    """The jitted :func:`_nuts_chain` of one network, held in its program cache. The network is
    bound by a closure: not a static argument, which JAX's caches keep alive, nor a partial,
    whose bound values show in the signature JAX caches (see
    :func:`synthinfer.napsu.likelihood._posterior_objectives`): either would keep the network
    and its programs alive for good."""
    loss = objective(network, "neg_log_posterior")[0]  # eq. 6 by message passing, plus the prior

    def chain(key_data, z_init, data, *, num_warmup, num_samples, max_tree_depth, target_accept, jump_moves):
        return _nuts_chain(key_data, z_init, data, neg_log_posterior=loss, num_warmup=num_warmup,
                           num_samples=num_samples, max_tree_depth=max_tree_depth, target_accept=target_accept,
                           jump_moves=jump_moves)

    return network.programs.get("nuts", lambda: jax.jit(chain, static_argnames=_NUTS_STATIC))


def compile_nuts(network: MarkovNetwork, *, num_warmup: int = 800, num_samples: int = 2000,
                 max_tree_depth: int = 12, target_accept: float = 0.8, jump_moves: bool = True) -> Future:
    """Start compiling the NUTS program for a network and settings in a background thread.

    The program depends only on the network and the shapes (every datum is a traced
    argument), so it can be compiled while the Laplace approximation, which :func:`nuts_sample`
    needs first, runs: on two cores the two overlap. Returns a future of the compiled
    program; :func:`nuts_sample` reuses it (one compilation per network and settings).
    ``jump_moves=False`` compiles the program without plateau jumps, for data with no
    one-sided cell (:func:`synthinfer.napsu.reparam.one_sided_cells`, known before the
    Laplace fit): a smaller program, which on small models is most of the wait.
    """
    settings = dict(num_warmup=int(num_warmup), num_samples=int(num_samples), max_tree_depth=int(max_tree_depth),
                    target_accept=float(target_accept), jump_moves=bool(jump_moves))
    d = int(network.dimension)

    def lower():
        # argument shapes and dtypes from the same builders nuts_sample uses, on placeholders
        data = (posterior_args(np.zeros(d), 1.0, 1, 1.0),
                OneSidedMap(np.zeros(d, bool), np.zeros(d), np.ones(d), np.zeros(d), np.eye(d)).arrays(),
                PlateauJumps.none(d).arrays())
        shapes = jax.tree.map(lambda a: jax.ShapeDtypeStruct(a.shape, a.dtype), data)
        return _nuts_jit(network).lower(jax_key_data_spec(), jax.ShapeDtypeStruct((d,), np.float64), shapes,
                                             **settings)

    return network.programs.compile_ahead(("nuts", tuple(sorted(settings.items()))), lower, quick=compiles_quick(d))


@uses_float64
def nuts_sample(
    network: MarkovNetwork,
    s_tilde: np.ndarray,
    sigma_dp: float,
    n: int,
    laplace: LaplaceResult,
    *,
    prior_sd: float = PRIOR_SD,
    n_chains: int = 4,
    num_warmup: int = 800,
    num_samples: int = 2000,
    max_tree_depth: int = 12,
    target_accept: float = 0.8,
    one_sided_threshold: float = 5.0,
    dropped_cell_jacobian: Callable[[jax.Array], jax.Array] | None = None,
    jump_moves: bool = True,
    max_workers: int | None = None,
    progress: Callable[[str], None] | None = None,
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
    Stan-style window adaptation then tunes the step size and a diagonal mass matrix during
    the ``num_warmup`` draws (a dense one was slower on Adult; see docs/).
    Chains start at independent ``N(u*, I)`` draws around the Laplace mean's position
    ``u*``.

    Each chain is one compiled program (cached per network and settings: refits with new
    noisy statistics or epsilon do not recompile); chains run side by side in
    ``max_workers`` threads (default: one per core the process may use). That beats ``vmap``-ing them: a
    vmapped NUTS step lasts as long as the longest of the chains' trees, and batching gives
    no speed-up per gradient on CPU.
    ``progress(message)`` is called as chains finish.
    """
    d = int(np.asarray(s_tilde).shape[0])
    mu_mode = np.asarray(network.mean_and_cov(jnp.asarray(laplace.mean))[0])
    jd = None if dropped_cell_jacobian is None else np.asarray(dropped_cell_jacobian(jnp.asarray(laplace.mean)))
    umap = one_sided_map(s_tilde, sigma_dp, n, mu_mode, laplace.mean, laplace.cov,
                         prior_sd=prior_sd, threshold=one_sided_threshold, dropped_jacobian=jd)
    jump_moves = bool(jump_moves and umap.mask.any())
    jumps = plateau_jumps(umap, s_tilde, sigma_dp, n, mu_mode, prior_sd=prior_sd) if jump_moves else PlateauJumps.none(d)
    data = (posterior_args(s_tilde, sigma_dp, n, prior_sd), umap.arrays(), jumps.arrays())
    z0 = umap.to_u(laplace.mean) + rng.standard_normal((n_chains, d))
    keys = jax_key_data(rng, n_chains)
    t0 = time.perf_counter()
    program = compile_nuts(network, num_warmup=num_warmup, num_samples=num_samples,
                           max_tree_depth=max_tree_depth, target_accept=target_accept, jump_moves=jump_moves)
    if not program.done():
        # ArviZ, which holds the posterior next, takes a noticeable time to import: do it while
        # XLA compiles (which releases the GIL) rather than after the chains
        import_arviz()
    program = program.result()
    done, lock = [0], threading.Lock()

    def run(c: int):
        with float64():  # a thread of its own: synthinfer's float64 context is per thread
            out = jax.block_until_ready(program(keys[c], z0[c], data))
        with lock:
            done[0] += 1
            if progress is not None:
                progress(f"NUTS: {done[0]}/{n_chains} chains done")
        return out

    workers = max(1, min(n_chains, max_workers or usable_cores()))
    with ThreadPoolExecutor(workers) as pool:
        outs = list(pool.map(run, range(n_chains)))
    seconds = time.perf_counter() - t0
    warm = int(sum(int(o[4]) for o in outs))
    return NUTSResult(
        draws=np.stack([np.asarray(o[0]) for o in outs]),
        diverging=np.stack([np.asarray(o[2], dtype=bool) for o in outs]),
        n_grad_evals=warm + int(sum(int(o[1]) for o in outs)),
        n_grad_evals_warmup=warm,
        step_size=np.array([float(o[3]) for o in outs]),
        seconds=seconds,
        n_one_sided=umap.n_one_sided,
        n_jump_cells=jumps.count,
        n_jumps_accepted=int(sum(int(o[5]) for o in outs)),
    )

