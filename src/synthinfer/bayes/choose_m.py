"""How much synthetic data to use: learning trajectories, m-hat with a test, predictive averaging.

Wilde et al. (2021), Section 3-4 and A.2, A.5:

- *Learning trajectory* (A.8): a held-out criterion of the posterior predictive
  ``p(x | x_{1:n}, z_{1:m})`` as a function of m for fixed real data x_{1:n}. Criteria: the log
  score (negative mean log predictive density, A.20, lower is better), the KLD to a known DGP
  (``E_{F0}[log f0 - log p]``, estimated on the held-out DGP sample), the Brier score, the AUROC
  (A.6.2.4, higher is better) and, for the Gaussian model, the 1-Wasserstein distance between the
  held-out sample and the predictive (A.6.2.3).
- :func:`choose_m` (Remark 1, A.2.3, A.5.1.1): m-hat = argmin over m of the held-out criterion,
  and a test that m-hat beats m = 0. The held-out real data are split in two; one half picks
  m-hat, the other gives a one-sided CLT p-value for ``mean_j [s_j(m-hat) - s_j(0)] < 0``
  (paired per-point scores; for AUROC the paired DeLong structural-component variance). K random
  splits are aggregated by ``p = min(1, median(2 p_1, ..., 2 p_K))`` (A.13; Meinshausen et al. 2009),
  which is a valid p-value. If p >= alpha the synthetic data are not used (m-hat = 0); otherwise
  m-hat is re-estimated on the whole held-out set.
- :func:`predictive_average` (Proposition 2, A.5.2): average the posterior predictive over B
  random subsets of size m-hat of the synthetic data; by Jensen's inequality this is no worse for
  convex scoring rules (e.g. the log score) than one subset.
- :func:`n_effective` (A.6.4): how many extra real samples the best synthetic-data posterior is
  worth, read off the real-data-only learning curve.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
import scipy.stats

from synthinfer._jax import jnp, uses_float64
from synthinfer.bayes.posterior import GeneralisedPosterior, log_predictive_density, predictive_proba
from synthinfer.errors import EmptyDataError, ParameterError
from synthinfer.privacy.randomness import SeedLike, make_rng

CRITERIA = ("log_score", "kld", "brier", "auroc", "wasserstein")
_PER_POINT = ("log_score", "kld", "brier")


def _higher_is_better(criterion: str) -> bool:
    return criterion == "auroc"


def _take(data: Any, idx: np.ndarray) -> Any:
    if isinstance(data, pd.DataFrame):
        return data.iloc[idx].reset_index(drop=True)
    if isinstance(data, tuple):
        return tuple(np.asarray(a)[idx] for a in data)
    return np.asarray(data)[idx]


def _len(data: Any) -> int:
    if data is None:
        return 0
    if isinstance(data, tuple):
        return len(data[1])
    return len(data)


@dataclass
class Trajectory:
    """A learning trajectory: ``values[k]`` is the criterion with ``m_grid[k]`` synthetic rows.

    ``per_point`` (len(m_grid), N_test) holds per-test-point losses for decomposable criteria
    (averaged over the synthetic orderings); ``y_test``/``scores`` hold what AUROC needs.
    """

    criterion: str
    m_grid: np.ndarray
    values: np.ndarray
    per_point: np.ndarray | None = None
    y_test: np.ndarray | None = None
    scores: np.ndarray | None = None

    def to_frame(self) -> pd.DataFrame:
        return pd.DataFrame({"m": self.m_grid, self.criterion: self.values})

    @property
    def best_index(self) -> int:
        return int(np.argmax(self.values) if _higher_is_better(self.criterion) else np.argmin(self.values))


@dataclass
class ChooseMResult:
    """Outcome of :func:`choose_m`: the chosen m, the aggregated p-value and the trajectory."""

    m_hat: int
    p_value: float
    use_synthetic: bool
    alpha: float
    m_best: int
    trajectory: Trajectory
    split_p_values: np.ndarray = field(repr=False)

    def summary(self) -> str:
        t = self.trajectory
        return (
            f"criterion={t.criterion}  m_best={self.m_best}  m_hat={self.m_hat}  "
            f"p={self.p_value:.4g} (median of {len(self.split_p_values)} splits, A.13)  "
            f"use_synthetic={self.use_synthetic} at alpha={self.alpha:g}"
        )


def _criterion_from_draws(
    model: Any, draws: np.ndarray, test: dict, criterion: str, dgp_logpdf: Callable | None, rng: np.random.Generator
) -> tuple[np.ndarray | None, float, np.ndarray | None]:
    """(per-point losses or None, criterion value, predictive scores for AUROC)."""
    u = jnp.asarray(draws.reshape(-1, draws.shape[-1]))
    if criterion in ("log_score", "kld"):
        lp = log_predictive_density(model, u, test)
        pp = -lp if criterion == "log_score" else np.asarray(dgp_logpdf(test["y"])) - lp
        return pp, float(pp.mean()), None
    if criterion in ("brier", "auroc"):
        if getattr(model, "name", None) != "logistic":
            raise ParameterError(f"criterion {criterion!r} needs the logistic model")
        p = predictive_proba(model, u, test)
        if criterion == "brier":
            pp = (p - test["y"]) ** 2
            return pp, float(pp.mean()), None
        return None, auroc(test["y"], p), p
    if criterion == "wasserstein":
        if getattr(model, "name", None) != "gaussian":
            raise ParameterError("criterion 'wasserstein' is implemented for the Gaussian model")
        par = model.constrain(u)
        k = 4000
        idx = rng.integers(0, u.shape[0], size=k)
        xs = np.asarray(par["mu"])[idx] + np.asarray(par["sigma"])[idx] * rng.standard_normal(k)
        return None, float(scipy.stats.wasserstein_distance(test["y"], xs)), None
    raise ParameterError(f"criterion must be one of {CRITERIA}, got {criterion!r}")


def auroc(y: np.ndarray, score: np.ndarray) -> float:
    """Area under the ROC curve (A.6.2.4; ties count 1/2), via scikit-learn."""
    from sklearn.metrics import roc_auc_score

    y = np.asarray(y)
    if len(np.unique(y)) < 2:
        raise EmptyDataError("AUROC needs both classes in the held-out data")
    return float(roc_auc_score(y, score))


@uses_float64
def learning_trajectory(
    posterior: GeneralisedPosterior,
    real: Any,
    synthetic: Any,
    test: Any,
    m_grid: Sequence[int],
    *,
    criterion: str = "log_score",
    n_orderings: int = 1,
    dgp_logpdf: Callable[[np.ndarray], np.ndarray] | None = None,
    seed: SeedLike = None,
) -> Trajectory:
    """The criterion of the posterior given ``real`` + the first m rows of shuffled ``synthetic``.

    All (m, ordering) configurations are sampled in one vectorised call
    (:meth:`GeneralisedPosterior.sample_many`). Per-point losses are averaged over orderings.
    """
    if criterion not in CRITERIA:
        raise ParameterError(f"criterion must be one of {CRITERIA}, got {criterion!r}")
    if criterion == "kld" and dgp_logpdf is None:
        raise ParameterError("criterion 'kld' needs dgp_logpdf, the DGP's log density")
    m_grid = np.asarray(sorted(set(int(m) for m in m_grid)))
    M = _len(synthetic)
    if m_grid.size == 0 or m_grid[0] < 0 or m_grid[-1] > M:
        raise ParameterError(f"m_grid must lie in [0, {M}] (the synthetic rows available)")
    if _len(test) == 0:
        raise EmptyDataError("the held-out (test) data are empty")
    rng = make_rng(seed)
    orders = [rng.permutation(M) for _ in range(n_orderings)]
    pairs = [(real, _take(synthetic, o[:m]) if m > 0 else None) for o in orders for m in m_grid]
    draws = posterior.sample_many(pairs, seed=rng)
    test_d = posterior.model.prepare(test)
    per_point, values, scores = [], [], []
    for k in range(len(pairs)):
        pp, v, sc = _criterion_from_draws(posterior.model, draws[k], test_d, criterion, dgp_logpdf, rng)
        per_point.append(pp)
        values.append(v)
        scores.append(sc)
    G = len(m_grid)
    values_arr = np.asarray(values).reshape(n_orderings, G).mean(axis=0)
    pp_arr = None if per_point[0] is None else np.asarray(per_point).reshape(n_orderings, G, -1).mean(axis=0)
    sc_arr = None if scores[0] is None else np.asarray(scores).reshape(n_orderings, G, -1).mean(axis=0)
    if criterion == "auroc":
        # AUROC of the ordering-averaged predictive (it is not an average of per-point terms).
        values_arr = np.array([auroc(test_d["y"], s) for s in sc_arr])
    return Trajectory(criterion, m_grid, values_arr, pp_arr, test_d["y"] if criterion == "auroc" else None, sc_arr)


def _auc_components(y: np.ndarray, s: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """DeLong structural components: V10 (one per positive) and V01 (one per negative)."""
    pos, neg = s[y == 1], s[y == 0]
    cmp = (pos[:, None] > neg[None, :]) + 0.5 * (pos[:, None] == neg[None, :])
    return cmp.mean(axis=1), cmp.mean(axis=0)


def _one_sided_p(traj: Trajectory, k_best: int, k0: int, idx: np.ndarray) -> float:
    """CLT p-value for 'configuration k_best is better than k0' on held-out rows ``idx``."""
    if k_best == k0:
        return 1.0
    if traj.criterion in _PER_POINT:
        d = traj.per_point[k_best, idx] - traj.per_point[k0, idx]  # losses: negative is better
        se = d.std(ddof=1) / math.sqrt(len(d))
        if se == 0:
            return 0.0 if d.mean() < 0 else 1.0
        return float(scipy.stats.norm.cdf(d.mean() / se))
    y = traj.y_test[idx]
    if len(np.unique(y)) < 2:
        return 1.0
    a10, a01 = _auc_components(y, traj.scores[k_best, idx])
    b10, b01 = _auc_components(y, traj.scores[k0, idx])
    diff = a10.mean() - b10.mean()
    var = np.var(a10 - b10, ddof=1) / len(a10) + np.var(a01 - b01, ddof=1) / len(a01)
    if var == 0:
        return 0.0 if diff > 0 else 1.0
    return float(scipy.stats.norm.sf(diff / math.sqrt(var)))


def _argbest(traj: Trajectory, idx: np.ndarray) -> int:
    if traj.criterion in _PER_POINT:
        return int(np.argmin(traj.per_point[:, idx].mean(axis=1)))
    y = traj.y_test[idx]
    if len(np.unique(y)) < 2:
        return 0
    return int(np.argmax([auroc(y, s[idx]) for s in traj.scores]))


#: The default m grid stops at this many times the real rows (or at all synthetic rows, if
#: fewer). Past it the synthetic rows outweigh the real ones tenfold and the trajectory is near
#: its limit, while every configuration costs as much as the largest m (all are sampled in one
#: vectorised program, padded to it): a release of a million rows beside a learner's thousand
#: would make each of the ~20 posteriors one of a million rows. Give ``m_grid`` to go further.
DEFAULT_GRID_RATIO = 10


@uses_float64
def choose_m(
    posterior: GeneralisedPosterior,
    real: Any,
    synthetic: Any,
    test: Any,
    m_grid: Sequence[int] | None = None,
    *,
    criterion: str = "log_score",
    n_splits: int = 25,
    select_fraction: float = 0.5,
    alpha: float = 0.05,
    n_orderings: int = 1,
    dgp_logpdf: Callable[[np.ndarray], np.ndarray] | None = None,
    seed: SeedLike = None,
) -> ChooseMResult:
    """m-hat = argmin_m of the held-out criterion, kept only if it significantly beats m = 0 (A.5.1.1).

    ``test`` is held-out real data (never used to fit). ``m_grid`` defaults to ~20 values from
    0 to all synthetic rows or :data:`DEFAULT_GRID_RATIO` times the real rows, whichever is
    fewer. The test needs a criterion with per-point terms or AUROC.
    """
    if criterion not in ("log_score", "kld", "brier", "auroc"):
        raise ParameterError(f"choose_m's test needs log_score, kld, brier or auroc, got {criterion!r}")
    for name, value, ok in (("select_fraction", select_fraction, 0 < select_fraction < 1),
                            ("alpha", alpha, 0 < alpha < 1), ("n_splits", n_splits, n_splits >= 1)):
        if not ok:
            raise ParameterError(f"{name} must be {'>= 1' if name == 'n_splits' else 'in (0, 1)'}, got {value!r}")
    M = _len(synthetic)
    if m_grid is None:
        n_real = _len(real)
        top = M if n_real == 0 else min(M, DEFAULT_GRID_RATIO * n_real)
        m_grid = np.unique(np.round(np.r_[0, np.geomspace(1, max(top, 1), 19)]).astype(int)) if top else [0]
    m_grid = sorted(set(int(m) for m in m_grid) | {0})
    rng = make_rng(seed)
    traj = learning_trajectory(
        posterior, real, synthetic, test, m_grid, criterion=criterion, n_orderings=n_orderings, dgp_logpdf=dgp_logpdf, seed=rng
    )
    N = _len(test)
    if N < 4:
        raise EmptyDataError(f"the test needs at least 4 held-out rows, got {N}")
    n_sel = min(max(2, int(round(select_fraction * N))), N - 2)
    pvals = []
    for _ in range(n_splits):
        perm = rng.permutation(N)
        sel, ev = perm[:n_sel], perm[n_sel:]
        pvals.append(_one_sided_p(traj, _argbest(traj, sel), 0, ev))
    pvals = np.asarray(pvals)
    p = float(min(1.0, np.median(2 * pvals)))
    k_best = traj.best_index
    m_best = int(traj.m_grid[k_best])
    # The split-wise test can reject while the full test set's argmin is m = 0; then there is
    # no m > 0 to recommend, and use_synthetic must agree with m_hat = 0.
    use = p < alpha and m_best > 0
    return ChooseMResult(m_best if use else 0, p, bool(use), alpha, m_best, traj, pvals)


@dataclass
class PredictiveAverage:
    """The average of B posterior predictives, each from a random size-m subset (Proposition 2)."""

    posterior: GeneralisedPosterior
    draws: np.ndarray  # (B, chains, samples, dim)

    @uses_float64
    def log_predictive(self, data: Any) -> np.ndarray:
        """``log (1/B) sum_b p_b(x)`` per row."""
        d = self.posterior.model.prepare(data)
        lps = np.stack([log_predictive_density(self.posterior.model, jnp.asarray(dr.reshape(-1, dr.shape[-1])), d) for dr in self.draws])
        return np.logaddexp.reduce(lps, axis=0) - math.log(len(lps))

    @uses_float64
    def predict_proba(self, data: Any) -> np.ndarray:
        d = self.posterior.model.prepare(data)
        return np.mean([predictive_proba(self.posterior.model, jnp.asarray(dr.reshape(-1, dr.shape[-1])), d) for dr in self.draws], axis=0)


@uses_float64
def predictive_average(
    posterior: GeneralisedPosterior, real: Any, synthetic: Any, m: int, *, n_subsets: int = 10, replace: bool = False, seed: SeedLike = None
) -> PredictiveAverage:
    """Fit B = ``n_subsets`` posteriors on ``real`` + a random size-``m`` subset of ``synthetic`` each (A.5.2)."""
    M = _len(synthetic)
    if not (0 <= m <= M) or n_subsets < 1:
        raise ParameterError(f"need 0 <= m <= {M} and n_subsets >= 1")
    rng = make_rng(seed)
    pairs = [(real, _take(synthetic, rng.choice(M, size=m, replace=replace)) if m else None) for _ in range(n_subsets)]
    return PredictiveAverage(posterior, posterior.sample_many(pairs, seed=rng))


def n_effective(n_grid: Sequence[float], real_curve: Sequence[float], n_real: float, best: float, *, higher_is_better: bool = False) -> float:
    """Extra real samples worth the best synthetic-data criterion value ``best`` (A.6.4).

    ``real_curve[k]`` is the expected criterion with ``n_grid[k]`` real rows and no synthetic
    data. We find the smallest n' with ``real_curve(n') <= best`` (>= for higher-is-better
    criteria), interpolating linearly between grid points, and return ``n' - n_real`` (0 when
    synthetic data do not beat the real-only value at n_real; ``inf`` when even the largest n
    on the grid is worse than ``best``). The paper takes the nearest grid point (A.6.4); the
    interpolation removes that rounding.
    """
    n = np.asarray(n_grid, dtype=float)
    c = np.asarray(real_curve, dtype=float)
    if n.shape != c.shape or n.size < 2 or np.any(np.diff(n) <= 0):
        raise ParameterError("n_grid must be increasing and match real_curve")
    sign = -1.0 if higher_is_better else 1.0
    c, best = sign * c, sign * best
    c_at = float(np.interp(n_real, n, c))
    if best >= c_at:
        return 0.0
    above = n > n_real
    nn, cc = np.r_[n_real, n[above]], np.r_[c_at, c[above]]
    hit = np.nonzero(cc <= best)[0]
    if hit.size == 0:
        return math.inf
    k = hit[0]
    n0, n1, c0, c1 = nn[k - 1], nn[k], cc[k - 1], cc[k]
    n_star = n1 if c1 == c0 else n0 + (best - c0) * (n1 - n0) / (c1 - c0)
    return float(n_star - n_real)
