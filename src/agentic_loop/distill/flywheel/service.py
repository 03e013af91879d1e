"""The flywheel service: it triggers rounds, canaries their candidates, watches, and rolls back.

Why a service: every part of the flywheel exists as a command a person
starts (``improve``, ``monitor``, a canary); here one process turns it over
a registry, for weeks, and a restart resumes where it stopped. Each
:meth:`Flywheel.tick` does one step and says which:

* **idle**: the trigger (:mod:`.trigger`) counts new accepted runs past the
  improve watermark; when it fires, a **round** runs ``improve`` (one round,
  ``promote=False``: the gate registers the candidate and records its
  verdict; it does not serve it) in ``<work_dir>/round-NNNN`` over the new
  runs. A candidate whose last gate says PROMOTE starts a **canary** at the
  ramp's first stage (``<registry>/canary.json``, which the serve process's
  front follows, routing users by a sticky key);
* **canary**: each arm's evidence since the stage began (:mod:`.canary_loop`)
  goes to :func:`~agentic_loop.distill.flywheel.ramp.judge_stage`: ``wait``,
  ``advance`` (the next fraction), ``promote`` (``Registry.promote`` with the
  ramp's numbers as the reason, then no canary) or ``rollback`` (no canary;
  the registry's current never moved). A canary whose current version moved
  since it started (its ``baseline``: a person promoted or rolled back) ends,
  never promotes over it; a stage past ``max_stage_s`` rolls back even when
  its evidence cannot be gathered (an error in the tick);
* every tick, the **monitor** (:func:`~agentic_loop.distill.release.monitor.monitor`)
  watches the current version over its window and rolls it back on a breach.

Every decision goes to the flywheel's audit log *before* it is acted on
(:mod:`.journal`), and the state after it to ``state.json``. Only one
service acts on a registry (:mod:`.lease`). At start, after the lease,
:meth:`Flywheel.start` repairs what a crash can leave: a ``canary.json``
naming a version that is not registered, not gated PROMOTE, or already
current is removed; a canary state without ``canary.json`` goes back to
idle; a round in progress is run again; a canary in progress resumes its
stage (:mod:`.recovery`). A missing golden file stops rounds, not the
service (audited, shown as ``last_error``). A failed tick or round is
audited once (not each tick while it repeats) and the service goes on; a
failed round backs off ``round_backoff_s``. A serve process that dies
mid-canary leaves the ramp on the trajectories' numbers.

Example (idle: no run yet, so no round):
    >>> import tempfile, pathlib
    >>> tmp = pathlib.Path(tempfile.mkdtemp())
    >>> with Flywheel(tmp / "reg", [tmp / "traj"], tmp / "golden.jsonl", tmp / "work",
    ...               FlywheelSettings(min_new_runs=5)) as wheel:
    ...     wheel.tick(), wheel.status().phase
    ('idle', 'idle')
"""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, Self

from agentic_loop.clock import utc_now
from agentic_loop.distill.flywheel.canary_loop import stage_evidence
from agentic_loop.distill.flywheel.journal import FlywheelState, Journal
from agentic_loop.distill.flywheel.lease import Lease
from agentic_loop.distill.flywheel.ramp import StageVerdict, judge_stage
from agentic_loop.distill.flywheel.recovery import (
    IDLE,
    canary_now,
    checked_canary,
    gated,
    overdue,
    recovered_state,
)
from agentic_loop.distill.flywheel.service_view import FlywheelView
from agentic_loop.distill.flywheel.settings import FlywheelSettings
from agentic_loop.distill.flywheel.status import FlywheelStatus
from agentic_loop.distill.flywheel.trigger import (
    check_trigger,
    existing_sources,
    read_sources,
)
from agentic_loop.distill.loop.pool import new_pool_runs
from agentic_loop.distill.loop.state import Watermark
from agentic_loop.distill.release.canary.state import CanaryState, write_canary
from agentic_loop.distill.release.monitor import MonitorReport, monitor
from agentic_loop.distill.release.registry import Registry
from agentic_loop.distill.release.registry_audit import version_gate
from agentic_loop.errors import short_error
from agentic_loop.trajectories import Trajectory

__all__ = ["Flywheel", "FlywheelSettings"]

WATERMARK_FILE = "watermark.json"  # improve's own name for it, in each round's work folder


def _improve(**kwargs: Any) -> Any:
    from agentic_loop.distill.loop.improve import improve

    return improve(**kwargs)


class Flywheel:
    """The service over one registry (see the module doc).

    ``round_runner`` is called like :func:`~agentic_loop.distill.loop.improve.improve`
    (keywords ``tasks``, ``golden``, ``registry``, ``work_dir``, ``trajectories``,
    ``settings``) and returns its :class:`~agentic_loop.distill.loop.records.ImproveResult`;
    ``clock`` gives the time (both for tests). ``log`` gets one line per action.
    """

    def __init__(self, registry: str | os.PathLike[str] | Registry,
                 trajectories: Sequence[str | os.PathLike[str]],
                 golden: str | os.PathLike[str], work_dir: str | os.PathLike[str],
                 settings: FlywheelSettings | None = None, tasks: str | os.PathLike[str] | None
                 = None, *, round_runner: Callable[..., Any] | None = None,
                 clock: Callable[[], datetime] = utc_now,
                 log: Callable[[str], None] | None = None) -> None:
        self.registry = registry if isinstance(registry, Registry) else Registry(registry)
        if isinstance(trajectories, (str, os.PathLike)):
            trajectories = [trajectories]
        self.trajectories = list(trajectories)
        self.golden, self.tasks = Path(golden).expanduser(), tasks
        self.work_dir = Path(work_dir).expanduser()
        self.settings = settings or FlywheelSettings()
        self.round_runner = round_runner or _improve
        self.clock, self._say = clock, log or (lambda line: None)
        self.journal = Journal(self.registry.root)
        self.lease = Lease(self.registry.root)
        self.state = FlywheelState()
        self.view = FlywheelView(self)
        self.last_error: str | None = None
        self.last_verdict: StageVerdict | None = None
        self.last_monitor: MonitorReport | None = None
        self._lock = threading.RLock()
        self._tick_runs: list[Trajectory] | None = None
        self._started = False

    # -- life cycle ---------------------------------------------------------

    def start(self) -> Self:
        """Take the lease (a :class:`~.lease.LeaseHeldError` if another service holds it) and
        repair what a crash left (module doc)."""
        if not self._started:
            self.lease.acquire()
            try:
                self.state = self.journal.load()
                self._recover()
            except BaseException:  # a corrupt state.json must not leave the lease held
                self.lease.release()
                raise
            self._started = True
        return self

    def close(self) -> None:
        """Let the lease go (nothing else changes: a restart resumes)."""
        if self._started:
            self._started = False
            self.lease.release()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    def run(self, stop: threading.Event | None = None) -> None:
        """Tick every ``tick_s`` until ``stop`` is set or SIGTERM/SIGINT; holds the lease all
        along, and serves the status page when ``status_port`` is set.

        A signal stops the service after the step in progress; a second one stops it at once
        (a round in progress resumes at the next start). A failed tick is audited and the
        service goes on.
        """
        stop = stop or threading.Event()
        previous = self._on_signals(stop)
        server = None
        try:
            self.start()
            if self.settings.status_port is not None:
                from agentic_loop.distill.flywheel.status_server import StatusServer

                server = StatusServer(self.status, host=self.settings.status_host,
                                      port=self.settings.status_port,
                                      metrics=self.metrics).start()
                self._say(f"status page: {server.url}")
            last: str | None = None
            while not stop.is_set():
                try:
                    did = self.tick(watch=stop)
                    if did != last or did not in ("idle", "wait"):  # one line per action
                        self._say(f"tick: {did}")
                    last = did
                except Exception as exc:  # noqa: BLE001 - audited; a service outlives a tick
                    self.fail("tick failed", exc)  # (a database restarting, a bug: in the log)
                    last = None
                stop.wait(self.settings.tick_s)
        finally:
            if server is not None:
                server.stop()
            for sig, handler in previous.items():
                signal.signal(sig, handler)
            self.close()

    @staticmethod
    def _on_signals(stop: threading.Event) -> dict[int, Any]:
        if threading.current_thread() is not threading.main_thread():
            return {}
        def on_signal(number: int, frame: Any) -> None:
            if stop.is_set():  # a second signal: stop now (a round resumes at restart)
                raise SystemExit(128 + number)
            stop.set()

        previous: dict[int, Any] = {}
        for sig in (signal.SIGTERM, signal.SIGINT):
            previous[sig] = signal.signal(sig, on_signal)
        return previous

    # -- one step -----------------------------------------------------------

    def tick(self, *, watch: threading.Event | None = None) -> str:
        """One step (module doc); returns what it did: ``idle``, ``round``, ``canary``,
        ``wait``, ``advance``, ``promote``, ``rollback``, ``monitor rollback``, ...

        ``watch``: run the monitor in a side thread while a round trains (``run`` passes it).
        """
        self.start()
        with self._lock:
            self.view.ticked()
            self._tick_runs = None
            try:
                done = self.watch()
                if done:
                    return done
                if self.state.phase == "canary":
                    return self._canary_step()
            except Exception as exc:  # a stage past its deadline rolls back, evidence or not
                ran = overdue(self.state, self.clock(), self.settings.ramp.max_stage_s)
                if ran is None:
                    raise
                self.journal.log("rollback", version=self.state.candidate, detail=(
                    f"stage {self.state.stage} ran {ran:.0f}s of at most "
                    f"{self.settings.ramp.max_stage_s:g}s; its evidence could not be gathered "
                    f"({type(exc).__name__}: {short_error(exc)}); never promote on missing "
                    "evidence"), stage=self.state.stage)
                return self._end_canary(None, "", action="rollback")
            if self.state.phase == "round":
                return self._round(self.state.last_trigger or "resumed", watch)
            return self._maybe_round(watch)

    # -- rounds -------------------------------------------------------------

    def _maybe_round(self, watch: threading.Event | None) -> str:
        now = self.clock()
        if self.view.backoff_until is not None and now < self.view.backoff_until:
            return "idle"
        check = check_trigger(self._runs(), self._watermark(), min_new_runs=(
            self.settings.min_new_runs), every_s=self.settings.every_s,
            last_round_at=self.state.last_round_at, now=now)
        self.view.trigger, self.view.new_runs = check.reason, check.accepted
        if not check.fire:
            return "idle"
        if not self.golden.is_file():
            message = (f"the golden set {self.golden} is missing; no round starts until it is "
                       "back (pass --golden); the monitor goes on")
            if self.last_error != message:
                self.journal.log("round skipped", detail=message, trigger=check.reason)
                self._say(message)
            self.last_error = message
            return "round skipped"
        self.journal.log("trigger", detail=check.reason, new_accepted_runs=check.accepted)
        self._save(phase="round", last_trigger=check.reason)
        return self._round(check.reason, watch)

    def _round(self, reason: str, watch: threading.Event | None) -> str:
        number = self.state.rounds + 1
        work = self.work_dir / f"round-{number:04d}"
        if not (work / WATERMARK_FILE).is_file():
            self._watermark().save(work / WATERMARK_FILE)  # the round reads past the last one
        self.journal.log("round start", detail=f"round {number}: {reason}", round=number,
                         work_dir=str(work))
        self._say(f"round {number} starts ({reason})")
        sources = existing_sources(self.trajectories)
        try:
            with self.view.watching(watch):
                result = self.round_runner(
                    tasks=self.tasks, golden=self.golden, registry=self.registry, work_dir=work,
                    trajectories=None if self.tasks is not None else sources,
                    settings=self.settings.improve)
        except Exception as exc:  # noqa: BLE001 - audited, backed off; the monitor goes on
            self.fail(f"round {number} failed", exc, round=number)
            self.view.backoff_until = self.clock() + timedelta(
                seconds=self.settings.round_backoff_s)
            self._save(phase="idle", rounds=number, last_round_at=self.clock())
            return "round failed"
        self._tick_runs = None  # read again: runs logged while the round trained
        taken = Watermark.load(work / WATERMARK_FILE)
        if self.tasks is not None or getattr(result, "stopped", None) == "no_new_tasks":
            taken = taken.after(new_pool_runs(self._runs(), taken))  # read: nothing taken
        taken.save(self.work_dir / WATERMARK_FILE)
        report = result.reports[-1] if getattr(result, "reports", None) else None
        version = result.versions[-1] if getattr(result, "versions", None) else None
        golden = report.golden.model_dump(mode="json") if report and report.golden else None
        decision = report.decision.value if report and report.decision else None
        self.journal.log("round end", version=version, detail=(
            f"round {number}: {decision or 'no candidate'}"
            f" ({getattr(result, 'reason', '')})"), round=number, decision=decision,
            golden=golden, reasons=list(report.reasons) if report else [])
        self._say(f"round {number} ended: {version or 'no candidate'} {decision or ''}")
        self.last_error = None
        self._save(phase="idle", rounds=number, last_round_at=self.clock())
        if version is not None and gated(self.registry, version):
            return self._start_canary(version)
        return "round"

    # -- the canary ---------------------------------------------------------

    def _start_canary(self, version: str) -> str:
        current = self.registry.current
        if current is None:  # nothing serves yet: nothing to canary against
            self.journal.log("promote", version=version,
                             detail="no current version to canary against")
            self.registry.promote(version, reason="flywheel: first version, gate PROMOTE")
            self._sync()
            return "promote"
        fraction = self.settings.ramp.stages[0]
        now = self.clock()
        self.journal.log("canary start", version=version, detail=(
            f"{version} against {current.version} at {fraction:.0%}"), stage=0,
            fraction=fraction, current=current.version)
        write_canary(self.registry, CanaryState(candidate=version, fraction=fraction, stage=0,
                                                started_at=now))
        self._save(phase="canary", candidate=version, stage=0, stage_started_at=now,
                   canary_started_at=now, previous_stage_started_at=None,
                   baseline=current.version)
        self._say(f"canary {version} starts at {fraction:.0%}")
        return "canary"

    def _canary_step(self) -> str:
        state, current = self.state, self.registry.current
        canary, lost = canary_now(self.registry, state, stages=len(self.settings.ramp.stages))
        if lost is not None:  # unreadable, gone, replaced, current moved: never promote over it
            return self._end_canary(*lost)
        assert canary is not None and current is not None  # canary_now checked them all
        assert state.candidate is not None and state.stage is not None
        now, started = self.clock(), state.stage_started_at or self.clock()
        stage = state.stage
        cur, cand, source = stage_evidence(
            self._runs(), self.registry, current.version, state.candidate, started,
            state.previous_stage_started_at, last=self.settings.ramp.stages[stage] >= 1.0,
            timeout=self.settings.arms_timeout_s)
        verdict = judge_stage(self.settings.ramp, stage, stage_started_at=started.timestamp(),
                              now=now.timestamp(), current=cur, candidate=cand)
        self.last_verdict, self.view.arms = verdict, (cur, cand, source)
        if verdict.action == "wait":
            return "wait"
        numbers = verdict.model_dump(mode="json")
        if verdict.action == "advance":
            nxt = stage + 1
            assert verdict.next_fraction is not None
            self.journal.log("advance", version=state.candidate, detail=(
                f"stage {stage} -> {nxt} ({verdict.next_fraction:.0%})"), verdict=numbers)
            write_canary(self.registry, canary.model_copy(update={
                "fraction": verdict.next_fraction, "stage": nxt, "started_at": now}))
            self._save(stage=nxt, stage_started_at=now, previous_stage_started_at=started)
            self._say(f"canary {state.candidate} advances to {verdict.next_fraction:.0%}")
            return "advance"
        if verdict.action == "promote":
            reason = f"flywheel canary: {'; '.join(verdict.reasons)}"
            self.journal.log("promote", version=state.candidate, detail=reason,
                             verdict=numbers)
            self.registry.promote(state.candidate, reason=reason[:2000],
                                  gate=version_gate(self.registry.get(state.candidate)))
            self._sync()
            return self._end_canary(None, "", action="promote")
        self.journal.log("rollback", version=state.candidate, detail="; ".join(
            verdict.reasons), verdict=numbers)
        return self._end_canary(None, "", action="rollback")

    def _end_canary(self, audit: str | None, detail: str, *, action: str = "") -> str:
        if audit is not None:
            self.journal.log(audit, version=self.state.candidate, detail=detail)
        write_canary(self.registry, None)
        self._say(f"canary {self.state.candidate}: {action or audit} {detail}".rstrip())
        self._save(**IDLE)
        return action or str(audit)

    # -- the monitor --------------------------------------------------------

    def watch(self, runs: list[Trajectory] | None = None) -> str | None:
        """Run the monitor on the current version (over ``runs``, default this tick's); after
        a rollback it made, say so."""
        if self.registry.current is None:
            return None
        report = monitor(self._runs() if runs is None else runs, self.registry,
                         settings=self.settings.monitor, rollback=True)
        self.last_monitor = report
        if report.action != "rolled back":
            return None
        self.journal.log("monitor rollback", version=report.version,
                         detail=f"{report.reason}; now {report.rolled_back_to}",
                         rolled_back_to=report.rolled_back_to, sync=report.sync)
        self._say(f"monitor rolled {report.version} back to {report.rolled_back_to}")
        if self.state.phase == "canary":  # gated against a version that no longer serves
            self._end_canary("canary aborted", "the current version was rolled back")
        return "monitor rollback"

    # -- start-up repair (:mod:`.recovery`) -----------------------------------

    def _recover(self) -> None:
        update = recovered_state(self.state, checked_canary(self.registry, self.journal),
                                 self.journal, self.registry, stages=len(self.settings.ramp.stages))
        if update is not None:
            self._save(**update)

    # -- helpers ------------------------------------------------------------

    def _runs(self) -> list[Trajectory]:
        """Every run of the sources, read once per tick (a round's own reads are its own)."""
        if self._tick_runs is None:
            self._tick_runs = read_sources(self.trajectories)
        return self._tick_runs

    def _watermark(self) -> Watermark:
        return Watermark.load(self.work_dir / WATERMARK_FILE)

    def _save(self, **fields: Any) -> None:
        self.state = self.state.model_copy(update=fields)
        self.journal.save(self.state)

    def _sync(self) -> None:
        from agentic_loop.distill.loop.round import sync_live

        self._say(f"live server: {sync_live(self.registry)}")

    def fail(self, what: str, exc: BaseException, **data: Any) -> None:
        """Record a failure: ``last_error`` (the status page), an audit line (not again while
        the same failure repeats, tick after tick), a log line."""
        message = f"{what}: {type(exc).__name__}: {exc}"
        if message != self.last_error:
            self.journal.log(what, detail=message, **data)
        self.last_error = message
        self._say(message)

    # -- what it shows ------------------------------------------------------

    def status(self) -> FlywheelStatus:
        """The service now, for the status page and ``/status.json``."""
        return self.view.status()

    def metrics(self) -> str:
        """Prometheus text: rounds, canary stage, last tick, trigger backlog, per-version health."""
        return self.view.metrics()
