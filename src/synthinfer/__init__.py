"""synthinfer: differentially private synthetic data that supports valid statistical inference.

Data holder: :mod:`synthinfer.generate` (and the NAPSU-MQ engine :mod:`synthinfer.napsu`),
:mod:`synthinfer.weights`, :mod:`synthinfer.release`.
Analyst: :mod:`synthinfer.analysis`, :mod:`synthinfer.bayes`.
Shared core: :mod:`synthinfer.privacy`, :mod:`synthinfer.data`.

The names below are imported on first use (PEP 562), so ``import synthinfer`` is quick and an
analyst who only opens a release never imports JAX.
"""

from __future__ import annotations

import importlib
from importlib.metadata import PackageNotFoundError, version
from typing import TYPE_CHECKING, Any

from synthinfer.errors import BudgetExceededError, SynthinferError

try:
    __version__ = version("synthinfer")
except PackageNotFoundError:  # running from a source tree without installation
    __version__ = "0.0.0+unknown"

#: public name -> the module that defines it
_LAZY = {
    "enable_compilation_cache": "synthinfer._jax",
    "float64": "synthinfer._precision",
    "MIResult": "synthinfer.analysis",
    "analyze": "synthinfer.analysis",
    "rubins_rules": "synthinfer.analysis",
    "Domain": "synthinfer.data",
    "Marginal": "synthinfer.data",
    "QuerySet": "synthinfer.data",
    "decode": "synthinfer.data",
    "encode": "synthinfer.data",
    "NapsuMQ": "synthinfer.napsu",
    "PrivBayes": "synthinfer.generate",
    "PrivacyBudget": "synthinfer.privacy",
    "PrivacyLedger": "synthinfer.privacy",
    "gaussian_sigma": "synthinfer.privacy",
    "open_release": "synthinfer.release",
    "report": "synthinfer.reporting",
    "write_release": "synthinfer.release",
}

__all__ = ["BudgetExceededError", "SynthinferError", "__version__", *sorted(_LAZY)]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'synthinfer' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # later look-ups skip this function
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))


if TYPE_CHECKING:  # for type checkers and IDEs: the same names, eagerly
    from synthinfer._jax import enable_compilation_cache
    from synthinfer._precision import float64
    from synthinfer.analysis import MIResult, analyze, rubins_rules
    from synthinfer.data import Domain, Marginal, QuerySet, decode, encode
    from synthinfer.generate import PrivBayes
    from synthinfer.napsu import NapsuMQ
    from synthinfer.privacy import PrivacyBudget, PrivacyLedger, gaussian_sigma
    from synthinfer.release import open_release, write_release
    from synthinfer.reporting import report
