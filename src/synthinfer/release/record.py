"""What a release records about the mechanism that made it: one value, built by the generator.

A fitted generator's :meth:`~synthinfer.generate.Generator.release_record` returns a
:class:`ReleaseRecord`, and ``write_release(path, datasets, record=...)`` writes it into the
manifest. Keeping the record in one value (instead of a list of keyword arguments that every
caller assembles by hand) means the same fit gives the same manifest whoever writes it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from synthinfer.data import Domain, Marginal, as_marginals
from synthinfer.errors import ReleaseError
from synthinfer.privacy import PrivacyLedger
from synthinfer.release.manifest import check_no_seed, to_jsonable


@dataclasses.dataclass(frozen=True)
class ReleaseRecord:
    """Provenance and privacy record of a release: everything ``write_release`` needs besides
    the datasets.

    Parameters
    ----------
    mechanism : the generator's name (e.g. ``"napsu-mq"``, ``"privbayes"``, ``"dpgan"``).
    settings : the mechanism's settings and public facts of the fit (JSON-ready; converted with
        :func:`~synthinfer.release.manifest.to_jsonable`). A seed's value is refused
        (:class:`~synthinfer.errors.ReleaseError`): publishing it would let anyone subtract the
        noise; ``seed_fixed`` records whether there was one.
    domain : the public :class:`~synthinfer.data.Domain` of the datasets (categorical,
        discretised and bounded continuous columns), or None when the mechanism has none.
    marginals : the measured marginals (column lists), or None.
    ledger : the :class:`~synthinfer.privacy.PrivacyLedger` that recorded the spend.
    n : rows of the private data (the combining rules need it: Räisä et al. 2023,
        Supplement B, eq. 10).
    seed_fixed : whether the synthesis was seeded.
    posterior : posterior draws (ArviZ ``InferenceData``, or a dict of arrays shaped
        ``(chain, draw, ...)``), or None.
    diagnostics : JSON-ready summary of the fit (no per-parameter arrays), or None.
    """

    mechanism: str
    settings: Mapping[str, Any]
    ledger: PrivacyLedger
    n: int
    seed_fixed: bool
    domain: Domain | None = None
    marginals: Sequence[Sequence[str]] | None = None
    posterior: Any = None
    diagnostics: Mapping[str, Any] | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.mechanism, str) or not self.mechanism:
            raise ReleaseError("mechanism must be a non-empty string naming the synthesiser")
        if not isinstance(self.settings, Mapping):
            raise ReleaseError(f"settings must be a dict, got {type(self.settings).__name__}")
        check_no_seed(self.settings)
        if not isinstance(self.ledger, PrivacyLedger):
            raise ReleaseError(f"ledger must be the PrivacyLedger that recorded the spend, got {type(self.ledger).__name__}")
        if isinstance(self.n, bool) or not isinstance(self.n, (int, np.integer)) or self.n < 1:
            raise ReleaseError(f"n (rows of the private data) must be a positive integer, got {self.n!r}")
        if not isinstance(self.seed_fixed, (bool, np.bool_)):
            raise ReleaseError(f"seed_fixed must be True or False, got {self.seed_fixed!r}")
        if self.domain is not None and not isinstance(self.domain, Domain):
            raise ReleaseError(f"domain must be a synthinfer Domain or None, got {type(self.domain).__name__}")
        if self.diagnostics is not None:
            if not isinstance(self.diagnostics, Mapping):
                raise ReleaseError(f"diagnostics must be a dict or None, got {type(self.diagnostics).__name__}")
            check_no_seed(self.diagnostics, "diagnostics")
        # Normalised once here, so that the record is the manifest's content, JSON-ready.
        set_ = object.__setattr__
        set_(self, "settings", to_jsonable(dict(self.settings)))
        set_(self, "n", int(self.n))
        set_(self, "seed_fixed", bool(self.seed_fixed))
        if self.marginals is not None:
            set_(self, "marginals", [list(m.columns) for m in as_marginals(_marginal_list(self.marginals))])
        if self.diagnostics is not None:
            set_(self, "diagnostics", to_jsonable(dict(self.diagnostics), "diagnostics"))


def _marginal_list(marginals: Any) -> list[Marginal | Sequence[str]]:
    if isinstance(marginals, (str, Marginal)) or not isinstance(marginals, Sequence):
        raise ReleaseError(f"marginals must be a list of column lists, got {marginals!r}")
    return list(marginals)


__all__ = ["ReleaseRecord"]
