"""Exception and warning hierarchy of synthinfer.

Every error synthinfer raises on bad input derives from :class:`SynthinferError`, so callers
can catch the library's failures in one place. Errors that are also classic ``ValueError`` /
``KeyError`` situations inherit from those too, so generic handlers keep working.
"""

from __future__ import annotations


class SynthinferError(Exception):
    """Root of every exception raised by synthinfer."""


class ParameterError(SynthinferError, ValueError):
    """A setting or argument has an invalid value; the message names the parameter."""


class ArgumentTypeError(SynthinferError, TypeError):
    """An argument has the wrong type (e.g. not a DataFrame or a Domain)."""


class DomainError(SynthinferError, ValueError):
    """A Domain is malformed, or data does not fit the public Domain."""


class UnknownColumnError(DomainError, KeyError):
    """A column is named that the Domain or the table does not have."""

    def __str__(self) -> str:  # KeyError quotes its message; keep it readable
        return str(self.args[0]) if self.args else ""


class DuplicateColumnError(DomainError):
    """A column name appears more than once."""


class OutOfDomainError(DomainError):
    """Values of a column lie outside its public category set or bounds."""


class MissingValueError(DomainError):
    """A column has missing values and the missing-value policy is ``"error"``."""


class EmptyDataError(DomainError):
    """A table has no rows (or no columns) where data are required."""


class NonFiniteError(DomainError):
    """A numeric column has NaN or infinite values where finite numbers are required."""


class PrivacyError(SynthinferError, ValueError):
    """Invalid privacy parameters (epsilon, delta, sensitivity, ...)."""


class BudgetExceededError(PrivacyError):
    """A mechanism asked the ledger for more budget than remains. No noise was drawn."""


class ReleaseError(SynthinferError):
    """A release bundle is missing, corrupted, of an unknown format, or would be overwritten."""


class NotFittedError(SynthinferError, AttributeError):
    """An estimator was used before ``fit``."""


class ConvergenceError(SynthinferError, RuntimeError):
    """A numerical procedure failed to converge and could not recover."""


class SynthinferWarning(UserWarning):
    """Root of warnings issued by synthinfer."""


class NonPrivateWarning(SynthinferWarning):
    """An operation looked at private data in a way that is not differentially private."""


class ConvergenceWarning(SynthinferWarning):
    """A sampler or optimiser finished, but its diagnostics indicate a problem."""


# --- analysis (combining rules, analysis over many synthetic datasets) -------------------------
class AnalysisError(SynthinferError, ValueError):
    """The downstream analysis cannot be combined (too few usable fits, bad estimates, ...)."""


class FitFailedWarning(SynthinferWarning):
    """The downstream analysis failed on one synthetic dataset; that dataset is left out."""


class UnsupportedAnalysisWarning(SynthinferWarning):
    """The release's measured marginals lack a relation the analysis needs (its estimates are biased)."""


# --- importance weights (synthinfer.weights) -----------------------------------------------
class DebiasingError(SynthinferError, ValueError):
    """The Laplace debiasing factor b(x) of BetaDebiased does not exist (|x_j| >= 1/rho)."""


class ParetoKWarning(SynthinferWarning):
    """The Pareto-k diagnostic of importance weights exceeds 0.7 (unreliable estimates)."""


def user_stacklevel() -> int:
    """The ``stacklevel`` that makes a ``warnings.warn`` in the calling function point at the
    first frame outside synthinfer: the user's line, however many of the library's frames
    (backends delegating to backends, precision wrappers) lie between. Python 3.12's
    ``warnings.warn(skip_file_prefixes=...)`` does this; synthinfer targets 3.11."""
    import os
    import sys

    package = os.path.dirname(os.path.abspath(__file__)) + os.sep
    frame, level = sys._getframe(1), 1
    while frame is not None and frame.f_code.co_filename.startswith(package):
        frame, level = frame.f_back, level + 1
    return level
