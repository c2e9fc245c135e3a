"""Mixed tabular data <-> a numeric feature matrix in [0, 1]^d: a view of a public Domain.

Neural generators (DP-GAN, DP-CGAN) work on real vectors. A :class:`TabularSchema` lays out
the columns of a :class:`~synthinfer.data.Domain` as features: a
:class:`~synthinfer.data.Continuous` column is scaled to [0, 1] with its *public* bounds,
``(x - lower) / (upper - lower)``, never with the min/max of the private data (those would
leak the extreme rows; Ghalebikesabi et al. 2022, Section 4, scale every feature to [0, 1]
the same way), and a categorical column becomes a one-hot block over its public categories
(a discretised column's numbers take their bin).

The short spelling ``{"age": (17, 90), "sex": ["Female", "Male"]}`` is parsed by
:meth:`Domain.from_spec <synthinfer.data.Domain.from_spec>`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from synthinfer.data import Continuous, Domain, DomainColumn, DomainSpec, encode
from synthinfer.errors import ArgumentTypeError, EmptyDataError, UnknownColumnError

__all__ = ["Continuous", "TabularSchema"]


@dataclass(frozen=True)
class TabularSchema:
    """The feature layout of a Domain's columns, each :class:`Continuous` or a categorical
    :class:`~synthinfer.data.Column`.

    The feature vector is the concatenation, in column order, of one scaled value per
    continuous column and one one-hot block per categorical column; ``blocks`` gives each
    column's ``(start, stop)`` slice.
    """

    domain: Domain

    @classmethod
    def from_domain(cls, domain: Domain) -> TabularSchema:
        """The feature layout of ``domain``."""
        if not isinstance(domain, Domain):
            raise ArgumentTypeError(f"expected a synthinfer Domain, got {type(domain).__name__}")
        return cls(domain)

    @classmethod
    def from_spec(cls, spec: DomainSpec | TabularSchema) -> TabularSchema:
        """From a :class:`Domain` or its short spelling (see :meth:`Domain.from_spec`)."""
        if isinstance(spec, TabularSchema):
            return spec
        return cls(Domain.from_spec(spec))

    @property
    def columns(self) -> tuple[DomainColumn, ...]:
        return self.domain.columns

    @property
    def names(self) -> tuple[str, ...]:
        return self.domain.names

    @property
    def widths(self) -> tuple[int, ...]:
        return tuple(1 if isinstance(c, Continuous) else c.size for c in self.columns)

    @property
    def n_features(self) -> int:
        return int(sum(self.widths))

    @property
    def blocks(self) -> tuple[tuple[int, int], ...]:
        out, start = [], 0
        for w in self.widths:
            out.append((start, start + w))
            start += w
        return tuple(out)

    def __getitem__(self, name: str) -> DomainColumn:
        return self.domain[name]

    def without(self, name: str) -> TabularSchema:
        self.domain[name]
        return TabularSchema(self.domain.project([n for n in self.names if n != name]))

    def transform(self, df: pd.DataFrame) -> np.ndarray:
        """Encode ``df`` to an ``(n, n_features)`` float array in [0, 1].

        Raises :class:`OutOfDomainError` for numbers outside the public bounds (they are not
        clipped silently; clip explicitly with :func:`synthinfer.data.clip_to_bounds`) or
        categories outside the public list, :class:`MissingValueError` for missing values,
        :class:`NonFiniteError` for infinite numbers.
        """
        if not isinstance(df, pd.DataFrame):
            raise ArgumentTypeError(f"expected a pandas DataFrame, got {type(df).__name__}")
        lacking = [n for n in self.names if n not in df.columns]
        if lacking:
            raise UnknownColumnError(f"the table lacks Domain column(s) {lacking}")
        if len(df) == 0:
            raise EmptyDataError("the table has no rows")
        parts = []
        for c in self.columns:
            if isinstance(c, Continuous):
                parts.append(c.to_unit(c.numbers(df[c.name]))[:, None])
            else:
                codes = encode(df[[c.name]], Domain([c]))[:, 0]
                parts.append(np.eye(c.size)[codes])
        return np.concatenate(parts, axis=1)

    def inverse_transform(self, scaled: np.ndarray, codes: np.ndarray) -> pd.DataFrame:
        """Build a DataFrame from scaled continuous values and categorical codes.

        ``scaled`` is ``(n, n_continuous)`` (clipped to [0, 1]; integer columns rounded) and
        ``codes`` ``(n, n_categorical)`` integer codes, both in Domain order of their kind.
        """
        data, jc, jk = {}, 0, 0
        for c in self.columns:
            if isinstance(c, Continuous):
                data[c.name] = c.from_unit(scaled[:, jc])
                jc += 1
            else:
                data[c.name] = pd.Categorical.from_codes(codes[:, jk], categories=list(c.categories))
                jk += 1
        return pd.DataFrame(data)

    def to_dict(self) -> dict:
        """JSON-ready description (public information only): the Domain's description."""
        return self.domain.to_dict()
