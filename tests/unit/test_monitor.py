"""The release monitor on a real registry: attribution of runs to versions, thresholds, the
minimum sample, the automatic rollback with its audit entry, and ``agentic-loop monitor``."""

from __future__ import annotations

import json
import time
from datetime import datetime, timedelta
from pathlib import Path

import pytest
from typer.testing import CliRunner

from agentic_loop.cli import app
from agentic_loop.distill.release.monitor import MonitorSettings, monitor
from agentic_loop.distill.release.monitor_stats import VersionMap, answered_by
from agentic_loop.distill.release.registry import Registry
from agentic_loop.trajectories import Round, Trajectory, TrajectoryLog

runner = CliRunner()


def registry(tmp_path: Path) -> Registry:
    """v1 and v2 of "tagline" (folders with an empty config.json); v1 promoted, then v2."""
    reg = Registry(tmp_path / "registry")
    for folder in ("a", "b"):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "config.json").write_text(f'{{"name": "{folder}"}}')  # one model each
        reg.register(tmp_path / folder, name="tagline")
    reg.promote("v1")
    reg.promote("v2", reason="gate PROMOTE")
    return reg


def runs(model: str, n: int, *, errors: int = 0, passed: int | None = None,
         latency: float = 1.0, score: float = 8.0, at: datetime | None = None,
         round_model: str | None = None) -> list[Trajectory]:
    passed = n - errors if passed is None else passed
    out = []
    for i in range(n):
        failed = i < errors
        out.append(Trajectory(
            architecture="reflection", model_id=model, task=f"task {i}",
            rounds=[] if failed else [Round(iteration=0, draft="a tagline", score=score,
                                            model=round_model)],
            final_output=None if failed else "a tagline", final_score=None if failed else score,
            accepted=i >= n - passed, latency_s=latency + 0.01 * i,
            errors=["ModelCallError: the server answered 500"] if failed else [],
            **({"created_at": at + timedelta(seconds=i)} if at else {})))
    return out


def log_of(tmp_path: Path, *groups: list[Trajectory]) -> TrajectoryLog:
    log = TrajectoryLog(tmp_path / "trajectories")
    for group in groups:
        for t in group:
            log.append(t)
    return log


def test_a_planted_error_rate_rolls_back_with_an_audit_entry(tmp_path: Path):
    reg = registry(tmp_path)
    log = log_of(tmp_path, runs("tagline-v1", 60, errors=1), runs("tagline-v2", 50, errors=20))
    report = monitor(log, reg)
    assert report.verdict == "breach" and report.action == "rolled back"
    assert [b.metric for b in report.breaches][0] == "error_rate"
    assert report.rolled_back_to == "v1" and reg.current is not None
    assert reg.current.version == "v1"
    last = reg.history()[-1]
    assert last.action == "rollback" and last.version == "v1" and last.previous == "v2"
    reason = last.reason or ""
    assert "error_rate 40.0% of v2" in reason and "v1's 1.7%" in reason  # rates in percent
    assert "last 200 runs per version" in reason and "50 runs of v2, 60 of v1" in reason
    assert report.sync == "no server running"  # the live server was asked to follow
    v1, v2 = report.stats_of("v1"), report.stats_of("v2")
    assert v1 is not None and v2 is not None and (v1.runs, v2.runs) == (60, 50)


def test_a_healthy_version_and_too_few_runs_change_nothing(tmp_path: Path):
    reg = registry(tmp_path)
    healthy = monitor(log_of(tmp_path, runs("tagline-v1", 60, errors=1),
                             runs("tagline-v2", 60, errors=1)), reg)
    assert healthy.verdict == "healthy" and healthy.action == "none" and not healthy.breaches
    few = monitor([*runs("tagline-v1", 60), *runs("tagline-v2", 10, errors=10)], reg)
    assert few.verdict == "insufficient data" and "v2 has 10" in few.reason
    assert reg.current is not None and reg.current.version == "v2"
    assert [e.action for e in reg.history()].count("rollback") == 0


@pytest.mark.parametrize(("v2", "metric"), [
    ({"passed": 40}, "pass_rate"),               # 0.67 < 0.95 x 1.0
    ({"score": 7.0}, "mean_score"),              # 7.0 < 0.95 x 8.0
    ({"latency": 2.0}, "latency_p99"),           # 2.59 > 1.5 x 1.59
])
def test_each_threshold_fires_on_its_own(tmp_path: Path, v2: dict[str, float], metric: str):
    reg = registry(tmp_path)
    report = monitor([*runs("tagline-v1", 60), *runs("tagline-v2", 60, **v2)],  # type: ignore[arg-type]
                     reg, rollback=False)
    assert [b.metric for b in report.breaches] == [metric]
    assert report.verdict == "breach" and report.action == "none"
    assert reg.current is not None and reg.current.version == "v2"  # --no-rollback
    off = MonitorSettings(**{{"pass_rate": "min_pass_ratio", "mean_score": "min_score_ratio",
                              "latency_p99": "max_latency_ratio"}[metric]: None})
    assert monitor([*runs("tagline-v1", 60), *runs("tagline-v2", 60, **v2)],  # type: ignore[arg-type]
                   reg, settings=off).verdict == "healthy"


def test_the_window_keeps_the_last_runs_only(tmp_path: Path):
    reg = registry(tmp_path)
    old_bad = runs("tagline-v2", 40, errors=40, at=datetime(2020, 1, 1).astimezone())
    report = monitor([*runs("tagline-v1", 60), *old_bad, *runs("tagline-v2", 60)], reg,
                     settings=MonitorSettings(window_runs=50))
    assert report.verdict == "healthy" and report.stats_of("v2").runs == 50  # type: ignore[union-attr]
    by_hours = monitor([*runs("tagline-v1", 60), *old_bad, *runs("tagline-v2", 10)], reg,
                       settings=MonitorSettings(window_runs=None, window_hours=24))
    assert by_hours.verdict == "insufficient data"


def test_runs_are_attributed_by_round_model_and_by_served_name_over_time(tmp_path: Path):
    reg = Registry(tmp_path / "registry")
    for folder in ("a", "b"):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "config.json").write_text(f'{{"name": "{folder}"}}')
        reg.register(tmp_path / folder, name="tagline")
    reg.promote("v1")
    time.sleep(1.1)  # audit stamps have whole seconds
    reg.promote("v2")
    promoted = [datetime.fromisoformat(e.at) for e in reg.history() if e.action == "promote"]
    vmap = VersionMap.from_registry(reg)
    assert vmap.version_of("registry", promoted[0]) == "v1"  # the live stable name
    assert vmap.version_of("registry", promoted[1] + timedelta(minutes=5)) == "v2"
    assert vmap.version_of("registry", promoted[0] - timedelta(days=1)) is None
    assert vmap.version_of("b", promoted[0]) == "v2"  # the local: folder name
    assert vmap.version_of("someone-else", promoted[1]) is None
    routed = runs("router:tagline-v1|tagline-v2", 3, round_model="tagline-v1")
    assert {answered_by(t) for t in routed} == {"tagline-v1"}
    report = monitor([*routed, *runs("other-model", 4)], reg)
    assert report.unattributed == {"other-model": 4}
    assert report.stats_of("v1").runs == 3  # type: ignore[union-attr]


def test_a_breaching_canary_candidate_is_held_not_rolled_back(tmp_path: Path):
    reg = registry(tmp_path)
    reg.rollback(reason="back to v1 for the canary")
    canary = runs("router:tagline-v1|tagline-v2", 40, passed=10, round_model="tagline-v2")
    served = runs("router:tagline-v1|tagline-v2", 40, round_model="tagline-v1")
    report = monitor([*served, *canary], reg, version="v2", baseline="v1")
    assert report.verdict == "breach" and report.action == "hold"
    assert reg.current is not None and reg.current.version == "v1"


def test_cli_prints_the_table_rolls_back_and_writes_the_plot(tmp_path: Path):
    reg = registry(tmp_path)
    log_of(tmp_path, runs("tagline-v1", 60, errors=1), runs("tagline-v2", 50, errors=20))
    args = ["monitor", "--trajectories", str(tmp_path / "trajectories"),
            "--registry", str(reg.root), "--plot", str(tmp_path / "monitor.png")]
    kept = runner.invoke(app, [*args, "--no-rollback", "--json", str(tmp_path / "m.json")])
    assert kept.exit_code == 1 and "--no-rollback: the registry was not changed" in kept.output
    assert json.loads((tmp_path / "m.json").read_text())["breaches"][0]["metric"] == "error_rate"
    assert reg.current is not None and reg.current.version == "v2"
    result = runner.invoke(app, args)
    assert result.exit_code == 1, result.output
    rows = [line.split() for line in result.output.splitlines()
            if line.split()[:1] in (["v1"], ["v2"])]
    assert [(r[0], r[2], r[3]) for r in rows] == [
        ("v1", "60", "1.7%"), ("v2", "50", "40.0%")]
    assert "Versions: v2 checked against v1" in result.output
    assert "verdict: breach" in result.output and "rolled back v2 -> v1" in result.output
    assert reg.current.version == "v1"
    assert (tmp_path / "monitor.png").stat().st_size > 5000
    again = runner.invoke(app, args)  # v1 is current now and has no earlier version
    assert again.exit_code == 0 and "verdict: no baseline" in again.output


def test_cli_refuses_a_missing_log_and_bad_numbers(tmp_path: Path):
    reg = registry(tmp_path)
    missing = runner.invoke(app, ["monitor", "--trajectories", str(tmp_path / "nowhere"),
                                  "--registry", str(reg.root)])
    assert missing.exit_code == 2 and "no trajectory log" in missing.stderr
    bad = runner.invoke(app, ["monitor", "--trajectories", str(tmp_path),
                              "--registry", str(reg.root), "--window", "0"])
    assert bad.exit_code == 2 and "--window" in bad.stderr
