"""The flywheel service on the real embedded model: planted runs fire a real improve round.

Tiny budgets (CPU): six logged runs of pool tasks (each with its constraint
rubric, as a served app logs them), four golden tasks, one round of two
samples per task, 32 new tokens, three LoRA steps. The registry starts with
the embedded model as v1 (current), so the candidate has a version to be
canaried against.

The gate is made permissive through the settings improve offers
(``eval_options``: ``min_tasks=2``, ``alpha=0.999999``, ``min_effect=0``,
``rollback_ratio=0.01``, no KL, no diversity check), because four golden
tasks cannot show a real gain: it says PROMOTE unless the candidate scores
exactly like the base on every task (the gate's p is then 1: MANUAL_REVIEW)
or worse on average. Then the test plants new runs and the service runs
another round (each learns from its own new runs only: the watermark carries
over), up to three. It asserts what the service must do either way: PROMOTE
starts a canary of the new version at the ramp's first stage (the registry's
current unmoved), and the users' runs then ramp it to promote; anything else
starts no canary.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agentic_loop.distill.eval.gate import Decision
from agentic_loop.distill.flywheel.journal import Journal
from agentic_loop.distill.flywheel.ramp import RampSettings
from agentic_loop.distill.flywheel.service import Flywheel
from agentic_loop.distill.flywheel.settings import FlywheelSettings
from agentic_loop.distill.loop.settings import ImproveSettings
from agentic_loop.distill.release.canary.state import read_canary
from agentic_loop.distill.release.registry import Registry
from agentic_loop.distill.release.registry_audit import version_gate
from agentic_loop.judges import rubric_for_task
from agentic_loop.memory import HashingEmbedder
from agentic_loop.models.embedded import ensure_converted
from agentic_loop.tasks.sets import constrained_tasks, split_tasks
from agentic_loop.trajectories import Trajectory, TrajectoryLog

pytestmark = pytest.mark.slow


def tiny_round_settings() -> ImproveSettings:
    """One real improve round on the embedded model in about a minute, with a gate made
    permissive (any golden result short of halving passes, two tasks suffice), so a tiny
    candidate can say PROMOTE; the end-to-end flywheel test uses it too."""
    return ImproveSettings(
        samples=2, max_tokens=32, thresholds=(3.0,), hint_retry=False, max_concurrency=2,
        train_options={"max_steps": 3, "batch_size": 2, "max_length": 128,
                       "learning_rate": 5e-3, "progress": False},
        export_options={"pii": "regex", "embedder": HashingEmbedder()},
        eval_options={"min_tasks": 2, "kl": False, "rollback_ratio": 0.01, "alpha": 0.999999,
                      "min_effect": 0.0, "diversity_check": False,
                      "embedder": HashingEmbedder()})


def test_planted_runs_fire_a_real_round_and_a_promoted_gate_starts_the_canary(
        tmp_path: Path) -> None:
    pool, golden = split_tasks(constrained_tasks(10, seed=3), held_out=0.4, seed=0)
    golden_file = tmp_path / "golden.jsonl"
    golden_file.write_text("".join(json.dumps(g.model_dump(mode="json", exclude_none=True))
                                   + "\n" for g in golden))
    reg = Registry(tmp_path / "reg")
    reg.promote(reg.register(ensure_converted(), name="base").version)
    log = TrajectoryLog(tmp_path / "traj")

    def plant() -> None:  # a served app logs its accepted runs, each with its task's rubric
        for spec in pool:
            rubric = rubric_for_task(spec, checks_only=True)
            assert rubric is not None
            log.append(Trajectory(architecture="reflection", model_id="v1", task=spec.task,
                                  rubric=rubric.to_dict(), final_output="ok", accepted=True,
                                  latency_s=1.0))

    improve = tiny_round_settings()
    ramp = RampSettings(stages=(0.5, 1.0), min_runs=20, min_breach_runs=10, pass_margin=0.25,
                        error_margin=0.25, looks=(1,))  # one look: this tests the service
    settings = FlywheelSettings(min_new_runs=len(pool), improve=improve, ramp=ramp)
    lines: list[str] = []
    did = "idle"
    with Flywheel(reg, [log.dir], golden_file, tmp_path / "work", settings,
                  log=lines.append) as wheel:
        for _ in range(3):  # a round whose gate does not say PROMOTE: new runs, a new round
            assert wheel.tick() == "idle"
            plant()
            did = wheel.tick()
            if did == "canary":
                break
            assert did == "round", lines
        status, canary = wheel.status(), read_canary(reg)
        ramped = []
        if did == "canary":  # the real candidate through the ramp, on the users' runs
            candidate = reg.versions()[-1].version
            for arms in (("v1", candidate), (candidate,)):
                for version in arms:
                    for i in range(25):
                        log.append(Trajectory(architecture="app", model_id=version,
                                              task=f"user task {i}", accepted=i % 5 != 0,
                                              latency_s=1.0 + (i % 5) * 0.1))
                ramped.append(wheel.tick())
    rounds = wheel.state.rounds
    records = Journal(reg.root).tail(100)
    actions = [r.action for r in records]
    assert actions[:3] == ["trigger", "round start", "round end"], (actions, lines)
    assert actions.count("round end") == rounds
    # a round may end with no candidate (nothing of its samples passed the bar: no data)
    made = [r.version for r in records if r.action == "round end" and r.version]
    versions = [v.version for v in reg.versions()]
    assert versions == ["v1", *made], lines
    assert status.current == "v1"  # the round registered its candidate, it did not promote it
    assert [e.action for e in reg.history()].count("promote") == 1 + (did == "canary") * 1
    for n in range(1, rounds + 1):  # each round learned from its own new runs only
        state = json.loads((tmp_path / "work" / f"round-{n:04d}" / "round-001" / "state.json")
                           .read_text())
        assert state["from_runs"] == len(pool), state
    assert [p.version for p in status.rounds if p.version] == made
    if not made:  # three rounds, nothing to train on: no candidate, no canary
        assert did == "round" and canary is None and status.phase == "idle"
        return
    last = made[-1]
    gate = version_gate(reg.get(last))
    assert gate is not None
    end = [r for r in records if r.action == "round end" and r.version][-1]
    assert end.version == last and end.data["decision"] == gate.decision.value
    assert end.data["golden"]["tasks"] == len(golden)
    print(f"{rounds} round(s); gate {gate.describe()}; the service did {did!r}")
    if gate.decision == Decision.PROMOTE:
        assert did == "canary" and canary is not None
        assert (canary.candidate, canary.stage) == (last, 0)
        assert canary.fraction == settings.ramp.stages[0]
        assert actions[-3:] == ["canary start", "advance", "promote"], ramped
        assert ramped == ["advance", "promote"] and status.phase == "canary"
        assert read_canary(reg) is None
        current = reg.current
        assert current is not None and current.version == last
    else:  # three rounds, none better than the base: no canary
        assert did == "round" and canary is None and status.phase == "idle"


# -- a Postgres trajectory sink written by two processes; Postgres restarting under the service --

WRITER = """
import sys
from agentic_loop.trajectories import Trajectory
from agentic_loop.trajectory_stores import open_trajectory_log
dsn, tag, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
with open_trajectory_log(dsn) as log:
    for i in range(n):
        log.append(Trajectory(architecture="app", model_id="v1", task=f"{tag} task {i}",
                              accepted=True, latency_s=0.5))
"""


def _prepared_round(tmp: Path, seen: list[object]) -> object:
    from agentic_loop.distill.loop.gating import register_evaluated
    from agentic_loop.distill.loop.records import ImproveResult, ImproveRound, Registration
    from agentic_loop.distill.train.model_card import DataRef, ModelCard, write_card

    def run(**kw: object) -> ImproveResult:
        seen.append(kw["trajectories"])
        folder = tmp / "cand"
        folder.mkdir()
        (folder / "config.json").write_text('{"name": "cand"}')
        write_card(folder, ModelCard(name="cand", base_model="local", method="sft",
                                     data=DataRef(dir="d", manifest_sha256="abc", sft_rows=1)))
        registry = kw["registry"]
        assert isinstance(registry, Registry)
        version = register_evaluated(registry, folder, {"decision": "PROMOTE"},
                                     baseline="v1", promote=False)
        return ImproveResult(work_dir=Path(str(kw["work_dir"])), reports=[ImproveRound(
            round=1, decision="PROMOTE", registration=Registration(
                version=version.version, promoted=False))], stopped="rounds",
            reason="one round", current="v1")

    return run


@pytest.mark.filterwarnings("ignore:XDG_RUNTIME_DIR is not set")
def test_the_service_reads_a_postgres_sink_and_outlives_a_postgres_restart(
        tmp_path: Path) -> None:
    import subprocess
    import sys
    import threading
    import time

    from pg_helpers import start_throwaway

    server = start_throwaway()
    try:
        dsn = server.fresh_database("flywheel_sink")
        writers = [subprocess.Popen([sys.executable, "-c", WRITER, dsn, tag, "6"])
                   for tag in ("host-a", "host-b")]
        assert [w.wait(timeout=120) for w in writers] == [0, 0]
        reg = Registry(tmp_path / "reg")
        base = tmp_path / "base"
        base.mkdir()
        (base / "config.json").write_text('{"name": "base"}')
        reg.promote(reg.register(base).version)
        golden = tmp_path / "golden.jsonl"
        golden.write_text("{}\n")
        seen: list[object] = []
        lines: list[str] = []
        wheel = Flywheel(reg, [dsn], golden, tmp_path / "work",
                         FlywheelSettings(min_new_runs=12, tick_s=0.2),
                         round_runner=_prepared_round(tmp_path, seen),  # type: ignore[arg-type]
                         log=lines.append)
        with wheel:
            assert wheel.tick() == "canary"  # 6 + 6 runs of two writers fired the trigger
        assert seen == [[dsn]]
        stop = threading.Event()
        thread = threading.Thread(target=wheel.run, args=(stop,))
        thread.start()
        try:
            server.stop()  # Postgres restarts under the running service
            deadline = time.monotonic() + 120
            while not any("tick failed" in line for line in lines) \
                    and time.monotonic() < deadline:
                time.sleep(0.1)
            server.start()
            failed_at = len(lines)
            deadline = time.monotonic() + 120  # a loaded machine: the restart and a tick
            while not any(line == "tick: wait" for line in lines[failed_at:]) \
                    and time.monotonic() < deadline:
                time.sleep(0.1)
        finally:
            stop.set()
            thread.join(timeout=60)
        assert any("tick failed" in line for line in lines), lines
        assert "tick: wait" in lines[failed_at:], lines  # back to the canary stage
        state = Journal(reg.root).load()
        assert (state.phase, state.candidate, state.stage) == ("canary", "v2", 0)
        failures = [r for r in Journal(reg.root).tail(100) if r.action == "tick failed"]
        assert len(failures) == 1  # the same failure is audited once, not every tick
        from agentic_loop.trajectory_stores import PostgresTrajectoryLog

        with PostgresTrajectoryLog(dsn) as log:
            assert len(log.read()) == 12  # no run lost
        print(failures[0].detail)
    finally:
        server.cleanup()
