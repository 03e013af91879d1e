"""A run's settings are resolved once, by its first node, and read from the state (issue 30)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from langgraph.checkpoint.memory import InMemorySaver

import agentic_loop.architectures.settings as settings_module
import agentic_loop.judges.task_rubric as task_rubric_module
from agentic_loop.architectures import ArchiveRefine, Reflection, Reflexion
from agentic_loop.architectures.schemas import RunSettings
from agentic_loop.judges import Rubric, rubric_for_task
from agentic_loop.memory import Archive, HashingEmbedder, ReflexionMemory
from agentic_loop.tasks.spec import TaskSpec
from agentic_loop.testing import ScriptedChatModel

TASK = "Write a tagline for a bookshop in exactly 5 words."


def _judge(schema: type, messages: Any) -> dict[str, Any]:
    if schema.__name__ == "ReflectionNote":
        return {"root_cause": "too few words", "correction": "count the words",
                "lesson": "Count the words before answering."}
    return {"on_task": True, "well_written": True, "overall_score": 9}


def _llm() -> ScriptedChatModel:
    return ScriptedChatModel(default="too short", default_structured=_judge)


@pytest.fixture
def parses(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every parse of a task's text into constraints, wherever the run asks for one."""
    seen: list[str] = []
    real = task_rubric_module.constraints_from_task

    def counted(task: str) -> dict[str, Any]:
        seen.append(task)
        return real(task)

    for module in (task_rubric_module, settings_module):
        monkeypatch.setattr(module, "constraints_from_task", counted)
    return seen


@pytest.mark.parametrize("cls", [Reflection, Reflexion, ArchiveRefine])
@pytest.mark.parametrize("given", [False, True])
def test_a_run_parses_its_task_once(cls: type, given: bool, parses: list[str],
                                    tmp_path: Any) -> None:
    memory: dict[str, Any] = {}
    if cls is Reflexion:
        memory["memory"] = ReflexionMemory(tmp_path / "m", embedder=HashingEmbedder())
    if cls is ArchiveRefine:
        memory["archive"] = Archive(tmp_path / "a", embedder=HashingEmbedder())
    arch = cls(_llm(), max_iterations=3, target_score=10.0, **memory)
    kwargs = {"rubric": Rubric.for_constraints(exact_words=5)} if given else {}
    result = arch.run(TASK, **kwargs)
    assert result.iterations == 3 and not result.errors
    assert parses == [TASK]  # before: 7 (8 for ArchiveRefine) with the task's rubric


def test_the_settings_live_in_the_state_as_json_and_the_architecture_is_untouched() -> None:
    saver = InMemorySaver()
    arch = Reflection(_llm(), max_iterations=3, target_score=10.0, checkpointer=saver)
    result = arch.run(TASK, thread_id="t1", max_iterations=2, temperature=[0.2, 0.5],
                      user_id="u1")
    assert result.iterations == 2
    saved = arch.build().get_state({"configurable": {"thread_id": "t1"}}).values["settings"]
    assert json.loads(json.dumps(saved)) == saved
    assert (saved["max_iterations"], saved["target_score"], saved["rubric_from"],
            saved["temperature"]) == (2, 10.0, "task", [0.2, 0.5])
    assert saved["run_metadata"]["user_id_hash"] == result.trajectory.user_id_hash
    assert (arch.max_iterations, arch.temperature) == (3, None)
    # a second run on the thread resolves its own settings afresh
    assert arch.run(TASK, thread_id="t1").iterations == 3


def test_run_keywords_are_the_context_a_server_sends() -> None:
    arch = Reflection(_llm(), max_iterations=3, target_score=10.0)
    by_keywords = arch.run(TASK, max_iterations=1, constraints={"exact_words": 2})
    graph: Any = arch.build()
    served = graph.invoke({"task": TASK}, context=RunSettings(
        max_iterations=1, constraints={"exact_words": 2}))
    assert (by_keywords.iterations, by_keywords.score, by_keywords.passed) == (
        served["iterations"], served["score"], served["passed"]) == (1, 10.0, True)
    assert Rubric.from_dict(by_keywords.trajectory.rubric or {}).constraints == {"exact_words": 2}


def test_a_context_budget_over_the_architectures_gets_the_steps_it_needs() -> None:
    arch = Reflection(_llm(), max_iterations=1, target_score=10.0, plateau_patience=9)
    result = arch.run(TASK, max_iterations=6)
    assert (result.iterations, result.stop_reason, result.errors) == (6, "max_iterations", [])


def test_rubric_for_task_is_the_one_answer() -> None:
    spec = TaskSpec(task=TASK, constraints={"lowercase": True})
    assert rubric_for_task(spec).names == ("lowercase",)  # the spec's own rubric wins
    bare = TaskSpec(task=TASK)
    assert rubric_for_task(bare).names == ("exact_words", "on_task", "well_written")
    given = Rubric.for_constraints(no_commas=True)
    assert rubric_for_task(TASK, None, given) is given
    assert rubric_for_task("Name a color.", checks_only=True) is None
    stated = rubric_for_task(bare, checks_only=True)
    assert stated is not None and stated.names == ("exact_words",)


def test_the_old_spellings_still_work_with_a_deprecation_message() -> None:
    from agentic_loop.architectures import task_rubric
    from agentic_loop.distill.train.prompt_set import stated_rubric

    with pytest.deprecated_call():
        assert task_rubric(TASK).to_dict() == rubric_for_task(TASK).to_dict()
    with pytest.deprecated_call():
        old = stated_rubric(TASK)
    new = rubric_for_task(TASK, checks_only=True)
    assert old is not None and new is not None and old.to_dict() == new.to_dict()


def test_archive_refine_reads_the_runs_rubric_from_its_settings(tmp_path: Any) -> None:
    llm = ScriptedChatModel(default="Stories wait on every shelf", default_structured=_judge)
    archive = Archive(tmp_path / "a", embedder=HashingEmbedder())
    arch = ArchiveRefine(llm, archive=archive, max_iterations=1, target_score=5.0)
    result = arch.run(TASK, constraints={"exact_words": 5})
    assert result.passed and result.archived
    assert Rubric.from_dict(result.trajectory.rubric or {}).constraints == {"exact_words": 5}
    kinds = [hit.entry.metadata["constraint_kinds"] for hit in archive.search(TASK, k=1)]
    assert kinds == [["exact_words"]]


def test_a_resumed_run_keeps_the_settings_it_started_with() -> None:
    arch = Reflection(_llm(), max_iterations=3, target_score=10.0, checkpointer=InMemorySaver())
    graph: Any = arch.build()
    config = arch.config(thread_id="r1")
    graph.invoke({"task": TASK}, config, context=RunSettings(max_iterations=1),
                 interrupt_before=["critique"])
    assert graph.get_state(config).next == ("critique",)
    result = arch.resume("r1")  # no context now: the state's settings still say one draft
    assert (result.iterations, result.stop_reason) == (1, "max_iterations")
