"""AIM selection and measurement for NAPSU-MQ (McKenna, Mullins, Sheldon & Miklau 2022).

AIM ("an adaptive and iterative mechanism for differentially private synthetic data", arXiv
2201.12677, Algorithm 2) measures marginals over rounds: each round it picks, with the
exponential mechanism, the candidate marginal that the current estimate fits worst relative to
its noise, measures it with the Gaussian mechanism, and re-estimates. :func:`select_aim` is the
data holder's part of it: it returns every noisy measurement (:class:`~synthinfer.napsu.
measurements.Measurement`, each with its own noise variance, repeats allowed), which the
noise-aware likelihood then conditions on. Its estimates between rounds are private-pgm's
point estimate (:class:`PGMEstimate`), used only to choose what to measure.

**Neighbourhood and sensitivities.** synthinfer's neighbouring datasets differ by the
*substitution* of one row (the paper uses add/remove). Substituting a row moves one unit of
count from one cell of a marginal to another, so

* a marginal's count vector has L2 sensitivity ``sqrt(2)`` (:data:`MARGINAL_L2_SENSITIVITY`;
  add/remove: 1), and the Gaussian mechanism at noise ``sigma`` is ``1 / sigma^2``-zCDP;
* its L1 distance to any fixed vector changes by at most 2, so the quality score below has
  sensitivity ``2 w_r`` (add/remove: ``w_r``), and the exponential mechanism over candidates
  ``C_t`` uses ``Delta = 2 max_{r in C_t} w_r``.

**Candidates and quality.** The workload is a list of marginals ``s`` with weights ``c_s``; the
candidates are its downward closure (every non-empty subset of a workload marginal), each
weighted by the workload marginals that contain it, ``w_r = sum_{s ⊇ r} c_s`` (with the all-2-way
workload over ``k`` columns: 1 for a pair, ``k - 1`` for a column), except that a 1-way
candidate the workload does not name weighs at most as much as the heaviest candidate of two
or more columns (1 for a pair of the all-2-way workload). Why the cap: the exponential
mechanism's sensitivity is ``2 max_r w_r``, so uncapped 1-way weights of ``k - 1`` divide the
selection's signal among pairs by ``k - 1``; every column's 1-way marginal is measured before
the rounds, and the rounds are for associations. On 5,000 rows or fewer that left AIM choosing
pairs almost at random (Framingham, 16 columns, epsilon 1: the deterministic pair
(currentSmoker, cigsPerDay) never measured, total variation 0.50 on it in every seed;
``benchmarks/napsu/aim_candidates.py``). The paper weighs by overlap, ``sum_s c_s |r ∩ s|``;
on the 15-column Adult table at epsilon 1 and 4 (3 seeds each) that choice gave a larger
model and a worse PGM estimate than the (uncapped) downward-closure weights (mean total
variation distance over all 2-way marginals 0.033 against 0.028 at epsilon 1). The quality of
candidate ``r`` in round ``t`` is

    q_r = w_r (||M_r(D) - M_r(p_hat_{t-1})||_1 - sqrt(2/pi) sigma_t n_r),

``n_r`` the number of cells of ``r``: the L1 error of the current estimate minus the error the
new measurement's own noise would have (``E|N(0, sigma^2)| = sqrt(2/pi) sigma``).

**Accounting (rho-zCDP).** The ``(epsilon, delta)`` budget is converted to ``rho`` up front
(:func:`synthinfer.privacy.zcdp.zcdp_rho`, the tight conversion of Canonne, Kamath & Steinke
2020). With ``T`` the rounds bound (``16 k`` by default) and ``alpha = 0.9``
(:data:`MEASURE_SHARE`), a round costs ``rho / T``: the Gaussian mechanism
``1 / sigma_t^2 = alpha rho / T`` and the exponential mechanism ``epsilon_t^2 / 8 = (1 - alpha)
rho / T`` (Cesar & Rogers 2021). The 1-way marginals of every column and the analyst's required
marginals are measured first at ``sigma_0``, or, with ``required_share = f > 0``, the ``k``
required marginals (of two or more columns) get ``f rho`` of their own up front, each at
``sigma_req = sqrt(k / (f rho))`` (``1 / sigma^2`` per marginal), and the rounds, the 1-way
marginals first, share the other ``(1 - f) rho`` as above. AIM's own design measures the
analyst's marginals at the coarsest noise of the run (``sigma_0``, e.g. 136 counts on Adult
at epsilon 1, ``T = 240``): with ``f = 1/2`` and ten of them, ``sigma_req`` is about 37.
When the estimate of the marginal just measured moved by less than its expected noise
(``sqrt(2/pi) sigma_t n_r`` in L1), the mechanism anneals: ``sigma`` halves and ``epsilon``
doubles (four times the cost per round). When less than two rounds' cost is left, the last
round spends all of it. The whole run is charged to the ledger
once, as ``(epsilon, delta)``, with ``rho`` in the charge's details.

**Model size.** A candidate is eligible in round ``t`` only if the junction tree of the
measured marginals plus it has at most ``(rho_used / rho) max_model_cells`` cells in its
clique tables, and no clique table over ``max_clique_cells`` (candidates that leave the tree as
it is are always eligible), so the model grows with the budget spent, up to the caps (defaults:
:data:`DEFAULT_MAX_MODEL_CELLS`, and :data:`DEFAULT_MAX_CLIQUE_CELLS` raised to the largest
clique of the required marginals, which are measured whatever their size), and only if the
noise-aware likelihood of the measured scopes plus it costs at most ``max_likelihood_flops``
per evaluation (:func:`synthinfer.napsu.structured.likelihood_flops`, the message-passing
plan's estimate; this one applies to candidates inside the tree too, whose blocks change the
work; default :data:`DEFAULT_MAX_LIKELIHOOD_FLOPS`, sized for the default sampler's five
minutes, or twice the required and 1-way marginals' cost where that is larger). All depend
only on what was measured, so eligibility is public.

**Budget too small.** The first measurements have noise ``sigma_0 = sqrt(T / (alpha rho))``.
When ``sigma_0`` exceeds ``n`` the first measurements (every column's 1-way marginal) are
noise, so :func:`select_aim` refuses before spending and names the smallest epsilon (at the
given delta, rounded up to 3 significant digits) with ``sigma_0 <= n``, i.e.
``rho >= T / (alpha n^2)``. The row count is public under substitution of one row.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import combinations

import numpy as np

from synthinfer.data import Domain, Marginal, as_marginals
from synthinfer.data.counting import MarginalCounter, as_counter
from synthinfer.errors import ArgumentTypeError, DomainError, ParameterError
from synthinfer.napsu.junction_tree import JunctionTree
from synthinfer.napsu.measurements import INTEGER_ROUNDING_VARIANCE, Measurement, check_measurements
from synthinfer.napsu.structured import likelihood_flops
from synthinfer.privacy import PrivacyBudget, PrivacyLedger
from synthinfer.privacy.samplers import discrete_gaussian, discrete_gaussian_variance, exponential_mechanism
from synthinfer.privacy.zcdp import exponential_rho, gaussian_rho, zcdp_delta, zcdp_epsilon, zcdp_rho

#: L2 sensitivity of one marginal's count vector under substitution of one row.
MARGINAL_L2_SENSITIVITY = math.sqrt(2.0)
#: Sensitivity of a quality score per unit of its weight under substitution of one row (the L1
#: distance of the marginal's counts to a fixed vector moves by at most 2).
QUALITY_SENSITIVITY_PER_WEIGHT = 2.0
#: Share of each round's rho spent on the Gaussian measurement (the rest on the selection).
MEASURE_SHARE = 0.9
#: NapsuMQ's default share of rho for measuring the required marginals (the analyst's) before
#: the rounds (``select_aim``'s ``required_share``, whose own default, 0, is AIM as published).
#: On the full Adult table at epsilon 1 (docs/napsu-sampler.md, "AIM's model, looked at more
#: closely") half the budget gave the analyst's marginals noise sd ~37 instead of AIM's initial
#: ~136 and narrowed the coverage study's 95% intervals from 4.7 to 2.1 times the real ones at
#: the same coverage; every interaction-prior study was run with it.
DEFAULT_REQUIRED_SHARE = 0.5
#: Default rounds bound ``T`` per column of the domain (the paper's ``T = 16 d``).
ROUNDS_PER_COLUMN = 16
#: Default caps on the junction tree of the measured marginals: its clique tables' total cells
#: and the largest table. The reference point is the 15-column Adult model MST builds around the
#: paper's 10 marginals: ~1,500 table cells, ~1,400 parameters and one 656-cell clique
#: (native-country x education-num). A 1,000-cell clique cap admits that clique; a 4,000-cell
#: total leaves room for about two and a half such models. On that table AIM then stops at
#: 700-900 parameters (canonical queries) at epsilon 1-4 with the all-2-way workload. (The
#: paper's cap, 80 MB of float64 tables, i.e. 10^7 cells, is sized for a point estimate.) The
#: likelihood's own cost is capped apart (:data:`DEFAULT_MAX_LIKELIHOOD_FLOPS`).
DEFAULT_MAX_MODEL_CELLS = 4_000
DEFAULT_MAX_CLIQUE_CELLS = 1_000
#: Default cap on the noise-aware likelihood's work per evaluation (the message-passing plan's
#: flop estimate, :func:`synthinfer.napsu.structured.likelihood_flops`), which sets the cost of
#: every gradient of the Laplace fit and of NUTS, whose default run takes ~90,000 of them. On the
#: full Adult table at epsilon 1, uncapped, AIM's models ranged over 1e6-1.3e7 flops and 2-10 ms a
#: gradient (one core); at 3e6, 2.3-4.5 ms, which keeps the default fit within five minutes on two
#: cores, for a little utility (mean TV of the 2-way marginals 0.034 against 0.032; the worst
#: pair's 0.19 against 0.13: benchmarks/napsu/likelihood_cap.py, docs/structured-likelihood.md).
#: Raised to twice the required and 1-way marginals' own cost where that is larger, so that
#: selection has room.
DEFAULT_MAX_LIKELIHOOD_FLOPS = 3_000_000
#: Mirror-descent iterations per PGM re-estimate (warm-started from the previous round's).
DEFAULT_ESTIMATION_ITERS = 300

_NOISE_L1 = math.sqrt(2.0 / math.pi)  # E|N(0, 1)|
_CHARGE_NAME = "napsu-mq: AIM"


# ------------------------------------------------------------------------------------------
# The PGM estimate between rounds
# ------------------------------------------------------------------------------------------


def _lse(x: np.ndarray, axes: tuple[int, ...]) -> np.ndarray:
    """log-sum-exp over ``axes``, keeping them as size-1 axes."""
    if not axes:
        return x
    m = np.max(x, axis=axes, keepdims=True)
    m = np.where(np.isfinite(m), m, 0.0)
    return np.log(np.sum(np.exp(x - m), axis=axes, keepdims=True)) + m


class _Structure:
    """The junction tree of a set of scopes, with what message passing needs precomputed.

    Scopes and cliques are tuples of ascending column indices, and every table has its axes in
    that order, so a separator's axes appear in the same order in both of its cliques.
    """

    def __init__(self, domain: Domain, scopes: Sequence[tuple[int, ...]]):
        names = domain.names
        jt = JunctionTree.build(domain, [[names[i] for i in s] for s in scopes])
        self.domain, self.tree = domain, jt
        self.sizes = domain.shape
        k = len(jt.cliques)
        self.shapes = [jt.shape(c) for c in range(k)]
        self.root = list(range(k))
        for c, p in enumerate(jt.parent):
            if p >= 0:
                self.root[c] = self.root[p]  # parents come before children
        # message c -> parent: sum out the axes of c not in the separator, broadcast into the parent
        self.up_axes = [self.sum_axes(jt.separators[c], c) for c in range(k)]
        self.sep_in_parent = [self.broadcast(jt.separators[c], p) if p >= 0 else () for c, p in enumerate(jt.parent)]
        self.down_axes = [self.sum_axes(jt.separators[c], p) if p >= 0 else () for c, p in enumerate(jt.parent)]
        self.sep_in_child = [self.broadcast(jt.separators[c], c) for c in range(k)]
        self.home = {s: self.clique_of(s) for s in scopes}
        self.scope_sum_axes = {s: self.sum_axes(s, c) for s, c in self.home.items()}
        self.scope_broadcast = {s: self.broadcast(s, c) for s, c in self.home.items()}

    def clique_of(self, scope: tuple[int, ...]) -> int | None:
        """The smallest clique containing ``scope`` (None when no clique does)."""
        best, size = None, math.inf
        for c, cl in enumerate(self.tree.cliques):
            if set(scope) <= set(cl):
                cells = math.prod(self.shapes[c])
                if cells < size:
                    best, size = c, cells
        return best

    def broadcast(self, scope: tuple[int, ...], clique: int) -> tuple[int, ...]:
        """Shape that broadcasts a table over ``scope`` into ``clique``'s table."""
        return tuple(self.sizes[v] if v in scope else 1 for v in self.tree.cliques[clique])

    def sum_axes(self, scope: tuple[int, ...], clique: int) -> tuple[int, ...]:
        """Axes of ``clique``'s table to sum for the marginal on ``scope``."""
        return tuple(a for a, v in enumerate(self.tree.cliques[clique]) if v not in scope)

    def calibrate(self, potentials: list[np.ndarray]) -> list[np.ndarray]:
        """Clique marginals (probabilities) of ``p ∝ exp(sum_c potentials[c])``: sum-product
        message passing in log space, collect (leaves to roots) then distribute."""
        jt = self.tree
        k = len(jt.cliques)
        belief = [np.array(p, dtype=np.float64, copy=True) for p in potentials]
        up: list[np.ndarray | None] = [None] * k
        for c in reversed(range(k)):  # children come after their parents
            p = jt.parent[c]
            if p >= 0:
                up[c] = _lse(belief[c], self.up_axes[c]).reshape(self.sep_in_parent[c])
                belief[p] = belief[p] + up[c]
        for c in range(k):
            p = jt.parent[c]
            if p >= 0:
                down = _lse(belief[p] - up[c], self.down_axes[c]).reshape(self.sep_in_child[c])
                belief[c] = belief[c] + down
        log_z = {r: _lse(belief[r], tuple(range(belief[r].ndim))).item() for r in set(self.root)}
        return [np.exp(belief[c] - log_z[self.root[c]]) for c in range(k)]


class PGMEstimate:
    """A point estimate of the data distribution from noisy marginals (private-pgm's).

    The graphical model ``p(x) ∝ exp(sum_r theta_r(x_r))`` over the measured scopes ``r`` whose
    marginals minimise ``L(mu) = sum_m ||mu_{r_m}[cells_m] - y_m||^2 / (2 sigma_m^2)`` (counts
    ``mu = N p`` for a known total ``N``), found by entropic mirror descent with an Armijo step
    (McKenna, Sheldon & Miklau 2019, Algorithm 1): ``theta <- theta - a grad_mu L(mu(theta))``,
    marginals by exact message passing on the junction tree of the scopes.

    Written in NumPy rather than with ``mbi``'s estimators: those compile a JAX program for
    each new set of measured scopes, seconds per program, and AIM changes the scopes every
    round; the NumPy passes cost milliseconds per iteration on tables of a few thousand cells
    and run the same in float32 and float64 JAX sessions. Use :func:`estimate_pgm` to fit one.

    Attributes
    ----------
    domain : Domain
    total : float
        ``N``, the number of rows the counts refer to.
    scopes : tuple of Marginal
        The distinct measured scopes (columns in domain order).
    junction_tree : JunctionTree
    loss : float
        ``L`` at the estimate.
    step : float
        The last Armijo step size (a warm start continues from it).
    """

    def __init__(self, domain: Domain, structure: _Structure, theta: dict[tuple[int, ...], np.ndarray],
                 total: float, loss: float, marginals: list[np.ndarray], step: float):
        self.domain = domain
        self.step = float(step)
        self.total = float(total)
        self.loss = float(loss)
        self._structure = structure
        self._theta = theta
        self._marginals = marginals
        self._cache: dict[tuple[int, ...], np.ndarray] = {}
        names = domain.names
        self.scopes = tuple(Marginal(tuple(names[i] for i in s)) for s in theta)

    @property
    def junction_tree(self) -> JunctionTree:
        return self._structure.tree

    def project(self, columns: Sequence[str] | Marginal) -> np.ndarray:
        """Estimated counts of the marginal on ``columns``, flat in C order over ``columns``.

        Inside a clique: that clique's table summed. Otherwise from the smallest subtree of the
        junction forest that covers the columns, whose joint is ``prod_C P_C / prod_S P_S``
        (cliques and separators of a connected subtree of a calibrated junction tree; separate
        components are independent).
        """
        cols = columns.columns if isinstance(columns, Marginal) else tuple(columns)
        idx = [self.domain.index(c) for c in cols]
        key = tuple(sorted(idx))
        table = self._cache.get(key)
        if table is None:
            table = self._sorted_marginal(key) * self.total
            self._cache[key] = table
        return np.transpose(table, np.argsort(np.argsort(idx))).flatten()  # a copy: the cache stays intact

    def _sorted_marginal(self, key: tuple[int, ...]) -> np.ndarray:
        st = self._structure
        home = st.clique_of(key)
        if home is not None:
            return np.sum(self._marginals[home], axis=st.sum_axes(key, home))
        jt = st.tree
        depth = [0] * len(jt.cliques)
        for c, p in enumerate(jt.parent):
            depth[c] = depth[p] + 1 if p >= 0 else 0
        chosen: dict[int, list[int]] = {}  # component root -> cliques that must be joined
        for v in key:
            c = next(c for c, cl in enumerate(jt.cliques) if v in cl)
            chosen.setdefault(st.root[c], []).append(c)
        nodes: set[int] = set()
        for group in chosen.values():
            # union of the paths from every chosen clique up to their lowest common ancestor
            paths = []
            for c in group:
                path = [c]
                while jt.parent[path[-1]] >= 0:
                    path.append(jt.parent[path[-1]])
                paths.append(path)
            common = set(paths[0]).intersection(*paths[1:])
            top = max(common, key=lambda c: depth[c])
            for path in paths:
                nodes.update(path[: path.index(top) + 1])
        operands: list = []
        for c in sorted(nodes):
            operands += [self._marginals[c], list(jt.cliques[c])]
            p = jt.parent[c]
            if p >= 0 and p in nodes and jt.separators[c]:
                sep = jt.separators[c]
                ps = np.sum(self._marginals[c], axis=st.sum_axes(sep, c))
                operands += [np.divide(1.0, ps, out=np.zeros_like(ps), where=ps > 0), list(sep)]
        return np.einsum(*operands, list(key), optimize="greedy")


def estimate_pgm(
    domain: Domain,
    measurements: Sequence[Measurement],
    total: float,
    *,
    iters: int = DEFAULT_ESTIMATION_ITERS,
    warm_start: PGMEstimate | None = None,
) -> PGMEstimate:
    """Fit a :class:`PGMEstimate` to noisy marginal measurements (post-processing only).

    The squared-error loss of all measurements of one scope is one quadratic per cell:
    ``sum_m (mu - y_m)^2 / (2 v_m) = P (mu - y_bar)^2 / 2 + const`` with ``P = sum_m 1 / v_m``
    and ``y_bar`` the precision-weighted mean, so repeated measurements cost nothing extra.
    ``warm_start`` reuses a previous estimate's parameters for the scopes it had (new scopes
    start at 0). The first step size is ``2 / (L N)``, ``L`` the loss gradient's Lipschitz
    bound ``max_C sum_{r in C} max(P_r) |C| / |r|`` over the cliques ``C`` the scopes ``r``
    are assigned to; the Armijo rule then adapts it.
    """
    measurements = check_measurements(measurements, domain)
    if not (isinstance(iters, (int, np.integer)) and not isinstance(iters, bool) and iters >= 0):
        raise ParameterError(f"iters must be an integer >= 0, got {iters!r}")
    if not (math.isfinite(total) and total > 0):
        raise ParameterError(f"total must be a positive number, got {total!r}")
    precision: dict[tuple[int, ...], np.ndarray] = {}
    weighted: dict[tuple[int, ...], np.ndarray] = {}
    for m in measurements:
        idx = [domain.index(c) for c in m.marginal.columns]
        shape = tuple(domain.shape[i] for i in idx)
        p = np.zeros(math.prod(shape))
        wy = np.zeros(math.prod(shape))
        v = max(m.variance, INTEGER_ROUNDING_VARIANCE)  # as the noise-aware likelihood floors it
        p[m.cells] = 1.0 / v
        wy[m.cells] = m.values / v
        perm = np.argsort(idx)  # to axes in ascending column order
        key = tuple(sorted(idx))
        p = np.transpose(p.reshape(shape), perm)
        wy = np.transpose(wy.reshape(shape), perm)
        precision[key] = precision.get(key, 0.0) + p
        weighted[key] = weighted.get(key, 0.0) + wy
    scopes = list(precision)
    target = {s: np.divide(weighted[s], precision[s], out=np.zeros_like(weighted[s]), where=precision[s] > 0)
              for s in scopes}
    st = _Structure(domain, scopes)
    theta = {s: np.zeros(precision[s].shape) for s in scopes}
    if warm_start is not None:
        for s, t in warm_start._theta.items():
            if s in theta:
                theta[s] = t.copy()

    per_clique: dict[int, float] = {}
    for s in scopes:
        c = st.home[s]
        per_clique[c] = per_clique.get(c, 0.0) + float(precision[s].max()) * math.prod(st.shapes[c]) / precision[s].size
    lipschitz = max(per_clique.values())

    def marginals_of(th: dict[tuple[int, ...], np.ndarray]) -> list[np.ndarray]:
        pots: list = [0.0] * len(st.shapes)
        for s, t in th.items():
            pots[st.home[s]] = pots[st.home[s]] + t.reshape(st.scope_broadcast[s])
        return st.calibrate([np.broadcast_to(p, shape) for p, shape in zip(pots, st.shapes)])

    def loss_and_grad(cliques: list[np.ndarray]) -> tuple[float, dict, dict]:
        mu, grad, loss = {}, {}, 0.0
        for s in scopes:
            mu[s] = total * cliques[st.home[s]].sum(axis=st.scope_sum_axes[s])
            r = mu[s] - target[s]
            grad[s] = precision[s] * r
            loss += 0.5 * float(np.sum(grad[s] * r))
        return loss, mu, grad

    cliques = marginals_of(theta)
    loss, mu, grad = loss_and_grad(cliques)
    # The Armijo step of a warm start carries over: the loss changed by one measurement.
    step = 2.0 / (lipschitz * total) if warm_start is None else warm_start.step
    for _ in range(int(iters)):
        theta2 = {s: theta[s] - step * grad[s] for s in scopes}
        cliques2 = marginals_of(theta2)
        loss2, mu2, grad2 = loss_and_grad(cliques2)
        # Armijo: keep the step when the loss falls by at least half of its first-order
        # prediction <grad, mu - mu2>; otherwise halve it.
        predicted = sum(float(np.sum(grad[s] * (mu[s] - mu2[s]))) for s in scopes)
        if loss - loss2 >= 0.5 * predicted:
            theta, cliques, loss, mu, grad = theta2, cliques2, loss2, mu2, grad2
            step *= 1.2
        else:
            step *= 0.5
    return PGMEstimate(domain, st, theta, total, loss, cliques, step)


# ------------------------------------------------------------------------------------------
# Workload, candidates, quality
# ------------------------------------------------------------------------------------------


def two_way_workload(domain: Domain) -> tuple[Marginal, ...]:
    """All 2-way marginals of ``domain`` (AIM's default workload), in column order."""
    names = domain.names
    return tuple(Marginal((a, b)) for a, b in combinations(names, 2))


def _canonical(domain: Domain, m: Marginal) -> Marginal:
    """The marginal with its columns in domain order (AIM treats marginals as column sets)."""
    return Marginal(tuple(sorted(m.columns, key=domain.index)))


def _workload(domain: Domain, workload, weights) -> tuple[tuple[Marginal, ...], np.ndarray]:
    try:  # an empty marginal, a repeated or an unknown column: say where it came from
        marginals = two_way_workload(domain) if workload is None else as_marginals(workload, "workload")
        for m in marginals:
            domain.check_columns(m.columns)
    except DomainError as e:
        raise type(e)(f"workload: {e}") from None
    if not marginals:
        raise ParameterError("workload: AIM needs at least one workload marginal")
    out, seen = [], set()
    for m in marginals:
        key = frozenset(m.columns)
        if key in seen:
            raise ParameterError(f"workload: marginal {m} is listed twice (up to column order)")
        seen.add(key)
        out.append(_canonical(domain, m))
    if weights is None:
        w = np.ones(len(out))
    else:
        w = np.asarray(weights, dtype=np.float64).ravel()
        if w.shape != (len(out),) or not np.all(np.isfinite(w)) or np.any(w <= 0):
            raise ParameterError(f"weights: need {len(out)} finite positive workload weights, got {weights!r}")
    return tuple(out), w


def candidate_weights(workload: Sequence[Marginal], weights: Sequence[float]) -> dict[Marginal, float]:
    """AIM's candidates and their weights: every non-empty subset ``r`` of a workload marginal
    (columns in the workload's order), weighted ``w_r = sum_{s ⊇ r} c_s`` over the workload
    marginals ``s`` that contain it, except that a 1-way candidate the workload does not name
    itself weighs at most as much as the heaviest candidate of two or more columns (module
    docstring: the exponential mechanism's sensitivity is set by the heaviest candidate)."""
    out: dict[Marginal, float] = {}
    for s, c in zip(workload, weights):
        for k in range(1, len(s.columns) + 1):
            for sub in combinations(s.columns, k):
                r = Marginal(sub)
                out[r] = out.get(r, 0.0) + float(c)
    named = {frozenset(s.columns) for s in workload}
    top = max((w for r, w in out.items() if len(r.columns) > 1), default=None)
    if top is not None:
        for r, w in out.items():
            if len(r.columns) == 1 and frozenset(r.columns) not in named:
                out[r] = min(w, top)
    return out


def quality_scores(
    counts: Sequence[np.ndarray], estimated: Sequence[np.ndarray], weights: Sequence[float], sigma: float
) -> np.ndarray:
    """AIM's quality ``q_r = w_r (||M_r(D) - M_r(p_hat)||_1 - sqrt(2/pi) sigma n_r)`` per candidate.

    ``counts`` are the true marginal counts, ``estimated`` the current estimate's. Under
    substitution of one row each ``q_r`` changes by at most ``2 w_r`` (module docstring).
    """
    return np.array([
        w * (float(np.abs(x - e).sum()) - _NOISE_L1 * sigma * x.size) for x, e, w in zip(counts, estimated, weights)
    ])


# ------------------------------------------------------------------------------------------
# The mechanism
# ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class AIMRound:
    """One selection round: what was measured, at which noise and selection epsilon.

    ``annealed`` is True when the estimate of ``marginal`` moved by less than the new
    measurement's expected noise, so that the next round halves ``sigma`` and doubles
    ``epsilon``. ``candidates`` counts the eligible candidates, ``model_cells`` the junction
    tree's cells after the round, ``rho_used`` the zCDP spent up to and including it.
    """

    round: int
    marginal: Marginal
    sigma: float
    epsilon: float
    annealed: bool
    candidates: int
    model_cells: int
    rho_used: float


@dataclass(frozen=True)
class AIMResult:
    """What :func:`select_aim` releases (all of it is differentially private).

    Attributes
    ----------
    measurements : tuple of Measurement
        Every measurement in the order taken: the 1-way marginals, the required marginals,
        then one per round (a marginal may appear more than once, at different variances).
    marginals : tuple of Marginal
        The distinct measured marginals, in order of first measurement: the model's scopes.
    rounds : tuple of AIMRound
    rho : float
        zCDP spent, at most ``zcdp_rho(epsilon, delta)``.
    epsilon, delta : float
        What was charged to the ledger.
    workload : tuple of Marginal
    weights : tuple of float
        The workload's weights.
    max_model_cells, max_clique_cells, model_cells : int
        The caps and the final junction tree's clique-table cells.
    max_likelihood_flops, likelihood_flops : int
        The cap on the noise-aware likelihood's work and that work for the measured scopes.
    required_share : float
        The share of rho the required marginals were measured with before the rounds (``0``:
        with the 1-way marginals at ``sigma_0``).
    estimate : PGMEstimate
        The last round's point estimate (post-processing of the measurements).
    """

    measurements: tuple[Measurement, ...]
    marginals: tuple[Marginal, ...]
    rounds: tuple[AIMRound, ...]
    rho: float
    epsilon: float
    delta: float
    workload: tuple[Marginal, ...]
    weights: tuple[float, ...]
    max_model_cells: int
    max_clique_cells: int
    model_cells: int
    estimate: PGMEstimate
    max_likelihood_flops: int = DEFAULT_MAX_LIKELIHOOD_FLOPS
    likelihood_flops: int = 0
    required_share: float = 0.0


def _round_settings(rho_round: float) -> tuple[float, float]:
    """Noise and selection epsilon of a round costing ``rho_round``, split by :data:`MEASURE_SHARE`:
    ``gaussian_rho(sqrt 2, sigma) = MEASURE_SHARE rho_round`` and ``epsilon^2 / 8 = (1 - MEASURE_SHARE) rho_round``."""
    sigma = MARGINAL_L2_SENSITIVITY / math.sqrt(2.0 * MEASURE_SHARE * rho_round)
    return sigma, math.sqrt(8.0 * (1.0 - MEASURE_SHARE) * rho_round)


def _share_setting(value) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)) \
            or not (0.0 <= float(value) < 1.0):
        raise ParameterError(f"required_share must be a number in [0, 1), got {value!r}")
    return float(value)


def _largest_clique(tree: JunctionTree) -> int:
    return max(math.prod(tree.shape(c)) for c in range(len(tree.cliques)))


def _check_codes(codes: np.ndarray, domain: Domain) -> np.ndarray:
    codes = np.asarray(codes)
    if codes.ndim != 2 or codes.shape[1] != len(domain):
        raise DomainError(f"codes must be an (n, {len(domain)}) array of category codes, got shape {codes.shape}")
    if codes.shape[0] == 0:
        raise DomainError("codes: AIM needs at least one row")
    if not np.issubdtype(codes.dtype, np.integer):
        raise DomainError(f"codes must be integers, got {codes.dtype}")
    bad = [n for j, n in enumerate(domain.names) if codes[:, j].min() < 0 or codes[:, j].max() >= domain.shape[j]]
    if bad:
        raise DomainError(f"codes of columns {bad} are outside their categories")
    return codes


def _epsilon_for_rho(rho: float, delta: float) -> float:
    """:func:`zcdp_epsilon` rounded up to 3 significant digits, so the value shown suffices."""
    eps = zcdp_epsilon(rho, delta)
    unit = 10.0 ** (math.floor(math.log10(eps)) - 2)
    return float(f"{math.ceil(eps / unit) * unit:.3g}")


def _int_setting(name: str, value, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < minimum:
        raise ParameterError(f"{name} must be an integer >= {minimum}, got {value!r}")
    return int(value)


def select_aim(
    codes: np.ndarray | MarginalCounter,
    domain: Domain,
    workload: Sequence[Marginal | Sequence[str] | str] | None = None,
    *,
    weights: Sequence[float] | None = None,
    required: Sequence[Marginal | Sequence[str] | str] = (),
    budget: PrivacyBudget,
    ledger: PrivacyLedger,
    max_model_cells: int = DEFAULT_MAX_MODEL_CELLS,
    max_clique_cells: int | None = None,
    max_likelihood_flops: int | None = None,
    rounds: int | None = None,
    estimation_iters: int = DEFAULT_ESTIMATION_ITERS,
    required_share: float = 0.0,
) -> AIMResult:
    """Run AIM's selection and measurement (Algorithm 2) on ``codes``; ``budget``-DP in all.

    Parameters
    ----------
    codes : (n, k) int array, or a :class:`~synthinfer.data.counting.MarginalCounter`
        The private rows as category codes of ``domain`` (``synthinfer.data.encode``), or a
        counter of their marginals (a file: every count AIM reads comes from one scan).
    domain : Domain
        Finite, public.
    workload : marginals, optional
        What the synthetic data should answer well (default: all 2-way marginals). The
        ``required`` marginals are added to it (weight 1) when it lacks them.
    weights : floats, optional
        Positive workload weights ``c_s`` (default 1 each), in the order of ``workload``.
    required : marginals
        The analyst's marginals: measured first, with the 1-way marginals of every column, at
        the initial noise level ``sigma_0``, or on a budget share of their own
        (``required_share``).
    budget : PrivacyBudget
        ``(epsilon, delta)`` with ``delta > 0``; converted to ``rho`` (module docstring).
    ledger : PrivacyLedger
        Charged once, ``"napsu-mq: AIM"``, before any noise is drawn.

    All noise and selections come from :mod:`synthinfer.privacy.samplers` (OpenDP, its CSPRNG;
    no seed): the discrete Gaussian at scale ``sigma_t`` on the integer counts (rho-zCDP as the
    continuous one, Canonne, Kamath & Steinke 2020, Thm 4), each measurement carrying the
    discrete noise's actual variance for the likelihood, and the exponential mechanism.
    max_model_cells : int
        Cap on the total cells of the junction tree's clique tables, reached when all of the
        budget is spent (module docstring; :data:`DEFAULT_MAX_MODEL_CELLS`).
    max_clique_cells : int, optional
        Cap on the largest clique table (default: :data:`DEFAULT_MAX_CLIQUE_CELLS`, or the
        largest clique of the required and 1-way marginals' junction tree when that is larger).
    max_likelihood_flops : int, optional
        Cap on the noise-aware likelihood's work per evaluation with a candidate measured
        (:func:`synthinfer.napsu.structured.likelihood_flops` of the measured scopes; it applies
        to candidates inside the tree's cliques too, since a new block or a whole-clique
        measurement changes the work). Default: :data:`DEFAULT_MAX_LIKELIHOOD_FLOPS`, or twice
        the required and 1-way marginals' own cost when that is larger.
    rounds : int, optional
        The rounds bound ``T`` that sets the initial per-round cost ``rho / T`` (default
        ``16 k``); annealing spends faster, so at most ``T`` rounds run.
    estimation_iters : int
        Mirror-descent iterations of each between-round estimate.
    required_share : float in [0, 1)
        Share of ``rho`` spent measuring the required marginals of two or more columns, all at
        one noise level, before the rounds (module docstring); ``0`` (AIM as published):
        they are measured with the 1-way marginals at ``sigma_0``. Ignored without such
        marginals.

    Raises
    ------
    UnknownColumnError
        A workload or required marginal names a column ``domain`` lacks.
    DomainError
        A workload marginal that repeats a column or has none.
    ParameterError
        An empty workload, bad weights or settings, ``delta = 0``, ``rounds`` too small for the
        initial measurements and one round, ``max_model_cells``, ``max_clique_cells`` or
        ``max_likelihood_flops`` below what the required and 1-way marginals need, or a budget so small that the first
        measurements' noise sd exceeds the number of rows (module docstring). All of these are
        raised before the ledger is touched.
    BudgetExceededError
        The ledger has less than ``budget`` left.
    """
    # -- everything that can fail, before any budget is spent ---------------------------------
    if not isinstance(domain, Domain):
        raise ArgumentTypeError(f"domain must be a synthinfer Domain, got {type(domain).__name__}")
    if not isinstance(budget, PrivacyBudget):
        raise ArgumentTypeError(f"budget must be a PrivacyBudget, got {type(budget).__name__}")
    if not isinstance(ledger, PrivacyLedger):
        raise ArgumentTypeError(f"ledger must be a PrivacyLedger, got {type(ledger).__name__}")
    domain.check_finite(purpose="AIM's marginal measurements")
    work, w = _workload(domain, workload, weights)
    req: list[Marginal] = []
    for m in as_marginals(required, "required"):
        domain.check_columns(m.columns)
        m = _canonical(domain, m)
        if all(frozenset(m.columns) != frozenset(r.columns) for r in req):
            req.append(m)
    # multi-column ones only: every 1-way marginal is measured before the rounds, and a 1-way
    # marginal named in the workload escapes the cap on its weight (candidate_weights)
    missing = [m for m in req if len(m.columns) > 1 and all(frozenset(m.columns) != frozenset(s.columns) for s in work)]
    if missing:
        work, w = work + tuple(missing), np.concatenate([w, np.ones(len(missing))])
    counter = as_counter(codes if isinstance(codes, MarginalCounter) else _check_codes(codes, domain), domain)
    n_cols = len(domain)
    bound = ROUNDS_PER_COLUMN * n_cols if rounds is None else _int_setting("rounds", rounds, 1)
    max_model_cells = _int_setting("max_model_cells", max_model_cells, 1)
    if max_clique_cells is not None:
        max_clique_cells = _int_setting("max_clique_cells", max_clique_cells, 1)
    if max_likelihood_flops is not None:
        max_likelihood_flops = _int_setting("max_likelihood_flops", max_likelihood_flops, 1)
    estimation_iters = _int_setting("estimation_iters", estimation_iters, 0)
    if budget.delta <= 0:
        raise ParameterError("AIM uses the Gaussian mechanism and needs delta > 0")
    required_share = _share_setting(required_share)
    req_multi = [m for m in req if len(m.columns) > 1]
    if not req_multi:
        required_share = 0.0
    # measured before the rounds: with a share of their own, the required marginals apart
    up_front = req_multi if required_share > 0 else []
    initial = [Marginal((c,)) for c in domain.names] + ([] if up_front else req_multi)
    if MEASURE_SHARE * len(initial) + 1 > bound:
        raise ParameterError(
            f"rounds={bound} is too few: the {len(initial)} initial measurements (the {n_cols} 1-way "
            f"marginals and {len(initial) - n_cols} required ones) cost {MEASURE_SHARE:g} x {len(initial)} = "
            f"{MEASURE_SHARE * len(initial):g} rounds' worth of rho/rounds, and one selection round needs 1 "
            f"more; use rounds >= {math.ceil(MEASURE_SHARE * len(initial) + 1)}")
    initial_tree = JunctionTree.build(domain, [m.columns for m in initial + up_front])
    initial_cells, initial_clique = initial_tree.table_cells, _largest_clique(initial_tree)
    if max_model_cells < initial_cells:
        raise ParameterError(
            f"max_model_cells={max_model_cells} is below the {initial_cells} clique-table cells that the required "
            f"marginals and the 1-way marginals alone need (their junction tree); use max_model_cells >= "
            f"{initial_cells}")
    if max_clique_cells is None:
        max_clique_cells = max(DEFAULT_MAX_CLIQUE_CELLS, initial_clique)
    elif max_clique_cells < initial_clique:
        raise ParameterError(
            f"max_clique_cells={max_clique_cells} is below the {initial_clique}-cell largest clique of the junction "
            f"tree of the required marginals and the 1-way marginals; use max_clique_cells >= {initial_clique}")
    initial_scopes = list(dict.fromkeys(tuple(sorted(domain.index(c) for c in m.columns)) for m in up_front + initial))
    initial_flops = likelihood_flops(initial_tree, domain.shape, initial_scopes)
    if max_likelihood_flops is None:
        max_likelihood_flops = max(DEFAULT_MAX_LIKELIHOOD_FLOPS, 2 * initial_flops)
    elif max_likelihood_flops < initial_flops:
        raise ParameterError(
            f"max_likelihood_flops={max_likelihood_flops} is below the {initial_flops} flops per likelihood "
            f"evaluation that the required marginals and the 1-way marginals alone need; use max_likelihood_flops >= "
            f"{initial_flops}")
    n = counter.n  # public under substitution
    rho = zcdp_rho(budget.epsilon, budget.delta)
    rho_rounds = (1.0 - required_share) * rho
    sigma_0 = _round_settings(rho_rounds / bound)[0]
    if sigma_0 > n:
        need = _epsilon_for_rho(bound / (MEASURE_SHARE * (1.0 - required_share) * n * n), budget.delta)
        spread = f"rounds={bound}" if rounds is not None else f"{bound} rounds ({ROUNDS_PER_COLUMN} per column)"
        raise ParameterError(
            f"epsilon={budget.epsilon:g} is too small for AIM on {n:,} rows: spread over {spread}, the first "
            f"measurements' noise sd would be {sigma_0:,.0f}, more than the number of rows, so their counts would be "
            f"noise; at delta={budget.delta:g} AIM needs epsilon >= {need:g}")
    candidates = candidate_weights(work, w)
    cand = list(candidates)
    cand_w = np.array([candidates[r] for r in cand])
    cand_key = [tuple(sorted(domain.index(c) for c in r.columns)) for r in cand]

    # -- the budget: checked, converted, charged once -------------------------------------------
    ledger.check(_CHARGE_NAME, budget.epsilon, budget.delta, mechanism="aim")
    sigma, eps_em = _round_settings(rho_rounds / bound)
    # each required marginal costs 1 / sigma_req^2 (gaussian_rho at the sqrt(2) sensitivity)
    sigma_req = (MARGINAL_L2_SENSITIVITY / math.sqrt(2.0 * required_share * rho / len(up_front))
                 if up_front else None)
    ledger.spend(
        _CHARGE_NAME, budget.epsilon, budget.delta, mechanism="aim",
        accounting="rho-zCDP (Bun & Steinke 2016), converted by Canonne, Kamath & Steinke 2020, Cor. 13",
        rho=rho, rounds_bound=bound, measure_share=MEASURE_SHARE, sigma_0=sigma, epsilon_0=eps_em,
        required_share=required_share, sigma_required=sigma_req,
        neighbourhood="substitution of one row", marginal_l2_sensitivity=MARGINAL_L2_SENSITIVITY,
        quality_sensitivity="2 * max weight of the eligible candidates", initial_marginals=len(initial),
        workload_marginals=len(work), max_model_cells=max_model_cells, max_clique_cells=max_clique_cells,
        max_likelihood_flops=max_likelihood_flops,
    )

    # -- initial measurements --------------------------------------------------------------------
    counter.prefetch([m.columns for m in cand + initial + up_front])  # one scan of a file
    truth = {m: counter.count(m.columns) for m in cand}
    measurements: list[Measurement] = []
    rho_used = 0.0
    rho_measured = 0.0  # from the scales (a measurement's variance is the discrete noise's, below scale^2)

    def measure(m: Marginal, s: float) -> Measurement:
        nonlocal rho_measured
        x = truth[m] if m in truth else counter.count(m.columns)
        meas = Measurement(m, discrete_gaussian(x, s), discrete_gaussian_variance(s))
        measurements.append(meas)
        rho_measured += gaussian_rho(MARGINAL_L2_SENSITIVITY, s)
        return meas

    for m in up_front:
        measure(m, sigma_req)
    rho_used = required_share * rho  # exactly what the up-front measurements cost
    for m in initial:
        measure(m, sigma)
        rho_used += gaussian_rho(MARGINAL_L2_SENSITIVITY, sigma)
    estimate = estimate_pgm(domain, measurements, n, iters=estimation_iters)
    scopes = dict.fromkeys(initial_scopes)  # ordered set
    grown: dict[tuple[int, ...], JunctionTree] = {}  # the current tree plus one candidate
    priced: dict[tuple[int, ...], int] = {}  # likelihood flops with a candidate, for the current scopes

    def eligible_under(cap: float) -> list[int]:
        """Candidates whose addition keeps the tree and the likelihood's work within the caps
        (candidates that leave the tree as it is pass the cell caps)."""
        out = []
        for i, key in enumerate(cand_key):
            tree = estimate.junction_tree
            if estimate._structure.clique_of(key) is None:
                if key not in grown:
                    grown[key] = JunctionTree.build(domain, [[domain.names[v] for v in s] for s in (*scopes, key)])
                tree = grown[key]
                if tree.table_cells > cap or _largest_clique(tree) > max_clique_cells:
                    continue
            if key not in priced:
                priced[key] = likelihood_flops(tree, domain.shape, list(dict.fromkeys((*scopes, key))))
            if priced[key] > max_likelihood_flops:
                continue
            out.append(i)
        return out

    # -- rounds ----------------------------------------------------------------------------------
    records: list[AIMRound] = []
    t = 0
    while rho - rho_used > 0:
        t += 1
        cost = gaussian_rho(MARGINAL_L2_SENSITIVITY, sigma) + exponential_rho(eps_em)
        last = rho - rho_used < 2.0 * cost
        if last:  # spend what is left (less a hair, so that float rounding never overspends)
            sigma, eps_em = _round_settings((rho - rho_used) * (1.0 - 1e-9))
        rho_used += gaussian_rho(MARGINAL_L2_SENSITIVITY, sigma) + exponential_rho(eps_em)
        eligible = eligible_under(rho_used / rho * max_model_cells)
        est = [estimate.project(cand[i]) for i in eligible]
        q = quality_scores([truth[cand[i]] for i in eligible], est, cand_w[eligible], sigma)
        sensitivity = QUALITY_SENSITIVITY_PER_WEIGHT * float(cand_w[eligible].max())
        pick = exponential_mechanism(q, epsilon=eps_em, sensitivity=sensitivity)
        chosen = cand[eligible[pick]]
        measure(chosen, sigma)
        before = est[pick]
        if cand_key[eligible[pick]] not in scopes:
            # a new scope: every cached tree and price is of the old scopes (a scope inside a
            # clique leaves the tree as it is, but the trees grown with other candidates may differ)
            scopes[cand_key[eligible[pick]]] = None
            grown.clear()
            priced.clear()
        estimate = estimate_pgm(domain, measurements, n, iters=estimation_iters, warm_start=estimate)
        annealed = float(np.abs(estimate.project(chosen) - before).sum()) <= _NOISE_L1 * sigma * before.size
        records.append(AIMRound(t, chosen, sigma, eps_em, annealed, len(eligible),
                                estimate.junction_tree.table_cells, rho_used))
        if last:
            break
        if annealed:
            sigma, eps_em = sigma / 2.0, eps_em * 2.0

    distinct: dict[frozenset, Marginal] = {}
    for m in measurements:
        distinct.setdefault(frozenset(m.marginal.columns), m.marginal)
    spent = rho_measured + sum(exponential_rho(r.epsilon) for r in records)
    return AIMResult(
        measurements=tuple(measurements),
        marginals=tuple(distinct.values()),
        rounds=tuple(records),
        rho=spent,
        epsilon=budget.epsilon,
        delta=budget.delta,
        workload=work,
        weights=tuple(float(x) for x in w),
        max_model_cells=max_model_cells,
        max_clique_cells=max_clique_cells,
        model_cells=estimate.junction_tree.table_cells,
        estimate=estimate,
        max_likelihood_flops=max_likelihood_flops,
        likelihood_flops=likelihood_flops(estimate.junction_tree, domain.shape, list(scopes)),
        required_share=required_share,
    )
