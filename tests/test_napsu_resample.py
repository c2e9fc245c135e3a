"""NapsuMQ.resample_posterior: the posterior sampled again from the fit's measurements, at no
privacy cost, with the sampler's settings changed and nothing else."""

from __future__ import annotations

import numpy as np
import pytest

from synthinfer.datasets import make_toy_logistic
from synthinfer.errors import NotFittedError, ParameterError
from synthinfer.generate import NapsuMQ

N = 2000


@pytest.fixture(scope="module")
def toy():
    return make_toy_logistic(N, (1.0, 0.0), seed=0)


def _fit(toy, **kw):
    settings = {"epsilon": 1.0, "delta": N**-2.0, "inference": "laplace", "seed": 1, "n_chains": 2,
                "num_samples": 200, **kw}
    return NapsuMQ([("x1", "x2", "y")], **settings).fit(toy.data, toy.domain)


def test_resampling_spends_nothing_and_records_what_changed(toy):
    gen = _fit(toy)
    charges, spent, noisy = tuple(gen.ledger_.charges), gen.spent_, gen.noisy_counts_.copy()
    laplace_draws = gen.draws_.copy()
    gen.set_params(inference="nuts", num_warmup=200, num_samples=300).resample_posterior(seed=5)
    assert tuple(gen.ledger_.charges) == charges and gen.spent_ == spent  # post-processing: no charge
    np.testing.assert_array_equal(gen.noisy_counts_, noisy)
    assert gen.draws_.shape == (2, 300, gen.network_.dimension)
    assert "nuts" in gen.diagnostics_ and gen.diagnostics_["inference"] == "nuts"
    # the same posterior, another sampler: the means agree within a few posterior sds / sqrt(draws)
    sd = laplace_draws.reshape(-1, gen.network_.dimension).std(0)
    diff = np.abs(gen.draws_.mean((0, 1)) - laplace_draws.mean((0, 1))) / sd
    assert diff.max() < 0.5, diff
    rs = gen.diagnostics_["resampled"]
    assert rs["count"] == 1
    assert rs["changed"] == {"inference": ["laplace", "nuts"], "num_warmup": [None, 200], "num_samples": [200, 300]}
    assert gen.release_settings_["inference"] == "nuts" and gen.release_settings_["num_samples"] == 300
    assert gen.release_record().settings["inference"] == "nuts"
    assert "posterior sampled again from the fit's measurements (1 time; post-processing, no privacy cost): " \
           "inference 'laplace' -> 'nuts'" in gen.summary()
    # a second call counts on, and compares with the fit's settings, not the last call's
    gen.set_params(num_samples=200).resample_posterior(seed=6)
    assert gen.diagnostics_["resampled"]["count"] == 2
    assert gen.diagnostics_["resampled"]["changed"] == {"inference": ["laplace", "nuts"], "num_warmup": [None, 200]}
    assert "2 times" in gen.summary()


def test_an_integer_seed_reproduces_the_draws_on_a_stream_of_its_own(toy):
    gen = _fit(toy)
    fitted = gen.draws_.copy()
    a = gen.resample_posterior(seed=3).draws_.copy()
    b = gen.resample_posterior(seed=3).draws_.copy()
    c = gen.resample_posterior(seed=4).draws_.copy()
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, c)
    assert not np.array_equal(a, fitted)
    # the generator's own seed is the default, as in generate()
    np.testing.assert_array_equal(gen.resample_posterior().draws_, gen.resample_posterior(seed=1).draws_)


def test_a_loaded_fit_resamples(toy, tmp_path):
    gen = _fit(toy)
    gen.save(tmp_path / "g.napsu")
    back = NapsuMQ.load(tmp_path / "g.napsu")
    spent = back.spent_
    np.testing.assert_array_equal(back.resample_posterior(seed=2).draws_, gen.resample_posterior(seed=2).draws_)
    assert back.spent_ == spent and back.diagnostics_["resampled"]["count"] == 1


@pytest.mark.parametrize("setting, value", [("epsilon", 2.0), ("marginals", [("x1", "y")]), ("prior_sd", 3.0),
                                            ("interaction_sd", None), ("reference", "first")])
def test_a_setting_of_the_model_cannot_change(toy, setting, value):
    gen = _fit(toy)
    draws = gen.draws_.copy()
    gen.set_params(**{setting: value})
    with pytest.raises(ParameterError, match=rf"^{setting} is .* but the fit used"):
        gen.resample_posterior(seed=0)
    np.testing.assert_array_equal(gen.draws_, draws)  # nothing changed
    assert "resampled" not in gen.diagnostics_


def test_bad_sampler_settings_and_an_unfitted_generator_are_refused(toy):
    with pytest.raises(NotFittedError):
        NapsuMQ([("x1", "y")]).resample_posterior()
    gen = _fit(toy)
    with pytest.raises(ParameterError, match="n_chains"):
        gen.set_params(n_chains=0).resample_posterior()
    with pytest.raises(ParameterError, match="inference"):
        gen.set_params(n_chains=2, inference="gibbs").resample_posterior()
    assert "resampled" not in gen.diagnostics_
