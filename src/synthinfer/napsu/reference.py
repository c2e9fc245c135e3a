"""The reference assignment ``x*`` of the canonical parametrisation, chosen from noisy counts.

Every choice of reference spans the same family of distributions (NAPSU-MQ Supplement C;
:mod:`synthinfer.napsu.queries`), but the cells with a reference component are the ones whose
probabilities involve many parameters at once. If such a cell is (nearly) empty, the posterior
has a one-sided, prior-dominated direction that no coordinate follows, which is what makes
NUTS slow on Adult (e.g. ``(age 75-90, Federal-gov)`` with 4 rows when ``Federal-gov`` is the
reference). With each column's most frequent category as the reference
(:func:`most_frequent_reference`) those cells are the large ones in most rows, and most
near-empty cells own their parameter. Not all: in a rare row every cell is small against the
summed noise of its row (Adult's ``(age 75-90, Married-civ-spouse)``, implied count ~140 +- 70,
is dropped and can empty), and no choice of reference avoids that; NUTS's one-sided map
(:mod:`synthinfer.napsu.reparam`) therefore works on every cell's log count, not on the
parameters' axes. Structural zeros next to a frequent category are a second case
(:func:`well_measured_reference`). The prior ``N(0, 10^2 I)`` on ``theta`` is stated relative
to the reference; the paper does not say which one it used, so this is a choice within the
specification, not a change of model family.

Every choice here reads *noisy* counts only: post-processing of the mechanism's output, no
privacy cost. Never choose a reference from the raw data.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Literal

import numpy as np

from synthinfer.data.domain import Domain
from synthinfer.errors import DomainError, ParameterError
from synthinfer.napsu.measurements import INTEGER_ROUNDING_VARIANCE, Measurement, combine_repeated

#: A measured table: its columns, its noisy counts (all cells, C order) and the noise sd (a
#: scalar or one per cell).
Table = tuple[Sequence[str], np.ndarray, "np.ndarray | float"]


def complete_reference(domain: Domain, reference: Mapping[str, int] | None) -> dict[str, int]:
    """Every column's reference code: ``reference``'s where given, else 0 (checked)."""
    out = {name: 0 for name in domain.names}
    for name, code in (reference or {}).items():
        if name not in out:
            raise DomainError(f"reference: unknown column {name!r}")
        k = domain[name].size
        if not (isinstance(code, (int, np.integer)) and 0 <= int(code) < k):
            raise DomainError(f"reference[{name!r}] must be a category code in [0, {k}), got {code!r}")
        out[name] = int(code)
    return out


def is_whole_table(m: Measurement, domain: Domain) -> bool:
    """Whether ``m`` measures every cell of its marginal, one value each (not a part, nor a
    coarse or weighted table; its cells are distinct and ascending, so all of them in order)."""
    return m.groups is None and m.cells.size == m.marginal.size(domain)


def whole_tables(measurements: Iterable[Measurement], domain: Domain) -> list[Table]:
    """``(columns, values, noise sd)`` of each measurement of a whole marginal, in order."""
    return [(m.marginal.columns, m.values, float(np.sqrt(m.variance)))
            for m in measurements if is_whole_table(m, domain)]


def most_frequent_reference(tables: Iterable[Table], domain: Domain) -> dict[str, int]:
    """Each column's category with the largest noisy count.

    A column's counts come from the first of ``tables`` that holds it (its cells summed over
    the other columns); columns in no table are left out (:func:`complete_reference` gives
    them 0).
    """
    out: dict[str, int] = {}
    for cols, values, *_ in tables:
        shape = tuple(domain[c].size for c in cols)
        values = np.asarray(values, dtype=np.float64)
        if values.size != int(np.prod(shape)):
            raise ParameterError(f"the table of {tuple(cols)} must hold {int(np.prod(shape))} counts, got {values.size}")
        table = values.reshape(shape)
        for axis, name in enumerate(cols):
            if name not in out:
                other = tuple(a for a in range(table.ndim) if a != axis)
                out[name] = int(np.argmax(table.sum(axis=other)))
    return out


def well_measured_reference(
    tables: Iterable[Table],
    domain: Domain,
    start: Mapping[str, int],
    *,
    below: float = 3.0,
    max_sweeps: int = 10,
) -> dict[str, int]:
    """Reference categories under which the cells that fix the main effects are well measured.

    In the reference-coded model (:func:`synthinfer.napsu.queries.interaction_matrix`) a main
    effect ``lambda_c(v)`` is the log-ratio of the cells ``(x_c = v, x* elsewhere)`` and ``x*``,
    and in each measured table those are the cells with at most one component off the
    reference. Where such a cell is (structurally) empty, e.g. ``(Separated, Husband)`` when
    Husband is the reference of relationship, its main effect has only a one-sided bound and
    every interaction of ``v`` must compensate it: a long ridge against the interaction prior
    that NUTS crosses slowly. This picks, by coordinate descent from ``start`` (e.g.
    :func:`most_frequent_reference`), each column's category that minimises the number of such
    cells whose noisy count is below ``below`` noise sd, over the tables of two or more
    columns; ties keep the current choice.
    """
    multi = []
    for cols, table, sd in tables:
        cols = tuple(cols)
        if len(cols) < 2:
            continue
        t = np.asarray(table, dtype=np.float64).reshape([domain[c].size for c in cols])
        multi.append((cols, t < below * np.broadcast_to(np.asarray(sd, dtype=np.float64), t.shape)))
    ref = {c: int(start.get(c, 0)) for c in domain.names}

    def score(columns: set[str]) -> int:
        total = 0
        for cols, weak in multi:
            if not columns & set(cols):
                continue
            grids = np.ix_(*[np.arange(domain[c].size) for c in cols])
            off = sum((g != ref[c]).astype(np.int64) for g, c in zip(grids, cols))
            total += int(np.count_nonzero(weak & (off <= 1)))
        return total

    for _ in range(max_sweeps):
        changed = False
        for c in domain.names:
            if not any(c in cols for cols, _ in multi):
                continue
            current = ref[c]
            best, best_score = current, score({c})
            for k in range(domain[c].size):
                if k == current:
                    continue
                ref[c] = k
                sc = score({c})
                if sc < best_score:
                    best, best_score = k, sc
            ref[c] = best
            changed |= best != current
        if not changed:
            break
    return ref


def automatic_reference(measurements: Sequence[Measurement], domain: Domain,
                        rule: Literal["most_frequent", "well_measured"]) -> dict[str, int]:
    """The reference the fit uses under ``rule``, from its noisy whole-table measurements:
    each column's most frequent category (the first table holding it), then with
    ``"well_measured"`` moved by :func:`well_measured_reference` on the tables with repeated
    measurements combined (:func:`~synthinfer.napsu.measurements.combine_repeated`)."""
    reference = most_frequent_reference(whole_tables(measurements, domain), domain)
    if rule == "well_measured":
        # the floor (the likelihood's rounding variance, sd 0.29) moves no decision on integer
        # noisy counts: any threshold 3 sd in (0, 1] marks exactly the counts <= 0
        combined = combine_repeated(measurements, INTEGER_ROUNDING_VARIANCE)
        reference = well_measured_reference(whole_tables(combined, domain), domain, reference)
    return reference
