"""The embedded model as a tool agent through all three architectures: episodes are recorded,
with a tool step after every tool call the model made, and every run finishes."""

from __future__ import annotations

from typing import Any

import pytest

from agentic_loop.agents import tool_agent
from agentic_loop.architectures import ArchiveRefine, Reflection, Reflexion
from agentic_loop.judges import Rubric
from agentic_loop.memory import Archive, HashingEmbedder, ReflexionMemory
from agentic_loop.tools import calculator

pytestmark = pytest.mark.slow

TASK = "Use the calculator to compute 53 * 47. Answer with the number."
#: Checks only (no LLM judge calls), tiny budgets: each model call costs seconds on a CPU.
RUBRIC = Rubric.for_constraints(include_words=["2491"], tool_called="calculator")
BUDGET: dict[str, Any] = {"max_iterations": 1, "max_steps": 3, "episode_timeout_s": 240.0,
                          "temperature": 0.0, "rubric": RUBRIC}


def _assert_recorded(result: Any) -> None:
    assert result.trajectory_id is not None and result.stop_reason is not None, result.errors
    assert result.trace, result.errors
    for round_ in result.trace:
        episode = round_.episode
        assert episode is not None and episode.model_calls >= 1
        assert episode.stop_reason in ("final", "step_limit", "time_limit")
        steps = episode.steps
        for i, step in enumerate(steps):
            if step.kind == "model" and step.tool_calls and i + 1 < len(steps):
                after = steps[i + 1]
                assert after.kind == "tool" and after.name == step.tool_calls[0].name
                assert after.content or after.error
        assert round_.draft == (episode.final.strip() if episode.final else round_.draft)


def test_the_embedded_model_runs_as_a_tool_agent_in_every_architecture(local_llm, tmp_path):
    tools = [calculator]
    # the 135M model seldom opens with a call unasked: this agent graph makes its first call
    # use a tool (grammar-constrained), then lets it answer
    forced = tool_agent(local_llm, tools, first_tool_choice="any")
    archs = [
        Reflection(local_llm, tools=tools, **BUDGET),
        ArchiveRefine(forced, archive=Archive(tmp_path / "a", embedder=HashingEmbedder()),
                      **BUDGET),
        Reflexion(forced, memory=ReflexionMemory(tmp_path / "r", embedder=HashingEmbedder()),
                  **BUDGET),
    ]
    called = 0
    for arch in archs:
        assert arch.agent is not None and arch.agent.chat_model is local_llm
        result = arch.run(TASK)
        _assert_recorded(result)
        assert result.usage.llm_calls >= sum(r.episode.model_calls for r in result.trace)
        called += sum(len(r.episode.tool_steps) for r in result.trace)
    assert called >= 2  # the forced first calls of ArchiveRefine and Reflexion ran the tool
    print(f"tool steps over the three runs: {called}")
