"""No run is ever lost (issue #14, item 3): fault-injected model text and storage.

A model answering a lone surrogate, nothing, or 9 MB; an archive, a lesson
store or a trajectory log that fails: every run still returns a result (errors
as data), keeps its output, and logs its trajectory when the log works.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import pytest
from langgraph.store.base import PutOp
from langgraph.store.memory import InMemoryStore

from agentic_loop.architectures import ArchiveRefine, Reflection, Reflexion
from agentic_loop.architectures.base import Architecture
from agentic_loop.architectures.nodes import DEFAULT_MAX_OUTPUT_CHARS
from agentic_loop.errors import ConfigError
from agentic_loop.judges import Rubric
from agentic_loop.memory import Archive, HashingEmbedder, ReflexionMemory
from agentic_loop.memory.store.index import store_index
from agentic_loop.testing import ScriptedChatModel
from agentic_loop.trajectories import Trajectory, TrajectoryLog

NO_WE = Rubric.for_constraints(exclude_words=["we"])  # any text without "we" passes the check
NOTE = {"root_cause": "empty", "correction": "write", "lesson": "Write the answer."}
NINE_MB = "x" * 9_000_000


class FullDiskStore(InMemoryStore):
    """A LangGraph store (where the architectures keep memory) whose disk is full: it reads,
    but writing a memory record fails (its own bookkeeping, the embedder stamp, still works)."""

    def __init__(self) -> None:
        super().__init__(index=store_index(HashingEmbedder()))  # type: ignore[arg-type]

    def batch(self, ops: Iterable[Any]) -> list[Any]:
        ops = list(ops)
        if any(isinstance(op, PutOp) and op.namespace[0] in ("archive", "reflexion")
               for op in ops):
            raise OSError(28, "No space left on device")
        return super().batch(ops)


class FullDiskLog(TrajectoryLog):
    """A trajectory log whose disk is full."""

    def append(self, trajectory: Trajectory) -> None:
        raise OSError(28, "No space left on device")


def make(kind: str, answer: Any, tmp_path: Any, *, full_disk: bool = False,
         log: TrajectoryLog | None = None, **kwargs: Any) -> Architecture:
    llm = ScriptedChatModel(default=answer, structured={"ReflectionNote": [NOTE] * 9})
    runs = log if log is not None else TrajectoryLog(tmp_path / "runs")
    common: dict[str, Any] = {"rubric": NO_WE, "max_iterations": 2, "llm_retries": 0,
                              "trajectories": runs, **kwargs}
    if kind == "archive_refine":
        if full_disk:
            return ArchiveRefine(llm, store=FullDiskStore(), **common)
        return ArchiveRefine(llm, archive=Archive(tmp_path / "archive",
                                                  embedder=HashingEmbedder()), **common)
    if kind == "reflexion":
        if full_disk:
            return Reflexion(llm, store=FullDiskStore(), **common)
        return Reflexion(llm, memory=ReflexionMemory(tmp_path / "lessons",
                                                     embedder=HashingEmbedder()), **common)
    return Reflection(llm, **common)


KINDS = ["reflection", "archive_refine", "reflexion"]


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("answer, stored", [("\ud800", ""),
                                            ("Pear\ud800\x00 tree\x1b", "Pear tree"),
                                            ("", ""), (NINE_MB, "x" * DEFAULT_MAX_OUTPUT_CHARS)],
                         ids=["lone-surrogate", "surrogate-nul-escape", "empty", "9MB"])
def test_bad_model_text_never_loses_the_run(kind, answer, stored, tmp_path):
    result = make(kind, answer, tmp_path).run("Write a tagline for a bakery.")
    (logged,) = TrajectoryLog(tmp_path / "runs").read()
    assert result.output == stored and logged.final_output == stored
    assert logged.id == result.trajectory_id and logged.errors == result.errors
    assert isinstance(result.errors, list) and result.stop_reason is not None
    cut = NINE_MB if answer is NINE_MB else None
    assert [r.cut_from for r in logged.rounds] == [len(cut) if cut else None] * len(logged.rounds)
    if not stored.strip():
        assert not result.passed  # an empty answer never passes


def test_the_output_cap_is_configurable_and_refused_when_nonsense(tmp_path):
    result = make("reflection", "word " * 100, tmp_path, max_output_chars=12).run("Say words.")
    assert result.output == "word word wo" and result.trace[0].cut_from == 499
    with pytest.raises(ConfigError, match="max_output_chars"):
        Reflection(ScriptedChatModel(), max_output_chars=0)
    uncapped = make("reflection", "y" * 30_000, tmp_path, max_output_chars=None).run("Say it.")
    assert len(uncapped.output or "") == 30_000 and uncapped.trace[0].cut_from is None


def test_a_failing_archive_keeps_the_output_and_the_trajectory(tmp_path):
    result = make("archive_refine", "Fresh bread daily", tmp_path,
                  full_disk=True).run("Write a tagline for a bakery.")
    assert result.output == "Fresh bread daily" and result.passed and not result.archived
    assert result.errors == ["finalize: archive_refine memory: OSError: [Errno 28] No space "
                             "left on device"]
    (logged,) = TrajectoryLog(tmp_path / "runs").read()
    assert logged.final_output == "Fresh bread daily" and logged.errors == result.errors


def test_a_failing_trajectory_log_keeps_the_output_and_the_archive(tmp_path):
    arch = make("archive_refine", "Fresh bread daily", tmp_path,
                log=FullDiskLog(tmp_path / "runs"))
    result = arch.run("Write a tagline for a bakery.")
    assert result.output == "Fresh bread daily" and result.archived
    assert result.errors == ["finalize: trajectory log: OSError: [Errno 28] No space left on "
                             "device"]
    archived = Archive(tmp_path / "archive", embedder=HashingEmbedder()).entries()
    assert [e.output for e in archived] == ["Fresh bread daily"]


def test_a_failing_lesson_store_is_an_error_of_the_run_not_a_lost_run(tmp_path):
    result = make("reflexion", "we bake", tmp_path, full_disk=True).run(
        "Write a tagline for a bakery.")
    assert result.output == "we bake" and not result.passed
    assert any("reflect: OSError" in e for e in result.errors)
    (logged,) = TrajectoryLog(tmp_path / "runs").read()
    assert logged.errors == result.errors and logged.final_output == "we bake"


def test_when_both_stores_fail_the_result_still_has_the_output_and_both_errors(tmp_path):
    result = make("archive_refine", "Fresh bread daily", tmp_path, full_disk=True,
                  log=FullDiskLog(tmp_path / "runs")).run("Write a tagline for a bakery.")
    assert result.output == "Fresh bread daily" and result.score == 10.0
    assert [e.split(":")[1].strip() for e in result.errors] == [
        "archive_refine memory", "trajectory log"]
