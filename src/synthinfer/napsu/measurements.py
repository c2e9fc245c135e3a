"""Noisy marginal measurements: what the noise-aware likelihood conditions on.

A :class:`Measurement` is the discrete Gaussian mechanism's answer to some cells of one marginal,
``y = C_M(X)[cells] + Z``, ``Z_i`` i.i.d. ``N_Z(0, sigma^2)`` (integer noise on integer counts,
:mod:`synthinfer.privacy.samplers`), with ``C_M(X)`` the marginal's count table (cells in C order
over ``marginal.columns``). The likelihood models the noise as ``N(0, variance I)`` with the
discrete noise's *actual* variance (:func:`~synthinfer.privacy.samplers.discrete_gaussian_variance`,
below ``sigma^2``), which is what a measurement carries; the privacy accounting uses ``sigma``. NAPSU-MQ (Räisä et al. 2023) measures every marginal once
at one noise level and keeps the canonical cells; AIM (McKenna et al. 2022) measures
marginals over rounds at different noise levels, sometimes the same marginal twice. The
noise-aware likelihood (eq. 6) takes any list of measurements: each one adds rows to the
observation model with its own variance.

A measurement with ``groups`` answers a coarse table on the marginal's scope: value ``k`` is
the sum of the counts of the cells whose group is ``k`` (a marginal naming an age group, whose
model holds one-year ages, measured as age groups x race). Each row is in one group, so a
substitution still moves one value down and one up (the same sensitivity as the fine table).

A measurement with ``weights`` as well answers weighted sums, ``y_k = sum_(c in group k)
w_c C_M(X)[c] + Z_k``: a **moment** of a numeric column inside each cell of a coarse table
(``sum of (age - centre_g) / halfwidth_g`` over the rows of age group ``g`` and income ``k``,
weights in ``[-1, 1]``), the statistic of a linear coarse interaction
(:func:`synthinfer.napsu.interactions.coarse_slopes`). Its sensitivity is the caller's to state
(:func:`synthinfer.napsu.coarse.squared_sensitivity`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from synthinfer.data import Domain, Marginal
from synthinfer.errors import ParameterError

#: The likelihood's floor on a released count's noise variance: 1/12, the variance of rounding
#: to the integers (Sheppard's correction). The counts and their discrete noise are integers,
#: which eq. 6 models as Gaussian; at large epsilon the discrete Gaussian's variance falls far
#: below the lattice (8e-11 at epsilon 100 on the toy data, against sigma^2 = 0.02), and 1/variance
#: then makes the structured likelihood's matrices too ill-conditioned for the Laplace fit. The
#: floor is below the sampling variance n p (1 - p) of any count that is not near-empty, so it
#: changes the posterior only where the noise was already negligible. AIM's between-round
#: estimate weights its measurements with the same floor.
INTEGER_ROUNDING_VARIANCE = 1.0 / 12.0


@dataclass(frozen=True)
class Measurement:
    """Noisy counts of some cells of one marginal.

    Attributes
    ----------
    marginal : Marginal
    values : ndarray of float64, shape (len(cells),)
        The noisy counts, in the order of ``cells``.
    variance : float
        The noise variance of every value (> 0): for the discrete Gaussian at scale ``sigma``,
        its actual variance ``sum_k k^2 N(k) / sum_k N(k)`` (below ``sigma^2``), not ``sigma^2``.
    cells : ndarray of int64
        Flat (C-order over ``marginal.columns``) indices of the measured cells, distinct and
        ascending; all of the marginal's cells when it is measured in full.
    groups : ndarray of int64 or None
        With grouped values, the value (``0 .. len(values) - 1``, each used) that each of
        ``cells`` counts towards; ``None``: one value per cell. ``cells`` must then be given.
    weights : ndarray of float64 or None
        With weighted values (``groups`` required), each of ``cells``' finite weight in its
        value's sum; ``None``: weights 1.
    """

    marginal: Marginal
    values: np.ndarray
    variance: float
    cells: np.ndarray = field(default=None)  # type: ignore[assignment]  # None -> all cells
    groups: np.ndarray | None = None
    weights: np.ndarray | None = None

    def __post_init__(self) -> None:
        values = np.asarray(self.values, dtype=np.float64).ravel()
        if self.weights is not None:
            weights = np.asarray(self.weights, dtype=np.float64).ravel()
            if self.groups is None or weights.shape != np.shape(np.ravel(self.groups)) or not np.all(np.isfinite(weights)):
                raise ParameterError(f"measurement of {self.marginal}: weights need groups, one finite weight per cell")
            object.__setattr__(self, "weights", weights)
        if self.groups is not None:
            if self.cells is None:
                raise ParameterError(f"measurement of {self.marginal}: grouped values need their cells")
            groups = np.asarray(self.groups, dtype=np.int64).ravel()
            cells = np.asarray(self.cells, dtype=np.int64).ravel()
            if groups.shape != cells.shape or (groups.size and (groups.min() < 0 or np.any(
                    np.bincount(groups, minlength=values.size)[:values.size] == 0) or groups.max() >= values.size)):
                raise ParameterError(f"measurement of {self.marginal}: groups must give each of the {cells.size} "
                                     f"cells one of the {values.size} values, every value used")
            object.__setattr__(self, "groups", groups)
        cells = np.arange(values.size) if self.cells is None else np.asarray(self.cells, dtype=np.int64).ravel()
        if self.groups is None and cells.shape != values.shape:
            raise ParameterError(
                f"measurement of {self.marginal}: {values.size} values for {cells.size} cells")
        if cells.size and (np.any(np.diff(cells) <= 0) or cells[0] < 0):
            raise ParameterError(f"measurement of {self.marginal}: cells must be distinct, ascending and >= 0")
        if not np.all(np.isfinite(values)):
            raise ParameterError(f"measurement of {self.marginal}: values must be finite")
        if not (np.isfinite(self.variance) and self.variance > 0):
            raise ParameterError(f"measurement of {self.marginal}: variance must be positive, got {self.variance!r}")
        object.__setattr__(self, "values", values)
        object.__setattr__(self, "cells", cells)
        object.__setattr__(self, "variance", float(self.variance))

    def check(self, domain: Domain) -> None:
        """Raise :class:`ParameterError` unless the cells exist in ``domain``'s marginal table."""
        size = self.marginal.size(domain)
        if self.cells.size and self.cells[-1] >= size:
            raise ParameterError(
                f"measurement of {self.marginal}: cell {int(self.cells[-1])} is outside its {size} cells")


def check_measurements(measurements: Sequence[Measurement], domain: Domain) -> tuple[Measurement, ...]:
    """Validate a list of measurements against a Domain (columns and cells); at least one."""
    out = tuple(measurements)
    if not out:
        raise ParameterError("at least one measurement is needed")
    for m in out:
        if not isinstance(m, Measurement):
            raise ParameterError(f"expected Measurement objects, got {type(m).__name__}")
        m.check(domain)
    return out


def combine_repeated(measurements: Sequence[Measurement], variance_floor: float = 0.0) -> tuple[Measurement, ...]:
    """The measurements with every repeat of the same values (same marginal, cells, groups and
    weights) combined into one by inverse-variance weighting, in the order of first occurrence.

    Each variance is first raised to ``variance_floor`` (the likelihood's
    :data:`INTEGER_ROUNDING_VARIANCE`); repeats ``y_1 .. y_k`` with variances ``v_i`` then become
    ``y = v sum_i y_i / v_i`` with ``v = 1 / sum_i (1 / v_i)``.

    Why this changes no posterior: given the true counts ``c`` the repeats are independent
    ``N(c, v_i)``, so ``y`` is sufficient for ``c`` and ``prod_i N(y_i | c, v_i) = K(y_1..y_k)
    N(y | c, v)`` with ``K`` free of ``c``. Integrating ``c`` against the model's distribution of
    the counts (NAPSU-MQ eq. 6, ``N(n mu(theta), n Sigma(theta))``) keeps the factor, so the
    likelihood of ``theta`` changes by a constant only. It matters for speed: AIM (McKenna et al.
    2022) re-measures some marginals in later rounds, and the message-passing likelihood
    (:mod:`synthinfer.napsu.structured`) gives every measurement its own block at its clique, so a
    repeat enlarges that clique's factorisation as much as a new marginal would.
    """
    if not variance_floor >= 0:
        raise ParameterError(f"variance_floor must be >= 0, got {variance_floor!r}")
    first: dict[tuple, int] = {}
    parts: list[list[Measurement]] = []
    for m in measurements:
        key = (tuple(m.marginal.columns), m.cells.tobytes(), None if m.groups is None else m.groups.tobytes(),
               None if m.weights is None else m.weights.tobytes())
        if key in first:
            parts[first[key]].append(m)
        else:
            first[key] = len(parts)
            parts.append([m])
    out = []
    for group in parts:
        precisions = [1.0 / max(m.variance, variance_floor) for m in group]
        total = math.fsum(precisions)
        values = sum(w * m.values for w, m in zip(precisions, group)) / total
        m = group[0]
        out.append(Measurement(m.marginal, values, 1.0 / total, cells=m.cells, groups=m.groups, weights=m.weights))
    return tuple(out)
