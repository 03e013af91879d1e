"""Any agent as the generator of Reflection, ArchiveRefine and Reflexion: drafts are episodes."""

from __future__ import annotations

import json
import warnings
from typing import Any

import pytest
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.runnables import RunnableLambda
from langchain_core.tools import tool
from langchain_core.tracers.run_collector import RunCollectorCallbackHandler
from langgraph.checkpoint.memory import InMemorySaver

from agentic_loop.architectures import ArchiveRefine, Reflection, Reflexion
from agentic_loop.episodes import current_episode
from agentic_loop.judges import Feature, Rubric
from agentic_loop.memory import Archive, HashingEmbedder, ReflexionMemory
from agentic_loop.models.errors import ModelSpecError
from agentic_loop.testing import ScriptedChatModel
from agentic_loop.trajectories import Trajectory, TrajectoryLog

TASK = "What is 53 * 47? Answer with the number only."


def call(expression: str, call_id: str = "c1") -> AIMessage:
    return AIMessage("", tool_calls=[{"name": "calculator", "args": {"expression": expression},
                                      "id": call_id}])


@tool
def calculator(expression: str) -> str:
    """Evaluate a product such as 53*47."""
    left, right = expression.split("*")
    return str(int(left) * int(right))


def used_calculator(task: str, output: str) -> bool:
    """A check over the episode: the answer came from the calculator."""
    episode = current_episode()
    return episode is not None and output in episode.results_of("calculator")


RUBRIC = Rubric([Feature("used_calculator", "Compute it with the calculator.",
                         check=used_calculator)], name="agent")


def react_graph(llm: ScriptedChatModel, **kwargs: Any) -> Any:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from langgraph.prebuilt import create_react_agent
        return create_react_agent(llm, [calculator], **kwargs)


def test_a_compiled_graph_writes_episodes_and_its_model_judges() -> None:
    llm = ScriptedChatModel(responses=["2500", call("53*47"), "2491"], model_id="react-m",
                            structured={"*": []})
    arch = Reflection(react_graph(llm), rubric=RUBRIC, max_iterations=2)
    assert arch.agent is not None and arch.agent.kind == "graph" and arch.llm is llm
    result = arch.run(TASK)
    assert (result.output, result.passed, result.iterations) == ("2491", True, 2)
    first, second = result.trace
    assert first.episode.tools_called == [] and not first.passed
    assert second.episode.tools_called == ["calculator"] and second.model == "react-m"
    assert "Compute it with the calculator." in llm.calls[1].prompt  # refine: failed checks
    assert result.usage.llm_calls == 3 and result.trajectory.model_id == "react-m"


def test_a_messages_runnable_needs_a_judge_only_when_judging_needs_a_model() -> None:
    def answer(messages: list[BaseMessage]) -> list[BaseMessage]:
        return [*messages, AIMessage("2491")]

    agent = RunnableLambda(answer, name="echo_agent")
    with pytest.raises(ModelSpecError, match="judge="):
        Reflection(agent)  # the task's rubric has LLM-judged features
    checks = Rubric.for_constraints(exact_words=1)
    result = Reflection(agent, rubric=checks, max_iterations=1).run(TASK)
    assert result.output == "2491" and result.passed
    assert result.trajectory.model_id == "echo_agent"
    assert result.trace[0].episode.steps[0].text == "2491"
    judge = ScriptedChatModel(model_id="judge", default_structured={
        "on_task": True, "well_written": True, "overall_score": 9})
    judged = Reflection(agent, judge=judge, max_iterations=1).run(TASK)
    assert judged.output == "2491" and judge.calls[0].kind == "structured"


def test_a_chat_model_with_tools_refines_by_feedback_and_by_resampling() -> None:
    llm = ScriptedChatModel(responses=["2500", call("53*47"), "2491"], model_id="m")
    result = Reflection(llm, tools=[calculator], rubric=RUBRIC, max_iterations=2).run(TASK)
    assert result.output == "2491" and result.passed
    assert "Previous answer:\n2500" in llm.calls[1].prompt
    assert llm.calls[0].kwargs["tools"] == ["calculator"]
    again = ScriptedChatModel(responses=["2500", call("53*47"), "2491"], model_id="m")
    resampled = Reflection(again, tools=[calculator], rubric=RUBRIC, max_iterations=2,
                           refine="resample").run(TASK)
    assert resampled.passed and "Previous answer" not in again.calls[1].prompt
    assert again.calls[0].prompt == again.calls[1].prompt


def test_best_of_n_keeps_every_samples_episode() -> None:
    llm = ScriptedChatModel(default="2500", model_id="m")
    arch = Reflection(llm, tools=[calculator], rubric=RUBRIC, max_iterations=1,
                      samples_per_round=3)
    result = arch.run(TASK)
    (round_,) = result.trace
    assert round_.episode is not None and len(round_.alternatives) == 2
    assert all(c.episode is not None and c.episode.final == "2500" for c in round_.alternatives)
    assert result.usage.llm_calls == 3


def test_limits_are_set_per_run_and_recorded() -> None:
    llm = ScriptedChatModel(default=call("53*47"), model_id="m")
    arch = Reflection(llm, tools=[calculator], rubric=RUBRIC, max_iterations=1, max_steps=5)
    result = arch.run(TASK, max_steps=2)
    episode = result.trace[0].episode
    assert episode.stop_reason == "step_limit" and episode.model_calls == 2
    assert result.output == "" and not result.passed and result.ok
    assert result.usage.llm_calls == 2 and result.usage.llm_seconds < 1.0  # no call left open


def test_a_batch_goes_on_when_an_agent_raises() -> None:
    def agent(messages: list[BaseMessage]) -> str:
        if "boom" in str(messages[-1].content):
            raise RuntimeError("the agent crashed")
        return "2491"

    arch = Reflection(RunnableLambda(agent), rubric=Rubric.for_constraints(exact_words=1),
                      max_iterations=1)
    crashed, fine = arch.batch(["Say boom.", TASK])
    assert crashed.trace[0].episode.stop_reason == "error"
    assert "the agent crashed" in (crashed.trace[0].episode.error or "")
    assert crashed.trajectory_id is not None and fine.output == "2491" and fine.passed


def test_the_agents_checkpointer_gets_a_thread_per_episode() -> None:
    saver = InMemorySaver()
    llm = ScriptedChatModel(responses=["2500", "2491"], model_id="m", structured={"*": []})
    arch = Reflection(react_graph(llm, checkpointer=saver),
                      rubric=Rubric.for_constraints(exact_words=1, include_words=["2491"]),
                      max_iterations=2)
    result = arch.run(TASK)
    threads = {c.config["configurable"]["thread_id"] for c in saver.list(None)}
    run_id = result.trajectory.id
    assert threads == {f"{run_id}:episode:0:0", f"{run_id}:episode:1:0"}


def test_episodes_are_traced_as_runs_named_episode_with_tools_inside() -> None:
    collector = RunCollectorCallbackHandler()
    llm = ScriptedChatModel(responses=[call("53*47"), "2491"], model_id="m")
    Reflection(llm, tools=[calculator], rubric=RUBRIC, max_iterations=1).run(
        TASK, config={"callbacks": [collector]})
    runs = {}

    def walk(run: Any) -> None:
        runs.setdefault(run.name, run)
        for child in run.child_runs:
            walk(child)

    for root in collector.traced_runs:
        walk(root)
    episode = runs["episode"]
    assert "arch:reflection" in episode.tags and "sample:0" in episode.tags
    names: list[str] = []

    def inside(run: Any) -> None:
        names.append(run.name)
        for child in run.child_runs:
            inside(child)

    inside(episode)
    assert "calculator" in names


def test_archive_refine_and_reflexion_run_agents(tmp_path: Any) -> None:
    archive = Archive(tmp_path / "a", embedder=HashingEmbedder())
    llm = ScriptedChatModel(responses=[call("53*47"), "2491"], model_id="m")
    result = ArchiveRefine(llm, tools=[calculator], rubric=RUBRIC, archive=archive,
                           max_iterations=1).run(TASK)
    assert result.archived and result.trace[0].episode.tools_called == ["calculator"]
    memory = ReflexionMemory(tmp_path / "r", embedder=HashingEmbedder())
    llm = ScriptedChatModel(responses=["2500", call("53*47"), "2491"], model_id="m",
                            structured={"ReflectionNote": [{
                                "root_cause": "guessed", "correction": "use the calculator",
                                "lesson": "Use the calculator for products."}]})
    result = Reflexion(llm, tools=[calculator], rubric=RUBRIC, memory=memory,
                       max_iterations=2).run(TASK)
    assert result.passed and len(memory) == 1
    assert "Use the calculator for products." in llm.calls[-2].prompt


def test_trajectories_keep_episodes_and_old_lines_still_read(tmp_path: Any) -> None:
    log = TrajectoryLog(tmp_path / "t.jsonl")
    llm = ScriptedChatModel(responses=[call("53*47"), "2491"], model_id="m")
    Reflection(llm, tools=[calculator], rubric=RUBRIC, max_iterations=1,
               trajectories=log).run(TASK)
    (saved,) = log.read()
    assert saved.rounds[0].episode.tool_steps[0].content == "2491"
    old = json.loads(saved.model_dump_json())
    old["schema_version"] = 3
    for round_ in old["rounds"]:
        del round_["episode"]
    read = Trajectory.model_validate_json(json.dumps(old))
    assert read.rounds[0].episode is None and read.rounds[0].draft == "2491"


def test_a_plain_model_with_a_judge_writes_while_the_judge_critiques() -> None:
    writer = ScriptedChatModel(responses=["fresh bread every morning"], model_id="writer")
    judge = ScriptedChatModel(model_id="judge", default_structured={
        "on_task": True, "well_written": True, "overall_score": 9})
    result = Reflection(writer, judge=judge).run(
        "Write a slogan in exactly 4 words, all lowercase.")
    assert result.passed and result.trace[0].episode is None
    assert [c.kind for c in writer.calls] == ["text"]
    assert [c.kind for c in judge.calls] == ["structured"]
    assert result.trajectory.model_id == "writer"


def test_langchains_create_agent_runs_async_too() -> None:
    agents = pytest.importorskip("langchain.agents")
    import asyncio

    llm = ScriptedChatModel(responses=[call("53*47"), "2491"], model_id="lc-m")
    graph = agents.create_agent(llm, [calculator], system_prompt="Use the calculator.")
    arch = Reflection(graph, rubric=RUBRIC, max_iterations=1)
    assert arch.agent is not None and arch.agent.chat_model is llm
    result = asyncio.run(arch.arun(TASK))
    episode = result.trace[0].episode
    assert result.passed and episode.system == "Use the calculator."
    assert [s.kind for s in episode.steps] == ["model", "tool", "model"]
