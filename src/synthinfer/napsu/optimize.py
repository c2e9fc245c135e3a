"""L-BFGS with the restart rule of NAPSU-MQ Supplement E, and Hessians by differences of gradients.

L-BFGS works on one compiled value-and-gradient program ``vg(x, *args) -> (f, g)`` (see
:func:`synthinfer.napsu.likelihood.value_and_grad`); the Hessian on a batched gradient program
(:func:`synthinfer.napsu.likelihood.gradients`) that evaluates its ``d + 1`` gradients in blocks.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from synthinfer._jax import jnp
from synthinfer.errors import ConvergenceError


@dataclass
class OptimResult:
    """Result of one (possibly restarted) L-BFGS minimisation."""

    x: np.ndarray
    loss: float
    grad_norm: float
    converged: bool
    n_iterations: int  # over all attempts
    n_grad_evals: int  # value-and-gradient evaluations over all attempts
    n_restarts: int
    attempts: list[dict[str, Any]] = field(default_factory=list)


def _lbfgs_run(vg: Callable, args: tuple, max_iter: int, tol: float, *, x0: np.ndarray,
               precond: np.ndarray | None = None) -> tuple[np.ndarray, float, float, int, int, bool, bool]:
    """One L-BFGS run on ``u``, ``x = x0 + precond @ u`` (``x = x0 + u`` without ``precond``).

    Stops when the loss improves by less than ``tol`` in an iteration (Supplement E) or after
    ``max_iter`` iterations; any non-finite loss or gradient is a failure (Supplement E's
    divergence signal). Returns ``(x, loss, max |grad|, iterations, evaluations, failed,
    met_tol)``.

    Why SciPy's L-BFGS-B and not optax: the optimiser loop runs in Python around the one
    compiled ``vg``. An optax L-BFGS inside ``lax.while_loop`` compiles the objective a second
    time with its zoom line search, a large share of a first fit's time, while the Python
    loop costs tens of microseconds per iteration, little next to a gradient.
    """
    from scipy.optimize import minimize

    x0 = np.asarray(x0, dtype=np.float64)
    st = {"nfev": 0, "nonfinite": False, "prev": None, "it": 0, "met": False}

    def fun(u: np.ndarray) -> tuple[float, np.ndarray]:
        x = x0 + (u if precond is None else precond @ u)
        f, g = vg(jnp.asarray(x), *args)
        f, g = float(f), np.asarray(g, dtype=np.float64)
        st["nfev"] += 1
        if st["prev"] is None:
            st["prev"] = f
        if not (math.isfinite(f) and np.all(np.isfinite(g))):
            st["nonfinite"] = True
            raise StopIteration  # caught below: the attempt has failed
        return f, (g if precond is None else precond.T @ g)

    def callback(intermediate_result) -> None:
        st["it"] += 1
        st["u"] = np.array(intermediate_result.x)
        f = float(intermediate_result.fun)
        if abs(st["prev"] - f) < tol:
            st["met"] = True
            raise StopIteration
        st["prev"] = f

    u0 = np.zeros_like(x0)
    try:
        # ftol = gtol = 0: only the rule above (or no progress at all) stops it
        res = minimize(fun, u0, jac=True, method="L-BFGS-B", callback=callback,
                       options={"maxiter": max_iter, "maxfun": 50 * max_iter, "ftol": 0.0, "gtol": 0.0})
        u, success = res.x, bool(res.success)
    except StopIteration:  # a non-finite evaluation inside the line search: keep the last iterate
        u, success = st.get("u", u0), False
    x = x0 + (u if precond is None else precond @ u)
    f, g = vg(jnp.asarray(x), *args)
    f, gmax = float(f), float(np.max(np.abs(np.asarray(g))))
    failed = st["nonfinite"] or not math.isfinite(f)
    met = not failed and (st["met"] or (success and st["it"] < max_iter))
    return x, (f if math.isfinite(f) else math.nan), gmax, st["it"], st["nfev"] + 1, failed, met


def _preconditioner(curvature: np.ndarray) -> np.ndarray:
    """``P`` with ``P P^T = H^{-1}`` (``P = L^{-T}`` for ``H = L L^T``), H floored to be PD."""
    from scipy.linalg import solve_triangular

    h = 0.5 * (curvature + curvature.T)
    h = h + (1e-10 * np.trace(h) / h.shape[0] + 1e-300) * np.eye(h.shape[0])
    lh = np.linalg.cholesky(h)
    return solve_triangular(lh.T, np.eye(h.shape[0]), lower=False, check_finite=False)  # L^-T: triangular


def lbfgs_minimize(
    vg: Callable,
    x0: np.ndarray,
    args: tuple,
    *,
    curvature_fn: Callable | None = None,
    max_iter: int = 500,
    tol: float = 1e-5,
    max_restarts: int = 5,
    round_iter: int = 20,
    restart_scale: float = 1.0,
    rng: np.random.Generator,
    accept: Callable[[np.ndarray], bool] | None = None,
) -> OptimResult:
    """L-BFGS with the restart rule of NAPSU-MQ Supplement E, optionally preconditioned.

    An attempt fails if the loss or its gradient becomes non-finite, if ``max_iter`` is
    reached without the per-iteration improvement dropping below ``tol``, or if ``accept(x)``
    (e.g. a positive-definite Hessian) is false. A failed attempt is restarted from
    ``N(0, restart_scale^2 I)``; after ``max_restarts`` restarts the best attempt is returned
    with ``converged=False``.

    With ``curvature_fn(x, *args)`` (a positive-definite approximation of the Hessian, e.g.
    Gauss-Newton), L-BFGS runs in rounds of at most ``round_iter`` iterations on ``u`` with
    ``x = x_k + P_k u``, ``P_k P_k^T = H(x_k)^{-1}``, re-preconditioning at each round's end,
    until a round meets the tolerance within 3 iterations (``max_iter`` counts all rounds).
    A round that cannot take a single step ends the metric: the rest of ``max_iter`` runs
    unpreconditioned from there (recorded in the attempt's ``rounds`` as minus its iterations).
    The posteriors here are badly scaled and far from quadratic (query counts from tens to
    tens of thousands, noisy counts below zero), where plain L-BFGS needs many times more
    iterations.
    """
    x = np.asarray(x0, dtype=np.float64)
    attempts: list[dict[str, Any]] = []
    best = None
    iters = nfev = 0
    for attempt in range(max_restarts + 1):
        if curvature_fn is None:
            xo, fo, gmax, it, nf, failed, ok = _lbfgs_run(vg, args, max_iter, tol, x0=x)
        else:
            xo, it, nf, failed, ok, fo, gmax = x, 0, 0, False, False, math.inf, math.nan
            rounds: list[int] = []
            while it < max_iter:
                try:
                    p = _preconditioner(np.asarray(curvature_fn(jnp.asarray(xo), *args)))
                except np.linalg.LinAlgError:
                    failed = True
                    break
                xo, fo, gmax, itr, nfr, failed, met = _lbfgs_run(vg, args, round_iter, tol, x0=xo, precond=p)
                it, nf = it + itr, nf + nfr
                rounds.append(itr)
                if failed:
                    break
                if itr == 0:
                    # The line search found no decrease along this metric's first direction
                    # (a near-singular curvature, e.g. PGM's J^T J where cells are empty).
                    # Preconditioning again at the same point would repeat the round forever:
                    # spend what is left of max_iter without the metric instead.
                    xo, fo, gmax, itr, nfr, failed, ok = _lbfgs_run(vg, args, max_iter - it, tol, x0=xo)
                    it, nf = it + itr, nf + nfr
                    rounds.append(-itr)  # minus: iterations without the metric
                    break
                if met and itr < min(3, round_iter):
                    ok = True
                    break
        iters += it
        nfev += nf
        if ok and accept is not None:
            ok = bool(accept(xo))
        attempts.append({"iterations": it, "loss": fo, "grad_max": gmax, "failed": failed, "accepted": ok})
        if curvature_fn is not None:
            attempts[-1]["rounds"] = rounds
        if math.isfinite(fo) and (best is None or fo < best[1]):
            best = (xo, fo, gmax)
        if ok:
            return OptimResult(xo, fo, gmax, True, iters, nfev, attempt, attempts)
        x = rng.normal(0.0, restart_scale, size=x.shape)
    if best is None:
        raise ConvergenceError(f"L-BFGS produced no finite loss in {max_restarts + 1} attempts")
    return OptimResult(best[0], best[1], best[2], False, iters, nfev, max_restarts, attempts)


def hessian(grads: Callable, x: np.ndarray, args: tuple, step: float | None = None, *, batch: int | None = None,
            central: bool = False) -> np.ndarray:
    """Hessian of an objective at ``x`` by finite differences of its exact gradient.

    Forward differences (the default), ``H[i] = (g(x + h e_i) - g(x)) / h`` with ``h = 1e-6``:
    ``d + 1`` gradients. ``central=True``: ``H[i] = (g(x + h e_i) - g(x - h e_i)) / 2h`` with
    ``h = 1e-5``, ``2 d`` gradients. Either is symmetrised, ``(H + H^T) / 2``. Errors: truncation
    ``O(h)`` (forward; ``O(h^2)`` central) times the third derivatives, rounding ``O(1e-16 |g| / h)``.
    On AIM's Adult model (d = 835) the forward covariance matched the central one to 4e-5
    (whitened, largest entry) and its standard deviations to 2e-5, at half the gradients; the
    Laplace fit's Hessian is its largest cost. The gradients are independent, so ``grads``
    (``points (k, d), *args -> (k, d)``, e.g. :func:`synthinfer.napsu.likelihood.gradients`)
    evaluates them in blocks of at most ``batch`` points (default
    :data:`~synthinfer.napsu.likelihood.MAX_BATCH`; a network's
    :func:`~synthinfer.napsu.likelihood.batch_size` bounds memory): a few compiled calls on
    accelerators. Exact third-order autodiff (``jax.hessian``) compiles for minutes on
    Adult-size networks, and forward-over-reverse products (``jvp`` of the gradient, vmapped
    over directions) cost 1.4 times two gradients per direction on CPU on the model above.
    Tests compare both schemes with ``jax.hessian`` on a small network.
    """
    from synthinfer.napsu.likelihood import MAX_BATCH, evaluate_in_batches

    x = np.asarray(x, dtype=np.float64)
    d = x.shape[0]
    batch = MAX_BATCH if batch is None else batch
    step = (1e-5 if central else 1e-6) if step is None else step
    shifts = step * np.eye(d)
    if central:
        g = evaluate_in_batches(grads, np.concatenate([x + shifts, x - shifts]), args, batch)
        h = (g[:d] - g[d:]) / (2.0 * step)
    else:
        g = evaluate_in_batches(grads, np.concatenate([x[None], x + shifts]), args, batch)
        h = (g[1:] - g[0]) / step
    return 0.5 * (h + h.T)
