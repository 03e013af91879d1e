"""PNG plots of what people look at: archive growth, score distributions, before/after, gates,
reward curves.

The one plotting module: the demo, the CLI (``archive stats --plot``) and the
evaluation gate (its before/after PNG) all draw here, with Matplotlib's Agg
backend, so plots render on headless machines. Files are replaced
atomically, so a reader never sees half a PNG.

Example:
    >>> import tempfile, pathlib
    >>> out = pathlib.Path(tempfile.mkdtemp()) / "scores.png"
    >>> plot_score_distributions({"round 1": [3.0, 5.0, 8.0], "round 2": [6.0, 9.0, 10.0]}, out)
    >>> out.stat().st_size > 1000
    True
    >>> gate = out.with_name("gate.png")
    >>> plot_eval_scores({"single-shot": ([5, 6, 7], [7, 8, 8], "PROMOTE, p=0.02")}, gate)
    >>> gate.stat().st_size > 0
    True
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from agentic_loop.errors import ConfigError
from agentic_loop.paths import make_dir

__all__ = ["plot_archive_growth", "plot_before_after", "plot_eval_scores", "plot_rates",
           "plot_reward_curve", "plot_score_distributions"]

#: One evaluation panel: baseline scores, candidate scores, and a note for the title.
Panel = tuple[Sequence[float], Sequence[float], str]


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _save(fig: Any, path: str | os.PathLike[str]) -> None:
    from agentic_loop.atomic import atomic_write

    target = Path(path)
    make_dir(target.parent, what="folder of the plot", error=ConfigError)
    fig.tight_layout()
    with atomic_write(target) as tmp:
        fig.savefig(tmp, format=target.suffix.lstrip(".") or "png", dpi=110)
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


def plot_eval_scores(panels: Mapping[str, Panel], path: str | os.PathLike[str], *,
                     labels: tuple[str, str] = ("baseline", "candidate")) -> None:
    """The before/after picture of an evaluation: one histogram panel per way of running.

    ``panels`` maps a title (``"single-shot"``, ``"inside reflection"``) to
    ``(baseline, candidate, note)``: overlaid histograms of the per-task
    scores on the 0-10 scale, both means as dashed lines, and the note (the
    gate's decision and p-value) in the title, so a reviewer sees at a
    glance whether the distribution moved and by how much.
    """
    if not panels:
        raise ConfigError("plot_eval_scores needs at least one panel of scores; pass "
                          "{title: (baseline, candidate, note)}")
    plt = _pyplot()
    import numpy as np
    from matplotlib.ticker import MaxNLocator

    fig, axes = plt.subplots(1, len(panels), figsize=(5.5 * len(panels), 4), squeeze=False)
    bins = np.linspace(0, 10, 21)
    colors = ("#7f7f7f", "#1f77b4")
    for ax, (title, (baseline, candidate, note)) in zip(axes[0], panels.items(), strict=True):
        for scores, label, color in zip((baseline, candidate), labels, colors, strict=True):
            values = np.asarray(scores, dtype=float)
            mean = float(values.mean()) if len(values) else float("nan")
            ax.hist(values, bins=bins, alpha=0.55, color=color, label=f"{label} (mean {mean:.2f})")
            ax.axvline(mean, color=color, linestyle="--", linewidth=1.5)
        ax.set_title(f"{title}\n{note}", fontsize=10)
        ax.set_xlabel("rubric score (0-10)")
        ax.set_ylabel("golden tasks")
        ax.yaxis.set_major_locator(MaxNLocator(integer=True))
        ax.set_xlim(0, 10)
        ax.legend(fontsize=8, loc="upper left")
    _save(fig, path)


def plot_reward_curve(curves: Mapping[str, Sequence[tuple[float, float]]],
                      path: str | os.PathLike[str], *, title: str = "Reward per step",
                      ylabel: str = "mean reward") -> None:
    """One line per series of ``(step, value)`` points: a GRPO run's reward and its parts.

    >>> import tempfile, pathlib
    >>> out = pathlib.Path(tempfile.mkdtemp()) / "reward.png"
    >>> plot_reward_curve({"reward": [(1, 0.2), (2, 0.4)], "exact_words": [(1, 0.5)]}, out)
    >>> out.stat().st_size > 1000
    True
    """
    if not any(curves.values()):
        raise ConfigError("plot_reward_curve needs at least one (step, value) point; pass "
                          "{series: [(step, value), ...]}")
    plt = _pyplot()
    from matplotlib.ticker import MaxNLocator

    fig, ax = plt.subplots(figsize=(7, 3.8))
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    for name, points in curves.items():
        if points:
            steps, values = zip(*points)
            ax.plot(steps, values, marker="o", markersize=3, linewidth=2 if name == "reward"
                    else 1, label=name)
    ax.set_xlabel("optimizer step")
    ax.set_ylabel(ylabel)
    ax.legend(fontsize=8)
    ax.set_title(title)
    _save(fig, path)


def plot_rates(series: Mapping[str, Sequence[tuple[float, float, float, float]]],
               path: str | os.PathLike[str], *, title: str = "Pass rate per round",
               xlabel: str = "round", ylabel: str = "pass rate") -> None:
    """One line per series of ``(x, rate, low, high)`` points, the interval as an error bar.

    >>> import tempfile, pathlib
    >>> out = pathlib.Path(tempfile.mkdtemp()) / "rates.png"
    >>> plot_rates({"golden": [(0, 0.2, 0.1, 0.4), (1, 0.5, 0.3, 0.7)]}, out)
    >>> out.stat().st_size > 1000
    True
    """
    if not any(series.values()):
        raise ConfigError("plot_rates needs at least one (x, rate, low, high) point; pass "
                          "{series: [(x, rate, low, high), ...]}")
    plt = _pyplot()
    from matplotlib.ticker import MaxNLocator

    fig, ax = plt.subplots(figsize=(7, 3.8))
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    for name, points in series.items():
        if points:
            xs, ys, lows, highs = zip(*points)
            errors = [[max(0.0, y - lo) for y, lo in zip(ys, lows, strict=True)],
                      [max(0.0, hi - y) for y, hi in zip(ys, highs, strict=True)]]
            ax.errorbar(xs, ys, yerr=errors, marker="o", capsize=4, linewidth=1.5, label=name)
    ax.set_ylim(-0.02, 1.02)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.legend(fontsize=8)
    ax.set_title(title)
    _save(fig, path)
