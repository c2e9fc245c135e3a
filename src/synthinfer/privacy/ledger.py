"""The privacy ledger: the one place where budget is spent.

Every mechanism in synthinfer calls :meth:`PrivacyLedger.spend` *before* drawing noise. A
request that would exceed the total raises :class:`BudgetExceededError` and changes nothing.
The ledger composes by basic composition (epsilons and deltas add), which stays valid when a
caller chooses each charge after seeing the earlier releases (Rogers, Roth, Ullman & Vadhan
2016: basic composition is a valid privacy filter). A mechanism whose charges are all fixed in
advance may commit them as one **plan** (:meth:`PrivacyLedger.commit_plan`): the plan costs one
``(epsilon, delta)``, checked by the composition of its parts' privacy loss distributions
(:mod:`synthinfer.privacy.composition`), which is much tighter for Gaussian parts. PLD
composition is not applied across charges chosen adaptively: with privacy parameters that
depend on earlier outputs it can certify a composition that is not ``(epsilon, delta)``-DP
(randomized response followed by a second mechanism chosen by its output: the exact delta is
18-43% above the one certified in the examples of ``tests/test_privacy_composition.py``). Its
record (:meth:`PrivacyLedger.to_dict`) goes into every release.
"""

from __future__ import annotations

import datetime as _dt
import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from synthinfer.errors import BudgetExceededError, ParameterError, PrivacyError
from synthinfer.privacy.budget import PrivacyBudget, check_budget
from synthinfer.privacy.composition import Composition, PrivacyLoss

# Float slack when the parts of a budget are spent exactly (e.g. 0.9 + 0.1 of epsilon).
_TOL = 1e-9


@dataclass(frozen=True)
class Charge:
    """One entry of the ledger: a mechanism's (epsilon, delta) spend and its settings; its privacy
    loss where tighter than the pair (:class:`~synthinfer.privacy.composition.PrivacyLoss` as a
    dict), and the committed plan it is part of (its pair is then already in the plan's)."""

    name: str
    mechanism: str
    epsilon: float
    delta: float
    details: dict[str, Any] = field(default_factory=dict)
    time: str = ""
    loss: dict[str, Any] | None = None
    part_of: str | None = None


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
        self._open_plans: dict[str, list[PrivacyLoss]] = {}  # committed plans' losses not yet spent

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
        """(epsilon, delta) spent so far: the sums over the charges and plans (a plan's parts are
        in its own pair, :meth:`commit_plan`)."""
        top = [c for c in self._charges if c.part_of is None]
        return (math.fsum(c.epsilon for c in top), math.fsum(c.delta for c in top))

    @property
    def remaining(self) -> PrivacyBudget | None:
        """The budget left, or None when (up to float slack) nothing is left."""
        eps = self.total.epsilon - self.spent[0]
        delta = max(self.total.delta - self.spent[1], 0.0)
        return PrivacyBudget(eps, delta) if eps > _TOL else None

    def can_spend(self, epsilon: float, delta: float = 0.0) -> bool:
        e, d = self.spent
        return e + epsilon <= self.total.epsilon * (1 + _TOL) and d + delta <= self.total.delta * (1 + _TOL) + 1e-300

    def check(self, name: str, epsilon: float, delta: float = 0.0, *, mechanism: str) -> None:
        """Raise :class:`BudgetExceededError` unless ``(epsilon, delta)`` fits; spends nothing.

        Mechanisms with several charges (or private work before their charge) call it first,
        so that a refused fit records no partial charge and touches no private data.
        """
        self._check_pair(name, epsilon, delta)
        if not self.can_spend(epsilon, delta):
            e, d = self.spent
            raise BudgetExceededError(
                f"{name} ({mechanism}) asks for epsilon={epsilon:g}, delta={delta:g}, but only "
                f"epsilon={self.total.epsilon - e:g}, delta={max(self.total.delta - d, 0):g} of the "
                f"total ({self.total.epsilon:g}, {self.total.delta:g}) remain"
            )

    @staticmethod
    def _check_pair(name: str, epsilon: float, delta: float) -> None:
        if not isinstance(epsilon, (int, float)) or not math.isfinite(epsilon) or epsilon < 0:
            raise PrivacyError(f"{name}: epsilon must be finite and >= 0, got {epsilon!r}")
        if not isinstance(delta, (int, float)) or not (0 <= delta < 1):
            raise PrivacyError(f"{name}: delta must be in [0, 1), got {delta!r}")

    def commit_plan(self, name: str, epsilon: float, delta: float, losses: Sequence[PrivacyLoss], *,
                    mechanism: str, **details: Any) -> str:
        """Charge ``(epsilon, delta)`` once for a **plan**: charges whose privacy losses are all fixed
        before any of them runs, so that they compose by their privacy loss distributions.
        Returns the plan's name in this ledger (``name``, numbered ``"name #2"`` and so on when a
        charge of that name exists), which its parts pass as ``part_of``.

        The plan is refused (:class:`PrivacyError`) unless the PLD composition of ``losses`` is
        ``(epsilon, delta)``-DP, and (:class:`BudgetExceededError`) unless ``(epsilon, delta)``
        fits the ledger; either way before anything is spent. Its parts are then spent in order
        with ``spend(..., part_of=<the name>, loss=...)``; each must carry the plan's next loss
        exactly (otherwise :class:`PrivacyError`, before its noise is drawn) and costs nothing
        more: a part's own ``(epsilon, delta)``, in the record, is its guarantee alone, and the
        parts' pairs are not to be added up. Composition with the rest of the ledger stays basic:
        a plan is one ``(epsilon, delta)`` charge, whatever was released before it (module
        docstring).
        """
        losses = list(losses)
        if not losses or not all(isinstance(loss, PrivacyLoss) for loss in losses):
            raise PrivacyError(f"{name}: a plan needs a non-empty list of PrivacyLoss objects")
        taken = {c.name for c in self._charges}
        unique, i = name, 1
        while unique in taken:
            i += 1
            unique = f"{name} #{i}"
        self.check(unique, epsilon, delta, mechanism=mechanism)
        try:
            fits = Composition.of(losses).delta(epsilon) <= delta
        except (OverflowError, MemoryError):  # dp_accounting at epsilons far beyond any budget
            fits = False
        if not fits:
            raise PrivacyError(f"{unique}: its {len(losses)} charges do not compose to (epsilon={epsilon:g}, "
                               f"delta={delta:g}) by their privacy loss distributions")
        self._record(unique, epsilon, delta, mechanism, {
            **details, "parts": len(losses), "losses": [loss.to_dict() for loss in losses],
            "composition": "privacy loss distributions of the parts (dp_accounting, pessimistic)"}, None, None)
        self._open_plans[unique] = losses
        return unique

    def spend(self, name: str, epsilon: float, delta: float = 0.0, *, mechanism: str,
              loss: PrivacyLoss | None = None, part_of: str | None = None, **details: Any) -> Charge:
        """Record a charge of ``(epsilon, delta)``; raise before anything is spent if it does not fit
        (:meth:`check`). ``loss``: the mechanism's privacy loss where it is tighter than its
        ``(epsilon, delta)`` (recorded; it counts only inside a plan). ``part_of``: the name of the
        committed plan this charge belongs to (:meth:`commit_plan`), which already paid for it."""
        if loss is not None and not isinstance(loss, PrivacyLoss):
            raise PrivacyError(f"{name}: loss must be a PrivacyLoss, got {type(loss).__name__}")
        self._check_pair(name, epsilon, delta)
        if loss is not None and loss.kind != "epsilon_delta" and Composition.of([loss]).epsilon(delta) > epsilon * (1 + _TOL):
            raise PrivacyError(f"{name}: its privacy loss {loss.to_dict()} is not (epsilon={epsilon:g}, delta={delta:g})-DP")
        if part_of is None:
            self.check(name, epsilon, delta, mechanism=mechanism)
        else:
            plan = self._open_plans.get(part_of)
            if not plan:
                raise PrivacyError(f"{name}: no committed plan {part_of!r} with charges left")
            actual = PrivacyLoss.epsilon_delta(epsilon, delta) if loss is None else loss
            if actual != plan[0]:
                raise PrivacyError(f"{name}: its privacy loss {actual.to_dict()} is not the next one committed in "
                                   f"plan {part_of!r}, {plan[0].to_dict()}")
            plan.pop(0)
        return self._record(name, epsilon, delta, mechanism, details, loss, part_of)

    def _record(self, name: str, epsilon: float, delta: float, mechanism: str, details: dict,
                loss: PrivacyLoss | None, part_of: str | None) -> Charge:
        charge = Charge(
            name=name,
            mechanism=mechanism,
            epsilon=float(epsilon),
            delta=float(delta),
            details=dict(details),
            time=_dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
            loss=None if loss is None else loss.to_dict(),
            part_of=part_of,
        )
        self._charges.append(charge)
        return charge

    def to_dict(self) -> dict[str, Any]:
        e, d = self.spent
        return {
            "composition": ("basic (epsilons and deltas add); the parts of a committed plan by their privacy loss "
                            "distributions (dp_accounting, pessimistic)"),
            "total": self.total.to_dict(),
            "unsafe_overrides": self.unsafe_overrides,
            "spent": {"epsilon": e, "delta": d},
            "charges": [asdict(c) for c in self._charges],
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> PrivacyLedger:
        overrides = d.get("unsafe_overrides", [])
        led = cls(PrivacyBudget(**d["total"]), allow_large_delta="allow_large_delta" in overrides,
                  allow_large_epsilon="allow_large_epsilon" in overrides)
        led._charges = [Charge(**c) for c in d.get("charges", [])]
        parts_left: dict[str, int] = {}  # a part must follow its plan, within its number of parts
        for c in led._charges:
            if c.part_of is None:
                if "parts" in c.details and "losses" in c.details:
                    parts_left[c.name] = int(c.details["parts"])
            elif parts_left.get(c.part_of, 0) <= 0:
                raise PrivacyError(f"the ledger record is corrupt: charge {c.name!r} is a part of {c.part_of!r}, "
                                   "which no earlier plan in the record has room for")
            else:
                parts_left[c.part_of] -= 1
        return led

    def __repr__(self) -> str:
        e, d = self.spent
        return (
            f"PrivacyLedger(total=({self.total.epsilon:g}, {self.total.delta:g}), "
            f"spent=({e:g}, {d:g}), charges={len(self._charges)})"
        )
