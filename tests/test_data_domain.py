import json

import numpy as np
import pandas as pd
import pytest

from synthinfer.data import Binning, Column, Continuous, Domain, binned_column, decode, encode
from synthinfer.errors import DomainError, DuplicateColumnError, NonPrivateWarning, UnknownColumnError


def test_domain_basics():
    d = Domain({"a": ["x", "y", "z"], "b": [0, 1]})
    assert d.names == ("a", "b")
    assert d.shape == (3, 2)
    assert d.size == 6
    assert d.index("b") == 1
    assert d.project(["b", "a"]).names == ("b", "a")
    assert "a" in d and "c" not in d


def test_unknown_and_duplicate_columns():
    d = Domain({"a": [1, 2]})
    with pytest.raises(UnknownColumnError, match="'zz'"):
        d["zz"]
    with pytest.raises(UnknownColumnError):
        d.project(["a", "zz"])
    with pytest.raises(DuplicateColumnError, match="'a'"):
        d.check_columns(["a", "a"])
    with pytest.raises(DuplicateColumnError):
        Domain([Column("a", (1,)), Column("a", (2,))])


def test_bad_columns():
    with pytest.raises(DomainError, match="twice"):
        Column("a", ("x", "x"))
    with pytest.raises(DomainError, match="no categories"):
        Column("a", ())
    with pytest.raises(DomainError, match="missing"):
        Column("a", ("x", None))
    with pytest.raises(DomainError):
        Domain({})


def test_binning():
    b = Binning.uniform(17, 90, 5)
    np.testing.assert_allclose(b.edges, [17, 31.6, 46.2, 60.8, 75.4, 90])
    np.testing.assert_allclose(b.midpoints, [24.3, 38.9, 53.5, 68.1, 82.7])
    with pytest.raises(DomainError, match="increasing"):
        Binning((0, 2, 1))
    with pytest.raises(DomainError, match="finite"):
        Binning((0, np.inf))
    col = binned_column("age", bounds=(17, 90), bins=5)
    assert col.categories[-1] == "[75.4, 90]"


def test_json_round_trip(tmp_path):
    d = Domain([Column("sex", ("F", "M")), binned_column("age", edges=[0, 18, 65, 120])])
    p = tmp_path / "domain.json"
    d.to_json(p)
    d2 = Domain.from_json(p)
    assert d2 == d
    assert Domain.from_json(d.to_json()) == d
    spec = {"columns": [{"name": "h", "bounds": [1, 99], "bins": 5}]}
    assert Domain.from_dict(spec)["h"].binning.n_bins == 5
    with pytest.raises(DomainError, match="needs 'categories'"):
        Domain.from_dict({"columns": [{"name": "h"}]})
    with pytest.raises(DomainError, match="could not parse"):
        Domain.from_json("{not json")
    json.loads(d.to_json())


@pytest.mark.parametrize("column, message", [
    ({"name": "h", "bounds": [1, 99], "bins": 5.7}, "'bins' must be a whole number"),
    ({"name": "h", "bounds": [1, 99], "bins": True}, "'bins' must be a whole number"),
    ({"name": "h", "bounds": [1, 50, 99], "bins": 5}, r"'bounds' must be \[lower, upper\]"),
    ({"name": "h", "bounds": ["a", "b"], "bins": 5}, "'bounds' must be a list of numbers"),
    ({"name": "h", "bin_edges": 5}, "'bin_edges' must be a list of numbers"),
    ({"name": "h", "bin_edges": [0, "a", 2]}, "'bin_edges' must be a list of numbers"),
    ({"name": "h", "categories": "01"}, "'categories' must be a list"),
    ({"name": "h", "categories": [[0], [1]]}, "categories must be strings or numbers"),
    ({"name": "h", "bounds": [1, 99], "categories": ["a"]}, "continuous column, which has no 'categories'"),
    ({"name": "h", "bins": 5}, "'bins' needs 'bounds'"),
    ({"name": "h", "bounds": [1, 99], "integer": 1}, "'integer' must be true or false"),
    ({"name": "h", "bounds": [1, 2], "bins": 5, "integer": True}, r"bin \[1.2, 1.4\) holds no whole number"),
    ({"name": "h", "categories": [0, 1], "integer": True}, "'integer' belongs to a number column"),
    ({"name": "h", "bounds": [1, 99], "bins": "private"}, r"or \"private:K\""),
    ({"name": "h", "bounds": [1, 99], "bins": "private:-3"}, r"or \"private:K\""),
    ({"name": "h", "bounds": [1, 99], "bins": "private:1"}, "private bins must be a whole number from 2"),
    ({"name": "h", "bounds": [1, 4], "bins": "private:5", "integer": True}, "need at least as many whole numbers"),
    ({"name": "h", "bounds": [1, 99], "bins": "private:5", "categories": ["a"]}, "drop 'categories'"),
    ({"name": "h", "bounds": [1, 99], "bins": 5, "private_edges": True}, "'private_edges'"),
    ({"name": "h", "bin_edges": [0, 1, 2], "private_edges": "yes"}, "'private_edges'"),
    ({"name": "h", "bounds": [0.5, 99], "integer": True}, "whole-number bounds"),
    ({"name": "h", "bounds": [99, 1]}, "lower < upper"),
    ({"name": "h", "bin_edges": [0, 1], "bins": 1}, "not both"),
    ({"name": "h", "bin_edge": [0, 1, 2]}, r"unknown entries \['bin_edge'\]"),
    ({"name": "h", "bounds": [5, 1], "bins": 3}, "lower < upper"),
    ({"name": "h", "bin_edges": [0, 1, 1]}, "strictly increasing"),
])
def test_domain_descriptions_are_never_coerced(column, message):
    with pytest.raises(DomainError, match=message) as err:
        Domain.from_dict({"columns": [column]})
    assert "'h'" in str(err.value)  # every message names the column
    for bad in (5, {"columns": 5}, [1, 2]):
        with pytest.raises(DomainError, match="'columns'"):
            Domain.from_dict(bad)
    assert Domain.from_dict({"columns": [{"name": "h", "bounds": [1, 99], "bins": 5.0}]})["h"].size == 5


def test_from_dataframe_warns():
    df = pd.DataFrame({"a": ["y", "x", None], "b": [2, 1, 1]})
    with pytest.warns(NonPrivateWarning, match="NOT"):
        d = Domain.from_dataframe(df)
    assert d["a"].categories == ("x", "y")
    assert d["b"].categories == (1, 2)


# -- continuous columns ------------------------------------------------------------------------
MIXED = Domain([Continuous("x", 0, 1), Column("sex", ("F", "M")), Continuous("age", 17, 90, integer=True)])


def test_continuous_columns_round_trip_through_json(tmp_path):
    text = MIXED.to_json()
    assert json.loads(text)["columns"][0] == {"name": "x", "bounds": [0.0, 1.0]}
    assert json.loads(text)["columns"][2] == {"name": "age", "bounds": [17.0, 90.0], "integer": True}
    assert Domain.from_json(text) == MIXED
    MIXED.to_json(tmp_path / "d.json")
    back = Domain.from_json(tmp_path / "d.json")
    assert back == MIXED and hash(back) == hash(MIXED)
    assert isinstance(back["x"], Continuous) and (back["x"].lower, back["x"].upper) == (0.0, 1.0)
    # bounds with bins stay a discretised (categorical) column
    binned = Domain.from_dict({"columns": [{"name": "x", "bounds": [0, 1], "bins": 4}]})
    assert isinstance(binned["x"], Column) and binned["x"].size == 4


def test_continuous_domain_is_immutable_and_has_no_cells():
    with pytest.raises(AttributeError):
        MIXED["x"].lower = -1.0
    assert not MIXED.is_finite and Domain({"a": [0, 1]}).is_finite
    assert repr(MIXED) == "Domain(x[0, 1], sex[2], age[17, 90])"
    for no_cells in (lambda: MIXED.shape, lambda: MIXED.size, lambda: MIXED.midpoints("x")):
        with pytest.raises(DomainError, match="'x'"):
            no_cells()
    assert MIXED.project(["sex"]).shape == (2,)
    with pytest.raises(DomainError, match="lower < upper"):
        Continuous("x", 1, 1)
    with pytest.raises(DomainError, match="lower < upper"):
        Continuous("x", 0, float("inf"))


def test_short_spelling_builds_one_domain():
    d = Domain.from_spec({"x": (0, 1), "sex": ["F", "M"], "age": Continuous("other", 17, 90, integer=True)})
    assert d == MIXED
    assert Domain.from_spec(MIXED) is MIXED
    assert Domain.from_spec({"b": np.array([0, 1])})["b"].categories == (0, 1)
    with pytest.raises(DomainError, match="tuple"):
        Domain.from_spec({"x": (1.0, 2.0, 3.0)})
    with pytest.raises(DomainError, match="lower < upper"):
        Domain.from_spec({"x": ("a", "b")})
    with pytest.raises(DomainError, match="non-empty dict"):
        Domain.from_spec({})
    with pytest.raises(DomainError, match="'x'"):
        Domain.from_spec({"x": 3})


def test_codes_refuse_continuous_columns_by_name():
    df = pd.DataFrame({"x": [0.5], "sex": ["F"], "age": [30]})
    for call in (lambda: encode(df, MIXED), lambda: decode(np.zeros((1, 3), int), MIXED)):
        with pytest.raises(DomainError, match=r"continuous.*'x'|'x'.*continuous") as err:
            call()
        assert "bins" in str(err.value)
    np.testing.assert_array_equal(encode(df, MIXED.project(["sex"])), [[0]])


def test_continuous_values_are_checked_against_the_public_bounds():
    from synthinfer.errors import MissingValueError, NonFiniteError, OutOfDomainError

    age = MIXED["age"]
    np.testing.assert_array_equal(age.contains(pd.Series([17, 30.0, 30.5, 91, np.nan, "a"])),
                                  [True, True, False, False, False, False])
    np.testing.assert_array_equal(age.numbers(pd.Series([17, 90])), [17.0, 90.0])
    np.testing.assert_array_equal(age.numbers(pd.Series([10, 95]), clip=True), [17.0, 90.0])
    with pytest.raises(OutOfDomainError, match="'age'.*public bounds"):
        age.numbers(pd.Series([10.0]))
    with pytest.raises(OutOfDomainError, match="whole numbers"):
        age.numbers(pd.Series([30.5]))
    with pytest.raises(MissingValueError, match="'age'"):
        age.numbers(pd.Series([30.0, np.nan]))
    with pytest.raises(NonFiniteError, match="'age'"):
        age.numbers(pd.Series([np.inf]))
    with pytest.raises(DomainError, match="non-numeric"):
        age.numbers(pd.Series(["thirty"]))
    with pytest.raises(DomainError, match="bool"):
        age.numbers(pd.Series([True]))
    np.testing.assert_allclose(age.from_unit(age.to_unit(np.array([17.0, 53.5, 90.0]))), [17.0, 54.0, 90.0])
    np.testing.assert_allclose(MIXED["x"].from_unit(np.array([-0.5, 0.25, 2.0])), [0.0, 0.25, 1.0])


def test_json_missing_true_appends_the_missing_category():
    """``"missing": true`` is with_missing_category for JSON: categorical and binned columns get
    the category last, a derived column follows its source, and the Domain round-trips."""
    from synthinfer.data import MISSING, with_missing_category

    plain = {"columns": [{"name": "g", "bin_edges": [0, 1, 2]}, {"name": "e", "categories": [1, 2]},
                         {"name": "h", "categories": ["a", "b"], "derived_from": "e", "map": [[1, "a"], [2, "b"]]}]}
    spec = {"columns": [dict(plain["columns"][0], missing=True), dict(plain["columns"][1], missing=True),
                        plain["columns"][2]]}
    dom = Domain.from_dict(spec)
    assert dom == with_missing_category(Domain.from_dict(plain), ["g", "e"])
    assert dom["e"].categories == (1, 2, MISSING) and dom["h"].categories[-1] == MISSING
    assert Domain.from_json(dom.to_json()) == dom
    assert Domain.from_dict({"columns": [dict(plain["columns"][1], missing=False)]})["e"].categories == (1, 2)
    with pytest.raises(DomainError, match="'c'.*needs categories or public bins"):
        Domain.from_dict({"columns": [{"name": "c", "bounds": [0, 1], "missing": True}]})
    with pytest.raises(DomainError, match="among its categories but not last"):
        Domain.from_dict({"columns": [{"name": "e", "categories": ["<missing>", "x"], "missing": True}]})
    with pytest.raises(DomainError, match="among its categories but not last"):
        with_missing_category(Domain({"e": ["<missing>", "x"]}), ["e"])
    with pytest.raises(DomainError, match="'missing' must be true or false"):
        Domain.from_dict({"columns": [dict(plain["columns"][1], missing="yes")]})


def test_a_number_outside_two_numeric_categories_suggests_they_were_meant_as_bounds():
    # Domain.from_spec reads a list as categories and a tuple as bounds; [0, 10] for a number
    # column is the likely slip
    from synthinfer.errors import OutOfDomainError

    dom = Domain.from_spec({"x": [0, 10]})
    with pytest.raises(OutOfDomainError, match=r"give them as a tuple \(0, 10\)"):
        encode(pd.DataFrame({"x": [0.5, 3.2]}), dom)
    with pytest.raises(OutOfDomainError) as err:  # whole numbers: plain categories, no hint
        encode(pd.DataFrame({"x": [3, 4]}), dom)
    assert "tuple" not in str(err.value)
