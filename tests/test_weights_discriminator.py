"""DiscriminatorWeights against a fake GAN exposing the baselines' interface."""

import numpy as np
import pandas as pd
import pytest

from synthinfer.errors import ArgumentTypeError, NotFittedError
from synthinfer.privacy import PrivacyBudget, PrivacyLedger
from synthinfer.weights import DiscriminatorWeights


class FakeGAN:
    """logit D(x) = 2 x - 1; trained on 100 real and 300 generated rows."""

    n_ = 100
    n_synthetic_ = 300

    def __init__(self):
        self.ledger_ = PrivacyLedger(PrivacyBudget(1.0, 1e-5))
        self.ledger_.spend("dpgan", 1.0, 1e-5, mechanism="DP-SGD")

    def discriminator_log_odds(self, df):
        return 2 * df["x"].to_numpy() - 1


def test_discriminator_weights_are_post_processing():
    gan = FakeGAN()
    df = pd.DataFrame({"x": [0.0, 0.5, 1.0]})
    dw = DiscriminatorWeights(gan).fit()
    np.testing.assert_allclose(dw.log_weights(df), 2 * df["x"] - 1 + np.log(300 / 100))
    charge = gan.ledger_.charges[-1]
    assert (charge.epsilon, charge.delta) == (0.0, 0.0) and "post-processing" in charge.mechanism
    assert gan.ledger_.spent == (1.0, 1e-5)  # fits within a fully spent budget


def test_discriminator_weights_errors():
    with pytest.raises(ArgumentTypeError, match="discriminator_log_odds"):
        DiscriminatorWeights(object()).fit()

    class Unfitted:
        def discriminator_log_odds(self, df):
            return np.zeros(len(df))

    with pytest.raises(NotFittedError):
        DiscriminatorWeights(Unfitted()).fit()
    with pytest.raises(NotFittedError):
        DiscriminatorWeights(FakeGAN()).log_weights(pd.DataFrame({"x": [1.0]}))
