"""Every estimator of synthinfer.weights and synthinfer.bayes follows scikit-learn's settings
contract: settings stored as given, checked at fit, so get_params/set_params/clone work."""

import inspect

import numpy as np
import pytest
from sklearn.base import clone

import synthinfer.bayes as bayes
import synthinfer.weights as weights
from synthinfer.bayes import BetaLoss, GaussianLocationScale, GeneralisedPosterior, NormalInverseGammaPrior
from synthinfer.datasets import make_triangle_square
from synthinfer.errors import NotFittedError, ParameterError
from synthinfer.privacy import PrivacyBudget, PrivacyLedger
from synthinfer.weights import (
    BetaDebiased,
    BetaNoised,
    DiscriminatorWeights,
    DPMLPWeights,
    IWBayesianRegression,
    LogRegWeights,
    MLPWeights,
    OutputPerturbedWeights,
    WeightEstimator,
)

BOUNDS = {"x1": (0.0, 1.0), "x2": (0.0, 1.0)}

pytestmark = pytest.mark.filterwarnings("ignore::synthinfer.errors.NonPrivateWarning")


class FakeGAN:
    """A fitted GAN as DiscriminatorWeights sees it: logit D(x) = x1 - x2."""

    n_ = 50
    n_synthetic_ = 50

    def discriminator_log_odds(self, df):
        return (df["x1"] - df["x2"]).to_numpy()


ESTIMATORS = {
    "LogRegWeights": lambda: LogRegWeights(BOUNDS, lam=0.5, clip=True),
    "BetaNoised": lambda: BetaNoised(BOUNDS, epsilon=1.0, lam=0.2, seed=7, clip=True),
    "BetaDebiased": lambda: BetaDebiased(BOUNDS, epsilon=2.0, delta=1e-5, noise="gaussian", seed=7),
    "OutputPerturbedWeights": lambda: OutputPerturbedWeights(BOUNDS, epsilon=1.0, n_release=10, seed=7),
    "MLPWeights": lambda: MLPWeights(BOUNDS, hidden=8, seed=7),
    "DPMLPWeights": lambda: DPMLPWeights(BOUNDS, epsilon=1.0, delta=1e-5, epochs=2.0, seed=7),
    "DiscriminatorWeights": lambda: DiscriminatorWeights(FakeGAN()),
    "IWBayesianRegression": lambda: IWBayesianRegression("linear", prior_scale=2.0, num_chains=2, seed=7),
    "GeneralisedPosterior": lambda: GeneralisedPosterior(
        GaussianLocationScale(), BetaLoss(0.5), NormalInverseGammaPrior(), method="nuts", num_samples=10, seed=7
    ),
}


def _estimator_classes(module) -> set[str]:
    """Public classes of a package that are estimators (have fit and the settings contract)."""
    return {
        name for name in module.__all__
        if inspect.isclass(cls := getattr(module, name)) and not inspect.isabstract(cls) and hasattr(cls, "fit")
    }


def test_every_estimator_is_covered():
    assert _estimator_classes(weights) | _estimator_classes(bayes) == set(ESTIMATORS)
    assert all(issubclass(getattr(weights, n), WeightEstimator) for n in _estimator_classes(weights) - {"IWBayesianRegression"})


@pytest.mark.parametrize("name", sorted(ESTIMATORS))
def test_clone_copies_the_settings_and_nothing_fitted(name):
    est = ESTIMATORS[name]()
    params = est.get_params()
    assert set(params) == set(inspect.signature(type(est)).parameters)
    est.fitted_marker_ = 1.0
    c = clone(est)
    assert type(c) is type(est) and c is not est and not hasattr(c, "fitted_marker_")
    for k, v in c.get_params().items():
        assert v is params[k] or v == params[k] or type(v) is type(params[k]), k
    if "seed" in params:
        assert c.seed == 7
    first = sorted(params)[0]
    c.set_params(**{first: params[first]})
    with pytest.raises(ParameterError, match="no setting 'nonsense'"):
        c.set_params(nonsense=1)


@pytest.mark.parametrize(
    "make, match",
    [
        (lambda: LogRegWeights(BOUNDS, lam=-1.0), "lam"),
        (lambda: OutputPerturbedWeights(BOUNDS, epsilon=1.0, lam=0.0), "lam"),
        (lambda: DPMLPWeights(BOUNDS, epsilon=1.0, delta=1e-5, lot_size=0), "lot_size"),
        (lambda: DPMLPWeights(BOUNDS, epsilon=1.0, delta=1e-5, epochs=-1.0), "epochs"),
        (lambda: IWBayesianRegression("probit"), "kind"),
        (lambda: IWBayesianRegression("linear", prior_scale=0.0), "prior_scale"),
        (lambda: GeneralisedPosterior(GaussianLocationScale(), method="gibbs"), "method"),
        (lambda: GeneralisedPosterior(GaussianLocationScale(), num_chains=0), "num_chains"),
    ],
)
def test_bad_settings_are_refused_by_fit_not_the_constructor(make, match):
    est = clone(make())  # constructing and cloning never validate
    real, synth = make_triangle_square(40, seed=0)
    with pytest.raises(ParameterError, match=match):
        if isinstance(est, WeightEstimator):
            est.fit(real, synth, ledger=PrivacyLedger(PrivacyBudget(10.0, 1e-3)))
        elif isinstance(est, IWBayesianRegression):
            est.fit(real.to_numpy(), np.arange(len(real)) % 2)
        else:
            est.fit(real=np.zeros(5))


def test_a_clone_of_a_fitted_estimator_refits_to_the_same_result():
    real, synth = make_triangle_square(80, seed=1)
    est = LogRegWeights(BOUNDS, lam=0.3).fit(real, synth)
    c = clone(est)
    with pytest.raises(NotFittedError):
        c.weights(synth)
    np.testing.assert_allclose(c.fit(real, synth).weights(synth), est.weights(synth))


def test_discriminator_weights_clone_shares_the_fitted_generator():
    gan = FakeGAN()
    c = clone(DiscriminatorWeights(gan))
    assert c.gan is gan
    _, synth = make_triangle_square(10, seed=2)
    np.testing.assert_allclose(c.fit().log_weights(synth), (synth["x1"] - synth["x2"]).to_numpy())
