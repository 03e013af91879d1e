"""What the flywheel service shows: its status snapshot, its Prometheus metrics, its side watch.

Why apart from the service: the service decides; this module only reads
what it decided (its state, its last stage verdict and monitor report, the
audit log) into the status page's :class:`~agentic_loop.distill.flywheel.status.FlywheelStatus`
and into Prometheus text (a ``prometheus_client`` registry of its own per
scrape, so nothing leaks into the process-wide default registry). It also
runs the monitor on a side thread while a round trains (:meth:`FlywheelView.watching`),
so a regression of the current version is caught within a tick, not after
an hours-long round.

Example:
    >>> threshold("pass_rate", MonitorSettings())
    '< 95% of baseline'
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Callable, Iterator
from datetime import datetime
from typing import Any, Protocol

from agentic_loop.clock import utc_now
from agentic_loop.distill.flywheel.canary_loop import arm_numbers
from agentic_loop.distill.flywheel.journal import FlywheelState, Journal
from agentic_loop.distill.flywheel.lease import Lease
from agentic_loop.distill.flywheel.ramp import StageVerdict
from agentic_loop.distill.flywheel.ramp_stats import ArmSample
from agentic_loop.distill.flywheel.settings import FlywheelSettings
from agentic_loop.distill.flywheel.status import (
    AuditLine,
    FlywheelStatus,
    MonitorLine,
    RoundPoint,
)
from agentic_loop.distill.flywheel.trigger import read_sources
from agentic_loop.distill.release.monitor import MonitorReport, MonitorSettings
from agentic_loop.distill.release.registry import Registry
from agentic_loop.trajectories import Trajectory

__all__ = ["FlywheelView", "Wheel", "threshold"]

#: the monitor's metrics the page lists: (metric on VersionStats, name shown)
_MONITORED = (("error_rate", "error_rate"), ("pass_rate", "pass_rate"),
              ("latency_p99", "latency_p99"), ("mean_score", "mean_score"))


def threshold(metric: str, s: MonitorSettings) -> str:
    """The monitor's rule for ``metric`` as a person reads it."""
    rules = {
        "error_rate": (f"> {s.max_error_ratio:g}x baseline and +{s.min_error_increase:.0%}"
                       if s.max_error_ratio is not None else "off"),
        "pass_rate": (f"< {s.min_pass_ratio:.0%} of baseline"
                      if s.min_pass_ratio is not None else "off"),
        "latency_p99": (f"> {s.max_latency_ratio:g}x baseline"
                        if s.max_latency_ratio is not None else "off"),
        "mean_score": (f"< {s.min_score_ratio:.0%} of baseline"
                       if s.min_score_ratio is not None else "off"),
    }
    return rules.get(metric, "")


def monitor_lines(report: MonitorReport | None, settings: MonitorSettings) -> list[MonitorLine]:
    """The page's monitor rows: each metric of the checked version against its baseline."""
    if report is None or report.version is None:
        return []
    mine, theirs = report.stats_of(report.version), report.stats_of(report.baseline)
    breached = {b.metric for b in report.breaches}
    lines = []
    for attr, name in _MONITORED:
        value = getattr(mine, attr) if mine is not None else None
        base = getattr(theirs, attr) if theirs is not None else None
        lines.append(MonitorLine(version=report.version, metric=name, value=value,
                                 baseline=base, threshold=threshold(attr, settings),
                                 breached=attr in breached))
    return lines


class Wheel(Protocol):
    """What the view reads of the service (:class:`~.service.Flywheel`)."""

    registry: Registry
    trajectories: list[str | os.PathLike[str]]
    settings: FlywheelSettings
    state: FlywheelState
    journal: Journal
    lease: Lease
    last_verdict: StageVerdict | None
    last_monitor: MonitorReport | None
    last_error: str | None
    clock: Callable[[], datetime]

    def watch(self, runs: list[Trajectory] | None = None) -> str | None: ...

    def fail(self, what: str, exc: BaseException, **data: Any) -> None: ...


class FlywheelView:
    """The service's numbers for people and Prometheus (see the module doc)."""

    def __init__(self, wheel: Wheel) -> None:
        self.wheel = wheel
        self.trigger = ""
        self.new_runs = 0
        self.arms: tuple[ArmSample, ArmSample, str] | None = None
        self.backoff_until: datetime | None = None
        self.last_tick: datetime | None = None

    def ticked(self) -> None:
        """Note that a tick started now."""
        self.last_tick = self.wheel.clock()

    @contextlib.contextmanager
    def watching(self, stop: threading.Event | None) -> Iterator[None]:
        """While the body runs (a round), run the monitor every tick on a side thread
        (nothing when ``stop`` is None: a test's synchronous tick)."""
        if stop is None:
            yield
            return
        done = threading.Event()

        def loop() -> None:
            while not done.wait(self.wheel.settings.tick_s) and not stop.is_set():
                try:
                    self.wheel.watch(read_sources(self.wheel.trajectories))
                except Exception as exc:  # noqa: BLE001 - reported; the round goes on
                    self.wheel.fail("monitor failed during a round", exc)

        thread = threading.Thread(target=loop, name="flywheel-watch", daemon=True)
        thread.start()
        try:
            yield
        finally:
            done.set()
            thread.join(timeout=60)

    def status(self) -> FlywheelStatus:
        """The status page's snapshot."""
        wheel, state = self.wheel, self.wheel.state
        reg = wheel.registry
        current = reg.current
        lineage = [current.version, *reversed(reg.previous)] if current else []
        stages = list(wheel.settings.ramp.stages)
        canary = state.phase == "canary" and state.stage is not None
        arms = ([arm_numbers(self.arms[0], "current"), arm_numbers(self.arms[1], "candidate")]
                if canary and self.arms is not None else [])
        records = wheel.journal.tail(10_000)
        rounds = [RoundPoint(round=int(r.data.get("round") or 0), version=r.version,
                             golden_pass_rate=_golden(r.data, "pass_rate"),
                             ci95=_golden(r.data, "interval"), decision=r.data.get("decision"),
                             at=r.at) for r in records if r.action == "round end"]
        return FlywheelStatus(
            registry=str(reg.root), updated_at=utc_now(),
            phase=state.phase if wheel.lease.held else "stopped",
            current=current.version if current else None, lineage=lineage,
            candidate=state.candidate if canary else None, stage=state.stage if canary else None,
            fraction=stages[state.stage] if canary and state.stage is not None else None,
            stages=stages, stage_started_at=state.stage_started_at if canary else None,
            arms=arms, stage_reasons=list(wheel.last_verdict.reasons)
            if canary and wheel.last_verdict else [], rounds=rounds,
            monitors=monitor_lines(wheel.last_monitor, wheel.settings.monitor),
            audit=[AuditLine(at=r.at, action=r.action, version=r.version, detail=r.detail)
                   for r in records[-20:]],
            trigger=self.trigger, new_runs=self.new_runs, last_error=wheel.last_error)

    def metrics(self) -> str:
        """Prometheus text exposition (a registry of its own, built per scrape)."""
        from prometheus_client import CollectorRegistry, Counter, Gauge, generate_latest

        wheel, state = self.wheel, self.wheel.state
        out = CollectorRegistry()
        prefix = "agentic_loop_flywheel_"
        Counter(prefix + "rounds", "Improvement rounds finished", registry=out).inc(state.rounds)
        stage = Gauge(prefix + "canary_stage", "Canary stage index (-1: no canary)",
                      registry=out)
        stage.set(state.stage if state.phase == "canary" and state.stage is not None else -1)
        fraction = Gauge(prefix + "canary_fraction", "Share of users on the candidate",
                         registry=out)
        stages = wheel.settings.ramp.stages
        fraction.set(stages[state.stage] if state.phase == "canary" and state.stage is not None
                     else 0.0)
        Gauge(prefix + "last_tick_timestamp_seconds", "Unix time of the last tick",
              registry=out).set(self.last_tick.timestamp() if self.last_tick else 0.0)
        Gauge(prefix + "trigger_backlog_runs", "New accepted runs past the watermark",
              registry=out).set(self.new_runs)
        phase = Gauge(prefix + "phase", "1 for the phase the service is in", ["phase"],
                      registry=out)
        for name in ("idle", "round", "canary"):
            phase.labels(phase=name).set(1.0 if state.phase == name else 0.0)
        self._version_metrics(out, prefix)
        return generate_latest(out).decode()

    def _version_metrics(self, out: Any, prefix: str) -> None:
        from prometheus_client import Gauge

        report = self.wheel.last_monitor
        gauges = {name: Gauge(prefix + name, help_, ["version"], registry=out)
                  for name, help_ in (("version_runs", "Runs in the monitor's window"),
                                      ("version_pass_rate", "Pass rate in the window"),
                                      ("version_error_rate", "Error rate in the window"),
                                      ("version_latency_p99_seconds", "p99 latency"))}
        for s in report.stats if report is not None else []:
            gauges["version_runs"].labels(version=s.version).set(s.runs)
            gauges["version_pass_rate"].labels(version=s.version).set(s.pass_rate)
            gauges["version_error_rate"].labels(version=s.version).set(s.error_rate)
            if s.latency_p99 is not None:
                gauges["version_latency_p99_seconds"].labels(version=s.version).set(
                    s.latency_p99)


def _golden(data: dict[str, Any], key: str) -> Any:
    """The candidate's golden ``pass_rate`` or ``interval`` (a tuple) in a round-end record."""
    value = ((data.get("golden") or {}).get("candidate") or {}).get(key)
    return tuple(value) if isinstance(value, list) and len(value) == 2 else (
        value if not isinstance(value, list) else None)
