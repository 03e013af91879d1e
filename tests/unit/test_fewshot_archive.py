"""An archive that helps a small model (issue #20, point 3): exemplars shown as few-shot chat
turns, only above a similarity floor and only for tasks with the same kinds of checks; a
draft that nearly copies a shown exemplar is voided; training stays on the plain prompt.
"""

from __future__ import annotations

from typing import Any

import pytest

from agentic_loop.architectures import ArchiveRefine
from agentic_loop.distill.data.samples import trajectory_samples
from agentic_loop.judges import Rubric
from agentic_loop.memory import Archive, HashingEmbedder
from agentic_loop.testing import ScriptedChatModel

THREE_WORDS = Rubric.for_constraints(exact_words=3)
TASK = "Write a tagline for a bakery in three words."
SIMILAR = "Write a tagline for a bakery shop in three words."
KINDS = {"constraint_kinds": ["exact_words"]}


@pytest.fixture
def archive(tmp_path: Any) -> Archive:
    return Archive(tmp_path / "archive", embedder=HashingEmbedder())


def first_call(llm: ScriptedChatModel) -> list[tuple[str, str]]:
    call = next(c for c in llm.calls if c.kind == "text")
    return [(m.type, str(m.content)) for m in call.messages]


def test_exemplars_are_few_shot_turns_before_the_task(archive: Archive) -> None:
    entry = archive.add(TASK, "Warm loaves waiting", score=10.0, metadata={
        **KINDS, "requirements": "- Use exactly 3 words."}).entry
    llm = ScriptedChatModel(default="Crusts at dawn")
    result = ArchiveRefine(llm, rubric=THREE_WORDS, archive=archive, min_similarity=0.0).run(
        SIMILAR)
    assert result.exemplar_ids == [entry.id] and result.passed
    assert first_call(llm)[1:] == [
        ("human", f"{TASK}\n\nRequirements:\n- Use exactly 3 words."),
        ("ai", "Warm loaves waiting"),
        ("human", f"{SIMILAR}\n\nRequirements:\n- Use exactly 3 words.")]
    # the round records what was sent, turns included; training gets the plain task prompt
    prompt = result.trace[0].prompt
    assert prompt is not None and prompt.exemplar_ids == [entry.id]
    assert [(m["role"], m["content"]) for m in prompt.messages()] == [
        ({"human": "user", "ai": "assistant"}.get(t, t), c) for t, c in first_call(llm)]
    [sample] = trajectory_samples(result.trajectory)
    assert [role for role, _ in sample.chat] == ["system", "user"]
    assert sample.chat[1][1] == f"{SIMILAR}\n\nRequirements:\n- Use exactly 3 words."


def test_exemplars_below_the_similarity_floor_are_not_shown(archive: Archive) -> None:
    near = archive.add(TASK, "Warm loaves waiting", metadata=KINDS).entry
    far = archive.add("Write a haiku about the ocean in three words.", "Waves fold over",
                      metadata=KINDS).entry
    scores = {h.entry.id: h.similarity for h in archive.search(SIMILAR, k=5)}
    assert scores[near.id] > scores[far.id]
    floor = (scores[near.id] + scores[far.id]) / 2
    fails = ScriptedChatModel(default="no")  # never accepted: the archive stays as it is
    result = ArchiveRefine(fails, rubric=THREE_WORDS, archive=archive, min_similarity=floor,
                           mmr=None).run(SIMILAR)
    assert result.exemplar_ids == [near.id]
    above_all = ArchiveRefine(fails, rubric=THREE_WORDS, archive=archive,
                              min_similarity=scores[near.id] + 0.01)
    assert above_all.run(SIMILAR).exemplar_ids == [] and len(archive) == 2


def test_exemplars_with_other_kinds_of_checks_are_not_shown(archive: Archive) -> None:
    archive.add(TASK, "warm loaves waiting for you", metadata={"constraint_kinds": ["lowercase"]})
    llm = ScriptedChatModel(default="no")  # never accepted: the archive stays as it is
    arch = ArchiveRefine(llm, rubric=THREE_WORDS, archive=archive, min_similarity=0.0)
    assert arch.run(SIMILAR).exemplar_ids == []
    assert len(first_call(llm)) == 2  # system and task: no turns
    loose = ArchiveRefine(llm, rubric=THREE_WORDS, archive=archive, min_similarity=0.0,
                          match_kinds=False)
    assert len(loose.run(SIMILAR).exemplar_ids) == 1 and len(archive) == 1


def test_entries_without_stored_kinds_are_matched_by_their_tasks_constraints(
        archive: Archive) -> None:
    stated = archive.add("Tagline for a bakery in exactly 3 words.", "Warm loaves waiting").entry
    archive.add("Tagline for a bakery, all in lowercase.", "warm bread here")
    llm = ScriptedChatModel(default="Crusts at dawn")
    result = ArchiveRefine(llm, archive=archive, min_similarity=0.0).run(
        "Tagline for a bakery shop in exactly 3 words.")  # the task's own rubric: exact_words
    assert result.exemplar_ids == [stated.id]


def test_a_near_copy_of_a_shown_exemplar_is_voided(archive: Archive) -> None:
    archive.add(TASK, "Warm loaves waiting", metadata=KINDS)
    llm = ScriptedChatModel(responses=["Warm loaves, waiting!", "Crusts at dawn"])
    result = ArchiveRefine(llm, rubric=THREE_WORDS, archive=archive, min_similarity=0.0).run(
        SIMILAR)
    copied, own = result.trace
    assert "exemplar_copy" in copied.guards and not copied.passed and copied.score == 0.0
    assert copied.feedback is not None and "do not copy the example" in copied.feedback
    assert own.passed and result.output == "Crusts at dawn"


def test_repeating_the_answer_of_the_very_same_task_is_not_a_copy(archive: Archive) -> None:
    archive.add(TASK, "Warm loaves waiting", metadata=KINDS)
    llm = ScriptedChatModel(default="Warm loaves waiting")
    result = ArchiveRefine(llm, rubric=THREE_WORDS, archive=archive, min_similarity=0.0).run(TASK)
    assert result.exemplar_ids and result.passed and not result.trace[0].guards


def test_an_accepted_output_is_archived_with_its_kinds_and_requirements(archive: Archive) -> None:
    llm = ScriptedChatModel(default="Warm loaves waiting")
    assert ArchiveRefine(llm, rubric=THREE_WORDS, archive=archive).run(TASK).archived
    [entry] = archive.entries()
    assert entry.metadata["constraint_kinds"] == ["exact_words"]
    assert entry.metadata["requirements"] == "- Use exactly 3 words."
    assert entry.model_id == "scripted"


def test_text_exemplars_remain_available(archive: Archive) -> None:
    archive.add(TASK, "Warm loaves waiting", metadata=KINDS)
    llm = ScriptedChatModel(default="Crusts at dawn")
    ArchiveRefine(llm, rubric=THREE_WORDS, archive=archive, min_similarity=0.0,
                  exemplars_as="text").run(SIMILAR)
    messages = first_call(llm)
    assert len(messages) == 2 and "Accepted answer: Warm loaves waiting" in messages[1][1]
