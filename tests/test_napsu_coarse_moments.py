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
    assert q.columns == ("age",) and q.cells.size == 12 and q.groups.max() == 3  # 2 groups x 2 incomes
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


def _two_numbers_domain():
    """Numbers ``a`` (6 uneven bins, groups of 2, 1 and 3 categories) and ``b`` (4 bins, groups
    of 1 and 3) with group columns, and a binary ``c``."""
    from synthinfer.data import Binning, Column, Domain

    ba, bb = Binning((0., 1., 3., 4., 10., 11., 12.)), Binning((0., 2., 5., 6., 9.))  # uneven bins
    la, lb = list(ba.labels()), list(bb.labels())
    ga, gb = ["g0", "g0", "g1", "g2", "g2", "g2"], ["h0", "h1", "h1", "h1"]  # g1 and h0 hold one category
    dom = Domain([Column("a", tuple(la), binning=ba), Column("a_g", ("g0", "g1", "g2"), derived_from="a",
                                                             derive=tuple(zip(la, ga))),
                  Column("b", tuple(lb), binning=bb), Column("b_g", ("h0", "h1"), derived_from="b",
                                                             derive=tuple(zip(lb, gb))),
                  Column("c", (0, 1))])
    return dom, la, lb, ga, gb


def _brute_force_sensitivity(marginal, maps, scores, domain, products):
    """Squared L2 change of (coarse table, moment tables) over every substitution of one row."""
    from synthinfer.napsu.coarse import coarse_groups

    groups = coarse_groups(marginal, maps, domain)
    qs = moment_queries(marginal, maps, scores, domain, products=products)

    def stats(cell):
        table = np.zeros(int(groups.max()) + 1)
        table[groups[cell]] = 1.0
        parts = [table]
        for q in qs:
            v = np.zeros(int(q.groups.max()) + 1)
            hit = np.flatnonzero(q.cells == cell)
            if hit.size:
                v[q.groups[hit[0]]] = q.weights[hit[0]] / MOMENT_SCALE
            parts.append(v)
        return np.concatenate(parts)

    all_stats = [stats(c) for c in range(groups.size)]
    return max(float(np.sum((x - y) ** 2)) for x in all_stats for y in all_stats), groups, qs


@pytest.mark.parametrize("products", [False, True])
def test_squared_sensitivity_matches_brute_force(products):
    from synthinfer.napsu.coarse import coarse_versions

    dom, *_ = _two_numbers_domain()
    model = dom.without_derived()
    scores = {"a": dom.midpoints("a"), "b": dom.midpoints("b")}
    for named in [("a_g", "b_g", "c"), ("a_g", "c"), ("a_g", "b_g"), ("a", "b_g")]:
        ((cols, maps),) = coarse_versions([named], dom)
        marginal = Marginal(cols)
        expected, groups, qs = _brute_force_sensitivity(marginal, maps, scores, model, products)
        got = squared_sensitivity(groups, [(q.cells, q.weights / MOMENT_SCALE) for q in qs])
        assert got == pytest.approx(expected, abs=1e-12), named
    # closed forms: a plain table 2; one moment 4; two moments 8, and with their product still 8
    assert squared_sensitivity(None) == 2.0
    assert squared_sensitivity(np.array([0, 0, 1, 1]), [(np.arange(4), np.array([-1.0, 1.0, -1.0, 1.0]))]) == 4.0
    x, y = np.repeat([-1.0, 1.0], 2), np.tile([-1.0, 1.0], 2)  # one coarse cell, the four corners
    assert squared_sensitivity(np.zeros(4, int), [(np.arange(4), x), (np.arange(4), y)]) == 8.0
    assert squared_sensitivity(np.zeros(4, int), [(np.arange(4), x), (np.arange(4), y), (np.arange(4), x * y)]) == 8.0
    with pytest.raises(ValueError, match="normalised"):
        squared_sensitivity(np.zeros(2, int), [(np.arange(2), np.array([0.0, 2.0]))])


def test_product_moment_queries_match_the_rows_sums():
    dom, la, lb, ga, gb = _two_numbers_domain()
    model = dom.without_derived()
    scores = {"a": dom.midpoints("a"), "b": dom.midpoints("b")}
    from synthinfer.napsu.coarse import coarse_versions

    ((cols, maps),) = coarse_versions([("a_g", "b_g")], dom)
    qs = moment_queries(Marginal(cols), maps, scores, model, products=True)
    assert [q.columns for q in qs] == [("a",), ("b",), ("a", "b")]
    rng = np.random.default_rng(3)
    ai, bi = rng.integers(0, 6, 500), rng.integers(0, 4, 500)
    table = np.zeros((6, 4), np.int64)
    np.add.at(table, (ai, bi), 1)

    def centred(x, group):  # (x - centre) / half of the row's group; NaN for a group of one value
        lo = np.array([x[group == g].min() for g in group])
        hi = np.array([x[group == g].max() for g in group])
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(hi > lo, (x - (hi + lo) / 2) / ((hi - lo) / 2), np.nan)

    wa = centred(scores["a"], np.array(ga))[ai]
    wb = centred(scores["b"], np.array(gb))[bi]
    cell = np.array([int(g[1]) for g in np.array(ga)[ai]]) * 2 + np.array([int(g[1]) for g in np.array(gb)[bi]])
    keep = np.isfinite(wa) & np.isfinite(wb)  # cells where both groups have a range: (g0, h1), (g2, h1)
    expected = [np.rint(MOMENT_SCALE * wa[keep & (cell == k)] * wb[keep & (cell == k)]).sum() for k in (1, 5)]
    np.testing.assert_array_equal(qs[2].values(table), expected)


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


@pytest.mark.parametrize("kind", ["linear", "bilinear"])
def test_two_numeric_coarse_columns_in_one_marginal_keep_the_stated_sensitivity(monkeypatch, kind):
    """k = 2 moment tables in one marginal, and with ``"bilinear"`` their product (squared
    sensitivity 8 either way), groups of one category (no moment) and a fine 1-way of one of the
    numbers (the coarse ``(a_g, c)`` is dropped: the 3-way determines it): every substitute of a
    row stays within the stated sensitivity, and a row moving edge to edge inside its coarse
    cell attains it."""
    import synthinfer.napsu.estimator as est

    dom, la, lb, ga, gb = _two_numbers_domain()
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
                    coarse_interactions=kind, seed=0).fit(frame, dom)
        return seen[-1]

    base, kw = measured(df)
    assert kw["sensitivity"] ** 2 == pytest.approx(8 + 2)  # two moments (and their product), the fine 1-way
    assert base.size == 12 + 8 + 6 + (4 if kind == "bilinear" else 0) + 4  # table, 2 moments, product, 1-way
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


@pytest.mark.filterwarnings("ignore::synthinfer.errors.SynthinferWarning")
def test_product_moments_let_two_numbers_covary_inside_each_coarse_cell():
    """Two numbers in 6 bins each, in halves: inside every coarse cell the second rises with the
    first. With ``"bilinear"`` the model's within-cell covariance follows the real one; with
    ``"linear"`` (moments alone) the numbers are nearly independent inside each cell."""
    from synthinfer.data import Binning, Column, Domain

    b = Binning(tuple(float(e) for e in range(0, 61, 10)))
    labels = list(b.labels())
    halves = ["lo", "lo", "lo", "hi", "hi", "hi"]
    dom = Domain([Column("x", tuple(labels), binning=b),
                  Column("x_g", ("lo", "hi"), derived_from="x", derive=tuple(zip(labels, halves))),
                  Column("y", tuple(labels), binning=b),
                  Column("y_g", ("lo", "hi"), derived_from="y", derive=tuple(zip(labels, halves)))])
    rng = np.random.default_rng(0)
    n = 30000
    xi = rng.integers(0, 6, n)
    # y's half independent of x; inside it, y's position follows x's position in its half
    yi = 3 * rng.integers(0, 2, n) + np.clip(xi % 3 + rng.choice([-1, 0, 0, 0, 1], n), 0, 2)
    df = pd.DataFrame({"x": np.array(labels)[xi], "x_g": np.array(halves)[xi],
                       "y": np.array(labels)[yi], "y_g": np.array(halves)[yi]})

    def within_cov(table):  # covariance of (x, y) inside each coarse cell, weighted by the cell's mass
        p = table / table.sum()
        out = []
        for gx in (0, 1):
            for gy in (0, 1):
                block = p[3 * gx:3 * gx + 3, 3 * gy:3 * gy + 3]
                block = block / block.sum()
                u = np.arange(3.0)
                mx, my = block.sum(1) @ u, block.sum(0) @ u
                out.append(float(np.sum(block * np.outer(u - mx, u - my))))
        return np.array(out)

    real = within_cov(pd.crosstab(xi, yi).reindex(index=range(6), columns=range(6), fill_value=0).to_numpy())
    assert np.all(real > 0.1)
    cov, slopes, moments = {}, {}, {}
    for kind in ("linear", "bilinear"):
        gen = NapsuMQ([("x_g", "y_g"), ("x",), ("y",)], epsilon=20.0, inference="laplace", seed=1, n_chains=1,
                      num_samples=20, coarse_interactions=kind).fit(df, dom)
        with float64():
            tables = gen.network_.query_marginals(jnp.asarray(gen.draws_[0].mean(0)))
        (pair,) = [np.asarray(t).reshape(6, 6) for t, m in zip(tables, gen.network_.queries.queryset.marginals)
                   if m.columns == ("x", "y")]
        cov[kind] = within_cov(pair)
        slopes[kind] = gen.diagnostics_["ties"]["coarse_slopes"]
        moments[kind] = sum(m.weights is not None for m in gen.measurements_)
    assert slopes["bilinear"] - slopes["linear"] == 4 and moments["bilinear"] - moments["linear"] == 1
    # linear: independent inside a cell, but for the reference categories' missing interactions
    # (reference coding), which leave a little covariance in the cells that hold them
    assert np.all(np.abs(cov["linear"]) < 0.15 * real)
    np.testing.assert_allclose(cov["bilinear"], real, atol=0.03)  # real: about 0.53 in each cell
