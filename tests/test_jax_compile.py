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
