"""Posterior inference for NAPSU-MQ (Räisä et al. 2023, Section 4 and Supplements D, E).

Pure functions of the canonical query model. Every function takes the Markov network's
``mean_and_cov(theta) -> (mu, Sigma)`` (NAPSU-MQ eq. 7) as a *static* argument, so XLA
compiles each inference routine once per network and reuses it for any noisy statistics,
noise level or epsilon (the data are traced arguments, never closure constants).

Model (eq. 4-6), with ``d`` canonical queries, ``n`` rows and Gaussian-mechanism noise
``sigma_DP``::

    theta ~ N(0, prior_sd^2 I)                             (prior_sd = 10, Section 4)
    s~ | theta ~ N(n mu(theta), n Sigma(theta) + sigma_DP^2 I)   (normal approximation, eq. 6)

Three estimators:

* :func:`laplace_approximation` - Gaussian at the MAP, found by L-BFGS (SciPy, around one
  compiled gradient) with the non-convergence detection and restarts of Supplement E.
* :func:`nuts_sample` - NUTS (BlackJAX) on the posterior whitened by the Laplace mean and
  Cholesky factor (dense preconditioning, Section 5.2), with our one-sided map and plateau
  jumps for near-empty cells; chains run in parallel threads.
* :func:`maximum_likelihood_pgm` - the non-noise-aware PGM point estimate of Supplement D,
  minimising ``||s~/n - mu(theta)||^2`` (eq. 20).
"""

from __future__ import annotations

import functools
import importlib
import math
import threading
import time
import warnings
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from synthinfer._jax import compile_ahead, forget_programs, jax, jnp, quick_compiler_options
from synthinfer._system import usable_cores
from synthinfer.errors import ConvergenceError, ConvergenceWarning, ParameterError
from synthinfer.generate.jumps import PlateauJumps, jump_sweep, plateau_jumps
from synthinfer.generate.reparam import OneSidedMap, one_sided_map, to_theta
from synthinfer.models.markov_network import compiles_quick
from synthinfer.privacy.randomness import jax_key_data, jax_key_data_spec

if TYPE_CHECKING:
    from synthinfer.models.markov_network import MarkovNetwork

MeanAndCov = Callable[[jax.Array], tuple[jax.Array, jax.Array]]
Mean = Callable[[jax.Array], jax.Array]

#: Prior standard deviation of every theta component (NAPSU-MQ Section 4 / Supplement E).
PRIOR_SD = 10.0
_LOG_2PI = math.log(2.0 * math.pi)


# --------------------------------------------------------------------------------------
# Densities
# --------------------------------------------------------------------------------------
def log_likelihood(
    theta: jax.Array, s_tilde: jax.Array, sigma_dp: jax.Array, n: jax.Array, mean_and_cov: MeanAndCov
) -> jax.Array:
    """Noise-aware log-likelihood, NAPSU-MQ eq. 6.

    ``log N(s~ | n mu(theta), n Sigma(theta) + sigma_DP^2 I)``: the exact query values
    ``s = a(X)`` are replaced by their central-limit normal approximation and integrated out
    against the Gaussian mechanism's noise. Evaluated in float64 with one Cholesky
    factorisation ``L L^T = n Sigma + sigma_DP^2 I`` (symmetric positive definite as
    ``sigma_DP > 0``) for both the log-determinant and the quadratic form ``|L^{-1} r|^2``.
    With one BLAS thread (see :func:`synthinfer._jax.single_threaded_blas`) its value and
    gradient at d = 130 took 0.73 ms against 1.8 ms for an LU factorisation; with OpenBLAS
    threads contending for busy cores both were 20-200 times slower.
    """
    mu, sigma = mean_and_cov(theta)
    d = s_tilde.shape[0]
    cov = n * sigma + (sigma_dp**2) * jnp.eye(d)
    chol = jnp.linalg.cholesky(cov)
    y = jax.scipy.linalg.solve_triangular(chol, s_tilde - n * mu, lower=True)
    logdet = 2.0 * jnp.sum(jnp.log(jnp.diag(chol)))
    return -0.5 * jnp.dot(y, y) - 0.5 * logdet - 0.5 * d * _LOG_2PI


def log_prior(theta: jax.Array, prior_sd: float | jax.Array = PRIOR_SD) -> jax.Array:
    """``log N(theta | 0, prior_sd^2 I)``."""
    d = theta.shape[0]
    return -0.5 * jnp.sum((theta / prior_sd) ** 2) - d * jnp.log(prior_sd) - 0.5 * d * _LOG_2PI


def log_posterior(
    theta: jax.Array,
    s_tilde: jax.Array,
    sigma_dp: jax.Array,
    n: jax.Array,
    mean_and_cov: MeanAndCov,
    prior_sd: float | jax.Array = PRIOR_SD,
) -> jax.Array:
    """Unnormalised log posterior ``log p(theta) + log p(s~ | theta)`` (eq. 4-6)."""
    return log_prior(theta, prior_sd) + log_likelihood(theta, s_tilde, sigma_dp, n, mean_and_cov)


def pgm_loss(theta: jax.Array, s_tilde: jax.Array, n: jax.Array, mean: Mean) -> jax.Array:
    """PGM's objective ``||s~/n - mu(theta)||_2^2`` (Supplement D, eq. 20).

    Minimising it is maximum likelihood under the law-of-large-numbers model (eq. 15): the
    sampling variability ``n Sigma(theta)`` of the counts is ignored, so it is not noise-aware.
    """
    r = s_tilde / n - mean(theta)
    return jnp.dot(r, r)


# --------------------------------------------------------------------------------------
# L-BFGS with restarts (Supplement E)
# --------------------------------------------------------------------------------------
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


_VG_CACHE: dict[Any, Callable] = {}


def _value_and_grad(loss_fn: Callable, dimension: int) -> Callable:
    """``jax.jit(jax.value_and_grad(loss_fn))``, one compiled program per objective.

    Everything the Laplace approximation evaluates (the L-BFGS iterations, the Hessian by
    differences of gradients, the diagnostics along its axes) calls this one program, so an
    objective compiles once. Keyed on the function's identity, like ``jax.jit`` itself; an
    objective of few parameters (``dimension``, fixed per objective:
    :func:`~synthinfer.models.markov_network.compiles_quick`) compiles with
    :func:`synthinfer._jax.quick_compiler_options`.
    """
    vg = _VG_CACHE.get(loss_fn)
    if vg is None:
        options = quick_compiler_options() if compiles_quick(int(dimension)) else None
        vg = _VG_CACHE[loss_fn] = jax.jit(jax.value_and_grad(loss_fn), compiler_options=options)
    return vg


def _lbfgs_run(vg: Callable, args: tuple, max_iter: int, tol: float, *, x0: np.ndarray,
               precond: np.ndarray | None = None) -> tuple[np.ndarray, float, float, int, int, bool, bool]:
    """One L-BFGS run on ``u``, ``x = x0 + precond @ u`` (``x = x0 + u`` without ``precond``).

    Stops when the loss improves by less than ``tol`` in an iteration (Supplement E) or after
    ``max_iter`` iterations; any non-finite loss or gradient is a failure (Supplement E's
    divergence signal). Returns ``(x, loss, max |grad|, iterations, evaluations, failed,
    met_tol)``.

    Why SciPy's L-BFGS-B and not optax: the optimiser loop runs in Python around the one
    compiled ``vg``. An optax L-BFGS inside ``lax.while_loop`` compiled the objective again
    with its zoom line search (6.5 of the 16 s of Adult's first Laplace fit were that
    compilation); here the loop costs ~50 us per iteration against a ~1 ms gradient.
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
    h = 0.5 * (curvature + curvature.T)
    h = h + (1e-10 * np.trace(h) / h.shape[0] + 1e-300) * np.eye(h.shape[0])
    lh = np.linalg.cholesky(h)
    return np.linalg.solve(lh.T, np.eye(h.shape[0]))


def lbfgs_minimize(
    loss_fn: Callable,
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
    The posteriors here are badly scaled and far from quadratic (query counts from tens to
    tens of thousands, noisy counts below zero); plain L-BFGS needed ~1400 iterations on Adult.
    """
    x = np.asarray(x0, dtype=np.float64)
    vg = _value_and_grad(loss_fn, x.shape[0])
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


# --------------------------------------------------------------------------------------
# Laplace approximation
# --------------------------------------------------------------------------------------
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


def _neg_log_posterior(theta, s_tilde, sigma_dp, n, prior_sd, *, mean_and_cov):
    return -log_posterior(theta, s_tilde, sigma_dp, n, mean_and_cov, prior_sd)


def _gauss_newton_map(theta, s_tilde, sigma_dp, n, prior_sd, *, mean_and_cov) -> np.ndarray:
    """Gauss-Newton (Fisher) curvature of the negative log posterior:
    ``J^T C^{-1} J + I / prior_sd^2`` with ``J = n Sigma`` (the Jacobian of ``n mu``) and
    ``C = n Sigma + sigma_DP^2 I``. Used only to precondition the optimiser; NumPy around the
    network's compiled ``mean_and_cov`` (no program of its own to compile)."""
    _, sig = mean_and_cov(jnp.asarray(theta))
    j = float(n) * np.asarray(sig, dtype=np.float64)
    d = j.shape[0]
    c = j + float(sigma_dp) ** 2 * np.eye(d)
    return j @ np.linalg.solve(c, j) + np.eye(d) / float(prior_sd) ** 2


def _gauss_newton_pgm(theta, s_tilde, n, *, mean):
    """Gauss-Newton curvature ``2 J^T J`` of :func:`pgm_loss`, ``J = Sigma = d mu / d theta``."""
    j = jax.jacfwd(mean)(theta)
    return 2.0 * j.T @ j


def _hessian(loss_fn: Callable, x: np.ndarray, args: tuple, step: float = 1e-5) -> np.ndarray:
    """Hessian of ``loss_fn`` at ``x`` by central differences of its exact gradient.

    ``(g(x + h e_i) - g(x - h e_i)) / 2h`` for all ``i``, symmetrised: ``2 d`` calls of the
    objective's compiled value-and-gradient (:func:`_value_and_grad`), nothing new to compile.
    Exact third-order autodiff (``jax.hessian``) of the noise-aware likelihood compiled for
    2 min on Adult under load, and even a ``lax.map`` of gradients was a 3 s compilation of
    its own. Truncation error O(h^2), rounding O(1e-16 |g| / h); against ``jax.hessian`` on a
    7-parameter network the largest entry differed by 4e-11 relative.
    """
    x = np.asarray(x, dtype=np.float64)
    d = x.shape[0]
    vg = _value_and_grad(loss_fn, d)
    h = np.empty((d, d))
    for i in range(d):
        e = np.zeros(d)
        e[i] = step
        g_plus, g_minus = (np.asarray(vg(jnp.asarray(x + s * e), *args)[1]) for s in (1.0, -1.0))
        h[i] = (g_plus - g_minus) / (2.0 * step)
    return 0.5 * (h + h.T)


def _loss_for(mean_and_cov: MeanAndCov) -> tuple[Callable, Callable]:
    # One (loss, curvature) pair per network: jit caches key on these objects' identity, so
    # reusing them means one compilation per network whatever the data or epsilon.
    key = mean_and_cov
    if key not in _LOSS_CACHE:
        _LOSS_CACHE[key] = (
            functools.partial(_neg_log_posterior, mean_and_cov=mean_and_cov),
            functools.partial(_gauss_newton_map, mean_and_cov=mean_and_cov),
        )
    return _LOSS_CACHE[key]


_LOSS_CACHE: dict[Any, Callable] = {}


def forget_network(network: MarkovNetwork) -> None:
    """Drop a network's cached objectives and compiled programs; other networks keep theirs.

    The caches above hold one entry per network, and each entry's jitted functions hold
    their compiled programs; a long study that fits many marginal sets (e.g. with MST
    selection) would otherwise keep all of them alive. Called when a network leaves
    ``napsu_mq``'s network cache. Every program refers to its network through a function
    (a partial or a bound method), never a static argument, which JAX's global caches
    would keep alive; so once these entries are gone the network and its programs are
    garbage (tests/test_napsu_inference.py checks it).
    """
    mean_and_cov, mean = network.mean_and_cov, network.mean
    pair = _LOSS_CACHE.pop(mean_and_cov, None)
    if pair is not None:
        _VG_CACHE.pop(pair[0], None)
    pgm = _PGM_CACHE.pop(mean, None)
    if pgm is not None:
        _VG_CACHE.pop(pgm[0], None)
    _NUTS_CACHE.pop(mean_and_cov, None)
    forget_programs(mean_and_cov)
    forget_programs(network.sample_many)


def _posterior_args(s_tilde, sigma_dp, n, prior_sd) -> tuple[np.ndarray, ...]:
    """The data arguments of :func:`_neg_log_posterior`, as float64 NumPy arrays (compiled
    programs take them as they are; ``jnp.asarray`` would compile a conversion first)."""
    return (
        np.asarray(s_tilde, dtype=np.float64), np.asarray(float(sigma_dp)),
        np.asarray(float(n)), np.asarray(float(prior_sd)),
    )


def laplace_gap(
    mean_and_cov: MeanAndCov,
    s_tilde: np.ndarray,
    sigma_dp: float,
    n: int,
    laplace: LaplaceResult,
    *,
    prior_sd: float = PRIOR_SD,
    radius: float = 2.0,
) -> np.ndarray:
    """How far the posterior is from its Laplace approximation, per whitened axis.

    Along ``theta = mean ± radius * chol[:, k]`` the Gaussian predicts the log posterior to
    drop by ``radius^2 / 2``; returns, for each axis ``k``, the largest absolute gap (in nats)
    between that prediction and the exact drop. Near-empty marginal cells make the posterior
    one-sided (flat towards small probabilities, an exponential wall towards large ones), and
    there the gap is enormous: on Adult at epsilon = 1 it reaches 1e6 nats at radius 3, so
    Laplace draws can put far too much mass into such cells. The check is our addition (the
    paper only reports that the Laplace approximation did poorly on Adult); it costs ``4 d``
    log-posterior evaluations.
    """
    vg = _value_and_grad(_loss_for(mean_and_cov)[0], len(s_tilde))
    args = _posterior_args(s_tilde, sigma_dp, n, prior_sd)

    def loss(x: np.ndarray) -> float:  # the compiled value-and-gradient: nothing new to compile
        return float(vg(jnp.asarray(x), *args)[0])

    x = np.asarray(laplace.mean, dtype=np.float64)
    base = loss(x)
    steps = radius * np.asarray(laplace.chol).T
    plus = np.array([loss(x + e) for e in steps])
    minus = np.array([loss(x - e) for e in steps])
    expected = radius**2 / 2.0
    gap_plus = np.abs(np.asarray(plus) - base - expected)
    gap_minus = np.abs(np.asarray(minus) - base - expected)
    return np.maximum(gap_plus, gap_minus)


def laplace_approximation(
    mean_and_cov: MeanAndCov,
    s_tilde: np.ndarray,
    sigma_dp: float,
    n: int,
    *,
    prior_sd: float = PRIOR_SD,
    max_iter: int = 6000,
    tol: float = 1e-5,
    max_restarts: int = 5,
    rng: np.random.Generator,
) -> LaplaceResult:
    """Laplace approximation of ``p(theta | s~)`` (Gelman et al. 2014; NAPSU-MQ Supplement E).

    The MAP ``theta*`` minimises the negative log posterior with L-BFGS from ``theta = 0``
    (the uniform distribution); the covariance is the inverse Hessian of the negative log
    posterior at ``theta*``. An optimum whose Hessian is not positive definite counts as a
    failed attempt and is restarted like a diverged one.
    """
    t0 = time.perf_counter()
    loss, curvature = _loss_for(mean_and_cov)
    args = _posterior_args(s_tilde, sigma_dp, n, prior_sd)
    d = int(np.asarray(s_tilde).shape[0])
    held: dict[str, np.ndarray] = {}

    def accept(x: np.ndarray) -> bool:
        h = _hessian(loss, x, args)
        try:
            lh = np.linalg.cholesky(h)
        except np.linalg.LinAlgError:
            return False
        held["x"], held["lh"] = x, lh
        return bool(np.all(np.isfinite(lh)))

    res = lbfgs_minimize(
        loss, np.zeros(d), args, curvature_fn=curvature, max_iter=max_iter, tol=tol,
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
            stacklevel=2,
        )
    return LaplaceResult(res.x, cov, chol, res, time.perf_counter() - t0)


# --------------------------------------------------------------------------------------
# PGM maximum likelihood (Supplement D)
# --------------------------------------------------------------------------------------
def _pgm_objective(theta, s_tilde, n, *, mean):
    return pgm_loss(theta, s_tilde, n, mean)


_PGM_CACHE: dict[Any, Callable] = {}


def maximum_likelihood_pgm(
    mean: Mean,
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
    if mean not in _PGM_CACHE:
        _PGM_CACHE[mean] = (
            functools.partial(_pgm_objective, mean=mean),
            jax.jit(functools.partial(_gauss_newton_pgm, mean=mean)),
        )
    loss, curvature = _PGM_CACHE[mean]
    args = (jnp.asarray(s_tilde, dtype=jnp.float64), jnp.asarray(float(n)))
    d = int(np.asarray(s_tilde).shape[0])
    res = lbfgs_minimize(
        loss, np.zeros(d), args, curvature_fn=curvature, max_iter=max_iter, tol=tol, max_restarts=max_restarts, rng=rng
    )
    if not res.converged:
        warnings.warn(
            f"PGM maximum likelihood: L-BFGS did not converge (loss {res.loss:.3g}); using the best point",
            ConvergenceWarning,
            stacklevel=2,
        )
    return res


# --------------------------------------------------------------------------------------
# NUTS
# --------------------------------------------------------------------------------------
@dataclass
class NUTSResult:
    """NUTS draws of theta, shape ``(chains, draws, d)``, with sampler statistics."""

    draws: np.ndarray
    diverging: np.ndarray  # (chains, draws) bool, post-warmup
    n_grad_evals: int  # leapfrog steps + gradients after accepted jumps, warmup + sampling, all chains
    n_grad_evals_warmup: int
    step_size: np.ndarray  # (chains,)
    seconds: float  # warmup + sampling, including compilation on the first call
    n_one_sided: int = 0  # parameters sampled through the one-sided map
    n_jump_cells: int = 0  # parameters with plateau jumps: as many log-density values (no gradient) per iteration
    n_jumps_accepted: int = 0  # post-warmup, all chains


def _stan_schedule(num_warmup: int, num_samples: int) -> tuple[np.ndarray, ...]:
    """Per-step flags of one scan over warmup and sampling: ``(slow, window_end, warm, last)``.

    ``slow``/``window_end`` follow Stan's warmup schedule (BlackJAX's ``build_schedule``: a fast
    window adapting the step size, doubling slow windows that also estimate the mass matrix,
    a final fast window); ``warm`` marks the warmup steps and ``last`` the final one, after
    which the averaged step size is fixed for sampling.
    """
    from blackjax.adaptation.window_adaptation import build_schedule

    total = num_warmup + num_samples
    slow, end = np.zeros(total, bool), np.zeros(total, bool)
    if num_warmup:
        with jax.ensure_compile_time_eval():  # called while tracing: keep it concrete
            sched = np.asarray(build_schedule(num_warmup))
        slow[:num_warmup], end[:num_warmup] = sched[:, 0] == 1, sched[:, 1].astype(bool)
    warm = np.arange(total) < num_warmup
    return slow, end, warm, np.arange(total) == num_warmup - 1


def _nuts_chain(key_data, z_init, data, *, mean_and_cov, num_warmup, num_samples, max_tree_depth, target_accept,
                jump_moves):
    """Stan window adaptation and NUTS for one chain on the reparametrised posterior ``theta(u)``.

    One ``lax.scan`` runs warmup and sampling with a single NUTS kernel whose step size and
    inverse mass matrix are carried values; during warmup they are updated after each step
    by BlackJAX's dual averaging and Welford mass-matrix estimators on Stan's schedule (the
    algorithm of ``blackjax.window_adaptation``), after it they stay fixed. Why not
    ``window_adaptation`` followed by a sampling scan: that traces and compiles the NUTS
    tree-building loops twice, and compiling them is most of the toy pipeline's time.
    ``key_data`` is the raw data of the chain's PRNG key (:func:`synthinfer.privacy.jax_key_data`:
    making keys with ``jax.random.key``/``split`` compiles two programs first, 0.3-0.5 s of the
    toy pipeline while the NUTS program compiles beside them).
    """
    import blackjax.mcmc.nuts as nuts
    from blackjax.adaptation.mass_matrix import mass_matrix_adaptation
    from blackjax.adaptation.step_size import dual_averaging_adaptation

    (s_tilde, sigma_dp, n, prior_sd), map_arrays, jump_arrays = data

    def logdensity(u):
        theta, log_jac = to_theta(u, map_arrays)
        return log_posterior(theta, s_tilde, sigma_dp, n, mean_and_cov, prior_sd) + log_jac

    mm_init, mm_update, mm_final = mass_matrix_adaptation(True)  # diagonal
    da_init, da_update, da_final = dual_averaging_adaptation(target_accept)
    kernel = nuts.build_kernel()
    mm0 = mm_init(z_init.shape[0])
    carry0 = (nuts.init(z_init, logdensity), da_init(1.0), mm0, jnp.asarray(1.0, z_init.dtype),
              mm0.inverse_mass_matrix)

    def pick(flag, a, b):
        return jax.tree.map(lambda x, y: jnp.where(flag, x, y), a, b)

    def step(carry, xs):
        st, ss, mm, eps, imm = carry
        k, slow, end, warm, last = xs
        k_nuts, k_jump = jax.random.split(k)
        st, info = kernel(k_nuts, st, logdensity, eps, imm, max_num_doublings=max_tree_depth)
        accepted = jnp.asarray(0, jnp.int32)
        if jump_moves:  # plateau jumps (synthinfer.generate.jumps); a new gradient only if one was accepted
            u, logp, accepted = jump_sweep(k_jump, st.position, st.logdensity, logdensity, *jump_arrays)
            st = jax.lax.cond(accepted > 0, lambda: nuts.init(u, logdensity), lambda: st)
        # warmup: dual averaging every step, Welford in slow windows, new mass matrix and a
        # restarted dual averaging at each slow window's end (Stan's schedule)
        ss_w = da_update(ss, info.acceptance_rate)
        mm_w = pick(slow, mm_update(mm, st.position), mm)
        mm_w, ss_w = jax.lax.cond(end, lambda m, a: (mm_final(m), da_init(da_final(a))), lambda m, a: (m, a),
                                  mm_w, ss_w)
        eps_w = jnp.where(last, jnp.exp(ss_w.log_step_size_avg), jnp.exp(ss_w.log_step_size))
        carry_w = (st, ss_w, mm_w, eps_w, mm_w.inverse_mass_matrix)
        out = (to_theta(st.position, map_arrays)[0], info.num_integration_steps, info.is_divergent, accepted)
        return pick(warm, carry_w, (st, ss, mm, eps, imm)), out

    flags = tuple(jnp.asarray(f) for f in _stan_schedule(num_warmup, num_samples))
    keys = jax.random.split(jax.random.wrap_key_data(key_data), num_warmup + num_samples)
    (_, _, _, eps, _), (theta, steps, div, jumps) = jax.lax.scan(step, carry0, (keys, *flags))
    # a gradient is recomputed after each iteration with an accepted jump
    return (theta[num_warmup:], steps[num_warmup:].sum() + (jumps[num_warmup:] > 0).sum(), div[num_warmup:], eps,
            steps[:num_warmup].sum() + (jumps[:num_warmup] > 0).sum(), jumps[num_warmup:].sum())


_NUTS_STATIC = ("num_warmup", "num_samples", "max_tree_depth", "target_accept", "jump_moves")


def _nuts_jit(mean_and_cov: MeanAndCov) -> Callable:
    """The jitted :func:`_nuts_chain` of one network. The network is bound by a partial, not
    passed as a static argument: JAX's caches keep static arguments alive, so a forgotten
    network (and its compiled programs) could never be freed without clearing every cache."""
    if mean_and_cov not in _NUTS_CACHE:
        _NUTS_CACHE[mean_and_cov] = jax.jit(functools.partial(_nuts_chain, mean_and_cov=mean_and_cov),
                                            static_argnames=_NUTS_STATIC)
    return _NUTS_CACHE[mean_and_cov]


_NUTS_CACHE: dict[Any, Callable] = {}


def compile_nuts(mean_and_cov: MeanAndCov, dimension: int, *, num_warmup: int = 800, num_samples: int = 2000,
                 max_tree_depth: int = 12, target_accept: float = 0.8, jump_moves: bool = True) -> Future:
    """Start compiling the NUTS program for a network and settings in a background thread.

    The program depends only on the network and the shapes (every datum is a traced
    argument), so it can be compiled while the Laplace approximation, which :func:`nuts_sample`
    needs first, runs: on two cores the two overlap. Returns a future of the compiled
    program; :func:`nuts_sample` reuses it (one compilation per network and settings).
    ``jump_moves=False`` compiles the program without plateau jumps, for data with no
    one-sided cell (:func:`synthinfer.generate.reparam.one_sided_cells`, known before the
    Laplace fit): a smaller program, which on small models is most of the wait.
    """
    settings = dict(num_warmup=int(num_warmup), num_samples=int(num_samples), max_tree_depth=int(max_tree_depth),
                    target_accept=float(target_accept), jump_moves=bool(jump_moves))
    d = int(dimension)

    def lower():
        # argument shapes and dtypes from the same builders nuts_sample uses, on placeholders
        data = (_posterior_args(np.zeros(d), 1.0, 1, 1.0),
                OneSidedMap(np.zeros(d, bool), np.zeros(d), np.ones(d), np.zeros(d), np.eye(d)).arrays(),
                PlateauJumps.none(d).arrays())
        shapes = jax.tree.map(lambda a: jax.ShapeDtypeStruct(a.shape, a.dtype), data)
        return _nuts_jit(mean_and_cov).lower(jax_key_data_spec(), jax.ShapeDtypeStruct((d,), np.float64), shapes,
                                             **settings)

    return compile_ahead((mean_and_cov, d, tuple(sorted(settings.items()))), lower, quick=compiles_quick(d))


def nuts_sample(
    mean_and_cov: MeanAndCov,
    s_tilde: np.ndarray,
    sigma_dp: float,
    n: int,
    laplace: LaplaceResult,
    *,
    prior_sd: float = PRIOR_SD,
    n_chains: int = 4,
    num_warmup: int = 800,
    num_samples: int = 2000,
    max_tree_depth: int = 12,
    target_accept: float = 0.8,
    one_sided_threshold: float = 5.0,
    dropped_cell_jacobian: Callable[[jax.Array], jax.Array] | None = None,
    jump_moves: bool = True,
    max_workers: int | None = None,
    progress: Callable[[str], None] | None = None,
    rng: np.random.Generator,
) -> NUTSResult:
    """NUTS (Hoffman & Gelman 2014; BlackJAX) on the posterior, preconditioned by the Laplace fit.

    Sampling runs in ``z = chol^{-1} (theta - mean)`` (dense preconditioning, NAPSU-MQ Section
    5.2), where the posterior is close to standard normal, except for the parameters of
    near-empty cells (noisy count below ``one_sided_threshold`` noise standard deviations),
    which get the one-sided map of :mod:`synthinfer.generate.reparam` (an exact change of
    variables that compresses their prior-dominated flat sides; ``one_sided_threshold=-inf``
    turns it off). ``dropped_cell_jacobian(theta)``, the Jacobian of the log-probabilities of
    the cells the canonical parametrisation dropped
    (``MarkovNetwork.dropped_cell_log_prob_jacobian``), lets the map align the emptying
    directions of such cells with coordinate axes; without it they are left to plain NUTS.
    With ``jump_moves`` (default), each NUTS transition is followed by independence
    Metropolis-Hastings updates that jump one-sided cells between their bulk and their
    empty-cell plateau (:mod:`synthinfer.generate.jumps`; a barrier NUTS alone crosses a few
    times per chain), one log-density evaluation per such cell and iteration.
    Stan-style window adaptation then tunes the step size and a diagonal mass matrix during
    the ``num_warmup`` draws (a dense one, tried once on Adult, ran over twice as long).
    Chains start at independent ``N(u*, I)`` draws around the Laplace mean's position
    ``u*``.

    Each chain is one compiled program (cached per network and settings: refits with new
    noisy statistics or epsilon do not recompile); chains run side by side in
    ``max_workers`` threads (default: one per core the process may use). That beats ``vmap``-ing them: a
    vmapped NUTS step lasts as long as the longest of the chains' trees, and batching gave
    no speed-up per gradient on CPU (3.7 ms for 4 chains against 0.8 ms for one on Adult).
    ``progress(message)`` is called as chains finish.
    """
    d = int(np.asarray(s_tilde).shape[0])
    mu_mode = np.asarray(mean_and_cov(jnp.asarray(laplace.mean))[0])
    jd = None if dropped_cell_jacobian is None else np.asarray(dropped_cell_jacobian(jnp.asarray(laplace.mean)))
    umap = one_sided_map(s_tilde, sigma_dp, n, mu_mode, laplace.mean, laplace.cov,
                         prior_sd=prior_sd, threshold=one_sided_threshold, dropped_jacobian=jd)
    jump_moves = bool(jump_moves and umap.mask.any())
    jumps = plateau_jumps(umap, s_tilde, sigma_dp, n, mu_mode, prior_sd=prior_sd) if jump_moves else PlateauJumps.none(d)
    data = (_posterior_args(s_tilde, sigma_dp, n, prior_sd), umap.arrays(), jumps.arrays())
    z0 = umap.to_u(laplace.mean) + rng.standard_normal((n_chains, d))
    keys = jax_key_data(rng, n_chains)
    t0 = time.perf_counter()
    program = compile_nuts(mean_and_cov, d, num_warmup=num_warmup, num_samples=num_samples,
                           max_tree_depth=max_tree_depth, target_accept=target_accept, jump_moves=jump_moves)
    if not program.done():
        # ArviZ, which holds the posterior next, imports in ~0.5 s: do it while XLA compiles
        # (which releases the GIL) rather than after the chains (toy pipeline ~0.4 s faster)
        importlib.import_module("arviz")
    program = program.result()
    done, lock = [0], threading.Lock()

    def run(c: int):
        out = jax.block_until_ready(program(keys[c], z0[c], data))
        with lock:
            done[0] += 1
            if progress is not None:
                progress(f"NUTS: {done[0]}/{n_chains} chains done")
        return out

    workers = max(1, min(n_chains, max_workers or usable_cores()))
    with ThreadPoolExecutor(workers) as pool:
        outs = list(pool.map(run, range(n_chains)))
    seconds = time.perf_counter() - t0
    warm = int(sum(int(o[4]) for o in outs))
    return NUTSResult(
        draws=np.stack([np.asarray(o[0]) for o in outs]),
        diverging=np.stack([np.asarray(o[2], dtype=bool) for o in outs]),
        n_grad_evals=warm + int(sum(int(o[1]) for o in outs)),
        n_grad_evals_warmup=warm,
        step_size=np.array([float(o[3]) for o in outs]),
        seconds=seconds,
        n_one_sided=umap.n_one_sided,
        n_jump_cells=jumps.count,
        n_jumps_accepted=int(sum(int(o[5]) for o in outs)),
    )


# --------------------------------------------------------------------------------------
# Posterior containers and diagnostics
# --------------------------------------------------------------------------------------
def to_inference_data(draws: np.ndarray, *, sample_stats: dict[str, np.ndarray] | None = None, attrs: dict | None = None):
    """ArviZ ``InferenceData`` with posterior variable ``theta`` of shape ``(chain, draw, d)``."""
    import arviz as az

    draws = np.asarray(draws, dtype=np.float64)
    if draws.ndim != 3:
        raise ParameterError(f"draws must be (chains, draws, d), got {draws.shape}")
    return az.from_dict(
        posterior={"theta": draws},
        sample_stats=sample_stats or None,
        dims={"theta": ["query"]},
        coords={"query": np.arange(draws.shape[2])},
        attrs=attrs or {},
    )


def convergence_diagnostics(posterior, *, ess_per_chain: float = 100.0, rhat_max: float = 1.01) -> dict[str, Any]:
    """Split R-hat (rank-normalised) and bulk/tail ESS of every theta component (ArviZ).

    Warns with :class:`ConvergenceWarning` when any R-hat exceeds ``rhat_max`` (1.01, Vehtari
    et al. 2021) or any bulk ESS is below ``ess_per_chain`` times the number of chains.
    """
    import arviz as az

    rhat = np.asarray(az.rhat(posterior, var_names=["theta"])["theta"])
    ess_bulk = np.asarray(az.ess(posterior, var_names=["theta"], method="bulk")["theta"])
    ess_tail = np.asarray(az.ess(posterior, var_names=["theta"], method="tail")["theta"])
    n_chains = int(posterior.posterior.sizes["chain"])
    need = ess_per_chain * n_chains
    out = {
        "rhat_max": float(np.max(rhat)),
        "ess_bulk_min": float(np.min(ess_bulk)),
        "ess_tail_min": float(np.min(ess_tail)),
        "rhat": rhat.tolist(),
        "ess_bulk": ess_bulk.tolist(),
        "ess_bulk_required": need,
        "rhat_threshold": rhat_max,
    }
    problems = []
    if not out["rhat_max"] <= rhat_max:
        problems.append(f"max R-hat {out['rhat_max']:.4f} > {rhat_max}")
    if not out["ess_bulk_min"] >= need:
        problems.append(f"min bulk ESS {out['ess_bulk_min']:.0f} < {need:.0f}")
    out["ok"] = not problems
    if problems:
        warnings.warn(
            "NUTS diagnostics failed: " + "; ".join(problems) + ". Run longer chains (num_samples) "
            "or more warmup before trusting the synthetic data.",
            ConvergenceWarning,
            stacklevel=2,
        )
    return out
