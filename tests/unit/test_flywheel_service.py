"""The flywheel service, tick by tick, on a real registry and real trajectory logs.

The round runner is injected (it registers a prepared model folder with the
gate's verdict, as ``improve(promote=False)`` does, instead of training):
that is the only stand-in; the registry, the canary file, the trajectory
logs, the ramp's statistics, the monitor and the audit log are the real ones.
The integration test (tests/integration/test_flywheel_real_round.py) runs the
real improve.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from agentic_loop.distill.flywheel.journal import FlywheelState, Journal
from agentic_loop.distill.flywheel.lease import lease_holder
from agentic_loop.distill.flywheel.ramp import RampSettings
from agentic_loop.distill.flywheel.service import Flywheel
from agentic_loop.distill.flywheel.settings import FlywheelSettings
from agentic_loop.distill.loop.gating import register_evaluated
from agentic_loop.distill.loop.records import (
    GoldenStats,
    ImproveResult,
    ImproveRound,
    Registration,
)
from agentic_loop.distill.loop.state import Watermark
from agentic_loop.distill.release.canary.state import (
    CanaryState,
    canary_file,
    read_canary,
    write_canary,
)
from agentic_loop.distill.release.monitor import MonitorSettings
from agentic_loop.distill.release.registry import Registry
from agentic_loop.distill.train.model_card import DataRef, ModelCard, write_card
from agentic_loop.errors import StorageError
from agentic_loop.trajectories import Trajectory, TrajectoryLog

RAMP = RampSettings(min_runs=40, min_breach_runs=20, pass_margin=0.2, error_margin=0.2,
                    latency_ratio=1.5)


def _model(root: Path, name: str) -> Path:
    path = root / name
    path.mkdir(parents=True)
    (path / "config.json").write_text("{}")
    (path / "model.safetensors").write_bytes(f"weights of {name}".encode())
    write_card(path, ModelCard(name=name, base_model="local", method="sft",
                               data=DataRef(dir="d", manifest_sha256="abc", sft_rows=5)))
    return path


class PreparedRound:
    """A round runner that registers a prepared model with the gate's ``decision``, as
    ``improve(rounds=1, promote=False)`` does, and takes the runs past the watermark."""

    def __init__(self, root: Path, decision: str = "PROMOTE") -> None:
        self.root, self.decision, self.calls = root, decision, 0

    def __call__(self, **kw: Any) -> ImproveResult:
        self.calls += 1
        assert kw["settings"].promote is False and kw["settings"].rounds == 1
        work = Path(kw["work_dir"])
        folder = _model(self.root, f"cand-{self.calls}")
        version = register_evaluated(
            kw["registry"], folder, {"decision": self.decision, "reasons": ["prepared"]},
            baseline="v1", promote=kw["settings"].promote)
        mark = Watermark.load(work / "watermark.json")
        runs = [t for p in kw["trajectories"] for t in TrajectoryLog(p).read()]
        mark.after([t for t in runs if mark.is_new(t)]).save(work / "watermark.json")
        report = ImproveRound(round=1, decision=self.decision,
                              golden=GoldenStats.of(baseline=(5, 10), candidate=(8, 10)),
                              registration=Registration(version=version.version,
                                                        promoted=False))
        return ImproveResult(work_dir=work, reports=[report], stopped="rounds",
                             reason="the round budget (1) is spent",
                             current=kw["registry"].current.version)


@pytest.fixture()
def world(tmp_path: Path) -> dict[str, Any]:
    reg = Registry(tmp_path / "reg")
    reg.register(_model(tmp_path, "base"))
    reg.promote("v1")
    golden = tmp_path / "golden.jsonl"
    golden.write_text(json.dumps({"task": "Say hi in 2 words.",
                                  "constraints": {"exact_words": 2}}) + "\n")
    return {"reg": reg, "traj": tmp_path / "traj", "golden": golden, "work": tmp_path / "work",
            "tmp": tmp_path}


def _wheel(world: dict[str, Any], runner: Any = None, **settings: Any) -> Flywheel:
    options: dict[str, Any] = {"min_new_runs": 5, "ramp": RAMP, "tick_s": 0.2, **settings}
    return Flywheel(world["reg"], [world["traj"]], world["golden"], world["work"],
                    FlywheelSettings(**options), round_runner=runner)


def _plant(world: dict[str, Any], version: str, n: int, *, passed: float = 1.0,
           errors: float = 0.0) -> None:
    log = TrajectoryLog(world["traj"])
    for i in range(n):
        log.append(Trajectory(architecture="a", model_id=version, task=f"task {version} {i}",
                              accepted=i < round(n * passed), latency_s=1.0 + (i % 10) * 0.01,
                              errors=["boom"] if i < round(n * errors) else []))


def _current(reg: Registry) -> str | None:
    return reg.current.version if reg.current is not None else None


def _actions(world: dict[str, Any]) -> list[str]:
    return [r.action for r in Journal(world["reg"].root).tail(1000)]


def test_planted_runs_fire_a_round_whose_candidate_is_canaried(world: dict[str, Any]) -> None:
    runner = PreparedRound(world["tmp"])
    with _wheel(world, runner) as wheel:
        _plant(world, "v1", 4)
        assert wheel.tick() == "idle" and runner.calls == 0
        assert wheel.status().new_runs == 4
        _plant(world, "v1", 1)
        assert wheel.tick() == "canary"
        canary = read_canary(world["reg"])
        assert canary is not None and (canary.candidate, canary.stage) == ("v2", 0)
        assert canary.fraction == RAMP.stages[0]
        assert world["reg"].current.version == "v1"  # gated PROMOTE, but not promoted
        assert wheel.tick() == "wait"  # no evidence yet
    assert _actions(world)[:4] == ["trigger", "round start", "round end", "canary start"]
    assert Watermark.load(world["work"] / "watermark.json").at is not None


def test_a_healthy_candidate_advances_stage_by_stage_to_promote(world: dict[str, Any]) -> None:
    with _wheel(world, PreparedRound(world["tmp"])) as wheel:
        _plant(world, "v1", 5)
        assert wheel.tick() == "canary"
        for stage in range(3):
            _plant(world, "v1", 45, passed=0.9)
            _plant(world, "v2", 45, passed=0.9)
            assert wheel.tick() == "advance", wheel.last_verdict
            canary = read_canary(world["reg"])
            assert canary is not None and canary.stage == stage + 1
            assert canary.fraction == RAMP.stages[stage + 1]
        _plant(world, "v2", 45, passed=0.9)  # 100%: the current arm is the stage before's
        assert wheel.tick() == "promote", wheel.last_verdict
        status = wheel.status()
    assert world["reg"].current.version == "v2" and read_canary(world["reg"]) is None
    assert status.phase == "idle" and status.lineage == ["v2", "v1"]
    actions = _actions(world)
    assert actions.count("advance") == 3 and actions[-1] == "promote"
    promote = world["reg"].history()[-1]
    assert promote.action == "promote" and "not worse" in (promote.reason or "")
    assert promote.gate is not None and promote.gate.decision.value == "PROMOTE"
    advance = next(r for r in Journal(world["reg"].root).tail(100) if r.action == "advance")
    assert {t["metric"] for t in advance.data["verdict"]["tests"]} == {
        "pass_rate", "error_rate", "p99_latency_s"}


def test_a_worse_candidate_rolls_back_at_the_first_breach(world: dict[str, Any]) -> None:
    with _wheel(world, PreparedRound(world["tmp"])) as wheel:
        _plant(world, "v1", 5)
        assert wheel.tick() == "canary"
        _plant(world, "v1", 25, passed=1.0)
        _plant(world, "v2", 25, passed=0.2)
        assert wheel.tick() == "rollback"
    assert world["reg"].current.version == "v1" and read_canary(world["reg"]) is None
    rollback = Journal(world["reg"].root).tail(1)[0]
    assert rollback.action == "rollback" and "pass rate is worse" in rollback.detail
    assert Journal(world["reg"].root).load().phase == "idle"


def test_a_gate_that_does_not_say_promote_starts_no_canary(world: dict[str, Any]) -> None:
    with _wheel(world, PreparedRound(world["tmp"], "MANUAL_REVIEW")) as wheel:
        _plant(world, "v1", 5)
        assert wheel.tick() == "round"
    assert read_canary(world["reg"]) is None and "canary start" not in _actions(world)


def test_the_monitor_rolls_back_a_drifting_current_version(world: dict[str, Any]) -> None:
    reg = world["reg"]
    register_evaluated(reg, _model(world["tmp"], "next"), {"decision": "PROMOTE"},
                       baseline="v1")
    _plant(world, "v1", 40, passed=0.9)
    _plant(world, "v2", 40, passed=0.3)
    with _wheel(world, PreparedRound(world["tmp"]), min_new_runs=1000,
                monitor=MonitorSettings(min_runs=30)) as wheel:
        assert wheel.tick() == "monitor rollback"
        lines = wheel.status().monitors
    assert reg.current.version == "v1" and "monitor rollback" in _actions(world)
    assert any(m.metric == "pass_rate" and m.breached for m in lines)


def test_a_missing_golden_set_skips_rounds_and_keeps_the_service(world: dict[str, Any]) -> None:
    world["golden"].unlink()
    runner = PreparedRound(world["tmp"])
    with _wheel(world, runner) as wheel:
        _plant(world, "v1", 5)
        assert wheel.tick() == "round skipped" and wheel.tick() == "round skipped"
        assert "golden" in (wheel.status().last_error or "")
    assert runner.calls == 0 and _actions(world).count("round skipped") == 1


def test_start_removes_a_canary_of_an_ungated_or_unknown_version(world: dict[str, Any]) -> None:
    reg = world["reg"]
    reg.register(_model(world["tmp"], "by-hand"))  # v2: no gate verdict in its card
    for name in ("v2", "v9"):
        write_canary(reg, CanaryState(candidate=name, fraction=0.05))
        with _wheel(world):
            pass
        assert read_canary(reg) is None
        last = Journal(reg.root).tail(1)[0]
        assert last.action == "recover" and name in last.detail


def test_an_interrupted_round_runs_again_at_start(world: dict[str, Any]) -> None:
    Journal(world["reg"].root).save(FlywheelState(phase="round", last_trigger="planted"))
    runner = PreparedRound(world["tmp"])
    with _wheel(world, runner) as wheel:
        assert "interrupted" in Journal(world["reg"].root).tail(1)[0].detail
        assert wheel.tick() == "canary"  # no trigger needed: the round is resumed
    assert runner.calls == 1


def test_status_and_metrics(world: dict[str, Any]) -> None:
    with _wheel(world, PreparedRound(world["tmp"])) as wheel:
        _plant(world, "v1", 5)
        wheel.tick()
        _plant(world, "v1", 10)
        _plant(world, "v2", 10)
        wheel.tick()
        status = wheel.status()
        families = {f.name: f for f in text_string_to_metric_families(wheel.metrics())}
    assert status.phase == "canary" and status.candidate == "v2" and status.stage == 0
    assert [a.role for a in status.arms] == ["current", "candidate"]
    assert status.arms[1].runs == 10 and status.rounds[0].golden_pass_rate == 0.8
    assert families["agentic_loop_flywheel_rounds"].samples[0].value == 1
    assert families["agentic_loop_flywheel_canary_stage"].samples[0].value == 0
    assert families["agentic_loop_flywheel_last_tick_timestamp_seconds"].samples[0].value > 0


SERVICE = textwrap.dedent("""
    import sys
    from agentic_loop.distill.flywheel.ramp import RampSettings
    from agentic_loop.distill.flywheel.service import Flywheel
    from agentic_loop.distill.flywheel.settings import FlywheelSettings
    reg, traj, golden, work = sys.argv[1:5]
    ramp = RampSettings(min_runs=40, min_breach_runs=20, pass_margin=0.2, error_margin=0.2)
    Flywheel(reg, [traj], golden, work, FlywheelSettings(min_new_runs=5, tick_s=0.1,
             ramp=ramp), log=lambda line: print(line, flush=True)).run()
""")


def test_kill_9_during_a_canary_stage_resumes_the_same_stage(world: dict[str, Any]) -> None:
    reg = world["reg"]
    with _wheel(world, PreparedRound(world["tmp"])) as wheel:
        _plant(world, "v1", 5)
        wheel.tick()
        _plant(world, "v1", 45, passed=0.9)
        _plant(world, "v2", 45, passed=0.9)
        assert wheel.tick() == "advance"
        started = wheel.state.stage_started_at
    service = subprocess.Popen(
        [sys.executable, "-c", SERVICE, str(reg.root), str(world["traj"]), str(world["golden"]),
         str(world["work"])], stdout=subprocess.PIPE, text=True)
    try:
        assert service.stdout is not None
        seen = []
        for line in service.stdout:  # the service resumed stage 1, then ticks
            seen.append(line)
            if line.startswith("tick: wait"):
                break
        assert seen and seen[-1].startswith("tick: wait"), seen
        assert Journal(reg.root).load().stage == 1
    finally:
        os.kill(service.pid, signal.SIGKILL)
        service.wait(timeout=30)
    assert service.returncode == -signal.SIGKILL
    with _wheel(world) as wheel:  # the kernel released the lease; the stage goes on
        assert wheel.state.phase == "canary" and wheel.state.stage == 1
        assert wheel.state.stage_started_at == started
        assert wheel.tick() == "wait"
    canary = read_canary(reg)
    assert canary is not None and canary.stage == 1
    resumed = [r for r in Journal(reg.root).tail(100) if r.action == "recover"]
    assert len(resumed) == 2 and all("resumed canary stage 1" in r.detail for r in resumed)


ROUND_SERVICE = textwrap.dedent("""
    import sys, time
    from agentic_loop.distill.flywheel.service import Flywheel
    from agentic_loop.distill.flywheel.settings import FlywheelSettings
    def stuck(**kw):
        print("in round", flush=True)
        time.sleep(600)
    reg, traj, golden, work = sys.argv[1:5]
    Flywheel(reg, [traj], golden, work, FlywheelSettings(min_new_runs=5, tick_s=0.1),
             round_runner=stuck).run()
""")


def _round_service(world: dict[str, Any]) -> subprocess.Popen[str]:
    """The service in a process of its own, stuck in a round (it prints "in round")."""
    return subprocess.Popen(
        [sys.executable, "-c", ROUND_SERVICE, str(world["reg"].root), str(world["traj"]),
         str(world["golden"]), str(world["work"])], stdout=subprocess.PIPE, text=True)


def test_kill_9_during_a_round_runs_the_round_again_at_restart(world: dict[str, Any]) -> None:
    reg = world["reg"]
    _plant(world, "v1", 5)
    service = _round_service(world)
    try:
        assert service.stdout is not None and service.stdout.readline().strip() == "in round"
        assert Journal(reg.root).load().phase == "round"
    finally:
        os.kill(service.pid, signal.SIGKILL)
        service.wait(timeout=30)
    runner = PreparedRound(world["tmp"])
    with _wheel(world, runner, min_new_runs=1000) as wheel:  # no trigger would fire now
        recover = Journal(reg.root).tail(1)[0]
        assert recover.action == "recover" and "round 1 was interrupted" in recover.detail
        assert wheel.tick() == "canary"
    assert runner.calls == 1 and _actions(world).count("round start") == 2
    assert (world["work"] / "round-0001").is_dir() and Journal(reg.root).load().rounds == 1


def test_a_crash_inside_a_promote_is_finished_at_restart(world: dict[str, Any]) -> None:
    reg = world["reg"]
    with _wheel(world, PreparedRound(world["tmp"])) as wheel:
        _plant(world, "v1", 5)
        assert wheel.tick() == "canary"
    reg.promote("v2", reason="promoted, then the service was killed before it cleared the canary")
    with _wheel(world) as wheel:
        assert read_canary(reg) is None and wheel.state.phase == "idle"
    details = [r.detail for r in Journal(reg.root).tail(3)]
    assert "removed canary.json: v2 is already current" in details[-2]
    assert "canary.json is missing" in details[-1]
    assert reg.current.version == "v2"


def test_the_monitor_watches_while_a_round_trains(world: dict[str, Any]) -> None:
    reg = world["reg"]
    register_evaluated(reg, _model(world["tmp"], "next"), {"decision": "PROMOTE"},
                       baseline="v1")
    inner = PreparedRound(world["tmp"], "MANUAL_REVIEW")
    seen: list[str] = []

    def slow_round(**kw: Any) -> ImproveResult:
        _plant(world, "v1", 40, passed=0.9)  # the drift shows up while the round trains
        _plant(world, "v2", 40, passed=0.3)
        deadline = time.monotonic() + 30
        while reg.current.version != "v1" and time.monotonic() < deadline:
            time.sleep(0.05)
        seen.append(reg.current.version)
        return inner(**kw)

    _plant(world, "v2", 5)
    stop = threading.Event()
    wheel = _wheel(world, slow_round, monitor=MonitorSettings(min_runs=30), tick_s=0.1)
    thread = threading.Thread(target=wheel.run, args=(stop,))
    thread.start()
    try:
        deadline = time.monotonic() + 60
        while "round end" not in _actions(world) and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        stop.set()
        thread.join(timeout=60)
    assert seen == ["v1"]  # rolled back by the side watch, before the round returned
    actions = _actions(world)
    assert actions.index("monitor rollback") < actions.index("round end")


# -- at the server: the serve process's front routes by user key; its numbers feed the ramp --

SERVER_RAMP = RampSettings(stages=(0.5, 1.0), min_runs=20, min_breach_runs=10,
                           pass_margin=0.25, error_margin=0.25, latency_ratio=100.0)


def _served_world(tmp: Path) -> tuple[Registry, Path, Any]:
    from serve_helpers import adapter_dir, model_dir, stand_in_python

    base = model_dir(tmp, "base")
    reg = Registry(tmp / "agent")
    reg.register(adapter_dir(tmp, "a1", base))
    reg.promote("v1")
    candidate = adapter_dir(tmp, "a2", base)
    write_card(candidate, ModelCard(name="a2", base_model=str(base), method="sft",
                                    data=DataRef(dir="d", manifest_sha256="abc", sft_rows=5)))

    def round_runner(**kw: Any) -> ImproveResult:
        version = register_evaluated(reg, candidate, {"decision": "PROMOTE"}, baseline="v1",
                                     promote=kw["settings"].promote)
        report = ImproveRound(round=1, decision="PROMOTE",
                              registration=Registration(version=version.version,
                                                        promoted=False))
        return ImproveResult(work_dir=Path(kw["work_dir"]), reports=[report],
                             stopped="rounds", reason="one round", current="v1")

    return reg, stand_in_python(tmp / "vllm"), round_runner


def _users(server: Any, log: TrajectoryLog, keys: list[str], *, candidate_passes: bool
           ) -> dict[str, int]:
    """Each key's request through the front, logged as the app would (the version that
    answered, from the front's header); the candidate's answers fail their checks unless
    ``candidate_passes``."""
    import httpx

    from agentic_loop.distill.release.front import VERSION_HEADER

    served: dict[str, int] = {}
    with httpx.Client(timeout=10) as client:
        for key in keys:
            answer = client.post(f"{server.base_url}/chat/completions",
                                 headers={"x-agentic-loop-user": key},
                                 json={"model": "agent", "messages": [
                                     {"role": "user", "content": "hi"}]})
            assert answer.status_code == 200, answer.text
            version = answer.headers[VERSION_HEADER]
            served[version] = served.get(version, 0) + 1
            log.append(Trajectory(architecture="app", model_id=version, task=f"task {key}",
                                  accepted=candidate_passes or version == "v1",
                                  latency_s=answer.elapsed.total_seconds()))
    return served


@pytest.mark.parametrize("healthy", [True, False])
def test_the_ramp_at_the_server(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                healthy: bool) -> None:
    from agentic_loop.distill.release.serve_watch import serve_registered

    monkeypatch.setenv("STAND_IN_RECORD", str(tmp_path / "record.json"))
    reg, python, round_runner = _served_world(tmp_path)
    log = TrajectoryLog(tmp_path / "traj")
    for i in range(3):  # what fires the trigger
        log.append(Trajectory(architecture="app", model_id="v1", task=f"t{i}", accepted=True))
    settings = FlywheelSettings(min_new_runs=3, ramp=SERVER_RAMP)
    keys = [f"user-{i}" for i in range(80)]
    with serve_registered(reg, python=python, device="cpu", timeout=30, poll_s=3600) as server, \
            Flywheel(reg, [log.dir], tmp_path / "golden.jsonl", tmp_path / "work", settings,
                     round_runner=round_runner) as wheel:
        (tmp_path / "golden.jsonl").write_text("{}\n")
        assert wheel.tick() == "canary"
        assert server.check_canary() == "canary of v2 at 0.5 against v1"
        served = _users(server, log, keys, candidate_passes=healthy)
        assert min(served.values()) >= 20, served
        did = wheel.tick()
        cur, cand, source = wheel.view.arms or (None, None, "")
        assert source == "front" and cand is not None and cur is not None
        assert (len(cur.errors), len(cand.errors)) == (served["v1"], served["v2"])
        if not healthy:
            assert did == "rollback", wheel.last_verdict
            assert _current(reg) == "v1" and read_canary(reg) is None
            assert server.check_canary() == "no canary: every request goes to v1"
            assert _users(server, log, keys[:10], candidate_passes=True) == {"v1": 10}
            return
        assert did == "advance", wheel.last_verdict
        assert server.check_canary() == "canary of v2 at 1 against v1"
        assert _users(server, log, keys[:25], candidate_passes=True) == {"v2": 25}
        assert wheel.tick() == "promote", wheel.last_verdict
    assert _current(reg) == "v2" and read_canary(reg) is None
    assert _actions({"reg": reg})[-3:] == ["canary start", "advance", "promote"]


def test_sigterm_waits_for_the_step_a_second_one_stops_a_round(world: dict[str, Any]) -> None:
    reg = world["reg"]
    _plant(world, "v1", 5)
    service = _round_service(world)
    try:
        assert service.stdout is not None and service.stdout.readline().strip() == "in round"
        service.send_signal(signal.SIGTERM)
        with pytest.raises(subprocess.TimeoutExpired):  # the round goes on after the first
            service.wait(timeout=1.0)
        service.send_signal(signal.SIGTERM)
        assert service.wait(timeout=30) == 128 + signal.SIGTERM
    finally:
        if service.poll() is None:
            os.kill(service.pid, signal.SIGKILL)
            service.wait(timeout=30)
    assert Journal(reg.root).load().phase == "round"  # resumed at the next start
    with _wheel(world, PreparedRound(world["tmp"])) as wheel:
        assert wheel.lease.held


def test_run_serves_the_status_page_and_metrics(world: dict[str, Any]) -> None:
    import httpx

    lines: list[str] = []
    wheel = Flywheel(world["reg"], [world["traj"]], world["golden"], world["work"],
                     FlywheelSettings(min_new_runs=5, tick_s=0.1, status_port=0),
                     log=lines.append)
    stop = threading.Event()
    thread = threading.Thread(target=wheel.run, args=(stop,))
    thread.start()
    try:
        deadline = time.monotonic() + 30
        while not any(line.startswith("tick:") for line in lines) and time.monotonic() < deadline:
            time.sleep(0.05)
        url = next(line.split(": ", 1)[1] for line in lines if line.startswith("status page"))
        data = httpx.get(url + "/status.json", timeout=10).json()
        metrics = httpx.get(url + "/metrics", timeout=10).text
        page = httpx.get(url + "/", timeout=10).text
    finally:
        stop.set()
        thread.join(timeout=30)
    assert data["phase"] == "idle" and data["current"] == "v1"
    names = {f.name for f in text_string_to_metric_families(metrics)}
    assert {"agentic_loop_flywheel_rounds", "agentic_loop_flywheel_trigger_backlog_runs"} <= names
    assert "v1" in page and not wheel.lease.held


def test_a_serve_process_dying_mid_canary_leaves_the_ramp_on_trajectories(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from agentic_loop.distill.release.serve_watch import serve_registered

    monkeypatch.setenv("STAND_IN_RECORD", str(tmp_path / "record.json"))
    reg, python, round_runner = _served_world(tmp_path)
    log = TrajectoryLog(tmp_path / "traj")
    for i in range(3):
        log.append(Trajectory(architecture="app", model_id="v1", task=f"t{i}", accepted=True))
    (tmp_path / "golden.jsonl").write_text("{}\n")
    with Flywheel(reg, [log.dir], tmp_path / "golden.jsonl", tmp_path / "work",
                  FlywheelSettings(min_new_runs=3, ramp=SERVER_RAMP),
                  round_runner=round_runner) as wheel:
        server = serve_registered(reg, python=python, device="cpu", timeout=30, poll_s=3600)
        with server:
            assert wheel.tick() == "canary" and server.check_canary() is not None
            _users(server, log, [f"user-{i}" for i in range(10)], candidate_passes=True)
            assert wheel.tick() == "wait" and (wheel.view.arms or ("", "", ""))[2] == "front"
        # the serve process is gone: its record is stale, the ramp reads the trajectories
        assert wheel.tick() == "wait" and (wheel.view.arms or ("", "", ""))[2] == "trajectories"
        assert wheel.state.phase == "canary" and read_canary(reg) is not None
    assert _current(reg) == "v1"


def test_the_status_command_prints_the_state_and_the_audit(world: dict[str, Any]) -> None:
    from typer.testing import CliRunner

    import agentic_loop.cli.monitor  # noqa: F401 - registers the command group
    from agentic_loop.cli import app

    with _wheel(world, PreparedRound(world["tmp"])) as wheel:
        _plant(world, "v1", 5)
        wheel.tick()
        held = CliRunner().invoke(app, ["flywheel", "status", "--registry",
                                        str(world["reg"].root)], env={"COLUMNS": "200"})
    free = CliRunner().invoke(app, ["flywheel", "status", "--registry", str(world["reg"].root)],
                              env={"COLUMNS": "200"})
    assert held.exit_code == 0 and free.exit_code == 0, held.output
    assert "phase: canary" in held.output and "candidate: v2" in held.output
    assert f"pid {os.getpid()}" in held.output and "no service holds it" in free.output
    assert "canary start" in held.output and "round end" in held.output


# -- a canary never runs forever: each thing that made every tick fail (review of issue 35) --


def _canary_started(world: dict[str, Any], wheel: Flywheel) -> None:
    _plant(world, "v1", 5)
    assert wheel.tick() == "canary" and read_canary(world["reg"]) is not None


def test_an_unreadable_canary_file_ends_the_canary(world: dict[str, Any]) -> None:
    with _wheel(world, PreparedRound(world["tmp"])) as wheel:
        _canary_started(world, wheel)
        canary_file(world["reg"]).write_text("{half a canary")
        assert wheel.tick() == "canary lost"
        assert wheel.tick() == "idle"
    assert not canary_file(world["reg"]).exists() and Journal(world["reg"].root).load().phase == (
        "idle")
    lost = Journal(world["reg"].root).tail(1)[0]
    assert lost.action == "canary lost" and "unreadable" in lost.detail, lost
    assert _current(world["reg"]) == "v1"


def test_runs_with_bad_latencies_are_left_out_of_the_stage(world: dict[str, Any]) -> None:
    with _wheel(world, PreparedRound(world["tmp"])) as wheel:
        _canary_started(world, wheel)
        _plant(world, "v2", 3)
        log = TrajectoryLog(world["traj"])
        for bad in (-1.0, float("nan"), float("inf")):
            log.append(Trajectory(architecture="a", model_id="v2", task=f"clock {bad}",
                                  accepted=True, latency_s=bad))
        assert wheel.tick() == "wait"
        _, cand, _ = wheel.view.arms or (None, None, "")
    assert cand is not None and len(cand.passed) == 6 and len(cand.latencies_s) == 3


def test_a_canary_at_a_stage_the_ramp_no_longer_has_is_ended_at_start(
        world: dict[str, Any]) -> None:
    reg = world["reg"]
    with _wheel(world, PreparedRound(world["tmp"])) as wheel:
        _canary_started(world, wheel)
        canary = read_canary(reg)
        assert canary is not None
        write_canary(reg, canary.model_copy(update={"stage": 3, "fraction": 1.0}))
        Journal(reg.root).save(wheel.state.model_copy(update={"stage": 3}))
    short = RampSettings(stages=(0.5, 1.0), min_runs=40, min_breach_runs=20)
    with _wheel(world, ramp=short) as wheel:  # restarted with --stages 0.5,1
        assert wheel.state.phase == "idle" and read_canary(reg) is None
        assert wheel.tick() == "idle"
    recover = Journal(reg.root).tail(1)[0]
    assert recover.action == "recover" and "stage 3 is not one of the ramp's 2 stages" in (
        recover.detail)


class _Clock:
    def __init__(self) -> None:
        self.now = datetime.now(UTC)

    def __call__(self) -> datetime:
        return self.now


def test_a_stage_past_its_deadline_rolls_back_even_when_its_evidence_fails(
        world: dict[str, Any]) -> None:
    clock, broken = _Clock(), world["tmp"] / "second-log"
    settings = FlywheelSettings(min_new_runs=5, ramp=RAMP.model_copy(update={"max_stage_s": 60}))
    with Flywheel(world["reg"], [world["traj"], broken], world["golden"], world["work"],
                  settings, round_runner=PreparedRound(world["tmp"]), clock=clock) as wheel:
        _canary_started(world, wheel)
        (broken / "trajectories.jsonl").mkdir(parents=True)  # a log that cannot be read
        clock.now += timedelta(seconds=30)
        with pytest.raises(Exception, match="trajectories.jsonl"):  # in time: the tick fails
            wheel.tick()
        assert read_canary(world["reg"]) is not None and wheel.state.phase == "canary"
        clock.now += timedelta(seconds=31)
        assert wheel.tick() == "rollback"
        assert read_canary(world["reg"]) is None and wheel.state.phase == "idle"
    rollback = Journal(world["reg"].root).tail(1)[0]
    assert rollback.action == "rollback" and "could not be gathered" in rollback.detail
    assert "61s of at most 60s" in rollback.detail and _current(world["reg"]) == "v1"


def test_a_canary_whose_current_moved_ends_and_never_promotes(world: dict[str, Any]) -> None:
    reg = world["reg"]
    with _wheel(world, PreparedRound(world["tmp"])) as wheel:
        _canary_started(world, wheel)
        assert wheel.state.baseline == "v1"
        Journal(reg.root).save(wheel.state.model_copy(update={"baseline": None}))
    with _wheel(world) as wheel:  # a state saved before baselines: the current at restart
        assert wheel.state.baseline == "v1" and wheel.state.phase == "canary"
        reg.register(_model(world["tmp"], "by-hand"))
        reg.promote("v3", reason="a person promoted it during the canary")
        _plant(world, "v2", 45, passed=0.9)
        assert wheel.tick() == "canary ended"
        assert wheel.state.phase == "idle" and wheel.state.baseline is None
    assert _current(reg) == "v3" and read_canary(reg) is None
    ended = Journal(reg.root).tail(1)[0]
    assert ended.detail == "current moved from v1 to v3 during the canary; canary of v2 ended"


def test_a_corrupt_state_file_leaves_the_lease_free(world: dict[str, Any]) -> None:
    journal = Journal(world["reg"].root)
    journal.save(FlywheelState())
    journal.state_path.write_text("{not a state")
    wheel = _wheel(world)
    with pytest.raises(StorageError, match="unreadable"):
        wheel.start()
    assert not wheel.lease.held and lease_holder(world["reg"].root) is None
    with pytest.raises(StorageError, match="unreadable"):  # not started: no tick on a blank state
        wheel.tick()
    journal.state_path.unlink()
    with _wheel(world) as other:  # another service may take the free lease
        assert other.lease.held


def test_a_state_error_without_a_message_still_reads_in_one_line(
        world: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    journal = Journal(world["reg"].root)
    journal.save(FlywheelState())

    def silent(cls: type, data: bytes) -> FlywheelState:
        raise ValueError()

    monkeypatch.setattr(FlywheelState, "model_validate_json", classmethod(silent))
    with pytest.raises(StorageError, match=r"unreadable \(ValueError\)"):
        journal.load()
