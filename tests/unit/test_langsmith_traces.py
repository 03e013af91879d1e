"""LangSmith traces, offline: a collector on 127.0.0.1 (the suite's fake LangSmith,
``tests/fake_langsmith.py``) stands in for the LangSmith API."""

from __future__ import annotations

import operator
import os
import socket
import subprocess
import sys
import textwrap
import time
from typing import Annotated

import pytest
from fake_langsmith import FakeLangSmith
from langchain_core.tracers import LangChainTracer
from langgraph.graph import END, START, StateGraph
from langsmith import Client
from typing_extensions import TypedDict

from agentic_loop.architectures import Reflection
from agentic_loop.architectures.tracing import flush_feedback
from agentic_loop.judges import Feature, Rubric
from agentic_loop.testing import ScriptedChatModel
from agentic_loop.trajectories import Round


@pytest.fixture
def collector():
    c = FakeLangSmith()
    yield c
    c.close()


def test_every_node_is_a_named_run_with_tags_and_metadata(collector):
    client = Client(api_url=collector.url, api_key="test-key", auto_batch_tracing=False)
    tracer = LangChainTracer(client=client, project_name="agentic-loop-tests")
    rubric = Rubric([Feature("short", "At most 3 words.", 3.0,
                             check=lambda t, o: len(o.split()) <= 3),
                     Feature("friendly", "It sounds friendly.", 1.0, kind="bool")])
    llm = ScriptedChatModel(responses=["Hello there my dear friend", "Hi friend"],
                            default_structured={"friendly": True, "overall_score": 8})
    arch = Reflection(llm, rubric=rubric, target_score=9.0, max_iterations=3)
    result = arch.run("Greet me briefly.", config={"callbacks": [tracer]})
    tracer.wait_for_futures()
    assert result.ok and result.output == "Hi friend"

    runs = list(collector.runs.values())
    by_name: dict[str, list[dict]] = {}
    for run in runs:
        by_name.setdefault(run["name"], []).append(run)
    assert "reflection" in by_name  # the graph's root run
    assert len(by_name["generate"]) == 1
    assert len(by_name["critique"]) == 2 and len(by_name["refine"]) == 1
    assert len(by_name["finalize"]) == 1
    for node in ("generate", "critique", "refine", "finalize"):
        for run in by_name[node]:
            assert {"agentic-loop", "arch:reflection", f"node:{node}"} <= set(run["tags"])
            meta = run["extra"]["metadata"]
            assert meta["architecture"] == "reflection" and meta["node"] == node
            assert "iteration" in meta
    critiques = sorted(by_name["critique"], key=lambda r: r["extra"]["metadata"]["score"])
    first, second = critiques
    assert first["extra"]["metadata"]["features"] == {"short": False, "friendly": True}
    assert second["extra"]["metadata"]["features"] == {"short": True, "friendly": True}
    assert second["extra"]["metadata"]["score"] == 10.0
    assert by_name["refine"][0]["extra"]["metadata"]["iteration"] == 1
    assert by_name["finalize"][0]["extra"]["metadata"]["score"] == 10.0
    # model calls are traced too, under their nodes
    assert any(r.get("run_type") == "llm" for r in runs)
    # the verdict is feedback on the graph's root run, so LangSmith can filter runs by it
    assert flush_feedback(30)
    (root,) = by_name["reflection"]
    assert _feedback_on(collector, root["id"]) == {"score": 10.0, "passed": 1.0}
    assert {f["trace_id"] for f in collector.feedback} == {root["id"]}
    assert {f["session_id"] for f in collector.feedback} == {
        collector.projects["agentic-loop-tests"]}


def _feedback_on(collector: FakeLangSmith, run_id: str) -> dict[str, float]:
    return {f["key"]: f["score"] for f in collector.feedback if f["run_id"] == run_id}


class AppState(TypedDict, total=False):
    task: str
    final: Round
    log: Annotated[list[str], operator.add]


def test_a_subgraph_keeps_its_tags_on_every_run_and_gets_its_feedback(collector):
    client = Client(api_url=collector.url, api_key="test-key", auto_batch_tracing=False)
    tracer = LangChainTracer(client=client, project_name="agentic-loop-subgraph")
    rubric = Rubric([Feature("short", "At most 3 words.", 3.0,
                             check=lambda t, o: len(o.split()) <= 3),
                     Feature("friendly", "It sounds friendly.", 1.0, kind="bool")])
    llm = ScriptedChatModel(responses=["Hello there my dear friend", "Hello my dear friend"],
                            default_structured={"friendly": True, "overall_score": 8})
    app = StateGraph(AppState)
    app.add_node("prepare", lambda s: {"log": ["prepared"]})
    app.add_node("writer", Reflection(llm, rubric=rubric, target_score=9.0,
                                      max_iterations=2).build())
    app.add_edge(START, "prepare")
    app.add_edge("prepare", "writer")
    app.add_edge("writer", END)
    # the user's graph, run the user's way: none of our run config is applied
    out = app.compile(name="my_app").invoke({"task": "Greet me briefly."},
                                            {"callbacks": [tracer]})
    tracer.wait_for_futures()
    assert out["final"].draft == "Hello there my dear friend" and out["log"] == ["prepared"]
    assert flush_feedback(30)

    runs = list(collector.runs.values())
    by_name: dict[str, list[dict]] = {}
    for run in runs:
        by_name.setdefault(run["name"], []).append(run)
    (app_run,), (node_run,) = by_name["my_app"], by_name["writer"]  # the user's runs
    for run in (app_run, node_run):
        assert not any(t.startswith("arch:") for t in run.get("tags") or [])  # not leaked up
    (graph_run,) = by_name["reflection"]  # our graph's own run, under the user's node
    assert graph_run["parent_run_id"] == node_run["id"]
    llm_runs = [r for r in runs if r.get("run_type") == "llm"]
    judge_runs = [r for r in runs if "judge" in (r.get("tags") or [])]
    assert len(llm_runs) == 2 and len(judge_runs) == 2  # two drafts, two judgements
    for run in [graph_run, *llm_runs, *judge_runs, *by_name["finalize"]]:
        assert {"agentic-loop", "arch:reflection"} <= set(run["tags"]), run["name"]
        meta = run["extra"]["metadata"]
        assert meta["architecture"] == "reflection" and meta["model_id"] == llm.model_id
        assert meta["package"] == "agentic-loop" and meta["package_version"]
    # the verdict goes on our graph's run, not on the user's
    assert _feedback_on(collector, graph_run["id"]) == {"score": 2.5, "passed": 0.0}
    assert {f["run_id"] for f in collector.feedback} == {graph_run["id"]}


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_tracing_on_with_no_server_does_not_stall_the_app(tmp_path):
    script = tmp_path / "app.py"
    script.write_text(textwrap.dedent("""
        import time
        from agentic_loop.architectures import Reflection
        from agentic_loop.judges import Rubric
        from agentic_loop.testing import ScriptedChatModel
        arch = Reflection(ScriptedChatModel(default="Hi"),
                          rubric=Rubric.for_constraints(exact_words=1))
        result = arch.run("Greet me in one word.")
        assert result.ok and result.output == "Hi", result
        print("DONE_AT", time.time())
    """))
    env = {**os.environ, "LANGSMITH_TRACING": "true", "LANGSMITH_API_KEY": "test-key",
           "LANGSMITH_ENDPOINT": f"http://127.0.0.1:{_closed_port()}"}
    proc = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True,
                          timeout=120)
    exited_at = time.time()
    assert proc.returncode == 0, proc.stderr[-2000:]
    # from the run's end to the process's exit: the interpreter's start, which a loaded
    # machine slows, is not counted
    exit_s = exited_at - float(proc.stdout.split("DONE_AT")[1])
    # the unreachable server costs at most a few seconds at exit, never the app's runtime
    assert exit_s < 15.0, f"exit took {exit_s:.1f}s after the run finished"
