"""Importance weights from a DP GAN's discriminator, at no extra privacy cost (Section 3.5).

A GAN's discriminator ``D(x)`` is a classifier of real versus generated rows, so eq. (1) turns
its logits into density ratios: ``log w(x) = logit D(x) + log(N_G / N_D)``, where ``N_D`` and
``N_G`` are the numbers of real and generated rows the discriminator was trained on (``n_``
and ``n_synthetic_`` of the generator). (The brief and the paper's Section 3.2 write the prior
term as ``log(N_D / N_G)``; eq. (1) gives ``log(N_G / N_D)``. With balanced training both are 0.)

Guarantee: the discriminator of a DP GAN is DP already (it is what DP-SGD protected), so the
weights are post-processing (Dwork & Roth 2014, Prop. 2.1): **no additional budget**. The fit
records a zero-cost ``post-processing`` entry in the ledger so that a release lists it.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from synthinfer.errors import ArgumentTypeError, ConvergenceError, NotFittedError
from synthinfer.privacy import PrivacyLedger
from synthinfer.weights.classifier import WeightEstimator, log_weights_from_logits


class DiscriminatorWeights(WeightEstimator):
    """Weights ``log w(x) = logit D(x) + log(N_G/N_D)`` from a fitted DP GAN.

    Parameters
    ----------
    gan : a fitted generator exposing ``discriminator_log_odds(df) -> np.ndarray`` (``logit
        D(x)``, one per row) and the attributes ``n_`` (real rows) and ``n_synthetic_``.
    """

    def __init__(self, gan):
        self.gan = gan

    def __sklearn_clone__(self) -> DiscriminatorWeights:
        """A clone shares the generator: the fitted GAN is this estimator's input, not a setting
        to refit (``sklearn.base.clone`` would otherwise return an unfitted copy of it)."""
        return type(self)(**self.get_params())

    def fit(self, real: pd.DataFrame | None = None, synthetic: pd.DataFrame | None = None,
            ledger: PrivacyLedger | None = None) -> DiscriminatorWeights:
        """Check the generator and record the zero-cost post-processing step. Reads no data.

        ``ledger`` defaults to the generator's own ``ledger_`` when it has one.
        """
        if not callable(getattr(self.gan, "discriminator_log_odds", None)):
            raise ArgumentTypeError(
                f"{type(self.gan).__name__} has no discriminator_log_odds(df); DiscriminatorWeights needs a GAN generator"
            )
        for attr in ("n_", "n_synthetic_"):
            if not hasattr(self.gan, attr):
                raise NotFittedError(f"the generator has no {attr}: fit it before DiscriminatorWeights")
        self.n_real_, self.n_synthetic_ = int(self.gan.n_), int(self.gan.n_synthetic_)
        self.ledger_ = ledger if ledger is not None else getattr(self.gan, "ledger_", None)
        if self.ledger_ is not None:
            self.ledger_.spend("DiscriminatorWeights", 0.0, 0.0, mechanism="post-processing of the DP discriminator",
                               generator=type(self.gan).__name__)
        return self

    def log_weights(self, synthetic: pd.DataFrame) -> np.ndarray:
        self._check_fitted()
        logits = np.asarray(self.gan.discriminator_log_odds(synthetic), dtype=float).reshape(-1)
        if logits.shape[0] != len(synthetic):
            raise ArgumentTypeError(f"discriminator_log_odds returned {logits.shape[0]} values for {len(synthetic)} rows")
        if not np.all(np.isfinite(logits)):
            raise ConvergenceError("discriminator_log_odds returned non-finite values (did the GAN's training diverge?)")
        return log_weights_from_logits(logits, self.n_real_, self.n_synthetic_)
