"""Differentially private importance weights for synthetic data (Ghalebikesabi et al. 2022).

Estimators (``fit(real, synthetic, ledger=None)``, then ``weights(df)`` / ``log_weights(df)``):

- :class:`LogRegWeights` (non-private), :class:`BetaNoised` (Ji & Elkan 2013, eq. 4),
  :class:`BetaDebiased` (Proposition 2, eq. 5; Laplace or Gaussian noise);
- :class:`OutputPerturbedWeights` (Supplement A.1, Corollaries 1-2);
- :class:`MLPWeights` (non-private), :class:`DPMLPWeights` (Algorithm 1, relaxed DP-SGD);
- :class:`DiscriminatorWeights` (Section 3.5, a DP GAN's discriminator, no extra budget).

Post-processing and diagnostics in :mod:`synthinfer.weights.diagnostics`; weighted downstream
estimation in :mod:`synthinfer.weights.downstream` and :mod:`synthinfer.weights.posterior`;
:func:`split_budget` divides a budget between generator and weights (Supplement C.3).
"""

from synthinfer.weights.budget import split_budget
from synthinfer.weights.classifier import WeightEstimator, log_weights_from_logits
from synthinfer.errors import DebiasingError, ParetoKWarning
from synthinfer.weights.diagnostics import (
    effective_sample_size,
    pareto_smooth,
    self_normalise,
    synthetic_effective_sample_size,
    temper,
)
from synthinfer.weights.discriminator import DiscriminatorWeights
from synthinfer.weights.downstream import fit_iw_glm, fit_weighted
from synthinfer.weights.features import FeatureMap
from synthinfer.weights.logistic import BetaDebiased, BetaNoised, LogRegWeights
from synthinfer.weights.mlp import DPMLPWeights, MLPWeights
from synthinfer.weights.output_perturbation import OutputPerturbedWeights, largest_release_size
from synthinfer.weights.posterior import IWBayesianRegression

__all__ = [
    "BetaDebiased",
    "BetaNoised",
    "DPMLPWeights",
    "DebiasingError",
    "DiscriminatorWeights",
    "FeatureMap",
    "IWBayesianRegression",
    "LogRegWeights",
    "MLPWeights",
    "OutputPerturbedWeights",
    "ParetoKWarning",
    "WeightEstimator",
    "effective_sample_size",
    "fit_iw_glm",
    "fit_weighted",
    "largest_release_size",
    "log_weights_from_logits",
    "pareto_smooth",
    "self_normalise",
    "split_budget",
    "synthetic_effective_sample_size",
    "temper",
]
