"""Statistical privacy audits shared by ``tests/test_privacy_audit.py`` and ``benchmarks/privacy``.

Two checks (after dp-recorder's record-and-replay pattern and the threshold audits of
Jagielski et al. 2020 / Nasr et al. 2021):

1. **Record and replay.** A mechanism runs on a dataset ``D`` and on a neighbour ``D'`` (one row
   substituted) with the same seed, while :class:`Recorder` wraps the mechanism-level functions
   that draw privacy noise (:data:`SEAM`). Each call records its noise-free input (counts, scores)
   and its declared parameters; on ``D'`` every call returns the output recorded on ``D``, so the
   run is conditioned on the same released values (adaptive composition; the noise itself comes
   from OpenDP's unseeded generator, so the seam must cover every noise draw). The calls must then agree in
   everything but the noise-free input (the control flow does not depend on the private
   difference), and the measured sensitivity ``||f(D) - f(D')||`` must not exceed the declared one.
2. **Threshold (hockey-stick) test.** Draw the released value many times on both sides through
   the mechanism-level function, threshold the privacy-loss statistic, bound the two event
   probabilities with Clopper-Pearson intervals, and report the implied lower bound on epsilon,
   ``log((P_lo[D in S] - delta) / P_hi[D' in S])``; a bound above the declared epsilon is a
   violation, with false-alarm probability at most ``alpha``.

The seam is the set of mechanism-level functions in :data:`SEAM` (where the library looks them
up at call time), not the samplers under them. The threshold test audits the *calibration* (a
declared sensitivity and budget turned into a noise scale): by default it draws its many samples
through the samplers' test-only numpy stream (``samplers._TEST_ONLY_noise_rng``, the same laws,
about 1000x faster than OpenDP's exact samplers); ``exact=True`` draws them through OpenDP, as a
release does (the benchmark in ``benchmarks/privacy`` does both).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from scipy.stats import beta as beta_dist

from synthinfer.privacy import PrivacyBudget, PrivacyLedger, mechanisms, samplers

#: ``(module, function name)`` of each mechanism-level call the audits record: the Gaussian and
#: Laplace mechanisms (values, sensitivity) and the exponential mechanism (scores, sensitivity),
#: as imported by each module that spends budget.
SEAM: tuple[tuple[str, str], ...] = (
    ("synthinfer.napsu.estimator", "discrete_gaussian_mechanism"),
    ("synthinfer.napsu.selection", "discrete_gaussian_mechanism"),
    ("synthinfer.napsu.selection", "exponential_mechanism"),
    ("synthinfer.generate.privbayes", "discrete_laplace_mechanism"),
    ("synthinfer.generate.privbayes", "exponential_mechanism"),
    ("synthinfer.generate.privbayes", "mutual_information"),
    ("synthinfer.weights.output_perturbation", "gaussian_mechanism"),
    ("synthinfer.weights.output_perturbation", "laplace_mechanism"),
)


class ControlFlowError(AssertionError):
    """The run on the neighbour made different mechanism calls than the run on ``D``."""


class StopAudit(Exception):
    """Raised by a :class:`Recorder` after its ``stop_after`` call, to skip the post-processing."""


@dataclass
class Call:
    """One recorded mechanism-level call: noise-free input and the declared parameters."""

    where: str
    values: np.ndarray
    params: dict[str, Any]
    output: Any = None


@dataclass
class Recorder:
    """Wraps the :data:`SEAM` functions; ``replay`` is the recording on ``D`` to condition on.

    ``stop_after``: the function name after whose (first) call :class:`StopAudit` is raised.
    """

    replay: Recorder | None = None
    stop_after: str | None = None
    calls: list[Call] = field(default_factory=list)

    @contextlib.contextmanager
    def installed(self, monkeypatch):
        import importlib

        for mod_name, fn_name in SEAM:
            mod = importlib.import_module(mod_name)
            if hasattr(mod, fn_name):
                monkeypatch.setattr(mod, fn_name, self._wrap(f"{mod_name}.{fn_name}", getattr(mod, fn_name)))
        yield self

    def _wrap(self, where: str, fn):
        def wrapper(*args, **kwargs):
            # the real call always runs, so that the random stream and the ledger advance as on D
            out = fn(*args, **kwargs)
            if where.endswith("mutual_information"):  # a score PrivBayes' exponential mechanism is given
                values, params = np.atleast_1d(float(out)), {"child": args[2], "parents": tuple(args[3])}
            else:
                values = np.asarray(args[0] if args else kwargs.get("values", kwargs.get("scores")), dtype=float)
                params = {k: v for k, v in kwargs.items() if k not in ("values", "scores", "rng", "seed", "ledger")}
            ref = self._record(where, values, params)
            if ref is not None:
                out = ref.output  # conditioned on the value released on D
            self.calls[-1].output = out
            if self.stop_after and where.endswith(self.stop_after):
                raise StopAudit
            return out

        return wrapper

    def _record(self, where: str, values: np.ndarray, params: dict) -> Call | None:
        i = len(self.calls)
        self.calls.append(Call(where, values.copy(), params))
        if self.replay is None:
            return None
        if i >= len(self.replay.calls):
            raise ControlFlowError(f"call {i} ({where}) was not made on D")
        ref = self.replay.calls[i]
        if (ref.where, ref.values.shape, ref.params) != (where, values.shape, params):
            raise ControlFlowError(f"call {i} differs: on D {ref.where} {ref.values.shape} {ref.params}, "
                                   f"on D' {where} {values.shape} {params}")
        return ref


def record_and_replay(run, data, neighbour, monkeypatch, stop_after: str | None = None) -> list[tuple[Call, Call]]:
    """Run ``run(data)`` and ``run(neighbour)`` under a :class:`Recorder`; the paired calls.

    Raises :class:`ControlFlowError` when the neighbour's run makes other calls.
    """
    on_d = Recorder(stop_after=stop_after)
    with monkeypatch.context() as mp, on_d.installed(mp), contextlib.suppress(StopAudit):
        run(data)
    on_n = Recorder(replay=on_d, stop_after=stop_after)
    with monkeypatch.context() as mp, on_n.installed(mp), contextlib.suppress(StopAudit):
        run(neighbour)
    if len(on_n.calls) != len(on_d.calls):
        raise ControlFlowError(f"{len(on_d.calls)} calls on D, {len(on_n.calls)} on D'")
    return list(zip(on_d.calls, on_n.calls))


def measured_sensitivity(a: Call, b: Call, norm: str) -> float:
    d = a.values - b.values
    return float(np.abs(d).max() if norm == "linf" else np.abs(d).sum() if norm == "l1" else np.sqrt(d @ d))


# -- threshold test -------------------------------------------------------------------------

def clopper_pearson(k: np.ndarray, n: int, alpha: float) -> tuple[np.ndarray, np.ndarray]:
    """Two one-sided ``1 - alpha`` Clopper-Pearson bounds (lower, upper) for ``k`` of ``n``."""
    k = np.asarray(k, dtype=float)
    lo = np.where(k > 0, beta_dist.ppf(alpha, np.maximum(k, 1), n - k + 1), 0.0)
    hi = np.where(k < n, beta_dist.ppf(1 - alpha, k + 1, np.maximum(n - k, 1)), 1.0)
    return lo, hi


def epsilon_lower_bound(t_d: np.ndarray, t_n: np.ndarray, pilot_d: np.ndarray, pilot_n: np.ndarray,
                        delta: float, alpha: float = 1e-3) -> float:
    """Lower bound on epsilon from threshold events ``{T > t}`` of the statistic ``T``.

    The threshold is chosen on the pilot draws (where the empirical bound is largest), then
    evaluated once on the fresh draws ``t_d`` (on ``D``) and ``t_n`` (on ``D'``): the result
    exceeds the true epsilon with probability at most ``2 alpha``.
    """
    grid = np.quantile(pilot_n, np.linspace(0.5, 1 - 50 / len(pilot_n), 60))
    p = (pilot_d[:, None] > grid).mean(0)
    q = (pilot_n[:, None] > grid).mean(0)
    with np.errstate(divide="ignore", invalid="ignore"):
        t = grid[int(np.nanargmax(np.log(np.maximum(p - delta, 1e-300)) - np.log(np.maximum(q, 1e-300))))]
    p_lo, _ = clopper_pearson((t_d > t).sum(), len(t_d), alpha)
    _, q_hi = clopper_pearson((t_n > t).sum(), len(t_n), alpha)
    return float(np.log(max(p_lo - delta, 1e-300) / q_hi)) if p_lo > delta else 0.0


@contextlib.contextmanager
def noise_stream(seed: int, exact: bool) -> Iterator[None]:
    """Draw the samplers' noise from a seeded numpy stream (``exact=False``) or from OpenDP."""
    saved = samplers._TEST_ONLY_noise_rng
    samplers._TEST_ONLY_noise_rng = None if exact else np.random.default_rng(seed)
    try:
        yield
    finally:
        samplers._TEST_ONLY_noise_rng = saved


#: kind of additive mechanism -> (mechanism-level function, takes delta)
ADDITIVE = {
    "gaussian": (mechanisms.gaussian_mechanism, True),
    "discrete_gaussian": (mechanisms.discrete_gaussian_mechanism, True),
    "laplace": (mechanisms.laplace_mechanism, False),
    "discrete_laplace": (mechanisms.discrete_laplace_mechanism, False),
}


def audit_additive(kind: str, f_d: np.ndarray, f_n: np.ndarray, *, sensitivity: float, epsilon: float,
                   delta: float = 0.0, draws: int = 200_000, seed: int = 0, alpha: float = 1e-3,
                   exact: bool = False, unit_changes: int | None = None, sigma: float | None = None) -> float:
    """Empirical epsilon lower bound of an additive mechanism of :data:`ADDITIVE` (Gaussian or
    Laplace, continuous or discrete) on the noise-free answers ``f_d``, ``f_n``, with noise
    calibrated for ``sensitivity`` (and ``unit_changes``, for the discrete Gaussian's tight
    calibration) by the mechanism-level function of :mod:`synthinfer.privacy.mechanisms`, or at
    the given ``sigma`` (a discrete Gaussian calibrated jointly with other charges, whose own
    epsilon at ``delta`` is ``epsilon``); ``exact``: draw through OpenDP (module docstring).

    The statistic is the privacy-loss random variable ``log p_D(y) / p_D'(y)`` (the most powerful
    test), up to a monotone map: the projection on ``f_D - f_D'`` for the (discrete) Gaussian, whose
    mass is proportional to the same kernel ``exp(-|y - f|^2 / 2 s^2)`` on its support, and
    ``sum |y - f_D'| - |y - f_D|`` for the (discrete) Laplace. Both orders of the pair are tried
    and the larger bound returned.
    """
    mechanism, takes_delta = ADDITIVE[kind]
    f_d, f_n = np.asarray(f_d, float), np.asarray(f_n, float)
    if kind.startswith("discrete"):
        f_d, f_n = np.round(f_d), np.round(f_n)
    extra = {"delta": delta} if takes_delta else {}
    if unit_changes is not None:
        extra["unit_changes"] = unit_changes
    if sigma is not None:
        extra["sigma"] = sigma
    best = 0.0
    with noise_stream(seed, exact):
        for a, b in ((f_d, f_n), (f_n, f_d)):
            samples = []
            for x in (a, b, a, b):  # pilot D, pilot D', fresh D, fresh D'
                ledger = PrivacyLedger(PrivacyBudget(epsilon, max(delta, 0.0)))
                big = np.broadcast_to(x, (draws, x.size))
                y, s = mechanism(big, sensitivity=sensitivity, epsilon=None if sigma is not None else epsilon,
                                 ledger=ledger, **extra)
                y = np.asarray(y, float)
                if "gaussian" in kind:
                    u = (a - b) / max(np.linalg.norm(a - b), 1e-300)
                    samples.append((y - b) @ u / s)
                else:
                    samples.append((np.abs(y - b) - np.abs(y - a)).sum(1) / s)
            # rounded: where the loss saturates, float rounding of T would itself tell D from D'
            samples = [np.round(t, 9) for t in samples]
            best = max(best, epsilon_lower_bound(samples[2], samples[3], samples[0], samples[1], delta, alpha))
    return best


def audit_exponential(scores_d: np.ndarray, scores_n: np.ndarray, *, sensitivity: float, epsilon: float,
                      draws: int = 20_000, seed: int = 0, alpha: float = 1e-3, exact: bool = False) -> float:
    """Empirical epsilon lower bound of :func:`~synthinfer.privacy.samplers.exponential_mechanism`
    on the scores of ``D`` and ``D'``; the statistic is the privacy loss of the chosen index;
    ``exact``: draw through OpenDP (module docstring)."""
    from synthinfer.privacy.samplers import exponential_mechanism

    def loss(s, other):
        la, lb = (epsilon * np.asarray(v, float) / (2 * sensitivity) for v in (s, other))
        return (la - np.logaddexp.reduce(la)) - (lb - np.logaddexp.reduce(lb))

    best = 0.0
    with noise_stream(seed, exact):
        for a, b in ((scores_d, scores_n), (scores_n, scores_d)):
            llr = loss(a, b)
            picks = [np.array([exponential_mechanism(x, epsilon=epsilon, sensitivity=sensitivity)
                               for _ in range(draws)]) for x in (a, b, a, b)]
            t = [np.round(llr[p], 9) for p in picks]
            best = max(best, epsilon_lower_bound(t[2], t[3], t[0], t[1], 0.0, alpha))
    return best


def worst_exponential_scores(k: int, sensitivity: float) -> tuple[np.ndarray, np.ndarray]:
    """Scores of ``k`` candidates on neighbours where the first candidate gains ``sensitivity`` and
    every other loses it: the pair on which the exponential mechanism's bound is (nearly) attained."""
    s_d = np.zeros(k)
    s_d[0] = sensitivity
    s_n = np.full(k, float(sensitivity))
    s_n[0] = 0.0
    return s_d, s_n
