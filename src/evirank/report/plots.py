"""Plots of a report, as PNG bytes: per-query differences, means by query length, training losses.

matplotlib (the ``plots`` extra) is imported on first use, with the non-interactive Agg backend,
so the report works on servers without a display.

Example:
    >>> import pandas as pd
    >>> png = per_query_difference_plot(pd.Series([0.3, 0.1, -0.2], index=["1", "2", "3"]),
    ...                                 run="birch", baseline="bm25", measure="AP")
    >>> png[:4] == b"\\x89PNG"
    True
"""

from __future__ import annotations

import io
import logging
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from evirank.extras import require

logger = logging.getLogger(__name__)

BETTER_COLOUR = "#2b8a3e"
WORSE_COLOUR = "#c92a2a"
SAME_COLOUR = "#868e96"


def _pyplot() -> Any:
    matplotlib = require("matplotlib", "plots")
    matplotlib.use("Agg", force=True)
    return require("matplotlib.pyplot", "plots")


def per_query_difference_plot(
    differences: pd.Series,
    *,
    run: str,
    baseline: str,
    measure: str,
    title: str | None = None,
) -> bytes:
    """Bars of each query's difference from the baseline, sorted descending (Birch's Figure 5.1).

    Args:
        differences: qid -> run minus baseline, already sorted (see
            :func:`~evirank.report.analysis.per_query_differences`).
        run: the run's name (title and legend).
        baseline: the baseline's name.
        measure: the measure's name (axis label).
        title: the plot title (default: "Per-query difference in <measure>: <run> vs <baseline>").

    Queries are named on the x axis up to 40 of them; beyond that the axis only counts them
    (the report's text names the largest gains and losses).
    """
    plt = _pyplot()
    values = differences.to_numpy(dtype=np.float64)
    n = len(values)
    better, worse = int((values > 0).sum()), int((values < 0).sum())
    colours = [BETTER_COLOUR if v > 0 else WORSE_COLOUR if v < 0 else SAME_COLOUR for v in values]
    fig, ax = plt.subplots(figsize=(9, 4.2), dpi=120)
    x = np.arange(n)
    ax.bar(x, values, width=1.0 if n > 60 else 0.8, color=colours, linewidth=0)
    ax.axhline(0.0, color="black", linewidth=0.8)
    ax.set_xlim(-1, max(n, 1))
    ax.set_xlabel(f"queries, sorted by difference ({n} queries)")
    ax.set_ylabel(f"Δ {measure} ({run} − {baseline})")
    ax.set_title(title or f"Per-query difference in {measure}: {run} vs {baseline}")
    if n > 40:
        ax.set_xticks([])
    else:
        ax.set_xticks(x, [str(q) for q in differences.index], rotation=90, fontsize=7)
    from matplotlib.patches import Patch

    handles = [
        Patch(color=BETTER_COLOUR, label=f"better: {better} ({_percent(better, n)})"),
        Patch(color=WORSE_COLOUR, label=f"worse: {worse} ({_percent(worse, n)})"),
    ]
    if n - better - worse:
        handles.append(Patch(color=SAME_COLOUR, label=f"equal: {n - better - worse}"))
    ax.legend(handles=handles, loc="upper right", frameon=False, fontsize=8)
    ax.grid(axis="y", linewidth=0.4, alpha=0.5)
    ax.spines[["top", "right"]].set_visible(False)
    return _png(fig, plt)


def length_plot(means: pd.DataFrame, counts: dict[str, int], *, measure: str, baseline: str | None) -> bytes:
    """Grouped bars: the mean measure of each run (bars) per query-length bucket (groups).

    Args:
        means: runs (index) x bucket labels (columns).
        counts: bucket label -> number of queries (shown under each group).
        measure: the measure's name.
        baseline: the baseline's name (drawn first, in grey), or None.
    """
    plt = _pyplot()
    runs = list(means.index)
    labels = list(means.columns)
    fig, ax = plt.subplots(figsize=(max(6.0, 1.2 * len(labels) * max(1, len(runs)) * 0.5 + 3), 4.2), dpi=120)
    width = 0.8 / max(len(runs), 1)
    x = np.arange(len(labels))
    palette = _palette(len(runs))
    for i, run in enumerate(runs):
        colour = SAME_COLOUR if run == baseline else palette[i]
        label = f"{run} (baseline)" if run == baseline else run
        ax.bar(
            x - 0.4 + width * (i + 0.5),
            means.loc[run].to_numpy(dtype=np.float64),
            width,
            label=label,
            color=colour,
        )
    ax.set_xticks(x, [f"{label}\n({counts.get(label, 0)} queries)" for label in labels])
    ax.set_xlabel("query length (words, stopwords excluded)")
    ax.set_ylabel(f"mean {measure}")
    ax.set_title(f"Mean {measure} by query length")
    top = float(np.nanmax(means.to_numpy(dtype=np.float64))) if means.size else 1.0
    ax.set_ylim(0, (top if np.isfinite(top) and top > 0 else 1.0) * 1.2)  # headroom for the legend
    ax.legend(frameon=False, fontsize=8, loc="upper center", ncol=min(len(runs), 4))
    ax.grid(axis="y", linewidth=0.4, alpha=0.5)
    ax.spines[["top", "right"]].set_visible(False)
    return _png(fig, plt)


def loss_curve_plot(
    curves: Mapping[str, pd.DataFrame], windows: Mapping[str, int], *, title: str = "Training loss"
) -> bytes:
    """The training loss of each run by step: its moving mean over ``windows[run]`` steps drawn
    over the raw losses, one colour a run. Runs whose typical losses differ more than fivefold
    (different objectives) get a panel each, one above the other; otherwise they share one. Each
    panel's height spans its moving means (the raw losses' spikes may leave it).

    Args:
        curves: run name -> a frame with ``step`` and ``loss`` columns, ascending by step.
        windows: run name -> the moving mean's width in steps (1: the raw losses alone).
        title: the plot's title.
    """
    plt = _pyplot()
    medians = [float(np.nanmedian(c["loss"].to_numpy(dtype=np.float64))) for c in curves.values()]
    positive = [m for m in medians if m > 0]
    apart = len(positive) > 1 and max(positive) / min(positive) > 5
    panels = len(curves) if apart else 1
    fig, axes = plt.subplots(panels, 1, figsize=(8, 2.6 + 1.6 * panels), dpi=120, sharex=True, squeeze=False)
    spans: list[list[float]] = [[] for _ in range(panels)]
    for i, ((name, curve), colour) in enumerate(zip(curves.items(), _palette(len(curves)), strict=True)):
        ax = axes[i if apart else 0][0]
        width = windows[name]
        label = name if width == 1 else f"{name} (mean of {width} steps)"
        smooth = curve["loss"].rolling(width, min_periods=1).mean()
        if width > 1:
            ax.plot(curve["step"], curve["loss"], color=colour, linewidth=0.5, alpha=0.15)
        ax.plot(curve["step"], smooth, color=colour, linewidth=1.6, label=label)
        values = smooth.to_numpy(dtype=np.float64)
        spans[i if apart else 0] += [float(v) for v in values[np.isfinite(values)]]
    for row, span in zip(axes, spans, strict=True):
        ax = row[0]
        if span:
            low, high = min(span), max(span)
            margin = 0.15 * (high - low) or 0.1 * abs(high) or 0.1
            ax.set_ylim(low - margin, high + margin)
        ax.set_ylabel("training loss")
        ax.legend(frameon=False, fontsize=8)
        ax.grid(linewidth=0.4, alpha=0.5)
        ax.spines[["top", "right"]].set_visible(False)
    axes[-1][0].set_xlabel("optimizer step")
    axes[0][0].set_title(title)
    return _png(fig, plt)


def validation_plot(curves: Mapping[str, pd.DataFrame], measures: Mapping[str, str]) -> bytes:
    """Each validated run's measure by step (``measures[run]``: the one it selected its best
    weights by), with the best validation marked.

    Args:
        curves: run name -> its validations, with ``step`` and the measure's column.
        measures: run name -> the measure drawn.
    """
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(8, 4.2), dpi=120)
    for (name, curve), colour in zip(curves.items(), _palette(len(curves)), strict=True):
        measure = measures[name]
        ax.plot(
            curve["step"], curve[measure], color=colour, marker="o", markersize=3, label=f"{name}: {measure}"
        )
        best = curve[measure].idxmax()
        ax.plot(curve["step"][best], curve[measure][best], color=colour, marker="*", markersize=12)
    ax.set_xlabel("optimizer step")
    ax.set_ylabel("validation measure")
    ax.set_title("Validation (the best of each run starred)")
    ax.legend(frameon=False, fontsize=8)
    ax.grid(linewidth=0.4, alpha=0.5)
    ax.spines[["top", "right"]].set_visible(False)
    return _png(fig, plt)


def _palette(n: int) -> Sequence[str]:
    base = ["#1c7ed6", "#f08c00", "#7048e8", "#0ca678", "#e64980", "#5c940d", "#1098ad", "#d9480f"]
    return [base[i % len(base)] for i in range(n)]


def _percent(count: int, total: int) -> str:
    return f"{100.0 * count / total:.0f}%" if total else "0%"


def _png(fig: Any, plt: Any) -> bytes:
    buffer = io.BytesIO()
    fig.tight_layout()
    fig.savefig(buffer, format="png", metadata={"Software": None})
    plt.close(fig)
    return buffer.getvalue()
