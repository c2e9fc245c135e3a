"""The public feature map: [0, 1] scaling with user bounds, one-hot categories, unit L2 ball."""

import numpy as np
import pandas as pd
import pytest

from synthinfer.data import Domain
from synthinfer.errors import DomainError, MissingValueError, OutOfDomainError, UnknownColumnError
from synthinfer.weights import FeatureMap


def test_numeric_and_categorical_features_lie_in_unit_ball():
    df = pd.DataFrame({"age": [20.0, 90.0, 55.0], "sex": ["F", "M", "M"], "edu": ["a", "c", "b"]})
    fm = FeatureMap({"age": (10, 100), "sex": ["F", "M"], "edu": ["a", "b", "c"]})
    assert fm.feature_names == ("age", "sex=M", "edu=b", "edu=c", "(intercept)")
    cube = fm.unit_cube(df)
    np.testing.assert_allclose(cube[:, 0], [10 / 90, 80 / 90, 45 / 90])
    np.testing.assert_array_equal(cube[:, 1:], [[0, 0, 0, 1], [1, 0, 1, 1], [1, 1, 0, 1]])
    x = fm.transform(df)
    assert np.all(np.linalg.norm(x, axis=1) <= 1 + 1e-12)
    assert fm.max_coordinate == pytest.approx(1 / np.sqrt(5))


def test_domain_gives_categorical_features():
    dom = Domain({"a": [0, 1, 2], "b": ["x", "y"]})
    fm = FeatureMap(dom)
    assert fm.dim == 2 + 1 + 1
    x = fm.unit_cube(pd.DataFrame({"a": [2, 0], "b": ["y", "x"]}))
    np.testing.assert_array_equal(x, [[0, 1, 1, 1], [0, 0, 0, 1]])


def test_bounds_never_taken_from_data_and_errors_are_clear():
    df = pd.DataFrame({"age": [5.0, 50.0]})
    with pytest.raises(OutOfDomainError, match="age"):
        FeatureMap({"age": (10, 100)}).transform(df)
    np.testing.assert_allclose(FeatureMap({"age": (10, 100)}, clip=True).unit_cube(df)[:, 0], [0.0, 40 / 90])
    with pytest.raises(UnknownColumnError):
        FeatureMap({"height": (0, 3)}).transform(df)
    with pytest.raises(MissingValueError):
        FeatureMap({"age": (0, 100)}).transform(pd.DataFrame({"age": [1.0, np.nan]}))
    with pytest.raises(DomainError):
        FeatureMap({"age": (100, 10)})
    with pytest.raises(OutOfDomainError, match="'z'"):
        FeatureMap({"s": ["x", "y"]}).transform(pd.DataFrame({"s": ["x", "z"]}))


def test_domain_bins_numbers_of_a_discretised_column():
    from synthinfer.data import Domain, binned_column
    from synthinfer.data.domain import Column

    d = Domain([binned_column("age", edges=[0, 18, 65, 120]), Column("sex", ("F", "M"))])
    fm = FeatureMap(d)
    labels = d["age"].categories
    numbers = pd.DataFrame({"age": [10.0, 30.0, 120.0], "sex": ["F", "M", "M"]})
    as_labels = pd.DataFrame({"age": [labels[0], labels[1], labels[2]], "sex": ["F", "M", "M"]})
    np.testing.assert_array_equal(fm.transform(numbers), fm.transform(as_labels))
    with pytest.raises(OutOfDomainError, match="'age'.*public bounds"):
        fm.transform(numbers.assign(age=[10.0, 30.0, 130.0]))
    np.testing.assert_array_equal(FeatureMap(d, clip=True).transform(numbers.assign(age=[10.0, 30.0, 130.0])),
                                  fm.transform(numbers))


def test_features_of_a_domain_with_continuous_columns_match_the_short_spelling():
    from synthinfer.data import Continuous

    spec = {"age": (10, 100), "sex": ["F", "M"], "edu": ["a", "b", "c"]}
    dom = Domain.from_json('{"columns": [{"name": "age", "bounds": [10, 100]}, {"name": "sex", "categories": ["F", "M"]},'
                           ' {"name": "edu", "categories": ["a", "b", "c"]}]}')
    assert FeatureMap(spec).domain == dom and isinstance(dom["age"], Continuous)
    df = pd.DataFrame({"age": [20.0, 90.0, 5.0], "sex": ["F", "M", "M"], "edu": ["a", "c", "b"]})
    from_domain = FeatureMap.from_domain(dom, clip=True)
    assert from_domain.feature_names == FeatureMap(spec).feature_names
    np.testing.assert_array_equal(from_domain.transform(df), FeatureMap(spec, clip=True).transform(df))
    np.testing.assert_allclose(from_domain.unit_cube(df)[:, 0], [10 / 90, 80 / 90, 0.0])
    with pytest.raises(OutOfDomainError, match="'age'.*public bounds"):
        FeatureMap.from_domain(dom).transform(df)
    with pytest.raises(DomainError, match="tuple"):
        FeatureMap({"age": (10, 50, 100)})
    whole = FeatureMap({"n": Continuous("n", 0, 4, integer=True)}, intercept=False)
    np.testing.assert_array_equal(whole.unit_cube(pd.DataFrame({"n": [0, 1, 4]}))[:, 0], [0, 0.25, 1])
    with pytest.raises(OutOfDomainError, match="whole numbers"):
        whole.transform(pd.DataFrame({"n": [1.5]}))


def test_declared_missing_values_and_a_release_text_are_features_as_encode_reads_them():
    """A Domain's MISSING category takes the missing values (it is a category like any other);
    numbers read as floats and a release's text for mixed categories give the same features."""
    from synthinfer.data import MISSING, with_missing_category

    dom = with_missing_category(Domain.from_dict({"columns": [
        {"name": "grade", "categories": [1, 2, 3]}, {"name": "age", "bin_edges": [0, 18, 65, 120]}]}))
    fm = FeatureMap(dom)
    real = pd.DataFrame({"grade": [1.0, np.nan, 3.0], "age": [10.0, np.nan, 70.0]})
    text = pd.DataFrame({"grade": ["1", MISSING, "3"], "age": [10.0, np.nan, 70.0]})
    np.testing.assert_array_equal(fm.unit_cube(real), fm.unit_cube(text))
    np.testing.assert_array_equal(fm.unit_cube(real)[1], [0, 0, 1, 0, 0, 1, 1])
    with pytest.raises(MissingValueError, match="'grade'.*missing"):
        FeatureMap(Domain.from_dict({"columns": [{"name": "grade", "categories": [1, 2, 3]}]})).transform(real)
