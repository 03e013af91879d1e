"""PNG plots of what people look at: archive growth, score distributions, before/after.

Matplotlib with the Agg backend, so plots render on headless machines.

Example:
    >>> import tempfile, pathlib
    >>> out = pathlib.Path(tempfile.mkdtemp()) / "scores.png"
    >>> plot_score_distributions({"round 1": [3.0, 5.0, 8.0], "round 2": [6.0, 9.0, 10.0]}, out)
    >>> out.stat().st_size > 1000
    True
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

__all__ = ["plot_archive_growth", "plot_before_after", "plot_score_distributions"]


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _save(fig: Any, path: str | os.PathLike[str]) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    _pyplot().close(fig)


def plot_archive_growth(entries: Sequence[Any], path: str | os.PathLike[str],
                        title: str = "Archive growth") -> None:
    """Cumulative entry count and each entry's score, in insertion order."""
    plt = _pyplot()
    ordered = sorted(entries, key=lambda e: e.created_at)
    fig, ax = plt.subplots(figsize=(7, 3.6))
    ax.step(range(0, len(ordered) + 1), range(0, len(ordered) + 1), where="post",
            color="#1976d2", label="entries")
    ax.set_xlim(0, max(1, len(ordered)) + 0.5)
    ax.set_ylim(0, max(1, len(ordered)) + 0.5)
    ax.set_xlabel("accepted outputs, in order")
    ax.set_ylabel("archive size")
    scored = [(i + 1, e.score) for i, e in enumerate(ordered) if e.score is not None]
    if scored:
        ax2 = ax.twinx()
        ax2.scatter(*zip(*scored), s=12, color="#f57c00", label="score")
        ax2.set_ylim(0, 10.5)
        ax2.set_ylabel("score")
    ax.set_title(title)
    _save(fig, path)


def plot_score_distributions(groups: Mapping[str, Sequence[float]], path: str | os.PathLike[str],
                             title: str = "Score distribution") -> None:
    """One box (with the points) per group, e.g. per round or per architecture."""
    plt = _pyplot()
    labels = list(groups)
    fig, ax = plt.subplots(figsize=(max(5, 1.6 * len(labels)), 3.8))
    data = [list(groups[k]) or [float("nan")] for k in labels]
    ax.boxplot(data, tick_labels=labels, showmeans=True)
    for i, values in enumerate(data, start=1):
        ax.scatter([i] * len(values), values, s=10, alpha=0.5, color="#388e3c")
    ax.set_ylim(-0.5, 10.5)
    ax.set_ylabel("score (0-10)")
    ax.set_title(title)
    _save(fig, path)


def plot_before_after(metrics: Mapping[str, Mapping[str, float]], path: str | os.PathLike[str],
                      title: str = "Before / after") -> None:
    """Grouped bars: ``{"pass rate": {"before": .2, "after": .4}, ...}``."""
    plt = _pyplot()
    names = list(metrics)
    series = sorted({s for m in metrics.values() for s in m})
    fig, ax = plt.subplots(figsize=(max(5, 2 * len(names)), 3.8))
    width = 0.8 / max(1, len(series))
    for j, s in enumerate(series):
        xs = [i + j * width for i in range(len(names))]
        ys = [metrics[n].get(s, 0.0) for n in names]
        bars = ax.bar(xs, ys, width=width, label=s)
        ax.bar_label(bars, fmt="%.2f", fontsize=8)
    ax.set_xticks([i + width * (len(series) - 1) / 2 for i in range(len(names))], names)
    ax.legend()
    ax.set_title(title)
    _save(fig, path)
