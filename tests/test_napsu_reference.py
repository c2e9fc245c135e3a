"""The reference assignment chosen from noisy counts (:mod:`synthinfer.napsu.reference`)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from synthinfer.data import Domain, Marginal
from synthinfer.errors import ParameterError
from synthinfer.napsu.measurements import Measurement
from synthinfer.napsu.reference import automatic_reference, most_frequent_reference, well_measured_reference

DOM = Domain({"a": ["a0", "a1", "a2"], "b": ["b0", "b1"], "c": ["c0", "c1", "c2", "c3"]})


def test_most_frequent_reference_reads_each_column_from_its_first_marginal():
    table_ba = np.array([[1.0, 2.0, 9.0], [3.0, 0.0, 4.0]])  # b0: 12, b1: 7; a2 largest
    table_ac = np.zeros((3, 4))
    table_ac[0, 1] = 100.0  # c1 largest; a's count here is ignored (a comes from (b, a))
    tables = [(("b", "a"), table_ba.ravel()), (("a", "c"), table_ac.ravel(), 1.0)]
    assert most_frequent_reference(tables, DOM) == {"b": 0, "a": 2, "c": 1}
    with pytest.raises(ParameterError, match=r"\('b', 'a'\) must hold 6 counts"):
        most_frequent_reference([(("b", "a"), table_ba.ravel()[:-1])], DOM)


MARITAL = ["married", "never", "divorced", "widowed"]
RELATION = ["husband", "wife", "not-in-family", "own-child", "unmarried"]


def _weak_main_effect_cells(tables, dom, ref, below=3.0):
    """Brute force: the cells with at most one column off ``ref`` below ``below`` sd."""
    n = 0
    for cols, t, sd in tables:
        for idx in itertools.product(*[range(dom[c].size) for c in cols]):
            if sum(i != ref[c] for i, c in zip(idx, cols)) <= 1 and t[idx] < below * sd:
                n += 1
    return n


def test_well_measured_reference_moves_off_structural_zeros():
    """Marital status x relationship with the census's structural zeros: husbands and wives are
    married, unmarried partners are not. From the most frequent categories (married,
    husband) the husband column holds three empty main-effect cells; not-in-family none but
    the married one (a small count), own-child two, and not-in-family is chosen. The result never has more weak cells
    than its start, and is the best single change of each column (brute force)."""
    dom = Domain({"m": MARITAL, "r": RELATION, "s": ["male", "female"]})
    mr = np.array([[9000, 1000, 20, 10, 0],
                   [0, 0, 3000, 2500, 600],
                   [0, 0, 1700, 300, 1100],
                   [0, 0, 350, 5, 250]], dtype=float)
    rs = np.array([[9000, 0], [0, 1000], [2600, 2470], [1500, 1480], [350, 1600]], dtype=float)
    tables = [(("m", "r"), mr, 10.0), (("r", "s"), rs, 10.0), (("m",), mr.sum(1), 10.0)]
    start = {"m": 0, "r": 0, "s": 0}
    ref = well_measured_reference(tables, dom, start)
    assert ref["r"] == RELATION.index("not-in-family") and ref["s"] == 0
    assert ref["m"] == MARITAL.index("never")  # moved first (given husband), then a tie with married
    weak = _weak_main_effect_cells(tables[:2], dom, ref)
    assert weak < _weak_main_effect_cells(tables[:2], dom, start)
    for c in dom.names:  # a local optimum: no single column's change has fewer weak cells
        for k in range(dom[c].size):
            assert _weak_main_effect_cells(tables[:2], dom, {**ref, c: k}) >= weak
    # per-cell noise sd, and a table of one column, which fixes no main effect, changes nothing
    assert well_measured_reference([(("m", "r"), mr, np.full(mr.shape, 10.0))], dom, start) == ref
    assert well_measured_reference([(("m",), mr.sum(1), 10.0)], dom, start) == start


def test_automatic_reference_reads_whole_tables_and_combines_repeats_for_well_measured():
    """Most frequent: the first whole table holding a column (a part of a table, or a later
    repeat, is not read). Well measured: repeats combined by inverse-variance weighting, so
    two noisy measurements of a near-empty main-effect cell count as one better one."""
    dom = Domain({"m": MARITAL, "r": RELATION})
    mr = np.array([[9000, 1000, 20, 10, 0],
                   [0, 0, 3000, 2500, 600],
                   [0, 0, 1700, 300, 1100],
                   [0, 0, 350, 5, 250]], dtype=float)
    pair = Marginal(("m", "r"))
    part = Measurement(Marginal(("r",)), np.array([0.0, 1e6]), 100.0, cells=np.array([0, 1]))  # not whole: ignored
    whole = Measurement(pair, mr.ravel(), 100.0)
    assert automatic_reference([part, whole], dom, "most_frequent") == {"m": 0, "r": 0}
    moved = automatic_reference([part, whole], dom, "well_measured")
    assert moved == well_measured_reference([(("m", "r"), mr, 10.0)], dom, {"m": 0, "r": 0})
    assert moved["r"] == RELATION.index("not-in-family")
    # m's main effect is fixed by (x, s) under reference (x, p): 25 +- 10 and 35 +- 10 in two
    # repeats. Alone the first is below 3 sd and moves m's reference to y; combined (30 +- 7.1)
    # the cell is not weak, and m stays at x, its most frequent category
    two = Domain({"m": ["x", "y"], "r": ["p", "q", "s"]})
    low = np.array([[5000.0, 5000.0, 25.0], [1000.0, 1000.0, 1000.0]])
    high = low.copy()
    high[0, 2] = 35.0
    pair2 = Marginal(("m", "r"))
    assert automatic_reference([Measurement(pair2, low.ravel(), 100.0)], two, "well_measured") == {"m": 1, "r": 0}
    repeats = [Measurement(pair2, low.ravel(), 100.0), Measurement(pair2, high.ravel(), 100.0)]
    assert automatic_reference(repeats, two, "most_frequent") == {"m": 0, "r": 0}
    assert automatic_reference(repeats, two, "well_measured") == {"m": 0, "r": 0}
