"""``langgraph dev`` serves the three graphs of ``langgraph.json``; the SDK runs a task on each.

The in-memory LangGraph server (langgraph-cli[inmem], in the dev extra) runs
offline on 127.0.0.1 with the embedded model, and each graph gets one tiny
run through ``langgraph_sdk``: one draft of at most 16 tokens, judged by a
check only (the run's context sets the constraint and the budget), so the
test costs one model load plus three short generations. What ArchiveRefine
accepts lands in the server's store, through the vector index that
``langgraph.json`` configures.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from agentic_loop.graphs import GRAPHS
from agentic_loop.trajectories import TrajectoryLog, hash_user_id

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
CONFIG = ROOT / "langgraph.json"
STARTUP_TIMEOUT_S = 180.0


def _langgraph_cli() -> str:
    found = Path(sys.executable).with_name("langgraph")
    path = str(found) if found.is_file() else shutil.which("langgraph")
    if path is None:
        pytest.fail("the langgraph CLI is missing: install the dev extra "
                    "(pip install -e '.[dev]', which brings langgraph-cli[inmem])")
    return path


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_until_up(url: str, proc: subprocess.Popen[bytes], log: Path) -> float:
    import httpx

    started = time.perf_counter()
    while time.perf_counter() - started < STARTUP_TIMEOUT_S:
        if proc.poll() is not None:
            pytest.fail(f"langgraph dev exited with {proc.returncode}:\n"
                        f"{log.read_text(errors='replace')[-3000:]}")
        try:
            if httpx.get(f"{url}/ok", timeout=2.0).status_code == 200:
                return time.perf_counter() - started
        except httpx.HTTPError:
            pass
        time.sleep(0.5)
    pytest.fail(f"langgraph dev did not answer within {STARTUP_TIMEOUT_S:.0f}s:\n"
                f"{log.read_text(errors='replace')[-3000:]}")


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory):
    """``langgraph dev`` on a free loopback port, in its own process group; stopped after."""
    work = tmp_path_factory.mktemp("langgraph_dev")
    # the repo's config, run from a scratch dir (the dev server keeps its state in
    # ./.langgraph_api): the paths it names are relative to the repo root
    config = json.loads(CONFIG.read_text())
    index = config["store"]["index"]
    index["embed"] = str(ROOT / index["embed"])
    (work / "langgraph.json").write_text(json.dumps(config))
    port = _free_port()
    log = work / "server.log"
    env = {**os.environ, "AGENTIC_LOOP_MODEL": "local", "AGENTIC_LOOP_MAX_TOKENS": "16",
           "AGENTIC_LOOP_DATA": str(work / "data"), "LANGSMITH_TRACING": "false",
           "LANGGRAPH_CLI_NO_ANALYTICS": "1"}
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [_langgraph_cli(), "dev", "--no-browser", "--no-reload", "--host", "127.0.0.1",
             "--port", str(port), "--config", str(work / "langgraph.json")],
            cwd=work, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        startup_s = _wait_until_up(url, proc, log)
        yield {"url": url, "data": work / "data", "startup_s": startup_s, "log": log}
    finally:
        os.killpg(proc.pid, signal.SIGTERM)  # the group this fixture started, by its id
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=30)


def test_langgraph_dev_serves_all_three_graphs(server):
    from langgraph_sdk import get_sync_client

    client = get_sync_client(url=server["url"])
    timings = {"startup_s": round(server["startup_s"], 1)}
    outputs: dict[str, dict] = {}
    for name in GRAPHS:
        (assistant,) = client.assistants.search(graph_id=name)
        schemas = client.assistants.get_schemas(assistant["assistant_id"])
        assert schemas["input_schema"]["required"] == ["task"]
        assert {"thread_id", "user_id"} <= set(schemas["input_schema"]["properties"])
        assert {"output", "score", "passed", "features", "stop_reason", "iterations"} <= set(
            schemas["output_schema"]["properties"])
        assert set(schemas["context_schema"]["properties"]) == {
            "constraints", "target_score", "max_iterations", "samples_per_round", "temperature",
            "max_steps", "episode_timeout_s", "user_sim"}

        thread = client.threads.create()
        started = time.perf_counter()
        out = client.runs.wait(
            thread["thread_id"], name,
            input={"task": "Name three colors.", "user_id": "alice", "thread_id": f"t-{name}"},
            context={"constraints": {"word_count": [1, 60]}, "max_iterations": 1})
        timings[name] = round(time.perf_counter() - started, 1)
        outputs[name] = out
        assert out["errors"] == [], (name, out["errors"])
        assert out["iterations"] == 1 and isinstance(out["output"], str) and out["output"]
        assert list(out["features"]) == ["word_count"]  # the context's rubric, checks only
        assert out["stop_reason"] in {"target", "max_iterations"}
        assert out["score"] == (10.0 if out["passed"] else 0.0)

    # ArchiveRefine keeps what it accepts in the server's store (vector index from
    # langgraph.json), not on this process's disk
    accepted = outputs["archive_refine"]
    assert accepted["archived"] == accepted["passed"]
    stored = client.store.search_items(("archive",), query="Name three colors.")["items"]
    assert [item["value"]["output"] for item in stored] == (
        [accepted["output"]] if accepted["archived"] else [])

    # served runs are logged like any other: the training loop's input
    logged = {t.architecture: t for t in TrajectoryLog(server["data"] / "trajectories").read()}
    assert set(logged) == set(GRAPHS)
    for name, trajectory in logged.items():
        assert trajectory.user_id_hash == hash_user_id("alice")
        assert trajectory.metadata["thread_id"] == f"t-{name}"
        assert len(trajectory.rounds) == 1
    print("langgraph dev timings (s):", timings, "archived:", accepted["archived"])
