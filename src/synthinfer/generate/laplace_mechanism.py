"""Synthetic data from the truncated Laplace mechanism (Wilde et al. 2021, A.3, Proposition 3).

Each released row is the real row, clamped coordinate-wise to public bounds and perturbed by
independent Laplace noise (OpenDP's grid-based Laplace, :func:`synthinfer.privacy.samplers.laplace`:
exact, so every output is attainable from every input, and drawn from OpenDP's CSPRNG, never from
``seed``):

    z_ij = min(max(a_j, x_ij), b_j) + delta_ij,    delta_ij ~ Laplace(0, lambda_j).

Sensitivity and guarantee. Neighbouring datasets differ in one row (replace-one, as in the
proof of Proposition 3). Only the released row i depends on x_i, and after clamping
``|x_ij - x'_ij| <= b_j - a_j``, so the privacy loss of column j is at most
``(b_j - a_j) / lambda_j = epsilon_j`` (the Laplace mechanism with L1 sensitivity ``b_j - a_j``,
Dwork & Roth 2014, Thm 3.6). The d columns of a row are d mechanisms on the same individual, so
by basic sequential composition the release is (sum_j epsilon_j, 0)-DP; equivalently, it is the
Laplace mechanism on the clamped row vector with per-coordinate scales. Given a total epsilon the
generator splits it equally, ``epsilon_j = epsilon / d`` (``lambda_j = d (b_j - a_j) / epsilon``),
unless the user gives per-column ``scales`` (then epsilon = sum_j (b_j - a_j)/lambda_j). The
bounds must be public (chosen without looking at the data): clamping, not dropping, keeps the
output size independent of the data (A.3). Rows are released in random order; rounding of
``integer`` columns and clipping of ``binary`` columns happen after the noise (post-processing,
free of privacy cost).

The mechanism releases one dataset, one noisy row per real row: ``generate`` returns it (``m``
must be 1; more datasets would need more noise draws, i.e. more budget), or a random subset of
its rows. Its release record has no Domain (the columns are continuous): the public bounds go
into the record's settings.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from synthinfer.errors import (
    ArgumentTypeError,
    EmptyDataError,
    NonFiniteError,
    ParameterError,
    PrivacyError,
    UnknownColumnError,
)
from synthinfer.generate.base import Generator
from synthinfer.privacy import PrivacyBudget, PrivacyLedger
from synthinfer.privacy.randomness import SeedLike, make_rng, seed_fixed
from synthinfer.privacy.samplers import laplace


class LaplaceMechanismGenerator(Generator):
    """Truncated Laplace-mechanism synthetic data (Proposition 3): clamp to [a, b], add Laplace(0, lambda).

    Parameters
    ----------
    bounds : ``{column: (a, b)}``: public bounds, one pair per released column.
    epsilon : total privacy budget of the release (split equally over the columns), or None
        when ``scales`` are given.
    scales : optional ``{column: lambda}``; then ``epsilon_j = (b_j - a_j) / lambda_j``.
    binary : columns whose noisy values are turned back to {a, b} by thresholding at the
        midpoint (post-processing; equivalent to randomised response on the clamped value).
    integer : columns rounded to integers after the noise (post-processing).
    seed : randomness of the noise (None = OS entropy; a fixed seed is for tests only); see
        :class:`~synthinfer.generate.Generator` for the seed rule.

    Attributes after :meth:`fit`
    ----------------------------
    synthetic_ : the released rows; scales_ : ``{column: lambda_j}``; epsilons_ :
    ``{column: epsilon_j}``; ledger_ : the :class:`PrivacyLedger` charged (one entry per
    column); privacy_ : summary dict (mechanism, epsilon, delta, composition, seed_fixed);
    n_, seed_fixed_, release_settings_ : as for every :class:`~synthinfer.generate.Generator`.
    """

    mechanism = "laplace-mechanism"

    def __init__(
        self,
        bounds: Mapping[str, tuple[float, float]],
        epsilon: float | None = None,
        *,
        scales: Mapping[str, float] | None = None,
        binary: Sequence[str] = (),
        integer: Sequence[str] = (),
        seed: SeedLike = None,
    ):
        self.bounds = bounds
        self.epsilon = epsilon
        self.scales = scales
        self.binary = binary
        self.integer = integer
        self.seed = seed

    def _plan(self) -> tuple[dict[str, float], dict[str, float]]:
        """Per-column (lambda_j, epsilon_j) from the settings."""
        if not self.bounds:
            raise ParameterError("bounds must name at least one column")
        widths = {}
        for c, ab in self.bounds.items():
            a, b = (float(v) for v in ab)
            if not (math.isfinite(a) and math.isfinite(b) and b > a):
                raise ParameterError(f"bounds of column {c!r} must be finite with a < b, got {ab!r}")
            widths[c] = b - a
        if (self.epsilon is None) == (self.scales is None):
            raise PrivacyError("give exactly one of epsilon (total, split equally) or scales (per column)")
        if self.scales is not None:
            if set(self.scales) != set(widths):
                raise ParameterError(f"scales must name the same columns as bounds {sorted(widths)}")
            lam = {c: float(self.scales[c]) for c in widths}
            if any(not (math.isfinite(v) and v > 0) for v in lam.values()):
                raise PrivacyError(f"scales must be finite and > 0, got {dict(self.scales)}")
            return lam, {c: widths[c] / lam[c] for c in widths}
        eps = self.epsilon
        if isinstance(eps, bool) or not isinstance(eps, (int, float)) or not math.isfinite(eps) or eps <= 0:
            raise PrivacyError(f"epsilon must be finite and > 0, got {eps!r}")
        eps_j = float(eps) / len(widths)
        return {c: widths[c] / eps_j for c in widths}, {c: eps_j for c in widths}

    def _release_settings(self) -> dict[str, Any]:
        """Settings for a release's record, ``release_settings_``: the public bounds and the
        noise plan (the seed only as whether one was fixed)."""
        return {
            "bounds": {c: [float(a), float(b)] for c, (a, b) in self.bounds.items()},
            "epsilon": self.epsilon,
            "scales": None if self.scales is None else {c: float(v) for c, v in self.scales.items()},
            "binary": list(self.binary),
            "integer": list(self.integer),
            "seed_fixed": seed_fixed(self.seed),
        }

    def fit(self, data: pd.DataFrame, domain: None = None, ledger: PrivacyLedger | None = None) -> LaplaceMechanismGenerator:
        """Release the noisy copy of ``data`` (its ``bounds`` columns), charging ``ledger`` first.

        ``domain`` must be None: the public bounds are the ``bounds`` setting.
        """
        self._start_fit()
        if domain is not None:
            raise ParameterError("LaplaceMechanismGenerator takes its public bounds from its `bounds` setting; "
                                 f"pass domain=None, got {type(domain).__name__}")
        lam, eps = self._plan()
        cols = list(self.bounds)
        if not isinstance(data, pd.DataFrame):
            raise ArgumentTypeError(f"data must be a pandas DataFrame, got {type(data).__name__}")
        missing = [c for c in cols if c not in data.columns]
        if missing:
            raise UnknownColumnError(f"columns {missing} (named in bounds) are not in the data {list(data.columns)}")
        for c in (*self.binary, *self.integer):
            if c not in self.bounds:
                raise UnknownColumnError(f"column {c!r} is marked binary/integer but has no bounds")
        if len(data) == 0:
            raise EmptyDataError("data has no rows")
        x = data[cols].to_numpy(dtype=np.float64)
        if not np.all(np.isfinite(x)):
            raise NonFiniteError(f"columns {cols} contain missing or non-finite values; impute or drop them first")
        total = math.fsum(eps.values())
        ledger = self._ledger_for(PrivacyBudget(total, 0.0), data, ledger)
        # Refuse before any per-column charge, so that no partial charge is ever recorded.
        ledger.check("Laplace-mechanism release", total, 0.0, mechanism="Laplace mechanism per column")
        for c in cols:
            a, b = self.bounds[c]
            ledger.spend(
                f"laplace_synthetic[{c}]", eps[c], 0.0, mechanism="truncated laplace",
                sensitivity_l1=float(b) - float(a), scale=lam[c], bounds=[float(a), float(b)],
            )
        rng = make_rng(self.seed)
        z = np.empty_like(x)
        for j, c in enumerate(cols):
            a, b = (float(v) for v in self.bounds[c])
            z[:, j], lam[c] = laplace(np.clip(x[:, j], a, b), sensitivity=b - a, epsilon=eps[c])
        # the shuffle is no part of the guarantee (each row is private on its own); it hides the input order
        z = z[rng.permutation(len(z))]
        out = pd.DataFrame(z, columns=cols)
        for c in self.integer:
            out[c] = np.round(out[c])
        for c in self.binary:
            a, b = (float(v) for v in self.bounds[c])
            out[c] = np.where(out[c] > (a + b) / 2, b, a)
        self.synthetic_ = out
        self.ledger_ = ledger
        self.n_ = len(out)
        self.seed_fixed_ = seed_fixed(self.seed)
        self.scales_, self.epsilons_ = lam, eps
        self.privacy_ = {
            "mechanism": "truncated Laplace (Wilde et al. 2021, Proposition 3)",
            "epsilon": total,
            "delta": 0.0,
            "composition": "basic over columns: epsilon = sum_j (b_j - a_j) / lambda_j",
            "seed_fixed": seed_fixed(self.seed),
        }
        self._fit_complete()
        return self

    def _summary_details(self) -> list[str]:
        return ["  Laplace scales: " + ", ".join(f"{c} {lam:.4g}" for c, lam in self.scales_.items())]

    def generate(self, m: int, n: int | None = None, seed: SeedLike = None) -> list[pd.DataFrame]:
        """``[the released rows]`` (post-processing: no further privacy cost); ``m`` must be 1.

        With ``n`` smaller than ``n_``, a random subset of ``n`` released rows (without
        replacement, in their released order): the mechanism releases one noisy row per real
        row, so it cannot produce more.
        """
        self._check_fitted()
        m, n = self._check_m_n(m, n)
        if m != 1:
            raise ParameterError(f"the Laplace mechanism releases one dataset (more would need more budget); m={m} asked")
        if n > self.n_:
            raise ParameterError(f"n must be at most the {self.n_} released rows, got {n}")
        if n == self.n_:
            return [self.synthetic_.copy()]
        idx = self._generate_rng(seed).choice(self.n_, size=n, replace=False)
        return [self.synthetic_.iloc[np.sort(idx)].reset_index(drop=True)]


def laplace_synthetic(x: np.ndarray, bounds: tuple[float, float], lam: float) -> np.ndarray:
    """The one-column mechanism on an array, for simulation studies: ``clip(x, a, b) + Laplace(0, lam)``.

    Guarantee: (b - a)/lam-DP per released value (Proposition 3); the noise is OpenDP's
    grid-based Laplace (:func:`synthinfer.privacy.samplers.laplace`), as in the generator. This
    helper does not touch a ledger; it is for studies on simulated data (e.g. the Gaussian
    experiment of A.6.3), not for releases of real data, which go through
    :class:`LaplaceMechanismGenerator`.
    """
    a, b = (float(v) for v in bounds)
    return laplace(np.clip(np.asarray(x, dtype=np.float64), a, b), sensitivity=b - a, epsilon=(b - a) / lam)[0]
