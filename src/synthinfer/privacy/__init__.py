"""DP primitives: budgets, the ledger every mechanism spends through, and mechanisms."""

from synthinfer.privacy.budget import PrivacyBudget
from synthinfer.privacy.ledger import Charge, PrivacyLedger
from synthinfer.privacy.mechanisms import (
    gaussian_delta,
    gaussian_mechanism,
    gaussian_sigma,
    laplace_mechanism,
)
from synthinfer.privacy.randomness import SeedLike, jax_key, jax_key_data, jax_key_data_spec, make_rng, seed_fixed
from synthinfer.privacy.zcdp import zcdp_delta, zcdp_rho

__all__ = [
    "Charge",
    "PrivacyBudget",
    "PrivacyLedger",
    "SeedLike",
    "gaussian_delta",
    "gaussian_mechanism",
    "gaussian_sigma",
    "jax_key",
    "jax_key_data",
    "jax_key_data_spec",
    "laplace_mechanism",
    "make_rng",
    "seed_fixed",
    "zcdp_delta",
    "zcdp_rho",
]
