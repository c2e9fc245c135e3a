"""The model in interaction parameters with near-empty interactions tied (synthinfer.napsu.interactions)."""

from __future__ import annotations

import itertools

import numpy as np
import pandas as pd
import pytest
from models_oracle import all_cells, brute_force
from scipy.special import logsumexp

from synthinfer._jax import jnp
from synthinfer.data import Domain
from synthinfer.errors import ParameterError
from synthinfer.napsu import CanonicalQueries, MarkovNetwork, NapsuMQ
from synthinfer.napsu.interactions import InteractionFeatures, near_empty_ties
from synthinfer.napsu.likelihood import objective, posterior_args
from synthinfer.napsu.queries import interaction_matrix
from synthinfer.napsu.structured import canonical_layout

DOMAIN = Domain({"a": [0, 1, 2], "b": [0, 1, 2, 3], "c": [0, 1, 2], "d": [0, 1]})
MARGINALS = [("a", "b"), ("b", "c", "d"), ("a", "d")]
REFERENCE = {"a": 1, "c": 2}

pytestmark = pytest.mark.usefixtures("float64")


def _scopes(q: CanonicalQueries):
    """Each canonical query's (marginal, scope, values), read off its cell independently of the module."""
    out = []
    for i, flat in zip(q.query_marginal, q.query_cell):
        m = q.marginals[i]
        cell = np.unravel_index(int(flat), m.shape(q.domain))
        on = [(c, int(v)) for c, v in zip(m.columns, cell) if v != q.reference[c]]
        out.append((int(i), tuple(c for c, _ in on), tuple(v for _, v in on)))
    return out


def _some_ties(q: CanonicalQueries) -> list[list[int]]:
    """Every scope of two or more columns with at least two values, tied in full or in part."""
    by_scope: dict = {}
    for j, (i, scope, _) in enumerate(_scopes(q)):
        if len(scope) >= 2:
            by_scope.setdefault((i, scope), []).append(j)
    groups = [g for g in by_scope.values() if len(g) >= 2]
    return [g[: max(2, len(g) - 1)] for g in groups]  # leave one member of larger scopes untied


def _feature_design(q: CanonicalQueries, ties) -> np.ndarray:
    """Brute force: domain cells x parameters, 1[x_D = v] (a tie: 1[x_D in its values])."""
    grid = all_cells(q.domain)
    info = _scopes(q)
    tied = {j: g for g in ties for j in g}
    cols = []
    for j, (_, scope, vals) in enumerate(info):
        if j in tied and tied[j][0] != j:
            continue
        col = np.zeros(len(grid))
        for k in tied.get(j, [j]):
            _, sc, v = info[k]
            idx = [q.domain.index(c) for c in sc]
            col += np.all(grid[:, idx] == np.array(v), axis=1)
        cols.append(col)
    return np.stack(cols, axis=1)


@pytest.mark.parametrize("tie", [False, True])
def test_network_in_interaction_parameters_matches_brute_force(tie):
    q = CanonicalQueries(DOMAIN, MARGINALS, reference=REFERENCE)
    ties = _some_ties(q) if tie else []
    f = InteractionFeatures(q, ties)
    assert f.dimension == q.dimension - sum(len(g) - 1 for g in ties)
    net = MarkovNetwork(f)
    a = _feature_design(q, ties)
    phi = np.random.default_rng(1).normal(scale=0.8, size=f.dimension)
    e = a @ phi
    lz = logsumexp(e)
    p = np.exp(e - lz)
    mu = p @ a
    cov = (a * p[:, None]).T @ a - np.outer(mu, mu)
    assert float(net.log_partition(jnp.asarray(phi))) == pytest.approx(lz, rel=1e-12)
    got_mu, got_cov = net.mean_and_cov(jnp.asarray(phi))
    np.testing.assert_allclose(got_mu, mu, atol=1e-12)
    np.testing.assert_allclose(got_cov, cov, atol=1e-12)
    # the same distribution as the canonical network at theta = M^-1 E phi
    theta = f.to_canonical() @ phi
    _, _, _, joint = brute_force(q, theta)
    np.testing.assert_allclose(joint, p, atol=1e-12)
    M, _ = interaction_matrix(q)
    np.testing.assert_allclose(M @ theta, f.expansion @ phi, atol=1e-12)


def test_untied_interactions_give_the_canonical_posterior_exactly():
    """Under the interaction prior the parameters lambda = M theta (det M = 1) carry the same
    density: the objectives agree at corresponding points, value and gradient (through M)."""
    q = CanonicalQueries(DOMAIN, MARGINALS, reference=REFERENCE)
    canon, feats = MarkovNetwork(q), MarkovNetwork(InteractionFeatures(q))
    rng = np.random.default_rng(2)
    theta = rng.normal(scale=0.7, size=q.dimension)
    M = interaction_matrix(q)[0].toarray()
    y = rng.normal(60, 30, size=q.dimension)
    args = posterior_args(y, 12.0, 900, 10.0, 1.0, 1.5)
    loss_c = objective(canon, "neg_log_posterior")[0]
    loss_f = objective(feats, "neg_log_posterior")[0]
    import jax

    vc, gc = jax.value_and_grad(loss_c)(jnp.asarray(theta), *args)
    vf, gf = jax.value_and_grad(loss_f)(jnp.asarray(M @ theta), *args)
    assert float(vf) == pytest.approx(float(vc), rel=1e-12)
    np.testing.assert_allclose(np.asarray(gc), M.T @ np.asarray(gf), rtol=1e-9, atol=1e-9)


def test_a_tie_is_one_interaction_under_the_prior():
    """Tied: the likelihood is the canonical one at theta = A phi, and the prior counts each
    tied parameter once (N(0, tau^2)) where the canonical prior counts it once per member."""
    q = CanonicalQueries(DOMAIN, MARGINALS, reference=REFERENCE)
    ties = _some_ties(q)
    f = InteractionFeatures(q, ties)
    canon, feats = MarkovNetwork(q), MarkovNetwork(f)
    rng = np.random.default_rng(3)
    phi = rng.normal(scale=0.7, size=f.dimension)
    tau = 1.5
    y = rng.normal(60, 30, size=q.dimension)
    args = posterior_args(y, 12.0, 900, 10.0, 1.0, tau)
    vc = float(objective(canon, "neg_log_posterior")[0](jnp.asarray(f.to_canonical() @ phi), *args))
    vf = float(objective(feats, "neg_log_posterior")[0](jnp.asarray(phi), *args))
    first = {g[0]: g for g in ties}
    extra = 0.0
    for k, mem in enumerate(f.members):
        if mem[0] in first:
            extra += (len(mem) - 1) * (0.5 * (phi[k] / tau) ** 2 + np.log(tau) + 0.5 * np.log(2 * np.pi))
    assert vc - vf == pytest.approx(extra, rel=1e-10)


def test_features_report_cells_and_sums():
    q = CanonicalQueries(DOMAIN, MARGINALS, reference=REFERENCE)
    ties = _some_ties(q)
    f = InteractionFeatures(q, ties)
    s = np.arange(q.dimension, dtype=float)
    sd = np.full(q.dimension, 2.0)
    s_f, sd_f = f.summarise(s, sd)
    for k, mem in enumerate(f.members):
        assert s_f[k] == s[mem].sum() and sd_f[k] == pytest.approx(2.0 * np.sqrt(len(mem)))
    # canonical queries summarise as they are; every feature's cells lie in its host marginal
    assert np.array_equal(q.summarise(s, sd)[0], s)
    for i, cells in zip(f.query_marginal, f.cells):
        assert cells.size and cells.max() < np.prod(q.marginals[i].shape(DOMAIN))
    assert "ties" in repr(f)


def test_bad_ties_raise():
    q = CanonicalQueries(DOMAIN, MARGINALS, reference=REFERENCE)
    info = _scopes(q)
    main = [j for j, (_, sc, _) in enumerate(info) if len(sc) == 1]
    two = [j for j, (_, sc, _) in enumerate(info) if len(sc) == 2]
    other_scope = next(j for j in two if info[j][:2] != info[two[0]][:2])
    same_main = [j for j in main if info[j][:2] == info[main[0]][:2]]  # one column's categories
    assert InteractionFeatures(q, [same_main[:2]]).dimension == q.dimension - 1  # a coarse column's main effects
    with pytest.raises(ParameterError, match="share their marginal and scope"):
        InteractionFeatures(q, [[two[0], other_scope]])
    with pytest.raises(ParameterError, match="more than one tie"):
        same = [j for j in two if info[j][:2] == info[two[0]][:2]]
        InteractionFeatures(q, [same[:2], same[:2]])
    with pytest.raises(ParameterError, match="at least two"):
        InteractionFeatures(q, [[two[0]]])
    with pytest.raises(ParameterError, match="not a canonical query"):
        InteractionFeatures(q, [[two[0], q.dimension]])


def test_near_empty_ties_follow_the_noisy_counts_and_keep_the_analysts_scopes():
    q = CanonicalQueries(DOMAIN, MARGINALS, reference=REFERENCE)
    info = _scopes(q)
    sd = np.full(q.dimension, 10.0)
    s = np.full(q.dimension, 500.0)
    s[[j for j, (_, sc, _) in enumerate(info) if len(sc) >= 2]] = 5.0  # every interaction near empty
    ties = near_empty_ties(q, s, sd, below=3.0)
    expect: dict = {}
    for j, (i, sc, _) in enumerate(info):
        if len(sc) >= 2:
            expect.setdefault((i, sc), []).append(j)
    assert sorted(map(sorted, ties)) == sorted(g for g in expect.values() if len(g) >= 2)
    # a count at 3 sd is not tied (strict), and the analyst's marginal (a, b) keeps its scopes
    s_ab = [j for j, (_, sc, _) in enumerate(info) if set(sc) == {"a", "b"}]
    s[s_ab[0]] = 30.0
    kept = near_empty_ties(q, s, sd, below=3.0, keep=[("a", "b")])
    assert all(set(info[j][1]) != {"a", "b"} for g in kept for j in g)
    assert len(kept) == len(ties) - 1
    with pytest.raises(ParameterError, match="positive"):
        near_empty_ties(q, s, sd, below=0)
    with pytest.raises(ParameterError, match="one noisy count per canonical query"):
        near_empty_ties(q, s[:-1], sd[:-1])


def _sparse_table(n: int = 3000, seed: int = 0) -> tuple[pd.DataFrame, Domain]:
    rng = np.random.default_rng(seed)
    domain = Domain({"a": list("xyz"), "b": list("pqrs"), "c": list("uvw"), "d": ["0", "1"], "e": list("klm")})
    a = rng.choice(3, n, p=[0.7, 0.25, 0.05])
    b = np.where(rng.random(n) < 0.8, a, rng.choice(4, n))
    c = rng.choice(3, n, p=[0.6, 0.3, 0.1])
    d = (rng.random(n) < 0.2 + 0.2 * (c == 0)).astype(int)
    e = np.where(rng.random(n) < 0.9, 0, rng.choice(3, n))
    df = pd.DataFrame({"a": np.array(list("xyz"))[a], "b": np.array(list("pqrs"))[b],
                       "c": np.array(list("uvw"))[c], "d": d.astype(str), "e": np.array(list("klm"))[e]})
    return df, domain


@pytest.mark.filterwarnings("ignore::synthinfer.errors.ConvergenceWarning")
def test_napsu_mq_ties_selected_marginals_and_round_trips(tmp_path):
    df, domain = _sparse_table()
    gen = NapsuMQ([("c", "d")], epsilon=0.5, inference="laplace", select_extra="mst", tie_below=3.0, seed=3,
                  n_chains=1, num_samples=50)
    gen.fit(df, domain=domain)
    ties = gen.diagnostics_["ties"]
    assert gen.network_.dimension == ties["parameters"] < ties["canonical_queries"]
    assert isinstance(gen.queries_, InteractionFeatures)
    assert all(not set(gen.queries_.canonical.marginals[gen.queries_.canonical.query_marginal[g[0]]].columns)
               <= {"c", "d"} for g in gen.queries_.ties)
    assert gen.draws_.shape[-1] == ties["parameters"]
    assert "tied in" in gen.summary()
    syn = gen.generate(2, 100, seed=0)
    assert len(syn) == 2 and syn[0].shape == (100, 5)
    gen.save(tmp_path / "g.napsu")
    back = NapsuMQ.load(tmp_path / "g.napsu")
    assert back.network_.dimension == gen.network_.dimension
    np.testing.assert_array_equal(back.draws_, gen.draws_)
    pd.testing.assert_frame_equal(back.generate(1, 50, seed=1)[0], gen.generate(1, 50, seed=1)[0])


@pytest.mark.filterwarnings("ignore::synthinfer.errors.ConvergenceWarning")
def test_resampling_a_tied_fit_keeps_its_model():
    df, domain = _sparse_table()
    gen = NapsuMQ([("c", "d")], epsilon=0.5, inference="laplace", select_extra="mst", tie_below=3.0, seed=3,
                  n_chains=1, num_samples=50).fit(df, domain=domain)
    ties, d = gen.diagnostics_["ties"], gen.network_.dimension
    with pytest.raises(ParameterError, match="noise-aware"):
        gen.set_params(inference="mle").resample_posterior()
    gen.set_params(inference="laplace", num_samples=80).resample_posterior(seed=0)
    assert gen.diagnostics_["ties"] == ties and gen.draws_.shape == (1, 80, d)
    assert "tied in" in gen.summary() and "sampled again" in gen.summary()


@pytest.mark.filterwarnings("ignore::synthinfer.errors.ConvergenceWarning")
@pytest.mark.filterwarnings("ignore::synthinfer.errors.SynthinferWarning")
def test_summary_says_which_draws_were_set_aside_for_jumps_added_between_passes():
    """The summary's NUTS lines read the backend's record: jumps, their acceptance, and the draws
    per chain set aside when line jumps were added (none: no such clause)."""
    df, domain = _sparse_table()
    gen = NapsuMQ([("c", "d")], epsilon=0.5, inference="laplace", seed=3).fit(df, domain=domain)
    nuts = {"rhat_max": 1.004, "rhat_threshold": 1.01, "rhat_limit_max": 1.01, "ess_bulk_min": 512.0,
            "passes": 2, "draws_per_chain": 400, "divergences": 0, "gradient_evaluations": 12345,
            "earlier_runs": [], "target_accept": 0.8, "plateau_jump_parameters": 2,
            "plateau_jump_acceptance": 0.31, "draws_set_aside": 400}
    gen.diagnostics_ = {**gen.diagnostics_, "nuts": nuts}
    assert ("jumps between a bulk and a second region on 2 parameters, 31% accepted; the 400 draws per chain "
            "before some were added set aside as warmup") in gen.summary()
    gen.diagnostics_["nuts"] = {**nuts, "draws_set_aside": 0}
    assert "31% accepted\n" in gen.summary() + "\n" and "set aside as warmup" not in gen.summary()


@pytest.mark.parametrize("kwargs, match", [
    ({"tie_below": 0}, "tie_below"),
    ({"tie_below": "3"}, "tie_below"),
    ({"tie_below": 3.0, "interaction_sd": None}, "interaction prior"),
    ({"tie_below": 3.0, "inference": "mle"}, "noise-aware"),
])
def test_bad_tie_settings_raise_before_spending(kwargs, match):
    df, domain = _sparse_table(300)
    gen = NapsuMQ([("c", "d")], epsilon=0.5, select_extra="mst", seed=0, **{"inference": "laplace", **kwargs})
    with pytest.raises(ParameterError, match=match):
        gen.fit(df, domain=domain)


def test_canonical_layout_of_features_is_the_canonical_queries():
    q = CanonicalQueries(DOMAIN, MARGINALS, reference=REFERENCE)
    f = InteractionFeatures(q, _some_ties(q))
    assert f.canonical is q and q.canonical is q
    assert canonical_layout(f.canonical) == canonical_layout(q)
    assert f.l2_sensitivity == q.l2_sensitivity and f.kept is q.kept
    assert list(itertools.chain.from_iterable(f.members)) != []


def test_auto_samples_a_model_with_near_empty_ties_with_nuts():
    from synthinfer.napsu.backends import AutoBackend, PosteriorProblem

    q = CanonicalQueries(DOMAIN, MARGINALS, reference=REFERENCE)
    tied = MarkovNetwork(InteractionFeatures(q, _some_ties(q)))
    y = np.full(q.dimension, 50.0)
    sampler, reason = AutoBackend(max_nuts_dimension=0).choose(PosteriorProblem(tied, y, 5.0, 500, 10.0,
                                                                               interaction_sd=1.0,
                                                                               near_empty_tied=True))
    assert sampler == "nuts" and f"d = {tied.dimension} parameters for {q.dimension} canonical queries" in reason
    # ties of coarse columns alone: the size rule, as for an untied model
    assert AutoBackend(max_nuts_dimension=0).choose(PosteriorProblem(tied, y, 5.0, 500, 10.0,
                                                                     interaction_sd=1.0))[0] == "laplace"
    canon = MarkovNetwork(q)
    assert AutoBackend(max_nuts_dimension=0).choose(PosteriorProblem(canon, y, 5.0, 500, 10.0,
                                                                     interaction_sd=1.0))[0] == "laplace"
    # slopes of numeric coarse columns: NUTS whatever the size (Laplace missed such slopes)
    sampler, reason = AutoBackend(max_nuts_dimension=0).choose(PosteriorProblem(tied, y, 5.0, 500, 10.0,
                                                                               interaction_sd=1.0, coarse_slopes=True))
    assert sampler == "nuts" and "slopes of numeric coarse columns" in reason


# -- coarse interactions (marginals naming many-to-one derived columns) -----------------------
AGE = Domain({"age": [0, 1, 2, 3, 4, 5], "race": [0, 1, 2], "inc": [0, 1]})
BY_PAIRS = np.array([0, 0, 1, 1, 2, 2])
BY_HALVES = np.array([0, 0, 0, 1, 1, 1])


def _expected_coarse(q: CanonicalQueries, grouping) -> tuple[list[set[int]], set[int]]:
    """Ties and zeros written out: queries of one scope whose values agree under
    ``grouping(scope)`` (per column: a map, or None for fine) share a parameter, two or more per
    group; a query whose value on a coarse column is in the reference category's group is 0."""
    groups: dict = {}
    zero = set()
    for j, (i, scope, vals) in enumerate(_scopes(q)):
        maps = grouping(scope)
        if all(m is None for m in maps):
            continue
        if any(m is not None and m[v] == m[q.reference[c]] for m, v, c in zip(maps, vals, scope)):
            zero.add(j)
            continue
        key = tuple(v if m is None else m[v] for m, v in zip(maps, vals))
        groups.setdefault((scope, key), set()).add(j)
    return sorted((g for g in groups.values() if len(g) >= 2), key=min), zero


def _as_sets(ties) -> list[set[int]]:
    return sorted((set(g) for g in ties), key=min)


def test_coarse_ties_group_interactions_by_the_maps_and_fine_wins():
    from synthinfer.napsu.interactions import coarse_ties

    q = CanonicalQueries(AGE, [("age", "race"), ("age", "inc")], reference={"age": 0})
    # (age_group, race) and (age, inc): age is coarse with race only
    ties, zero = coarse_ties(q, [(("age", "race"), {"age": BY_PAIRS}), (("age", "inc"), {})])
    expect, expect_zero = _expected_coarse(q, lambda s: [BY_PAIRS if (c == "age" and "race" in s) else None
                                                        for c in s])
    assert _as_sets(ties) == expect and len(expect) == 4  # {2, 3} and {4, 5} x race 1, 2
    assert set(zero) == expect_zero and len(zero) == 2  # age 1 is in the reference's group {0, 1}
    # a marginal naming age itself over the same scope keeps it fine
    assert coarse_ties(q, [(("age", "race"), {"age": BY_PAIRS}), (("age", "race", "inc"), {})]) == ([], [])
    # two coarse versions of one scope: their common refinement; a scope in one of them: its map
    q3 = CanonicalQueries(AGE, [("age", "race", "inc")], reference={"age": 3, "race": 1})
    ties, zero = coarse_ties(q3, [(("age", "race"), {"age": BY_PAIRS}),
                                  (("age", "race", "inc"), {"age": BY_HALVES})])
    both = np.array([BY_PAIRS, BY_HALVES]).T.tolist()
    refine = np.unique(both, axis=0, return_inverse=True)[1].ravel()
    expect, expect_zero = _expected_coarse(q3, lambda s: [(refine if set(s) <= {"age", "race"} else BY_HALVES)
                                                          if c == "age" else None for c in s])
    assert _as_sets(ties) == expect and expect and set(zero) == expect_zero and expect_zero
    # age's main effects: every marginal names age through groups, so they are tied (refinement)
    assert any(len(_scopes(q3)[j][1]) == 1 for g in expect for j in g)


def test_features_with_interactions_fixed_at_zero_match_brute_force():
    from synthinfer.napsu.interactions import coarse_ties

    q = CanonicalQueries(AGE, [("age", "race"), ("age", "inc")], reference={"age": 0})
    ties, zero = coarse_ties(q, [(("age", "race"), {"age": BY_PAIRS}), (("age", "inc"), {})])
    f = InteractionFeatures(q, ties, zero)
    assert f.dimension == q.dimension - sum(len(g) - 1 for g in ties) - len(zero) and f.zero == tuple(sorted(zero))
    # the coarse model by brute force: log p(x) = lambda_age + lambda_race + lambda_inc + lambda_(age,inc)
    # + phi_(group(age), race), with phi = 0 on the reference's group
    rng = np.random.default_rng(0)
    phi = rng.normal(size=f.dimension)
    net = MarkovNetwork(f)
    theta = f.to_canonical() @ phi  # canonical parameters of the same distribution
    p = brute_force(q, theta)[3].reshape(6, 3, 2)
    cond = p.sum(axis=2) / p.sum(axis=(1, 2))[:, None]  # p(race | age)
    for a, b in [(0, 1), (2, 3), (4, 5)]:
        np.testing.assert_allclose(cond[a], cond[b], rtol=1e-10)
    assert np.abs(cond[1] - cond[2]).max() > 1e-3
    table = np.asarray(net.query_marginals(jnp.asarray(phi))[0]).reshape(6, 3)
    np.testing.assert_allclose(table, p.sum(axis=2), rtol=1e-10)
    with pytest.raises(ParameterError, match="more than one tie"):
        InteractionFeatures(q, ties, [ties[0][0]])


def _derived_table(n: int = 4000, seed: int = 0) -> tuple[pd.DataFrame, Domain]:
    from synthinfer.data import Column

    rng = np.random.default_rng(seed)
    age = rng.integers(0, 6, n)
    race = rng.choice(3, n, p=[0.6, 0.3, 0.1])
    inc = (rng.random(n) < 0.2 + 0.1 * age).astype(int)
    group = Column("age_group", ("young", "mid", "old"), derived_from="age",
                   derive=tuple((a, g) for a, g in zip(range(6), np.array(["young", "mid", "old"])[BY_PAIRS])))
    domain = Domain([Column("age", tuple(range(6))), group, Column("race", (0, 1, 2)), Column("inc", (0, 1))])
    df = pd.DataFrame({"age": age, "age_group": np.array(["young", "mid", "old"])[BY_PAIRS[age]],
                       "race": race, "inc": inc})
    return df, domain


@pytest.mark.filterwarnings("ignore::synthinfer.errors.ConvergenceWarning")
def test_napsu_mq_fits_coarse_marginals_of_a_fine_column(tmp_path):
    df, domain = _derived_table()
    gen = NapsuMQ([("age", "inc"), ("age_group", "race")], epsilon=2.0, inference="laplace", seed=1,
                  n_chains=1, num_samples=20).fit(df, domain)
    assert [m.columns for m in gen.marginals_] == [("age", "inc"), ("age", "race")]  # measured fine
    ties = gen.diagnostics_["ties"]
    assert ties["coarse_ties"] == len(gen.queries_.ties) > 0 and ties["near_empty_ties"] == 0
    assert ties["coarse_zero"] == len(gen.queries_.zero) > 0
    assert ties["tie_below"] is None and gen.network_.dimension == ties["parameters"] < ties["canonical_queries"]
    assert "interactions of coarse columns tied" in gen.summary()
    # the coarse model: race's odds do not change between the ages of one group, for every draw
    for theta in gen.draws_[0, :3]:
        table = np.asarray(gen.network_.query_marginals(jnp.asarray(theta))[1]).reshape(6, 3)  # (age, race)
        cond = table / table.sum(axis=1, keepdims=True)  # p(race | age)
        for a, b in [(0, 1), (2, 3), (4, 5)]:
            np.testing.assert_allclose(cond[a], cond[b], rtol=1e-9)
        assert np.abs(cond[1] - cond[2]).max() > 1e-6  # different groups differ
    syn = gen.generate(1, 200, seed=0)[0]
    assert (syn["age_group"].astype(str) == np.array(["young", "mid", "old"])[BY_PAIRS[syn["age"].astype(int)]]).all()
    gen.save(tmp_path / "g.napsu")
    back = NapsuMQ.load(tmp_path / "g.napsu")
    assert back.network_.dimension == gen.network_.dimension
    pd.testing.assert_frame_equal(back.generate(1, 50, seed=1)[0], gen.generate(1, 50, seed=1)[0])


@pytest.mark.parametrize("kwargs, match", [
    ({"interaction_sd": None}, "interaction prior"),
    ({"inference": "mle"}, "noise-aware"),
])
def test_coarse_marginals_need_the_interaction_prior_and_noise_awareness(kwargs, match):
    df, domain = _derived_table(300)
    gen = NapsuMQ([("age", "inc"), ("age_group", "race")], epsilon=1.0, seed=0, **{"inference": "laplace", **kwargs})
    with pytest.raises(ParameterError, match=match):
        gen.fit(df, domain)
    assert not hasattr(gen, "ledger_")


# -- linear coarse interactions (a slope per group of a numeric coarse column) ---------------
AGE_YEARS = np.array([20.0, 30.0, 40.0, 50.0, 60.0, 70.0])  # each age code's number


def test_coarse_slopes_weights_follow_the_groups_centre_and_the_reference():
    from synthinfer.napsu.interactions import coarse_slopes, coarse_ties

    q = CanonicalQueries(AGE, [("age", "race"), ("age", "inc")], reference={"age": 0})
    versions = [(("age", "race"), {"age": BY_HALVES}), (("age", "inc"), {})]
    slopes = coarse_slopes(q, versions, {"age": AGE_YEARS})
    ties, zero = coarse_ties(q, versions)
    info = _scopes(q)
    # every coarse group (tied or fixed at zero) of (age, race) has one slope; (age, inc) is fine
    assert len(slopes) == 4  # 2 age groups x race 1, 2
    for members, weights in slopes:
        assert {info[j][1] for j in members} == {("age", "race")}
        ages = [info[j][2][info[j][1].index("age")] for j in members]
        if set(members) <= set(zero):  # the reference's group {0, 1, 2}: anchored at age 0, h = 10
            assert dict(zip(ages, weights)) == {1: 1.0, 2: 2.0}
        else:  # {3, 4, 5}: centre 60, half-width 10
            assert any(set(members) == set(g) for g in ties)
            assert dict(zip(ages, weights)) == {3: -1.0, 4: 0.0, 5: 1.0}
    # a categorical column (no scores) keeps constant groups; a fine marginal over the scope: none
    assert coarse_slopes(q, versions, {}) == []
    assert coarse_slopes(q, [(("age", "race"), {"age": BY_HALVES}), (("age", "race", "inc"), {})],
                         {"age": AGE_YEARS}) == []


def test_features_with_slopes_match_brute_force_and_are_linear_within_groups():
    from synthinfer.napsu.interactions import coarse_slopes, coarse_ties

    q = CanonicalQueries(AGE, [("age", "race"), ("age", "inc")], reference={"age": 0, "race": 0})
    versions = [(("age", "race"), {"age": BY_HALVES}), (("age", "inc"), {})]
    ties, zero = coarse_ties(q, versions)
    slopes = coarse_slopes(q, versions, {"age": AGE_YEARS})
    f = InteractionFeatures(q, ties, zero, slopes)
    assert f.dimension == q.dimension - sum(len(g) - 1 for g in ties) - len(zero) + len(slopes)
    assert "4 slopes" in repr(f)
    phi = np.random.default_rng(3).normal(size=f.dimension)
    # brute force from the definition: lambda_(age, race)(a, r) = phi_g(a, r) + psi_g(a, r) (x_a - anchor) / h
    info = _scopes(q)
    lam = np.zeros(q.dimension)
    untied = [j for j in range(q.dimension) if j not in zero and not any(j in g for g in ties)]
    params = iter(phi)
    heads = sorted([(j, [j]) for j in untied] + [(g[0], g) for g in ties])
    for _, group in heads:
        lam[group] = next(params)
    for members, weights in slopes:
        lam[members] += next(params) * np.asarray(weights)
    np.testing.assert_allclose(f.expansion @ phi, lam, atol=1e-12)
    grid = all_cells(q.domain)
    log_p = np.zeros(len(grid))
    for j, (_, scope, vals) in enumerate(info):
        idx = [q.domain.index(c) for c in scope]
        log_p += lam[j] * np.all(grid[:, idx] == np.array(vals), axis=1)
    p = np.exp(log_p - logsumexp(log_p))
    net = MarkovNetwork(f)
    assert float(net.log_partition(jnp.asarray(phi))) == pytest.approx(logsumexp(log_p), rel=1e-12)
    table = np.asarray(net.query_marginals(jnp.asarray(phi))[0]).reshape(6, 3)
    joint = p.reshape(6, 3, 2)
    np.testing.assert_allclose(table, joint.sum(axis=2), rtol=1e-10)
    theta = f.to_canonical() @ phi  # the canonical parameters of the same distribution
    np.testing.assert_allclose(brute_force(q, theta)[3], p, atol=1e-12)
    # log p(race = r | age) - log p(race = 0 | age) is linear in age inside each group, not across
    table = joint.sum(axis=2)
    logit = np.log(table[:, 1:] / table[:, :1])
    np.testing.assert_allclose(logit[0] - 2 * logit[1] + logit[2], 0.0, atol=1e-10)
    np.testing.assert_allclose(logit[3] - 2 * logit[4] + logit[5], 0.0, atol=1e-10)
    assert np.abs(logit[1] - 2 * logit[2] + logit[3]).max() > 1e-3
    # summarise: a slope is never one-sided, and its sd weighs its members' noise
    counts, sd = f.summarise(np.full(q.dimension, 5.0), np.full(q.dimension, 2.0))
    assert np.isinf(counts[-len(slopes):]).all() and np.isfinite(counts[:-len(slopes)]).all()
    np.testing.assert_allclose(sd[-len(slopes):], [2.0 * np.sqrt(np.sum(np.square(w))) for _, w in slopes])
    with pytest.raises(ParameterError, match="share their marginal"):
        InteractionFeatures(q, ties, zero, [([untied[0], slopes[0][0][0]], [1.0, 1.0])])
    with pytest.raises(ParameterError, match="finite"):
        InteractionFeatures(q, ties, zero, [(slopes[0][0], [np.nan] * len(slopes[0][0]))])


def _numeric_age_table(n: int = 4000, seed: int = 0) -> tuple[pd.DataFrame, Domain]:
    from synthinfer.data import Binning, Column

    rng = np.random.default_rng(seed)
    age = rng.integers(0, 6, n)
    race = rng.choice(3, n, p=[0.6, 0.3, 0.1])
    inc = (rng.random(n) < 0.1 + 0.12 * age).astype(int)
    labels = np.array(["young", "old"])
    b = Binning(tuple(float(e) for e in range(15, 76, 10)))  # six bins of ten years: midpoints 20 .. 70
    group = Column("age_group", ("young", "old"), derived_from="age",
                   derive=tuple((lab, g) for lab, g in zip(b.labels(), labels[BY_HALVES])))
    domain = Domain([Column("age", tuple(b.labels()), binning=b), group, Column("race", (0, 1, 2)),
                     Column("inc", (0, 1))])
    df = pd.DataFrame({"age": np.array(b.labels())[age], "age_group": labels[BY_HALVES[age]], "race": race,
                       "inc": inc})
    return df, domain


@pytest.mark.filterwarnings("ignore::synthinfer.errors.ConvergenceWarning")
def test_napsu_mq_linear_coarse_interactions_fit_summarise_and_round_trip(tmp_path):
    df, domain = _numeric_age_table()
    gen = NapsuMQ([("age_group", "inc"), ("age_group", "race")], epsilon=2.0, inference="laplace", seed=1,
                  n_chains=1, num_samples=20, coarse_interactions="linear").fit(df, domain)
    ties = gen.diagnostics_["ties"]
    # 2 groups x (inc 1; race 1, 2; age's main effects: age is named only through its groups)
    assert ties["coarse_slopes"] == len(gen.queries_.slopes) == 2 * (1 + 2 + 1)
    assert "slopes of numeric coarse columns" in gen.summary()
    assert gen.get_params()["coarse_interactions"] == "linear"
    # inc's log-odds are linear in age inside each group, for every draw, and so is age's main
    # effect, log p(age, inc*, race*) = log p(age, inc*) + log p(age, race*) - log p(age) + const
    ref = gen.queries_.reference
    for theta in gen.draws_[0, :3]:
        tables = gen.network_.query_marginals(jnp.asarray(theta))
        inc, race = np.asarray(tables[0]).reshape(6, 2), np.asarray(tables[1]).reshape(6, 3)  # (age, inc), (age, race)
        main = np.log(inc[:, ref["inc"]]) + np.log(race[:, ref["race"]]) - np.log(inc.sum(axis=1))
        for curve in (np.log(inc[:, 1] / inc[:, 0]), main):
            np.testing.assert_allclose([curve[0] - 2 * curve[1] + curve[2], curve[3] - 2 * curve[4] + curve[5]], 0.0,
                                       atol=1e-9)
    gen.save(tmp_path / "g.napsu")
    back = NapsuMQ.load(tmp_path / "g.napsu")
    assert back.queries_.slopes == gen.queries_.slopes and back.coarse_interactions == "linear"
    pd.testing.assert_frame_equal(back.generate(1, 50, seed=1)[0], gen.generate(1, 50, seed=1)[0])
    with pytest.raises(ParameterError, match="coarse_interactions"):
        NapsuMQ([("age_group", "inc")], epsilon=1.0, coarse_interactions="cubic").fit(df, domain)


@pytest.mark.filterwarnings("ignore::synthinfer.errors.ConvergenceWarning")
def test_nuts_samples_a_coarse_model_without_aim():
    """The NUTS program's shapes take the canonical queries' noisy counts, not one per parameter."""
    df, domain = _numeric_age_table(1500)
    gen = NapsuMQ([("age_group", "inc"), ("age_group", "race")], epsilon=2.0, inference="nuts", seed=2,
                  n_chains=1, num_warmup=30, num_samples=30, coarse_interactions="linear").fit(df, domain)
    assert gen.draws_.shape == (1, 30, gen.network_.dimension)
    assert gen.network_.dimension < gen.queries_.canonical.dimension + len(gen.queries_.slopes)
    assert np.isfinite(gen.draws_).all()


# -- coarse marginals measured as coarse tables ------------------------------------------------
@pytest.mark.filterwarnings("ignore::synthinfer.errors.ConvergenceWarning")
def test_coarse_marginals_are_measured_as_their_coarse_tables(tmp_path):
    df, domain = _derived_table()
    gen = NapsuMQ([("age", "inc"), ("age_group", "race")], epsilon=50.0, inference="laplace", seed=1,
                  n_chains=1, num_samples=20).fit(df, domain)
    fine, coarse = gen.measurements_
    assert fine.groups is None and fine.values.size == 12  # (age, inc): 6 x 2
    assert coarse.marginal.columns == ("age", "race") and coarse.values.size == 9  # 3 age groups x 3 races
    truth = pd.crosstab(BY_PAIRS[df["age"]], df["race"]).to_numpy().ravel()
    # sigma 0.32 at epsilon 50: a value is off by one with probability ~1%, by two ~1e-9
    np.testing.assert_allclose(coarse.values, truth, atol=1)
    assert gen.layout_ is not None and len(gen.noisy_counts_) == 21
    charge = gen.ledger_.charges[-1]
    assert charge.details["unit_changes"] == 4 and charge.details["sensitivity_l2"] == pytest.approx(2.0)  # as two fine tables
    assert "coarse marginals measured as their coarse tables" in gen.privacy_["mechanism"]
    # the fitted coarse model reproduces the coarse table, not a fine one
    table = np.asarray(gen.network_.query_marginals(jnp.asarray(gen.draws_[0].mean(0)))[1]).reshape(6, 3)
    np.testing.assert_allclose(np.add.reduceat(table, [0, 2, 4], axis=0).ravel() * len(df), truth, rtol=0.05, atol=3)
    gen.save(tmp_path / "g.napsu")
    back = NapsuMQ.load(tmp_path / "g.napsu")
    assert back.measurements_[1].groups is not None and back.layout_ == gen.layout_
    pd.testing.assert_frame_equal(back.generate(1, 50, seed=1)[0], gen.generate(1, 50, seed=1)[0])


def test_coarse_tables_keep_the_sensitivity_on_neighbouring_datasets(monkeypatch):
    """What reaches the mechanism: neighbours (one row substituted) differ by +-1 in at most
    2 x (number of marginals) values, the unit changes and L2 sensitivity the mechanism is told."""
    import synthinfer.napsu.estimator as est

    seen = []

    def capture(counts, **kw):
        seen.append((np.asarray(counts).copy(), kw))
        raise RuntimeError("captured")

    monkeypatch.setattr(est, "discrete_gaussian_mechanism", capture)
    df, domain = _derived_table(500)
    rng = np.random.default_rng(4)
    for trial in range(20):
        other = df.copy()
        i, j = rng.integers(0, len(df), 2)
        other.iloc[i] = df.iloc[j]  # substitute row i by a copy of row j (ages and groups agree)
        for frame in (df, other):
            with pytest.raises(RuntimeError, match="captured"):
                NapsuMQ([("age", "inc"), ("age_group", "race")], epsilon=1.0, inference="laplace",
                        seed=0).fit(frame, domain)
        (a, kw), (b, _) = seen[-2:]
        diff = b - a
        assert np.abs(diff).max() <= 1 and np.count_nonzero(diff) <= kw["unit_changes"] == 4
        assert np.sqrt((diff**2).sum()) <= kw["sensitivity"] + 1e-12
        assert a.size == 12 + 9  # the coarse table is measured, not its 18 fine cells


# -- slopes of near-empty coarse cells dropped (chosen from the noisy coarse tables) ---------
def _coarse_measurement(columns, counts, variance, grouping, weights=None):
    """``(age, other)`` measured as age groups x other: value ``g * K + k`` sums cells ``(a, k)``
    with ``grouping[a] = g``."""
    from synthinfer.data import Marginal
    from synthinfer.napsu.measurements import Measurement

    ages, k = np.indices((6, AGE[columns[1]].size)).reshape(2, -1)
    groups = grouping[ages] * AGE[columns[1]].size + k
    return Measurement(Marginal(columns), np.asarray(counts, dtype=float), variance, cells=np.arange(groups.size),
                       groups=groups, weights=weights)


def test_near_empty_slopes_read_each_coarse_cells_count_from_the_measurements():
    from synthinfer.napsu.interactions import coarse_slopes, near_empty_slopes
    from synthinfer.napsu.measurements import Measurement

    q = CanonicalQueries(AGE, [("age", "race"), ("age", "inc")], reference={"age": 0, "race": 0})
    versions = [(("age", "race"), {"age": BY_HALVES}), (("age", "inc"), {})]
    slopes = coarse_slopes(q, versions, {"age": AGE_YEARS})
    info = _scopes(q)
    # (age group, race) counts: group 0 x race 1 holds 5 rows, group 1 x race 2 holds 30, the rest 500
    counts = np.array([[500, 5, 500], [500, 500, 30]])
    race_table = _coarse_measurement(("age", "race"), counts.ravel(), 4.0**2, BY_HALVES)

    def cell(members):  # brute force: the (age group, race) of a slope's members
        (g,) = {int(BY_HALVES[info[j][2][0]]) for j in members}
        (r,) = {info[j][2][1] for j in members}
        return g, r

    assert {cell(m) for m, _ in slopes} == {(0, 1), (0, 2), (1, 1), (1, 2)}
    # the decision is count < k noise sd at the measurement's sd, 4: 5 rows from k = 1.25 on, 30 from 7.5
    for below, expected in ((1.0, set()), (3.0, {(0, 1)}), (7.0, {(0, 1)}), (8.0, {(0, 1), (1, 2)}),
                            (200.0, {(0, 1), (0, 2), (1, 1), (1, 2)})):
        quiet = near_empty_slopes(q, slopes, [race_table], below=below)
        assert {cell(slopes[k][0]) for k in quiet} == expected, below
    # a finer measurement of less variance decides: its cells are summed over the members' ages
    # (the reference's group leaves out age 0, whose interaction reference coding fixes at 0)
    fine = np.full((6, 3), 100.0)
    fine[3:6, 2] = 0.2  # group 1 with race 2: 0.6 < 3 sqrt(3) 0.5 (the coarse table said 30)
    fine[:3, 1] = [1000.0, 0.5, 0.5]  # group 0 with race 1: age 0 is the reference, so 1.0 < 3 sqrt(2) 0.5
    fine_table = Measurement(race_table.marginal, fine.ravel(), 0.5**2)
    quiet = near_empty_slopes(q, slopes, [race_table, fine_table], below=3.0)
    assert {cell(slopes[k][0]) for k in quiet} == {(0, 1), (1, 2)}
    quiet = near_empty_slopes(q, slopes, [fine_table, race_table], below=1.0)  # 1.0 > 0.71, 0.6 < 0.87
    assert {cell(slopes[k][0]) for k in quiet} == {(1, 2)}
    # a moment (weighted) or a partial measurement never decides; with none, every slope is kept
    moment = _coarse_measurement(("age", "race"), np.zeros(6), 1.0, BY_HALVES, weights=np.ones(18))
    partial = Measurement(race_table.marginal, np.zeros(3), 1.0, cells=np.array([0, 1, 2]))
    assert near_empty_slopes(q, slopes, [moment, partial], below=3.0) == []
    with pytest.raises(ParameterError, match="positive"):
        near_empty_slopes(q, slopes, [race_table], below=0.0)


@pytest.mark.filterwarnings("ignore::synthinfer.errors.ConvergenceWarning")
def test_napsu_mq_drops_the_slopes_of_near_empty_coarse_cells(tmp_path):
    from synthinfer.napsu.interactions import coarse_slopes, near_empty_slopes

    df, domain = _numeric_age_table()
    df = df[~((df["race"] == 2) & (df["age_group"] == "old"))]  # an empty coarse cell: (old, race 2)
    kwargs = dict(epsilon=2.0, inference="laplace", seed=1, n_chains=1, num_samples=20, coarse_interactions="linear")
    marginals = [("age_group", "inc"), ("age_group", "race")]
    gen = NapsuMQ(marginals, slopes_below=3.0, **kwargs).fit(df, domain)
    # the slopes kept are coarse_slopes' less near_empty_slopes' on this fit's noisy measurements
    q = gen.queries_.canonical
    versions = [(("age", "inc"), {"age": BY_HALVES}), (("age", "race"), {"age": BY_HALVES})]
    every = coarse_slopes(q, versions, {"age": domain.midpoints("age")})
    quiet = near_empty_slopes(q, every, gen.measurements_, below=3.0)
    assert len(quiet) >= 1 and len(every) - len(quiet) >= 6  # at least the empty cell; 500-row cells stay
    kept = [(tuple(m), tuple(w)) for k, (m, w) in enumerate(every) if k not in quiet]
    assert list(gen.queries_.slopes) == kept
    ties = gen.diagnostics_["ties"]
    assert ties["near_empty_slopes"] == len(quiet) and ties["coarse_slopes"] == len(kept)
    assert f"{len(quiet)} slopes of near-empty coarse cells dropped (below 3 noise sd)" in gen.summary()
    assert gen.get_params()["slopes_below"] == 3.0 and gen.release_settings_["slopes_below"] == 3.0
    gen.save(tmp_path / "g.napsu")
    back = NapsuMQ.load(tmp_path / "g.napsu")
    assert back.queries_.slopes == gen.queries_.slopes and back.slopes_below == 3.0
    # no threshold: every slope kept
    assert len(NapsuMQ(marginals, **kwargs).fit(df, domain).queries_.slopes) == len(every)


@pytest.mark.parametrize("kwargs, match", [
    ({"slopes_below": 0.0}, "slopes_below must be"),
    ({"slopes_below": float("nan")}, "slopes_below must be"),
    ({"slopes_below": "auto"}, "slopes_below must be"),
    ({"slopes_below": 3.0, "coarse_interactions": "constant"}, "coarse_interactions='linear'"),
])
def test_slopes_below_is_checked_before_any_spend(kwargs, match):
    df, domain = _numeric_age_table(300)
    gen = NapsuMQ([("age_group", "inc")], epsilon=1.0, inference="laplace", seed=0,
                  **{"coarse_interactions": "linear", **kwargs})
    with pytest.raises(ParameterError, match=match):
        gen.fit(df, domain)
    assert not hasattr(gen, "ledger_")


# -- linear-by-linear trends of pairs of numeric columns ----------------------------------
XY_MIDS = np.arange(5.0, 60.0, 10.0)  # six bins of ten over [0, 60]


def test_linear_by_linear_trend_matches_brute_force():
    from synthinfer.napsu.interactions import linear_by_linear

    dom = Domain({"x": list(range(6)), "y": list(range(6)), "c": [0, 1, 2]})
    q = CanonicalQueries(dom, [("x", "y"), ("x", "c")], reference={"x": 2, "y": 0})
    scores = {"x": XY_MIDS, "y": XY_MIDS + 100.0}
    trends = linear_by_linear(q, scores)
    info = _scopes(q)
    (members, weights), = trends  # (x, c): c has no scores, so no trend
    assert sorted(members) == [j for j, (_, scope, _) in enumerate(info) if scope == ("x", "y")]
    for j, w in zip(members, weights):  # (x - x*) / h_x (y - y*) / h_y, h = 25: half the scores' range
        vx, vy = info[j][2]
        assert w == pytest.approx((XY_MIDS[vx] - XY_MIDS[2]) / 25.0 * (XY_MIDS[vy] - XY_MIDS[0]) / 25.0)
    f = InteractionFeatures(q, trends=trends)
    assert f.dimension == q.dimension + 1 and "1 trends" in repr(f)
    assert not f.shrunk[-1] and f.is_trend[-1] and not f.is_slope.any()  # the main effects' prior
    assert f.shrunk[:-1].tolist() == [len(info[j][1]) >= 2 for j in range(q.dimension)]
    counts, _ = f.summarise(np.full(q.dimension, 5.0), np.full(q.dimension, 2.0))
    assert np.isinf(counts[-1]) and np.isfinite(counts[:-1]).all()  # a trend is never one-sided
    # the distribution: log p(x) = sum_j lambda_j 1[x_D = v_j], lambda = phi + t w on the trend's members
    phi = np.random.default_rng(4).normal(scale=0.5, size=f.dimension)
    lam = phi[:-1].copy()
    lam[list(members)] += phi[-1] * np.asarray(weights)
    grid = all_cells(dom)
    log_p = np.zeros(len(grid))
    for j, (_, scope, vals) in enumerate(info):
        idx = [dom.index(c) for c in scope]
        log_p += lam[j] * np.all(grid[:, idx] == np.array(vals), axis=1)
    net = MarkovNetwork(f)
    assert float(net.log_partition(jnp.asarray(phi))) == pytest.approx(logsumexp(log_p), rel=1e-12)
    np.testing.assert_allclose(brute_force(q, f.to_canonical() @ phi)[3], np.exp(log_p - logsumexp(log_p)), atol=1e-12)


def _correlated_numbers(n: int = 2000, rho: float = 0.6) -> tuple[pd.DataFrame, Domain, np.ndarray]:
    """Two numbers in six public bins of ten over [0, 60], correlation ``rho``; and the real table."""
    from synthinfer.data import Binning, Column

    z = np.random.default_rng(0).multivariate_normal([30, 30], 225 * np.array([[1, rho], [rho, 1]]), n)
    b = Binning(tuple(float(e) for e in range(0, 61, 10)))
    codes = np.asarray(b.codes(z.clip(0.5, 59.5).ravel())).reshape(n, 2)
    labels = np.array(b.labels())
    domain = Domain([Column("x", tuple(labels), binning=b), Column("y", tuple(labels), binning=b)])
    table = np.zeros((6, 6))
    np.add.at(table, (codes[:, 0], codes[:, 1]), 1.0)
    return pd.DataFrame({"x": labels[codes[:, 0]], "y": labels[codes[:, 1]]}), domain, table


def _covariance(table: np.ndarray) -> float:
    p = table / table.sum()
    mx, my = p.sum(1) @ XY_MIDS, p.sum(0) @ XY_MIDS
    return float((p * np.outer(XY_MIDS - mx, XY_MIDS - my)).sum())


@pytest.mark.filterwarnings("ignore::synthinfer.errors.ConvergenceWarning")
def test_linear_by_linear_keeps_the_numbers_covariance_that_the_interaction_prior_attenuates(tmp_path):
    """Correlation 0.8 over a 6 x 6 table of 2,000 rows at epsilon 1 (noise sd about 6 per
    cell): the prior N(0, 1) pulls the corner interactions (several nats here) towards
    independence, and the model's covariance falls to about 0.85 of the real one; centred on
    the trend it keeps it. The covariance's noise is about 0.015 of it (the counts' noise over
    the 36 cells' weights), so the bands are several noise sd wide; the trend's fit exceeds 1 by
    about 0.02 (the bins' midpoints), in five real-noise fits 1.005-1.03 and 0.84-0.88 without."""
    df, domain, real = _correlated_numbers(rho=0.8)
    ratio = {}
    for trend in (False, True):
        gen = NapsuMQ([("x", "y")], epsilon=1.0, inference="laplace", seed=0, n_chains=1, num_samples=20,
                      linear_by_linear=trend).fit(df, domain)
        table = np.asarray(gen.network_.query_marginals(jnp.asarray(gen.laplace_.mean))[0]).reshape(6, 6)
        ratio[trend] = _covariance(table) / _covariance(real)
    assert ratio[False] < 0.92
    assert 0.96 < ratio[True] < 1.08
    assert gen.diagnostics_["ties"]["linear_by_linear"] == 1 and len(gen.queries_.trends) == 1
    assert "1 linear-by-linear trends of pairs of numeric columns" in gen.summary()
    assert gen.release_settings_["linear_by_linear"] is True
    gen.save(tmp_path / "g.napsu")
    back = NapsuMQ.load(tmp_path / "g.napsu")
    assert back.queries_.trends == gen.queries_.trends and back.linear_by_linear is True
    pd.testing.assert_frame_equal(back.generate(1, 50, seed=1)[0], gen.generate(1, 50, seed=1)[0])


@pytest.mark.parametrize("kwargs, match", [
    ({"linear_by_linear": 1}, "linear_by_linear must be True or False"),
    ({"linear_by_linear": True, "interaction_sd": None}, "needs interaction_sd"),
    ({"linear_by_linear": True, "inference": "mle"}, "noise-aware inference"),
])
def test_linear_by_linear_is_checked_before_any_spend(kwargs, match):
    df, domain, _ = _correlated_numbers(200)
    gen = NapsuMQ([("x", "y")], epsilon=1.0, seed=0, **{"inference": "laplace", **kwargs})
    with pytest.raises(ParameterError, match=match):
        gen.fit(df, domain)
    assert not hasattr(gen, "ledger_")
