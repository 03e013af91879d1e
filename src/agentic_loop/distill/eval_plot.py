"""The before/after picture of an evaluation: score distributions of baseline and candidate.

One panel per way of running the models (single-shot, and inside the
architecture when one was used): overlaid histograms of the per-task scores
on the 0-10 scale, the two means as dashed lines, and the gate's decision
and p-value in the title, so a reviewer sees in one glance whether the
distribution moved and by how much.

Example:
    >>> import tempfile, pathlib
    >>> out = pathlib.Path(tempfile.mkdtemp()) / "scores.png"
    >>> plot_score_distributions({"single-shot": ([5, 6, 7], [7, 8, 8], "PROMOTE, p=0.02")}, out)
    >>> out.stat().st_size > 0
    True
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path

__all__ = ["plot_score_distributions"]

Panel = tuple[Sequence[float], Sequence[float], str]


def plot_score_distributions(panels: Mapping[str, Panel], path: str | os.PathLike[str], *,
                             labels: tuple[str, str] = ("baseline", "candidate")) -> None:
    """Write a PNG with one histogram panel per entry ``title -> (baseline, candidate, note)``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np
    from matplotlib.ticker import MaxNLocator

    from agentic_loop.atomic import atomic_write

    if not panels:
        raise ValueError("plot_score_distributions needs at least one panel of scores.")
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
    fig.tight_layout()
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    with atomic_write(target) as tmp:
        fig.savefig(tmp, format="png", dpi=110)
    plt.close(fig)
