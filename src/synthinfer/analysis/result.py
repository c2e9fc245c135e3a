"""The combined result of an analysis over m synthetic datasets (statsmodels-like)."""

from __future__ import annotations

import re

from collections.abc import Sequence

import numpy as np
import pandas as pd

from synthinfer.analysis.combining import CombinedEstimate
from synthinfer.analysis.models import FitRecord
from synthinfer.analysis.multivariate import WaldTestResult, reiter_wald_test
from synthinfer.errors import AnalysisError, ParameterError


def _fmt(x: float) -> str:
    if not np.isfinite(x):
        return str(x)
    return f"{x:.3e}" if x != 0 and not 1e-3 <= abs(x) < 1e5 else f"{x:.4f}"


def _fmt_p(p: float) -> str:
    return str(p) if not np.isfinite(p) else ("<0.001" if p < 1e-3 else f"{p:.3f}")


def _fmt_df(d: float) -> str:
    return str(d) if not np.isfinite(d) else (f"{d:.3g}" if d < 10 else f"{d:.1f}")


class MIResult:
    """Estimates and intervals valid for the population, from m synthetic datasets.

    Combined with Rubin's rules for fully synthetic data (Räisä et al. 2023, Supplement B) per
    coefficient; joint tests with Reiter's (2005) rules (:meth:`wald_test`).

    Attributes
    ----------
    params, bse, tvalues, pvalues, df : per-coefficient ``pd.Series`` (estimate q̄, standard
        error √T*, t statistic, two-sided p-value, degrees of freedom ν).
    cov : combined covariance ``pd.DataFrame``: T_f = (1 + 1/m) B - Ū over the datasets with all
        coefficients, with the diagonal replaced by T* (so it matches ``bse``). It need not be
        positive definite (T_f is a difference of two estimates).
    combined : the underlying :class:`CombinedEstimate`.
    records : one :class:`FitRecord` per dataset (failures included).
    n_dropped : per coefficient, how many estimates the variance threshold removed.
    separated : indices of the datasets whose logit/probit design was (quasi-)completely
        separated (empty for other models); ``separation`` : the remedy applied to them
        (``"penalty"``, ``"drop"`` or ``"ignore"``); ``n_separated`` : their number;
        ``separation_note`` : one line saying both (None when no dataset was separated).
    absent_columns : per dataset index, the design columns absent from it (a category with no
        rows), whose coefficients that dataset does not estimate.
    """

    def __init__(
        self,
        combined: CombinedEstimate,
        records: list[FitRecord],
        estimates: np.ndarray,
        covariances: np.ndarray,
        *,
        formula: str | None,
        model: str,
        n: int | None,
        n_syn: float,
        alpha: float,
        n_dropped: np.ndarray,
        options: dict,
    ):
        self.combined = combined
        self.records = records
        self._q = estimates
        self._U = covariances
        self.formula = formula
        self.model = model
        self.n = n
        self.n_syn = n_syn
        self.alpha = alpha
        self.options = options
        self.names = list(combined.names)
        self.n_dropped = pd.Series(n_dropped, index=self.names, name="n_dropped")

    # -- per-coefficient results ------------------------------------------------------------
    def _series(self, values, name: str) -> pd.Series:
        return pd.Series(np.asarray(values), index=self.names, name=name)

    @property
    def params(self) -> pd.Series:
        return self._series(self.combined.q_bar, "estimate")

    @property
    def bse(self) -> pd.Series:
        return self._series(self.combined.se, "std_err")

    @property
    def tvalues(self) -> pd.Series:
        return self._series(self.combined.tvalues(), "t")

    @property
    def pvalues(self) -> pd.Series:
        return self._series(self.combined.pvalues(), "p_value")

    @property
    def df(self) -> pd.Series:
        return self._series(self.combined.df, "df")

    @property
    def m(self) -> int:
        """Number of datasets combined (fit succeeded and not left out for separation)."""
        return sum(r.used for r in self.records)

    @property
    def separated(self) -> list[int]:
        return [r.index for r in self.records if r.separated]

    @property
    def n_separated(self) -> int:
        return len(self.separated)

    @property
    def separation(self) -> str | None:
        return self.options.get("separation")

    @property
    def absent_columns(self) -> dict[int, tuple[str, ...]]:
        return {r.index: r.dropped_columns for r in self.records if r.dropped_columns}

    @property
    def failed(self) -> list[FitRecord]:
        return [r for r in self.records if not r.ok]

    @property
    def cov(self) -> pd.DataFrame:
        k = len(self.names)
        # complete cases over the coefficients that any dataset estimated
        estimated = np.any(np.isfinite(self._q), axis=0)
        complete = np.all(np.isfinite(self._q[:, estimated]), axis=1)
        if complete.sum() >= 2:
            q, U = self._q[complete], self._U[complete]
            m = q.shape[0]
            dev = q - q.mean(axis=0)
            with np.errstate(invalid="ignore"):
                T = (1.0 + 1.0 / m) * (dev.T @ dev) / (m - 1) - U.mean(axis=0)
        else:
            T = np.full((k, k), np.nan)
        T[np.diag_indices(k)] = self.combined.T_star
        return pd.DataFrame(T, index=self.names, columns=self.names)

    def cov_params(self) -> pd.DataFrame:
        """:attr:`cov` under statsmodels' name for it."""
        return self.cov

    def conf_int(self, alpha: float | None = None) -> pd.DataFrame:
        """(1 - alpha) intervals q̄ ± t_{ν, 1-α/2} √T*, columns ``lower`` and ``upper``
        (default: the ``alpha`` the analysis was run with, as in :meth:`summary`)."""
        ci = self.combined.conf_int(self.alpha if alpha is None else alpha)
        return pd.DataFrame(ci, index=self.names, columns=["lower", "upper"])

    def to_frame(self, alpha: float | None = None) -> pd.DataFrame:
        """One row per coefficient: estimate, std_err, t, p_value, interval, df, m, fallback,
        n_dropped, and the ingredients b, v_bar, r of the combining rules."""
        out = self.combined.to_frame(self.alpha if alpha is None else alpha)
        out.index = self.names
        out.insert(out.columns.get_loc("fallback") + 1, "n_dropped", self.n_dropped.to_numpy())
        return out

    # -- joint tests --------------------------------------------------------------------------
    def _select(self, term: str) -> list[str]:
        """The estimated coefficients ``term`` names: itself, or a factor's levels however the
        factor is written; in a multi-equation model (names ``"y=1: x"``) in every equation.
        Levels estimated in no dataset (a category absent everywhere) are not testable."""
        estimated = np.any(np.isfinite(self._q), axis=0)
        bare = [nm.split(": ", 1)[1] if ": " in nm else nm for nm in self.names]
        return [nm for nm, b, est in zip(self.names, bare, estimated, strict=True)
                if est and (nm == term or b == term
                            or ("[" in b and _variable(b.split("[", 1)[0]) == _variable(term)))]

    def wald_test(self, terms: Sequence[str] | str | None = None, *, r_matrix=None, null=None) -> WaldTestResult:
        """Reiter (2005) test that the named coefficients are jointly ``null`` (default 0).

        ``terms`` may name coefficients, or a factor selecting all its levels: as written in
        the formula (``"C(race, Treatment('White'))"``), or just ``"C(race)"`` or ``"race"``;
        or be linear hypotheses in statsmodels' syntax, comma separated (``"age = 0, x1 = 2 *
        x2"``, parsed by patsy's ``DesignInfo.linear_constraint`` over the coefficient names);
        or pass a restriction matrix ``r_matrix`` (k x p) for H0: R β = null.
        """
        if r_matrix is None and isinstance(terms, str) and "=" in terms and not self._select(terms):
            # not a coefficient or factor (names hold "=" too: "y=b: x", "Treatment(reference='b')")
            import patsy

            if null is not None:
                raise ParameterError("a hypothesis written with '=' holds its own constants; leave out null")
            try:
                constraint = patsy.DesignInfo(list(self.names)).linear_constraint(terms)
            except patsy.PatsyError as e:
                raise ParameterError(f"hypothesis {terms!r}: {getattr(e, 'message', e)}; coefficients: "
                                     f"{self.names}") from None
            r_matrix, null = constraint.coefs, constraint.constants[:, 0]
        if r_matrix is None:
            if terms is None:
                raise ParameterError("give the terms to test (or r_matrix)")
            if isinstance(terms, str):
                chosen = self._select(terms)
            else:
                chosen = list(terms)
            unknown = [t for t in chosen if t not in self.names]
            if not chosen or unknown:
                raise ParameterError(f"no such coefficient(s) {unknown or terms!r}; have {self.names}")
            r_matrix = np.zeros((len(chosen), len(self.names)))
            for i, t in enumerate(chosen):
                r_matrix[i, self.names.index(t)] = 1.0
        share = self.options.get("complete_share")
        n = self.n if self.n is None or share is None else self.n * share  # as analyze combined (missing='drop')
        return reiter_wald_test(self._q, self._U, null, r_matrix=r_matrix, n=n, n_syn=self.n_syn)

    # -- presentation -------------------------------------------------------------------------
    def summary(self, alpha: float | None = None):
        """A statsmodels ``Summary`` (``print`` it, or ``.as_text()`` / ``.as_html()``)."""
        from statsmodels.iolib.summary2 import Summary

        a = self.alpha if alpha is None else alpha
        frame = self.to_frame(a)
        table = pd.DataFrame(index=frame.index)
        cols = ["Coef.", "Std.Err.", "t", "P>|t|", f"[{a / 2:g}", f"{1 - a / 2:g}]", "df"]
        for name, src in zip(cols, frame.columns[:7], strict=True):
            fmt = _fmt_p if name == "P>|t|" else (_fmt_df if name == "df" else _fmt)
            table[name] = [fmt(x) for x in frame[src]]
        if frame["n_dropped"].any() or (frame["m"] != self.m).any():
            table["m"] = frame["m"].astype(int).astype(str)
        # without n the fallback T* cannot be formed: those rows have no interval
        no_n = frame["fallback"].to_numpy(bool) & (self.n is None)
        table["note"] = np.where(no_n, "T<=0", np.where(frame["fallback"], "T*", ""))
        info = {
            "Model:": self.model,
            "Formula:": self.formula or "-",
            "Combining rules:": "fully synthetic (Raghunathan et al. 2003; Reiter 2002)",
            "Datasets used:": f"{self.m} of {len(self.records)}",
            "n (private):": "-" if self.n is None else str(self.n),
            "n_syn:": f"{self.n_syn:.10g}",
        }
        if self.options.get("penalty") is not None:
            info["L2 penalty / bootstrap:"] = f"{self.options['penalty']:g} / {self.options['n_bootstrap']}"
        sep = self.separation_note
        if sep:
            info["Separation:"] = sep
        if self.absent_columns:
            info["Absent categories:"] = f"{len(self.absent_columns)} datasets (those coefficients left out there)"
        if self.options.get("complete_share") is not None:
            share = self.options["complete_share"]
            info["Complete cases:"] = f"{share:.1%} of rows (missing='drop')" + (
                "" if self.n is None else f"; n x {share:.3f} = {self.n * share:,.0f} in T*")
        if self.options.get("drop_variance_above") is not None:
            info["Dropped var >=:"] = f"{self.options['drop_variance_above']:g} ({int(self.n_dropped.sum())} estimates)"
        s = Summary()
        s.add_title("Synthetic-data inference (Rubin's rules for fully synthetic data)")
        s.add_dict(info)
        s.add_df(table)
        notes = []
        if frame["fallback"].any() and self.n is not None:
            notes.append("T*: T is below the real data's sampling variance (n_syn/n) v̄, which is used instead, "
                         "with a normal reference.")
        if no_n.any():
            notes.append("T<=0: the combined variance T is not positive, and the fallback T* = (n_syn/n) v̄ needs n "
                         "(the private data's rows: pass n=, a release records it); no interval.")
        if self.failed:
            notes.append(f"{len(self.failed)} fit(s) failed and were left out; see .records.")
        for note in notes:
            s.add_text(note)
        return s

    @property
    def separation_note(self) -> str | None:
        """One line on the separated datasets and what was done, or None if none were."""
        k = self.n_separated
        if not k:
            return None
        done = {
            "penalty": f"refitted with L2 penalty 1e-5, {self.options.get('n_bootstrap')} bootstrap refits",
            "drop": "left out",
            "ignore": "kept as fitted",
        }[self.separation or "ignore"]
        if self.options.get("penalty") is not None:
            done = "fitted with the L2 penalty like all datasets"
        return f"{k} of {len(self.records)} datasets; {done}"

    def __repr__(self) -> str:
        return (
            f"MIResult(model={self.model!r}, formula={self.formula!r}, m={self.m}/{len(self.records)}, "
            f"k={len(self.names)})"
        )


def _variable(term: str) -> str:
    """The variable of a patsy factor term: ``"C(race, Treatment('White'))"`` and ``"C(race)"``
    give ``"race"``; any other term is its own variable."""
    m = re.match(r"\s*C\(\s*([^,)]+?)\s*[,)]", term)
    return m.group(1) if m else term.strip()
