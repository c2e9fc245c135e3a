"""Moments of numeric columns inside coarse cells: the queries, their sensitivity on neighbouring
datasets, and the slopes they let a linear coarse model recover."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from test_napsu_interactions import BY_HALVES, _numeric_age_table

from synthinfer import float64
from synthinfer._jax import jnp
from synthinfer.data import Marginal
from synthinfer.errors import ParameterError, PrivacyError
from synthinfer.napsu import NapsuMQ
from synthinfer.napsu.coarse import MOMENT_SCALE, moment_queries, squared_sensitivity
from synthinfer.privacy import PrivacyLedger, scaled_discrete_gaussian_mechanism


def test_moment_queries_match_the_rows_sums():
    df, domain = _numeric_age_table(600)
    model = domain.without_derived()
    scores = {"age": domain.midpoints("age")}  # 20, 30, .. 70: groups 20-40 and 50-70
    (q,) = moment_queries(Marginal(("age", "inc")), {"age": BY_HALVES}, scores, model)
    assert q.column == "age" and q.cells.size == 12 and q.groups.max() == 3  # 2 groups x 2 incomes
    table = pd.crosstab(df["age"], df["inc"]).reindex(index=list(domain["age"].categories), fill_value=0).to_numpy()
    # brute force, row by row: (x - centre) / half of the row's age group, summed per (group, inc)
    x = df["age"].map(dict(zip(domain["age"].categories, scores["age"]))).to_numpy()
    centre = np.where(x <= 40, 30.0, 60.0)
    expected = np.zeros((2, 2))
    np.add.at(expected, ((x > 40).astype(int), df["inc"].to_numpy()), np.rint(MOMENT_SCALE * (x - centre) / 10.0))
    np.testing.assert_array_equal(q.values(table), expected.ravel())
    assert np.abs(q.weights).max() == MOMENT_SCALE
    # no scores, or no coarse map: no moments
    assert moment_queries(Marginal(("age", "inc")), {"age": BY_HALVES}, {}, model) == []
    assert moment_queries(Marginal(("age", "inc")), None, scores, model) == []


def test_squared_sensitivity_per_marginal():
    assert squared_sensitivity([0, 0]) == 4  # two plain tables: 2 each
    assert squared_sensitivity([1]) == 4  # one table with one moment: 2 + 2, or 0 + 2^2
    assert squared_sensitivity([2, 0]) == 8 + 2  # two moments: a stay in the cell moves both by 2


def test_moments_keep_the_stated_sensitivity_on_neighbouring_datasets(monkeypatch):
    """What reaches the mechanism, normalised (parts / scale): neighbours (one row substituted)
    differ by at most the stated L2 sensitivity, and a row that stays in its coarse cells while
    its age moves from one edge of its group to the other attains it."""
    import synthinfer.napsu.estimator as est

    seen = []

    def capture(parts, scales, **kw):
        seen.append((np.concatenate([np.asarray(p) / s for p, s in zip(parts, scales)]), kw))
        raise RuntimeError("captured")

    monkeypatch.setattr(est, "scaled_discrete_gaussian_mechanism", capture)
    df, domain = _numeric_age_table(400)
    marginals = [("age_group", "inc"), ("age_group", "race")]

    def measured(frame):
        with pytest.raises(RuntimeError, match="captured"):
            NapsuMQ(marginals, epsilon=1.0, inference="laplace", coarse_interactions="linear", seed=0).fit(frame, domain)
        return seen[-1]

    base, kw = measured(df)
    assert kw["sensitivity"] == pytest.approx(np.sqrt(4 + 4))
    rng = np.random.default_rng(5)
    for _ in range(15):
        other = df.copy()
        i, j = rng.integers(0, len(df), 2)
        other.iloc[i] = df.iloc[j]
        assert np.sum((measured(other)[0] - base) ** 2) <= kw["sensitivity"] ** 2 + 1e-9
    # the worst case: age 20 -> 40 (the young group's edges), income and race unchanged
    i = int(np.flatnonzero(df["age"] == domain["age"].categories[0])[0])
    other = df.copy()
    other.loc[i, "age"] = domain["age"].categories[2]
    assert np.sum((measured(other)[0] - base) ** 2) == pytest.approx(kw["sensitivity"] ** 2)


def test_scaled_mechanism_checks_its_scales():
    ledger = PrivacyLedger((1.0, 1e-6))
    with pytest.raises(PrivacyError, match="positive integers"):
        scaled_discrete_gaussian_mechanism([np.zeros(2, int)], [0], sensitivity=1.0, epsilon=0.5, delta=1e-7,
                                           ledger=ledger)
    noisy, sigma = scaled_discrete_gaussian_mechanism([np.zeros(3, int), np.zeros(2, int)], [1, 8], sensitivity=2.0,
                                                      epsilon=0.5, delta=1e-7, ledger=ledger)
    assert [x.dtype for x in noisy] == [np.int64, np.int64] and sigma > 0
    assert ledger.charges[-1].details["sensitivity_l2"] == 2.0 and ledger.charges[-1].details["scales"] == [1, 8]


@pytest.mark.filterwarnings("ignore::synthinfer.errors.SynthinferWarning")
def test_measured_moments_recover_the_slope_inside_each_group(tmp_path):
    """Income's log-odds rise with age inside each of two age groups: with the moments measured
    the linear coarse model follows them; with constant groups it is flat inside each group."""
    df, domain = _numeric_age_table(20000)
    real = pd.crosstab(df["age"], df["inc"]).to_numpy()
    real = np.log(real[:, 1] / real[:, 0])
    logits = {}
    for kind in ("linear", "constant"):
        gen = NapsuMQ([("age_group", "inc"), ("age_group", "race"), ("age",)], epsilon=20.0, inference="laplace",
                      seed=1, n_chains=1, num_samples=20, coarse_interactions=kind).fit(df, domain)
        with float64():  # the network's programs are float64 (outside, JAX truncates theta to float32)
            table = np.asarray(gen.network_.query_marginals(jnp.asarray(gen.draws_[0].mean(0)))[0]).reshape(6, 2)
        logits[kind] = np.log(table[:, 1] / table[:, 0])
    # the within-group rises (real: about 1.5 and 0.98 nats from each group's first age to its last)
    rise = lambda lg: np.array([lg[2] - lg[0], lg[5] - lg[3]])  # noqa: E731
    np.testing.assert_allclose(rise(logits["linear"]), rise(real), atol=0.3)
    np.testing.assert_allclose(rise(logits["constant"]), 0.0, atol=1e-6)
    moments = [m for m in gen.measurements_ if m.weights is not None]
    assert moments == []  # constant groups measure no moments
    gen = NapsuMQ([("age_group", "inc"), ("age",)], epsilon=5.0, inference="laplace", seed=1, n_chains=1,
                  num_samples=10, coarse_interactions="linear").fit(df, domain)
    (moment,) = [m for m in gen.measurements_ if m.weights is not None]
    assert moment.marginal.columns == ("age", "inc") and moment.values.size == 4
    assert gen.privacy_["l2_sensitivity"] == pytest.approx(np.sqrt(4 + 2))
    assert "moments of numeric columns" in gen.privacy_["mechanism"]
    gen.save(tmp_path / "g.napsu")
    back = NapsuMQ.load(tmp_path / "g.napsu")
    np.testing.assert_array_equal(back.measurements_[-1].weights, moment.weights)
    assert back.layout_ == gen.layout_


def test_linear_moments_refuse_mst_before_any_spend():
    df, domain = _numeric_age_table(500)
    with pytest.raises(ParameterError, match="moments"):
        NapsuMQ([("age_group", "inc")], epsilon=1.0, coarse_interactions="linear", select_extra="mst").fit(df, domain)


def test_a_one_way_beside_coarse_pairs_of_its_column_is_measured_unless_they_determine_it():
    from synthinfer.napsu.coarse import coarse_versions, drop_contained
    from synthinfer.napsu.estimator import _model_marginals

    df, domain = _numeric_age_table(100)

    def kept(marginals):
        return [m.columns for m in drop_contained(_model_marginals(marginals, domain), coarse_versions(marginals, domain))]

    assert kept([("age_group", "inc"), ("age",)]) == [("age", "inc"), ("age",)]  # fine inside the groups
    with pytest.warns(UserWarning, match="determines it"):
        assert kept([("age_group", "inc"), ("age_group",)]) == [("age", "inc")]  # the group totals again
    with pytest.warns(UserWarning, match="determines it"):
        assert kept([("age", "inc"), ("age_group",)]) == [("age", "inc")]


def test_two_numeric_coarse_columns_in_one_marginal_keep_the_stated_sensitivity(monkeypatch):
    """k = 2 moment tables in one marginal (squared sensitivity 8), groups of one category (no
    moment) and a fine 1-way of one of the numbers (the coarse ``(a_g, c)`` is dropped: the
    3-way determines it): every substitute of a row stays within the stated sensitivity, and a
    row moving edge to edge inside its coarse cell attains it."""
    from synthinfer.data import Binning, Column, Domain
    import synthinfer.napsu.estimator as est

    ba, bb = Binning((0., 1., 3., 4., 10., 11., 12.)), Binning((0., 2., 5., 6., 9.))  # uneven bins
    la, lb = list(ba.labels()), list(bb.labels())
    ga, gb = ["g0", "g0", "g1", "g2", "g2", "g2"], ["h0", "h1", "h1", "h1"]  # g1 and h0 hold one category
    dom = Domain([Column("a", tuple(la), binning=ba), Column("a_g", ("g0", "g1", "g2"), derived_from="a",
                                                             derive=tuple(zip(la, ga))),
                  Column("b", tuple(lb), binning=bb), Column("b_g", ("h0", "h1"), derived_from="b",
                                                             derive=tuple(zip(lb, gb))),
                  Column("c", (0, 1))])
    rng = np.random.default_rng(0)
    ai, bi, ci = rng.integers(0, 6, 60), rng.integers(0, 4, 60), rng.integers(0, 2, 60)
    df = pd.DataFrame({"a": np.array(la)[ai], "a_g": np.array(ga)[ai], "b": np.array(lb)[bi],
                       "b_g": np.array(gb)[bi], "c": ci})
    seen = []

    def capture(parts, scales, **kw):
        seen.append((np.concatenate([np.asarray(p) / s for p, s in zip(parts, scales)]), kw))
        raise RuntimeError("captured")

    monkeypatch.setattr(est, "scaled_discrete_gaussian_mechanism", capture)

    def measured(frame):
        with pytest.raises(RuntimeError, match="captured"), pytest.warns(UserWarning, match="determines it"):
            NapsuMQ([("a_g", "b_g", "c"), ("a_g", "c"), ("b",)], epsilon=1.0, inference="laplace",
                    coarse_interactions="linear", seed=0).fit(frame, dom)
        return seen[-1]

    base, kw = measured(df)
    assert kw["sensitivity"] ** 2 == pytest.approx(8 + 2)  # k = 2, and the fine 1-way
    for x, y, z in [(0, 0, 0), (1, 3, 1), (2, 1, 0), (5, 2, 1), (3, 0, 1)]:
        other = df.copy()
        other.loc[0] = [la[x], ga[x], lb[y], gb[y], z]
        assert np.sum((measured(other)[0] - base) ** 2) <= kw["sensitivity"] ** 2 + 1e-9
    # both numbers from one edge of their groups to the other, the coarse cells unchanged: the
    # k = 2 marginal's moments move by 2 each (8), the fine (b,) 1-way by -1 and +1 (2)
    i = int(np.flatnonzero((ai == 0) & (bi == 1))[0])
    other = df.copy()
    other.loc[i, ["a", "b"]] = [la[1], lb[3]]
    assert np.sum((measured(other)[0] - base) ** 2) == pytest.approx(kw["sensitivity"] ** 2)
