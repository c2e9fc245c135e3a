"""The Laplace fit's batched programs: gradients and values of the noise-aware objective at
blocks of points (synthinfer.napsu.likelihood.gradients / values), as used by the Hessian and
the Gaussianity check."""

from __future__ import annotations

import numpy as np
import pytest

from synthinfer._jax import jax, jnp
from synthinfer.data import Domain, Marginal
from synthinfer.napsu import network as network_module
from synthinfer.napsu.laplace import LaplaceResult, laplace_gap
from synthinfer.napsu.likelihood import (
    MAX_BATCH, batch_size, evaluate_in_batches, gradients, objective, posterior_args, value_and_grad, values,
)
from synthinfer.napsu.network import network_for
from synthinfer.napsu.optimize import OptimResult, hessian

pytestmark = pytest.mark.usefixtures("float64")

DOMAIN = Domain({"x1": [0, 1, 2], "x2": [0, 1], "y": [0, 1]})
MARGINALS = [("x1", "y"), ("x2", "y")]


@pytest.fixture(scope="module")
def problem():
    net = network_for(DOMAIN, [Marginal(m) for m in MARGINALS])
    rng = np.random.default_rng(0)
    theta = rng.normal(0.0, 0.5, net.dimension)
    n = 500
    counts = n * np.asarray(net.mean(jnp.asarray(theta))) + rng.normal(0.0, 3.0, net.dimension)
    return net, theta, posterior_args(counts, 3.0, n, 10.0, 1.0)  # with the cell prior


def test_batch_size_bounds_memory(problem):
    from synthinfer.napsu.structured import canonical_layout, plan

    net = problem[0]
    per_point = plan(net, canonical_layout(net.queries)).bytes_per_point
    assert per_point > 0
    assert batch_size(net) == MAX_BATCH
    assert batch_size(net, memory_bytes=5 * per_point) == 5
    assert batch_size(net, memory_bytes=per_point // 2) == 1  # never zero, however large the model


@pytest.mark.parametrize("size", [1, 3, 8, 64])
def test_batched_programs_match_one_point_calls_whatever_the_block(problem, size):
    net, theta, args = problem
    vg = value_and_grad(net, "neg_log_posterior")
    points = theta + np.random.default_rng(1).normal(0.0, 0.3, (7, net.dimension))
    want_f, want_g = zip(*(vg(jnp.asarray(p), *args) for p in points))
    # the last block is padded: the padding rows must not leak into the result
    for batched in (True, False):
        np.testing.assert_allclose(
            evaluate_in_batches(values(net, "neg_log_posterior", batched=batched), points, args, size),
            np.array(want_f), rtol=1e-12)
        np.testing.assert_allclose(
            evaluate_in_batches(gradients(net, "neg_log_posterior", batched=batched), points, args, size),
            np.array(want_g), rtol=1e-10, atol=1e-12)


def test_hessian_is_the_same_in_any_block_size(problem):
    net, theta, args = problem
    full = hessian(gradients(net, "neg_log_posterior", batched=True), theta, args)
    for batched, batch in ((True, 3), (False, None)):
        got = hessian(gradients(net, "neg_log_posterior", batched=batched), theta, args, batch=batch)
        # vmapped and single gradients may round differently (~1e-16 relative), which forward
        # differences with step 1e-6 amplify to ~1e-10 relative of the gradient's scale
        np.testing.assert_allclose(got, full, rtol=1e-8, atol=1e-8 * np.abs(full).max())
    loss = objective(net, "neg_log_posterior")[0]
    want = np.asarray(jax.hessian(lambda x: loss(x, *args))(jnp.asarray(theta)))
    np.testing.assert_allclose(full, want, rtol=1e-5, atol=1e-5 * np.abs(want).max())


def test_gap_equals_the_one_point_computation(problem):
    net, theta, args = problem
    d = net.dimension
    cov = np.linalg.inv(hessian(gradients(net, "neg_log_posterior"), theta, args))
    cov = 0.5 * (cov + cov.T)
    lap = LaplaceResult(theta, cov, np.linalg.cholesky(cov), OptimResult(theta, 0.0, 0.0, True, 0, 0, 0), 0.0)
    vg = value_and_grad(net, "neg_log_posterior")
    f = lambda x: float(vg(jnp.asarray(x), *args)[0])  # noqa: E731
    steps = 2.0 * lap.chol.T
    want = np.maximum(np.abs(np.array([f(theta + e) for e in steps]) - f(theta) - 2.0),
                      np.abs(np.array([f(theta - e) for e in steps]) - f(theta) - 2.0))
    s_tilde, variances, n, prior_sd, cell_prior, _ = args  # posterior_args: one noise variance per value
    got = laplace_gap(net, s_tilde, float(np.sqrt(variances[0])), int(n), lap, prior_sd=float(prior_sd),
                      cell_prior=float(cell_prior))
    assert got.shape == (d,)
    np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-9)


def test_batched_programs_are_made_once_and_freed_with_their_network(monkeypatch):
    import gc
    import weakref

    monkeypatch.setattr(network_module, "MAX_CACHED_NETWORKS", 1)
    net = network_for(DOMAIN, [Marginal(("x1", "x2"))])
    assert gradients(net, "neg_log_posterior", batched=True) is gradients(net, "neg_log_posterior", batched=True)
    assert values(net, "neg_log_posterior", batched=True) is values(net, "neg_log_posterior", batched=True)
    args = posterior_args(np.zeros(net.dimension), 1.0, 10, 10.0)
    # the batched programs, and the loops over one-point programs (the CPU default)
    for program in (gradients(net, "neg_log_posterior", batched=True), values(net, "neg_log_posterior", batched=True),
                    gradients(net, "neg_log_posterior"), values(net, "neg_log_posterior")):
        evaluate_in_batches(program, np.zeros((2, net.dimension)), args, 2)
    del program
    gone = weakref.ref(net)
    del net
    network_for(DOMAIN, [Marginal(("x2", "y"))])  # evicts it
    gc.collect()
    assert gone() is None  # no JAX cache keeps the network alive through its batched programs
