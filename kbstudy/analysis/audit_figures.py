"""The figures of the correctness audit (notebook 02): null-candidate outcomes per problem and the spread of the
accuracy metrics, drawn from the tables of :mod:`kbstudy.analysis.audit`."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import seaborn as sns
from matplotlib.colors import BoundaryNorm, ListedColormap
from matplotlib.patches import Patch

from kbstudy.analysis import figures as plots
from kbstudy.analysis.audit import CELL_CATEGORIES, METRICS, NULL_ORDER, THRESHOLDS

#: Colours of the cell categories, in :data:`kbstudy.analysis.audit.CELL_CATEGORIES` order (seaborn's colorblind
#: palette: green, orange, blue, light grey, white).
CELL_COLORS = ("#029e73", "#d55e00", "#0173b2", "#d9d9d9", "#ffffff")


def outcome_heatmap(grid, title: str = ""):
    """Figure: one panel per (setting, precision) of :func:`kbstudy.analysis.audit.outcome_grid`, null kinds as rows
    and problems as columns (sorted by level and id, level boundaries marked), each cell coloured by its category
    (:data:`kbstudy.analysis.audit.CELL_CATEGORIES`). Returns the matplotlib figure (the caller saves it:
    :func:`kbstudy.analysis.figures.show_figure`)."""
    order = {k: i for i, k in enumerate(NULL_ORDER)}
    panels = [(key, g) for key, g in grid.groupby(["setting", "precision"], sort=True)]
    if not panels:
        fig, ax = plt.subplots(figsize=(6, 1))
        ax.axis("off")
        ax.text(0.5, 0.5, "no null-candidate records", ha="center", va="center")
        return fig
    heights = [max(1.2, 0.22 * g["null"].nunique() + 0.6) for _, g in panels]
    fig, axes = plt.subplots(len(panels), 1, figsize=(13, sum(heights) + 0.8), squeeze=False,
                             gridspec_kw={"height_ratios": heights})
    cmap = ListedColormap(CELL_COLORS)
    norm = BoundaryNorm(np.arange(len(CELL_CATEGORIES) + 1) - 0.5, cmap.N)
    for ax, ((setting, precision), g) in zip(axes[:, 0], panels):
        problems = g[["level", "problem_id"]].drop_duplicates().sort_values(["level", "problem_id"])
        columns = {tuple(p): i for i, p in enumerate(problems.itertuples(index=False))}
        nulls = sorted(g["null"].unique(), key=lambda k: order.get(k, len(order)))
        rows = {k: i for i, k in enumerate(nulls)}
        cells = np.full((len(nulls), len(columns)), CELL_CATEGORIES.index("not evaluated"))
        for r in g.itertuples(index=False):
            cells[rows[r.null], columns[(r.level, r.problem_id)]] = r.code
        # rasterized: thousands of cells would make a megabyte of SVG paths
        ax.pcolormesh(cells, cmap=cmap, norm=norm, edgecolors="white", linewidth=0.2 if len(columns) < 150 else 0,
                      rasterized=True)
        ax.set_yticks(np.arange(len(nulls)) + 0.5, nulls, fontsize=6)
        ax.invert_yaxis()
        levels = problems.level.to_numpy()
        starts = [0] + [i for i in range(1, len(levels)) if levels[i] != levels[i - 1]]
        for i in starts[1:]:
            ax.axvline(i, color="black", linewidth=0.8)
        ax.set_xticks([(s + e) / 2 for s, e in zip(starts, starts[1:] + [len(levels)])],
                      [("DLRM-Bench" if levels[s] == 5 else f"level {levels[s]}") + f" ({e - s})"
                       for s, e in zip(starts, starts[1:] + [len(levels)])], fontsize=7)
        ax.tick_params(axis="x", length=0)
        ax.set_title(f"{setting}, {precision}", fontsize=8, loc="left")
    handles = [Patch(facecolor=c, edgecolor="0.6", label=lab) for c, lab in zip(CELL_COLORS, CELL_CATEGORIES)]
    fig.legend(handles=handles, loc="upper center", ncol=len(handles), fontsize=7, frameon=False,
               bbox_to_anchor=(0.5, 1.0))
    if title:
        fig.suptitle(title, fontsize=9, y=1.03)
    fig.tight_layout(rect=(0, 0, 1, 0.97))
    return fig


def metric_strips(values, title: str = ""):
    """Figure: one panel per (precision, metric) of :func:`kbstudy.analysis.audit.metric_values`, a strip of values
    per group on a log axis, with the threshold ``T_m`` (:data:`kbstudy.analysis.audit.THRESHOLDS`) as a dashed line.
    Deterministic (jitter seeded through :func:`kbstudy.analysis.figures.seed_jitter`)."""
    precisions = sorted(values.precision.unique()) if len(values) else []
    groups = [g for g in ("honest", "TF32 proxy", "noise", "mean", "zeros") if g in set(values.get("group", []))]
    fig, axes = plt.subplots(max(1, len(precisions)), len(METRICS), figsize=(12, 1.2 + 1.6 * max(1, len(precisions))),
                             squeeze=False)
    plots.seed_jitter()
    for i, precision in enumerate(precisions):
        for j, metric in enumerate(METRICS):
            ax = axes[i, j]
            sub = values[(values.precision == precision) & (values.metric == metric)]
            sns.stripplot(data=sub, x="value", y="group", order=groups, ax=ax, size=2.5, jitter=0.25, alpha=0.6,
                          orient="h", hue="group", hue_order=groups, legend=False, rasterized=True)
            ax.set_xscale("log")
            ax.axvline(THRESHOLDS[metric][precision], color="0.2", linestyle="--", linewidth=1)
            ax.set(xlabel=metric if i == len(precisions) - 1 else "", ylabel=precision if j == 0 else "")
            if j:
                ax.set_yticklabels([])
    if title:
        fig.suptitle(title, fontsize=9)
    fig.tight_layout()
    return fig
