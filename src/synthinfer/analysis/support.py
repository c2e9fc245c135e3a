"""Does a release support an analysis? Which measured marginals a formula's model needs.

Synthetic data answer a downstream question without bias only if the queries the generator
measured carry the information the analysis needs (Räisä et al. 2023, Section 4.1: the marginal
queries must make s an approximate sufficient statistic for the downstream task). For a
generator of the marginal-query family (NAPSU-MQ, AIM) the synthetic data come from the
maximum-entropy distribution p(x) ∝ exp(Σ_M θ_Mᵀ a_M(x_M)), a log-linear model with one
interaction per measured marginal M. Its conditional of the outcome y given the predictors is

    log p(y | x) = Σ_{M ∋ y} θ_M(y, x_M) + const(x),

so y interacts only with the variables it shares a measured marginal with. A logit (or probit)
of y on x₁..x_k corresponds to the log-linear model whose terms involving y are the (y, x_j) (the equivalence
of logit and log-linear models for categorical data; Agresti, *Categorical Data Analysis*),
and an interaction term x₁:x₂ in the formula corresponds to (y, x₁, x₂). Hence the rule checked
here: *for every term of the formula, the outcome's variables together with the term's
variables lie inside one measured marginal* (the intercept needs a marginal containing the
outcome). When a pair (y, x_j) was not measured, the synthetic data have y ⟂ x_j given the
other variables, and the coefficient of x_j is shrunk towards 0 in every synthetic dataset:
Rubin's rules cannot repair that bias.

Interactions among predictors alone (x₁, x₂ without y) do not enter the *form* of the
conditional, but the fitted θ do depend on them: the maximum-entropy model matches the measured
(y, x₁) and (y, x₂) tables while making x₁ ⟂ x₂ | y when no measured marginal holds both. If
the two are associated in the real data beyond what y explains, the synthetic data move part
of x₁'s effect onto x₂ (confounding that the synthetic data do not carry), which again biases
the coefficients. The regression's estimate depends on the covariates' joint distribution,
not only on the (y, x_j) tables. That is a caveat rather than a refusal here, since
requiring the covariates' full joint table would refuse most models (the NAPSU-MQ paper's
Adult logit measures (race, sex) but not (age, race) or (age, sex), and still covers). The
report lists the predictor pairs that no measured marginal contains
(``unmeasured_predictor_pairs``).

For GLMs of other families the same rule is necessary (the model's mean of y given x depends
on x_j only through the shared marginals), though the log-linear correspondence is exact only
for categorical variables.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from synthinfer.errors import ParameterError

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["MISSING_RULES", "SupportReport", "analysed_columns", "check_support", "complete_cases", "formula_columns",
           "formula_message", "required_marginals"]

_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_.]*")
_QUOTED = re.compile(r"""Q\(\s*(['"])(.+?)\1\s*\)""")
_STRING = re.compile(r"""(['"]).*?\1""")


@dataclass(frozen=True)
class SupportReport:
    """Whether the measured marginals cover what a formula's model needs.

    supported : True (every required variable set lies inside a measured marginal), False (some
        do not) or None (unknown: the release records no measured marginals).
    required : the variable sets the model needs, one per formula term (outcome included).
    missing : the required sets that no measured marginal contains.
    marginals : the measured marginals, or None.
    reason : one line for people (what the CLI prints).
    unmeasured_predictor_pairs : pairs of predictor variables that no measured marginal holds
        together: the synthetic data make them independent given the outcome (module
        docstring), so their coefficients are biased where they are associated in the real data.
    """

    supported: bool | None
    required: tuple[tuple[str, ...], ...]
    missing: tuple[tuple[str, ...], ...]
    marginals: tuple[tuple[str, ...], ...] | None
    reason: str
    unmeasured_predictor_pairs: tuple[tuple[str, str], ...] = ()

    def __str__(self) -> str:
        return self.reason


def formula_message(formula: str, error: Exception, where: str = "") -> str:
    """One line for patsy's ``error`` on ``formula`` (patsy's own message spans three lines,
    drawing a caret under the formula; a command-line error is one line): the message and the
    part of the formula it points at."""
    message = getattr(error, "message", str(error))
    origin = getattr(error, "origin", None)
    at = "" if origin is None else (f" (at {origin.code[origin.start:origin.end]!r})" if origin.end > origin.start
                                    else f" (at character {origin.start + 1})")
    return f"formula {formula!r}{where}: {message}{at}"


def _variables(code: str, columns: Sequence[str]) -> set[str]:
    """The data columns a patsy factor's code refers to (plain names and ``Q("...")``; other
    string literals, such as a reference level in ``Treatment('a')``, are not names)."""
    names = {m.group(2) for m in _QUOTED.finditer(code)}
    names |= set(_IDENT.findall(_STRING.sub("", _QUOTED.sub("", code))))
    return {c for c in columns if c in names}


def factor_codes(formula: str) -> list[str]:
    """The code of each distinct factor of ``formula``, outcome and predictors (e.g.
    ``"C(x, Treatment('a'))"``, ``"np.log(z)"``); a formula that does not parse raises
    :class:`ParameterError`."""
    import patsy

    try:
        desc = patsy.ModelDesc.from_formula(formula)
    except patsy.PatsyError as e:
        raise ParameterError(formula_message(formula, e)) from None
    return list(dict.fromkeys(f.name() for t in desc.lhs_termlist + desc.rhs_termlist for f in t.factors))


def formula_columns(formula: str, columns: Sequence[str]) -> list[str]:
    """The ``columns`` that ``formula`` names, outcome and predictors (in ``columns``' order);
    a formula that does not parse raises :class:`ParameterError`."""
    columns = [str(c) for c in columns]
    named = set().union(*(_variables(code, columns) for code in factor_codes(formula)))
    return [c for c in columns if c in named]


MISSING_RULES = ("raise", "drop")


def analysed_columns(data: pd.DataFrame, formula: str, also: Sequence[str] = ()) -> list[str]:
    """The columns of ``data`` that ``formula`` names, and those of ``also`` it has."""
    return formula_columns(formula, list(data.columns)) + [c for c in also if c in data.columns]


def complete_cases(data: pd.DataFrame, formula: str, also: Sequence[str] = ()) -> np.ndarray:
    """Boolean mask of the rows of ``data`` with a value in every column ``formula`` names (and
    in ``also``): the complete cases of statsmodels' ``missing="drop"``."""
    cols = analysed_columns(data, formula, also)
    return data[cols].notna().all(axis=1).to_numpy() if cols else np.ones(len(data), dtype=bool)


def required_marginals(formula: str, columns: Sequence[str]) -> tuple[tuple[str, ...], list[tuple[str, ...]]]:
    """(outcome variables, required variable sets) of ``formula`` over the data ``columns``.

    Each term of the right-hand side needs the outcome's variables together with the term's
    (a term of no variable, the intercept, needs the outcome's alone); sets that another
    required set contains are left out. Raises :class:`ParameterError` when the formula does
    not parse, names no outcome column, or has a term that names no column (a misspelt column;
    a constant term such as ``I(1)`` too, which the intercept already is).
    """
    import patsy

    try:
        desc = patsy.ModelDesc.from_formula(formula)
    except patsy.PatsyError as e:
        raise ParameterError(formula_message(formula, e)) from None
    columns = [str(c) for c in columns]

    def term_vars(term) -> set[str]:
        return set().union(*(_variables(f.name(), columns) for f in term.factors)) if term.factors else set()

    outcome = set().union(*(term_vars(t) for t in desc.lhs_termlist)) if desc.lhs_termlist else set()
    if not outcome:
        raise ParameterError(f"formula {formula!r}: its left-hand side names none of the release's columns {columns}")
    blind = [t.name() for t in desc.rhs_termlist if t.factors and not term_vars(t)]
    if blind:
        raise ParameterError(f"formula {formula!r}: the term(s) {', '.join(blind)} name none of the release's "
                             f"columns {columns}")
    sets = {tuple(sorted(outcome | term_vars(t))) for t in desc.rhs_termlist} or {tuple(sorted(outcome))}
    # a set inside another required set is implied by it
    kept = [s for s in sets if not any(set(s) < set(o) for o in sets)]
    return tuple(sorted(outcome)), sorted(kept, key=lambda s: (len(s), s))


def check_support(
    formula: str, columns: Sequence[str], marginals: Iterable[Sequence[str]] | None, mechanism: str = "this release",
    derived: Mapping[str, str] | None = None,
) -> SupportReport:
    """Check ``formula`` against the measured ``marginals`` (None: not recorded -> unknown).
    ``derived`` maps each derived column of the Domain to its source: a relation with a derived
    column is preserved when the same relation with its source is (the column is a function of it)."""
    outcome, required = required_marginals(formula, columns)
    if derived:
        required = [tuple(dict.fromkeys(derived.get(c, c) for c in s)) for s in required]
    if marginals is None:
        return SupportReport(
            None, tuple(required), (), None,
            f"unknown: {mechanism} records no measured marginals, so whether it preserved the (outcome, predictor) "
            "relations this model needs cannot be checked",
        )
    measured = tuple(tuple(str(c) for c in mg) for mg in marginals)
    missing = tuple(s for s in required if not any(set(s) <= set(mg) for mg in measured))
    predictors = sorted(set().union(*map(set, required)) - set(outcome))
    pairs = tuple((a, b) for i, a in enumerate(predictors) for b in predictors[i + 1:]
                  if not any({a, b} <= set(mg) for mg in measured))
    caveat = ""
    if pairs:
        caveat = (f"; caveat: no measured marginal holds {', '.join('(' + ', '.join(p) + ')' for p in pairs)}, "
                  f"which the synthetic data make independent given {', '.join(outcome)}: coefficients of "
                  "predictors associated in the real data beyond that can be biased")
    if not missing:
        return SupportReport(
            True, tuple(required), (), measured,
            f"yes: every variable set the model needs ({', '.join('(' + ', '.join(s) + ')' for s in required)}) "
            f"is inside a measured marginal{caveat}", pairs,
        )
    return SupportReport(
        False, tuple(required), missing, measured,
        f"no: no measured marginal contains {', '.join('(' + ', '.join(s) + ')' for s in missing)}; the synthetic "
        f"data carry no information on {'that relation' if len(missing) == 1 else 'those relations'} with "
        f"{', '.join(outcome)}, so the coefficients involved are biased towards 0 (Raisa et al. 2023, Section 4.1)"
        f"{caveat}", pairs,
    )
