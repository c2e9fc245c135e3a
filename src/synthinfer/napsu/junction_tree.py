"""Junction tree (clique tree) of the marginals' scopes, for exact inference in MED_theta.

The structure is built with private-pgm (``mbi.junction_tree.make_junction_tree``): the
Markov graph of the scopes is triangulated along a greedy elimination order, its maximal
cliques are joined by a maximum-weight spanning forest on separator sizes (which has the
running intersection property), and isolated columns become singleton cliques. Here the
forest is only rooted and ordered (parents before children) for message passing and forward
sampling; the numerics live in :mod:`synthinfer.napsu.network`.

Cost of inference is ``O(sum_c prod_{i in c} k_i)``, exponential in the tree width, not in the
number of columns (Koller and Friedman 2009, Section 10.1; NAPSU-MQ Section 4).
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import networkx as nx

from synthinfer.data.domain import Domain

with warnings.catch_warnings():
    # mbi warns at import about JAX's float32 mode and about a compilation cache; only its
    # junction-tree construction is used here (no numerics, no compiled programs), and
    # synthinfer's own numerics run in float64 (synthinfer._jax), so neither applies.
    warnings.filterwarnings("ignore", message="JAX is running in float32 mode", category=UserWarning)
    warnings.filterwarnings("ignore", message="JAX persistent compilation cache", category=UserWarning)
    from mbi.domain import Domain as _MbiDomain
    from mbi.junction_tree import make_junction_tree


@dataclass(frozen=True)
class JunctionTree:
    """A rooted junction forest over the columns of a Domain.

    Attributes
    ----------
    cliques : tuple of tuple of int
        Column indices of each maximal clique, ascending, listed parents-before-children.
    parent : tuple of int
        Index (into ``cliques``) of each clique's parent, ``-1`` for the root of a component.
    separators : tuple of tuple of int
        Columns shared with the parent, ascending (empty for roots).
    """

    domain: Domain
    cliques: tuple[tuple[int, ...], ...]
    parent: tuple[int, ...]
    separators: tuple[tuple[int, ...], ...]

    @classmethod
    def build(cls, domain: Domain, scopes: Iterable[Sequence[str]]) -> JunctionTree:
        """Junction forest whose cliques cover every scope and every column of ``domain``."""
        names = domain.names
        mdom = _MbiDomain(names, domain.shape)
        tree, _ = make_junction_tree(mdom, [tuple(s) for s in scopes])
        cliques: list[tuple[int, ...]] = []
        parent: list[int] = []
        separators: list[tuple[int, ...]] = []
        # Root each component at its largest clique (the root's table is sampled jointly).
        # Components in order of their first column, for a reproducible layout.
        components = sorted(
            nx.connected_components(tree),
            key=lambda comp: min(names.index(a) for cl in comp for a in cl),
        )
        for comp in components:
            root = max(sorted(comp), key=lambda c: math.prod(domain[a].size for a in c))
            pos = {root: len(cliques)}
            cliques.append(tuple(sorted(names.index(a) for a in root)))
            parent.append(-1)
            separators.append(())
            for p, c in nx.bfs_edges(tree, root):
                pos[c] = len(cliques)
                cl = tuple(sorted(names.index(a) for a in c))
                cliques.append(cl)
                parent.append(pos[p])
                separators.append(tuple(sorted(set(cl) & set(cliques[pos[p]]))))
        covered = {v for c in cliques for v in c}
        assert covered == set(range(len(names))), "junction tree must cover every column"
        return cls(domain, tuple(cliques), tuple(parent), tuple(separators))

    def shape(self, clique: int) -> tuple[int, ...]:
        return tuple(self.domain.shape[v] for v in self.cliques[clique])

    @property
    def width(self) -> int:
        """Tree width of this decomposition: largest clique size minus one."""
        return max(len(c) for c in self.cliques) - 1

    @property
    def table_cells(self) -> int:
        """Total number of cells in the clique tables (the cost of one message pass)."""
        return sum(math.prod(self.shape(i)) for i in range(len(self.cliques)))

    def children(self, clique: int) -> list[int]:
        return [i for i, p in enumerate(self.parent) if p == clique]
