"""The Laplace approximation of NAPSU-MQ's posterior (Supplement E) and its Gaussianity check.

The MAP is found by preconditioned L-BFGS with restarts (:mod:`synthinfer.napsu.optimize`) on
the network's compiled negative log posterior; the covariance is the inverse Hessian there.
"""

from __future__ import annotations

import time
import warnings
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from synthinfer._jax import uses_float64
from synthinfer.errors import ConvergenceError, ConvergenceWarning, user_stacklevel
from synthinfer.napsu.likelihood import (
    PRIOR_SD, batch_size, evaluate_in_batches, gradients, objective, posterior_args, value_and_grad, values,
)
from synthinfer.napsu.optimize import OptimResult, hessian, lbfgs_minimize

if TYPE_CHECKING:
    from synthinfer.napsu.structured import Layout
    from synthinfer.napsu.network import MarkovNetwork


@dataclass
class LaplaceResult:
    """Gaussian approximation ``N(mean, cov)`` of the posterior at its mode."""

    mean: np.ndarray
    cov: np.ndarray
    chol: np.ndarray  # lower Cholesky factor of cov
    optim: OptimResult
    seconds: float

    @property
    def converged(self) -> bool:
        return self.optim.converged

    def sample(self, num: int, rng: np.random.Generator) -> np.ndarray:
        """``num`` draws from ``N(mean, cov)``."""
        z = rng.standard_normal((num, self.mean.shape[0]))
        return self.mean + z @ self.chol.T

    def info(self) -> dict[str, Any]:
        o = self.optim
        return {
            "converged": o.converged,
            "restarts": o.n_restarts,
            "iterations": o.n_iterations,
            "gradient_evaluations": o.n_grad_evals,
            "neg_log_posterior": o.loss,
            "grad_max_abs": o.grad_norm,
            "attempts": o.attempts,
            "seconds": self.seconds,
        }



@uses_float64
def laplace_gap(
    network: MarkovNetwork,
    s_tilde: np.ndarray,
    sigma_dp: float | np.ndarray,
    n: int,
    laplace: LaplaceResult,
    *,
    prior_sd: float = PRIOR_SD,
    cell_prior: float = 0.0,
    interaction_sd: float | None = None,
    radius: float = 2.0,
    layout: Layout | None = None,
) -> np.ndarray:
    """How far the posterior is from its Laplace approximation, per whitened axis.

    Along ``theta = mean ± radius * chol[:, k]`` the Gaussian predicts the log posterior to
    drop by ``radius^2 / 2``; returns, for each axis ``k``, the largest absolute gap (in nats)
    between that prediction and the exact drop. Near-empty marginal cells make the posterior
    one-sided (flat towards small probabilities, an exponential wall towards large ones), and
    there the gap is enormous: on Adult at epsilon = 1 it reaches 1e6 nats at radius 3, so
    Laplace draws can put far too much mass into such cells. The check is our addition (the
    paper only reports that the Laplace approximation did poorly on Adult); it costs ``2 d + 1``
    log-posterior values, evaluated in blocks by the network's batched value program
    (:func:`synthinfer.napsu.likelihood.values`: no gradients).
    """
    program = values(network, "neg_log_posterior", layout)
    args = posterior_args(s_tilde, sigma_dp, n, prior_sd, cell_prior, interaction_sd)
    x = np.asarray(laplace.mean, dtype=np.float64)
    d = x.shape[0]
    steps = radius * np.asarray(laplace.chol, dtype=np.float64).T
    f = evaluate_in_batches(program, np.concatenate([x[None], x + steps, x - steps]), args, batch_size(network))
    base, plus, minus = f[0], f[1:d + 1], f[d + 1:]
    expected = radius**2 / 2.0
    gap_plus = np.abs(plus - base - expected)
    gap_minus = np.abs(minus - base - expected)
    return np.maximum(gap_plus, gap_minus)


@uses_float64
def laplace_approximation(
    network: MarkovNetwork,
    s_tilde: np.ndarray,
    sigma_dp: float | np.ndarray,
    n: int,
    *,
    prior_sd: float = PRIOR_SD,
    cell_prior: float = 0.0,
    interaction_sd: float | None = None,
    max_iter: int = 6000,
    tol: float = 1e-5,
    max_restarts: int = 5,
    rng: np.random.Generator,
    layout: Layout | None = None,
) -> LaplaceResult:
    """Laplace approximation of ``p(theta | s~)`` (Gelman et al. 2014; NAPSU-MQ Supplement E).

    The MAP ``theta*`` minimises the negative log posterior with L-BFGS from ``theta = 0``
    (the uniform distribution); the covariance is the inverse Hessian of the negative log
    posterior at ``theta*``. An optimum whose Hessian is not positive definite counts as a
    failed attempt and is restarted like a diverged one.

    ``s_tilde`` are the canonical queries' noisy counts, or any measured values in the order
    of ``layout`` (:mod:`synthinfer.napsu.structured`), with ``sigma_dp`` their noise standard
    deviation (a scalar or one per value). ``prior_sd``, ``cell_prior`` and ``interaction_sd``:
    the prior (:mod:`synthinfer.napsu.likelihood`).
    """
    t0 = time.perf_counter()
    vg = value_and_grad(network, "neg_log_posterior", layout)
    grads = gradients(network, "neg_log_posterior", layout=layout)
    curvature = objective(network, "neg_log_posterior", layout)[1]
    args = posterior_args(s_tilde, sigma_dp, n, prior_sd, cell_prior, interaction_sd)
    d = network.dimension
    held: dict[str, np.ndarray] = {}

    def accept(x: np.ndarray) -> bool:
        h = hessian(grads, x, args, batch=batch_size(network))
        try:
            lh = np.linalg.cholesky(h)
        except np.linalg.LinAlgError:
            return False
        held["x"], held["lh"] = x, lh
        return bool(np.all(np.isfinite(lh)))

    res = lbfgs_minimize(
        vg, np.zeros(d), args, curvature_fn=curvature, max_iter=max_iter, tol=tol,
        max_restarts=max_restarts, rng=rng, accept=accept,
    )
    if "x" not in held or not np.array_equal(held["x"], res.x):
        if not accept(res.x):
            raise ConvergenceError(
                "Laplace approximation: the Hessian of the negative log posterior is not positive "
                f"definite at the best point found after {res.n_restarts} restarts"
            )
    # cov = H^{-1} = (L L^T)^{-1};  chol(cov) = L^{-T} up to orientation: use a direct inverse.
    lh = held["lh"]
    linv = np.linalg.solve(lh, np.eye(d))  # L^{-1}
    cov = linv.T @ linv
    cov = 0.5 * (cov + cov.T)
    chol = np.linalg.cholesky(cov)
    if not res.converged:
        warnings.warn(
            f"Laplace approximation: L-BFGS did not converge in {res.n_restarts + 1} attempts "
            f"(final loss {res.loss:.6g}); the approximation is centred at the best point found",
            ConvergenceWarning,
            stacklevel=user_stacklevel(),
        )
    return LaplaceResult(res.x, cov, chol, res, time.perf_counter() - t0)

