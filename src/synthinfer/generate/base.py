"""The generator contract: what every synthetic data generator of synthinfer does, written once.

In the spirit of scikit-learn's ``BaseEstimator`` (settings in the constructor, ``fit`` returns
the estimator, fitted attributes end in ``_``) and of mbi's ``Estimator`` ABC (one abstract
interface that every mechanism implements). A release is then written the same way whichever
mechanism made it::

    gen = NapsuMQ(marginals, epsilon=1.0, delta=1e-9).fit(df, domain)   # or PrivBayes(...), DPGAN(...)
    datasets = gen.generate(m=20)
    write_release("release", datasets, record=gen.release_record(), private_data=df)
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any, ClassVar, Self

import numpy as np
import pandas as pd

from synthinfer._params import ParamsMixin
from synthinfer.errors import ArgumentTypeError, NotFittedError, ParameterError
from synthinfer.privacy import PrivacyBudget, PrivacyLedger, make_rng
from synthinfer.privacy.randomness import SeedLike
from synthinfer.release.record import ReleaseRecord

#: Spawn key of generate()'s random stream under an integer seed: a stream of its own, so that
#: generating never replays the draws of the fit's DP noise made from the same seed.
GENERATE_STREAM = 0x6E6E


class Generator(ParamsMixin, ABC):
    """A differentially private synthetic data generator.

    Contract
    --------
    ``fit(data, domain=None, ledger=None) -> self``
        Runs the DP mechanism on the private ``data`` (a DataFrame) over its public ``domain``
        (a :class:`~synthinfer.data.Domain`; the GANs also take a schema of bounds and
        categories; ``None`` where the generator needs none, e.g. the Laplace mechanism, whose
        public bounds are a setting). The privacy spend is charged to
        ``ledger`` (a :class:`~synthinfer.privacy.PrivacyLedger`; without one, a ledger holding
        exactly the generator's budget is made) before any noise is drawn. Generator-specific
        extras (e.g. NapsuMQ's ``progress``) are keyword-only.
    ``generate(m, n=None, seed=None) -> list[DataFrame]``
        ``m`` synthetic datasets (``m`` has no default: how many a release needs is the
        caller's decision, e.g. by :func:`synthinfer.bayes.choose_m`) of ``n`` rows each
        (default: ``n_``, the private row count). Always a list, also for ``m = 1``.
        Post-processing of the fit: no privacy cost. Generator-specific extras (e.g. NapsuMQ's
        ``midpoints``) are keyword-only.
    ``release_record() -> ReleaseRecord``
        Everything :func:`~synthinfer.release.write_release` needs besides the datasets.
    ``summary() -> str``
        A text report of the fit (``synthinfer generate`` prints it): this fit's privacy spend
        charge by charge, its settings and what it learned.

    Attributes
    ----------
    mechanism : class-level name of the mechanism (``"napsu-mq"``, ``"privbayes"``, ...),
        recorded in releases.
    n_ : rows of the private data (after ``fit``).
    ledger_ : the ledger charged (it may be shared with other mechanisms).
    seed_fixed_ : whether ``fit`` ran with a fixed seed (a release records this, never the seed).
    release_settings_ : the fit's settings, JSON-ready and without the seed's value (set at fit
        time, so a later ``set_params`` cannot change what a release of this fit records).

    Seeds
    -----
    Every generator has a ``seed`` setting; ``generate(..., seed=...)`` overrides it for that
    call. One rule, as scikit-learn's ``random_state``:

    * an integer: ``fit`` is reproducible, and ``generate(m, n)`` returns the same datasets
      every time it is called with the same arguments on the same fit. Its draws come from a
      stream derived from the integer with its own spawn key (:data:`GENERATE_STREAM`), apart
      from the fit's DP noise stream, so generating never replays the noise draws;
    * a :class:`numpy.random.Generator`: it is used and advanced, so every call (``fit`` and
      each ``generate``) draws fresh values, and the sequence of calls is reproducible from the
      Generator's initial state;
    * ``None`` (the default, and the only choice for a real release): OS entropy.

    The ``seed`` setting is read when ``fit`` or ``generate`` is called (as scikit-learn reads
    ``random_state``); :meth:`_generate_rng` implements the rule for ``generate``.

    A new generator subclasses this class, sets ``mechanism``, implements ``fit`` (setting the
    fitted attributes above, charging through :meth:`_ledger_for`'s ledger and ending with
    :meth:`_fit_complete`, which needs ``_release_settings()``) and ``generate`` (with :meth:`_check_m_n` and
    :meth:`_generate_rng`), and overrides :meth:`release_record` when it has more to record
    (marginals, a posterior, diagnostics).
    """

    mechanism: ClassVar[str]
    seed: SeedLike

    @abstractmethod
    def fit(self, data: pd.DataFrame, domain: Any = None, ledger: PrivacyLedger | None = None) -> Self:
        """Run the DP mechanism on ``data``; charge ``ledger``; return ``self``."""

    @abstractmethod
    def generate(self, m: int, n: int | None = None, seed: SeedLike = None) -> list[pd.DataFrame]:
        """``m`` synthetic datasets of ``n`` rows (default: ``n_``)."""

    def release_record(self) -> ReleaseRecord:
        """The release's provenance and privacy record of this fit.

        The base record holds ``mechanism``, ``release_settings_``, the fitted ``domain_`` (when
        the generator has a categorical Domain), ``ledger_``, ``n_`` and ``seed_fixed_``;
        generators with marginals, a posterior or diagnostics add them.
        """
        self._check_fitted()
        return ReleaseRecord(
            mechanism=self.mechanism,
            settings=self.release_settings_,
            domain=getattr(self, "domain_", None),
            ledger=self.ledger_,
            n=self.n_,
            seed_fixed=self.seed_fixed_,
        )

    def summary(self) -> str:
        """A short text report of the fit: the mechanism, the rows, this fit's privacy spend
        charge by charge (a shared ledger's other charges left out) and its settings; a
        generator adds what it learned (:meth:`_summary_details`)."""
        self._check_fitted()
        charges = self._fit_charges()
        epsilon, delta = sum(c.epsilon for c in charges), sum(c.delta for c in charges)
        domain = getattr(self, "domain_", None)
        lines = [f"{type(self).__name__} fit ({self.mechanism}): n = {self.n_}"
                 + ("" if domain is None else f", {len(domain.names)} columns"),
                 f"privacy: epsilon = {epsilon:.4g}, delta = {delta:.3g} spent"
                 + ("" if self.ledger_.spent == (epsilon, delta) else " (its ledger: epsilon = "
                    f"{self.ledger_.spent[0]:.4g}, delta = {self.ledger_.spent[1]:.3g} in all)")]
        lines += [f"  {c.name}: epsilon {c.epsilon:.4g}, delta {c.delta:.3g} ({c.mechanism})" for c in charges]
        lines += self._summary_details()
        settings = {k: v for k, v in self.release_settings_.items() if isinstance(v, (str, int, float, bool))}
        lines.append("settings: " + ", ".join(f"{k}={v!r}" for k, v in settings.items()))
        return "\n".join(lines)

    def _summary_details(self) -> list[str]:
        """Lines of :meth:`summary` on what the fit learned (none by default)."""
        return []

    def _fit_charges(self) -> list[Any]:
        """This fit's own charges of ``ledger_`` (a shared ledger's charges before and after the
        fit left out), without a committed plan's parts (its pair holds them)."""
        span = slice(self.__dict__.get("_charges_before", 0), self.__dict__.get("_charges_after"))
        return [c for c in self.ledger_.charges[span] if c.part_of is None]

    def _fit_complete(self) -> None:
        """Called last by every ``fit``: records the fit's settings (:attr:`release_settings_`,
        whose presence marks the generator fitted) and where its charges end in the ledger."""
        self._charges_after = len(self.ledger_.charges)
        self.release_settings_ = self._release_settings()

    # -- helpers shared by the implementations -----------------------------------------------
    def _check_fitted(self) -> None:
        # every fit records release_settings_ last, and a fit that starts forgets it first,
        # so a failed refit leaves no mix of old results and a new ledger that looks fitted
        if not hasattr(self, "release_settings_"):
            raise NotFittedError(f"this {type(self).__name__} is not fitted yet; call fit() first")

    def _start_fit(self) -> None:
        """Called first by every ``fit``: the generator counts as unfitted until it succeeds."""
        self.__dict__.pop("release_settings_", None)
        self.__dict__.pop("_charges_after", None)

    def _ledger_for(self, budget: PrivacyBudget, data: Any, ledger: PrivacyLedger | None) -> PrivacyLedger:
        """``ledger``, or a new one holding exactly ``budget``, once the budget is safe for the
        rows of ``data`` (a DataFrame, or a :class:`~synthinfer.data.counting.MarginalCounter`): :meth:`PrivacyLedger.check_budget` refuses ``delta >= 1/n`` and
        ``epsilon > 100`` (unless the ledger overrides them), before anything is spent."""
        from synthinfer.data.counting import MarginalCounter

        if not isinstance(data, (pd.DataFrame, MarginalCounter)):
            raise ArgumentTypeError(f"data must be a pandas DataFrame, got {type(data).__name__}")
        if ledger is None:
            ledger = PrivacyLedger(budget)
        elif not isinstance(ledger, PrivacyLedger):
            raise ArgumentTypeError(f"ledger must be a PrivacyLedger or None, got {type(ledger).__name__}")
        n = data.n if isinstance(data, MarginalCounter) else len(data)
        if n:  # an empty table is refused by the generator itself, naming the data
            ledger.check_budget(n, budget)
        self._charges_before = len(ledger.charges)  # a shared ledger may hold other mechanisms' charges
        return ledger

    def _check_m_n(self, m: Any, n: Any) -> tuple[int, int]:
        """``(m, n)`` as ints, ``n`` defaulting to ``n_``; ParameterError naming a bad one."""
        for name, v in (("m", m), ("n", n)):
            if name == "n" and v is None:
                continue
            if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 1:
                raise ParameterError(f"{name} must be a positive integer, got {v!r}")
        return int(m), self.n_ if n is None else int(n)

    def _generate_rng(self, seed: SeedLike = None, stream: int = GENERATE_STREAM) -> np.random.Generator:
        """generate()'s random stream under the seed rule (see the class docstring): ``seed``,
        else the generator's own ``seed``; an integer or a SeedSequence gets the spawn key
        ``stream`` (another post-processing step of the fit passes its own key)."""
        seed = self.seed if seed is None else seed
        if isinstance(seed, (int, np.integer)) and not isinstance(seed, bool):
            return np.random.default_rng(np.random.SeedSequence(int(seed), spawn_key=(stream,)))
        if isinstance(seed, np.random.SeedSequence):
            return np.random.default_rng(np.random.SeedSequence(
                seed.entropy, spawn_key=(*seed.spawn_key, stream), pool_size=seed.pool_size))
        return make_rng(seed)  # a Generator (used and advanced), None (OS entropy) or a bad type


__all__ = ["GENERATE_STREAM", "Generator"]
