"""synthinfer: differentially private synthetic data that supports valid statistical inference.

Data holder: :mod:`synthinfer.generate`, :mod:`synthinfer.weights`, :mod:`synthinfer.release`.
Analyst: :mod:`synthinfer.analysis`, :mod:`synthinfer.bayes`.
Shared core: :mod:`synthinfer.privacy`, :mod:`synthinfer.data`, :mod:`synthinfer.models`.
"""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("synthinfer")
except PackageNotFoundError:  # running from a source tree without installation
    __version__ = "0.0.0+unknown"

from synthinfer._jax import enable_compilation_cache
from synthinfer.analysis import MIResult, analyze, rubins_rules
from synthinfer.data import Domain, Marginal, QuerySet, decode, encode
from synthinfer.errors import BudgetExceededError, SynthinferError
from synthinfer.generate import NapsuMQ, PrivBayes
from synthinfer.privacy import PrivacyBudget, PrivacyLedger, gaussian_sigma
from synthinfer.release import open_release, write_release

__all__ = [
    "BudgetExceededError",
    "Domain",
    "MIResult",
    "NapsuMQ",
    "PrivBayes",
    "Marginal",
    "PrivacyBudget",
    "PrivacyLedger",
    "QuerySet",
    "SynthinferError",
    "__version__",
    "analyze",
    "decode",
    "enable_compilation_cache",
    "encode",
    "gaussian_sigma",
    "open_release",
    "rubins_rules",
    "write_release",
]
