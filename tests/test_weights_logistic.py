"""Logistic-regression weights: sensitivity, (un)biasedness, budget and input errors."""

import math

import numpy as np
import pandas as pd
import pytest

from synthinfer.datasets import make_triangle_square
from synthinfer.errors import BudgetExceededError, DebiasingError, NotFittedError, OutOfDomainError, ParameterError, PrivacyError
from synthinfer.privacy import PrivacyBudget, PrivacyLedger
from synthinfer.weights import BetaDebiased, BetaNoised, FeatureMap, LogRegWeights
from synthinfer.weights.logistic import fit_regularised_logreg, logreg_l2_sensitivity

BOUNDS = {"x1": (0.0, 1.0), "x2": (0.0, 1.0)}

pytestmark = pytest.mark.filterwarnings("ignore::synthinfer.errors.NonPrivateWarning")


def test_l2_sensitivity_on_neighbouring_datasets():
    """||beta(D) - beta(D')||_2 <= 2 / (N_D lam) (Chaudhuri et al. 2011), and the bound is nearly attained."""
    rng = np.random.default_rng(0)
    fm = FeatureMap(BOUNDS)
    lam, worst = 0.05, 0.0
    for trial in range(30):
        real, synth = make_triangle_square(60, seed=trial)
        xr, xs = fm.transform(real), fm.transform(synth)
        beta = fit_regularised_logreg(xr, xs, lam)
        xr2 = xr.copy()
        xr2[rng.integers(len(xr))] = fm.transform(pd.DataFrame({"x1": [rng.random()], "x2": [rng.random()]}))[0]
        if trial % 3 == 0:  # extreme replacement: a far corner
            xr2[0] = fm.transform(pd.DataFrame({"x1": [1.0], "x2": [1.0]}))[0]
        beta2 = fit_regularised_logreg(xr2, xs, lam)
        worst = max(worst, np.linalg.norm(beta - beta2) / logreg_l2_sensitivity(len(xr), lam))
    assert worst <= 1.0
    assert worst > 0.05  # the bound is not vacuous for these data


def test_log_weight_sensitivity_bounded_by_l2_sensitivity():
    real, synth = make_triangle_square(80, seed=3)
    real2 = real.copy()
    real2.iloc[5] = [1.0, 1.0]
    lw = [LogRegWeights(BOUNDS, lam=0.1).fit(r, synth).log_weights(synth) for r in (real, real2)]
    assert np.max(np.abs(lw[0] - lw[1])) <= 2 / (80 * 0.1)


def test_noise_scale_is_paper_rho_and_ledger_records_it():
    real, synth = make_triangle_square(100, seed=0)
    m = BetaNoised(BOUNDS, epsilon=1.0, lam=0.1, seed=1).fit(real, synth)
    d = 3
    assert m.noise_scale_ == pytest.approx(2 * math.sqrt(d) / (100 * 0.1 * 1.0))
    (charge,) = m.ledger_.charges
    assert charge.epsilon == 1.0 and charge.delta == 0.0 and charge.mechanism == "laplace"
    assert not hasattr(m, "beta_hat_")  # only the privatised coefficients are kept


def _mc_means(n_draws, h, real, synth, **kw):
    """Mean I_N(h | w) of BetaDebiased and BetaNoised over noise draws, paired: both read the
    same privatised coefficients (the noise is OpenDP's, not seedable; BetaDebiased only
    post-processes BetaNoised's release)."""
    deb, noi = np.empty(n_draws), np.empty(n_draws)
    for k in range(n_draws):
        fit = BetaDebiased(BOUNDS, **kw).fit(real, synth)
        same_noise = BetaNoised.__new__(BetaNoised)
        same_noise.__dict__.update(fit.__dict__)
        deb[k] = np.mean(fit.weights(synth) * h)
        noi[k] = np.mean(same_noise.weights(synth) * h)
    return deb, noi


def test_beta_debiased_is_unbiased_and_beta_noised_is_biased():
    """Over noise draws, mean I_N(h | w_bar*) = I_N(h | w_hat) (Prop. 2); BetaNoised's is not (Prop. 1)."""
    real, synth = make_triangle_square(100, seed=0)
    h = synth["x1"].to_numpy() + 1.0
    kw = dict(epsilon=0.8, lam=0.1)
    target = np.mean(LogRegWeights(BOUNDS, lam=0.1).fit(real, synth).weights(synth) * h)
    # the same noise zeta for both, so their difference is a precise paired contrast
    deb, noi = _mc_means(400, h, real, synth, **kw)
    z_deb = (deb.mean() - target) / (deb.std(ddof=1) / math.sqrt(len(deb)))
    diff = noi - deb
    z_diff = diff.mean() / (diff.std(ddof=1) / math.sqrt(len(diff)))
    assert abs(z_deb) < 4.0  # unbiased within Monte-Carlo error
    assert z_diff > 8.0  # E[noised] - E[debiased] = E[noised] - target > 0: BetaNoised over-weights
    assert noi.mean() > target
    assert deb.var() <= noi.var()  # eq. (13): debiasing also lowers the variance


def test_gaussian_variant_is_unbiased_and_exists_where_laplace_fails():
    real, synth = make_triangle_square(30, seed=1)
    with pytest.raises(DebiasingError, match="noise='gaussian'"):
        BetaDebiased(BOUNDS, epsilon=0.1, lam=0.1, seed=0).fit(real, synth)
    h = np.ones(len(synth))
    target = np.mean(LogRegWeights(BOUNDS, lam=0.1).fit(real, synth).weights(synth))
    deb, _ = _mc_means(200, h, real, synth, epsilon=2.0, delta=1e-3, lam=0.1, noise="gaussian")
    z = (deb.mean() - target) / (deb.std(ddof=1) / math.sqrt(len(deb)))
    assert abs(z) < 4.0


def test_debiasing_error_spends_nothing_and_names_fixes():
    real, synth = make_triangle_square(30, seed=1)
    ledger = PrivacyLedger(PrivacyBudget(1.0))
    with pytest.raises(DebiasingError) as exc:
        BetaDebiased(BOUNDS, epsilon=0.1, lam=0.1, seed=0).fit(real, synth, ledger=ledger)
    msg = str(exc.value)
    assert "lam" in msg and "epsilon" in msg and "Gaussian" in msg
    assert ledger.spent == (0.0, 0.0)


def test_ledger_refuses_overspend_before_noise():
    real, synth = make_triangle_square(100, seed=0)
    ledger = PrivacyLedger(PrivacyBudget(1.0))
    BetaNoised(BOUNDS, epsilon=0.7, lam=0.1, seed=0).fit(real, synth, ledger=ledger)
    m = BetaNoised(BOUNDS, epsilon=0.5, lam=0.1, seed=0)
    with pytest.raises(BudgetExceededError):
        m.fit(real, synth, ledger=ledger)
    assert not hasattr(m, "coef_")
    assert not hasattr(m, "beta_hat_")  # the exact (non-private) coefficients are never left behind
    assert ledger.spent[0] == pytest.approx(0.7)


def test_bad_inputs_raise_clear_errors():
    real, synth = make_triangle_square(50, seed=0)
    with pytest.raises(OutOfDomainError, match="x1"):
        LogRegWeights({"x1": (0.0, 0.5), "x2": (0.0, 1.0)}).fit(real, synth)
    with pytest.raises(PrivacyError):
        BetaNoised(BOUNDS, epsilon=-1.0).fit(real, synth)
    with pytest.raises(PrivacyError, match="delta"):
        BetaNoised(BOUNDS, epsilon=1.0, delta=1e-5).fit(real, synth)
    with pytest.raises(PrivacyError, match="noise"):
        BetaNoised(BOUNDS, epsilon=1.0, noise="cauchy").fit(real, synth)
    with pytest.raises(ParameterError, match="lam"):
        BetaNoised(BOUNDS, epsilon=1.0, lam=0.0).fit(real, synth)
    with pytest.raises(NotFittedError, match="not fitted"):
        BetaNoised(BOUNDS, epsilon=1.0).weights(synth)


def test_newton_solver_matches_scikit_learn():
    from sklearn.linear_model import LogisticRegression

    real, synth = make_triangle_square(300, seed=4)
    fm = FeatureMap(BOUNDS)
    xr, xs = fm.transform(real), fm.transform(synth)
    for lam in (1.0, 0.01, 1e-4):
        ref = LogisticRegression(C=1 / (len(xr) * lam), fit_intercept=False, tol=1e-12, max_iter=10_000,
                                 solver="newton-cholesky").fit(np.vstack([xr, xs]), np.r_[np.ones(300), np.zeros(300)])
        np.testing.assert_allclose(fit_regularised_logreg(xr, xs, lam), ref.coef_.ravel(), atol=1e-7)


def test_unconverged_fit_is_refused_before_any_spend():
    from synthinfer.errors import ConvergenceError

    real, synth = make_triangle_square(200, seed=1)
    fm = FeatureMap(BOUNDS)
    with pytest.raises(ConvergenceError, match="did not converge"):
        fit_regularised_logreg(fm.transform(real), fm.transform(synth), 0.01, max_iter=1)
    # the accepted gradient norm is part of the public sensitivity
    assert logreg_l2_sensitivity(200, 0.1) == pytest.approx(2 / (200 * 0.1) + 2e-9 / 0.1, rel=1e-12)


def test_sparse_features_give_the_dense_fit_and_weights():
    """CSR features (what the estimators use, for memory) give the dense array's coefficients,
    weights and debiasing terms."""
    from synthinfer.weights.logistic import gaussian_log_debias, laplace_log_debias

    rng = np.random.default_rng(3)
    bounds = {"a": (0.0, 1.0), "g": ["x", "y", "z"], "h": ["p", "q"]}
    fm = FeatureMap(bounds)

    def table(n, shift):
        g = rng.choice(["x", "y", "z"], n, p=[0.5 - shift, 0.3, 0.2 + shift])
        return pd.DataFrame({"a": rng.beta(2 + shift, 2, n), "g": g, "h": rng.choice(["p", "q"], n)})

    real, syn = table(400, 0.2), table(300, 0.0)
    dense_r, dense_s = fm.transform(real), fm.transform(syn)
    sparse_r, sparse_s = fm.transform(real, sparse=True), fm.transform(syn, sparse=True)
    np.testing.assert_allclose(sparse_r.toarray(), dense_r, rtol=1e-15, atol=0)
    beta = fit_regularised_logreg(dense_r, dense_s, 0.1)
    np.testing.assert_allclose(fit_regularised_logreg(sparse_r, sparse_s, 0.1), beta, rtol=0, atol=1e-12)
    np.testing.assert_allclose(fit_regularised_logreg(dense_r, sparse_s, 0.1), beta, rtol=0, atol=1e-12)
    np.testing.assert_allclose(laplace_log_debias(sparse_s, 0.9), laplace_log_debias(dense_s, 0.9), atol=1e-14)
    np.testing.assert_allclose(gaussian_log_debias(sparse_s, 0.9), gaussian_log_debias(dense_s, 0.9), atol=1e-14)
    w = LogRegWeights(bounds, lam=0.1)
    with pytest.warns(Warning):
        w.fit(real, syn)
    np.testing.assert_allclose(w.log_weights(syn), dense_s @ beta + math.log(300 / 400), atol=1e-12)
