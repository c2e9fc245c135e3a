"""(epsilon, delta) privacy budgets."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from synthinfer.errors import ParameterError, PrivacyError

#: Largest total epsilon accepted without ``allow_large_epsilon``: beyond it the guarantee
#: bounds the odds ratio of any event by more than e^100 and says nothing.
MAX_EPSILON = 100.0


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


def default_delta(n: int) -> float:
    """The default delta for ``n`` private rows: ``1 / n^2``.

    A delta near ``1/n`` admits mechanisms that publish a random private row outright
    (Dwork & Roth 2014, Sec. 2.3; Raisa et al. 2023, Sec. 3), so every default stays far below it.

    >>> default_delta(1000)
    1e-06
    """
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ParameterError(f"n (private rows) must be a positive integer, got {n!r}")
    return 1.0 / n**2


def check_budget(
    epsilon: float, delta: float, n: int, *, allow_large_delta: bool = False, allow_large_epsilon: bool = False,
) -> PrivacyBudget:
    """The total ``(epsilon, delta)`` of a mechanism on ``n`` private rows, refused when unsafe.

    Every generator (through :meth:`PrivacyLedger.check_budget
    <synthinfer.privacy.PrivacyLedger.check_budget>`) and the command line call it before any
    budget is spent. Refused, with :class:`~synthinfer.errors.ParameterError`:

    * ``delta >= 1/n``: such a delta permits releasing a random private row with probability
      ``delta`` (Dwork & Roth 2014, Sec. 2.3), so the guarantee protects nobody in particular;
    * ``epsilon > MAX_EPSILON`` (100): the odds-ratio bound ``e^epsilon`` is meaningless;
    * non-finite or out-of-range values (:class:`PrivacyBudget` checks those).

    ``allow_large_delta`` and ``allow_large_epsilon`` lift the first two refusals for studies
    of the mechanisms themselves (never for a release); the ledger records that they were used.
    """
    budget = PrivacyBudget(epsilon, delta)
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ParameterError(f"n (private rows) must be a positive integer, got {n!r}")
    if budget.delta >= 1.0 / n and not allow_large_delta:
        raise ParameterError(
            f"delta={budget.delta:g} is not below 1/n={1.0 / n:g} (n={n:,} private rows): such a delta allows "
            f"publishing private rows outright; choose delta much smaller than 1/n (the default is 1/n^2 = "
            f"{default_delta(n):g}), or, for a study of the mechanism only, allow_large_delta=True "
            "(command line: --unsafe-allow-large-delta)"
        )
    if budget.epsilon > MAX_EPSILON and not allow_large_epsilon:
        raise ParameterError(
            f"epsilon={budget.epsilon:g} is above {MAX_EPSILON:g}, where the guarantee means nothing; for a study "
            "of the mechanism only, allow_large_epsilon=True (command line: --unsafe-allow-large-epsilon)"
        )
    return budget
