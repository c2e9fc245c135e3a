"""The report's figures: matplotlib, embedded in the page as PNG data URIs (no network, one file)."""

from __future__ import annotations

import base64
import io
import itertools
from collections.abc import Sequence

import numpy as np

#: Resolution of the embedded PNGs: sharp on a laptop, small enough that a 15-column report
#: stays well under a few MB.
DPI = 90
#: Categories drawn per column in the synthetic marginals (the most frequent ones beyond it are
#: summed into "other").
MAX_BARS = 12


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")  # no display: the figures go into the page
    import matplotlib.pyplot as plt

    return plt


def data_uri(fig) -> str:
    """The figure as a ``data:image/png;base64,...`` URI; the figure is closed."""
    plt = _pyplot()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=DPI, bbox_inches="tight")
    plt.close(fig)
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode("ascii")


def marginals_graph(columns: Sequence[str], marginals: Sequence[Sequence[str]]) -> str:
    """The columns as nodes, an edge wherever two columns are measured in one marginal (so a
    3-way marginal draws a triangle); edge width counts the marginals holding the pair."""
    import networkx as nx

    plt = _pyplot()
    g = nx.Graph()
    g.add_nodes_from(columns)
    for m in marginals:
        for a, b in itertools.combinations(m, 2):
            w = g.get_edge_data(a, b, {"weight": 0})["weight"]
            g.add_edge(a, b, weight=w + 1)
    fig, ax = plt.subplots(figsize=(6.4, 4.8))
    pos = nx.circular_layout(g)
    widths = [1.0 + 1.5 * g[a][b]["weight"] for a, b in g.edges]
    nx.draw_networkx_edges(g, pos, ax=ax, width=widths, edge_color="#7a8ca5")
    measured = {c for m in marginals for c in m}
    nx.draw_networkx_nodes(g, pos, ax=ax, node_size=900,
                           node_color=["#cfe3f7" if c in measured else "#f4d4d4" for c in g.nodes])
    nx.draw_networkx_labels(g, pos, ax=ax, font_size=8)
    ax.set_axis_off()
    ax.set_title("measured marginals: an edge joins columns measured together", fontsize=9)
    return data_uri(fig)


def synthetic_bars(names: Sequence[str], categories: Sequence[Sequence[object]],
                   shares: Sequence[np.ndarray], real: Sequence[np.ndarray] | None = None) -> str:
    """A panel per column: each category's share in the synthetic datasets (the bar: their mean,
    the whisker: their range), and, when given (private part only), the real share as a dot."""
    plt = _pyplot()
    k = len(names)
    cols = 3
    rows = int(np.ceil(k / cols))
    fig, axes = plt.subplots(rows, cols, figsize=(11, 2.6 * rows), squeeze=False)
    for ax, name, cats, s, i in zip(axes.ravel(), names, categories, shares, range(k)):
        mean, lo, hi = s.mean(axis=0), s.min(axis=0), s.max(axis=0)
        order = np.arange(len(cats))
        if len(cats) > MAX_BARS:  # the most frequent categories, the rest as one bar
            order = np.argsort(-mean)[: MAX_BARS - 1]
        labels = [str(cats[j]) for j in order]
        y_mean, y_lo, y_hi = mean[order], lo[order], hi[order]
        r = None if real is None else real[i][order]
        if len(order) < len(cats):
            rest = np.setdiff1d(np.arange(len(cats)), order)
            labels.append("other")
            y_mean, y_lo, y_hi = (np.append(y_mean, mean[rest].sum()), np.append(y_lo, s[:, rest].sum(axis=1).min()),
                                  np.append(y_hi, s[:, rest].sum(axis=1).max()))
            r = None if r is None else np.append(r, real[i][rest].sum())
        x = np.arange(len(labels))
        ax.bar(x, y_mean, color="#8fb3de", yerr=[y_mean - y_lo, y_hi - y_mean], capsize=2, ecolor="#555",
               label="synthetic (mean, range)")
        if r is not None:
            ax.plot(x, r, "o", color="#c0392b", ms=4, label="real")
        ax.set_title(name, fontsize=9)
        ax.set_xticks(x, [lab if len(lab) <= 14 else lab[:13] + "…" for lab in labels], rotation=40, ha="right",
                      fontsize=7)
        ax.tick_params(axis="y", labelsize=7)
    for ax in axes.ravel()[k:]:
        ax.set_axis_off()
    axes[0, 0].legend(fontsize=7)
    fig.tight_layout()
    return data_uri(fig)


def _pair_heatmap(names: Sequence[str], values: np.ndarray, *, cmap: str, vmin: float, vmax: float, fmt: str,
                  label: str, title: str, diagonal: bool) -> str:
    """A columns x columns heatmap, each cell annotated (up to 16 columns; the diagonal only if
    ``diagonal``)."""
    plt = _pyplot()
    k = len(names)
    fig, ax = plt.subplots(figsize=(1.2 + 0.45 * k, 1.0 + 0.45 * k))
    im = ax.imshow(values, cmap=cmap, vmin=vmin, vmax=vmax)
    ax.set_xticks(range(k), names, rotation=60, ha="right", fontsize=7)
    ax.set_yticks(range(k), names, fontsize=7)
    if k <= 16:
        for i, j in itertools.product(range(k), range(k)):
            if diagonal or i != j:
                ax.text(j, i, format(values[i, j], fmt), ha="center", va="center", fontsize=6)
    fig.colorbar(im, ax=ax, shrink=0.8, label=label)
    ax.set_title(title, fontsize=9)
    return data_uri(fig)


def tv_heatmap(names: Sequence[str], tv: np.ndarray) -> str:
    """The total variation distances: 1-way on the diagonal, 2-way off it."""
    return _pair_heatmap(names, tv, cmap="Reds", vmin=0, vmax=max(0.1, float(tv.max())), fmt=".2f",
                         label="total variation distance", title="real vs synthetic marginals (diagonal: 1-way)",
                         diagonal=True)


def association_heatmap(names: Sequence[str], diff: np.ndarray) -> str:
    """Cramér's V, synthetic minus real, for every pair of columns (blue: weaker in the
    synthetic data, red: stronger)."""
    bound = max(0.05, float(np.abs(diff).max()))
    return _pair_heatmap(names, diff, cmap="RdBu_r", vmin=-bound, vmax=bound, fmt="+.2f",
                         label="Cramér's V: synthetic - real",
                         title="strength of each pair's association, synthetic minus real", diagonal=False)


def forest_figure(names: Sequence[str], synthetic: np.ndarray, synthetic_ci: np.ndarray,
                  real: np.ndarray | None = None, real_ci: np.ndarray | None = None, *, level: str = "95%"):
    """A matplotlib figure: each coefficient's combined synthetic estimate and interval (Rubin's
    rules for synthetic data) and, when given, the real data's beside it."""
    plt = _pyplot()
    k = len(names)
    fig, ax = plt.subplots(figsize=(7.5, 0.9 + 0.45 * k))
    y = np.arange(k)[::-1]
    shift = 0.0 if real is None else 0.15
    if real is not None:
        ax.errorbar(real, y + shift, xerr=[real - real_ci[:, 0], real_ci[:, 1] - real], fmt="o", color="#c0392b",
                    capsize=3, label="real data")
    ax.errorbar(synthetic, y - shift, xerr=[synthetic - synthetic_ci[:, 0], synthetic_ci[:, 1] - synthetic],
                fmt="s", color="#2c6fbb", capsize=3, label="synthetic (combined)")
    ax.axvline(0, color="0.6", lw=0.8)
    ax.set_yticks(y, [n if len(n) <= 40 else n[:39] + "…" for n in names], fontsize=8)
    ax.legend(fontsize=8, loc="best")
    ax.set_title(f"coefficients: {level} intervals", fontsize=9)
    fig.tight_layout()
    return fig


def forest(names: Sequence[str], real: np.ndarray, real_ci: np.ndarray, synthetic: np.ndarray,
           synthetic_ci: np.ndarray) -> str:
    """:func:`forest_figure` of real and synthetic intervals, as a data URI."""
    return data_uri(forest_figure(names, synthetic, synthetic_ci, real, real_ci))
