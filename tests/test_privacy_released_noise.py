"""Released noisy quantities: integers on integer counts, never from the seed; the NAPSU-MQ
likelihood reads the discrete noise's actual variance."""

import math

import numpy as np
import pandas as pd

from synthinfer.data import Domain
from synthinfer.datasets import make_toy_logistic
from synthinfer.generate import NapsuMQ, PrivBayes
from synthinfer.privacy import discrete_gaussian_sigma
from synthinfer.privacy.samplers import discrete_gaussian_variance

N = 500


def _napsu(seed):
    toy = make_toy_logistic(N, seed=0)
    return NapsuMQ([("x1", "x2", "y")], epsilon=1.0, delta=N**-2.0, inference="laplace", seed=seed).fit(toy.data, toy.domain)


def test_napsu_noisy_counts_are_integers_unseeded_and_the_likelihood_uses_their_variance():
    a, b = _napsu(0), _napsu(0)
    for g in (a, b):
        # integer noise on integer counts: every output is attainable from both neighbours
        assert np.array_equal(g.noisy_counts_, np.round(g.noisy_counts_))
    assert not np.array_equal(a.noisy_counts_, b.noisy_counts_)  # same seed, fresh noise
    charge = a.ledger_.charges[-1]
    assert charge.details["unit_changes"] == 2  # one marginal: the tight (PLD) calibration
    sigma = discrete_gaussian_sigma(1.0, N**-2.0, 2)
    assert charge.details["sigma"] == sigma
    assert a.sigma_dp_ == math.sqrt(discrete_gaussian_variance(sigma)) <= sigma
    assert charge.details["variance"] == a.sigma_dp_**2
    # posterior/synthetic sampling from a fitted model stays reproducible from its seed
    pd.testing.assert_frame_equal(a.generate(1, 50, seed=3)[0], a.generate(1, 50, seed=3)[0])


def test_privbayes_counts_get_integer_noise_not_from_the_seed():
    rng = np.random.default_rng(0)
    dom = Domain.from_dict({"columns": [{"name": c, "categories": [0, 1, 2]} for c in "abc"]})
    df = pd.DataFrame({c: rng.integers(0, 3, 300) for c in "abc"})
    fits = [PrivBayes(epsilon=1.0, degree=1, seed=0).fit(df, dom) for _ in range(2)]
    charges = [f.ledger_.charges[-1] for f in fits]
    assert all(c.mechanism.startswith("discrete laplace") for c in charges)
    assert any(not np.array_equal(x, y) for x, y in zip(fits[0].conditionals_, fits[1].conditionals_))


def test_napsu_fits_at_large_epsilon_where_the_discrete_variance_underflows():
    # at epsilon 100 the discrete noise's variance (~1e-10) is far below the lattice; the
    # likelihood floors it at the rounding variance 1/12 and the Laplace fit succeeds
    from synthinfer.napsu.estimator import INTEGER_ROUNDING_VARIANCE

    toy = make_toy_logistic(2000, seed=10_000)
    g = NapsuMQ([("x1", "x2", "y")], epsilon=100.0, delta=2000**-2.0, inference="laplace", seed=0)
    g.fit(toy.data, toy.domain)
    assert g.sigma_dp_**2 < 1e-6 < INTEGER_ROUNDING_VARIANCE
    # the posterior is the non-private one: synthetic P(y = 1 | x1) within sampling error of the real
    syn = g.generate(1, 20_000, seed=1)[0]
    for x1 in toy.domain["x1"].categories:
        real = (toy.data.loc[toy.data["x1"] == x1, "y"].astype(str) == "1").mean()
        fake = (syn.loc[syn["x1"] == x1, "y"].astype(str) == "1").mean()
        assert abs(fake - real) < 4 * np.sqrt(0.25 / 1000 + 0.25 / 10_000)
