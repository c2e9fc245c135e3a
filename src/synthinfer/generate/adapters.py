"""Adapters: let any DataFrame-producing DP generator feed synthinfer's weighting and analysis.

``mbi`` 2.0 ships the graphical-model estimation of private-pgm but not its MST / AIM
mechanisms (they live in the authors' example scripts), so there is nothing to wrap
directly; :class:`CallableGenerator` wraps such a mechanism, or any other, given as a
function. Its privacy spend is charged to a :class:`~synthinfer.privacy.PrivacyLedger`
*before* the function runs, and :func:`release_kwargs` turns a fitted DP-GAN, PrivBayes or
wrapped generator into the keyword arguments of ``synthinfer.release.write_release``, so the
spend lands in the release manifest.

The adapter cannot verify the wrapped function's privacy claim: the ledger records what the
user declares (``epsilon``, ``delta``, ``mechanism_name``), and the function must spend
exactly that (e.g. an MST implementation called with the same epsilon and delta).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import pandas as pd

from synthinfer._params import ParamsMixin
from synthinfer.data import Domain, encode
from synthinfer.errors import ArgumentTypeError, NotFittedError, ParameterError, SynthinferError
from synthinfer.privacy import PrivacyBudget, PrivacyLedger, make_rng, seed_fixed
from synthinfer.privacy.randomness import SeedLike

#: ``fn(df, domain, *, epsilon, delta, rng)`` returns one DataFrame, a list of DataFrames, or
#: a sampler ``(n, rng) -> DataFrame`` (a fitted model that is sampled by post-processing).
GeneratorFn = Callable[..., Any]


class CallableGenerator(ParamsMixin):
    """A generator wrapped from a function, with the NapsuMQ-style fit/generate API.

    Parameters
    ----------
    fn : ``fn(df, domain, *, epsilon, delta, rng)`` running a DP mechanism that spends
        exactly ``(epsilon, delta)`` and returning a DataFrame, a list of DataFrames, or a
        sampler ``(n, rng) -> DataFrame``.
    epsilon, delta : the budget the wrapped mechanism spends (recorded in the ledger).
    mechanism_name : name of the mechanism for the ledger and the release (e.g. ``"MST"``).
    seed : int, numpy Generator or None; passed on to ``fn`` as a numpy Generator.
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

    def fit(self, df: pd.DataFrame, domain: Domain | None = None, ledger: PrivacyLedger | None = None) -> CallableGenerator:
        """Charge the ledger, then run the wrapped mechanism on ``df``.

        With a ``domain``, ``df`` and every dataset the mechanism returns are validated
        against it (:class:`~synthinfer.errors.OutOfDomainError` etc. on a mismatch).
        """
        if not callable(self.fn):
            raise ArgumentTypeError(f"fn must be callable, got {type(self.fn).__name__}")
        if not isinstance(self.mechanism_name, str) or not self.mechanism_name:
            raise ParameterError(f"mechanism_name must be a non-empty string, got {self.mechanism_name!r}")
        budget = PrivacyBudget(self.epsilon, self.delta)
        if not isinstance(df, pd.DataFrame):
            raise ArgumentTypeError(f"expected a pandas DataFrame, got {type(df).__name__}")
        if domain is not None:
            encode(df, domain)
        ledger = ledger if ledger is not None else PrivacyLedger(budget)
        ledger.spend(
            self.mechanism_name, budget.epsilon, budget.delta, mechanism=self.mechanism_name,
            adapter="CallableGenerator", **dict(self.settings or {}),
        )
        result = self.fn(df, domain, epsilon=budget.epsilon, delta=budget.delta, rng=make_rng(self.seed))
        self.datasets_: list[pd.DataFrame] | None = None
        self.sampler_: Callable[[int, np.random.Generator], pd.DataFrame] | None = None
        if isinstance(result, pd.DataFrame):
            self.datasets_ = [result]
        elif isinstance(result, (list, tuple)) and result and all(isinstance(r, pd.DataFrame) for r in result):
            self.datasets_ = list(result)
        elif callable(result):
            self.sampler_ = result
        else:
            raise SynthinferError(
                f"the wrapped generator {self.mechanism_name!r} returned {type(result).__name__}; "
                "expected a DataFrame, a non-empty list of DataFrames, or a sampler (n, rng) -> DataFrame"
            )
        for d in self.datasets_ or []:
            self._check_output(d, domain)
        self.domain_ = domain
        self.ledger_ = ledger
        self.n_real_ = len(df)
        self.seed_fixed_ = seed_fixed(self.seed)
        self.release_settings_ = self._release_settings()
        return self

    @staticmethod
    def _check_output(out: Any, domain: Domain | None) -> pd.DataFrame:
        if not isinstance(out, pd.DataFrame):
            raise SynthinferError(f"the wrapped generator produced {type(out).__name__}, not a DataFrame")
        if domain is not None:
            encode(out, domain)
        return out

    def generate(self, m: int = 1, n: int | None = None, seed: SeedLike = None) -> list[pd.DataFrame]:
        """``m`` synthetic datasets of ``n`` rows (default: as many as the real data).

        A sampler is called ``m`` times; fixed datasets are returned as released (asking for
        more of them, or another size, is an error: resampling them would not be the
        mechanism's output distribution).
        """
        if not hasattr(self, "ledger_"):
            raise NotFittedError("this CallableGenerator is not fitted yet; call fit() first")
        for name, v in (("m", m), ("n", n)):
            if v is not None and (isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 1):
                raise ParameterError(f"{name} must be a positive integer, got {v!r}")
        if self.sampler_ is not None:
            rng = make_rng(seed)
            size = self.n_real_ if n is None else int(n)
            return [self._check_output(self.sampler_(size, rng), self.domain_) for _ in range(m)]
        if m > len(self.datasets_):
            raise SynthinferError(
                f"{self.mechanism_name!r} released {len(self.datasets_)} dataset(s); m={m} asked. "
                "Return a sampler (n, rng) -> DataFrame from the wrapped function to draw more."
            )
        out = [d.copy() for d in self.datasets_[:m]]
        if n is not None and any(len(d) != n for d in out):
            raise SynthinferError(f"{self.mechanism_name!r} released datasets of {[len(d) for d in out]} rows; n={n} asked")
        return out


def release_kwargs(generator: Any, *, marginals: Any = None) -> dict[str, Any]:
    """Keyword arguments of ``synthinfer.release.write_release`` for a fitted generator.

    Works for :class:`~synthinfer.generate.DPGAN`, :class:`~synthinfer.generate.DPCGAN`,
    :class:`~synthinfer.generate.PrivBayes` and :class:`CallableGenerator`:
    ``write_release(path, gen.generate(m), **release_kwargs(gen))``. The mechanism's settings
    come from ``release_settings_``, recorded by ``fit`` (never a seed value, only whether one
    was fixed); a mixed schema of a GAN goes into the settings, since a release's Domain is categorical.
    """
    if not hasattr(generator, "ledger_"):
        raise NotFittedError(f"{type(generator).__name__} is not fitted; fit it before writing a release")
    settings = dict(generator.release_settings_)
    domain = getattr(generator, "domain_", None)
    schema = getattr(generator, "schema_", None)
    if schema is not None:
        if all(not hasattr(c, "lower") for c in schema.columns):
            domain = Domain(list(schema.columns))
        else:
            settings["schema"] = schema.to_dict()
    return {
        "mechanism": generator.mechanism,
        "settings": settings,
        "domain": domain,
        "marginals": marginals,
        "ledger": generator.ledger_,
        "n": int(generator.n_real_),
        "seed_fixed": bool(generator.seed_fixed_),
    }
