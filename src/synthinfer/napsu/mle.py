"""The non-noise-aware PGM point estimate of NAPSU-MQ Supplement D (a baseline for comparisons)."""

from __future__ import annotations

import warnings
from typing import TYPE_CHECKING

import numpy as np

from synthinfer._precision import uses_float64
from synthinfer.errors import ConvergenceWarning, user_stacklevel
from synthinfer.napsu.likelihood import objective, pgm_args, value_and_grad
from synthinfer.napsu.optimize import OptimResult, lbfgs_minimize

if TYPE_CHECKING:
    from synthinfer.napsu.network import MarkovNetwork


@uses_float64
def maximum_likelihood_pgm(
    network: MarkovNetwork,
    s_tilde: np.ndarray,
    n: int,
    *,
    max_iter: int = 6000,
    tol: float = 1e-12,
    max_restarts: int = 3,
    rng: np.random.Generator,
) -> OptimResult:
    """The non-noise-aware point estimate of NAPSU-MQ Supplement D (PGM's objective, eq. 20).

    ``theta_hat = argmin ||s~/n - mu(theta)||^2`` by L-BFGS from ``theta = 0``. The loss is
    on the scale of squared frequencies (at most 2 per marginal), hence the small ``tol``.
    When noisy counts are negative the minimum is at infinity; the optimiser then stops at a
    point of negligible improvement, which is what PGM's own solver does as well.
    """
    vg = value_and_grad(network, "pgm")
    curvature = objective(network, "pgm")[1]
    args = pgm_args(s_tilde, n)
    d = int(np.asarray(s_tilde).shape[0])
    res = lbfgs_minimize(
        vg, np.zeros(d), args, curvature_fn=curvature, max_iter=max_iter, tol=tol, max_restarts=max_restarts, rng=rng
    )
    if not res.converged:
        warnings.warn(
            f"PGM maximum likelihood: L-BFGS did not converge (loss {res.loss:.3g}); using the best point",
            ConvergenceWarning,
            stacklevel=user_stacklevel(),
        )
    return res

