"""Review through LangSmith, offline: a real HTTP server on 127.0.0.1 (the suite's fake
LangSmith, ``tests/fake_langsmith.py``) serves the few endpoints of annotation queues and
feedback that ``langsmith.Client`` calls (no mock of the client)."""

from __future__ import annotations

import uuid

import pytest
from fake_langsmith import FakeLangSmith
from langsmith import Client
from typer.testing import CliRunner

from agentic_loop.cli import app
from agentic_loop.distill.review import (
    LANGSMITH_RUN_KEY,
    ReviewPick,
    ReviewQueue,
    pull_labels,
    push_picks,
)
from agentic_loop.trajectories import Trajectory, TrajectoryLog


@pytest.fixture
def server():
    fake = FakeLangSmith()
    yield fake
    fake.close()


def client_of(server: FakeLangSmith) -> Client:
    return Client(api_url=server.url, api_key="test-key", auto_batch_tracing=False)


def log_runs(folder, traced: int, untraced: int) -> dict[str, Trajectory]:
    log = TrajectoryLog(folder)
    runs = {}
    for i in range(traced + untraced):
        meta = {LANGSMITH_RUN_KEY: str(uuid.UUID(int=100 + i))} if i < traced else {}
        run = Trajectory(id=f"run{i}", architecture="a", model_id="m", task=f"task {i}",
                         final_output="x", final_score=9.0, metadata=meta)
        log.append(run)
        runs[run.id] = run
    return runs


def test_picks_with_a_langsmith_run_go_to_the_annotation_queue_others_stay_local(
        tmp_path, server):
    runs = log_runs(tmp_path, traced=2, untraced=1)
    queue = ReviewQueue(tmp_path)
    picks = [ReviewPick(trajectory_id=i, reasons=["sampled"]) for i in runs]
    result = push_picks(client_of(server), queue, picks, runs)
    assert [i.trajectory_id for i in result.sent] == ["run0", "run1"]
    assert [i.trajectory_id for i in result.local] == ["run2"]
    assert "no LangSmith run id recorded" in (result.local[0].note or "")
    [created] = server.queues.values()
    assert created["name"] == "agentic-loop review" and "'accept'" in created["rubric_instructions"]
    assert server.queued == {created["id"]: [str(uuid.UUID(int=100)), str(uuid.UUID(int=101))]}
    # sampled again: nothing is sent twice, the queue is found by its name, not re-created
    again = push_picks(client_of(server), queue, picks, runs)
    assert again.already == 3 and again.sent == [] and len(server.queues) == 1
    assert sum(len(v) for v in server.queued.values()) == 2
    assert {i.destination for i in queue.items()} == {"langsmith", "local"}


def test_an_unreachable_queue_keeps_every_pick_locally_with_the_reason(tmp_path, server):
    runs = log_runs(tmp_path, traced=2, untraced=0)
    server.refuse_adds = True
    result = push_picks(client_of(server), ReviewQueue(tmp_path),
                        [ReviewPick(trajectory_id=i, reasons=["x"]) for i in runs], runs)
    assert result.sent == [] and len(result.local) == 2
    assert all("LangSmith unreachable" in (i.note or "") for i in result.local)
    assert [i.trajectory_id for i in ReviewQueue(tmp_path).pending()] == ["run0", "run1"]


def test_reviewers_feedback_comes_back_as_labels_once(tmp_path, server):
    runs = log_runs(tmp_path, traced=3, untraced=0)
    queue = ReviewQueue(tmp_path)
    push_picks(client_of(server), queue, [ReviewPick(trajectory_id=i, reasons=["x"])
                                          for i in runs], runs)
    first, second, third = (str(uuid.UUID(int=100 + i)) for i in range(3))
    server.give(first, "accept", score=0, comment="made up a policy")
    server.give(first, "rating", score=2)
    server.give(second, "accept", value="accept", user="bo")
    server.give(second, "score", score=9.0)            # the package's own feedback: not a label
    server.give(str(uuid.uuid4()), "accept", score=1)  # a run this queue never sent
    labels = pull_labels(client_of(server), queue)
    got = {label.trajectory_id: label for label in labels}
    assert set(got) == {"run0", "run1"}
    assert (got["run0"].verdict, got["run0"].rating, got["run0"].comment) == (
        "reject", 2, "made up a policy")
    assert got["run1"].verdict == "accept" and got["run1"].reviewer == "bo"
    assert all(label.source == "langsmith" for label in labels)
    assert pull_labels(client_of(server), queue) == []      # pulled already
    server.give(third, "rating", score=5)
    assert [label.trajectory_id for label in pull_labels(client_of(server), queue)] == ["run2"]
    assert queue.pending() == []
    read = {t.id: t.review for t in TrajectoryLog(tmp_path).read()}
    assert read["run0"] is not None and read["run0"].verdict == "reject"


def test_the_cli_uses_langsmith_when_it_is_configured(tmp_path, server, monkeypatch):
    log_runs(tmp_path / "traj", traced=1, untraced=1)
    monkeypatch.setenv("AGENTIC_LOOP_DATA", str(tmp_path / "data"))
    monkeypatch.delenv("LANGCHAIN_API_KEY", raising=False)
    env = {"LANGSMITH_API_KEY": "test-key", "LANGSMITH_ENDPOINT": server.url}
    runner = CliRunner()
    result = runner.invoke(app, ["review", "sample", "--trajectories", str(tmp_path / "traj"),
                                 "--fraction", "1"], env=env)
    assert result.exit_code == 0, result.output
    assert "queued: 1 local, 1 to LangSmith" in result.output
    assert "no LangSmith run id recorded" in result.output
    server.give(str(uuid.UUID(int=100)), "accept", score=1)
    pulled = runner.invoke(app, ["review", "pull", "--trajectories", str(tmp_path / "traj")],
                           env=env)
    assert pulled.exit_code == 0 and "pulled 1 new labels" in pulled.output
    monkeypatch.delenv("LANGSMITH_API_KEY", raising=False)
    refused = runner.invoke(app, ["review", "pull", "--trajectories", str(tmp_path / "traj")])
    assert refused.exit_code == 2 and "no LangSmith API key is set" in refused.stderr


def test_pulled_labels_keep_how_their_run_was_drawn(tmp_path, server):
    runs = log_runs(tmp_path, traced=2, untraced=0)
    queue = ReviewQueue(tmp_path)
    push_picks(client_of(server), queue, [ReviewPick(trajectory_id="run0", reasons=["sampled"]),
                                          ReviewPick(trajectory_id="run1",
                                                     reasons=["near_threshold"])], runs)
    server.give(str(uuid.UUID(int=100)), "rating", score=4)
    server.give(str(uuid.UUID(int=101)), "rating", score=2)
    pulled = {label.trajectory_id: label.drawn for label in pull_labels(client_of(server), queue)}
    assert pulled == {"run0": "random", "run1": "edge"}
    read = {t.id: t.review for t in TrajectoryLog(tmp_path).read()}
    assert [getattr(read[i], "drawn", None) for i in ("run0", "run1")] == ["random", "edge"]
