"""Review through LangSmith, offline: a real HTTP server on 127.0.0.1 serves the few endpoints
of annotation queues and feedback that ``langsmith.Client`` calls (no mock of the client)."""

from __future__ import annotations

import json
import threading
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlparse

import pytest
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

STAMP = "2026-01-01T00:00:00+00:00"


class FakeLangSmith:
    """Annotation queues and feedback, kept in memory, over HTTP."""

    def __init__(self) -> None:
        self.queues: dict[str, dict] = {}
        self.queued: dict[str, list[str]] = {}
        self.feedback: list[dict] = []
        self.refuse_adds = False
        self.lock = threading.Lock()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def _reply(self, code: int = 200, payload: object = None) -> None:
                body = json.dumps({} if payload is None else payload).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def _body(self) -> Any:
                return json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0))
                                  or b"{}")

            def do_GET(self):
                url = urlparse(self.path)
                query = parse_qs(url.query)
                offset = int(query.get("offset", ["0"])[0])
                with outer.lock:
                    if url.path.endswith("/info"):
                        return self._reply(200, {"version": "test"})
                    if url.path.rstrip("/").endswith("/annotation-queues"):
                        names = query.get("name")
                        found = [q for q in outer.queues.values()
                                 if not names or q["name"] in names]
                        return self._reply(200, found[offset:])
                    if url.path.rstrip("/").endswith("/feedback"):
                        runs, keys = set(query.get("run", [])), set(query.get("key", []))
                        found = [f for f in outer.feedback if (not runs or f["run_id"] in runs)
                                 and (not keys or f["key"] in keys)]
                        return self._reply(200, found[offset:])
                self._reply(404, {"detail": "not found"})

            def do_POST(self):
                path = urlparse(self.path).path.rstrip("/")
                body = self._body()
                with outer.lock:
                    if path.endswith("/annotation-queues"):
                        queue = {"id": body["id"], "name": body["name"],
                                 "description": body.get("description"),
                                 "rubric_instructions": body.get("rubric_instructions"),
                                 "tenant_id": str(uuid.UUID(int=1)), "created_at": STAMP,
                                 "updated_at": STAMP}
                        outer.queues[body["id"]] = queue
                        return self._reply(200, queue)
                    if path.endswith("/runs") and "/annotation-queues/" in path:
                        if outer.refuse_adds:
                            return self._reply(403, {"detail": "forbidden"})
                        queue_id = path.split("/")[-2]
                        outer.queued.setdefault(queue_id, []).extend(body)
                        return self._reply(200, {})
                self._reply(404, {"detail": "not found"})

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def give(self, run_id: str, key: str, *, score=None, value=None, comment=None,
             user: str = "ana", at: str = STAMP) -> None:
        with self.lock:
            self.feedback.append({
                "id": str(uuid.uuid4()), "created_at": at, "modified_at": at, "run_id": run_id,
                "trace_id": None, "key": key, "score": score, "value": value,
                "comment": comment, "feedback_source": {"type": "app", "user_name": user}})


@pytest.fixture
def server():
    fake = FakeLangSmith()
    yield fake
    fake.server.shutdown()


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
