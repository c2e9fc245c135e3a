"""Logistic-regression importance weights: LogReg, BetaNoised (Ji & Elkan 2013), BetaDebiased.

All three fit the L2-regularised logistic regression of Section 3.3 to real (``y = 1``) versus
synthetic (``y = 0``) rows, with the features of :class:`~synthinfer.weights.features.FeatureMap`
(public bounds, intercept appended, ``||x||_2 <= 1``):

    beta_hat = argmin_beta (1/N_D) sum_{i=1}^{N_D + N_G} log(1 + exp(-s_i beta^T x_i)) + (lam/2) ||beta||^2,

with ``s_i = +-1``. The loss is summed over real *and* synthetic rows but divided by ``N_D``,
as in the paper's ``rho = 2 sqrt(d) / (N_D lam eps)``. Neighbouring datasets replace one real
row; the synthetic rows are already DP (or public) and fixed.

**Sensitivity** (Chaudhuri, Monteleoni & Sarwate 2011, Corollary 8): the logistic loss is
1-Lipschitz in ``beta^T x`` and ``||x||_2 <= 1``, the objective is ``lam``-strongly convex, so
``||beta_hat(D) - beta_hat(D')||_2 <= 2 / (N_D lam)`` and hence
``||.||_1 <= 2 sqrt(d) / (N_D lam)``.

The paper (Section 3.3) states ``2 sqrt(d) / (N_D lam)`` as the L2 sensitivity for features in
``[0, 1]^d`` and then adds coordinate-wise Laplace noise of that scale. Coordinate-wise Laplace
noise must be calibrated to the L1 sensitivity, which in ``[0, 1]^d`` is ``2 d / (N_D lam)``, so
that recipe is only ``sqrt(d) eps``-DP. Scaling the features into the unit ball makes the
paper's formula exact: ``rho = 2 sqrt(d) / (N_D lam eps)`` *is* ``Delta_1 / eps`` here.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pandas as pd

from synthinfer.errors import (
    ConvergenceError,
    DebiasingError,
    NonPrivateWarning,
    ParameterError,
    PrivacyError,
    SynthinferWarning,
    user_stacklevel,
)
from synthinfer.privacy import PrivacyLedger, gaussian_mechanism, gaussian_sigma, laplace_mechanism, seed_fixed
from synthinfer.privacy.randomness import SeedLike
from synthinfer.weights.classifier import WeightEstimator, ledger_for, log_prior_ratio
from synthinfer.weights.features import Bounds, FeatureMap


def _check_lam(lam: float) -> float:
    if isinstance(lam, bool) or not isinstance(lam, (int, float)) or not math.isfinite(lam) or lam <= 0:
        raise ParameterError(f"lam (the L2 regularisation) must be a finite number > 0, got {lam!r}")
    return float(lam)


def fit_regularised_logreg(x_real: np.ndarray, x_synth: np.ndarray, lam: float, *, tol: float = 1e-12,
                           max_iter: int = 100) -> np.ndarray:
    """``beta_hat`` of the objective in the module docstring (no separate, unpenalised intercept).

    Damped Newton iterations on ``f(beta) = (1/N_D) sum_i softplus(-s_i beta^T x_i) + (lam/2) ||beta||^2``.
    Hand-written rather than scikit-learn because the sensitivity bound holds for the *exact*
    minimiser: Newton converges quadratically to machine precision in a few steps (``d`` is
    small), whereas ``lbfgs`` stops about 1e-6 short. A test checks the result against
    scikit-learn.
    """
    from scipy.linalg import cho_factor, cho_solve
    from scipy.special import expit

    import scipy.sparse

    lam = _check_lam(lam)
    # CSR features (FeatureMap.transform(sparse=True)) keep a fit on millions of rows in memory
    sparse = scipy.sparse.issparse(x_real) or scipy.sparse.issparse(x_synth)
    x = (scipy.sparse.vstack([scipy.sparse.csr_array(x_real), scipy.sparse.csr_array(x_synth)], format="csr")
         if sparse else np.vstack([x_real, x_synth]))
    y = np.r_[np.ones(x_real.shape[0]), np.zeros(x_synth.shape[0])]
    sign = 2 * y - 1
    n_d, dim = x_real.shape[0], x.shape[1]

    def objective(beta):
        return np.logaddexp(0.0, -sign * (x @ beta)).sum() / n_d + 0.5 * lam * beta @ beta

    beta = np.zeros(dim)
    f = objective(beta)
    for _ in range(max_iter):
        p = expit(x @ beta)
        grad = x.T @ (p - y) / n_d + lam * beta
        curvature = p * (1 - p)
        gram = (x.T @ x.multiply(curvature[:, None])).toarray() if sparse else (x * curvature[:, None]).T @ x
        hess = gram / n_d + lam * np.eye(dim)
        step = cho_solve(cho_factor(hess), grad)
        t = 1.0
        while True:  # backtracking (Armijo) keeps far-from-optimum steps from overshooting
            new = beta - t * step
            f_new = objective(new)
            # near the optimum f changes by less than its rounding error: take the Newton step
            if f_new <= f - 1e-4 * t * grad @ step or f_new <= f + 8 * np.finfo(float).eps * abs(f) or t < 1e-10:
                break
            t *= 0.5
        beta, f = new, f_new
        if np.max(np.abs(t * step)) <= tol * max(1.0, np.max(np.abs(beta))):
            break
    grad = x.T @ (expit(x @ beta) - y) / n_d + lam * beta
    if not np.linalg.norm(grad) <= GRADIENT_TOLERANCE:
        # The sensitivity holds only near the exact minimiser (see logreg_l2_sensitivity).
        raise ConvergenceError(
            f"the regularised logistic regression did not converge (gradient norm {np.linalg.norm(grad):.3g} > "
            f"{GRADIENT_TOLERANCE:g} after {max_iter} Newton steps); nothing was spent"
        )
    return beta


#: Largest gradient norm accepted at the computed minimiser. lam-strong convexity gives
#: ``||beta~ - beta*|| <= ||grad f(beta~)|| / lam``, so a released ``beta~`` is within
#: ``GRADIENT_TOLERANCE / lam`` of the exact minimiser, a public bound the sensitivity includes.
GRADIENT_TOLERANCE = 1e-9


def logreg_l2_sensitivity(n_real: int, lam: float) -> float:
    """``||beta~(D) - beta~(D')||_2 <= 2 / (N_D lam) + 2 tol / lam``.

    ``2 / (N_D lam)`` bounds the exact minimisers (Chaudhuri et al. 2011, Cor. 8); the computed
    ones are each within ``tol / lam`` of theirs (:data:`GRADIENT_TOLERANCE`, checked by
    :func:`fit_regularised_logreg`), which adds ``2 tol / lam`` (relative 1e-9 N_D: negligible).
    """
    lam = _check_lam(lam)
    return 2.0 / (n_real * lam) + 2.0 * GRADIENT_TOLERANCE / lam


def logreg_l1_sensitivity(n_real: int, lam: float, dim: int) -> float:
    """L1 sensitivity ``2 sqrt(d) / (N_D lam)`` (L2 bound times ``sqrt(d)``)."""
    return math.sqrt(dim) * logreg_l2_sensitivity(n_real, lam)


class LogRegWeights(WeightEstimator):
    """Non-private logistic-regression weights ``log w(x) = beta_hat^T x + log(N_G/N_D)``.

    **Not differentially private**: ``beta_hat`` is an exact function of the real data. Use it
    as the target the private variants estimate, never for a release.

    Parameters
    ----------
    bounds : public column bounds / categories (see :class:`FeatureMap`).
    lam : L2 regularisation ``lambda`` of Section 3.3.
    clip : clip numeric values to their public bounds instead of raising.
    """

    def __init__(self, bounds: Bounds, *, lam: float = 0.1, clip: bool = False):
        self.bounds = bounds
        self.lam = lam
        self.clip = clip

    def _fit_beta(self, real: pd.DataFrame, synthetic: pd.DataFrame) -> np.ndarray:
        self._check_tables(real, synthetic)
        _check_lam(self.lam)
        self.features_ = FeatureMap(self.bounds, clip=self.clip)
        self.beta_hat_ = fit_regularised_logreg(self.features_.transform(real, sparse=True),
                                                self.features_.transform(synthetic, sparse=True), self.lam)
        self.n_real_, self.n_synthetic_ = len(real), len(synthetic)
        return self.beta_hat_

    def fit(self, real: pd.DataFrame, synthetic: pd.DataFrame, ledger: PrivacyLedger | None = None) -> LogRegWeights:
        """Fit ``beta_hat``. Warns :class:`NonPrivateWarning`; ``ledger`` is not used."""
        warnings.warn("LogRegWeights uses the real data without privacy protection", NonPrivateWarning,
                      stacklevel=user_stacklevel())
        self.coef_ = self._fit_beta(real, synthetic)
        self.ledger_ = ledger
        return self

    def log_weights(self, synthetic: pd.DataFrame) -> np.ndarray:
        self._check_fitted("coef_")
        x = self.features_.transform(synthetic, sparse=True)
        return x @ self.coef_ + log_prior_ratio(self.n_real_, self.n_synthetic_)


class BetaNoised(LogRegWeights):
    """Ji & Elkan (2013), Algorithm 1; Ghalebikesabi et al. (2022), eq. (4): noisy coefficients.

    ``beta_bar = beta_hat + zeta`` and ``log w_bar(x) = beta_bar^T x + log(N_G/N_D)``.

    Mechanisms and guarantees (sensitivities in the module docstring):

    - ``noise="laplace"`` (default): ``zeta_j ~ Laplace(0, rho)`` i.i.d. with
      ``rho = 2 sqrt(d) / (N_D lam eps)`` = L1 sensitivity / eps: **(eps, 0)-DP** (Laplace
      mechanism, Dwork et al. 2006).
    - ``noise="gaussian"``: ``zeta ~ N(0, sigma^2 I)`` with the analytic Gaussian sigma for L2
      sensitivity ``2 / (N_D lam)`` (Balle & Wang 2018): **(eps, delta)-DP**, needs ``delta > 0``.

    Weights of any rows are post-processing of ``beta_bar``: releasing them costs nothing more.
    These weights are biased: ``E_zeta[w_bar(x)] = w_hat(x) / b(x) != w_hat(x)``
    (Proposition 1); :class:`BetaDebiased` corrects this.

    Parameters
    ----------
    bounds, lam, clip : as :class:`LogRegWeights`.
    epsilon, delta : the budget this estimator spends.
    noise : ``"laplace"`` or ``"gaussian"``.
    seed : no effect on the noise, which OpenDP draws from its own CSPRNG
        (:mod:`synthinfer.privacy.samplers`); only whether it was fixed is recorded.
    """

    def __init__(self, bounds: Bounds, *, epsilon: float, delta: float = 0.0, lam: float = 0.1,
                 noise: str = "laplace", seed: SeedLike = None, clip: bool = False):
        super().__init__(bounds, lam=lam, clip=clip)
        self.epsilon = epsilon
        self.delta = delta
        self.noise = noise
        self.seed = seed

    def _noise_scale(self, n_real: int, dim: int) -> float:
        """rho (Laplace scale) or sigma (Gaussian standard deviation) of zeta."""
        if self.noise == "laplace":
            return logreg_l1_sensitivity(n_real, self.lam, dim) / self.epsilon
        if self.noise == "gaussian":
            return gaussian_sigma(self.epsilon, self.delta, logreg_l2_sensitivity(n_real, self.lam))
        raise PrivacyError(f"noise must be 'laplace' or 'gaussian', got {self.noise!r}")

    def _check_before_noise(self, scale: float, dim: int, n_real: int) -> None:
        """Hook run after the noise scale is known and before any budget is spent."""

    def fit(self, real: pd.DataFrame, synthetic: pd.DataFrame, ledger: PrivacyLedger | None = None) -> BetaNoised:
        """Fit ``beta_hat``, spend ``(epsilon, delta)`` through ``ledger``, and noise the coefficients."""
        _check_lam(self.lam)
        if self.noise == "laplace" and self.delta not in (0, 0.0):
            raise PrivacyError("the Laplace mechanism is (epsilon, 0)-DP: leave delta=0 or use noise='gaussian'")
        self._check_tables(real, synthetic)
        self.ledger_ = ledger_for(ledger, self.epsilon, self.delta, len(real))
        dim = FeatureMap(self.bounds, clip=self.clip).dim
        scale = self._noise_scale(len(real), dim)  # validates epsilon / delta / noise
        self._check_before_noise(scale, dim, len(real))
        name = type(self).__name__
        self.ledger_.check(f"{name} coefficients", self.epsilon, self.delta, mechanism=f"{self.noise} mechanism")
        try:
            beta_hat = self._fit_beta(real, synthetic)
            if self.noise == "laplace":
                self.coef_, self.noise_scale_ = laplace_mechanism(
                    beta_hat, sensitivity=logreg_l1_sensitivity(self.n_real_, self.lam, dim), epsilon=self.epsilon,
                    ledger=self.ledger_, name=f"{name} coefficients")
            else:
                self.coef_, self.noise_scale_ = gaussian_mechanism(
                    beta_hat, sensitivity=logreg_l2_sensitivity(self.n_real_, self.lam), epsilon=self.epsilon,
                    delta=self.delta, ledger=self.ledger_, name=f"{name} coefficients")
        finally:
            # only the privatised coefficients are kept, whatever happened
            self.__dict__.pop("beta_hat_", None)
        self.seed_fixed_ = seed_fixed(self.seed)
        return self


def laplace_log_debias(x: np.ndarray, rho: float) -> np.ndarray:
    """``log b(x) = sum_j log(1 - rho^2 x_j^2)`` for ``zeta_j ~ Laplace(0, rho)`` (Supp. B.2.1, eq. 12).

    ``1 / b(x)`` is the Laplace moment generating function ``prod_j 1 / (1 - rho^2 x_j^2)``,
    which exists only for ``|x_j| < 1 / rho``.
    """
    return _row_sums(x, lambda v: np.log1p(-((rho * v) ** 2)))


def gaussian_log_debias(x: np.ndarray, sigma: float) -> np.ndarray:
    """``log b(x) = -sigma^2 ||x||^2 / 2`` for ``zeta ~ N(0, sigma^2 I)`` (Supp. B.2.2); always exists."""
    return -0.5 * sigma**2 * _row_sums(x, np.square)


def _row_sums(x, f) -> np.ndarray:
    """``sum_j f(x_j)`` per row for an ``f`` with ``f(0) = 0``: of a CSR array's entries only."""
    import scipy.sparse

    if scipy.sparse.issparse(x):
        x = x.tocsr(copy=True)
        x.data = f(x.data.astype(float))
        return np.asarray(x.sum(axis=1)).ravel()
    return np.sum(f(np.asarray(x, dtype=float)), axis=-1)


class BetaDebiased(BetaNoised):
    """Debiased noisy-coefficient weights (Proposition 2, eq. 5): ``w_bar*(x) = w_bar(x) b(x)``.

    ``b(x) = 1 / E_zeta[exp(zeta^T x)]`` makes ``E_zeta[w_bar*(x)] = w_hat(x)``, so the
    importance-sampling estimator ``I_N(h | w_bar*)`` is unbiased for ``I_N(h | w_hat)``:

    - Laplace noise: ``b(x) = prod_j (1 - rho^2 x_j^2)``, which needs ``|x_j| < 1/rho``
      (Supp. B.2.1). Every row has the intercept coordinate ``1/sqrt(d)``, so the condition is
      ``rho < sqrt(d)``; :meth:`fit` checks it *before spending any budget* and raises
      :class:`DebiasingError` naming the fixes. Finite variance of the weights needs
      ``rho < sqrt(d) / 2``; a warning is issued otherwise.
    - Gaussian noise: ``b(x) = exp(-sigma^2 ||x||^2 / 2)`` always exists (Supp. B.2.2).

    Guarantee and sensitivity: those of :class:`BetaNoised` (``b`` is public post-processing of
    the released coefficients, Supp. B.2.3).
    """

    def _check_before_noise(self, scale: float, dim: int, n_real: int) -> None:
        if self.noise != "laplace":
            return
        max_x = 1.0 / math.sqrt(dim)
        if scale * max_x >= 1.0:
            raise DebiasingError(
                f"BetaDebiased with Laplace noise needs |x_j| < 1/rho, but rho = {scale:.4g} and the features "
                f"reach 1/sqrt(d) = {max_x:.4g} (d = {dim}, N_D = {n_real}). "
                f"Fixes: more regularisation (lam > {scale * max_x * self.lam:.4g}), a larger epsilon, or the "
                "Gaussian variant of Supplement B.2.2 (noise='gaussian' with delta > 0), whose correction always exists. "
                "No budget was spent."
            )
        if 2.0 * scale * max_x >= 1.0:
            warnings.warn(
                f"rho = {scale:.4g} >= sqrt(d)/2 = {0.5 / max_x:.4g}: the debiased weights are unbiased but may have "
                "infinite variance (Supp. B.2.1); consider a larger lam or epsilon",
                SynthinferWarning,
                stacklevel=user_stacklevel(),
            )

    def log_debias(self, synthetic: pd.DataFrame) -> np.ndarray:
        """``log b(x)`` for each row (raises :class:`DebiasingError` where it does not exist)."""
        self._check_fitted("coef_")
        x = self.features_.transform(synthetic, sparse=True)
        if self.noise == "gaussian":
            return gaussian_log_debias(x, self.noise_scale_)
        bad = abs(x).max(axis=1).toarray().ravel() * self.noise_scale_ >= 1.0
        if bad.any():  # unreachable with FeatureMap features; kept as a guard for subclasses
            raise DebiasingError(f"{int(bad.sum())} rows have |x_j| >= 1/rho = {1 / self.noise_scale_:.4g}")
        return laplace_log_debias(x, self.noise_scale_)

    def log_weights(self, synthetic: pd.DataFrame) -> np.ndarray:
        return super().log_weights(synthetic) + self.log_debias(synthetic)
