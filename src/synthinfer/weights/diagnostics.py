"""Post-processing and diagnostics of importance weights (Supplements A.2 and B.5).

All functions work on *log* weights where that is numerically safer, and are post-processing
of already-private weights (no budget).

- :func:`self_normalise`: ``w_i / mean(w)`` (weights averaging 1, the ratio estimator).
- :func:`temper`: ``w^tau`` for ``tau in [0, 1]`` (Supp. A.2), less extreme weights.
- :func:`pareto_smooth`: Pareto-smoothed importance sampling (Vehtari et al. 2015/2024) through
  ArviZ, with the shape diagnostic ``k_hat``; a warning above 0.7, where the weights' tail is
  too heavy for reliable estimates and the synthetic data should not be released (Supp. A.2).
- :func:`effective_sample_size`: Kish's ``(sum w)^2 / sum w^2``.
- :func:`synthetic_effective_sample_size`: ``N_G^(e)`` of Supplement B.5.1 (eq. 16) for an
  importance-weighted MLE.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass

import numpy as np
from scipy.special import logsumexp

from synthinfer.errors import EmptyDataError, NonFiniteError, ParameterError, ParetoKWarning, user_stacklevel

#: Above this Pareto shape the PSIS estimate is unreliable for any sample size (Vehtari et
#: al. 2024, Section 3.2.2); smaller samples get the lower :func:`khat_threshold`.
KHAT_THRESHOLD = 0.7


def khat_threshold(n: int) -> float:
    """``min(1 - 1 / log10(S), 0.7)``: the sample-size dependent k-hat threshold of Vehtari et
    al. (2024), the one ArviZ uses (below about 2,200 draws it is below 0.7; 0.5 at S = 100)."""
    return min(1.0 - 1.0 / np.log10(n), KHAT_THRESHOLD) if n > 10 else 0.0


def _log_w(log_weights) -> np.ndarray:
    lw = np.asarray(log_weights, dtype=float).reshape(-1)
    if lw.size == 0:
        raise EmptyDataError("no weights given")
    if np.isnan(lw).any() or np.isposinf(lw).any():
        raise NonFiniteError("log weights must not be NaN or +inf")
    if np.isneginf(lw).all():
        raise NonFiniteError("all weights are zero")
    return lw


def self_normalise(weights=None, *, log_weights=None) -> np.ndarray:
    """Weights rescaled to mean 1 (sum ``N``), computed stably from ``log_weights`` if given."""
    if (weights is None) == (log_weights is None):
        raise ParameterError("give exactly one of weights or log_weights")
    if log_weights is None:
        w = np.asarray(weights, dtype=float).reshape(-1)
        if w.size == 0:
            raise EmptyDataError("no weights given")
        if not np.all(np.isfinite(w)) or (w < 0).any():
            raise NonFiniteError("weights must be finite and >= 0")
        if w.sum() <= 0:
            raise NonFiniteError("all weights are zero")
        return w / w.mean()
    lw = _log_w(log_weights)
    return np.exp(lw - logsumexp(lw) + math.log(lw.size))


def temper(log_weights, tau: float) -> np.ndarray:
    """Tempered log weights ``tau * log w`` (Supp. A.2); ``tau = 0`` is uniform, ``1`` unchanged."""
    if not (isinstance(tau, (int, float)) and 0 <= tau <= 1):
        raise ParameterError(f"tau must be in [0, 1], got {tau!r}")
    return tau * _log_w(log_weights)


@dataclass(frozen=True)
class ParetoSmoothed:
    """Result of :func:`pareto_smooth`: smoothed log weights (normalised to sum 1) and ``k_hat``."""

    log_weights: np.ndarray
    k_hat: float

    @property
    def threshold(self) -> float:
        """The k-hat above which the estimate is unreliable, for this many weights."""
        return khat_threshold(self.log_weights.size)

    @property
    def reliable(self) -> bool:
        return self.k_hat <= self.threshold


def pareto_smooth(log_weights, *, warn: bool = True) -> ParetoSmoothed:
    """PSIS via ``arviz.psislw``: smoothed, normalised log weights and the Pareto shape ``k_hat``.

    Sign convention: ``arviz.psislw`` takes the log *importance ratios* themselves. (Its LOO
    use passes ``-log_lik``, because there the ratios are ``1 / p(y_i | theta)``; here the
    ratios are our weights, so they are passed unchanged.) A heavy *right* tail of the weights
    gives a large ``k_hat``. Warns :class:`ParetoKWarning` when ``k_hat`` exceeds
    :func:`khat_threshold` (0.7 from about 2,200 weights on).
    """
    from synthinfer.mcmc import import_arviz

    az = import_arviz()

    lw = _log_w(log_weights)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # ArviZ warns about its own k_hat; we issue ours below
        smoothed, k = az.psislw(lw.copy(), reff=1.0)
    k = float(np.asarray(k))
    threshold = khat_threshold(lw.size)
    if warn and k > threshold:
        warnings.warn(
            f"Pareto k-hat = {k:.2f} > {threshold:.2f}: the importance weights are too heavy-tailed for reliable "
            "estimates; the synthetic data miss parts of the real distribution (Supp. A.2)",
            ParetoKWarning,
            stacklevel=user_stacklevel(),
        )
    return ParetoSmoothed(np.asarray(smoothed, dtype=float), k)


def effective_sample_size(weights=None, *, log_weights=None) -> float:
    """Kish's effective sample size ``(sum w)^2 / sum w^2`` (between 1 and N)."""
    w = self_normalise(weights, log_weights=log_weights)
    return float(w.sum() ** 2 / np.sum(w**2))


def synthetic_effective_sample_size(scores: np.ndarray, weights: np.ndarray, *, bread: np.ndarray | None = None,
                                    norm: str = "trace") -> float:
    """``N_G^(e)``: real-data sample size whose MLE is as precise as the IW-MLE (Supp. B.5.1).

    With per-row scores ``s_i = grad log f(x_i | theta_hat_IW)`` of the synthetic rows and
    importance weights ``w_i`` (normalised to mean 1 here), the IW-MLE's asymptotic covariance
    is ``J^-1 K_IW J^-1 / N_G`` with ``K_IW = mean(w_i^2 s_i s_i^T)``, while an MLE on ``n`` real
    rows has ``J^-1 K_0 J^-1 / n`` with ``K_0 = E_D[s s^T] ~ mean(w_i s_i s_i^T)`` (B.5). Equating
    a scalar summary ``|.|`` of the two gives

        N_G^(e) = N_G |J^-1 K_0 J^-1| / |J^-1 K_IW J^-1|.

    ``bread`` is ``J`` (the weighted mean Hessian of ``-log f``); by default ``J = K_0`` (a
    correctly specified model), giving ``N_G |K_0^-1| / |K_0^-1 K_IW K_0^-1|``. ``norm`` is the
    summary: ``"trace"`` (Lyddon et al. 2018) or ``"det"`` (``|V|^(1/p)``, a geometric mean).

    Eq. (16) as printed squares this ratio, and its empirical form puts ``K_IW`` over ``K_0``
    (the inverse); neither can be right, since for a scalar mean with constant ``s^2`` the
    formula must reduce to Kish's ESS ``N_G / mean(w^2)``, which the unsquared ratio above does.
    """
    s = np.asarray(scores, dtype=float)
    if s.ndim == 1:
        s = s[:, None]
    w = self_normalise(weights)
    if len(w) != len(s):
        raise ParameterError(f"scores has {len(s)} rows but weights has {len(w)} entries")
    k0 = (s * w[:, None]).T @ s / len(w)
    kiw = (s * (w**2)[:, None]).T @ s / len(w)
    j = k0 if bread is None else np.asarray(bread, dtype=float)
    jinv = np.linalg.pinv(j)
    v0, viw = jinv @ k0 @ jinv, jinv @ kiw @ jinv
    if norm == "trace":
        r = np.trace(v0) / np.trace(viw)
    elif norm == "det":
        p = v0.shape[0]
        r = math.exp((np.linalg.slogdet(v0)[1] - np.linalg.slogdet(viw)[1]) / p)
    else:
        raise ParameterError(f"norm must be 'trace' or 'det', got {norm!r}")
    return float(len(w) * r)
