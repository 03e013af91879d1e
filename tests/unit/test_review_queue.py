"""The local review queue and `agentic-loop review`: queue once, list pending, label, export;
labels record how their run was drawn (random or edge case)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from agentic_loop.cli import app
from agentic_loop.distill.review import QUEUE_FILE, ReviewPick, ReviewQueue
from agentic_loop.errors import ConfigError
from agentic_loop.trajectories import ReviewLabel, Round, Trajectory, TrajectoryLog


@pytest.fixture(autouse=True)
def no_langsmith(monkeypatch, tmp_path):
    for name in ("LANGSMITH_API_KEY", "LANGCHAIN_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AGENTIC_LOOP_DATA", str(tmp_path / "data"))


def logged(folder: Path, n: int = 60) -> list[Trajectory]:
    log = TrajectoryLog(folder)
    runs = []
    for i in range(n):
        score = 8.1 if i == 3 else 9.5
        run = Trajectory(id=f"{i:02d}abcdef{i:02d}", architecture="reflection", model_id="m",
                         task=f"Answer the customer's question number {i} politely.",
                         final_output=f"answer {i}", final_score=score, accepted=True,
                         feedback="down" if i == 5 else None,
                         rounds=[Round(iteration=0, draft=f"answer {i}", score=score,
                                       passed=True, judge="judge-model")])
        log.append(run)
        runs.append(run)
    return runs


def test_a_run_is_queued_once_and_pending_is_queued_minus_labelled(tmp_path):
    logged(tmp_path)
    queue = ReviewQueue(tmp_path)
    picks = [ReviewPick(trajectory_id="03abcdef03", reasons=["near_threshold"], score=8.1),
             ReviewPick(trajectory_id="05abcdef05", reasons=["thumbs_down"])]
    assert [i.trajectory_id for i in queue.add(picks)] == ["03abcdef03", "05abcdef05"]
    assert queue.add(picks) == [] and queue.add(picks[:1] * 3) == []
    assert len(queue.path.read_text().splitlines()) == 2 and queue.path.name == QUEUE_FILE
    queue.label("05abcd", verdict="reject", comment="rude")      # a unique prefix will do
    assert [i.trajectory_id for i in queue.pending()] == ["03abcdef03"]
    run = {t.id: t for t in TrajectoryLog(tmp_path).read()}["05abcdef05"]
    assert run.review is not None and run.review.verdict == "reject"
    assert run.review.comment == "rude" and run.review.source == "local"


def test_labelling_an_unknown_or_ambiguous_id_names_it(tmp_path):
    logged(tmp_path)
    queue = ReviewQueue(tmp_path)
    with pytest.raises(ConfigError, match="no run 'nosuchrun'"):
        queue.label("nosuchrun", verdict="accept")
    with pytest.raises(ConfigError, match="'0' in"):           # too short to be a prefix
        queue.label("0", verdict="accept")
    TrajectoryLog(tmp_path).append(Trajectory(id="03abcdef03-again", architecture="a",
                                              model_id="m", task="t", final_output="x"))
    with pytest.raises(ConfigError, match="matches 2 runs"):
        queue.label("03abcdef0", verdict="accept")
    with pytest.raises(ConfigError, match="rating=9"):
        queue.label("03abcdef03", rating=9)
    with pytest.raises(ConfigError, match="give a verdict"):
        queue.label("03abcdef03")
    assert TrajectoryLog(tmp_path).reviews() == []


def test_the_cli_samples_lists_labels_and_exports(tmp_path):
    runs = logged(tmp_path / "traj")
    runner = CliRunner()
    sampled = runner.invoke(app, ["review", "sample", "--trajectories", str(tmp_path / "traj"),
                                  "--fraction", "0.05"])
    assert sampled.exit_code == 0, sampled.output
    assert "near_threshold" in sampled.output and "thumbs_down" in sampled.output
    # 3 edge cases fill the 5% budget of 3; half the budget is still drawn at random
    assert "queued: 4 local, 0 to LangSmith" in sampled.output
    again = runner.invoke(app, ["review", "sample", "--trajectories", str(tmp_path / "traj"),
                                "--fraction", "0.05"])
    assert "queued: 0 local" in again.output and "4 already queued" in again.output

    listed = runner.invoke(app, ["review", "list", "--trajectories", str(tmp_path / "traj")],
                           env={"COLUMNS": "200"})
    assert listed.exit_code == 0 and "Pending reviews: 4" in listed.output
    assert "03abcdef03" in listed.output and "question number 3" in listed.output

    label = runner.invoke(app, ["review", "label", "--trajectories", str(tmp_path / "traj"),
                                "03abcdef03", "--reject", "--rating", "2", "--comment",
                                "wrong refund amount"])
    assert label.exit_code == 0, label.output
    assert "labelled 03abcdef03: reject, rating 2, a comment" in label.output
    listed = runner.invoke(app, ["review", "list", "--trajectories", str(tmp_path / "traj")])
    assert "Pending reviews: 3" in listed.output

    unknown = runner.invoke(app, ["review", "label", "--trajectories", str(tmp_path / "traj"),
                                  "zzzzzzzz", "--accept"])
    assert unknown.exit_code == 2 and "no run 'zzzzzzzz'" in unknown.stderr

    out = tmp_path / "labels.jsonl"
    exported = runner.invoke(app, ["review", "export", "--trajectories", str(tmp_path / "traj"),
                                   "--out", str(out)])
    assert exported.exit_code == 0 and "wrote 1 labels" in exported.output
    [row] = [json.loads(line) for line in out.read_text().splitlines()]
    assert row["trajectory_id"] == runs[3].id and row["verdict"] == "reject"
    assert row["rating"] == 2 and row["judge"] == "judge-model" and row["final_score"] == 8.1
    assert row["drawn"] == "edge"                       # picked near the threshold
    # the file holds a comment: forget must find it
    places = (tmp_path / "traj" / "places.jsonl").read_text()
    assert str(out) in places


def test_the_cli_refuses_a_folder_without_a_log(tmp_path):
    result = CliRunner().invoke(app, ["review", "list", "--trajectories", str(tmp_path / "no")])
    assert result.exit_code == 2 and "no trajectory log at" in result.stderr
    assert not (tmp_path / "no").exists()


def test_labels_made_from_the_queue_say_how_their_run_was_drawn(tmp_path):
    logged(tmp_path)
    queue = ReviewQueue(tmp_path)
    queue.add([ReviewPick(trajectory_id="03abcdef03", reasons=["near_threshold"], score=8.1),
               ReviewPick(trajectory_id="05abcdef05", reasons=["thumbs_down", "guard_flags"]),
               ReviewPick(trajectory_id="07abcdef07", reasons=["sampled"], score=9.5)])
    assert [i.drawn for i in queue.items()] == ["edge", "edge", "random"]
    assert queue.label("03abcdef03", rating=4).drawn == "edge"
    assert queue.label("05abcdef05", verdict="reject").drawn == "edge"
    assert queue.label("07abcdef07", verdict="accept", rating=5).drawn == "random"
    assert queue.label("09abcdef09", rating=3).drawn is None     # never queued
    log = TrajectoryLog(tmp_path)
    # a later label without the draw (a note recorded elsewhere) keeps the run's stratum
    log.record_review(ReviewLabel(trajectory_id="03abcdef03", comment="close call"))
    read = {t.id: t.review for t in log.read() if t.review is not None}
    assert {i: r.drawn for i, r in read.items()} == {
        "03abcdef03": "edge", "05abcdef05": "edge", "07abcdef07": "random", "09abcdef09": None}
    assert read["03abcdef03"].comment == "close call" and read["03abcdef03"].rating == 4
