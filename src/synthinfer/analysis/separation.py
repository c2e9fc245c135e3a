"""(Quasi-)complete separation of a binary GLM, detected exactly, and the remedies for it.

A binary regression (logit, probit) on rows (xᵢ, yᵢ) has no finite maximum-likelihood estimate
exactly when the data are *separated* (Albert & Anderson 1984; Santner & Duffy 1986): some
direction β ≠ 0 has

    xᵢᵀβ ≥ 0 for every row with yᵢ = 1,   xᵢᵀβ ≤ 0 for every row with yᵢ = 0,

with at least one inequality strict (complete separation when all are strict, quasi-complete
otherwise). Along β the likelihood increases without bound, so the fit runs to |β̂| → ∞ and
reports an enormous variance. In synthetic data this is routine: a dataset may hold nobody of a
rare category with the outcome (Räisä et al. 2023, Section 5.2), and one such fit among m makes
the Rubin's-rules interval useless, because the rules average the m variances.

Detection (:func:`is_separated`) is exact and cheap on categorical designs:

1. a distinct x that occurs with both outcomes (or with a fractional y) forces xᵀβ = 0. When
   those rows span ℝᵏ only β = 0 is left: not separated (the usual case, a rank computation);
2. otherwise write β = N z with N a basis of their null space, and decide by a linear program
   whether some z satisfies sᵢ xᵢᵀ N z ≥ 0 (sᵢ = ±1 the outcome's sign) for the remaining rows
   with Σᵢ sᵢ xᵢᵀ N z = 1 (which excludes β = 0 and directions orthogonal to every row, i.e.
   rank deficiency). Feasible means separated (Konis 2007 gives the same LP without step 1).

Remedies (``analyze(..., separation=...)``), applied per separated dataset:

* ``"penalty"``: refit with the L2 penalty (α/2)|β|², α = 1e-5, and bootstrap variances (50
  refits): the paper's remedy of Section 5.2, which keeps the estimate finite;
* ``"drop"``: leave the dataset out of the combining rules and report it;
* ``"ignore"``: keep the separated fit as it is.

The default, and the measurement it was chosen from, are in ``docs/separation.md``.
"""

from __future__ import annotations

import numpy as np
from scipy.optimize import linprog

__all__ = ["DEFAULT_SEPARATION", "SEPARATION_PENALTY", "SEPARATION_REMEDIES", "is_separated"]

#: Accepted values of ``analyze(..., separation=...)``.
SEPARATION_REMEDIES = ("penalty", "drop", "ignore")
#: The default remedy, chosen from the measurement in ``docs/separation.md``.
DEFAULT_SEPARATION = "penalty"
#: The L2 penalty of the ``"penalty"`` remedy (Räisä et al. 2023, Section 5.2 and Supplement F).
SEPARATION_PENALTY = 1e-5


def is_separated(X: np.ndarray, y: np.ndarray, weights: np.ndarray | None = None) -> bool:
    """Whether the binary-outcome rows (X, y) are (quasi-)completely separated.

    Parameters
    ----------
    X : ``(n, k)`` design matrix (rows may repeat: only the distinct rows matter).
    y : ``(n,)`` outcomes in [0, 1]; a fractional y counts as both outcomes.
    weights : optional per-row weights; rows with weight 0 do not enter the likelihood and are
        ignored.

    Returns
    -------
    True when some β ≠ 0 has xᵢᵀβ ≥ 0 on every row with y > 0, xᵢᵀβ ≤ 0 on every row with
    y < 1, and is non-zero on at least one row: then the likelihood has no finite maximiser.
    """
    X = np.asarray(X, dtype=float)
    y = np.asarray(y, dtype=float)
    if weights is not None:
        keep = np.asarray(weights, dtype=float) > 0
        X, y = X[keep], y[keep]
    if X.shape[0] == 0:
        return False
    k = X.shape[1]
    # per distinct x: does it occur with y > 0 (needs xᵀβ ≥ 0) and with y < 1 (xᵀβ ≤ 0)?
    X = np.ascontiguousarray(X)
    # rows as opaque byte strings: np.unique on them is a 1-d sort, much faster than axis=0
    keys = X.view(np.dtype((np.void, X.dtype.itemsize * k))).reshape(-1)
    _, first, inverse = np.unique(keys, return_index=True, return_inverse=True)
    rows, inverse = X[first], inverse.reshape(-1)
    pos = np.bincount(inverse, weights=(y > 0).astype(float), minlength=len(rows)) > 0
    neg = np.bincount(inverse, weights=(y < 1).astype(float), minlength=len(rows)) > 0
    both = pos & neg
    scale = max(1.0, float(np.abs(rows).max()))
    # step 1: directions allowed by the rows that carry both outcomes
    if both.any():
        _, s, vt = np.linalg.svd(rows[both] / scale)
        tol = s.max(initial=0.0) * max(rows[both].shape) * np.finfo(float).eps
        rank = int(np.count_nonzero(s > tol))
        N = vt[rank:].T
    else:
        N = np.eye(k)
    if N.shape[1] == 0:
        return False
    one = ~both
    if not one.any():
        return False
    A = np.where(pos[one], 1.0, -1.0)[:, None] * (rows[one] / scale) @ N  # need A z ≥ 0
    res = linprog(
        c=np.zeros(N.shape[1]),
        A_ub=-A,
        b_ub=np.zeros(len(A)),
        A_eq=A.sum(axis=0, keepdims=True),
        b_eq=[1.0],
        bounds=[(None, None)] * N.shape[1],
        method="highs",
    )
    return bool(res.status == 0)
