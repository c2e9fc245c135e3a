import json

import numpy as np
import pandas as pd
import pytest

from synthinfer.data import Binning, Column, Domain, binned_column
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
    ({"name": "h", "bounds": [1, 99], "categories": ["a"]}, "'bounds' and 'bins' go together"),
    ({"name": "h", "bin_edges": [0, 1], "bins": 1}, "not both"),
    ({"name": "h", "bin_edge": [0, 1, 2]}, r"unknown entries \['bin_edge'\]"),
])
def test_domain_descriptions_are_never_coerced(column, message):
    with pytest.raises(DomainError, match=message):
        Domain.from_dict({"columns": [column]})
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
