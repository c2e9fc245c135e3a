"""The privacy ledger: the one place where budget is spent.

Every mechanism in synthinfer calls :meth:`PrivacyLedger.spend` *before* drawing noise. A
request that would exceed the total raises :class:`BudgetExceededError` and changes nothing.
The ledger composes its charges two ways, basic composition (epsilons and deltas add) and the
composition of their privacy loss distributions (:mod:`synthinfer.privacy.composition`), and
admits a charge when either bound keeps everything spent within the total: both are valid
bounds on the same mechanisms, so the tighter one is. Its record
(:meth:`PrivacyLedger.to_dict`) goes into every release.
"""

from __future__ import annotations

import datetime as _dt
import math
from dataclasses import asdict, dataclass, field
from typing import Any

from synthinfer.errors import BudgetExceededError, ParameterError, PrivacyError
from synthinfer.privacy.budget import PrivacyBudget, check_budget
from synthinfer.privacy.composition import Composition, PrivacyLoss

# Float slack when the parts of a budget are spent exactly (e.g. 0.9 + 0.1 of epsilon).
_TOL = 1e-9
# guarantee() reports the PLD composition's epsilon only when it is tighter by more than this.
_REPORT_MARGIN = 1e-3


@dataclass(frozen=True)
class Charge:
    """One entry of the ledger: a mechanism's (epsilon, delta) spend, its settings and its
    privacy loss (:class:`~synthinfer.privacy.composition.PrivacyLoss` as a dict; ``None``: the
    ``(epsilon, delta)`` pair's own)."""

    name: str
    mechanism: str
    epsilon: float
    delta: float
    details: dict[str, Any] = field(default_factory=dict)
    time: str = ""
    loss: dict[str, Any] | None = None

    @property
    def privacy_loss(self) -> PrivacyLoss:
        """The charge's dominating pair for PLD composition."""
        return PrivacyLoss.from_dict(self.loss) if self.loss is not None else PrivacyLoss.epsilon_delta(
            self.epsilon, self.delta)


class PrivacyLedger:
    """Tracks spending against a total (epsilon, delta) budget; refuses to overspend.

    Parameters
    ----------
    total : the total budget, a :class:`PrivacyBudget` or an ``(epsilon, delta)`` pair.
    allow_large_delta, allow_large_epsilon : lift the refusal of ``delta >= 1/n`` and of
        ``epsilon > 100`` by :meth:`check_budget`, for studies of the mechanisms only (see
        :func:`~synthinfer.privacy.check_budget`). The record names the overrides in use.

    Examples
    --------
    >>> ledger = PrivacyLedger(PrivacyBudget(1.0, 1e-6))
    >>> _ = ledger.spend("marginals", 0.9, 1e-6, mechanism="gaussian")
    >>> ledger.remaining.epsilon  # doctest: +ELLIPSIS
    0.09999...
    """

    def __init__(self, total: PrivacyBudget | tuple[float, float], *, allow_large_delta: bool = False,
                 allow_large_epsilon: bool = False):
        self.total = total if isinstance(total, PrivacyBudget) else PrivacyBudget(*total)
        for name, v in (("allow_large_delta", allow_large_delta), ("allow_large_epsilon", allow_large_epsilon)):
            if not isinstance(v, bool):
                raise ParameterError(f"{name} must be True or False, got {v!r}")
        self.allow_large_delta = allow_large_delta
        self.allow_large_epsilon = allow_large_epsilon
        self._charges: list[Charge] = []
        self._composition: Composition | None = None  # PLD composition of _charges, built lazily

    @property
    def unsafe_overrides(self) -> list[str]:
        """The names of the safety overrides this ledger was made with (normally none)."""
        return [k for k in ("allow_large_delta", "allow_large_epsilon") if getattr(self, k)]

    def check_budget(self, n: int, budget: PrivacyBudget | None = None) -> None:
        """Refuse the total, and ``budget`` (a mechanism's share) when given, on ``n`` private rows.

        Applies :func:`~synthinfer.privacy.check_budget` (``delta < 1/n``, ``epsilon <= 100``)
        with this ledger's overrides; spends nothing. Every generator calls it before its first
        charge.
        """
        for b in (self.total, budget) if budget is not None else (self.total,):
            check_budget(b.epsilon, b.delta, n, allow_large_delta=self.allow_large_delta,
                         allow_large_epsilon=self.allow_large_epsilon)

    @property
    def charges(self) -> tuple[Charge, ...]:
        return tuple(self._charges)

    @property
    def spent(self) -> tuple[float, float]:
        """(epsilon, delta) spent so far by basic composition (the sums of the charges). Where the
        PLD composition admitted charges these sums may exceed the total; the guarantee is
        :meth:`guarantee`."""
        return (math.fsum(c.epsilon for c in self._charges), math.fsum(c.delta for c in self._charges))

    @property
    def remaining(self) -> PrivacyBudget | None:
        """The budget left by basic composition, or None when (up to float slack) nothing is left
        (a lower bound: :meth:`can_spend` may still admit a charge by PLD composition)."""
        eps = self.total.epsilon - self.spent[0]
        delta = max(self.total.delta - self.spent[1], 0.0)
        return PrivacyBudget(eps, delta) if eps > _TOL else None

    @property
    def composition(self) -> Composition:
        """The privacy loss distribution composition of every charge so far."""
        if self._composition is None:
            self._composition = Composition.of([c.privacy_loss for c in self._charges])
        return self._composition

    def guarantee(self, charges: tuple[Charge, ...] | list[Charge] | None = None,
                  delta: float | None = None) -> tuple[float, float]:
        """The ``(epsilon, delta)`` guarantee of ``charges`` (default: every charge): basic
        composition's sums, or, where more than 0.1% tighter, the PLD composition's epsilon at
        ``delta`` (default: the total's delta). The margin keeps the nominal pair of a charge whose
        own scale was calibrated by its PLD to a relative 1e-4 (its PLD epsilon is a hair lower)."""
        charges = self._charges if charges is None else list(charges)
        if not charges:
            return (0.0, 0.0)
        e, d = math.fsum(c.epsilon for c in charges), math.fsum(c.delta for c in charges)
        at = self.total.delta if delta is None else float(delta)
        comp = self.composition if charges is self._charges else Composition.of([c.privacy_loss for c in charges])
        e_pld = comp.epsilon(at) if at > 0 else math.inf
        return (e_pld, at) if e_pld < e * (1.0 - _REPORT_MARGIN) else (e, d)

    def check_losses(self, name: str, losses: list[PrivacyLoss] | tuple[PrivacyLoss, ...], *, mechanism: str) -> None:
        """Raise :class:`BudgetExceededError` unless the PLD composition of every charge so far and
        ``losses`` (a mechanism's whole plan, calibrated jointly) is within the total; spends nothing."""
        comp = self.composition
        for loss in losses:
            if not isinstance(loss, PrivacyLoss):
                raise PrivacyError(f"{name}: losses must be PrivacyLoss objects, got {type(loss).__name__}")
            comp = comp.then(loss)
        if comp.delta(self.total.epsilon) > self.total.delta:
            raise BudgetExceededError(
                f"{name} ({mechanism}): its {len(losses)} charges, composed with the {len(self._charges)} already "
                f"made, exceed the total ({self.total.epsilon:g}, {self.total.delta:g}) (privacy loss distributions)")

    def _fits_basic(self, epsilon: float, delta: float) -> bool:
        e, d = self.spent
        return e + epsilon <= self.total.epsilon * (1 + _TOL) and d + delta <= self.total.delta * (1 + _TOL) + 1e-300

    def _fits_pld(self, loss: PrivacyLoss) -> bool:
        return self.composition.then(loss).delta(self.total.epsilon) <= self.total.delta

    def can_spend(self, epsilon: float, delta: float = 0.0, *, loss: PrivacyLoss | None = None) -> bool:
        """Whether a charge of ``(epsilon, delta)`` (with privacy loss ``loss``, default that of the
        pair) keeps the total within budget by basic or by PLD composition (module docstring)."""
        if self._fits_basic(epsilon, delta):
            return True
        return self._fits_pld(PrivacyLoss.epsilon_delta(epsilon, delta) if loss is None else loss)

    def check(self, name: str, epsilon: float, delta: float = 0.0, *, mechanism: str,
              loss: PrivacyLoss | None = None) -> None:
        """Raise :class:`BudgetExceededError` unless ``(epsilon, delta)`` fits; spends nothing.

        Mechanisms with several charges (or private work before their charge) call it first,
        so that a refused fit records no partial charge and touches no private data. ``loss``
        is the charge's privacy loss when it is tighter than its ``(epsilon, delta)``
        (:class:`~synthinfer.privacy.composition.PrivacyLoss`); it must be implied by the
        mechanism's own analysis (e.g. its exact PLD).
        """
        if not isinstance(epsilon, (int, float)) or not math.isfinite(epsilon) or epsilon < 0:
            raise PrivacyError(f"{name}: epsilon must be finite and >= 0, got {epsilon!r}")
        if not isinstance(delta, (int, float)) or not (0 <= delta < 1):
            raise PrivacyError(f"{name}: delta must be in [0, 1), got {delta!r}")
        if loss is not None and not isinstance(loss, PrivacyLoss):
            raise PrivacyError(f"{name}: loss must be a PrivacyLoss, got {type(loss).__name__}")
        if not self.can_spend(epsilon, delta, loss=loss):
            e, d = self.spent
            raise BudgetExceededError(
                f"{name} ({mechanism}) asks for epsilon={epsilon:g}, delta={delta:g}, but only "
                f"epsilon={self.total.epsilon - e:g}, delta={max(self.total.delta - d, 0):g} of the "
                f"total ({self.total.epsilon:g}, {self.total.delta:g}) remain by basic composition, "
                "and the composition of the privacy loss distributions does not fit either"
            )

    def spend(self, name: str, epsilon: float, delta: float = 0.0, *, mechanism: str,
              loss: PrivacyLoss | None = None, **details: Any) -> Charge:
        """Record a charge of ``(epsilon, delta)`` (privacy loss ``loss``, default the pair's own);
        raise before anything is spent if it does not fit (:meth:`check`)."""
        self.check(name, epsilon, delta, mechanism=mechanism, loss=loss)
        charge = Charge(
            name=name,
            mechanism=mechanism,
            epsilon=float(epsilon),
            delta=float(delta),
            details=dict(details),
            time=_dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
            loss=None if loss is None else loss.to_dict(),
        )
        if self._composition is not None:
            self._composition = self._composition.then(charge.privacy_loss)
        self._charges.append(charge)
        return charge

    def to_dict(self) -> dict[str, Any]:
        e, d = self.spent
        ge, gd = self.guarantee()
        return {
            "composition": ("basic (epsilons and deltas add), or the privacy loss distributions' composition "
                            "(dp_accounting, pessimistic) where tighter"),
            "total": self.total.to_dict(),
            "unsafe_overrides": self.unsafe_overrides,
            "spent": {"epsilon": e, "delta": d},
            "guarantee": {"epsilon": ge, "delta": gd},
            "charges": [asdict(c) for c in self._charges],
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> PrivacyLedger:
        overrides = d.get("unsafe_overrides", [])
        led = cls(PrivacyBudget(**d["total"]), allow_large_delta="allow_large_delta" in overrides,
                  allow_large_epsilon="allow_large_epsilon" in overrides)
        led._charges = [Charge(**c) for c in d.get("charges", [])]
        return led

    def __repr__(self) -> str:
        e, d = self.spent
        return (
            f"PrivacyLedger(total=({self.total.epsilon:g}, {self.total.delta:g}), "
            f"spent=({e:g}, {d:g}), charges={len(self._charges)})"
        )
