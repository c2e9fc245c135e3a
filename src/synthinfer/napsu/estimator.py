"""NAPSU-MQ: noise-aware private synthetic data from marginal queries (Räisä et al. 2023).

Algorithm 1 of the paper, as a scikit-learn style estimator:

1. canonical (identifiable) queries ``a*`` of the user's marginals (Supplement C);
2. ``s~ = a*(X) + N(0, sigma_DP^2 I)``, the analytic Gaussian mechanism (Theorem 3.6) with
   sensitivity ``sqrt(2 n_s)`` (Theorem 3.5), charged to a :class:`PrivacyLedger`;
3. Bayesian inference of ``p(theta | s~)`` under the noise-aware model (eq. 6): Laplace
   approximation or NUTS (Section 4, Supplement E);
4. ``theta_i ~ p(theta | s~)`` and ``X_i ~ MED_theta_i^{n_syn}`` for ``i = 1..m``.

Everything after step 2 is post-processing of ``s~`` (Theorem 3.7), so the fitted generator,
its posterior draws and any number of synthetic datasets are (epsilon, delta)-DP.
Optionally, extra 2-way marginals are chosen privately by MST (:mod:`.selection`) from a separate
share of the same budget.
"""

from __future__ import annotations

import math
import os
import time
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

import numpy as np
import pandas as pd

from synthinfer._jax import float64, single_threaded_blas, uses_float64
from synthinfer.data import Domain, Marginal, QuerySet, as_marginals, decode, encode
from synthinfer.data.counting import CodeCounter, FileCounter, MarginalCounter, is_spark_frame
from synthinfer.data.domain import PrivateBins
from synthinfer.data.private_bins import (
    check_private_bins,
    numbers_to_draw,
    planned_domain,
    private_bin_columns,
    private_columns,
    resolve_private_bins,
)
from synthinfer.errors import (
    ArgumentTypeError,
    OutOfDomainError,
    ParameterError,
    PrivacyError,
    SynthinferWarning,
    UnknownColumnError,
    user_stacklevel,
)
from synthinfer.generate.base import Generator
from synthinfer.napsu.backends import (
    InferenceSettings,
    PosteriorProblem,
    backend_names,
    check_model_size,
    get_backend,
)
from synthinfer.napsu.coarse import (
    MOMENT_SCALE, coarse_groups, coarse_versions, drop_contained, moment_queries, squared_sensitivity,
)
from synthinfer.napsu.likelihood import CELL_PRIOR, INTERACTION_SD, PRIOR_SD
from synthinfer.napsu.measurements import INTEGER_ROUNDING_VARIANCE, Measurement, combine_repeated
from synthinfer.napsu.network import network_for
from synthinfer.napsu.nuts import TARGET_ACCEPT
from synthinfer.napsu.parametrisation import numeric_scores, tied_network
from synthinfer.napsu.queries import CanonicalQueries
from synthinfer.napsu.reference import automatic_reference
from synthinfer.napsu.structured import measurement_layout
from synthinfer.privacy import (
    PrivacyBudget, PrivacyLedger, default_delta, discrete_gaussian_mechanism, jax_key, make_rng,
    scaled_discrete_gaussian_mechanism, seed_fixed,
)
from synthinfer.privacy.randomness import SeedLike
from synthinfer.privacy.samplers import discrete_gaussian_variance
from synthinfer.release.record import ReleaseRecord
from synthinfer.release.stream import DatasetStream

#: Noise level the authors used in inference for the "without noise awareness" ablation (Fig. 3b).
NON_NOISE_AWARE_SIGMA = 0.005
#: The number of datasets fit() compiles generate()'s sampler for ahead of time (a typical m)
PRECOMPILED_M = 100
#: NUTS's (warmup, kept) draws per chain by default: NAPSU-MQ's Supplement E
SUPPLEMENT_E_DRAWS = (800, 2000)
#: ... and on a model with near-empty interactions tied above the size NUTS takes in minutes
#: untied: the draws with which the population coverage study (benchmarks/napsu/adult_coverage.py
#: --population bootstrap) measured calibrated intervals on AIM's models of the full Adult table
TIED_DRAWS = (400, 400)
#: Where the library chooses the draws, NUTS takes up to this many times ``num_samples`` per
#: chain while the convergence check fails (each chain continues where it stopped: "run
#: longer"), each further pass sized to what the check missed (``mcmc.further_draws``).
#: Draws given as ``num_samples`` are kept to: one pass.
MAX_PASSES = 4
#: Where the library chooses NUTS's target acceptance rate (``nuts.TARGET_ACCEPT`` first), the
#: higher rates NUTS samples again at, in turn, while its draws have divergent transitions
#: (smaller steps: Betancourt 2017, "A conceptual introduction to Hamiltonian Monte Carlo",
#: Section 6.2; the Laplace fit is reused). 0.95 rather than 0.9: on the default Adult fits
#: that diverged at 0.8, 0.9 left divergences in 4 of 5 and 0.95 in none tried
#: (docs/napsu-sampler.md, "Sampling again with smaller steps")
RETRY_TARGET_ACCEPT = (0.95,)
#: The settings :meth:`NapsuMQ.resample_posterior` may change: the sampler's. Every other
#: setting shaped the measurements or the model.
SAMPLER_SETTINGS = ("inference", "n_chains", "num_warmup", "num_samples", "max_tree_depth", "target_accept",
                    "laplace_max_iter", "laplace_max_restarts")
#: Spawn key of resample_posterior()'s random stream under an integer seed (apart from the
#: fit's and generate()'s streams).
RESAMPLE_STREAM = 0x7270


def _generate_batch(m: int, n: int, n_columns: int) -> int:
    """Datasets sampled per call: at most ~2e7 codes, so memory stays bounded; every call of a
    generate() has this size (the last batch padded), so its sampler compiles once."""
    return max(1, min(m, int(2e7 // max(1, n * n_columns))))


class NapsuMQ(Generator):
    """Noise-aware synthetic data generator from noisy marginal queries (NAPSU-MQ).

    Parameters
    ----------
    marginals : column tuples, each a full set of marginal queries, e.g.
        ``[("age", "income"), ("race", "income")]``. Include every marginal the downstream
        analysis depends on (Section 4.1: otherwise Rubin's rules cannot be valid). A marginal
        naming a many-to-one derived column (``("age_group", "race")``) is measured as that
        coarse table, with coarse interactions (``coarse_interactions``).
    epsilon, delta : the total privacy budget of this fit (selection + measurement); ``delta``
        defaults to ``1 / n^2`` for the ``n`` rows fitted (:func:`synthinfer.privacy.default_delta`;
        the value used is ``delta_``).
    inference : the inference backend (:mod:`synthinfer.napsu.backends`): ``"auto"``
        (default: NUTS for models of at most
        :data:`~synthinfer.napsu.backends.AUTO_NUTS_MAX_DIMENSION` canonical queries, the
        Laplace approximation for larger ones under the interaction prior, where NUTS would take
        hours (an approximation: see :class:`~synthinfer.napsu.backends.AutoBackend`), NUTS
        for a model with near-empty interactions tied; the summary says which and why),
        ``"nuts"`` (NUTS preconditioned by the Laplace fit, whatever the size), ``"laplace"``
        (Gaussian at the MAP), ``"importance"`` (Pareto-smoothed importance sampling from a
        Laplace-based proposal, handed to NUTS when PSIS refuses it), ``"mle"`` (the non-noise-aware PGM
        point estimate of Supplement D; a baseline for comparisons, not for valid inference),
        or any registered backend's name.
    select_extra : ``0`` (no selection), an int ``K`` (add ``K`` MST-selected 2-way marginals),
        ``"mst"`` (add enough to span all columns), or ``"aim"``: AIM (McKenna et al. 2022,
        :mod:`synthinfer.napsu.aim`) measures the 1-way marginals and ``marginals`` and then
        chooses and measures marginals of ``workload`` over rounds with the whole budget; the
        posterior conditions on every measurement at its own noise level.
    mst_budget_fraction : share of (epsilon, delta) spent on the MST selection when
        ``select_extra`` is an int or ``"mst"``; the measurement gets the rest.
    workload : with ``select_extra="aim"``, the marginals the synthetic data should answer
        well (default: every 2-way marginal); ``marginals`` are always added.
    max_model_cells : with ``select_extra="aim"``, the cap on the junction tree's total clique
        cells (default :data:`synthinfer.napsu.aim.DEFAULT_MAX_MODEL_CELLS`): the posterior's
        cost grows with it.
    max_likelihood_flops : with ``select_extra="aim"``, the cap on the noise-aware likelihood's
        work per evaluation (flops of :func:`synthinfer.napsu.structured.likelihood_flops`;
        default :data:`synthinfer.napsu.aim.DEFAULT_MAX_LIKELIHOOD_FLOPS`, which keeps the default
        sampler near five minutes on the full Adult table on two cores): every gradient of the
        Laplace fit and of NUTS costs about proportionally more above ~1e6. Raise it for a
        richer model when time allows.
    required_share : with ``select_extra="aim"``, the share of the budget (in zCDP's rho) spent
        measuring ``marginals`` (those of two or more columns), all at one noise level, before
        AIM's rounds share the rest (default :data:`synthinfer.napsu.aim.DEFAULT_REQUIRED_SHARE`,
        0.5; ``0``: AIM as published, which measures them with the 1-way marginals at its
        coarsest noise level).
    n_chains, num_warmup, num_samples, max_tree_depth : NUTS settings (Supplement E: 4 chains of
        800 + 2000 draws, tree depth 12). ``None`` (the default for the draws): Supplement E's,
        except for a tied model (near-empty interactions tied, or slopes of numeric coarse
        columns) with more than
        :data:`~synthinfer.napsu.backends.AUTO_NUTS_MAX_DIMENSION` parameters, where
        :data:`TIED_DRAWS` (400 + 400: the population coverage study of AIM's models on the full
        Adult table was calibrated with these, and the fit takes minutes, not the better part of
        an hour; R-hat and ESS are checked as always). Where ``num_samples`` is the library's
        choice, chains that fail the convergence check run on, in passes of up to
        ``num_samples`` draws sized to the ESS still missing, to at most :data:`MAX_PASSES`
        times as many (the summary says how many draws and passes ran);
        a given ``num_samples`` is kept to. For ``"laplace"`` ``n_chains * num_samples`` draws
        are taken from the Gaussian.
    target_accept : NUTS's target acceptance rate in step-size adaptation, in (0, 1). ``None``
        (default): :data:`~synthinfer.napsu.nuts.TARGET_ACCEPT`, and where the draws then have
        divergent transitions NUTS samples again at each of :data:`RETRY_TARGET_ACCEPT` in
        turn (the chains go on with their adapted mass matrix and a step size adapted anew:
        smaller steps; the summary says so); a given rate is kept to.
    prior_sd : standard deviation of the N(0, prior_sd^2 I) prior (paper: 10); with
        ``interaction_sd``, of the main effects' normal prior.
    cell_prior : weight ``alpha`` of the cell prior, ``prod_c P(c)^alpha``, which multiplies the
        normal prior: over the categories of each column with ``interaction_sd``, else over the
        cells of every measured marginal (default 1: a uniform Dirichlet on each table's
        probabilities; 0: no cell prior). It removes the plateaus that near-empty cells give
        the posterior under the normal prior alone, so NUTS needs several times fewer
        gradients (docs/napsu-sampler.md; :func:`synthinfer.napsu.likelihood.log_cell_prior`).
    tie_below : ``"auto"`` (default), ``None`` or a threshold ``k`` in noise standard
        deviations: the interactions of the *selected* marginals (MST's or AIM's, never scopes
        inside ``marginals``) whose cells' noisy counts are below ``k`` noise sd are tied, one
        parameter per marginal and scope (:mod:`synthinfer.napsu.interactions`; chosen from the
        noisy counts, so no privacy cost). The posterior then has far fewer near-empty
        directions, and NUTS far less to do at the scale of real tables. Needs the interaction
        prior. ``"auto"``: :data:`~synthinfer.napsu.interactions.TIE_BELOW` (3) where marginals
        are selected, under the interaction prior and noise-aware inference, else ``None``. Why:
        on AIM's models of the full Adult table, NUTS on the tied model covered at its nominal
        rates where each repeat's real data were drawn anew (95%: 0.964, 50%: 0.536 over 20
        repeats at epsilon 1), and the untied model's Laplace approximation, the other choice at
        that size, covered 0.80 for two of seven coefficients (docs/napsu-sampler.md).
    coarse_interactions : ``"constant"`` (default), ``"linear"`` or ``"bilinear"``: how the
        interactions of a column that a marginal names through a many-to-one derived column (an age group of
        one-year ages) vary inside a group. ``"constant"``: one parameter per group
        (:func:`synthinfer.napsu.interactions.coarse_ties`). ``"linear"``: for a source column
        with numeric bins, also a slope per group in the bins' midpoints
        (:func:`synthinfer.napsu.interactions.coarse_slopes`), so the synthetic data keep how
        an outcome changes with the number inside each group (a slope fitted on them is not
        flattened); a categorical source stays constant. Without AIM such a marginal is
        measured as its coarse table, with ``"linear"`` also with the number's moment in each
        of its cells, the slopes' statistic (:mod:`synthinfer.napsu.coarse`; its own
        sensitivity, accounted in zCDP). ``"bilinear"``: as ``"linear"``, and where a marginal
        names two numeric columns through groups, a product term per coarse cell and its
        statistic, the product moment, so that the synthetic numbers covary inside each cell
        as the real ones do (what a regression of one number on others needs). With slopes,
        ``inference="auto"`` samples with NUTS whatever the model's size
        (:class:`~synthinfer.napsu.backends.AutoBackend`).
    linear_by_linear : ``False`` (default) or ``True``: one more parameter per pair of numeric
        columns that a marginal holds, their linear-by-linear association
        (:func:`synthinfer.napsu.interactions.linear_by_linear`) under the main effects' prior,
        so the pair's interactions are shrunk towards a linear trend instead of towards
        independence. The numbers' covariance (what an OLS of one number on others reads) is
        then the data's, where at a small epsilon the interaction prior alone attenuates it.
        Needs the interaction prior.
    slopes_below : ``None`` (default) or a threshold ``k`` in noise standard deviations: with
        linear coarse interactions, the slopes of the coarse cells whose noisy count is below
        ``k`` noise sd are dropped (:func:`synthinfer.napsu.interactions.near_empty_slopes`;
        post-processing, no privacy cost). The data cannot set such a slope (below about
        3 noise sd its statistic says less than the prior), so it only tilts each synthetic
        dataset at random inside a cell that holds few rows.
    smooth_sd : ``None`` (default), or the sd of the change of a numeric column's log-density
        slope from one bin to the next, one number for every column with numeric bins (three or
        more, not named only through groups) or ``{column: sd}`` for some: their main effects
        become a penalised linear spline
        (:func:`synthinfer.napsu.interactions.spline_main_effects`, a second-order random walk;
        the same model family, another prior), so a bin measured below its noise follows its
        neighbours' trend. Needs the interaction prior.
    interaction_sd : standard deviation ``tau`` of a normal prior on the log-linear
        interactions (reference-coded, order two or more) instead of on the canonical
        parameters (default 1, :data:`synthinfer.napsu.likelihood.INTERACTION_SD`;
        :func:`synthinfer.napsu.likelihood.log_interaction_prior`). Cells measured below their
        noise are then pulled towards the lower-order model rather than towards the uniform
        table, which biased rare categories at AIM's scale (docs/napsu-sampler.md). ``None``:
        the normal prior is on the canonical parameters (with ``cell_prior=0``, the paper's).
    edges_share : share of ``epsilon`` spent choosing the bin edges of the Domain's
        :class:`~synthinfer.data.PrivateBins` columns (``"bins": "private:K"``; default 0.1,
        split equally over those columns and their ``K - 1`` quantiles;
        :mod:`synthinfer.data.private_bins`); the marginals get the rest. Unused (and
        nothing spent) when no column asks for private bins.
    laplace_max_iter, laplace_max_restarts : L-BFGS settings (Supplement E).
    noise_aware : ``False`` runs inference as if the noise were ``sigma_DP = 0.005``
        (the "-NA" ablation of Fig. 3b). Only for studies.
    reference : the reference category of each column in the canonical parametrisation
        (Supplement C), chosen from the *noisy* counts (post-processing, no privacy cost):
        ``"most_frequent"`` (default) picks each column's most frequent category, so the cells
        the parametrisation drops are large ones; ``"well_measured"`` starts there and moves a
        column's reference where the cells that fix the main effects (at most one column off
        the reference) are not near-empty in the measured tables
        (:func:`synthinfer.napsu.reference.well_measured_reference`; e.g. relationship's
        reference away from Husband, which structurally excludes every marital status but
        married): NUTS then mixes far better on Adult, but its intervals covered less often
        in the population study (docs/napsu-sampler.md), so it is not the default; ``"first"``
        uses each column's first category; a mapping ``{column: category}`` fixes some (the
        others take their first category). The family of distributions is the same; the
        priors on ``theta`` are relative to the reference.
    seed : int or numpy Generator for reproducible tests; ``None`` (the default, and the
        only choice for a real release) draws the DP noise from OS entropy. ``generate``
        follows the seed rule of :class:`~synthinfer.generate.Generator`.

    Compiled programs are reused by later fits of the same marginals (any epsilon or data),
    and across processes after :func:`synthinfer.enable_compilation_cache`; current run times
    are in the README's figures table (``benchmarks/napsu``).

    Attributes (after ``fit``)
    --------------------------
    marginals_ : the fixed plus selected marginals; queries_ : the network's parameters (the
    CanonicalQueries, or with ``tie_below`` their InteractionFeatures);
    network_ : the MarkovNetwork; noisy_counts_ : ``s~`` (with AIM: every measured value);
    sigma_dp_ : the noise std (with AIM: ``None``, each measurement has its own);
    measurements_ : with AIM, the Measurements in order (else ``None``); aim_ : AIM's record;
    n_ : number of rows; posterior_ : ArviZ InferenceData (variable ``theta``);
    diagnostics_ : dict (Laplace info, R-hat, ESS, divergences, gradient evaluations, timings);
    ledger_ : the PrivacyLedger charged (it may be shared with other mechanisms); spent_ : the
        (epsilon, delta) this fit charged; privacy_ : the ledger's record at fit time plus mechanism details;
    release_settings_ : the settings of this fit, JSON-ready and without the seed's value
        (``get_params()`` has them as given, seed included); :meth:`release_record` adds the
        fit's public facts for ``write_release(record=...)``.
    """

    mechanism = "napsu-mq"

    def __init__(
        self,
        marginals: Sequence[Sequence[str] | str | Marginal],
        epsilon: float = 1.0,
        delta: float | None = None,
        inference: str = "auto",
        *,
        select_extra: int | Literal["mst", "aim"] = 0,
        mst_budget_fraction: float = 0.1,
        workload: Sequence[Sequence[str] | str | Marginal] | None = None,
        max_model_cells: int | None = None,
        max_likelihood_flops: int | None = None,
        required_share: float | None = None,
        n_chains: int = 4,
        num_warmup: int | None = None,
        num_samples: int | None = None,
        max_tree_depth: int = 12,
        target_accept: float | None = None,
        prior_sd: float = PRIOR_SD,
        cell_prior: float = CELL_PRIOR,
        interaction_sd: float | None = INTERACTION_SD,
        tie_below: float | Literal["auto"] | None = "auto",
        coarse_interactions: Literal["constant", "linear", "bilinear"] = "constant",
        slopes_below: float | None = None,
        linear_by_linear: bool = False,
        smooth_sd: float | Mapping[str, float] | None = None,
        edges_share: float = 0.1,
        laplace_max_iter: int = 6000,
        laplace_max_restarts: int = 5,
        noise_aware: bool = True,
        reference: Literal["most_frequent", "well_measured", "first"] | Mapping[str, Any] = "most_frequent",
        seed: SeedLike = None,
    ):
        self.marginals = marginals
        self.epsilon = epsilon
        self.delta = delta
        self.inference = inference
        self.select_extra = select_extra
        self.mst_budget_fraction = mst_budget_fraction
        self.workload = workload
        self.max_model_cells = max_model_cells
        self.max_likelihood_flops = max_likelihood_flops
        self.required_share = required_share
        self.n_chains = n_chains
        self.num_warmup = num_warmup
        self.num_samples = num_samples
        self.max_tree_depth = max_tree_depth
        self.target_accept = target_accept
        self.prior_sd = prior_sd
        self.cell_prior = cell_prior
        self.interaction_sd = interaction_sd
        self.tie_below = tie_below
        self.coarse_interactions = coarse_interactions
        self.slopes_below = slopes_below
        self.linear_by_linear = linear_by_linear
        self.smooth_sd = smooth_sd
        self.edges_share = edges_share
        self.laplace_max_iter = laplace_max_iter
        self.laplace_max_restarts = laplace_max_restarts
        self.noise_aware = noise_aware
        self.reference = reference
        self.seed = seed

    # ------------------------------------------------------------------------------------
    def _release_settings(self) -> dict[str, Any]:
        """Constructor settings, JSON-ready, for a release's record (``release_settings_``): the
        seed's value is never included (publishing it would let anyone subtract the noise);
        ``get_params()`` returns the settings as given, seed included."""
        return {
            "marginals": [list(m.columns) for m in as_marginals(self.marginals)],
            "epsilon": self.epsilon,
            "delta": self.delta if self.delta is not None else getattr(self, "delta_", None),  # the value used
            "inference": self.inference,
            "select_extra": self.select_extra,
            "mst_budget_fraction": self.mst_budget_fraction,
            "workload": (None if self.workload is None
                         else [list(m.columns) for m in as_marginals(self.workload, "workload")]),
            "max_model_cells": self.max_model_cells,
            "max_likelihood_flops": self.max_likelihood_flops,
            "required_share": self.required_share,
            "n_chains": self.n_chains,
            "num_warmup": self.num_warmup,
            "num_samples": self.num_samples,
            "max_tree_depth": self.max_tree_depth,
            "target_accept": self.target_accept,
            "prior_sd": self.prior_sd,
            "cell_prior": self.cell_prior,
            "interaction_sd": self.interaction_sd,
            "tie_below": self.tie_below,
            "coarse_interactions": self.coarse_interactions,
            "slopes_below": self.slopes_below,
            "linear_by_linear": self.linear_by_linear,
            "smooth_sd": self.smooth_sd,
            "edges_share": self.edges_share,
            "laplace_max_iter": self.laplace_max_iter,
            "laplace_max_restarts": self.laplace_max_restarts,
            "noise_aware": self.noise_aware,
            "reference": self.reference if isinstance(self.reference, str) else dict(self.reference),
        }

    def _check_settings(self) -> None:
        backend = get_backend(self.inference)  # ParameterError naming the registered backends
        if not (self.select_extra in ("mst", "aim")
                or (isinstance(self.select_extra, (int, np.integer)) and not isinstance(self.select_extra, bool)
                    and self.select_extra >= 0)):
            raise ParameterError(f"select_extra must be a non-negative int, 'mst' or 'aim', got {self.select_extra!r}")
        if self.select_extra == "aim":
            if not getattr(backend, "takes_measurements", False):
                takes = [b for b in backend_names() if getattr(get_backend(b), "takes_measurements", False)]
                raise ParameterError(
                    f"inference={self.inference!r} cannot yet use AIM's measurements at several noise levels; "
                    f"use one of {takes}")
            if self.max_model_cells is not None and not (
                    isinstance(self.max_model_cells, (int, np.integer)) and not isinstance(self.max_model_cells, bool)
                    and self.max_model_cells > 0):
                raise ParameterError(f"max_model_cells must be a positive integer, got {self.max_model_cells!r}")
            if self.max_likelihood_flops is not None and not (
                    isinstance(self.max_likelihood_flops, (int, np.integer))
                    and not isinstance(self.max_likelihood_flops, bool) and self.max_likelihood_flops > 0):
                raise ParameterError(
                    f"max_likelihood_flops must be a positive integer, got {self.max_likelihood_flops!r}")
            if self.required_share is not None and not (
                    _is_number(self.required_share) and 0 <= self.required_share < 1):
                raise ParameterError(f"required_share must be a number in [0, 1), got {self.required_share!r}")
        elif (self.workload is not None or self.max_model_cells is not None or self.max_likelihood_flops is not None
              or self.required_share is not None):
            raise ParameterError("workload, max_model_cells, max_likelihood_flops and required_share apply to "
                                 "select_extra='aim' only")
        if self.select_extra and self.select_extra != "aim" and not (
                _is_number(self.mst_budget_fraction) and 0 < self.mst_budget_fraction < 1):
            raise ParameterError(f"mst_budget_fraction must be in (0, 1), got {self.mst_budget_fraction!r}")
        # Checked here, before any budget is spent: a bad value would otherwise fail after the
        # noisy measurement has been charged.
        for name, least in (("n_chains", 1), ("num_samples", 1), ("num_warmup", 0), ("max_tree_depth", 1),
                            ("laplace_max_iter", 1), ("laplace_max_restarts", 0)):
            v = getattr(self, name)
            if v is None and name in ("num_samples", "num_warmup"):
                continue  # chosen with the model (the class docstring)
            if isinstance(v, bool) or not (isinstance(v, (int, np.integer)) and v >= least):
                raise ParameterError(f"{name} must be an integer >= {least}, got {v!r}")
        if self.target_accept is not None and not (_is_number(self.target_accept) and 0 < self.target_accept < 1):
            raise ParameterError(f"target_accept must be None or a number in (0, 1), got {self.target_accept!r}")
        if not (_is_number(self.prior_sd) and math.isfinite(self.prior_sd) and self.prior_sd > 0):
            raise ParameterError(f"prior_sd must be a finite number > 0, got {self.prior_sd!r}")
        if not (_is_number(self.cell_prior) and math.isfinite(self.cell_prior) and self.cell_prior >= 0):
            raise ParameterError(f"cell_prior must be a finite number >= 0, got {self.cell_prior!r}")
        if self.interaction_sd is not None and not (
                _is_number(self.interaction_sd) and math.isfinite(self.interaction_sd) and self.interaction_sd > 0):
            raise ParameterError(f"interaction_sd must be None or a finite number > 0, got {self.interaction_sd!r}")
        if self.tie_below is not None and self.tie_below != "auto":
            if not (_is_number(self.tie_below) and math.isfinite(self.tie_below) and self.tie_below > 0):
                raise ParameterError(f"tie_below must be 'auto', None or a finite number > 0 (noise sd), "
                                     f"got {self.tie_below!r}")
            if self.interaction_sd is None:
                raise ParameterError("tie_below ties interactions: it needs the interaction prior (interaction_sd)")
            if not backend.noise_aware:
                raise ParameterError(f"tie_below applies to noise-aware inference, not inference={self.inference!r}")
        if self.smooth_sd is not None:
            sds = self.smooth_sd.values() if isinstance(self.smooth_sd, Mapping) else [self.smooth_sd]
            if not sds or not all(_is_number(v) and math.isfinite(v) and v > 0 for v in sds):
                raise ParameterError(f"smooth_sd must be None, a finite number > 0 or a mapping of columns to such "
                                     f"numbers, got {self.smooth_sd!r}")
            if self.interaction_sd is None:
                raise ParameterError("smooth_sd puts the splines' changes of slope under the interaction prior: "
                                     "it needs interaction_sd")
            if not backend.noise_aware:
                raise ParameterError(f"smooth_sd applies to noise-aware inference, not inference={self.inference!r}")
        if self.coarse_interactions not in ("constant", "linear", "bilinear"):
            raise ParameterError("coarse_interactions must be 'constant', 'linear' or 'bilinear', "
                                 f"got {self.coarse_interactions!r}")
        if self.slopes_below is not None:
            if not (_is_number(self.slopes_below) and math.isfinite(self.slopes_below) and self.slopes_below > 0):
                raise ParameterError(f"slopes_below must be None or a finite number > 0 (noise sd), "
                                     f"got {self.slopes_below!r}")
            if self.coarse_interactions == "constant":
                raise ParameterError("slopes_below drops slopes of coarse cells: it needs "
                                     "coarse_interactions='linear' or 'bilinear'")
        if not isinstance(self.linear_by_linear, (bool, np.bool_)):
            raise ParameterError(f"linear_by_linear must be True or False, got {self.linear_by_linear!r}")
        if self.linear_by_linear:
            if self.interaction_sd is None:
                raise ParameterError("linear_by_linear centres the interaction prior on a trend: "
                                     "it needs interaction_sd")
            if not backend.noise_aware:
                raise ParameterError(f"linear_by_linear applies to noise-aware inference, "
                                     f"not inference={self.inference!r}")
        if not (_is_number(self.edges_share) and 0 < self.edges_share < 1):
            raise ParameterError(f"edges_share must be a number in (0, 1), got {self.edges_share!r}")
        if not (self.reference in ("most_frequent", "well_measured", "first") or isinstance(self.reference, Mapping)):
            raise ParameterError(
                f"reference must be 'most_frequent', 'well_measured', 'first' or a mapping column -> category, "
                f"got {self.reference!r}"
            )

    def _user_reference(self, domain: Domain) -> dict[str, int] | None:
        """The user's reference categories as codes (``None`` for the automatic choices)."""
        if isinstance(self.reference, str):
            return {} if self.reference == "first" else None
        out = {}
        for name, value in self.reference.items():
            if name not in domain.names:
                raise UnknownColumnError(f"reference: unknown column {name!r}")
            if name in domain.derived:
                raise ParameterError(f"reference: column {name!r} is derived from {domain.derived[name][0]!r}, "
                                     "which is modelled in its place; give that column's reference instead")
            if isinstance(domain[name], PrivateBins):
                raise ParameterError(f"reference: column {name!r} has private bins, whose categories are not known "
                                     "before the fit chooses them")
            cats = list(domain[name].categories)
            if value not in cats:
                raise OutOfDomainError(f"reference[{name!r}] = {value!r} is not a category of {name!r}")
            out[name] = cats.index(value)
        return out

    # ------------------------------------------------------------------------------------
    @uses_float64
    def fit(
        self,
        data: pd.DataFrame,
        domain: Domain | None = None,
        ledger: PrivacyLedger | None = None,
        *,
        progress: Callable[[str], None] | None = None,
    ) -> NapsuMQ:
        """Measure the marginals privately and infer the posterior of MED_theta's parameters.

        ``data`` must have every Domain column with values in the Domain (missing values are
        errors): a DataFrame, the path of a CSV or Parquet file, which is never loaded (one
        DuckDB scan checks every value, :class:`synthinfer.data.counting.FileCounter`, and the
        counts the fit needs take one more; MST and AIM: their candidates' counts in one scan),
        or a Spark DataFrame, counted by Spark SQL where it lives
        (:class:`synthinfer.data.spark.SparkCounter`), all before the noise is drawn.
        ``ledger`` (optional) is charged ``(epsilon, delta)``; without one, a ledger with
        exactly that total is created. ``progress(stage)`` is called at each stage.
        """
        self._start_fit()
        self._check_settings()
        if not (isinstance(data, (pd.DataFrame, str, os.PathLike, MarginalCounter)) or is_spark_frame(data)):
            raise ArgumentTypeError(f"data must be a pandas DataFrame, the path of a CSV or Parquet file or a Spark "
                                    f"DataFrame, got {type(data).__name__}")
        if not isinstance(domain, Domain):
            raise ArgumentTypeError(f"domain must be a synthinfer Domain, got {type(domain).__name__}")
        in_memory = isinstance(data, pd.DataFrame)
        if not in_memory:  # a file (DuckDB) or a Spark DataFrame: never loaded
            if private_columns(domain):
                raise ParameterError("private bins are chosen from the rows in memory: fit a pandas DataFrame, or "
                                     "give the Domain's edges (bin_edges) to fit a file or a Spark DataFrame")
            if isinstance(data, MarginalCounter) and data.domain != domain:
                raise ParameterError(f"the {type(data).__name__} counts another Domain than the one given to fit()")
        # Private bin edges (the Domain's PrivateBins columns): every input check here, before
        # any spend; the checks of the model below run on the bins as asked for, and the edges
        # are drawn once the ledger has verified the whole budget.
        edges_epsilon = self.epsilon * float(self.edges_share) if private_columns(domain) else 0.0
        check_private_bins(data, domain, edges_epsilon)
        given_domain, full_domain = domain, planned_domain(domain)
        for m in as_marginals(self.marginals):
            full_domain.check_columns(m.columns)  # UnknownColumnError, before the derived columns go
        # derived columns are functions of their sources: the model is fitted without them, on
        # the marginals with each derived column replaced by its source, and generate() adds them
        domain = full_domain.without_derived()
        coarse = coarse_versions(self.marginals, full_domain)
        fixed = drop_contained(_model_marginals(self.marginals, full_domain), coarse)
        QuerySet(domain, fixed)  # validates columns (UnknownColumnError) and duplicates
        self._check_coarse(coarse, full_domain)
        if isinstance(self.smooth_sd, Mapping):
            bad = [c for c in self.smooth_sd if c not in numeric_scores(full_domain)]
            if bad:
                raise ParameterError(f"smooth_sd names column {bad[0]!r}, which is not a column with numeric bins")
        reference = self._user_reference(given_domain)  # validated before any budget is spent
        d_fixed = CanonicalQueries(domain, fixed, reference={}).dimension
        if not self.select_extra and d_fixed == 0:
            raise ParameterError("the marginals measure nothing: every column in them has a single category")
        check_model_size(self.inference, *self._model_size_bound(domain, fixed, d_fixed))
        counter = None
        if not in_memory:  # after the cheap checks: one scan checks every value and finds n
            if is_spark_frame(data):
                from synthinfer.data.spark import SparkCounter

                data = SparkCounter(data, given_domain)
            counter = data = data if isinstance(data, MarginalCounter) else FileCounter(data, given_domain)
        delta = default_delta(max(counter.n if counter is not None else len(data), 1)) if self.delta is None \
            else self.delta
        budget = PrivacyBudget(self.epsilon, delta)
        if budget.delta <= 0:
            raise ParameterError("NAPSU-MQ uses the Gaussian mechanism and needs delta > 0")
        ledger = self._ledger_for(budget, data, ledger)
        ledger.check("napsu-mq", budget.epsilon, budget.delta, mechanism="napsu-mq")
        stage = progress or (lambda s: None)
        if edges_epsilon:
            encode(data, full_domain)  # every other column's values checked before the edges' spend
            stage("choosing private bin edges")
            full_domain = resolve_private_bins(data, given_domain, epsilon=edges_epsilon, ledger=ledger)
            domain = full_domain.without_derived()
            budget = PrivacyBudget(budget.epsilon - edges_epsilon, budget.delta)
        rng = make_rng(self.seed)
        if counter is None:  # rows in memory: their codes, checked (derived columns against their maps too)
            codes = encode(data, full_domain)
            if domain is not full_domain:
                codes = codes[:, [full_domain.index(c) for c in domain.names]]
            counter = CodeCounter(codes, domain)
            del codes
        n = counter.n
        timings: dict[str, float] = {}

        # -- query selection (own budget share) ------------------------------------------
        selected: list[Marginal] = []
        meas_budget = budget
        plan = part_of = None  # MST's and the measurement's jointly calibrated noise (napsu.selection)
        aim = None
        if self.select_extra == "aim":
            from synthinfer.napsu.aim import DEFAULT_MAX_MODEL_CELLS, DEFAULT_REQUIRED_SHARE, select_aim

            stage("selecting and measuring marginals (AIM)")
            t0 = time.perf_counter()
            workload = self.workload
            if workload is not None and full_domain.derived:  # AIM validates (and names) the workload itself
                workload = [_source_columns(m, full_domain) for m in workload]
            aim = select_aim(counter, domain, workload, required=fixed, budget=budget, ledger=ledger,
                             max_model_cells=self.max_model_cells or DEFAULT_MAX_MODEL_CELLS,
                             max_likelihood_flops=None if self.max_likelihood_flops is None
                             else int(self.max_likelihood_flops),
                             required_share=(DEFAULT_REQUIRED_SHARE if self.required_share is None
                                             else float(self.required_share)))
            timings["selection_and_measurement"] = time.perf_counter() - t0
            # the measured scopes not inside another (AIM's 1-ways are, in its 2-ways) or a fixed one
            selected = [m for m in aim.marginals
                        if not any(set(m.columns) < set(o.columns) for o in aim.marginals) and not _contained(m, fixed)]
        elif self.select_extra:
            from synthinfer.napsu.selection import mst_noise_plan, n_spanning_edges, select_mst_marginals

            k = n_spanning_edges(domain, fixed) if self.select_extra == "mst" else int(self.select_extra)
            if k > 0:
                stage("selecting marginals (MST)")
                t0 = time.perf_counter()
                sel_budget, meas_budget = budget.split(self.mst_budget_fraction, 1 - self.mst_budget_fraction)
                plan = mst_noise_plan(len(domain), len(fixed) + k, k, sel_budget, meas_budget)
                if plan is not None:  # its parts' parameters are public and fixed: committed before any noise
                    part_of = ledger.commit_plan(
                        "napsu-mq: MST selection and marginal queries", budget.epsilon, budget.delta, plan.losses,
                        mechanism="napsu-mq", scale=plan.scale,
                        accounting="jointly calibrated (napsu.selection.mst_noise_plan)")
                selected = select_mst_marginals(counter, domain, fixed, n_extra=k, budget=sel_budget, ledger=ledger,
                                                one_way_sigma=None if plan is None else plan.one_way_sigma,
                                                part_of=part_of)
                timings["selection"] = time.perf_counter() - t0
        marginals = tuple(fixed) + tuple(selected)
        unmeasured = [c for c in domain.names if not any(c in m.columns for m in marginals)]
        if unmeasured:
            warnings.warn(
                f"columns {unmeasured} are in no marginal: they are generated uniformly at random and "
                "independently of everything else; add marginals with them or select more (select_extra='mst', on the "
                "command line --select mst)",
                SynthinferWarning, stacklevel=user_stacklevel())

        if aim is not None:
            # AIM has measured everything; the model's marginals hold every measured scope
            t0 = time.perf_counter()
            if reference is None:
                reference = automatic_reference(aim.measurements, domain, self.reference)
            network = network_for(domain, marginals, reference)
            self.measurements_ = tuple(aim.measurements)
            self.aim_ = aim
            aim_record = {  # public facts of AIM's run, kept with the diagnostics
                "rounds": len(aim.rounds), "measurements": len(aim.measurements), "rho": aim.rho,
                "model_cells": aim.model_cells, "max_model_cells": aim.max_model_cells,
                "max_clique_cells": aim.max_clique_cells, "max_likelihood_flops": aim.max_likelihood_flops,
                "required_share": aim.required_share,
                "likelihood_flops": aim.likelihood_flops,  # the noise-aware likelihood's work (public)
                "workload": [list(m.columns) for m in aim.workload],
                "chosen": [list(r.marginal.columns) for r in aim.rounds],
                "sigma": [math.sqrt(m.variance) for m in aim.measurements],
            }
            self.layout_ = measurement_layout(aim.measurements, domain)
            noisy = np.concatenate([m.values for m in aim.measurements])
            sigma = None
            del counter
            timings["network"] = time.perf_counter() - t0
        else:
            # -- the Gaussian mechanism and the canonical queries -----------------------------
            # Every cell of the full marginals is measured (same L2 sensitivity sqrt(2 n_s) as the
            # canonical subset, Theorem 3.5); the canonical queries are then a subset of the noisy
            # vector, with the same distribution as measuring them alone. Measuring all cells first
            # lets the reference categories be chosen from noisy counts (post-processing).
            stage("measuring marginals")
            t0 = time.perf_counter()
            queryset = QuerySet(domain, marginals)
            counter.prefetch([m.columns for m in queryset.marginals])  # a file: one scan
            # a marginal named through many-to-one derived columns is measured as its coarse table:
            # each value sums its group's fine cells (each row is in one group: same sensitivity);
            # with linear coarse interactions also the moments of its numeric coarse columns
            coarse_maps = {tuple(cols): maps for cols, maps in coarse if maps}
            groups = [coarse_groups(m, coarse_maps.get(m.columns), domain) for m in queryset.marginals]
            scores = numeric_scores(full_domain)
            moments = [moment_queries(m, coarse_maps.get(m.columns), scores, domain,
                                      products=self.coarse_interactions == "bilinear")
                       if self.coarse_interactions != "constant" else [] for m in queryset.marginals]
            fine_tables = [counter.count(m.columns) for m in queryset.marginals]
            tables = [c if g is None else np.bincount(g, weights=c).round().astype(np.int64)
                      for c, g in zip(fine_tables, groups)]
            moment_values = [q.values(c) for c, qs in zip(fine_tables, moments) for q in qs]
            counts = np.concatenate(tables)
            del fine_tables
            if moment_values:  # real-weighted statistics: integer-scaled parts, zCDP (napsu.coarse)
                if plan is not None:  # _check_coarse refuses this before any spend; never measure outside a plan
                    raise PrivacyError("moments cannot be measured inside MST's jointly calibrated noise plan")
                noisy_parts, sigma_scale = scaled_discrete_gaussian_mechanism(
                    [counts, *moment_values], [1] + [MOMENT_SCALE] * len(moment_values),
                    sensitivity=math.sqrt(sum(squared_sensitivity(g, [(q.cells, q.weights / MOMENT_SCALE) for q in qs])
                                              for g, qs in zip(groups, moments))),
                    epsilon=meas_budget.epsilon, delta=meas_budget.delta, ledger=ledger,
                    name="napsu-mq: marginal queries and coarse moments")
                noisy_all, *noisy_moments = noisy_parts
                sigma = math.sqrt(discrete_gaussian_variance(sigma_scale))
                moment_variance = discrete_gaussian_variance(sigma_scale * MOMENT_SCALE) / MOMENT_SCALE**2
            else:
                noisy_moments = []
                noisy_all, sigma = discrete_gaussian_mechanism(
                    counts,
                    sensitivity=queryset.l2_sensitivity,
                    unit_changes=queryset.unit_changes,
                    epsilon=meas_budget.epsilon if plan is None else None,
                    sigma=None if plan is None else plan.measure_sigma,
                    part_of=part_of,
                    delta=meas_budget.delta,
                    ledger=ledger,
                    name="napsu-mq: marginal queries",
                )
            del counts, counter
            self.aim_ = None
            aim_record = None
            if any(g is not None for g in groups):  # the measurements as measured, coarse tables grouped
                values = np.split(noisy_all, np.cumsum([t.size for t in tables])[:-1])
                measured = [Measurement(m, v, sigma**2, cells=None if g is None else np.arange(g.size), groups=g)
                            for m, v, g in zip(queryset.marginals, values, groups)]
                flat = [q for qs in moments for q in qs]
                measured += [Measurement(q.marginal, v / MOMENT_SCALE, moment_variance, cells=q.cells, groups=q.groups,
                                         weights=q.weights / MOMENT_SCALE) for q, v in zip(flat, noisy_moments)]
                self.measurements_ = tuple(measured)
                if reference is None:
                    reference = automatic_reference(self.measurements_, domain, self.reference)
                network = network_for(domain, marginals, reference)
                self.layout_ = measurement_layout(self.measurements_, domain)
                noisy = np.concatenate([m.values for m in self.measurements_])
            else:
                if reference is None:
                    reference = automatic_reference([Measurement(m, part, sigma**2) for m, part in
                                                     zip(queryset.marginals, queryset.split(noisy_all))],
                                                    domain, self.reference)
                network = network_for(domain, marginals, reference)
                noisy = noisy_all[network.queries.kept]
                self.measurements_ = self.layout_ = None
            timings["network_and_measurement"] = time.perf_counter() - t0
        tie_counts: dict[str, int] = {}
        tie_below = self._tie_threshold()
        if (any(maps for _, maps in coarse) or (tie_below is not None and selected) or self.smooth_sd is not None
                or self.linear_by_linear):
            versions = coarse + [(m.columns, {}) for m in selected]  # selected marginals are fine
            network, tie_counts = tied_network(
                network, marginals, reference, versions=versions, fixed=fixed, selected=selected,
                scores=numeric_scores(full_domain), coarse_interactions=self.coarse_interactions,
                smooth_sd=self.smooth_sd, interaction_sd=self.interaction_sd, tie_below=tie_below, noisy=noisy,
                slopes_below=self.slopes_below, linear_by_linear=bool(self.linear_by_linear), sigma=sigma,
                measurements=self.measurements_, layout=self.layout_)
        queries = network.queries

        self.marginals_ = marginals
        self.selected_marginals_ = tuple(selected)
        self.domain_ = full_domain
        self.network_ = network
        self.queries_ = queries
        self.noisy_counts_ = noisy
        self.sigma_dp_ = None if sigma is None else float(sigma)
        self.n_ = n
        self.ledger_ = ledger
        self.seed_fixed_ = seed_fixed(self.seed)
        with single_threaded_blas():  # see synthinfer._jax: BLAS threads only contend at this size
            self._infer(rng, stage, timings, near_empty_tied=bool(tie_counts.get("near_empty_ties")),
                        coarse_slopes=bool(tie_counts.get("coarse_slopes")))
        if aim_record is not None:
            self.diagnostics_["aim"] = aim_record
        if queries is not queries.canonical:
            self.diagnostics_["ties"] = {
                "tie_below": None if tie_below is None else float(tie_below), "ties": len(queries.ties),
                "slopes_below": None if self.slopes_below is None else float(self.slopes_below),
                "tied_interactions": sum(len(g) for g in queries.ties), **tie_counts,
                "canonical_queries": queries.canonical.dimension, "parameters": queries.dimension}
        fit_charges = self._fit_charges()
        self.spent_ = (sum(c.epsilon for c in fit_charges), sum(c.delta for c in fit_charges))
        self.delta_ = budget.delta
        self.privacy_ = self._privacy_record()
        self._fit_complete()  # the settings as fitted, whatever set_params does later
        return self

    def _tie_threshold(self) -> float | None:
        """``tie_below`` resolved: ``"auto"`` is :data:`TIE_BELOW` where marginals are selected,
        under the interaction prior and a noise-aware backend, else ``None``."""
        if self.tie_below != "auto":
            return self.tie_below
        from synthinfer.napsu.interactions import TIE_BELOW

        wanted = self.select_extra and self.interaction_sd is not None and get_backend(self.inference).noise_aware
        return TIE_BELOW if wanted else None

    def _draws(self, tied: bool) -> tuple[int, int, str, int]:
        """``(num_warmup, num_samples, why, max_passes)``: the given ones, else Supplement E's,
        or :data:`TIED_DRAWS` for a tied model (near-empty ties or coarse slopes) above the size
        NUTS takes in minutes untied; up to :data:`MAX_PASSES` times ``num_samples`` where
        ``num_samples`` is the library's choice."""
        from synthinfer.napsu.backends import AUTO_NUTS_MAX_DIMENSION

        if tied and self.network_.dimension > AUTO_NUTS_MAX_DIMENSION:
            default, why = TIED_DRAWS, (f"a tied model, d = {self.network_.dimension} > "
                                        f"{AUTO_NUTS_MAX_DIMENSION}: the draws of the population coverage study")
        else:
            default, why = SUPPLEMENT_E_DRAWS, "Supplement E's"
        given = [name for name in ("num_warmup", "num_samples") if getattr(self, name) is not None]
        if len(given) == 2:
            why = "as given"
        elif given:
            why = f"{given[0]} as given, the other {why}"
        return (default[0] if self.num_warmup is None else int(self.num_warmup),
                default[1] if self.num_samples is None else int(self.num_samples), why,
                MAX_PASSES if self.num_samples is None else 1)

    def _check_coarse(self, coarse: list[tuple[tuple[str, ...], dict[str, np.ndarray]]], domain: Domain) -> None:
        """Coarse marginals tie interactions: the interaction prior and a noise-aware backend
        must be there to take them; linear ones measure moments, which MST's jointly calibrated
        noise plan does not cover (checked before any spend)."""
        named = [cols for cols, maps in coarse if maps]
        if not named:
            return
        numeric = [cols for cols, maps in coarse if any(c in numeric_scores(domain) for c in maps)]
        if self.coarse_interactions != "constant" and numeric and self.select_extra and self.select_extra != "aim":
            raise ParameterError(f"marginal {numeric[0]} names a numeric column through its groups, and "
                                 f"coarse_interactions={self.coarse_interactions!r} measures its moments in each "
                                 "group: MST's jointly calibrated noise plan does not cover them; use "
                                 "select_extra='aim' or None, or coarse_interactions='constant'")
        if self.interaction_sd is None:
            raise ParameterError(f"marginal {named[0]} names a column through a many-to-one derived column, whose "
                                 "interactions are coarse (tied): that needs the interaction prior (interaction_sd); "
                                 "name the source column for a fine marginal")
        if not get_backend(self.inference).noise_aware:
            raise ParameterError(f"marginal {named[0]} names a column through a many-to-one derived column, whose "
                                 f"interactions are coarse (tied): inference={self.inference!r} does not take tied "
                                 "interactions; use a noise-aware backend or name the source column")

    def _model_size_bound(self, domain: Domain, fixed: Sequence[Marginal], d_fixed: int) -> tuple[int, str]:
        """An upper bound on the model's parameter count known before any budget is spent, and
        where it comes from: the marginals' own count without selection; AIM's cap on the
        model's cells (each parameter is a cell of a clique); MST's ``K`` pairs, each adding at
        most the cells of the two largest columns."""
        if self.select_extra == "aim":
            from synthinfer.napsu.aim import DEFAULT_MAX_MODEL_CELLS

            cap = self.max_model_cells or DEFAULT_MAX_MODEL_CELLS
            return max(d_fixed, int(cap)), f"AIM's max_model_cells={int(cap):,}"
        if self.select_extra:
            from synthinfer.napsu.selection import n_spanning_edges

            k = n_spanning_edges(domain, fixed) if self.select_extra == "mst" else int(self.select_extra)
            sizes = sorted(domain.shape, reverse=True) + [1, 1]
            return d_fixed + k * sizes[0] * sizes[1], f"the marginals and MST's {k} extra 2-way marginals"
        return d_fixed, "the marginals' own count"

    def _likelihood_inputs(self) -> tuple:
        """``(layout, noisy values, noise sd)`` of the fit's likelihood: repeated measurements of one
        marginal (AIM's rounds) combined into one each (the same posterior, a cheaper likelihood);
        the noise sd per value, or one for all."""
        layout, noisy = self.layout_, self.noisy_counts_
        if self.measurements_ is not None:
            merged = combine_repeated(self.measurements_, INTEGER_ROUNDING_VARIANCE)
            if len(merged) < len(self.measurements_):
                layout = measurement_layout(merged, self.network_.queries.domain)
                noisy = np.concatenate([m.values for m in merged])
        if not self.noise_aware:
            sigma = NON_NOISE_AWARE_SIGMA
        elif self.measurements_ is not None:
            sigma = np.concatenate([np.full(m.values.size, math.sqrt(m.variance)) for m in merged])
        else:
            sigma = math.sqrt(max(self.sigma_dp_**2, INTEGER_ROUNDING_VARIANCE))
        return layout, noisy, sigma

    def _infer(self, rng: np.random.Generator, stage: Callable[[str], None], timings: dict[str, float], *,
               near_empty_tied: bool = False, coarse_slopes: bool = False) -> None:
        backend = get_backend(self.inference)
        layout, noisy, sigma_inf = self._likelihood_inputs()
        problem = PosteriorProblem(self.network_, noisy, sigma_inf, self.n_, float(self.prior_sd),
                                   layout=layout, cell_prior=float(self.cell_prior),
                                   interaction_sd=None if self.interaction_sd is None else float(self.interaction_sd),
                                   near_empty_tied=near_empty_tied, coarse_slopes=coarse_slopes)
        warmup, samples, why, passes = self._draws(near_empty_tied or coarse_slopes)
        settings = InferenceSettings(
            n_chains=int(self.n_chains), num_warmup=warmup, num_samples=samples,
            max_tree_depth=int(self.max_tree_depth), laplace_max_iter=int(self.laplace_max_iter),
            laplace_max_restarts=int(self.laplace_max_restarts), max_passes=passes,
            target_accept=TARGET_ACCEPT if self.target_accept is None else float(self.target_accept),
            retry_target_accept=RETRY_TARGET_ACCEPT if self.target_accept is None else (),
        )
        res = backend.run(problem, settings, rng=rng, progress=stage, spare_core=self._compile_sampler)
        if res.laplace is not None:
            self.laplace_ = res.laplace
        self.posterior_ = res.posterior
        timings.update(res.timings)
        self.diagnostics_ = {"inference": self.inference, "noise_aware": bool(self.noise_aware and backend.noise_aware),
                             "sigma_inference": sigma_inf if np.ndim(sigma_inf) == 0 else "per measurement",
                             "draws": {"num_warmup": warmup, "num_samples": samples, "why": why},
                             **res.diagnostics, "timings": timings}

    @uses_float64
    def resample_posterior(self, seed: SeedLike = None, *, progress: Callable[[str], None] | None = None) -> NapsuMQ:
        """Sample the posterior again from the fit's noisy measurements, with the current sampler
        settings; no privacy cost.

        The posterior p(theta | s~) depends on the private data only through the noisy
        measurements s~ the fit released to itself, so drawing from it again is post-processing
        (Dwork & Roth 2014, Proposition 2.1): nothing is charged to the ledger, and a loaded fit
        (:meth:`load`) can do it. Use it where a fit's summary warned (divergent transitions,
        R-hat or ESS short of the checks), or to draw with another sampler: change the sampler's
        settings first with ``set_params``, e.g.::

            gen.set_params(target_accept=0.95, num_samples=1000).resample_posterior(seed=1)

        The sampler's settings are :data:`SAMPLER_SETTINGS`. Every other setting shaped the
        measurements or the model (marginals, budget, selection, prior, ties, reference) and
        must be as fitted: a ParameterError names one that differs (a new model is a new
        ``fit``, with new budget). ``seed`` follows :meth:`generate`'s rule, with a stream of
        its own. ``progress(stage)`` is called at each stage. ``diagnostics_["resampled"]``
        counts the calls and records the settings changed since the fit; ``release_settings_``
        records the sampler settings of the posterior it now holds.
        """
        self._check_fitted()
        current = self._release_settings()
        for name in sorted(set(current) - set(SAMPLER_SETTINGS)):
            if current[name] != self.release_settings_.get(name):
                raise ParameterError(
                    f"{name} is {current[name]!r}, but the fit used {self.release_settings_.get(name)!r}: only the "
                    f"sampler's settings {list(SAMPLER_SETTINGS)} can change without a new fit (and new budget)")
        self._check_settings()
        backend = get_backend(self.inference)
        if self.queries_ is not self.queries_.canonical and not backend.noise_aware:
            raise ParameterError(f"this fit's model ties interactions; inference={self.inference!r} does not take "
                                 "tied interactions: use a noise-aware backend")
        kept = {k: v for k, v in self.diagnostics_.items() if k in ("aim", "ties")}  # the model's, not the sampler's
        before = self.diagnostics_.get("resampled", {})
        fitted = before.get("fitted") or {k: self.release_settings_[k] for k in SAMPLER_SETTINGS}
        ties = kept.get("ties", {})
        with single_threaded_blas():  # as in fit
            self._infer(self._generate_rng(seed, stream=RESAMPLE_STREAM), progress or (lambda s: None), {},
                        near_empty_tied=bool(ties.get("near_empty_ties")),
                        coarse_slopes=bool(ties.get("coarse_slopes")))
        self.diagnostics_.update(kept)
        self.diagnostics_["resampled"] = {
            "count": int(before.get("count", 0)) + 1, "fitted": fitted,
            "changed": {k: [fitted[k], current[k]] for k in SAMPLER_SETTINGS if current[k] != fitted[k]}}
        self.release_settings_ = {**self.release_settings_, **{k: current[k] for k in SAMPLER_SETTINGS}}
        return self

    def _compile_sampler(self) -> None:
        """Start compiling generate()'s sampler for ``PRECOMPILED_M`` datasets of ``n_`` rows on a
        background thread."""
        self.network_.compile_sample_many(_generate_batch(PRECOMPILED_M, self.n_, len(self.domain_)), self.n_)

    def _moments(self) -> list[Measurement]:
        """The measured moments of numeric coarse columns (weighted measurements)."""
        return [m for m in self.measurements_ or () if m.weights is not None]

    def _l2_sensitivity(self) -> float:
        """The measurement's L2 sensitivity: the canonical queries', or with moments (normalised)
        :func:`synthinfer.napsu.coarse.squared_sensitivity` of the tables and their moments."""
        moments = self._moments()
        if not moments:
            return float(self.queries_.l2_sensitivity)
        tables = [m for m in self.measurements_ if m.weights is None]
        return math.sqrt(sum(squared_sensitivity(t.groups, [(q.cells, q.weights) for q in moments
                                                            if q.marginal == t.marginal]) for t in tables))

    def _privacy_record(self) -> dict[str, Any]:
        rec = self.ledger_.to_dict()
        rec.update({
            "mechanism": "NAPSU-MQ (Räisä et al. 2023): analytic Gaussian mechanism on canonical marginal queries"
            if self.measurements_ is None else
            "NAPSU-MQ (Räisä et al. 2023): analytic Gaussian mechanism on marginal queries, coarse marginals "
            "measured as their coarse tables" + (" with the moments of numeric columns in each coarse cell "
                                                  "(integer-scaled, zCDP)" if self._moments() else "")
            if self.aim_ is None else
            "NAPSU-MQ (Räisä et al. 2023) on AIM's measurements (McKenna et al. 2022): zCDP Gaussian and "
            "exponential mechanisms over rounds",
            "budget": {"epsilon": float(self.epsilon), "delta": float(self.delta_)},
            "l2_sensitivity": self._l2_sensitivity(),
            "sigma_dp": self.sigma_dp_,
            "n_queries": int(self.queries_.canonical.dimension),
            "seed_fixed": self.seed_fixed_,
        })
        return rec

    # ------------------------------------------------------------------------------------
    @property
    def draws_(self) -> np.ndarray:
        """Posterior draws of theta as an array ``(chains, draws, d)``."""
        self._check_fitted()
        return np.asarray(self.posterior_.posterior["theta"].values)

    def _numbers_and_draws(self, m: int, rng: np.random.Generator, midpoints, numbers) -> tuple[Any, np.ndarray]:
        """The columns decoded as numbers inside their bins (``None``: the columns the Domain gave
        as continuous, unless asked for as midpoints; checked before any sampling), and the
        ``m`` posterior draws of the datasets (without replacement unless ``m`` exceeds them)."""
        numbers = numbers_to_draw(self.domain_, midpoints, numbers)
        flat = self.draws_.reshape(-1, self.draws_.shape[-1])
        return numbers, flat[rng.choice(flat.shape[0], size=m, replace=m > flat.shape[0])]

    @uses_float64
    def generate(
        self,
        m: int,
        n: int | None = None,
        seed: SeedLike = None,
        *,
        midpoints: bool | Sequence[str] = False,
        numbers: bool | Sequence[str] | None = None,
        progress: Callable[[int, int], None] | None = None,
    ) -> list[pd.DataFrame]:
        """``m`` synthetic datasets of ``n`` rows (default: the real ``n``), decoded to categories.

        Dataset ``i`` is an exact i.i.d. sample of ``MED_theta_i`` for a posterior draw
        ``theta_i`` (Algorithm 1, last step); the draws are taken without replacement from the
        stored posterior sample (with replacement if ``m`` exceeds it). Discretised columns
        named by ``numbers`` come back as numbers drawn uniformly inside their bins (whole
        numbers for an integer column; default ``None``: the columns the Domain gave as
        continuous with private bins, ``True``: every discretised column), those named by
        ``midpoints`` as bin midpoints (Supplement F), the rest as bin labels. ``progress(done, m)``
        is called after each batch. Seeds follow the rule of
        :class:`~synthinfer.generate.Generator`: with an integer ``seed`` (this call's, else
        the generator's) every call returns the same datasets.
        """
        self._check_fitted()
        m, n = self._check_m_n(m, n)
        rng = self._generate_rng(seed)
        numbers, thetas = self._numbers_and_draws(m, rng, midpoints, numbers)
        batch = _generate_batch(m, n, len(self.domain_))
        program = self.network_.compile_sample_many(batch, n).result()  # started by fit for the defaults
        out: list[pd.DataFrame] = []
        for start in range(0, m, batch):
            chunk = thetas[start : start + batch]
            pad = batch - chunk.shape[0]
            if pad:
                chunk = np.concatenate([chunk, np.repeat(chunk[-1:], pad, axis=0)])
            codes = np.asarray(program(chunk, jax_key(rng)))
            for i in range(batch - pad):
                out.append(decode(self.domain_.with_derived(codes[i]), self.domain_, midpoints=midpoints,
                                  numbers=numbers, rng=rng))
            if progress:
                progress(len(out), m)
        return out

    @uses_float64
    def generate_stream(
        self,
        m: int,
        n: int | None = None,
        seed: SeedLike = None,
        *,
        chunk_rows: int = 1_000_000,
        midpoints: bool | Sequence[str] = False,
        numbers: bool | Sequence[str] | None = None,
    ) -> DatasetStream:
        """``m`` synthetic datasets of ``n`` rows as a :class:`~synthinfer.release.DatasetStream`:
        each dataset is drawn in chunks of at most ``chunk_rows`` rows when its chunks are
        asked for, so ``write_release(path, gen.generate_stream(m), ...)`` holds one chunk in
        memory, however large ``m * n``.

        Dataset ``i``'s chunks are i.i.d. rows of ``MED_theta_i`` for one posterior draw
        ``theta_i``, as in :meth:`generate` (whose datasets they equal in distribution, not
        draw for draw); decoding as in :meth:`generate`. Consume the stream once, in order.
        """
        self._check_fitted()
        m, n = self._check_m_n(m, n)
        if isinstance(chunk_rows, bool) or not isinstance(chunk_rows, (int, np.integer)) or chunk_rows < 1:
            raise ParameterError(f"chunk_rows must be a positive integer, got {chunk_rows!r}")
        chunk = int(min(chunk_rows, n))
        rng = self._generate_rng(seed)
        numbers, thetas = self._numbers_and_draws(m, rng, midpoints, numbers)
        program = self.network_.compile_sample_many(1, chunk)

        def dataset(theta: np.ndarray) -> Iterator[pd.DataFrame]:
            sample = program.result()
            for start in range(0, n, chunk):
                with float64():  # a consumer's thread or frame: synthinfer's float64 context is scoped
                    codes = np.asarray(sample(theta[None], jax_key(rng)))[0, : min(chunk, n - start)]
                yield decode(self.domain_.with_derived(codes), self.domain_, midpoints=midpoints, numbers=numbers,
                             rng=rng)

        return DatasetStream(m=m, n_syn=n, chunk_rows=chunk, datasets=(dataset(t) for t in thetas))

    def release_record(self) -> ReleaseRecord:
        """The release's record of this fit: ``release_settings_`` plus the fit's public facts
        (the MST-selected marginals, ``sigma_dp``, the reference categories), the Domain, the
        measured marginals, the ledger, the posterior draws and :meth:`diagnostics_summary`."""
        self._check_fitted()
        settings = self.release_settings_ | {
            "selected_marginals": [list(m.columns) for m in self.selected_marginals_],
            "sigma_dp": self.sigma_dp_,
            "reference_categories": {c: self.domain_[c].categories[k] for c, k in self.queries_.reference.items()},
        }
        return ReleaseRecord(
            mechanism=self.mechanism, settings=settings, domain=self.domain_,
            marginals=[list(m.columns) for m in self.marginals_], ledger=self.ledger_, n=self.n_,
            seed_fixed=self.seed_fixed_, posterior=self.posterior_, diagnostics=self.diagnostics_summary(),
        )

    def diagnostics_summary(self) -> dict[str, Any]:
        """``diagnostics_`` for a release: without per-parameter arrays (R-hat and ESS per
        parameter, the optimiser's attempts; the posterior holds the draws) and without wall-clock
        times (they describe the machine, and a computation's time on private data is not
        covered by the DP guarantee)."""
        self._check_fitted()
        drop = {"rhat", "ess_bulk", "attempts", "seconds", "timings"}
        return {
            k: {kk: vv for kk, vv in v.items() if kk not in drop} if isinstance(v, dict) else v
            for k, v in self.diagnostics_.items() if k not in drop
        }

    # ------------------------------------------------------------------------------------
    def _prior_text(self) -> str:
        """The prior in words, for :meth:`summary`."""
        if self.interaction_sd is not None:
            normal, table = (f"N(0, {self.prior_sd:g}^2) on main effects and N(0, {self.interaction_sd:g}^2) "
                             "on interactions", "each column's categories")
        else:
            normal, table = f"N(0, {self.prior_sd:g}^2 I)", "each marginal's cells"
        if self.cell_prior:
            return f"{normal} x cell prior (Dirichlet({self.cell_prior:g}) on {table})"
        return normal + ("" if self.interaction_sd is not None else " (the paper's)")

    @staticmethod
    def _ties_text(t: dict) -> str:
        parts = []
        if t.get("coarse_ties") or t.get("coarse_zero"):
            parts.append(f"{t['coarse_interactions']} interactions of coarse columns tied in {t['coarse_ties']} groups"
                         f" and {t['coarse_zero']} fixed at 0 (their group holds the reference)")
        if t.get("coarse_slopes"):
            parts.append(f"{t['coarse_slopes']} slopes of numeric coarse columns (linear within their groups)")
        if t.get("near_empty_slopes"):
            parts.append(f"{t['near_empty_slopes']} slopes of near-empty coarse cells dropped "
                         f"(below {t['slopes_below']:g} noise sd)")
        if t.get("linear_by_linear"):
            parts.append(f"{t['linear_by_linear']} linear-by-linear trends of pairs of numeric columns "
                         f"(under the main effects' prior)")
        if t.get("spline_parameters"):
            parts.append(f"numeric columns' main effects as penalised splines ({t['spline_parameters']} parameters)")
        if t.get("tie_below") is not None:
            near, groups = t.get("near_empty_interactions", t["tied_interactions"]), t.get("near_empty_ties", t["ties"])
            parts.append(f"{near} near-empty interactions (below {t['tie_below']:g} noise sd) tied in {groups} groups")
        return "; ".join(parts)

    def summary(self) -> str:
        """A short text report of the fit: queries, privacy spend and inference diagnostics."""
        self._check_fitted()
        d = self.diagnostics_
        lines = [
            f"NAPSU-MQ fit: n = {self.n_}, {len(self.marginals_)} marginals "
            f"({len(self.selected_marginals_)} selected by {'AIM' if 'aim' in d else 'MST'}), "
            f"{self.queries_.canonical.dimension} canonical queries" + (
                "" if "ties" not in d else f"; {d['ties']['parameters']} parameters: " + self._ties_text(d["ties"])),
            f"privacy: epsilon = {self.spent_[0]:.4g}, delta = {self.spent_[1]:.3g} spent; " + (
                f"sigma_DP = {self.sigma_dp_:.4g}" if "aim" not in d else
                f"AIM: {d['aim']['rounds']} rounds, {d['aim']['measurements']} measurements, sigma "
                f"{min(d['aim']['sigma']):.4g}-{max(d['aim']['sigma']):.4g}"),
            f"inference: {self.inference}" + ("" if self.noise_aware else " (NOT noise-aware: ablation)")
            + "; prior " + self._prior_text(),
        ]
        for name in private_bin_columns(self.domain_):
            b = self.domain_[name].binning
            spent = sum(c.epsilon for c in self.ledger_.charges if c.name == f"private bin edges: {name}")
            lines.append(f"  private bin edges: {name}, {b.n_bins} bins at DP quantiles (epsilon {spent:.3g}); "
                         "values drawn inside their bins")
        if "resampled" in d:
            rs = d["resampled"]
            changed = ", ".join(f"{k} {a!r} -> {b!r}" for k, (a, b) in rs["changed"].items())
            lines.append(f"  posterior sampled again from the fit's measurements ({rs['count']} time"
                         f"{'s' if rs['count'] > 1 else ''}; post-processing, no privacy cost)"
                         + (f": {changed}" if changed else ""))
        if "auto" in d:
            lines.append(f"  sampler chosen: {d['auto']['sampler']}: {d['auto']['reason']}")
        if "laplace" in d:
            la = d["laplace"]
            gap = ("" if "axes_gap_over_1_nat" not in la else
                   f"; far from Gaussian along {la['axes_gap_over_1_nat']} axes (gap up to "
                   f"{la['max_log_density_gap']:.3g} nats at 2 sd)")
            lines.append(f"  Laplace: converged={la['converged']}, restarts={la['restarts']}, "
                         f"{la['gradient_evaluations']} gradient evaluations, {la['seconds']:.2f} s{gap}")
        if "importance" in d:
            im = d["importance"]
            lines.append(f"  importance sampling: Pareto k-hat {im['k_hat']:.2f} (threshold {im['k_hat_threshold']:.2f}), "
                         f"PSIS ESS {im['ess']:.0f}, smallest ESS of a mean {im['ess_min']:.0f}, "
                         f"{im['num_proposals']} proposal draws")
            lines.append(f"  sampler used: {im['sampler']}: {im['reason']}")
        if "nuts" in d:
            nu = d["nuts"]
            rhat = "n/a" if nu["rhat_max"] is None else f"{nu['rhat_max']:.4f}"  # None: one chain, or undefined
            limit = nu.get("rhat_limit_max")  # absent from fits saved before the limit followed the parameters
            if limit is not None and nu["rhat_max"] is not None and limit > nu["rhat_threshold"]:
                rhat += f" (limit {limit:.3f} for {self.network_.dimension} parameters)"
            ess = "n/a" if nu["ess_bulk_min"] is None else f"{nu['ess_bulk_min']:.0f}"
            draws = d.get("draws")  # absent from fits saved before the draws followed the model
            passes = nu.get("passes", 1)  # absent from fits saved before NUTS ran longer when needed
            # absent from fits saved before further passes were sized: whole passes then
            sampled = None if draws is None else nu.get("draws_per_chain", draws["num_samples"] * passes)
            lines.append(f"  NUTS: " + ("" if draws is None else
                                        f"{self.n_chains} x ({draws['num_warmup']} + {sampled}"
                                        + (f" in {passes} passes, run longer until converged" if passes > 1 else "")
                                        + f") draws ({draws['why']}), ")
                         + f"max R-hat {rhat}, min bulk ESS {ess}, "
                         f"{nu['divergences']} divergences, {nu['gradient_evaluations']} gradient evaluations")
            for run in nu.get("earlier_runs", []):  # absent from fits saved before NUTS sampled again
                lines.append(f"  NUTS at target acceptance {run['target_accept']} set aside for its "
                             f"{run['divergences']} divergent transitions: sampled again with smaller steps "
                             f"(the line above is the run at {nu['target_accept']})")
            if nu.get("plateau_jump_parameters"):  # absent from fits saved before plateau jumps
                jumped = nu["plateau_jump_parameters"]
                lines.append(f"  jumps between a bulk and a second region on {jumped} parameters, "
                             f"{nu['plateau_jump_acceptance']:.0%} accepted"
                             + (f"; the {nu['draws_set_aside']} draws per chain before some were added set aside "
                                "as warmup" if nu.get("draws_set_aside") else ""))
        return "\n".join(lines)

    def save(self, path: str | Path) -> None:
        """Write the fitted generator to one ``.npz`` file, atomically
        (:func:`synthinfer.napsu.io.save`: no rows of the real data, no exact counts, never the
        seed's value)."""
        from synthinfer.napsu import io

        self._check_fitted()
        io.save(self, path)

    @classmethod
    def load(cls, path: str | Path) -> NapsuMQ:
        """Read a generator written by :meth:`save` (it can generate, not refit)."""
        from synthinfer.napsu import io

        return io.load(path, cls)

    def __repr__(self) -> str:
        ms = ", ".join(str(m) for m in as_marginals(self.marginals))
        return f"NapsuMQ(marginals=[{ms}], epsilon={self.epsilon}, delta={self.delta}, inference={self.inference!r})"


def _contained(m: Marginal, others: Sequence[Marginal]) -> bool:
    return any(set(m.columns) <= set(o.columns) for o in others)


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, bool)


def _model_marginals(marginals, domain: Domain) -> list[Marginal]:
    """``marginals`` on the model's columns: each derived column replaced by its source (a
    derived column's counts follow from its source's), repeats within a marginal dropped."""
    out = []
    for m in as_marginals(marginals):
        domain.check_columns(m.columns)
        out.append(Marginal(domain.source_columns(m.columns)))
    return out


def _source_columns(spec: Any, domain: Domain) -> Any:
    """A workload entry with each derived column replaced by its source, unvalidated (AIM checks
    and names the workload's errors); a user's own repeated column is left for AIM to report."""
    cols = (spec,) if isinstance(spec, str) else tuple(spec.columns) if isinstance(spec, Marginal) else tuple(spec)
    return cols if len(set(cols)) < len(cols) else domain.source_columns(cols)


__all__ = ["NapsuMQ"]
