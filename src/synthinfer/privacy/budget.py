"""(epsilon, delta) privacy budgets."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from synthinfer.errors import PrivacyError


@dataclass(frozen=True)
class PrivacyBudget:
    """An (epsilon, delta)-DP budget: ``epsilon > 0`` finite, ``0 <= delta < 1``.

    Budgets add under basic sequential composition (Dwork & Roth 2014, Thm 3.16), which is
    how the :class:`~synthinfer.privacy.PrivacyLedger` composes the mechanisms it records.
    """

    epsilon: float
    delta: float = 0.0

    def __post_init__(self) -> None:
        eps, delta = self.epsilon, self.delta
        if isinstance(eps, bool) or not isinstance(eps, (int, float)) or not math.isfinite(eps) or eps <= 0:
            raise PrivacyError(f"epsilon must be a finite number > 0, got {eps!r}")
        if isinstance(delta, bool) or not isinstance(delta, (int, float)) or not (0 <= delta < 1):
            raise PrivacyError(f"delta must be a number in [0, 1), got {delta!r}")
        object.__setattr__(self, "epsilon", float(eps))
        object.__setattr__(self, "delta", float(delta))

    def split(self, *fractions: float | Sequence[float], delta_fractions: Sequence[float] | None = None) -> list[PrivacyBudget]:
        """Split into parts by fractions of epsilon (and of delta, by default the same fractions).

        The fractions must be positive and sum to at most 1 (up to 1e-12).

        >>> PrivacyBudget(1.0, 1e-6).split(0.9, 0.1)[1]
        PrivacyBudget(epsilon=0.1, delta=1e-07)
        """
        fr = list(fractions[0]) if len(fractions) == 1 and not isinstance(fractions[0], (int, float)) else list(fractions)
        dfr = list(delta_fractions) if delta_fractions is not None else fr
        if len(dfr) != len(fr):
            raise PrivacyError("delta_fractions must have as many entries as fractions")
        for name, f in (("fractions", fr), ("delta_fractions", dfr)):
            if not f or any((not isinstance(x, (int, float))) or x < 0 for x in f):
                raise PrivacyError(f"{name} must be non-negative numbers, got {f!r}")
            if sum(f) > 1 + 1e-12:
                raise PrivacyError(f"{name} sum to {sum(f):g} > 1")
        if any(x <= 0 for x in fr):
            raise PrivacyError(f"every epsilon fraction must be > 0, got {fr!r}")
        return [PrivacyBudget(self.epsilon * a, self.delta * b) for a, b in zip(fr, dfr)]

    def to_dict(self) -> dict:
        return {"epsilon": self.epsilon, "delta": self.delta}
