"""Watch the served version against the one before it, and roll back on a regression by itself.

Why: a gate on a golden set cannot see everything real traffic does. After a
promote, the runs the new version serves are logged as trajectories; this
module compares them with the runs of the version it replaced (the one
``Registry.rollback`` would restore), metric by metric, over a window, and
when a threshold is crossed rolls the registry back, writes an audit entry
that names the metric, both numbers and the window, and asks the live server
to follow (:func:`~agentic_loop.distill.release.live.sync_served`).

Thresholds (:class:`MonitorSettings`, each one a setting; defaults from the
design): error rate above 1.5x the baseline's (and at least 2 points above
it), pass rate below 95% of the baseline's, mean score below 95%, latency p99
above 1.5x; optionally the thumbs-up ratio. Nothing is judged until both
versions have ``min_runs`` runs in the window, so a handful of runs cannot
trigger a rollback. Which runs belong to which version: see
:mod:`~agentic_loop.distill.release.monitor_stats`.

A breach of a version that is not current (a canary candidate) gives the
verdict ``hold``: do not promote it; there is nothing to roll back. A
registry with no current version (and no ``version=``) gives the verdict
``no version``: nothing to check, and the judge's agreement is still reported.

The judge is watched too (:mod:`~agentic_loop.distill.release.judge_agreement`):
the report's ``agreement`` holds, per judge and version, Spearman and Cohen's
kappa against people's labels over every labelled run (labels are sparse, so
no window). Its alarm (``agreement.raised``) never rolls a version back (the
judge, not the served model, is what disagrees); it refuses judged rewards
in the improve loop and makes ``agentic-loop monitor`` exit 1.

The report (:class:`MonitorReport`) is a pydantic record: ``agentic-loop
monitor --json`` writes ``model_dump(mode="json")``, and ``model_validate``
reads such a file back, one written by an earlier version included.

Example:
    >>> base = version_stats("v1", "m-v1", []).model_copy(
    ...     update={"runs": 100, "error_rate": 0.02, "pass_rate": 0.8})
    >>> new = base.model_copy(update={"version": "v2", "error_rate": 0.10, "pass_rate": 0.79})
    >>> [b.metric for b in find_breaches(new, base, MonitorSettings())]
    ['error_rate']
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from agentic_loop.distill.release.judge_agreement import AgreementReport, judge_agreement
from agentic_loop.distill.release.monitor_stats import (
    VersionMap,
    VersionStats,
    Window,
    group_by_version,
    version_stats,
)
from agentic_loop.distill.release.registry import Registry, replay_audit
from agentic_loop.tables import percent
from agentic_loop.trajectories import Trajectory, TrajectoryLog, trajectory_files

__all__ = ["Breach", "MonitorReport", "MonitorSettings", "Verdict", "find_breaches", "monitor",
           "read_runs"]

Verdict = Literal["healthy", "breach", "insufficient data", "no baseline", "no version"]
Action = Literal["none", "rolled back", "hold"]


class MonitorSettings(BaseModel):
    """The window and the thresholds; a ratio is the checked version's value over the baseline's."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    window_runs: int | None = Field(default=200, ge=1)
    window_hours: float | None = Field(default=None, gt=0)
    min_runs: int = Field(default=30, ge=1)
    max_error_ratio: float | None = Field(default=1.5, ge=1.0)
    #: the error rate must also be this much (absolute) above the baseline's: 0 vs 1 error
    #: in a hundred runs is no regression
    min_error_increase: float = Field(default=0.02, ge=0.0)
    min_pass_ratio: float | None = Field(default=0.95, gt=0.0, le=1.0)
    min_score_ratio: float | None = Field(default=0.95, gt=0.0, le=1.0)
    max_latency_ratio: float | None = Field(default=1.5, ge=1.0)
    min_feedback_ratio: float | None = Field(default=None, gt=0.0, le=1.0)
    #: rated runs each version needs before feedback is judged
    min_rated: int = Field(default=20, ge=1)
    #: the judge-vs-people alarm: Spearman or kappa below this, on at least ``min_labels``
    agreement_threshold: float = Field(default=0.7, ge=-1.0, le=1.0)
    min_labels: int = Field(default=20, ge=1)

    def window(self) -> Window:
        """The window these settings describe."""
        return Window(last_runs=self.window_runs, hours=self.window_hours)


class Breach(BaseModel):
    """One metric past its threshold."""

    model_config = ConfigDict(frozen=True)

    metric: str
    value: float
    baseline: float
    limit: float

    def describe(self, version: str, baseline: str) -> str:
        """``error_rate 12.0% of v3 > limit 4.5% (from v2's 3.0%)`` (rates in percent)."""
        side = "<" if self.metric in ("pass_rate", "mean_score", "feedback_ratio") else ">"

        def num(x: float) -> str:
            return f"{x:.3f}" if self.metric not in _RATES else percent(x, digits=1)

        return (f"{self.metric} {num(self.value)} of {version} {side} limit {num(self.limit)} "
                f"(from {baseline}'s {num(self.baseline)})")


#: The metrics that are shares of runs, printed in percent like every rate.
_RATES = ("error_rate", "pass_rate", "feedback_ratio")


def find_breaches(checked: VersionStats, baseline: VersionStats,
                  settings: MonitorSettings) -> list[Breach]:
    """The metrics of ``checked`` past their thresholds against ``baseline`` (no size check)."""
    s, out = settings, []
    if s.max_error_ratio is not None:
        limit = max(baseline.error_rate * s.max_error_ratio,
                    baseline.error_rate + s.min_error_increase)
        if checked.error_rate > limit:
            out.append(_breach("error_rate", checked.error_rate, baseline.error_rate, limit))
    if s.min_pass_ratio is not None and checked.pass_rate < baseline.pass_rate * s.min_pass_ratio:
        out.append(_breach("pass_rate", checked.pass_rate, baseline.pass_rate,
                           baseline.pass_rate * s.min_pass_ratio))
    if s.min_score_ratio is not None and checked.mean_score is not None \
            and baseline.mean_score is not None \
            and checked.mean_score < baseline.mean_score * s.min_score_ratio:
        out.append(_breach("mean_score", checked.mean_score, baseline.mean_score,
                           baseline.mean_score * s.min_score_ratio))
    if s.max_latency_ratio is not None and checked.latency_p99 is not None \
            and baseline.latency_p99 is not None \
            and checked.latency_p99 > baseline.latency_p99 * s.max_latency_ratio:
        out.append(_breach("latency_p99", checked.latency_p99, baseline.latency_p99,
                           baseline.latency_p99 * s.max_latency_ratio))
    if s.min_feedback_ratio is not None and checked.feedback_ratio is not None \
            and baseline.feedback_ratio is not None \
            and min(checked.rated, baseline.rated) >= s.min_rated \
            and checked.feedback_ratio < baseline.feedback_ratio * s.min_feedback_ratio:
        out.append(_breach("feedback_ratio", checked.feedback_ratio, baseline.feedback_ratio,
                           baseline.feedback_ratio * s.min_feedback_ratio))
    return out


def _breach(metric: str, value: float, baseline: float, limit: float) -> Breach:
    return Breach(metric=metric, value=value, baseline=baseline, limit=limit)


class MonitorReport(BaseModel):
    """What the monitor saw and did (``model_dump(mode="json")`` is ``monitor --json``'s file)."""

    version: str | None
    baseline: str | None
    verdict: Verdict
    #: "rolled back", "hold" (a breach of a version that is not current), "none"
    action: Action = "none"
    rolled_back_to: str | None = None
    reason: str = ""
    window: str = ""
    sync: str | None = None
    breaches: list[Breach] = Field(default_factory=list)
    stats: list[VersionStats] = Field(default_factory=list)
    #: runs of no registry version, per model id (never guessed)
    unattributed: dict[str, int] = Field(default_factory=dict)
    #: the judge against people's labels, per judge and version (None in older reports,
    #: and then left out of the JSON, so an old report keeps its shape)
    agreement: AgreementReport | None = Field(default=None,
                                               exclude_if=lambda value: value is None)

    def stats_of(self, version: str | None) -> VersionStats | None:
        """The stats of ``version`` (None when it served no run in the window)."""
        return next((s for s in self.stats if s.version == version), None)


def _rollback_target(registry: Registry) -> str | None:
    """The version ``rollback`` would restore (the top of the stack of earlier currents)."""
    known = {v.version: v for v in registry.versions()}
    previous = replay_audit(registry.history(), known, registry.root).previous
    return previous[-1] if previous else None


def read_runs(source: TrajectoryLog | str | os.PathLike[str] | Iterable[Trajectory]
              ) -> list[Trajectory]:
    """The runs of ``source``, people's labels joined; a folder is read with every trajectory
    log under it."""
    if isinstance(source, TrajectoryLog):
        if source.path.is_file() or source.path.name != TrajectoryLog.FILE:
            return source.read()
        source = source.dir  # a folder with no log of its own: the logs in its subfolders
    if isinstance(source, (str, os.PathLike)):
        return [t for f in trajectory_files([source]) for t in TrajectoryLog(f).read()]
    return list(source)


def monitor(trajectories: TrajectoryLog | str | os.PathLike[str] | Iterable[Trajectory],
            registry: Registry | str | os.PathLike[str], *,
            settings: MonitorSettings | None = None, version: str | None = None,
            baseline: str | None = None, rollback: bool = True,
            served_names: Sequence[str] | None = None) -> MonitorReport:
    """Compare ``version`` (default: current) with ``baseline`` (default: the rollback target).

    With ``rollback`` and a breach of the current version, the registry rolls
    back (audit reason: the metrics, numbers and window) and the live server
    is asked to follow. ``served_names`` are model ids every version answers
    under (default: the registry's live stable name), attributed by time.
    The report's ``agreement`` checks the judge against people's labels
    (thresholds in ``settings``); it never rolls back.
    """
    settings = settings or MonitorSettings()
    reg = registry if isinstance(registry, Registry) else Registry(registry)
    current = reg.current
    checked = reg.get(version).version if version else (current.version if current else None)
    runs = read_runs(trajectories)
    agreement = judge_agreement(runs, threshold=settings.agreement_threshold,
                                min_labels=settings.min_labels, registry=reg,
                                served_names=served_names)
    window = settings.window()
    if checked is None:
        return MonitorReport(version=None, baseline=None, verdict="no version",
                             window=window.describe(), agreement=agreement, reason=(
                                 f"registry {reg.root} has no current version to monitor; "
                                 "promote one first, or pass version= (--version)"))
    base = reg.get(baseline).version if baseline else _rollback_target(reg)
    grouped, models, unattributed = group_by_version(
        runs, VersionMap.from_registry(reg, served_names))
    order = [v.version for v in reg.versions()]
    stats = [version_stats(v, models[v], window.apply(grouped[v]))
             for v in sorted(grouped, key=order.index)]
    report = MonitorReport(stats=stats, version=checked, baseline=base, verdict="healthy",
                           window=window.describe(), unattributed=dict(Counter(unattributed)),
                           agreement=agreement)
    if base is None:
        report.verdict, report.reason = "no baseline", (
            f"{checked} has no earlier version to compare with (nothing to roll back to)")
        return report
    mine = report.stats_of(checked) or version_stats(checked, checked, [])
    theirs = report.stats_of(base) or version_stats(base, base, [])
    if min(mine.runs, theirs.runs) < settings.min_runs:
        report.verdict, report.reason = "insufficient data", (
            f"{checked} has {mine.runs} and {base} has {theirs.runs} runs in the window "
            f"({report.window}); each needs at least {settings.min_runs}")
        return report
    report.breaches = find_breaches(mine, theirs, settings)
    if not report.breaches:
        report.reason = (f"{checked} is within every threshold of {base} "
                         f"({mine.runs} vs {theirs.runs} runs; {report.window})")
        return report
    report.verdict = "breach"
    report.reason = (f"monitor: {'; '.join(b.describe(checked, base) for b in report.breaches)}; "
                     f"window: {report.window} ({mine.runs} runs of {checked}, "
                     f"{theirs.runs} of {base})")
    if reg.current is None or reg.current.version != checked:
        report.action = "hold"
        return report
    if rollback:
        report.rolled_back_to = reg.rollback(reason=report.reason).version
        report.action = "rolled back"
        report.sync = _sync_served(reg)
    return report


def _sync_served(registry: Registry) -> str | None:
    """Ask the live server to follow ``current``; the rollback stands whatever it answers."""
    try:
        from agentic_loop.distill.release.live import sync_served
    except ImportError:  # an install without live serving: nothing runs to follow
        return None
    try:
        return str(sync_served(registry))
    except Exception as exc:  # noqa: BLE001 - reported; the registry already rolled back
        return f"could not update the live server ({type(exc).__name__}: {exc}); restart it"
