"""Bayesian analysts: generalised Bayesian learning from real and synthetic data (Wilde et al.
2021), and mixing per-dataset posteriors on a release (Räisä, Jälkö & Honkela 2025)."""

from synthinfer.bayes.calibration import calibrate_beta_weight
from synthinfer.bayes.choose_m import (
    ChooseMResult,
    PredictiveAverage,
    Trajectory,
    auroc,
    choose_m,
    learning_trajectory,
    n_effective,
    predictive_average,
)
from synthinfer.bayes.mixing import mix_logdensity_posteriors, mix_posteriors, mixture_coverage
from synthinfer.bayes.losses import BetaLoss, ImportanceWeightedLoss, LogLoss, NoiseAwareLoss, normal_laplace_logpdf
from synthinfer.bayes.models import (
    GaussianLocationScale,
    LinearRegression,
    LogisticRegression,
    MultinomialRegression,
    NormalHalfNormalPrior,
    NormalInverseGammaPrior,
    NormalPrior,
    PoissonRegression,
    ProbitRegression,
    regression_design,
)
from synthinfer.bayes.posterior import GeneralisedPosterior, nig_posterior

__all__ = [
    "mix_logdensity_posteriors",
    "mix_posteriors",
    "mixture_coverage",
    "BetaLoss",
    "ChooseMResult",
    "GaussianLocationScale",
    "GeneralisedPosterior",
    "ImportanceWeightedLoss",
    "LinearRegression",
    "LogLoss",
    "LogisticRegression",
    "MultinomialRegression",
    "NoiseAwareLoss",
    "NormalHalfNormalPrior",
    "NormalInverseGammaPrior",
    "NormalPrior",
    "PoissonRegression",
    "PredictiveAverage",
    "ProbitRegression",
    "Trajectory",
    "auroc",
    "calibrate_beta_weight",
    "choose_m",
    "learning_trajectory",
    "n_effective",
    "nig_posterior",
    "normal_laplace_logpdf",
    "predictive_average",
    "regression_design",
]
