"""CallableGenerator: ledger charged before the mechanism runs, outputs checked, release record."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from synthinfer.data import Domain
from synthinfer.errors import ArgumentTypeError, BudgetExceededError, NotFittedError, OutOfDomainError, ParameterError
from synthinfer.generate import CallableGenerator, PrivBayes
from synthinfer.privacy import PrivacyLedger, laplace_mechanism

DOMAIN = Domain({"a": ["x", "y"], "b": ["u", "v", "w"]})
DF = pd.DataFrame({"a": ["x", "y", "x", "x"] * 25, "b": ["u", "v", "w", "w"] * 25})


def independent_marginals(df, domain, *, epsilon, delta, rng):
    """A toy DP generator: Laplace-noised 1-way marginals (L1 sensitivity 2 each), sampled independently."""
    scratch = PrivacyLedger((epsilon, 0.0))  # the adapter already charged the caller's ledger
    probs = {}
    for name in domain.names:
        counts = df[name].value_counts().reindex(domain[name].categories, fill_value=0).to_numpy(float)
        noisy, _ = laplace_mechanism(counts, sensitivity=2.0, epsilon=epsilon / len(domain), ledger=scratch)
        p = np.clip(noisy, 0, None) + 1e-12
        probs[name] = p / p.sum()

    def sample(n, rng):
        return pd.DataFrame({k: rng.choice(domain[k].categories, size=n, p=p) for k, p in probs.items()})

    return sample


def test_callable_sampler_records_spend_and_generates():
    ledger = PrivacyLedger((2.0, 1e-6))
    gen = CallableGenerator(independent_marginals, epsilon=1.5, mechanism_name="IndependentLaplace",
                            seed=0, settings={"marginals": "1-way"}).fit(DF, DOMAIN, ledger=ledger)
    (charge,) = ledger.charges
    assert (charge.name, charge.epsilon, charge.delta) == ("IndependentLaplace", 1.5, 0.0)
    assert charge.details == {"adapter": "CallableGenerator", "marginals": "1-way"}
    out = gen.generate(m=3, n=10, seed=1)
    assert len(out) == 3 and all(len(d) == 10 for d in out)
    assert len(gen.generate(1)[0]) == len(DF)
    rec = gen.release_record()
    assert rec.mechanism == "IndependentLaplace" and rec.ledger is ledger and rec.n == 100
    assert rec.seed_fixed is True and "seed" not in rec.settings and rec.domain == DOMAIN


def test_callable_fixed_datasets_and_errors():
    gen = CallableGenerator(lambda df, dom, **kw: df.sample(20, random_state=0), epsilon=1.0).fit(DF, DOMAIN)
    assert len(gen.generate(1)[0]) == 20
    with pytest.raises(ParameterError, match="released 1 dataset"):
        gen.generate(m=2)
    with pytest.raises(ParameterError, match="n=5"):
        gen.generate(1, n=5)
    bad = CallableGenerator(lambda df, dom, **kw: df.assign(b="zzz"), epsilon=1.0)
    with pytest.raises(OutOfDomainError):
        bad.fit(DF, DOMAIN)
    with pytest.raises(ArgumentTypeError, match="returned int"):
        CallableGenerator(lambda df, dom, **kw: 3, epsilon=1.0).fit(DF)
    with pytest.raises(NotFittedError):
        CallableGenerator(independent_marginals, epsilon=1.0).generate(1)
    with pytest.raises(NotFittedError):
        PrivBayes().release_record()


def test_budget_is_charged_before_the_mechanism_runs():
    calls = []
    ledger = PrivacyLedger((0.5, 0.0))
    gen = CallableGenerator(lambda df, dom, **kw: calls.append(1) or df, epsilon=1.0)
    with pytest.raises(BudgetExceededError):
        gen.fit(DF, DOMAIN, ledger=ledger)
    assert calls == [] and ledger.charges == ()


def test_release_record_of_privbayes():
    pb = PrivBayes(epsilon=1.0, seed=None, degree=1).fit(DF, DOMAIN)
    rec = pb.release_record()
    assert rec.domain == DOMAIN and rec.mechanism == "privbayes"
    assert rec.seed_fixed is False and rec.ledger.spent == pytest.approx((1.0, 0.0))
