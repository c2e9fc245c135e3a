"""Numeric columns' main effects as penalised linear splines (``NapsuMQ(smooth_sd=...)``)."""

from __future__ import annotations

import numpy as np
import pytest
from test_napsu_interactions import _numeric_age_table

from synthinfer.errors import ParameterError, SynthinferWarning
from synthinfer.napsu import CanonicalQueries, NapsuMQ
from synthinfer.napsu.interactions import InteractionFeatures, spline_main_effects


def test_spline_spans_the_main_effects_and_its_knots_are_second_differences():
    df, domain = _numeric_age_table(50)
    model = domain.without_derived()
    x = domain.midpoints("age")  # 20, 30, .., 70: unit 10
    q = CanonicalQueries(model, [("age", "inc")], reference={"age": 2, "inc": 0})
    zero, slopes = spline_main_effects(q, {"age": x}, ratio=0.5)
    main = sorted(zero)  # age's main effects, replaced
    assert len(main) == 5 and len(slopes) == 1 + 4  # the trend and a knot at each interior bin
    f = InteractionFeatures(q, (), zero, slopes)
    assert f.dimension == q.dimension and f.shrunk[-len(slopes):].all()
    E = f.expansion.toarray()[main][:, -len(slopes):]  # main effects x spline parameters
    assert np.linalg.matrix_rank(E) == 5  # every function of the bins that is 0 at the reference

    def curve(phi):  # lambda_age over all six bins, the reference's 0 put back
        lam = np.insert(E @ phi, 2, 0.0)
        return lam

    np.testing.assert_allclose(curve(np.eye(5)[0]), (x - x[2]) / 25.0)  # the trend, per half-range
    for k in range(1, 5):  # a knot's parameter is the change of slope per bin there, times the ratio
        second = np.diff(curve(np.eye(5)[k]), 2)
        np.testing.assert_allclose(second, 0.5 * (np.arange(4) == k - 1), atol=1e-12)


def test_smooth_sd_fits_and_is_checked():
    df, domain = _numeric_age_table(3000)
    gen = NapsuMQ([("age", "inc"), ("age", "race")], epsilon=1.0, inference="laplace", seed=1, n_chains=1,
                  num_samples=20, smooth_sd=0.3).fit(df, domain)
    assert gen.diagnostics_["ties"]["spline_parameters"] == 5
    assert "penalised splines (5 parameters)" in gen.summary()
    assert gen.get_params()["smooth_sd"] == 0.3
    for bad in (0.0, -1.0, float("nan"), "x"):
        with pytest.raises(ParameterError, match="smooth_sd"):
            NapsuMQ([("age", "inc")], epsilon=1.0, smooth_sd=bad).fit(df, domain)
    with pytest.raises(ParameterError, match="'race', which is not a column with numeric bins"):
        NapsuMQ([("age", "inc")], epsilon=1.0, smooth_sd={"race": 0.3}).fit(df, domain)
    with pytest.warns(SynthinferWarning, match=r"columns \['race'\] are in no marginal"):
        gen = NapsuMQ([("age", "inc")], epsilon=1.0, inference="laplace", seed=1, n_chains=1, num_samples=20,
                      smooth_sd={"age": 0.2}).fit(df, domain)
    assert gen.diagnostics_["ties"]["spline_parameters"] == 5
    with pytest.raises(ParameterError, match="interaction_sd"):
        NapsuMQ([("age", "inc")], epsilon=1.0, smooth_sd=0.3, interaction_sd=None).fit(df, domain)
