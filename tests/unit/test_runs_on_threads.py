"""A thread is a conversation, not a run (issue #14, item 1).

A second task on a checkpointed thread must start a fresh run: its own run
id, rounds, drafts, memory, errors and output; never the first task's. A run
that stopped part-way still resumes. Runs use the scripted model: no weights.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from langchain_core.messages import BaseMessage
from langgraph.checkpoint.memory import InMemorySaver

from agentic_loop.architectures import ArchiveRefine, Reflection, Reflexion
from agentic_loop.architectures.base import Architecture
from agentic_loop.judges import Rubric
from agentic_loop.memory import Archive, HashingEmbedder, ReflexionMemory
from agentic_loop.testing import ScriptedChatModel
from agentic_loop.trajectories import TrajectoryLog

ONE_WORD = Rubric.for_constraints(exact_words=1)
TASK_A = "Name a fruit in one word."
TASK_B = "Name a planet in one word."
NOTE = {"root_cause": "too long", "correction": "one word", "lesson": "Answer in one word."}


def answer_by_task(messages: list[BaseMessage]) -> str:
    """A model that answers each task with its own word (so a leaked answer shows)."""
    text = str(messages[-1].content)
    return "Mercury" if "planet" in text else "Pear"


def make(kind: str, tmp_path: Any, **kwargs: Any) -> Architecture:
    llm = ScriptedChatModel(default=answer_by_task, structured={"ReflectionNote": [NOTE] * 9})
    common: dict[str, Any] = {"rubric": ONE_WORD, "checkpointer": InMemorySaver(),
                              "trajectories": TrajectoryLog(tmp_path / "runs"), **kwargs}
    if kind == "archive_refine":
        return ArchiveRefine(llm, archive=Archive(tmp_path / "archive",
                                                  embedder=HashingEmbedder()), **common)
    if kind == "reflexion":
        return Reflexion(llm, memory=ReflexionMemory(tmp_path / "lessons",
                                                     embedder=HashingEmbedder()), **common)
    return Reflection(llm, **common)


def thread_state(arch: Architecture, thread: str) -> dict[str, Any]:
    return dict(arch.build().get_state({"configurable": {"thread_id": thread}}).values)


def finished_tasks(arch: Architecture, thread: str) -> list[str]:
    """The task of every finished run in the thread's checkpoint history, oldest first."""
    history = arch.build().get_state_history({"configurable": {"thread_id": thread}})
    done = [(s.values["task"], s.values["trajectory_id"]) for s in history
            if not s.next and s.values.get("trajectory_id")]
    return [task for task, _ in reversed(dict.fromkeys(done))]


@pytest.mark.parametrize("kind", ["reflection", "archive_refine", "reflexion"])
def test_a_second_task_on_a_thread_is_a_fresh_run(kind, tmp_path):
    arch = make(kind, tmp_path)
    first = arch.run(TASK_A, thread_id="user-42")
    second = arch.run(TASK_B, thread_id="user-42")

    assert (first.task, first.output) == (TASK_A, "Pear")
    assert (second.task, second.output, second.score) == (TASK_B, "Mercury", 10.0)
    assert [r.draft for r in second.trace] == ["Mercury"]
    assert second.trajectory_id != first.trajectory_id
    state = thread_state(arch, "user-42")
    assert state["run_id"] == second.trajectory_id
    assert [r.draft for r in state["rounds"]] == ["Mercury"]
    assert state["final"].draft == state["draft"] == "Mercury" and state["errors"] == []
    assert finished_tasks(arch, "user-42") == [TASK_A, TASK_B]  # the history keeps both runs
    logged = TrajectoryLog(tmp_path / "runs").read()
    assert [(t.task, t.final_output) for t in logged] == [(TASK_A, "Pear"), (TASK_B, "Mercury")]
    assert len({t.id for t in logged}) == 2


def test_a_new_run_resets_rounds_memory_errors_and_usage(tmp_path):
    llm = ScriptedChatModel(responses=["two words", RuntimeError("backend down")],
                            default=answer_by_task)
    arch = Reflection(llm, rubric=ONE_WORD, checkpointer=InMemorySaver(), llm_retries=0)
    failed = arch.run(TASK_A, thread_id="t")
    assert failed.errors and failed.iterations == 1
    fresh = arch.run(TASK_B, thread_id="t")
    assert fresh.ok and fresh.output == "Mercury" and fresh.iterations == 1
    assert fresh.usage.llm_calls == 1  # the first run's calls are not added to the second's
    state = thread_state(arch, "t")
    assert state["exemplars"] == [] and state["reflections"] == [] and state["errors"] == []


def test_raw_graph_invocations_on_one_thread_are_fresh_runs_too(tmp_path):
    arch = make("archive_refine", tmp_path)
    graph, cfg = arch.build(), {"configurable": {"thread_id": "app"}}
    first = graph.invoke({"task": TASK_A}, cfg)
    second = graph.invoke({"task": TASK_B}, cfg)
    assert first["output"] == "Pear" and second["output"] == "Mercury"
    assert [r.draft for r in second["trajectory"].rounds] == ["Mercury"]
    assert second["trajectory_id"] != first["trajectory_id"]


def test_batch_and_arun_on_one_thread_give_each_task_its_own_run(tmp_path):
    arch = make("reflection", tmp_path)
    results = arch.batch([TASK_A, TASK_B, TASK_A], thread_id="conversation")
    assert [r.output for r in results] == ["Pear", "Mercury", "Pear"]
    assert all(r.iterations == 1 for r in results)
    assert len({r.trajectory_id for r in results}) == 3
    assert finished_tasks(arch, "conversation") == [TASK_A, TASK_B, TASK_A]

    async def two() -> list[Any]:
        return [await arch.arun(TASK_B, thread_id="async"),
                await arch.arun(TASK_A, thread_id="async")]

    b, a = asyncio.run(two())
    assert (b.output, a.output) == ("Mercury", "Pear") and b.trajectory_id != a.trajectory_id
    together = asyncio.run(arch.abatch([TASK_B, TASK_A], thread_id="async-batch"))
    assert [r.output for r in together] == ["Mercury", "Pear"]
    ids = [t.id for t in TrajectoryLog(tmp_path / "runs").read()]
    assert len(ids) == len(set(ids)) == 7


def test_resume_finishes_the_unfinished_run_and_a_new_task_after_it_is_fresh():
    crash = {"armed": True}

    def refine_or_crash(messages: list[BaseMessage]) -> str:
        if crash["armed"] and "Previous answer" in str(messages[-1].content):
            crash["armed"] = False
            raise KeyboardInterrupt("process killed")  # not an Exception: escapes the node
        return answer_by_task(messages)

    llm = ScriptedChatModel(responses=["two words"], default=refine_or_crash)
    arch = Reflection(llm, rubric=ONE_WORD, checkpointer=InMemorySaver(), llm_retries=0)
    with pytest.raises(KeyboardInterrupt):
        arch.run(TASK_A, thread_id="t")
    resumed = arch.resume("t")
    assert resumed.output == "Pear" and [r.draft for r in resumed.trace] == ["two words", "Pear"]
    after = arch.run(TASK_B, thread_id="t")
    assert [r.draft for r in after.trace] == ["Mercury"]
    assert after.trajectory_id != resumed.trajectory_id


def test_a_new_task_on_a_thread_whose_run_stopped_part_way_starts_afresh():
    crash = {"armed": True}

    def crash_once(messages: list[BaseMessage]) -> str:
        if crash["armed"] and "Previous answer" in str(messages[-1].content):
            crash["armed"] = False
            raise KeyboardInterrupt("process killed")
        return answer_by_task(messages)

    llm = ScriptedChatModel(responses=["two words"], default=crash_once)
    arch = Reflection(llm, rubric=ONE_WORD, checkpointer=InMemorySaver(), llm_retries=0)
    with pytest.raises(KeyboardInterrupt):
        arch.run(TASK_A, thread_id="t")
    result = arch.run(TASK_B, thread_id="t")
    assert result.task == TASK_B and [r.draft for r in result.trace] == ["Mercury"]
