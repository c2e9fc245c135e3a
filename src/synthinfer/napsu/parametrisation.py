"""The fitted model's parametrisation: which interactions share one parameter, which are fixed
at zero, and which follow a slope or a spline.

Everything here is chosen from public facts (the Domain's derived columns and numeric bins, the
user's settings) or from the noisy counts (post-processing, no privacy cost). The pieces are
in :mod:`synthinfer.napsu.interactions`; :func:`tied_network` applies them in order to a
network of the measured marginals.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np

from synthinfer.data import Domain, Marginal
from synthinfer.errors import DomainError
from synthinfer.napsu.measurements import Measurement
from synthinfer.napsu.network import MarkovNetwork, network_for


def has_midpoints(domain: Domain, column: str) -> bool:
    """Whether ``column`` has numeric bins (:meth:`synthinfer.data.Domain.midpoints`)."""
    try:
        domain.midpoints(column)
    except DomainError:
        return False
    return True


def numeric_scores(domain: Domain) -> dict[str, np.ndarray]:
    """The number of each category of every numeric column (its bins' midpoints; public)."""
    return {c: domain.midpoints(c) for c in domain.names if c not in domain.derived and has_midpoints(domain, c)}


def tied_network(
    network: MarkovNetwork,
    marginals: Sequence[Marginal],
    reference: Mapping[str, int],
    *,
    versions: list,
    fixed: Sequence[Marginal],
    selected: Sequence[Marginal],
    scores: Mapping[str, np.ndarray],
    coarse_interactions: str,
    smooth_sd: float | Mapping[str, float] | None,
    interaction_sd: float | None,
    tie_below: float | None,
    noisy: np.ndarray,
    slopes_below: float | None = None,
    linear_by_linear: bool = False,
    sigma: float,
    measurements: Sequence[Measurement] | None = None,
    layout=None,
) -> tuple[MarkovNetwork, dict[str, int]]:
    """The network with interactions tied, and the counts of each kind.

    In order: the interactions of columns the marginals name coarsely (``versions``: each
    marginal's columns and its maps of derived columns; :func:`~synthinfer.napsu.interactions.coarse_ties`,
    public), with ``coarse_interactions="linear"`` also their slopes in numeric columns
    (:func:`~synthinfer.napsu.interactions.coarse_slopes`; ``"bilinear"``: and the products of
    pairs of them), less those of near-empty coarse cells with ``slopes_below``
    (:func:`~synthinfer.napsu.interactions.near_empty_slopes`, from the noisy ``measurements``);
    with ``linear_by_linear`` a trend per pair of numeric columns
    (:func:`~synthinfer.napsu.interactions.linear_by_linear`);
    with ``smooth_sd`` numeric
    columns' main effects as penalised splines (:func:`~synthinfer.napsu.interactions.spline_main_effects`,
    change-of-slope sd ``smooth_sd / interaction_sd`` in the prior's units); with ``tie_below``
    the ``selected`` marginals' near-empty interactions
    (:func:`~synthinfer.napsu.interactions.near_empty_ties`; the ``fixed`` marginals' kept),
    chosen from the noisy counts: each canonical cell's ``noisy`` value at ``sigma``, or, with
    ``measurements`` and their ``layout`` (AIM), their inverse-variance combination.
    """
    from synthinfer.napsu.interactions import (
        coarse_slopes,
        coarse_ties,
        linear_by_linear as linear_trends,
        near_empty_slopes,
        near_empty_ties,
        spline_main_effects,
    )
    from synthinfer.napsu.structured import canonical_summary

    q = network.queries
    ties, zero = coarse_ties(q, versions)
    slopes: list = []
    if coarse_interactions in ("linear", "bilinear"):
        slopes = coarse_slopes(q, versions, dict(scores), products=coarse_interactions == "bilinear")
    quiet: list[int] = []
    if slopes and slopes_below is not None and measurements is not None:
        quiet = near_empty_slopes(q, slopes, measurements, below=float(slopes_below))
        dropped = set(quiet)
        slopes = [sl for k, sl in enumerate(slopes) if k not in dropped]
    trends = linear_trends(q, scores) if linear_by_linear else []
    spline_zero: list[int] = []
    splines: list = []
    if smooth_sd is not None:
        sds = dict(smooth_sd) if isinstance(smooth_sd, Mapping) else dict.fromkeys(scores, smooth_sd)
        for c, sd in sds.items():
            z, sl = spline_main_effects(q, {c: scores[c]}, float(sd) / float(interaction_sd),
                                        exclude=[j for g in ties for j in g] + zero)
            spline_zero, splines = spline_zero + z, splines + sl
    near: list[list[int]] = []
    if tie_below is not None and selected:
        if measurements is not None:
            sd = np.concatenate([np.full(m.values.size, math.sqrt(m.variance)) for m in measurements])
            s, sd = canonical_summary(q, layout, noisy, sd)
        else:
            s, sd = noisy, sigma
        near = near_empty_ties(q, s, sd, below=float(tie_below), keep=[m.columns for m in fixed],
                               exclude=[j for g in ties for j in g] + zero + spline_zero)
    counts = {"coarse_ties": len(ties), "coarse_interactions": sum(len(g) for g in ties),
              "coarse_zero": len(zero), "coarse_slopes": len(slopes), "near_empty_slopes": len(quiet),
              "near_empty_ties": len(near),
              "near_empty_interactions": sum(len(g) for g in near), "spline_parameters": len(splines),
              "linear_by_linear": len(trends)}
    ties, zero, slopes = ties + near, zero + spline_zero, slopes + splines
    if not (ties or zero or slopes or trends):
        return network, counts
    return network_for(q.domain, marginals, reference, ties, zero, slopes, trends), counts
