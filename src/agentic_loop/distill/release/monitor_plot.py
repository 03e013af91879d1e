"""The monitor's picture: one bar panel per metric, one bar per version, breaches in red.

Why a PNG: "v3 rolled back on error rate" is a claim; the bars of every
version side by side (the checked one and its baseline marked, the breached
metric's threshold drawn) let a person see the regression and its size.

Example:
    >>> import tempfile, pathlib
    >>> from agentic_loop.distill.release.monitor import MonitorReport
    >>> from agentic_loop.distill.release.monitor_stats import version_stats
    >>> from agentic_loop.trajectories import Trajectory
    >>> runs = [Trajectory(architecture="a", model_id="m", task="t", latency_s=1.0)]
    >>> report = MonitorReport(stats=[version_stats("v1", "m", runs)], version="v1",
    ...                        baseline=None, verdict="no baseline")
    >>> out = pathlib.Path(tempfile.mkdtemp()) / "monitor.png"
    >>> plot_monitor(report, out)
    >>> out.stat().st_size > 1000
    True
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from agentic_loop.plots import _pyplot, _save

if TYPE_CHECKING:
    from agentic_loop.distill.release.monitor import MonitorReport

__all__ = ["METRICS", "plot_monitor"]

#: (attribute of VersionStats, panel title)
METRICS = (("error_rate", "error rate"), ("pass_rate", "pass rate"),
           ("mean_score", "mean score (0-10)"), ("latency_p99", "latency p99 (s)"),
           ("feedback_ratio", "thumbs up / rated"), ("mean_output_chars", "output length (chars)"))


def plot_monitor(report: MonitorReport, path: str | os.PathLike[str]) -> None:
    """Write ``report``'s per-version metrics as a grid of bar panels to ``path``."""
    plt = _pyplot()
    fig, axes = plt.subplots(2, 3, figsize=(12, 6.5))
    versions = [s.version for s in report.stats]
    breached = {b.metric: b for b in report.breaches}
    for ax, (attr, title) in zip(axes.flat, METRICS, strict=True):
        values = [getattr(s, attr) for s in report.stats]
        colors = ["#d32f2f" if attr in breached and v == report.version else
                  "#1976d2" if v == report.version else
                  "#7f7f7f" if v == report.baseline else "#bdbdbd" for v in versions]
        bars = ax.bar(versions, [0.0 if x is None else x for x in values], color=colors)
        ax.bar_label(bars, labels=["-" if x is None else f"{x:.3g}" for x in values],
                     fontsize=8)
        if attr in breached:
            ax.axhline(breached[attr].limit, color="#d32f2f", linestyle="--", linewidth=1,
                       label=f"limit {breached[attr].limit:.3g}")
            ax.legend(fontsize=8)
        ax.set_title(title, fontsize=10)
    runs = ", ".join(f"{s.version}: {s.runs}" for s in report.stats) or "none"
    fig.suptitle(f"{report.version} vs {report.baseline or '-'}: {report.verdict}"
                 f"{' - ' + report.action if report.action != 'none' else ''}\n"
                 f"runs ({report.window}): {runs}", fontsize=10)
    _save(fig, path)
