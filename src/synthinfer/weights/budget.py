"""Splitting a total budget between the synthetic-data generator and the weights.

Ghalebikesabi et al. (2022), Section 4.2 and Supplement C.3: when the weights need budget of
their own (LogReg-type or DP-MLP weights), the default gives the weights 10% of epsilon and 30%
of delta, and the generator the rest. Discriminator weights, or no weights, leave the whole
budget to the generator. Budgets add up under basic composition (the ledger's rule).
(Section 4.2 literally says the 10% goes "on fitting the SDGP", contradicting C.3; we follow
C.3, where the numbers are spelled out, and the weights, fitted on far fewer parameters,
need the small share.)
"""

from __future__ import annotations

from synthinfer.errors import PrivacyError
from synthinfer.privacy import PrivacyBudget


def split_budget(total: PrivacyBudget | tuple[float, float], *, weights_epsilon: float = 0.1,
                 weights_delta: float = 0.3) -> tuple[PrivacyBudget, PrivacyBudget]:
    """``(generator_budget, weights_budget)`` from fractions of the total (Supplement C.3).

    >>> g, w = split_budget(PrivacyBudget(1.0, 1e-5))
    >>> round(g.epsilon, 6), round(w.epsilon, 6), round(w.delta / 1e-5, 6)
    (0.9, 0.1, 0.3)
    """
    total = total if isinstance(total, PrivacyBudget) else PrivacyBudget(*total)
    for name, f in (("weights_epsilon", weights_epsilon), ("weights_delta", weights_delta)):
        if not (isinstance(f, (int, float)) and 0 <= f < 1):
            raise PrivacyError(f"{name} must be a fraction in [0, 1), got {f!r}")
    if weights_epsilon == 0:
        raise PrivacyError("weights_epsilon must be > 0; use the whole budget for the generator instead")
    gen, w = total.split(1 - weights_epsilon, weights_epsilon, delta_fractions=(1 - weights_delta, weights_delta))
    return gen, w
