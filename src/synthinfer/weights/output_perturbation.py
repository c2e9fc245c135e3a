"""Unbiased private weights by output perturbation (Supplement A.1, Theorem 2, Corollaries 1-2).

The logistic-regression log weights of ``N_S`` synthetic rows are released with noise on the
*log weights*: ``log w*(x_i) = log w_hat(x_i) + zeta_i`` with ``E[exp(zeta_i)] = 1``, so the
importance-sampling estimator stays unbiased (Theorem 2) at the price of the extra variance
``Var[exp(zeta)] E_G[(w_hat h)^2]`` (eq. 6).

**Sensitivity.** With ``||x||_2 <= 1`` (:class:`~synthinfer.weights.features.FeatureMap`) and
``||beta_hat(D) - beta_hat(D')||_2 <= Delta_2 = 2 / (N_D lam)`` (Chaudhuri et al. 2011), each log
weight moves by at most ``|x^T (beta_hat - beta_hat')| <= Delta_2`` (Cauchy-Schwarz; Supp. B.4
bounds the same quantity). For the vector of ``N_S`` log weights:

- L1 sensitivity ``N_S Delta_2``: coordinate-wise ``Laplace(log(1 - rho^2), rho)`` noise with
  ``rho = 2 N_S / (N_D lam eps)`` is **(eps, 0)-DP** (Corollary 1: ``N_S`` releases of
  ``eps / N_S`` each). ``E[exp(zeta)] = 1`` needs ``rho < 1`` and a finite variance
  ``rho < 1/2`` (Kozubowski & Podgorski 2003; Supp. B.4, eq. 15).
- L2 sensitivity ``sqrt(N_S) Delta_2`` (``||X (beta_hat - beta_hat')||_2 <= sqrt(N_S) Delta_2``
  since each row has norm <= 1): ``N(-gamma^2/2, gamma^2)`` noise with the analytic Gaussian
  ``gamma`` for that sensitivity is **(eps, delta)-DP** for any ``eps`` (Corollary 2 with the
  Balle & Wang 2018 calibration the paper points to for ``eps >= 1``). This is tighter than the
  paper's ``N_S eps`` composition, which treats the ``N_S`` releases as independent. Then
  ``Var[exp(zeta)] = exp(gamma^2) - 1`` (the paper's ``gamma^2`` is its first-order value).

The privacy cost grows with ``N_S``. As in Supplement C.1, :func:`largest_release_size` gives the
largest ``N_S`` whose noise scale stays below a limit (``rho < 1/2`` for Laplace by default).
"""

from __future__ import annotations

import hashlib
import math

import numpy as np
import pandas as pd

from synthinfer.errors import PrivacyError, ReleaseError
from synthinfer.privacy import PrivacyLedger, gaussian_mechanism, gaussian_sigma, laplace_mechanism, seed_fixed
from synthinfer.privacy.randomness import SeedLike
from synthinfer.weights.classifier import WeightEstimator, ledger_for, log_prior_ratio
from synthinfer.weights.features import Bounds, FeatureMap
from synthinfer.weights.logistic import _check_lam, fit_regularised_logreg, logreg_l2_sensitivity


def output_noise_scale(n_release: int, n_real: int, lam: float, epsilon: float, delta: float = 0.0,
                       noise: str = "laplace") -> float:
    """``rho`` (Laplace) or ``gamma`` (Gaussian) for releasing ``n_release`` log weights."""
    if n_release < 1:
        raise PrivacyError(f"n_release must be >= 1, got {n_release}")
    d2 = logreg_l2_sensitivity(n_real, lam)
    if noise == "laplace":
        if not (isinstance(epsilon, (int, float)) and math.isfinite(epsilon) and epsilon > 0):
            raise PrivacyError(f"epsilon must be a finite number > 0, got {epsilon!r}")
        return n_release * d2 / epsilon
    if noise == "gaussian":
        return gaussian_sigma(epsilon, delta, math.sqrt(n_release) * d2)
    raise PrivacyError(f"noise must be 'laplace' or 'gaussian', got {noise!r}")


def largest_release_size(n_real: int, lam: float, epsilon: float, delta: float = 0.0, noise: str = "laplace",
                         max_scale: float = 0.5, n_available: int | None = None) -> int:
    """Largest ``N_S`` whose noise scale is ``< max_scale`` (Supplement C.1); 0 if none fits.

    Laplace: the scale is linear in ``N_S``; the default ``max_scale = 1/2`` is the
    finite-variance limit of Corollary 1 (``max_scale`` must be <= 1 for unbiasedness).
    Gaussian: the scale grows like ``sqrt(N_S)``; ``max_scale`` bounds ``gamma`` (the
    variance factor is ``exp(gamma^2) - 1``).
    """
    if noise == "laplace" and not (0 < max_scale <= 1):
        raise PrivacyError(f"Laplace output noise needs 0 < max_scale <= 1, got {max_scale}")
    if not max_scale > 0:
        raise PrivacyError(f"max_scale must be > 0, got {max_scale}")
    one = output_noise_scale(1, n_real, lam, epsilon, delta, noise)
    if noise == "laplace":
        n = math.ceil(max_scale / one) - 1  # strict inequality n * one < max_scale
    else:
        n = math.ceil((max_scale / one) ** 2) - 1
        while n >= 1 and output_noise_scale(n, n_real, lam, epsilon, delta, noise) >= max_scale:
            n -= 1
    n = max(n, 0)
    return min(n, n_available) if n_available is not None else n


def _fingerprint(x: np.ndarray) -> str:
    return hashlib.sha256(np.ascontiguousarray(x).tobytes()).hexdigest()


class OutputPerturbedWeights(WeightEstimator):
    """Release ``N_S`` noisy log weights once, at :meth:`fit` (Corollaries 1 and 2).

    The noise is drawn per released weight, so the weights exist only for the rows released at
    fit: the first ``n_release_`` synthetic rows (``release_index_``). :meth:`log_weights`
    returns them for exactly those rows and refuses other rows (new rows would need new budget).

    Parameters
    ----------
    bounds, lam, clip : as :class:`~synthinfer.weights.LogRegWeights`.
    epsilon, delta : the budget of the whole release.
    noise : ``"laplace"`` (Corollary 1, delta = 0) or ``"gaussian"`` (Corollary 2).
    n_release : how many weights to release; ``None`` = the largest that keeps the noise scale
        below ``max_scale`` (:func:`largest_release_size`), capped at ``N_G``.
    max_scale : limit on ``rho`` / ``gamma`` used when ``n_release`` is None, and checked
        when it is given (Laplace: must be <= 1; 1/2 gives finite variance).
    seed : no effect on the noise, which OpenDP draws from its own CSPRNG
        (:mod:`synthinfer.privacy.samplers`); only whether it was fixed is recorded.
    """

    def __init__(self, bounds: Bounds, *, epsilon: float, delta: float = 0.0, lam: float = 0.1,
                 noise: str = "laplace", n_release: int | None = None, max_scale: float = 0.5,
                 seed: SeedLike = None, clip: bool = False):
        self.bounds = bounds
        self.epsilon = epsilon
        self.delta = delta
        self.lam = lam
        self.noise = noise
        self.n_release = n_release
        self.max_scale = max_scale
        self.seed = seed
        self.clip = clip

    def fit(self, real: pd.DataFrame, synthetic: pd.DataFrame, ledger: PrivacyLedger | None = None) -> OutputPerturbedWeights:
        """Fit ``beta_hat``, spend the budget, and release noisy log weights of the first ``N_S`` rows."""
        _check_lam(self.lam)
        if self.noise == "laplace" and self.delta not in (0, 0.0):
            raise PrivacyError("Laplace output perturbation is (epsilon, 0)-DP: leave delta=0 or use noise='gaussian'")
        self._check_tables(real, synthetic)
        self.ledger_ = ledger_for(ledger, self.epsilon, self.delta, len(real))
        n_real = len(real)
        n_max = largest_release_size(n_real, self.lam, self.epsilon, self.delta, self.noise, self.max_scale, len(synthetic))
        n_s = n_max if self.n_release is None else int(self.n_release)
        if n_s < 1:
            raise PrivacyError(
                f"no weight can be released with noise scale < {self.max_scale} (epsilon={self.epsilon}, "
                f"N_D={n_real}, lam={self.lam}); increase epsilon or lam, or use BetaDebiased"
            )
        if n_s > len(synthetic):
            raise PrivacyError(f"n_release={n_s} exceeds the {len(synthetic)} synthetic rows")
        scale = output_noise_scale(n_s, n_real, self.lam, self.epsilon, self.delta, self.noise)
        if scale >= self.max_scale:
            raise PrivacyError(
                f"releasing {n_s} weights needs noise scale {scale:.4g} >= max_scale={self.max_scale}; "
                f"at most {n_max} fit (Supplement C.1)"
            )
        features = FeatureMap(self.bounds, clip=self.clip)
        x_syn = features.transform(synthetic.iloc[:n_s])
        beta = fit_regularised_logreg(features.transform(real, sparse=True), features.transform(synthetic, sparse=True),
                                      self.lam)
        log_w_hat = x_syn @ beta + log_prior_ratio(n_real, len(synthetic))
        d2 = logreg_l2_sensitivity(n_real, self.lam)
        if self.noise == "laplace":
            noisy, rho = laplace_mechanism(log_w_hat, sensitivity=n_s * d2, epsilon=self.epsilon, ledger=self.ledger_,
                                           name="output-perturbed log weights")
            self.log_weights_ = noisy + math.log1p(-rho**2)  # location log(1 - rho^2): E[exp(zeta)] = 1
        else:
            noisy, gamma = gaussian_mechanism(log_w_hat, sensitivity=math.sqrt(n_s) * d2, epsilon=self.epsilon,
                                              delta=self.delta, ledger=self.ledger_,
                                              name="output-perturbed log weights")
            self.log_weights_ = noisy - gamma**2 / 2  # mean -gamma^2/2: E[exp(zeta)] = 1
        self.noise_scale_ = scale
        self.n_release_ = n_s
        self.release_index_ = synthetic.index[:n_s]
        self.n_real_, self.n_synthetic_ = n_real, len(synthetic)
        self.features_ = features
        self._fingerprint = _fingerprint(x_syn)
        self.seed_fixed_ = seed_fixed(self.seed)
        return self

    def noise_variance_factor(self) -> float:
        """``Var[exp(zeta)]`` of eq. (6): log-Laplace (eq. 15) or log-normal ``exp(gamma^2) - 1``."""
        self._check_fitted("log_weights_")
        s = self.noise_scale_
        if self.noise == "laplace":
            return math.inf if s >= 0.5 else (1 - s**2) ** 2 * (1 / (1 - 4 * s**2) - 1 / (1 - s**2) ** 2)
        return math.expm1(s**2)

    def log_weights(self, synthetic: pd.DataFrame) -> np.ndarray:
        """The released log weights; ``synthetic`` must be exactly the released rows."""
        self._check_fitted("log_weights_")
        x = self.features_.transform(synthetic)
        if len(x) != self.n_release_ or _fingerprint(x) != self._fingerprint:
            raise ReleaseError(
                f"output-perturbed weights exist only for the {self.n_release_} rows released at fit "
                "(synthetic.iloc[:n_release_]); weighting other rows would need new budget"
            )
        return self.log_weights_.copy()
