"""Adapters: let any DataFrame-producing DP generator feed synthinfer's weighting and analysis.

``mbi`` 2.0 ships the graphical-model estimation of private-pgm but not its MST / AIM
mechanisms (they live in the authors' example scripts), so there is nothing to wrap
directly; :class:`CallableGenerator` wraps such a mechanism, or any other, given as a
function, in the :class:`~synthinfer.generate.Generator` contract. Its privacy spend is charged
to a :class:`~synthinfer.privacy.PrivacyLedger` *before* the function runs, and its
``release_record()`` carries the spend into the release manifest.

The adapter cannot verify the wrapped function's privacy claim: the ledger records what the
user declares (``epsilon``, ``delta``, ``mechanism_name``), and the function must spend
exactly that (e.g. an MST implementation called with the same epsilon and delta).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import pandas as pd

from synthinfer.data import Domain, encode
from synthinfer.errors import ArgumentTypeError, ParameterError
from synthinfer.generate.base import Generator
from synthinfer.privacy import PrivacyBudget, PrivacyLedger, make_rng, seed_fixed
from synthinfer.privacy.randomness import SeedLike

#: ``fn(df, domain, *, epsilon, delta, rng)`` returns one DataFrame, a list of DataFrames, or
#: a sampler ``(n, rng) -> DataFrame`` (a fitted model that is sampled by post-processing).
GeneratorFn = Callable[..., Any]


class CallableGenerator(Generator):
    """A generator wrapped from a function, in the :class:`~synthinfer.generate.Generator` contract.

    Parameters
    ----------
    fn : ``fn(df, domain, *, epsilon, delta, rng)`` running a DP mechanism that spends
        exactly ``(epsilon, delta)`` and returning a DataFrame, a list of DataFrames, or a
        sampler ``(n, rng) -> DataFrame``.
    epsilon, delta : the budget the wrapped mechanism spends (recorded in the ledger).
    mechanism_name : name of the mechanism for the ledger and the release (e.g. ``"MST"``); the
        generator's ``mechanism``.
    seed : int, numpy Generator or None; passed on to ``fn`` as a numpy Generator, and seeds a
        returned sampler by the rule of :class:`~synthinfer.generate.Generator`.
    settings : public settings of the mechanism, recorded with the ledger charge.

    Examples
    --------
    >>> def mst(df, domain, *, epsilon, delta, rng):  # doctest: +SKIP
    ...     return my_mst(df, epsilon, delta)            # a DataFrame
    >>> gen = CallableGenerator(mst, epsilon=1.0, delta=1e-6, mechanism_name="MST")  # doctest: +SKIP
    """

    def __init__(
        self,
        fn: GeneratorFn,
        epsilon: float,
        delta: float = 0.0,
        mechanism_name: str = "custom",
        seed: SeedLike = None,
        settings: Mapping[str, Any] | None = None,
    ) -> None:
        self.fn = fn
        self.epsilon = epsilon
        self.delta = delta
        self.mechanism_name = mechanism_name
        self.seed = seed
        self.settings = settings

    @property
    def mechanism(self) -> str:
        return str(self.mechanism_name)

    def _release_settings(self) -> dict[str, Any]:
        """Settings for a release's record, ``release_settings_`` (the seed only as whether one
        was fixed)."""
        return {
            "epsilon": self.epsilon, "delta": self.delta, "mechanism_name": self.mechanism_name,
            "settings": dict(self.settings or {}), "seed_fixed": seed_fixed(self.seed),
        }

    def fit(self, data: pd.DataFrame, domain: Domain | None = None, ledger: PrivacyLedger | None = None) -> CallableGenerator:
        """Charge the ledger, then run the wrapped mechanism on ``data``.

        With a ``domain``, ``data`` and every dataset the mechanism returns are validated
        against it (:class:`~synthinfer.errors.OutOfDomainError` etc. on a mismatch); it is
        passed on to ``fn`` and becomes the release record's Domain.
        """
        self._start_fit()
        if not callable(self.fn):
            raise ArgumentTypeError(f"fn must be callable, got {type(self.fn).__name__}")
        if not isinstance(self.mechanism_name, str) or not self.mechanism_name:
            raise ParameterError(f"mechanism_name must be a non-empty string, got {self.mechanism_name!r}")
        budget = PrivacyBudget(self.epsilon, self.delta)
        if not isinstance(data, pd.DataFrame):
            raise ArgumentTypeError(f"expected a pandas DataFrame, got {type(data).__name__}")
        if domain is not None and not isinstance(domain, Domain):
            raise ArgumentTypeError(f"domain must be a synthinfer Domain or None, got {type(domain).__name__}")
        if domain is not None:
            encode(data, domain)
        ledger = self._ledger_for(budget, data, ledger)
        ledger.spend(
            self.mechanism_name, budget.epsilon, budget.delta, mechanism=self.mechanism_name,
            adapter="CallableGenerator", **dict(self.settings or {}),
        )
        result = self.fn(data, domain, epsilon=budget.epsilon, delta=budget.delta, rng=make_rng(self.seed))
        self.datasets_: list[pd.DataFrame] | None = None
        self.sampler_: Callable[[int, np.random.Generator], pd.DataFrame] | None = None
        if isinstance(result, pd.DataFrame):
            self.datasets_ = [result]
        elif isinstance(result, (list, tuple)) and result and all(isinstance(r, pd.DataFrame) for r in result):
            self.datasets_ = list(result)
        elif callable(result):
            self.sampler_ = result
        else:
            raise ArgumentTypeError(
                f"the wrapped generator {self.mechanism_name!r} returned {type(result).__name__}; "
                "expected a DataFrame, a non-empty list of DataFrames, or a sampler (n, rng) -> DataFrame"
            )
        for d in self.datasets_ or []:
            self._check_output(d, domain)
        self.domain_ = domain
        self.ledger_ = ledger
        self.n_ = len(data)
        self.seed_fixed_ = seed_fixed(self.seed)
        self._fit_complete()
        return self

    @staticmethod
    def _check_output(out: Any, domain: Domain | None) -> pd.DataFrame:
        if not isinstance(out, pd.DataFrame):
            raise ArgumentTypeError(f"the wrapped generator produced {type(out).__name__}, not a DataFrame")
        if domain is not None:
            encode(out, domain)
        return out

    def generate(self, m: int, n: int | None = None, seed: SeedLike = None) -> list[pd.DataFrame]:
        """``m`` synthetic datasets of ``n`` rows (default: as many as the real data).

        A sampler is called ``m`` times with one random stream (the seed rule of
        :class:`~synthinfer.generate.Generator`); fixed datasets are returned as released
        (asking for more of them, or another size, is an error: resampling them would not be
        the mechanism's output distribution).
        """
        self._check_fitted()
        given_n = n
        m, n = self._check_m_n(m, n)
        if self.sampler_ is not None:
            rng = self._generate_rng(seed)
            return [self._check_output(self.sampler_(n, rng), self.domain_) for _ in range(m)]
        if m > len(self.datasets_):
            raise ParameterError(
                f"{self.mechanism_name!r} released {len(self.datasets_)} dataset(s); m={m} asked. "
                "Return a sampler (n, rng) -> DataFrame from the wrapped function to draw more."
            )
        out = [d.copy() for d in self.datasets_[:m]]
        if given_n is not None and any(len(d) != n for d in out):
            raise ParameterError(f"{self.mechanism_name!r} released datasets of {[len(d) for d in out]} rows; n={n} asked")
        return out
