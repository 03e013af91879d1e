"""The graphs' input, output and context schemas, and the served-graph module (no weights)."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
from langgraph.graph import END, START, StateGraph
from pydantic import ValidationError
from typing_extensions import TypedDict

from agentic_loop.architectures import ArchiveRefine, Reflection, Reflexion
from agentic_loop.architectures.schemas import RunSettings
from agentic_loop.architectures.settings import resolve_settings
from agentic_loop.errors import ConfigError
from agentic_loop.graphs import GRAPHS, model_settings
from agentic_loop.judges import Feature, Rubric
from agentic_loop.memory import Archive, HashingEmbedder, ReflexionMemory
from agentic_loop.testing import ScriptedChatModel
from agentic_loop.trajectories import TrajectoryLog, hash_user_id

ROOT = Path(__file__).resolve().parents[2]
ONE_WORD = Rubric.for_constraints(exact_words=1)


def test_every_architecture_shows_the_same_three_schemas(tmp_path):
    llm = ScriptedChatModel(default="one")
    archive = Archive(tmp_path / "a", embedder=HashingEmbedder())
    memory = ReflexionMemory(tmp_path / "r", embedder=HashingEmbedder())
    graphs = [Reflection(llm).build(), ArchiveRefine(llm, archive=archive).build(),
              Reflexion(llm, memory=memory).build()]
    for graph in graphs:
        given = graph.get_input_jsonschema()
        assert given["required"] == ["task"]
        assert set(given["properties"]) == {"task", "thread_id", "user_id", "consent", "metadata"}
        assert {"output", "score", "passed", "features", "stop_reason", "iterations"} <= set(
            graph.get_output_jsonschema()["properties"])
        context = graph.get_context_jsonschema()
        assert set(context["properties"]) == {"constraints", "target_score", "max_iterations",
                                              "samples_per_round", "temperature", "max_steps",
                                              "episode_timeout_s", "user_sim"}


def test_the_output_is_the_result_not_the_loops_internals():
    out = Reflection(ScriptedChatModel(responses=["two words", "one"]), rubric=ONE_WORD,
                     max_iterations=3).build().invoke({"task": "Say one word."})
    assert (out["output"], out["score"], out["passed"], out["iterations"],
            out["stop_reason"], out["features"]) == ("one", 10.0, True, 2, "target",
                                                     {"exact_words": 1})
    assert out["trajectory"].final_output == "one" and out["final"].draft == "one"
    assert not {"draft", "rounds", "iteration", "usage"} & set(out)


class BrokenFinalize(Reflection):
    def _finalize(self, state, config):
        raise OSError("disk full")


def test_a_failed_finalize_still_gives_the_output_fields_and_the_run():
    arch = BrokenFinalize(ScriptedChatModel(responses=["two words", "one"] * 2), rubric=ONE_WORD)
    out = arch.build().invoke({"task": "Say one word."})
    assert out["errors"] == ["finalize: OSError: disk full"]
    assert out["iterations"] == 2 and out["trajectory"].errors == out["errors"]
    result = arch.run("Say one word.")
    assert result.errors == ["finalize: OSError: disk full"] and result.iterations == 2


def test_the_context_sets_rubric_budget_and_target_for_one_run_only():
    llm = ScriptedChatModel(default="two words")
    arch = Reflection(llm, max_iterations=3)
    graph = arch.build()
    out = graph.invoke({"task": "Say something."},
                       context={"constraints": {"exact_words": 1}, "max_iterations": 1})
    assert out["features"] == {"exact_words": 2} and not out["passed"]
    assert out["iterations"] == 1 and out["stop_reason"] == "max_iterations"
    assert len(llm.calls) == 1  # checks-only rubric of the context: no judge call

    # the graph itself is unchanged by a run's context
    assert arch.max_iterations == 3 and arch.target_score == 8.0 and arch.rubric is None


def test_the_context_target_stops_a_run_early():
    # every check holds, the judge says "not friendly": a score below 10 that passes
    rubric = Rubric.for_constraints(
        exact_words=2, features=[Feature("friendly", "It sounds friendly.", 1.0, kind="bool")])
    llm = ScriptedChatModel(default="two words", default_structured={"friendly": False,
                                                                   "overall_score": 5})
    graph = Reflection(llm, rubric=rubric, target_score=10.0, max_iterations=3).build()
    strict = graph.invoke({"task": "Say two words."})
    assert strict["passed"] and strict["score"] < 10.0
    assert (strict["iterations"], strict["stop_reason"]) == (3, "max_iterations")
    lenient = graph.invoke({"task": "Say two words."},
                           context=RunSettings(target_score=strict["score"]))
    assert (lenient["iterations"], lenient["stop_reason"]) == (1, "target")
    settings = resolve_settings(Reflection(llm, target_score=10.0), {}, {},
                                _Runtime(RunSettings(target_score=4.0, max_iterations=2)).context)
    assert (settings.target_score, settings.max_iterations) == (4.0, 2)


@dataclass
class _Runtime:
    context: object


def test_a_bad_context_is_refused_before_the_run():
    graph = Reflection(ScriptedChatModel(default="one")).build()
    with pytest.raises(ValidationError, match="max_iterations"):
        graph.invoke({"task": "x"}, context={"max_iterations": 0})
    with pytest.raises(ValidationError, match="exact_wordz"):
        graph.invoke({"task": "x"}, context={"constraints": {"exact_wordz": 1}})
    with pytest.raises(ValidationError, match="extra"):
        graph.invoke({"task": "x"}, context={"rubric": "strict"})
    with pytest.raises(ValidationError, match="names no check"):
        RunSettings(constraints={})


def test_input_fields_reach_the_trajectory(tmp_path):
    log = TrajectoryLog(tmp_path)
    graph = Reflection(ScriptedChatModel(default="one"), rubric=ONE_WORD,
                       trajectories=log).build()
    graph.invoke({"task": "Say one word.", "user_id": "alice", "consent": True,
                  "thread_id": "t-7", "metadata": {"source": "studio"}})
    (logged,) = log.read()
    assert logged.user_id_hash == hash_user_id("alice") and logged.consent is True
    assert logged.metadata == {"source": "studio", "thread_id": "t-7"}
    assert "alice" not in json.dumps(logged.model_dump(mode="json"))


class ParentState(TypedDict, total=False):
    task: str
    output: str


@dataclass
class ParentContext:
    tenant: str


def test_a_parent_graphs_own_context_leaves_the_subgraph_settings_alone():
    inner = Reflection(ScriptedChatModel(responses=["two words", "one"]), rubric=ONE_WORD,
                       max_iterations=3).build()
    app = StateGraph(ParentState, context_schema=ParentContext)
    app.add_node("writer", inner)
    app.add_edge(START, "writer")
    app.add_edge("writer", END)
    out = app.compile().invoke({"task": "Say one word."}, context=ParentContext(tenant="acme"))
    assert out["output"] == "one"


def test_the_served_module_imports_without_torch_or_langgraph():
    code = ("import sys, agentic_loop.graphs as g; "
            "print(sorted(m for m in ('torch', 'langgraph', 'transformers') if m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60, check=True)
    assert done.stdout.strip() == "[]"


def test_langgraph_json_names_one_served_graph_per_architecture():
    graphs = json.loads((ROOT / "langgraph.json").read_text())["graphs"]
    assert tuple(graphs) == GRAPHS
    assert {spec["path"] for spec in graphs.values()} == {
        f"agentic_loop.graphs:{name}" for name in GRAPHS}


def test_model_settings_refuse_a_bad_token_cap():
    with pytest.raises(ConfigError, match="AGENTIC_LOOP_MAX_TOKENS='lots'"):
        model_settings({"AGENTIC_LOOP_MAX_TOKENS": "lots"})
    assert model_settings({"AGENTIC_LOOP_MODEL": " local:/models/v3 "}) == (
        "local:/models/v3", {})
