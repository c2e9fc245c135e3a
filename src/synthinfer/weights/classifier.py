"""Importance weights from a probabilistic classifier: the density-ratio trick (eq. 1).

Label real rows ``y = 1`` (``N_D`` of them, from ``p_D``) and synthetic rows ``y = 0`` (``N_G``,
from ``p_G``). For a calibrated classifier, Bayes' rule gives (Ghalebikesabi et al. 2022, eq. 1
and Section 3.2; Sugiyama et al. 2012)

    w(x) = p_D(x) / p_G(x) = [p(y=1|x) / p(y=0|x)] * [p(y=0) / p(y=1)],
    log w(x) = logit p(y=1|x) + log(N_G / N_D).

Note the prior ratio is ``N_G / N_D`` (the training class proportions ``p(y=0)/p(y=1)``); the
paper's Section 3.2 writes ``N_D / N_G``, which contradicts its own eq. (1). The two agree in the
paper's experiments, where ``N_G = N_D``.

:class:`WeightEstimator` is the common interface of every weight estimator in this package.
"""

from __future__ import annotations

import abc
import math

import numpy as np
import pandas as pd

from synthinfer._params import ParamsMixin
from synthinfer.errors import ArgumentTypeError, EmptyDataError, NotFittedError, PrivacyError
from synthinfer.privacy import PrivacyBudget, PrivacyLedger


def log_prior_ratio(n_real: int, n_synthetic: int) -> float:
    """``log(N_G / N_D)``: converts classifier log-odds into log density ratios (eq. 1)."""
    if n_real < 1 or n_synthetic < 1:
        raise EmptyDataError(f"need real and synthetic rows, got N_D={n_real}, N_G={n_synthetic}")
    return math.log(n_synthetic / n_real)


def log_weights_from_logits(logits: np.ndarray, n_real: int, n_synthetic: int) -> np.ndarray:
    """``log w(x) = logit p(y=1|x) + log(N_G / N_D)`` (Section 3.2)."""
    return np.asarray(logits, dtype=float) + log_prior_ratio(n_real, n_synthetic)


class WeightEstimator(ParamsMixin, abc.ABC):
    """Interface: ``fit(real, synthetic, ledger=None)``, then ``log_weights`` / ``weights``.

    Subclasses implement ``fit`` and ``log_weights``; ``weights`` exponentiates. Weights are
    *unnormalised* density ratios ``p_D/p_G``; self-normalise them with
    :func:`synthinfer.weights.diagnostics.self_normalise` where a ratio estimator is wanted.

    Settings follow scikit-learn's contract (:class:`~synthinfer._params.ParamsMixin`): each
    constructor argument is stored unchanged under its own name and checked by ``fit``, so
    ``get_params``, ``set_params`` and ``sklearn.base.clone`` work.
    """

    @abc.abstractmethod
    def log_weights(self, synthetic: pd.DataFrame) -> np.ndarray:
        """``log w(x)`` for each synthetic row."""

    def weights(self, synthetic: pd.DataFrame) -> np.ndarray:
        """``w(x) = exp(log w(x))`` for each synthetic row."""
        return np.exp(self.log_weights(synthetic))

    def _check_fitted(self, attr: str = "n_real_") -> None:
        if not hasattr(self, attr):
            raise NotFittedError(f"{type(self).__name__} is not fitted yet; call fit(real, synthetic) first")

    @staticmethod
    def _check_tables(real: pd.DataFrame, synthetic: pd.DataFrame) -> None:
        for name, df in (("real", real), ("synthetic", synthetic)):
            if not isinstance(df, pd.DataFrame):
                raise ArgumentTypeError(f"{name} must be a pandas DataFrame, got {type(df).__name__}")
            if len(df) == 0:
                raise EmptyDataError(f"the {name} table has no rows")


def ledger_for(ledger: PrivacyLedger | None, epsilon: float, delta: float, n: int) -> PrivacyLedger:
    """The ledger to spend through, once ``(epsilon, delta)`` is safe for ``n`` private (real) rows.

    The caller's ledger, or a fresh one holding exactly ``(epsilon, delta)``. Either way
    :meth:`PrivacyLedger.check_budget <synthinfer.privacy.PrivacyLedger.check_budget>` refuses
    ``delta >= 1/n`` and ``epsilon > 100`` (the refusals every generator applies) before anything
    is spent; a caller's ledger made with ``allow_large_delta`` / ``allow_large_epsilon`` lifts them
    for studies of the mechanisms.
    """
    if ledger is None:
        ledger = PrivacyLedger(PrivacyBudget(epsilon, delta))
    elif not isinstance(ledger, PrivacyLedger):
        raise PrivacyError(f"ledger must be a PrivacyLedger, got {type(ledger).__name__}")
    ledger.check_budget(n, PrivacyBudget(epsilon, delta))
    return ledger
