"""Plots of learning trajectories (Wilde et al. 2021, A.6.4) with matplotlib.

- :func:`plot_trajectory`: a criterion against m for a fixed n (one or several models).
- :func:`branching_plot`: the criterion against the *total* amount of data n + m; the black line
  is real data only, each coloured branch starts on it at n real rows and adds synthetic rows.
- :func:`model_comparison_plot`: for fixed n, the criterion against m for every model, with the
  real-only value (w = 0) as a horizontal baseline.
- :func:`n_effective_plot`: the effective number of extra real samples against n, per model.

Each function draws on ``ax`` (a new figure when None) and returns the Axes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np


def _axes(ax):
    import matplotlib.pyplot as plt

    if ax is None:
        _, ax = plt.subplots(figsize=(6, 4))
    return ax


def plot_trajectory(m_grid: Sequence[int], curves: Mapping[str, Sequence[float]], *, criterion: str = "criterion", m_hat: int | None = None, ax=None):
    """Criterion against m for each labelled curve; an optional vertical line at m-hat."""
    ax = _axes(ax)
    for label, c in curves.items():
        ax.plot(m_grid, c, label=label)
    if m_hat is not None:
        ax.axvline(m_hat, color="grey", ls="--", lw=1, label=f"m-hat = {m_hat}")
    ax.set_xlabel("m (synthetic rows)")
    ax.set_ylabel(criterion)
    ax.legend(fontsize=8)
    return ax


def branching_plot(
    n_real: Sequence[int], real_curve: Sequence[float], n_grid: Sequence[int], m_grid: Sequence[int], branches: np.ndarray,
    *, criterion: str = "criterion", title: str | None = None, ax=None,
):
    """Black: criterion with n' real rows only; colour: n real rows + m synthetic rows, at x = n + m.

    ``branches[a, b]`` is the criterion with ``n_grid[a]`` real and ``m_grid[b]`` synthetic rows.
    """
    import matplotlib as mpl

    ax = _axes(ax)
    cmap = mpl.colormaps["viridis"]
    m = np.asarray(m_grid)
    for a, n in enumerate(n_grid):
        ax.plot(n + m, branches[a], color=cmap(a / max(len(n_grid) - 1, 1)), lw=1)
    ax.plot(n_real, real_curve, color="black", lw=2, label="real data only")
    ax.set_xscale("log")
    ax.set_xlabel("total data n + m")
    ax.set_ylabel(criterion)
    if title:
        ax.set_title(title, fontsize=9)
    ax.legend(fontsize=7)
    return ax


def model_comparison_plot(
    m_grid: Sequence[int], curves: Mapping[str, Sequence[float]], *, baseline: float | None = None,
    criterion: str = "criterion", title: str | None = None, ax=None,
):
    """For one n: criterion against m for every model; ``baseline`` = real data only (w = 0)."""
    ax = _axes(ax)
    for label, c in curves.items():
        ax.plot(m_grid, c, label=label, lw=1.2)
    if baseline is not None:
        ax.axhline(baseline, color="black", lw=1.5, label="w = 0 (real only)")
    ax.set_xlabel("m (synthetic rows)")
    ax.set_ylabel(criterion)
    if title:
        ax.set_title(title, fontsize=9)
    ax.legend(fontsize=7)
    return ax


def n_effective_plot(n_grid: Sequence[int], n_eff: Mapping[str, tuple[Sequence[float], Sequence[float]]], *, title: str | None = None, ax=None):
    """Effective extra real samples (mean +- sd) against n, one line per model."""
    ax = _axes(ax)
    for label, (mean, sd) in n_eff.items():
        mean, sd = np.asarray(mean, float), np.asarray(sd, float)
        ax.plot(n_grid, mean, marker="o", ms=3, label=label)
        ax.fill_between(n_grid, mean - sd, mean + sd, alpha=0.15)
    ax.set_xlabel("n (real rows)")
    ax.set_ylabel("n-effective (extra real rows)")
    if title:
        ax.set_title(title, fontsize=9)
    ax.legend(fontsize=7)
    return ax
