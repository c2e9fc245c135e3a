"""Privacy loss distributions of the ledger's charges, and their composition.

A **committed plan** of the ledger (:meth:`synthinfer.privacy.PrivacyLedger.commit_plan`) is
a list of charges whose privacy parameters are all fixed before any of them runs; it costs one
``(epsilon, delta)``, checked here by composing its parts' **privacy loss distributions
(PLDs)**. Each part carries a *dominating pair* of its mechanism, a pair of distributions
``(P, Q)`` whose hockey-stick divergence ``H_{e^eps}(P || Q)`` bounds the mechanism's
``delta(eps)`` on every pair of neighbouring datasets. Composition of mechanisms with fixed
privacy parameters (the mechanisms themselves may adapt to earlier outputs) is dominated by the
product of their pairs (Zhu, Dong & Wang 2022, "Optimal accounting of differential privacy via
characteristic function", Thm 10), whose privacy loss is the sum of the independent losses: the
PLDs convolve. ``dp_accounting`` (Google's accounting library; Koskela et al. 2021, Doroshenko
et al. 2022) holds each PLD on a grid of losses (interval ``1e-4``) rounded pessimistically, so
every ``delta(eps)`` it reports is an upper bound. (With parameters chosen after earlier
outputs the theorem does not apply, which is why the ledger composes separate charges by basic
composition: :mod:`synthinfer.privacy.ledger`.)

Each charge's dominating pair is a :class:`PrivacyLoss`, stored in the ledger's record as a
small JSON dict so that a saved ledger composes the same way when loaded:

* :meth:`PrivacyLoss.discrete_gaussian`: ``N_Z(0, sigma^2)`` noise on integer counts whose
  neighbours differ by +-1 in at most ``k`` coordinates (NAPSU-MQ's marginals and MST's 1-way
  marginals: ``k = 2 n_s`` under substitution of one row). The coordinates' noises are
  independent, so the pair is the ``k``-fold product of the one-dimensional pair
  ``(N_Z(0, sigma^2), N_Z(1, sigma^2))`` (Canonne, Kamath & Steinke 2020); ``dp_accounting``
  truncates each factor where its tails hold at most ``1e-30``, which adds at most
  ``k * 1e-30`` to delta (:attr:`PrivacyLoss.delta_slack`, see
  :mod:`synthinfer.privacy.mechanisms`).
* :meth:`PrivacyLoss.epsilon_delta`: any ``(epsilon, delta)``-DP mechanism is dominated by the
  pair of randomized response with an extra outcome of probability ``delta`` (Kairouz, Oh &
  Viswanath 2015; Murtagh & Vadhan 2016), ``dp_accounting``'s ``from_privacy_parameters``. This
  is the default for a charge that states nothing more (Laplace, the exponential mechanism,
  zCDP-accounted Gaussians, AIM's and DP-SGD's whole runs): composing these alone is the
  optimal composition theorem (Kairouz, Oh & Viswanath 2015), up to the grid's rounding.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from synthinfer.errors import PrivacyError

#: dp_accounting truncates each discrete Gaussian where its tails hold at most this mass (the
#: slack it leaves in delta is counted in :attr:`PrivacyLoss.delta_slack`).
DISCRETE_GAUSSIAN_TAIL_MASS = 1e-30
#: Width of dp_accounting's grid of privacy losses (its default).
LOSS_DISCRETIZATION = 1e-4

_KINDS = ("discrete_gaussian", "epsilon_delta")


@dataclass(frozen=True)
class PrivacyLoss:
    """A dominating pair of one mechanism (module docstring), as a JSON-able description.

    Build one with :meth:`discrete_gaussian` or :meth:`epsilon_delta`; :meth:`pld` gives the
    ``dp_accounting`` PrivacyLossDistribution (pessimistic), :attr:`delta_slack` what must be
    added to its deltas."""

    kind: str
    params: tuple[tuple[str, float], ...]

    @classmethod
    def discrete_gaussian(cls, sigma: float, unit_changes: int) -> PrivacyLoss:
        """``N_Z(0, sigma^2)`` on counts whose neighbours differ by +-1 in ``unit_changes`` coordinates."""
        if isinstance(unit_changes, bool) or not isinstance(unit_changes, int) or unit_changes < 1:
            raise PrivacyError(f"unit_changes must be a positive integer, got {unit_changes!r}")
        if not (isinstance(sigma, (int, float)) and math.isfinite(sigma) and sigma > 0):
            raise PrivacyError(f"sigma must be a finite number > 0, got {sigma!r}")
        return cls("discrete_gaussian", (("sigma", float(sigma)), ("unit_changes", int(unit_changes))))

    @classmethod
    def epsilon_delta(cls, epsilon: float, delta: float) -> PrivacyLoss:
        """Any ``(epsilon, delta)``-DP mechanism."""
        if not (isinstance(epsilon, (int, float)) and math.isfinite(epsilon) and epsilon >= 0):
            raise PrivacyError(f"epsilon must be finite and >= 0, got {epsilon!r}")
        if not (isinstance(delta, (int, float)) and 0 <= delta < 1):
            raise PrivacyError(f"delta must be in [0, 1), got {delta!r}")
        return cls("epsilon_delta", (("epsilon", float(epsilon)), ("delta", float(delta))))

    @property
    def delta_slack(self) -> float:
        """Added to every delta of :meth:`pld` (the discrete Gaussian's truncated tails)."""
        p = dict(self.params)
        return p["unit_changes"] * DISCRETE_GAUSSIAN_TAIL_MASS if self.kind == "discrete_gaussian" else 0.0

    def pld(self):
        """The ``dp_accounting`` PrivacyLossDistribution of this pair (pessimistic; cached)."""
        return _pld(self.kind, self.params)

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, **dict(self.params)}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> PrivacyLoss:
        if not isinstance(d, dict) or d.get("kind") not in _KINDS:
            raise PrivacyError(f"not a privacy loss record: {d!r}")
        p = {k: v for k, v in d.items() if k != "kind"}
        if d["kind"] == "discrete_gaussian":
            return cls.discrete_gaussian(p.get("sigma"), p.get("unit_changes"))
        return cls.epsilon_delta(p.get("epsilon"), p.get("delta"))


@lru_cache(maxsize=64)  # a self-composed PLD can hold ~1e5 losses; calibrations revisit few
def _pld(kind: str, params: tuple[tuple[str, float], ...]):
    from dp_accounting.pld import common, privacy_loss_distribution

    p = dict(params)
    if kind == "discrete_gaussian":
        pld = privacy_loss_distribution.from_discrete_gaussian_mechanism(
            p["sigma"], sensitivity=1, truncation_bound=None, pessimistic_estimate=True,
            value_discretization_interval=LOSS_DISCRETIZATION)
        return pld.self_compose(int(p["unit_changes"])) if p["unit_changes"] > 1 else pld
    return privacy_loss_distribution.from_privacy_parameters(
        common.DifferentialPrivacyParameters(p["epsilon"], p["delta"]),
        value_discretization_interval=LOSS_DISCRETIZATION)


@dataclass(frozen=True)
class Composition:
    """The PLD composition of some charges: ``delta(epsilon)`` and ``epsilon(delta)`` bounds."""

    pld: Any  # dp_accounting PrivacyLossDistribution, or None for no charge
    delta_slack: float

    @classmethod
    def of(cls, losses: list[PrivacyLoss] | tuple[PrivacyLoss, ...]) -> Composition:
        pld = None
        for loss in losses:
            pld = loss.pld() if pld is None else pld.compose(loss.pld())
        return cls(pld, math.fsum(loss.delta_slack for loss in losses))

    def then(self, loss: PrivacyLoss) -> Composition:
        """This composition followed by one more charge."""
        pld = loss.pld() if self.pld is None else self.pld.compose(loss.pld())
        return Composition(pld, self.delta_slack + loss.delta_slack)

    def delta(self, epsilon: float) -> float:
        """An upper bound on ``delta`` at ``epsilon``."""
        if self.pld is None:
            return 0.0
        return min(1.0, float(self.pld.get_delta_for_epsilon(float(epsilon))) + self.delta_slack)

    def epsilon(self, delta: float) -> float:
        """An upper bound on the smallest ``epsilon`` with ``delta(epsilon) <= delta`` (``inf`` if none)."""
        if self.pld is None:
            return 0.0
        if delta <= self.delta_slack:
            return math.inf
        return max(0.0, float(self.pld.get_epsilon_for_delta(float(delta) - self.delta_slack)))
