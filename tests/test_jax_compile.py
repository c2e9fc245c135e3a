"""Compiler options for small models (synthinfer._jax.quick_compiler_options)."""

import numpy as np
import pytest

from synthinfer import _jax
from synthinfer._jax import jax


@pytest.fixture
def fresh_options():
    _jax.quick_compiler_options.cache_clear()
    yield
    _jax.quick_compiler_options.cache_clear()


def test_quick_options_compile_and_give_the_same_numbers(fresh_options):
    opts = _jax.quick_compiler_options()
    assert opts["xla_backend_optimization_level"] == 0
    f = jax.jit(lambda x: jax.numpy.log1p(jax.numpy.exp(x)).sum())
    x = np.linspace(-3.0, 3.0, 7)
    np.testing.assert_allclose(f.lower(x).compile(opts)(x), f(x), rtol=1e-14)


def test_quick_options_drop_what_the_installed_xla_does_not_know(fresh_options, monkeypatch):
    monkeypatch.setattr(_jax, "_QUICK_OPTIONS", {**_jax._QUICK_OPTIONS, "xla_no_such_option_for_synthinfer": True})
    assert _jax.quick_compiler_options() == {"xla_backend_optimization_level": 0}


def test_only_small_networks_compile_quick():
    from synthinfer.data import Domain
    from synthinfer.napsu.queries import CanonicalQueries
    from synthinfer.napsu.network import SMALL_MODEL_DIMENSION, MarkovNetwork

    small = MarkovNetwork(CanonicalQueries(Domain({"a": [0, 1], "b": [0, 1, 2]}), [("a", "b")]))
    big = MarkovNetwork(CanonicalQueries(Domain({"a": list(range(6)), "b": list(range(7))}), [("a", "b")]))
    assert small.dimension <= SMALL_MODEL_DIMENSION < big.dimension
    assert small.small and not big.small


def test_the_objective_is_traced_once_for_every_program(monkeypatch):
    """The value-and-gradient, value and NUTS programs of a network share one trace of eq. 6
    (``likelihood.objective`` is jitted, so later programs reuse its jaxpr): tracing it again
    for each was a noticeable part of a small fit's wait."""
    from synthinfer.data import Domain
    from synthinfer.napsu import structured
    from synthinfer.napsu.likelihood import posterior_args, value_and_grad, values
    from synthinfer.napsu.network import MarkovNetwork
    from synthinfer.napsu.nuts import compile_nuts
    from synthinfer.napsu.queries import CanonicalQueries
    from synthinfer._precision import float64

    traced = []
    inner = structured.structured_log_likelihood

    def counting(*args, **kwargs):
        traced.append(1)
        return inner(*args, **kwargs)

    monkeypatch.setattr(structured, "structured_log_likelihood", counting)
    net = MarkovNetwork(CanonicalQueries(Domain({"a": [0, 1], "b": [0, 1, 2], "c": [0, 1]}), [("a", "b"), ("b", "c")]))
    d = net.dimension
    args = posterior_args(np.full(d, 50.0), 3.0, 1000, 10.0)
    with float64():
        value_and_grad(net, "neg_log_posterior")(np.zeros(d), *args)
        values(net, "neg_log_posterior", batched=False)(np.zeros((2, d)), *args)
        compile_nuts(net, num_warmup=10, num_samples=10, jump_moves=False).result()
    assert len(traced) == 1
