"""``agentic-loop monitor`` reports the judge against people: the table per judge and version,
exit code 1 on the alarm (and 0 when the judge agrees), --min-labels, --json, no labels, a
registry with no current version (the judge is still checked), and the strata: random labels
decide, edge-case labels are shown apart and never alarm."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Literal

from distill_helpers import tagline_registry
from typer.testing import CliRunner

from agentic_loop.cli import app
from agentic_loop.distill.release.monitor import MonitorSettings, monitor
from agentic_loop.distill.release.registry import Registry
from agentic_loop.judges import Feature, Rubric
from agentic_loop.trajectories import ReviewLabel, Round, Trajectory, TrajectoryLog

runner = CliRunner(env={"COLUMNS": "200"})  # every column shown


def add_runs(log: TrajectoryLog, model: str, n: int, *, judge: str | None, agrees: bool,
             label: bool = True, drawn: Literal["random", "edge"] | None = None) -> None:
    """``n`` healthy runs of ``model``; a person rates each 1-5 (cycling) and accepts 3 and up.
    An agreeing judge scores 2 * rating and accepts the same; a disagreeing one scores the
    reverse and accepts ratings 1-3 (so both judges pass 60% of runs and score 6 on average:
    the versions stay healthy, only the judge is off)."""
    for i in range(n):
        human = 1 + i % 5
        score = 2.0 * human if agrees else 12.0 - 2.0 * human
        t = Trajectory(architecture="reflection", model_id=model, task=f"task {i}",
                       rounds=[Round(iteration=0, draft="d", score=score, judge=judge,
                                     model=model)],
                       final_output="d", final_score=score,
                       accepted=human >= 3 if agrees else human <= 3,
                       latency_s=1.0)
        log.append(t)
        if label:
            log.record_review(ReviewLabel(trajectory_id=t.id, rating=human, drawn=drawn,
                                          verdict="accept" if human >= 3 else "reject"))


def args(tmp_path: Path, reg: Registry, *extra: str) -> list[str]:
    return ["monitor", "--trajectories", str(tmp_path / "traj"), "--registry", str(reg.root),
            "--plot", str(tmp_path / "m.png"), "--no-rollback", *extra]


def agreement_rows(output: str) -> list[list[str]]:
    """The agreement table's rows (judge, version, random labels, ratings, spearman, kappa,
    edge labels, edge spearman, edge kappa, score, status)."""
    return [line.split() for line in output.splitlines()
            if line.split()[:1] in (["good-judge"], ["bad-judge"])
            and line.split()[1] in ("v1", "v2", "-")]


def test_a_disagreeing_judge_exits_1_and_only_its_row_breaches(tmp_path: Path):
    reg = tagline_registry(tmp_path)
    log = TrajectoryLog(tmp_path / "traj")
    add_runs(log, "tagline-v1", 40, judge="good-judge", agrees=True)
    add_runs(log, "tagline-v2", 40, judge="bad-judge", agrees=False)
    result = runner.invoke(app, args(tmp_path, reg, "--json", str(tmp_path / "m.json")))
    assert result.exit_code == 1, result.output
    assert "verdict: healthy" in result.output  # the versions are fine: the judge is not
    assert "Judge vs people" in result.output
    assert agreement_rows(result.output) == [  # by judge, then version
        ["bad-judge", "v2", "40", "40", "-1.00", "-0.67", "0", "-", "-", "final", "breach"],
        ["good-judge", "v1", "40", "40", "1.00", "1.00", "0", "-", "-", "final", "agrees"]]
    assert "judge alarm: judge bad-judge on v2 disagrees with people" in result.output
    assert reg.current is not None and reg.current.version == "v2"  # the alarm rolls nothing back
    saved = json.loads((tmp_path / "m.json").read_text())["agreement"]
    assert [(r["judge"], r["breached"]) for r in saved["rows"]] == [
        ("bad-judge", True), ("good-judge", False)]


def test_an_agreeing_judge_exits_0(tmp_path: Path):
    reg = tagline_registry(tmp_path)
    log = TrajectoryLog(tmp_path / "traj")
    add_runs(log, "tagline-v1", 40, judge="good-judge", agrees=True)
    add_runs(log, "tagline-v2", 40, judge="good-judge", agrees=True)
    result = runner.invoke(app, args(tmp_path, reg))
    assert result.exit_code == 0, result.output
    assert [r[-1] for r in agreement_rows(result.output)] == ["agrees", "agrees"]
    assert "judge alarm" not in result.output


def test_min_labels_and_threshold_options(tmp_path: Path):
    reg = tagline_registry(tmp_path)
    log = TrajectoryLog(tmp_path / "traj")
    add_runs(log, "tagline-v1", 40, judge="good-judge", agrees=True)
    add_runs(log, "tagline-v2", 40, judge="bad-judge", agrees=False)
    held = runner.invoke(app, args(tmp_path, reg, "--min-labels", "50"))
    assert held.exit_code == 0, held.output
    assert [r[4:] for r in agreement_rows(held.output)] == [
        ["-1.00", "-0.67", "0", "-", "-", "final", "too", "few", "labels"],
        ["1.00", "1.00", "0", "-", "-", "final", "too", "few", "labels"]]
    assert "10 more needed" in held.output
    lenient = runner.invoke(app, args(tmp_path, reg, "--agreement-threshold", "-1"))
    assert lenient.exit_code == 0, lenient.output
    bad = runner.invoke(app, args(tmp_path, reg, "--agreement-threshold", "2"))
    assert bad.exit_code == 2 and "--agreement-threshold" in bad.stderr
    zero = runner.invoke(app, args(tmp_path, reg, "--min-labels", "0"))
    assert zero.exit_code == 2 and "--min-labels" in zero.stderr


def test_no_labels_says_so_and_is_no_error(tmp_path: Path):
    reg = tagline_registry(tmp_path)
    log = TrajectoryLog(tmp_path / "traj")
    add_runs(log, "tagline-v1", 40, judge="good-judge", agrees=True, label=False)
    add_runs(log, "tagline-v2", 40, judge="bad-judge", agrees=False, label=False)
    result = runner.invoke(app, args(tmp_path, reg))
    assert result.exit_code == 0, result.output
    assert "judge vs people: no labelled run with a judge" in result.output
    assert "agentic-loop review" in result.output and agreement_rows(result.output) == []


def test_no_current_version_still_checks_the_judge(tmp_path: Path):
    """A log of a plain model and no registry: no version to watch, the judge is still checked."""
    log = TrajectoryLog(tmp_path / "traj")
    add_runs(log, "some-model", 30, judge="bad-judge", agrees=False)
    empty = Registry(tmp_path / "nothing-here")
    report = monitor(log, empty, settings=MonitorSettings(min_labels=25))
    assert report.verdict == "no version" and report.agreement is not None
    assert report.agreement.raised and report.agreement.rows[0].version is None
    result = runner.invoke(app, args(tmp_path, empty))
    assert result.exit_code == 1, result.output
    assert "verdict: no version" in result.output and "plot:" not in result.output
    assert agreement_rows(result.output) == [
        ["bad-judge", "-", "30", "30", "-1.00", "-0.67", "0", "-", "-", "final", "breach"]]


def test_the_strata_and_the_score_used_are_shown_and_edge_cases_never_alarm(tmp_path: Path):
    """Random labels of an agreeing judge, and edge-case labels where the same judge looks
    reversed (a restricted range near its line): exit 0, the edge count and statistics shown."""
    reg = tagline_registry(tmp_path)
    log = TrajectoryLog(tmp_path / "traj")
    add_runs(log, "tagline-v1", 25, judge="good-judge", agrees=True, drawn="random")
    add_runs(log, "tagline-v1", 30, judge="good-judge", agrees=False, drawn="edge")
    result = runner.invoke(app, args(tmp_path, reg))
    assert result.exit_code == 0, result.output
    assert agreement_rows(result.output) == [
        ["good-judge", "v1", "25", "25", "1.00", "1.00", "30", "-1.00", "-0.67", "final",
         "agrees"]]
    assert "30 edge-case labels (not a random draw, they never raise the alarm): spearman " \
           "-1.00, kappa -0.67" in " ".join(result.output.split())
    narrow = runner.invoke(app, args(tmp_path, reg), env={"COLUMNS": "80"})
    assert max(len(line) for line in narrow.output.splitlines()
               if line.startswith(" good-judge")) <= 80
    assert "random" in narrow.output and "edge" in narrow.output  # the strata, even at 80


def test_the_judges_own_part_breaches_where_the_checks_carry_the_final_score(tmp_path: Path):
    """The checks decide the final score (and agree with people); the judged features say the
    opposite: the alarm fires on the judged part, and the table says so (score: judged)."""
    reg = tagline_registry(tmp_path)
    log = TrajectoryLog(tmp_path / "traj")
    judged = [Feature(f"judged_{k}", f"Judged trait {k}.", 0.1) for k in range(4)]
    rubric = Rubric.for_constraints(exact_words=5, features=judged)
    for i in range(30):
        human = 1 + i % 5
        values = {"exact_words": 10 - human, **{f.name: k < 5 - human
                                                 for k, f in enumerate(judged)}}
        score = rubric.score(values)
        t = Trajectory(architecture="reflection", model_id="tagline-v1", task=f"task {i}",
                       rubric=rubric.to_dict(), final_output="d", final_score=score,
                       accepted=human >= 3, latency_s=1.0,
                       rounds=[Round(iteration=0, draft="d", score=score, features=values,
                                     judge="bad-judge", model="tagline-v1")])
        log.append(t)
        log.record_review(ReviewLabel(trajectory_id=t.id, rating=human, drawn="random",
                                      verdict="accept" if human >= 3 else "reject"))
    result = runner.invoke(app, args(tmp_path, reg))
    assert result.exit_code == 1, result.output
    [row] = agreement_rows(result.output)
    assert row[:4] == ["bad-judge", "v1", "30", "30"] and float(row[4]) < -0.9
    assert row[-2:] == ["judged", "breach"]
    assert "runs recorded no judged part" not in result.output
