"""DP primitives: budgets, the ledger every mechanism spends through, and mechanisms."""

from synthinfer.privacy.budget import MAX_EPSILON, PrivacyBudget, check_budget, default_delta
from synthinfer.privacy.composition import Composition, PrivacyLoss
from synthinfer.privacy.ledger import Charge, PrivacyLedger
from synthinfer.privacy.mechanisms import (
    discrete_gaussian_epsilon,
    discrete_gaussian_mechanism,
    scaled_discrete_gaussian_mechanism,
    discrete_gaussian_pld_delta,
    discrete_gaussian_sigma,
    discrete_laplace_mechanism,
    gaussian_delta,
    gaussian_mechanism,
    gaussian_sigma,
    joint_scale,
    laplace_mechanism,
    quantile_mechanism,
)
from synthinfer.privacy.randomness import SeedLike, jax_key, jax_key_data, jax_key_data_spec, make_rng, seed_fixed
from synthinfer.privacy.zcdp import zcdp_delta, zcdp_epsilon, zcdp_rho

__all__ = [
    "MAX_EPSILON",
    "Charge",
    "Composition",
    "PrivacyBudget",
    "PrivacyLedger",
    "PrivacyLoss",
    "SeedLike",
    "check_budget",
    "default_delta",
    "discrete_gaussian_epsilon",
    "discrete_gaussian_mechanism",
    "scaled_discrete_gaussian_mechanism",
    "discrete_gaussian_pld_delta",
    "discrete_gaussian_sigma",
    "discrete_laplace_mechanism",
    "gaussian_delta",
    "gaussian_mechanism",
    "gaussian_sigma",
    "jax_key",
    "joint_scale",
    "jax_key_data",
    "jax_key_data_spec",
    "laplace_mechanism",
    "quantile_mechanism",
    "make_rng",
    "seed_fixed",
    "zcdp_delta",
    "zcdp_epsilon",
    "zcdp_rho",
]
