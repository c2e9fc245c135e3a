"""Generators follow scikit-learn's settings contract (get_params/set_params, so clone works),
while releases record each fit's settings without the seed's value (release_settings_)."""

import pandas as pd
import pytest
from sklearn.base import clone

from synthinfer.data import Domain
from synthinfer.errors import ParameterError, ReleaseError
from synthinfer.generate import DPCGAN, DPGAN, CallableGenerator, LaplaceMechanismGenerator, NapsuMQ, PrivBayes
from synthinfer.privacy import PrivacyLedger
from synthinfer.release import ReleaseRecord

GENERATORS = [
    lambda: NapsuMQ([("a", "b")], epsilon=0.5, inference="laplace", num_samples=50, seed=7),
    lambda: DPGAN(epsilon=2.0, delta=1e-6, seed=7, epochs=3),
    lambda: DPCGAN(epsilon=2.0, delta=1e-6, seed=7, label="y", label_epsilon_fraction=0.1),
    lambda: PrivBayes(epsilon=1.0, seed=7, degree=1),
    lambda: CallableGenerator(lambda df, eps, delta, rng: [df], epsilon=1.0, delta=0.0, mechanism_name="m", seed=7),
    lambda: LaplaceMechanismGenerator({"x": (0.0, 1.0)}, epsilon=1.0, seed=7),
]


@pytest.mark.parametrize("make", GENERATORS)
def test_clone_copies_every_setting_including_the_seed(make):
    g = make()
    params = g.get_params()
    assert params["seed"] == 7
    c = clone(g)
    assert type(c) is type(g) and c is not g
    cp = c.get_params()
    assert cp.keys() == params.keys()
    for k in params:
        assert cp[k] is params[k] or cp[k] == params[k], k
    c.set_params(epsilon=0.25)
    assert c.epsilon == 0.25 and g.get_params()["epsilon"] == params["epsilon"]
    with pytest.raises(ParameterError, match="no setting 'epsilom'"):
        c.set_params(epsilom=1.0)
    assert "seed" not in repr(g)


@pytest.mark.parametrize("make", GENERATORS)
def test_release_settings_never_hold_the_seed(make):
    settings = make()._release_settings()
    assert "seed" not in settings
    assert settings["epsilon"] == make().epsilon


def test_release_settings_are_those_of_the_fit():
    df = pd.DataFrame({"a": ["x", "y", "x", "y"] * 25, "b": ["u", "u", "v", "v"] * 25})
    dom = Domain({"a": ["x", "y"], "b": ["u", "v"]})
    g = NapsuMQ([("a", "b")], epsilon=0.5, inference="laplace", num_samples=20, seed=7).fit(df, dom)
    g.set_params(epsilon=3.0)  # a later fit would use it; this fit's record stays
    assert g.release_settings_["epsilon"] == 0.5 and "seed" not in g.release_settings_


def test_a_release_record_refuses_get_params_with_a_fixed_seed():
    g = NapsuMQ([("a", "b")], seed=7)
    with pytest.raises(ReleaseError, match="seed"):
        ReleaseRecord(mechanism="napsu-mq", settings=g.get_params(), ledger=PrivacyLedger((1.0, 1e-9)), n=2,
                      seed_fixed=True)
