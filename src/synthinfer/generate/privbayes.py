"""PrivBayes (Zhang, Cormode, Procopiuc, Srivastava & Xiao 2017): a DP Bayesian network.

Implemented here rather than adapted: of the maintained implementations, ``dpart`` pins
numpy 1.22 / pandas 1.4 (it does not install next to this stack), and DataSynthesizer works
through its own file-based describer and needs seaborn; neither spends through a synthinfer
ledger.

Algorithm (pure epsilon-DP, substitution neighbours: one row replaced, ``n`` public):

1. **Structure** (``epsilon_1 = beta * epsilon``; Zhang et al. Algorithm 4, GreedyBayes). The
   first attribute is drawn uniformly at random (no privacy cost). Then, for ``i = 2..d``, a
   pair ``(X, Pi)`` with ``X`` not yet in the network and ``Pi`` a set of ``min(k, |V|)``
   attributes already in it is selected by the exponential mechanism (McSherry & Talwar
   2007) with ``epsilon_1 / (d - 1)`` and utility the mutual information ``I(X; Pi)`` in bits,
   ``Pr[(X, Pi)] ~ exp(epsilon_1 I(X; Pi) / (2 (d - 1) S))``. Its sensitivity ``S`` under
   substitution is (Zhang et al. 2017, Lemma 4.1)

       S = (2/n) log2((n+1)/2) + ((n-1)/n) log2((n+1)/(n-1))     in general,
       S = (1/n) log2(n) + ((n-1)/n) log2(n/(n-1))               if X or Pi is binary.

   One ``S`` must bound every candidate's utility, so the binary bound is used only when
   every candidate of the step is binary. By sequential composition the structure is
   ``epsilon_1``-DP.
2. **Conditionals** (``epsilon_2 = (1 - beta) epsilon``; Zhang et al. Algorithm 1). With
   ``k' = min(k, d - 1)`` the network's first ``k' + 1`` attributes all lie in the parent
   set of the ``(k'+1)``-th, so ``d - k'`` joint count tables ``(X_i, Pi_i)``, ``i = k'+1..d``,
   determine every conditional. Replacing one row moves one unit of count from one cell to
   another in each table: L1 sensitivity 2 per table, ``2 (d - k')`` for all of them. Discrete
   Laplace noise of scale ``2 (d - k') / epsilon_2`` on every (integer) cell is therefore
   ``epsilon_2``-DP (Ghosh, Roughgarden & Sundararajan 2012; OpenDP's exact sampler,
   :mod:`synthinfer.privacy.samplers`, as is the exponential mechanism of step 1). Negative noisy counts are set to 0 and each table
   normalised (post-processing); a parent configuration with no mass gets a uniform
   conditional.

The degree ``k`` is either given or chosen by theta-usefulness (Zhang et al., Section 4.3)
generalised to non-binary domains: the largest ``k`` for which the expected count per cell
over the Laplace scale, ``n epsilon_2 / (2 (d - k) m_k)``, is at least ``theta``, where ``m_k``
is the product of the ``k + 1`` largest column sizes (a public, worst-case table size).
With ``k = 0`` there is no structure to learn and all of epsilon goes to the 1-way tables.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from synthinfer.data import Domain, decode, encode
from synthinfer.data.private_bins import (
    check_private_bins,
    numbers_to_draw,
    planned_domain,
    private_columns,
    resolve_private_bins,
)
from synthinfer.errors import (
    ArgumentTypeError,
    EmptyDataError,
    ParameterError,
    PrivacyError,
)
from synthinfer.generate.base import Generator
from synthinfer.privacy import PrivacyBudget, PrivacyLedger, discrete_laplace_mechanism, make_rng, seed_fixed
from synthinfer.privacy.samplers import exponential_mechanism
from synthinfer.privacy.randomness import SeedLike


def mutual_information_sensitivity(n: int, binary: bool) -> float:
    """L1 sensitivity of ``I(X; Pi)`` (bits) under substitution (Zhang et al. 2017, Lemma 4.1)."""
    if n < 2:
        raise EmptyDataError(f"PrivBayes needs at least 2 rows, got {n}")
    if binary:
        return math.log2(n) / n + (n - 1) / n * math.log2(n / (n - 1))
    return 2 / n * math.log2((n + 1) / 2) + (n - 1) / n * math.log2((n + 1) / (n - 1))


def mutual_information(codes: np.ndarray, shape: tuple[int, ...], child: int, parents: tuple[int, ...]) -> float:
    """Empirical mutual information ``I(X_child; X_parents)`` in bits from integer codes."""
    n = codes.shape[0]
    pc = _joint_code(codes, shape, parents)
    npar = int(np.prod([shape[p] for p in parents])) if parents else 1
    joint = np.bincount(pc * shape[child] + codes[:, child], minlength=npar * shape[child]).reshape(npar, shape[child])
    pj = joint / n
    px = pj.sum(axis=0, keepdims=True)
    pp = pj.sum(axis=1, keepdims=True)
    nz = pj > 0
    return float(np.sum(pj[nz] * np.log2(pj[nz] / (pp @ px)[nz])))


def _joint_code(codes: np.ndarray, shape: tuple[int, ...], cols: tuple[int, ...]) -> np.ndarray:
    """Mixed-radix (row-major) code of the columns ``cols``; 0 for no columns."""
    out = np.zeros(codes.shape[0], dtype=np.int64)
    for c in cols:
        out = out * shape[c] + codes[:, c]
    return out


def table_counts(codes: np.ndarray, shape: tuple[int, ...], network: list[tuple[int, tuple[int, ...]]], degree: int) -> list[np.ndarray]:
    """The exact count tables that PrivBayes noises: ``(X_i, Pi_i)`` for ``i = k'+1..d``.

    Each table is flattened row-major over ``Pi_i + (X_i,)``. ``network`` lists
    ``(attribute, parents)`` in network order.
    """
    k = min(degree, len(network) - 1)
    out = []
    for child, parents in network[k:]:
        cols = parents + (child,)
        size = int(np.prod([shape[c] for c in cols]))
        out.append(np.bincount(_joint_code(codes, shape, cols), minlength=size).astype(float))
    return out


class PrivBayes(Generator):
    """PrivBayes: differentially private synthetic data from a noisy Bayesian network.

    Parameters
    ----------
    epsilon : total privacy budget (pure epsilon-DP; ``delta`` is accepted for a uniform API
        and must be 0).
    seed : int, numpy Generator or None (OS entropy; use None for a real release); see
        :class:`~synthinfer.generate.Generator` for the seed rule.
    degree : the maximum number of parents ``k``, or ``"auto"`` (theta-usefulness).
    beta : share of epsilon for learning the structure (Zhang et al. use 0.3).
    theta : usefulness threshold for ``degree="auto"`` (Zhang et al. use 4).
    edges_share : share of epsilon spent choosing the bin edges of the Domain's
        :class:`~synthinfer.data.PrivateBins` columns (``"bins": "private:K"``,
        :mod:`synthinfer.data.private_bins`; pure epsilon-DP too); the network gets the rest.
        Such columns come back as numbers drawn inside their bins. Unused when no column asks.

    Fitted attributes
    -----------------
    ``domain_``, ``degree_``, ``network_`` (list of ``(attribute, parents)`` names in
    sampling order), ``conditionals_`` (one array per table, shape parent sizes + child
    size), ``first_joint_`` (noisy joint of the first ``k'+1`` attributes), ``laplace_scale_``,
    and the contract's ``n_``, ``ledger_``, ``seed_fixed_``, ``release_settings_``.
    """

    mechanism = "privbayes"

    def __init__(
        self,
        epsilon: float = 1.0,
        delta: float = 0.0,
        seed: SeedLike = None,
        *,
        degree: int | str = "auto",
        beta: float = 0.3,
        theta: float = 4.0,
        edges_share: float = 0.1,
    ) -> None:
        self.epsilon = epsilon
        self.delta = delta
        self.seed = seed
        self.degree = degree
        self.beta = beta
        self.theta = theta
        self.edges_share = edges_share

    def _release_settings(self) -> dict[str, Any]:
        """Constructor settings for a release's record, ``release_settings_`` (the seed only as
        whether one was fixed; ``get_params()`` returns them as given)."""
        return {
            "epsilon": self.epsilon, "delta": self.delta, "degree": self.degree,
            "beta": self.beta, "theta": self.theta, "edges_share": self.edges_share, "seed_fixed": seed_fixed(self.seed),
        }

    def _validate(self) -> PrivacyBudget:
        budget = PrivacyBudget(self.epsilon, self.delta)
        if budget.delta != 0:
            raise PrivacyError(f"PrivBayes is pure epsilon-DP; pass delta=0, got {self.delta!r}")
        if isinstance(self.beta, bool) or not isinstance(self.beta, (int, float)) or not (0 < self.beta < 1):
            raise PrivacyError(f"beta (the structure's share of epsilon) must be in (0, 1), got {self.beta!r}")
        if self.degree != "auto" and (
            isinstance(self.degree, bool) or not isinstance(self.degree, (int, np.integer)) or self.degree < 0
        ):
            raise ParameterError(f"degree must be a non-negative integer or 'auto', got {self.degree!r}")
        if not (isinstance(self.theta, (int, float)) and self.theta > 0):
            raise ParameterError(f"theta must be a number > 0, got {self.theta!r}")
        if isinstance(self.edges_share, bool) or not isinstance(self.edges_share, (int, float)) or not (
                0 < self.edges_share < 1):
            raise ParameterError(f"edges_share must be a number in (0, 1), got {self.edges_share!r}")
        return budget

    def _choose_degree(self, n: int, shape: tuple[int, ...], eps2: float) -> int:
        d = len(shape)
        if self.degree != "auto":
            return min(int(self.degree), d - 1)
        sizes = sorted(shape, reverse=True)
        best = 0
        for k in range(1, d):
            m = math.prod(sizes[: k + 1])
            if n * eps2 / (2 * (d - k) * m) >= self.theta:
                best = k
        return best

    def fit(self, data: pd.DataFrame, domain: Domain | None = None, ledger: PrivacyLedger | None = None) -> PrivBayes:
        """Learn the network and its noisy conditionals from ``data`` over the public ``domain``.

        Spends ``epsilon`` from ``ledger`` (a new ledger for exactly that budget when None) in
        two charges (structure, conditionals); raises
        :class:`~synthinfer.errors.BudgetExceededError` before any noise if it does not fit.
        """
        self._start_fit()
        budget = self._validate()
        if not isinstance(domain, Domain):
            raise ArgumentTypeError(f"domain must be a synthinfer Domain, got {type(domain).__name__}")
        # private bin edges (PrivateBins columns): every input checked before any spend, on the
        # bins as asked for; the edges drawn once the ledger has verified the whole budget
        edges_epsilon = budget.epsilon * float(self.edges_share) if private_columns(domain) else 0.0
        check_private_bins(data, domain, edges_epsilon)
        codes = encode(data, planned_domain(domain))
        n, d = codes.shape
        if n < 2:
            raise EmptyDataError(f"PrivBayes needs at least 2 rows, got {n}")
        ledger = self._ledger_for(budget, data, ledger)
        ledger.check("PrivBayes", budget.epsilon, 0.0, mechanism="PrivBayes")
        if edges_epsilon:
            domain = resolve_private_bins(data, domain, epsilon=edges_epsilon, ledger=ledger)
            codes = encode(data, domain)
            budget = PrivacyBudget(budget.epsilon - edges_epsilon, 0.0)
        shape = domain.shape
        rng = make_rng(self.seed)
        k = self._choose_degree(n, shape, (1 - self.beta) * budget.epsilon)
        if k == 0:  # no parents anywhere: nothing to select, all budget to the 1-way tables
            eps1, eps2 = 0.0, budget.epsilon
            order = list(rng.permutation(d))
            network = [(int(j), ()) for j in order]
        else:
            eps1 = self.beta * budget.epsilon
            eps2 = budget.epsilon - eps1
            network = self._greedy_bayes(codes, shape, k, eps1, rng, ledger)
        tables = table_counts(codes, shape, network, k)
        sens = 2.0 * len(tables)
        noisy, scale = discrete_laplace_mechanism(
            np.concatenate(tables), sensitivity=sens, epsilon=eps2, ledger=ledger,
            name=f"PrivBayes conditionals ({len(tables)} tables of degree {k})",
        )
        self.conditionals_ = self._conditionals(noisy, tables, network, shape, k)
        first = np.clip(noisy[: tables[0].size], 0.0, None)
        if first.sum() <= 0:
            first = np.ones_like(first)
        child0, parents0 = network[k]
        self.first_joint_ = (first / first.sum()).reshape([shape[c] for c in parents0 + (child0,)])
        names = domain.names
        self.network_ = [(names[c], tuple(names[p] for p in ps)) for c, ps in network]
        self._network_idx = network
        self.domain_ = domain
        self.degree_ = k
        self.laplace_scale_ = scale
        self.ledger_ = ledger
        self.n_ = n
        self.seed_fixed_ = seed_fixed(self.seed)
        self._fit_complete()
        return self

    def _summary_details(self) -> list[str]:
        """The learned network: each column after its parents (GreedyBayes's order)."""
        arcs = "; ".join(f"{c} <- {', '.join(ps)}" if ps else c for c, ps in self.network_)
        return [f"  network (degree {self.degree_}): {arcs}",
                f"  Laplace scale of the conditionals: {self.laplace_scale_:.4g}"]

    def _greedy_bayes(self, codes, shape, k, eps1, rng, ledger) -> list[tuple[int, tuple[int, ...]]]:
        n, d = codes.shape
        eps_step = eps1 / (d - 1)
        # Spent before the first noisy selection, like every mechanism (the score sensitivity,
        # Lemma 4.1 of Zhang et al. 2017, depends only on n and on whether a pair is binary).
        ledger.spend(
            "PrivBayes structure", eps1, 0.0,
            mechanism="exponential mechanism on mutual information (GreedyBayes)",
            selections=d - 1, epsilon_per_selection=eps_step, degree=k,
            sensitivity_general=mutual_information_sensitivity(n, False),
            sensitivity_binary=mutual_information_sensitivity(n, True),
        )
        first = int(rng.integers(d))
        network: list[tuple[int, tuple[int, ...]]] = [(first, ())]
        chosen = [first]
        for _ in range(d - 1):
            cands = [
                (x, pa)
                for x in range(d) if x not in chosen
                for pa in itertools.combinations(sorted(chosen), min(k, len(chosen)))
            ]
            binary = all(shape[x] == 2 or math.prod(shape[p] for p in pa) == 2 for x, pa in cands)
            s = mutual_information_sensitivity(n, binary)
            scores = np.array([mutual_information(codes, shape, x, pa) for x, pa in cands])
            # Pr ~ exp(eps u / (2 S)), OpenDP's exact report-noisy-max with Gumbel noise
            pick = exponential_mechanism(scores, epsilon=eps_step, sensitivity=s)
            x, pa = cands[pick]
            network.append((x, pa))
            chosen.append(x)
        return network

    @staticmethod
    def _conditionals(noisy, tables, network, shape, k) -> list[np.ndarray]:
        """Noisy joint tables -> non-negative, normalised conditionals ``Pr[X_i | Pi_i]``."""
        out, start = [], 0
        for (child, parents), t in zip(network[min(k, len(network) - 1):], tables):
            block = np.clip(noisy[start:start + t.size], 0.0, None)
            start += t.size
            block = block.reshape([shape[p] for p in parents] + [shape[child]])
            tot = block.sum(axis=-1, keepdims=True)
            uniform = np.full_like(block, 1.0 / shape[child])
            out.append(np.where(tot > 0, block / np.where(tot > 0, tot, 1.0), uniform))
        return out

    def _sample_codes(self, n: int, rng: np.random.Generator) -> np.ndarray:
        shape = self.domain_.shape
        net, k = self._network_idx, min(self.degree_, len(self._network_idx) - 1)
        codes = np.zeros((n, len(shape)), dtype=np.int64)
        # The first table is the joint of the first k'+1 attributes (its parents are all the
        # attributes before it): sample them together from its normalised noisy joint.
        (child0, parents0), joint = net[k], self.first_joint_
        flat = rng.choice(joint.size, size=n, p=joint.ravel())
        for c, v in zip(parents0 + (child0,), np.unravel_index(flat, joint.shape)):
            codes[:, c] = v
        for (child, parents), cond in zip(net[k + 1:], self.conditionals_[1:]):
            pc = _joint_code(codes, shape, parents)
            probs = cond.reshape(-1, shape[child])[pc]
            u = rng.random((n, 1))
            codes[:, child] = np.minimum((np.cumsum(probs, axis=1) < u).sum(axis=1), shape[child] - 1)
        return codes

    def generate(self, m: int, n: int | None = None, seed: SeedLike = None, *,
                 midpoints: bool | Sequence[str] = False, numbers: bool | Sequence[str] | None = None
                 ) -> list[pd.DataFrame]:
        """Draw ``m`` synthetic datasets of ``n`` rows (default: as many as the real data).

        Ancestral sampling from the noisy network: post-processing, no privacy cost.
        Discretised columns come back as ``NapsuMQ.generate`` returns them: those named by
        ``numbers`` as numbers drawn inside their bins (default ``None``: the columns given as
        numbers with private bins; ``True``: all), those named by ``midpoints`` as bin
        midpoints, the rest as bin labels.
        """
        self._check_fitted()
        m, n = self._check_m_n(m, n)
        numbers = numbers_to_draw(self.domain_, midpoints, numbers)  # checked before any draw
        rng = self._generate_rng(seed)
        return [decode(self._sample_codes(n, rng), self.domain_, midpoints=midpoints, numbers=numbers, rng=rng)
                for _ in range(m)]

    def __repr__(self) -> str:
        return f"PrivBayes(epsilon={self.epsilon!r}, degree={self.degree!r})"
