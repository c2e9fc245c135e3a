"""Inference backends of NAPSU-MQ: how ``p(theta | s~)`` is represented by draws.

A backend takes the noisy measurements (:class:`PosteriorProblem`) and the sampler settings
(:class:`InferenceSettings`) and returns draws of theta with their diagnostics
(:class:`BackendResult`). :class:`synthinfer.napsu.NapsuMQ` looks its ``inference`` setting up in
the registry, so a new backend is one module with a class following :class:`InferenceBackend`
plus one :func:`register_backend` call (below, for the built-in ones).

Built in:

* ``"auto"`` (NapsuMQ's default): NUTS for models of at most
  :data:`AUTO_NUTS_MAX_DIMENSION` parameters, the Laplace approximation above that under the
  interaction prior (:class:`AutoBackend`);
* ``"laplace"``: Gaussian at the MAP (Supplement E), with a check of how far the posterior is
  from Gaussian along the approximation's axes (:func:`synthinfer.napsu.laplace.laplace_gap`);
* ``"nuts"``: NUTS preconditioned by the Laplace fit (Section 5.2), with jumps between the
  bulk and a second region of near-empty cells' parameters (and the one-sided map under the
  paper's prior alone);
* ``"importance"``: Pareto-smoothed importance sampling from a proposal built on the Laplace
  fit (:mod:`synthinfer.napsu.importance`), falling back to NUTS when PSIS refuses it;
* ``"mle"``: the non-noise-aware PGM point estimate (Supplement D), a baseline only.
"""

from __future__ import annotations

import math
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from synthinfer.errors import ConvergenceWarning, ParameterError, SynthinferWarning, user_stacklevel
from synthinfer.mcmc import convergence_diagnostics, further_draws, warn_unconverged
from synthinfer.napsu.diagnostics import to_inference_data
from synthinfer.napsu.importance import DEFAULT_DF, DEFAULT_NUM_PROPOSALS, DEFAULT_SCALE, check_settings, importance_sample
from synthinfer.napsu.network import MarkovNetwork
from synthinfer.napsu.nuts import TARGET_ACCEPT
from synthinfer.napsu.reparam import map_options

if TYPE_CHECKING:
    from synthinfer.napsu.structured import Layout

__all__ = [
    "AUTO_NUTS_MAX_DIMENSION", "AutoBackend", "BackendResult", "InferenceBackend", "InferenceSettings",
    "PosteriorProblem", "backend_names", "check_model_size", "get_backend", "max_dense_dimension",
    "register_backend",
]


@dataclass(frozen=True)
class PosteriorProblem:
    """The noisy measurements whose posterior a backend represents: counts of ``n`` rows with
    Gaussian noise of standard deviation ``sigma`` (the mechanism's sigma_DP, or a stand-in
    for the non-noise-aware ablation), under the N(0, prior_sd^2 I) prior of the network's
    parameters (with ``interaction_sd``: of their main effects, and N(0, interaction_sd^2) on
    their interactions) times the cell prior of weight ``cell_prior``
    (:mod:`synthinfer.napsu.likelihood`).

    ``layout=None``: the counts are the canonical queries ``s~`` and ``sigma`` a scalar.
    Otherwise they are any measured cells of the marginals (AIM's rounds) in the order of
    ``layout`` (:mod:`synthinfer.napsu.structured`), with one ``sigma`` per value; only
    backends with ``takes_measurements = True`` accept those, and ``canonical`` holds the
    inverse-variance combination of each canonical cell's direct measurements
    (:func:`synthinfer.napsu.structured.canonical_information`) for those that need ``s~``."""

    network: MarkovNetwork
    noisy_counts: np.ndarray
    sigma: float | np.ndarray
    n: int
    prior_sd: float
    layout: Layout | None = None
    cell_prior: float = 0.0
    interaction_sd: float | None = None
    #: whether the network ties near-empty interactions (``NapsuMQ(tie_below=...)``), which
    #: makes NUTS fast enough for ``inference="auto"`` at any size
    near_empty_tied: bool = False
    #: whether the network has slopes of numeric coarse columns (``coarse_interactions="linear"``),
    #: whose posterior the Laplace approximation missed (``inference="auto"`` then takes NUTS)
    coarse_slopes: bool = False

    @property
    def plateaus(self) -> bool:
        """Whether the prior is the paper's ``N(0, prior_sd^2 I)`` alone, whose plateaus at
        near-empty cells NUTS's one-sided map and jumps are shaped for."""
        return self.cell_prior == 0 and self.interaction_sd is None

    @property
    def canonical(self) -> tuple[np.ndarray, np.ndarray]:
        """``(s~, sigma)`` per canonical query: the problem's own when ``layout`` is None."""
        if self.layout is None:
            return np.asarray(self.noisy_counts), np.broadcast_to(np.asarray(self.sigma, float), np.shape(self.noisy_counts))
        from synthinfer.napsu.structured import canonical_summary

        return canonical_summary(self.network.queries.canonical, self.layout, self.noisy_counts, self.sigma)


@dataclass(frozen=True)
class InferenceSettings:
    """Sampler and optimiser settings (NAPSU-MQ Supplement E's defaults live on ``NapsuMQ``)."""

    n_chains: int
    num_warmup: int
    num_samples: int
    max_tree_depth: int
    laplace_max_iter: int
    laplace_max_restarts: int
    #: NUTS's sampling draws per chain at most, in multiples of ``num_samples``: further passes
    #: run while the convergence check (:func:`synthinfer.mcmc.convergence_diagnostics`) fails,
    #: each sized to what it missed (:func:`synthinfer.mcmc.further_draws`)
    max_passes: int = 1
    #: NUTS's target acceptance rate for step-size adaptation (Hoffman & Gelman 2014, Section
    #: 3.2): higher means smaller steps, fewer divergences and more gradients per draw
    target_accept: float = TARGET_ACCEPT
    #: higher rates NUTS samples again at, in turn, while its draws have divergent transitions:
    #: the chains go on from where they stopped, their step size adapted anew (one program)
    retry_target_accept: tuple[float, ...] = ()


@dataclass
class BackendResult:
    """Draws of theta as ArviZ ``InferenceData`` (variable ``theta``, ``(chain, draw, d)``),
    the backend's JSON-ready diagnostics (one entry per stage, e.g. ``{"laplace": {...},
    "nuts": {...}}``) and the seconds per stage."""

    posterior: Any
    diagnostics: dict[str, Any]
    timings: dict[str, float]
    laplace: Any = None  # the LaplaceResult where the backend made one


class InferenceBackend(Protocol):
    """What :class:`~synthinfer.napsu.NapsuMQ` needs of an inference backend. A backend may
    also set ``takes_measurements = True`` when it accepts problems with a ``layout`` (AIM's
    measurements); without it, NapsuMQ refuses such a fit before spending any budget. One
    that holds no dense ``d x d`` matrix sets ``dense = False``, which lifts
    :func:`check_model_size`'s memory limit."""

    #: the ``inference=`` value that selects it
    name: str
    #: whether its draws represent the noise-aware posterior (``"mle"``: no)
    noise_aware: bool

    def run(
        self,
        problem: PosteriorProblem,
        settings: InferenceSettings,
        *,
        rng: np.random.Generator,
        progress: Callable[[str], None],
        spare_core: Callable[[], None],
    ) -> BackendResult:
        """Represent the posterior of ``problem`` by draws. ``progress(stage)`` reports each
        stage; ``spare_core()`` starts the caller's background work (compiling the data
        sampler) and should be called where the main thread has numerics of its own to run."""
        ...


_REGISTRY: dict[str, InferenceBackend] = {}


def register_backend(backend: InferenceBackend) -> InferenceBackend:
    """Make ``backend`` selectable as ``NapsuMQ(inference=backend.name)``; returns it."""
    _REGISTRY[backend.name] = backend
    return backend


def backend_names() -> tuple[str, ...]:
    """The names of the registered backends."""
    return tuple(_REGISTRY)


def get_backend(name: Any) -> InferenceBackend:
    """The registered backend called ``name`` (:class:`ParameterError` naming the choices)."""
    if not isinstance(name, str) or name not in _REGISTRY:
        choices = ", ".join(repr(k) for k in _REGISTRY)
        raise ParameterError(f"inference must be one of {choices}; got {name!r}")
    return _REGISTRY[name]


#: Dense ``d x d`` float64 matrices the Laplace fit and the samplers built on it hold at once
#: (the Hessian, its Cholesky factor and inverse, the covariance and its factor, the map's
#: linear part, a precision for the regression of the one-sided cells, and one spare).
DENSE_MATRIX_COPIES = 8
#: The share of the machine's memory those matrices may take.
DENSE_MEMORY_SHARE = 0.5


def max_dense_dimension(memory_bytes: int | None = None) -> int | None:
    """The largest ``d`` whose :data:`DENSE_MATRIX_COPIES` float64 ``d x d`` matrices fit in
    :data:`DENSE_MEMORY_SHARE` of ``memory_bytes`` (default: this machine's); None when the
    machine's memory is unknown."""
    from synthinfer._system import total_memory_bytes

    memory = total_memory_bytes() if memory_bytes is None else memory_bytes
    if memory is None:
        return None
    return int(math.isqrt(int(DENSE_MEMORY_SHARE * memory) // (8 * DENSE_MATRIX_COPIES)))


def check_model_size(inference: str, d_bound: int, what: str, *, memory_bytes: int | None = None) -> None:
    """:class:`ParameterError` before any budget is spent when a model of up to ``d_bound``
    parameters (``what`` says where the bound comes from) is too large for backend
    ``inference``: every built-in backend but ``"mle"`` holds dense ``d x d`` matrices."""
    backend = get_backend(inference)
    if not getattr(backend, "dense", True):
        return
    limit = max_dense_dimension(memory_bytes)
    if limit is not None and d_bound > limit:
        need = DENSE_MATRIX_COPIES * 8 * d_bound**2 / 2**30
        raise ParameterError(
            f"the model may have up to {d_bound:,} parameters ({what}); inference={inference!r} holds "
            f"{DENSE_MATRIX_COPIES} dense d x d matrices ({need:,.0f} GiB at that size), and this machine's "
            f"memory fits d <= {limit:,}: use fewer or smaller marginals (or a lower max_model_cells)")


# ------------------------------------------------------------------------------------------
# Built-in backends
# ------------------------------------------------------------------------------------------
def _laplace_fit(problem: PosteriorProblem, settings: InferenceSettings, rng: np.random.Generator):
    from synthinfer.napsu.laplace import laplace_approximation

    return laplace_approximation(
        problem.network, problem.noisy_counts, problem.sigma, problem.n, prior_sd=problem.prior_sd,
        cell_prior=problem.cell_prior, interaction_sd=problem.interaction_sd, max_iter=settings.laplace_max_iter,
        max_restarts=settings.laplace_max_restarts, rng=rng, layout=problem.layout,
    )


class LaplaceBackend:
    """Gaussian approximation at the MAP; ``n_chains * num_samples`` draws from it. Warns
    (:class:`ConvergenceWarning`, unless ``gap_warning=False``) when the posterior is far from
    Gaussian along an axis; the diagnostics record the gap either way."""

    name = "laplace"
    noise_aware = True
    takes_measurements = True

    def __init__(self, *, gap_warning: bool = True):
        self.gap_warning = gap_warning

    def run(self, problem, settings, *, rng, progress, spare_core) -> BackendResult:
        from synthinfer.napsu.laplace import laplace_gap

        progress("Laplace approximation")
        lap = _laplace_fit(problem, settings, rng)
        info = lap.info()
        gap = laplace_gap(problem.network, problem.noisy_counts, problem.sigma, problem.n, lap,
                          prior_sd=problem.prior_sd, cell_prior=problem.cell_prior, interaction_sd=problem.interaction_sd,
                          layout=problem.layout)
        info["max_log_density_gap"] = float(gap.max())
        info["axes_gap_over_1_nat"] = int((gap > 1.0).sum())
        if self.gap_warning and gap.max() > 1.0:
            warnings.warn(
                f"the posterior is far from Gaussian along {int((gap > 1.0).sum())} of {gap.size} "
                f"directions (log-density gap up to {gap.max():.3g} nats at 2 sd; typical of "
                "near-empty marginal cells): Laplace draws may misrepresent it, use "
                "inference='nuts' for inference you rely on",
                ConvergenceWarning,
                stacklevel=user_stacklevel(),
            )
        draws = lap.sample(settings.n_chains * settings.num_samples, rng)
        draws = draws.reshape(settings.n_chains, settings.num_samples, -1)
        return BackendResult(to_inference_data(draws, attrs={"inference": self.name}), {"laplace": info},
                             {"laplace": lap.seconds}, laplace=lap)


class NUTSBackend:
    """NUTS whitened by the Laplace fit (:func:`synthinfer.napsu.nuts.nuts_sample`); under the
    paper's prior alone (``PosteriorProblem.plateaus``) with the one-sided map and plateau jumps of
    near-empty cells, which the cell prior makes unnecessary; under the others with jumps along
    the axes of near-empty cells' parameters that have a second region. Its program compiles on the
    other core while the Laplace fit runs. Where its draws have divergent transitions it samples
    again at each of ``settings.retry_target_accept`` in turn, the chains going on from where
    they stopped with their step size adapted anew (``nuts_sample(resume=...)``; the draws of
    the last run are the result, ``diagnostics["nuts"]["earlier_runs"]`` records those set aside). Warns when
    R-hat, ESS or divergences fail."""

    name = "nuts"
    noise_aware = True
    takes_measurements = True

    def run(self, problem, settings, *, rng, progress, spare_core) -> BackendResult:
        from synthinfer.napsu.nuts import compile_nuts, jump_candidates, nuts_sample
        from synthinfer.napsu.reparam import map_options

        net = problem.network
        # jumps where near-empty cells may give a second region: plateau jumps under the
        # N(0, prior_sd^2) prior alone (with the map), jumps along their axes under the others
        jump_moves = bool(jump_candidates(net, problem.noisy_counts, problem.sigma, layout=problem.layout,
                                          plateaus=problem.plateaus).any())
        compile_nuts(net, num_warmup=settings.num_warmup, num_samples=settings.num_samples,
                     max_tree_depth=settings.max_tree_depth, layout=problem.layout, jump_moves=jump_moves)
        progress("Laplace approximation")
        lap = _laplace_fit(problem, settings, rng)
        # after the Laplace fit's compilations, beside the NUTS program's and sampling
        spare_core()
        progress("NUTS")
        targets = (settings.target_accept, *settings.retry_target_accept)
        retries = []
        checked: dict[str, Any] = {}

        def unconverged(draws: np.ndarray) -> list[str]:  # the check between passes, kept for the last one
            checked.update(shape=draws.shape, diagnostics=_diagnostics(draws))
            return checked["diagnostics"]["problems"]

        def pass_draws(draws: np.ndarray) -> int:  # after a failed check of these draws: sized to it
            return further_draws(checked["diagnostics"], draws.shape[1], settings.num_samples)

        res = None
        for i, target in enumerate(targets):
            checked.clear()
            if i:  # smaller steps against divergences: the chains go on, their step size adapted anew
                progress(f"NUTS again at target acceptance {target}: {retries[-1]['divergences']} divergent "
                         f"transitions at {targets[i - 1]}")
            res = nuts_sample(
                net, problem.noisy_counts, problem.sigma, problem.n, lap, prior_sd=problem.prior_sd,
                cell_prior=problem.cell_prior, interaction_sd=problem.interaction_sd, layout=problem.layout,
                jump_moves=jump_moves,
                n_chains=settings.n_chains, num_warmup=settings.num_warmup, num_samples=settings.num_samples,
                max_tree_depth=settings.max_tree_depth, target_accept=target, progress=progress, rng=rng,
                max_passes=settings.max_passes, unconverged=unconverged, pass_draws=pass_draws, resume=res,
                until_divergent=i < len(targets) - 1,  # draws with divergences are set aside: no more of them
                **map_options(net, problem.plateaus),
            )
            divergences = int(res.diverging.sum())
            if not divergences or i == len(targets) - 1:
                break
            retries.append({"target_accept": target, "divergences": divergences, "passes": res.passes,
                            "gradient_evaluations": res.n_grad_evals, "seconds": res.seconds})
        draws_total = res.draws.shape[0] * res.draws.shape[1]
        nuts = {
            "gradient_evaluations": res.n_grad_evals,
            "gradient_evaluations_warmup": res.n_grad_evals_warmup,
            "divergences": divergences,
            "step_size": res.step_size.tolist(),
            "one_sided_parameters": res.n_one_sided,
            "plateau_jump_parameters": res.n_jump_cells,
            "plateau_jump_acceptance": res.n_jumps_accepted / res.n_jump_updates if res.n_jump_updates else None,
            "gradient_evaluations_per_draw": res.n_grad_evals / (settings.n_chains * (res.warmup + res.set_aside)
                                                                 + draws_total),
            "passes": res.passes,
            "draws_set_aside": res.set_aside,
            "draws_per_chain": int(res.draws.shape[1]),
            "max_passes": settings.max_passes,
            "target_accept": target,
            # the runs set aside for their divergent transitions, in order
            "earlier_runs": retries,
        }
        posterior = to_inference_data(res.draws, sample_stats={"diverging": res.diverging},
                                      attrs={"inference": self.name})
        # the last pass's check where it saw every draw (it ended the passes), else one now
        nuts.update(checked["diagnostics"] if checked.get("shape") == res.draws.shape else _diagnostics(res.draws))
        warn_unconverged(nuts, remedy="NapsuMQ.set_params(num_samples=...).resample_posterior() runs longer chains "
                                      "on the same posterior at no privacy cost; use the draws after that.")
        if nuts["divergences"]:
            again = f" at target acceptance {target}, the highest tried" if retries else ""
            higher = 0.99 if target >= 0.95 else 0.95
            warnings.warn(f"NUTS: {nuts['divergences']} divergent transitions after warmup{again}; "
                          f"NapsuMQ.set_params(target_accept={higher}).resample_posterior() samples the same posterior "
                          "again with smaller steps, at no privacy cost", ConvergenceWarning,
                          stacklevel=user_stacklevel())
        return BackendResult(posterior, {"laplace": lap.info(), "nuts": nuts},
                             {"laplace": lap.seconds, "nuts": res.seconds + sum(r["seconds"] for r in retries)},
                             laplace=lap)


def _diagnostics(draws: np.ndarray) -> dict[str, Any]:
    """:func:`~synthinfer.mcmc.convergence_diagnostics` of NUTS's draws ``(chains, draws, d)``, no warning."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        return convergence_diagnostics(to_inference_data(draws), ["theta"], warn=False)


class MLEBackend:
    """The non-noise-aware PGM point estimate (Supplement D): one "draw", for comparisons."""

    name = "mle"
    noise_aware = False
    dense = False  # L-BFGS on the PGM objective: no d x d matrix
    takes_measurements = True  # through each canonical cell's combined measurements

    def run(self, problem, settings, *, rng, progress, spare_core) -> BackendResult:
        from synthinfer.napsu.mle import maximum_likelihood_pgm

        if problem.network.queries is not problem.network.queries.canonical:
            raise ParameterError("inference='mle' fits the canonical queries: a network with tied interactions has no PGM objective")
        progress("maximum likelihood (PGM objective)")
        t0 = time.perf_counter()
        res = maximum_likelihood_pgm(problem.network, problem.canonical[0], problem.n, rng=rng)
        seconds = time.perf_counter() - t0
        info = {"converged": res.converged, "loss": res.loss, "iterations": res.n_iterations,
                "gradient_evaluations": res.n_grad_evals, "restarts": res.n_restarts}
        return BackendResult(to_inference_data(res.x[None, None, :], attrs={"inference": self.name}),
                             {"mle": info}, {"mle": seconds})


#: The largest model (canonical queries ``d``) that ``inference="auto"`` samples with NUTS.
#: Measured on Adult at epsilon 1 (docs/napsu-sampler.md, "Which sampler by default"): the
#: paper's 10 marginals (d = 125-130) take NUTS 15-16 gradients per iteration, minutes for
#: Supplement E's 4 x (800 + 2,000); AIM's models (d = 430-830) take it 80-105 gradients per
#: iteration at 2-5 ms of CPU each (10 ms at d = 1,400), an hour or more for the same draws.
AUTO_NUTS_MAX_DIMENSION = 200


class AutoBackend:
    """``inference="auto"`` (NapsuMQ's default): NUTS where it finishes in minutes, the Laplace
    approximation where it would take hours and the Laplace draws' intervals were measured valid.

    The rule, fixed in advance so that a fit does not depend on the machine's speed:

    * ``d <= max_nuts_dimension`` (default :data:`AUTO_NUTS_MAX_DIMENSION`): NUTS, the exact
      posterior with R-hat, ESS and divergence checks;
    * larger models under the interaction prior (``interaction_sd`` set, the default): Laplace,
      with one :class:`~synthinfer.errors.SynthinferWarning` saying so. Its intervals covered at
      their nominal rates against a fixed real table on the full Adult table with AIM, but where
      each repeat's real data are drawn anew (the population design) the intercept's and age's
      95% intervals covered 0.80, and on the one fit compared with NUTS on the same measurements
      they were off-centre by up to 2.6 of NUTS's half-widths (docs/napsu-sampler.md): an
      approximation, not the exact posterior. NUTS on the model with near-empty interactions
      tied (``tie_below=3``) was calibrated there, which is why ``NapsuMQ``'s default
      ``tie_below="auto"`` ties the selected marginals' near-empty interactions. Its axis check
      (:func:`synthinfer.napsu.laplace.laplace_gap`) is reported in the summary instead of a
      second warning;
    * larger models under another prior: NUTS, however long it takes, because Laplace's
      intervals under the cell prior were measured off-centre at that scale;
    * a model with near-empty interactions tied (``NapsuMQ(tie_below=...)``,
      ``PosteriorProblem.near_empty_tied``): NUTS, whatever its size. The ties remove the
      directions that make NUTS slow at AIM's scale (about 30 gradients per draw where the
      untied model took 80-105; docs/napsu-sampler.md), and asking for them is asking for the
      exact posterior of the tied model. Coarse interactions alone (marginals naming a
      many-to-one derived column) keep the fine near-empty cells, so such a model follows the
      size rule above;
    * a model with slopes of numeric coarse columns (``coarse_interactions="linear"`` or
      ``"bilinear"``,
      ``PosteriorProblem.coarse_slopes``): NUTS, whatever its size. On Adult's logit with age
      and hours as whole numbers at epsilon 1 (450 parameters), the Laplace approximation's
      synthetic intervals missed age by 7-9 real standard errors in every fit, its draws
      filling the sparse old-age cells, where NUTS's covered every coefficient in both of two
      fits (docs/continuous-columns.md).

    The choice and its reason are in ``diagnostics["auto"]`` and the fit's summary.
    """

    name = "auto"
    noise_aware = True
    takes_measurements = True

    def __init__(self, *, name: str = "auto", max_nuts_dimension: int = AUTO_NUTS_MAX_DIMENSION):
        if isinstance(max_nuts_dimension, bool) or not isinstance(max_nuts_dimension, (int, np.integer)) \
                or max_nuts_dimension < 0:
            raise ParameterError(f"max_nuts_dimension must be a non-negative integer, got {max_nuts_dimension!r}")
        self.name = name
        self.max_nuts_dimension = int(max_nuts_dimension)
        self._nuts, self._laplace = NUTSBackend(), LaplaceBackend(gap_warning=False)

    def choose(self, problem: PosteriorProblem) -> tuple[str, str]:
        """``(sampler, reason)`` for ``problem``: ``"nuts"`` or ``"laplace"``."""
        d = problem.network.dimension
        queries = problem.network.queries
        if queries is not queries.canonical and problem.coarse_slopes:
            return "nuts", (f"slopes of numeric coarse columns (d = {d}): the Laplace approximation's intervals "
                            "missed such models' slopes (docs/continuous-columns.md); NUTS samples the exact posterior")
        if queries is not queries.canonical and problem.near_empty_tied:
            return "nuts", (f"near-empty interactions tied (d = {d} parameters for {queries.canonical.dimension} "
                            "canonical queries): NUTS samples the tied model's exact posterior")
        if d <= self.max_nuts_dimension:
            return "nuts", f"d = {d} <= {self.max_nuts_dimension}: NUTS samples the exact posterior in minutes"
        if problem.interaction_sd is None:
            return "nuts", (f"d = {d} > {self.max_nuts_dimension}, but the Laplace approximation was validated "
                            "only under the interaction prior (interaction_sd); NUTS at this size can take hours")
        return "laplace", (f"d = {d} > {self.max_nuts_dimension}: NUTS would take hours; the Laplace "
                           "approximation is quick but its intervals can be off-centre at this scale (in a "
                           "coverage study of AIM's models, 0.80 at 95% for the main coefficients; "
                           "docs/napsu-sampler.md); tie_below=3 (the default where marginals are selected) "
                           "samples a smaller model's exact posterior in minutes")

    def run(self, problem, settings, *, rng, progress, spare_core) -> BackendResult:
        sampler, reason = self.choose(problem)
        backend = self._nuts if sampler == "nuts" else self._laplace
        if sampler == "laplace":
            warnings.warn(f"inference={self.name!r} used the Laplace approximation: {reason}", SynthinferWarning,
                          stacklevel=user_stacklevel())
        res = backend.run(problem, settings, rng=rng, progress=progress, spare_core=spare_core)
        res.diagnostics["auto"] = {"sampler": sampler, "reason": reason, "max_nuts_dimension": self.max_nuts_dimension}
        return res


class ImportanceBackend:
    """``inference="importance"``: PSIS from the Laplace-based proposal
    (:func:`importance_sample`), refusing when PSIS says the proposal is poor.

    k-hat at most ``min(1 - 1/log10 S, 0.7)``: the draws are released, with the PSIS
    diagnostics (``diagnostics["importance"]``: ``k_hat``, ``ess``, ``proposal_df``,
    ``num_proposals``, ``validated=True``). Otherwise the weights' tail is too heavy for any
    estimate from them to be trusted (Vehtari et al. 2024), and with ``fallback="nuts"`` (the
    default) the backend warns (:class:`ConvergenceWarning`) and hands the problem to the
    registered ``"nuts"`` backend, whose draws are then the result (``sampler="nuts"``, its
    own diagnostics beside the importance record). Why fall back rather than release flagged
    draws: a user who asked for the noise-aware posterior gets one whose validity is checked
    (by PSIS or by NUTS's R-hat and ESS), never silently an approximation that failed its
    check; the price is NUTS's run time, which the warning names. ``fallback=None`` releases
    the resampled draws anyway, flagged ``validated=False``, with the warning: for studies of
    the proposal, or where NUTS cannot run in the time available.

    A short ESS (below NUTS's bulk-ESS requirement, :data:`synthinfer.mcmc.ESS_BULK_PER_CHAIN`
    per chain) first adds proposal draws, then warns; it does not refuse, as NUTS's check
    does not either.
    """

    noise_aware = True
    takes_measurements = True  # eq. 6 on every measured value; the map on their combinations

    def __init__(self, *, name: str = "importance", df: float = DEFAULT_DF, scale: float = DEFAULT_SCALE,
                 num_proposals: int = DEFAULT_NUM_PROPOSALS, profile: bool = True, fallback: str | None = "nuts"):
        if fallback not in ("nuts", None):
            raise ParameterError(f"fallback must be 'nuts' or None, got {fallback!r}")
        check_settings(df=df, scale=scale, num_proposals=num_proposals)
        self.name = name
        self.df, self.scale, self.num_proposals = df, scale, num_proposals
        self.profile, self.fallback = profile, fallback

    def run(self, problem: PosteriorProblem, settings: InferenceSettings, *, rng: np.random.Generator,
            progress: Callable[[str], None], spare_core: Callable[[], None]) -> BackendResult:
        from synthinfer.mcmc import ESS_BULK_PER_CHAIN

        progress("Laplace approximation")
        lap = _laplace_fit(problem, settings, rng)
        spare_core()  # the data sampler compiles beside the value evaluations
        progress("importance sampling")
        need = ESS_BULK_PER_CHAIN * settings.n_chains
        res = importance_sample(
            problem.network, problem.noisy_counts, problem.sigma, problem.n, lap, layout=problem.layout,
            prior_sd=problem.prior_sd, cell_prior=problem.cell_prior, interaction_sd=problem.interaction_sd,
            n_chains=settings.n_chains, num_samples=settings.num_samples, num_proposals=self.num_proposals,
            min_ess=need, df=self.df, scale=self.scale, profile=self.profile, rng=rng,
            **map_options(problem.network, problem.plateaus),
        )
        info = res.info() | {"ess_required": need, "validated": res.reliable}
        verdict = (f"Pareto k-hat {res.k_hat:.2f} {'<=' if res.reliable else '>'} {res.k_hat_threshold:.2f} "
                   f"with {res.num_proposals} proposal draws")
        if res.reliable:
            info |= {"sampler": "importance", "reason": f"PSIS accepted the proposal: {verdict}"}
            if res.ess_min < need:
                warnings.warn(f"importance sampling: the smallest ESS of a parameter's mean is {res.ess_min:.0f} < "
                              f"{need:.0f} with {res.num_proposals} proposal draws; estimates carry more Monte Carlo "
                              "error than NUTS's policy allows (a larger num_proposals lowers it)",
                              ConvergenceWarning, stacklevel=user_stacklevel())
            posterior = to_inference_data(res.draws, attrs={"inference": self.name})
            return BackendResult(posterior, {"laplace": lap.info(), "importance": info},
                                 {"laplace": lap.seconds, "importance": res.seconds}, laplace=lap)
        if self.fallback == "nuts":
            info |= {"sampler": "nuts", "reason": f"PSIS refused the proposal ({verdict}); fell back to NUTS"}
            warnings.warn(f"importance sampling refused: {verdict} (PSIS ESS {res.ess:.0f}): the proposal misses "
                          "part of the posterior, typically where near-empty cells empty together; falling back to "
                          "NUTS, which takes far longer (inference='nuts' goes there directly)",
                          ConvergenceWarning, stacklevel=user_stacklevel())
            progress("NUTS (importance sampling refused)")
            nuts = get_backend("nuts").run(problem, settings, rng=rng, progress=progress, spare_core=spare_core)
            timings = dict(nuts.timings)
            timings["laplace"] = lap.seconds + nuts.timings.get("laplace", 0.0)
            timings["importance"] = res.seconds
            return BackendResult(nuts.posterior, {**nuts.diagnostics, "importance": info}, timings,
                                 laplace=nuts.laplace)
        info |= {"sampler": "importance", "reason": f"PSIS refused the proposal ({verdict}); draws NOT validated"}
        warnings.warn(f"importance sampling: {verdict} (PSIS ESS {res.ess:.0f}): the proposal misses part of the "
                      "posterior and the draws are NOT validated; use inference='nuts' for inference you rely on",
                      ConvergenceWarning, stacklevel=user_stacklevel())
        posterior = to_inference_data(res.draws, attrs={"inference": self.name})
        return BackendResult(posterior, {"laplace": lap.info(), "importance": info},
                             {"laplace": lap.seconds, "importance": res.seconds}, laplace=lap)


register_backend(LaplaceBackend())
register_backend(NUTSBackend())
register_backend(MLEBackend())
register_backend(ImportanceBackend())
register_backend(AutoBackend())
