"""NUTS on a batch of posteriors at once: one compiled program for many datasets and chains.

BlackJAX's NUTS with Stan's window adaptation (step size and diagonal mass matrix, per chain),
``jax.vmap``-ed over chains and over a leading batch axis of the data, so B datasets x C
chains run as one XLA program (:class:`synthinfer.bayes.GeneralisedPosterior`'s experiment
grids, :func:`synthinfer.bayes.mix_posteriors`' synthetic datasets). Under ``vmap`` all members
step in lockstep, so the slowest chain of a step sets its cost: ``max_tree_depth`` bounds it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from synthinfer._jax import jax, jnp


def nuts_batch(
    logdensity: Callable[[Any, Any], jax.Array],
    keys: jax.Array,
    inits: Any,
    data: Any,
    *,
    num_warmup: int,
    num_samples: int,
    max_tree_depth: int,
) -> tuple[Any, jax.Array, jax.Array]:
    """Draws from ``logdensity(position, data_b)`` for every batch member ``b``.

    ``keys``: PRNG keys of shape ``(B, C)``; ``inits``: a pytree of initial positions with
    leading axes ``(B, C)``; ``data``: a pytree of arrays with leading axis ``B`` (member b's
    chains see ``data[b]``). Returns the positions (the pytree with leading axes
    ``(B, C, num_samples)``), the divergence flags and the acceptance rates ``(B, C, num_samples)``.
    """
    import blackjax
    from blackjax.adaptation.base import get_filter_adapt_info_fn

    def one_chain(key, init, d):
        ld = lambda u: logdensity(u, d)  # noqa: E731
        k_warm, k_samp = jax.random.split(key)
        warm = blackjax.window_adaptation(blackjax.nuts, ld, adaptation_info_fn=get_filter_adapt_info_fn(),
                                          max_num_doublings=max_tree_depth)
        (state, params), _ = warm.run(k_warm, init, num_steps=num_warmup)
        step = blackjax.nuts(ld, **{**params, "max_num_doublings": max_tree_depth}).step

        def body(st, k):
            st, info = step(k, st)
            return st, (st.position, info.is_divergent, info.acceptance_rate)

        _, out = jax.lax.scan(body, state, jax.random.split(k_samp, num_samples))
        return out

    per_member = jax.vmap(one_chain, in_axes=(0, 0, None))
    run = jax.jit(jax.vmap(per_member, in_axes=(0, 0, 0)))
    data = jax.tree.map(jnp.asarray, data)
    return run(keys, jax.tree.map(jnp.asarray, inits), data)
