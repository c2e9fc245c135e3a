"""Data-driven calibration of the beta-loss weight w_beta (Lyddon, Holmes & Walker 2019).

A general Bayesian posterior ``pi(theta) exp(-w sum_j l(z_j; theta))`` is only determined up to
the scale ``w`` of the loss. Wilde et al. fix ``w_beta = 1.25`` (A.6.3); their reference code never
connects its calibration routine. We calibrate by *Fisher-information matching* (Lyddon, Holmes &
Walker 2019, Biometrika 106(2), Section 4): asymptotically the general posterior has covariance
``(w m J)^{-1}`` while the loss-likelihood bootstrap (the sampling distribution of the
loss-minimiser) has ``J^{-1} I J^{-1} / m``, where at the minimiser theta-hat

    J = (1/m) sum_j Hess_theta l(z_j; theta-hat),    I = (1/m) sum_j grad l(z_j) grad l(z_j)^T.

Matching the traces of the two information matrices gives

    w* = tr(J I^{-1} J^T) / tr(J).

With importance weights ``w_j`` on the rows (``ImportanceWeightedLoss``) the loss is
``sum_j w_j l(z_j)``, so each row's contribution is ``w_j l(z_j)``: ``J`` averages ``w_j Hess l``,
``I`` averages ``w_j^2 grad l grad l^T``, and theta-hat minimises the weighted loss. (Leaving the
weights out understates ``I`` when they are heavy-tailed, and w* then comes out too large.)

Why this method: it needs no extra tuning constant, is invariant to the arbitrary scale of the
beta-loss, reduces to w = 1 for the log loss of a correctly specified model (I = J), and for the
beta-loss, which is 'cautious' everywhere (A.6.1.1), it returns w > 1 as the paper's fixed 1.25
intends, but computed from the data at hand.
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np
import scipy.optimize

from synthinfer._jax import jax, jnp, uses_float64
from synthinfer.errors import ConvergenceError, EmptyDataError, ParameterError


@functools.lru_cache(maxsize=64)
def _compiled(model: Any, loss: Any) -> tuple:
    """Jitted mean loss, its gradient, per-row gradients and Hessian (cached per model and loss,
    so repeated calibrations on same-shaped data do not recompile)."""
    def per_row(u, d):
        # rows weighted by their importance weight, when the data carry one (_ROW_WEIGHT)
        return d.get(_ROW_WEIGHT, 1.0) * loss.unweighted_per_row(model, u, d)

    mean = lambda u, d: jnp.mean(per_row(u, d))  # noqa: E731
    return (
        jax.jit(mean),
        jax.jit(jax.grad(mean)),
        jax.jit(jax.jacfwd(per_row)),
        jax.jit(jax.hessian(mean)),
    )


#: Data key of the per-row importance weights inside calibration (models ignore it).
_ROW_WEIGHT = "_row_weight"


@uses_float64
def loss_minimiser(model: Any, loss: Any, data: dict, init: np.ndarray) -> np.ndarray:
    """theta-hat = argmin_u mean_j l(z_j; u) for the unweighted loss (BFGS with JAX gradients)."""
    f, g, _, _ = _compiled(model, loss)
    d = {k: jnp.asarray(v) for k, v in data.items()}
    res = scipy.optimize.minimize(
        lambda u: float(f(jnp.asarray(u), d)), np.asarray(init, float), jac=lambda u: np.asarray(g(jnp.asarray(u), d)), method="BFGS"
    )
    if not np.all(np.isfinite(res.x)):
        raise ConvergenceError("calibration: the loss minimiser did not converge")
    return res.x


@uses_float64
def calibrate_beta_weight(model: Any, loss: Any, data: dict, row_weights: np.ndarray | None = None) -> float:
    """Fisher-information-matching weight ``w* = tr(J I^{-1} J) / tr(J)`` of ``loss`` on ``data``.

    ``loss`` must offer ``unweighted_per_row`` (the loss with w_beta = 1), e.g. a
    :class:`~synthinfer.bayes.losses.BetaLoss`. ``row_weights`` are the rows' importance
    weights when the posterior uses them (see the module docstring). Computed in the model's unconstrained
    parameterisation (the trace ratio is not reparameterisation invariant; for the models here
    the unconstrained coordinates are the natural ones: location/log-scale, regression coefficients).
    """
    m = int(data["y"].shape[0])
    if m < 2 * model.dim:
        raise EmptyDataError(f"calibrating w_beta needs at least {2 * model.dim} synthetic rows, got {m}")
    if row_weights is not None:
        row_weights = np.asarray(row_weights, dtype=float)
        if row_weights.shape != (m,):
            raise ParameterError(f"row_weights has {row_weights.size} entries for {m} rows")
        data = {**data, _ROW_WEIGHT: row_weights}
    _, _, jac, hess = _compiled(model, loss)
    u_hat = jnp.asarray(loss_minimiser(model, loss, data, model.init_position(data)))
    d = {k: jnp.asarray(v) for k, v in data.items()}
    G = np.asarray(jac(u_hat, d))  # (m, dim) per-row gradients
    J = np.asarray(hess(u_hat, d))
    I = G.T @ G / m
    try:
        w = float(np.trace(J @ np.linalg.solve(I, J.T)) / np.trace(J))
    except np.linalg.LinAlgError as e:
        raise ConvergenceError("calibration: the gradient covariance I is singular") from e
    if not (np.isfinite(w) and w > 0):
        raise ConvergenceError(f"calibration produced w_beta={w!r}; J is not positive definite at the minimiser")
    return w
