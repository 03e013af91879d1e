"""ReflexionMemory: reflections stored durably and retrieved by task similarity."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from agentic_loop.memory import HashingEmbedder, ReflectionEntry, ReflexionMemory

EMB = HashingEmbedder(dim=128)


def test_add_search_and_len(tmp_path: Path) -> None:
    memory = ReflexionMemory(tmp_path, embedder=EMB)
    first = memory.add("Sum the prices in the invoice table", "Read every row before adding.",
                       failure_summary="total off by 12.50", outcome="wrong answer", trial=1,
                       metadata={"run": "r1"})
    memory.add("Write a haiku about rain", "Count syllables: 5, 7, 5.", outcome="format error")
    assert first.status == "added" and len(memory) == 2
    hit = memory.search("Sum the amounts in the invoice table", k=1)[0]
    assert isinstance(hit.entry, ReflectionEntry)
    assert (
        hit.entry.reflection,
        hit.entry.failure_summary,
        hit.entry.outcome,
        hit.entry.trial,
        hit.entry.metadata,
    ) == ("Read every row before adding.", "total off by 12.50", "wrong answer", 1, {"run": "r1"})


def test_the_same_lesson_twice_is_kept(tmp_path: Path) -> None:
    memory = ReflexionMemory(tmp_path, embedder=EMB)
    memory.add("task", "Check the units.")
    assert memory.add("task", "Check the units.").added and len(memory) == 2


def test_persists_and_is_shared_between_instances(tmp_path: Path) -> None:
    reader = ReflexionMemory(tmp_path, "math", EMB)
    ReflexionMemory(tmp_path, "math", EMB).add(
        "Compute 17 * 23", "Multiply digit by digit and carry."
    )
    assert [h.entry.task for h in reader.search("Compute 19 * 21", k=1)] == ["Compute 17 * 23"]
    assert len(ReflexionMemory(tmp_path, "math", EMB)) == 1


def test_prune_keeps_the_newest(tmp_path: Path) -> None:
    memory = ReflexionMemory(tmp_path, embedder=EMB)
    old = datetime.now(UTC) - timedelta(days=10)
    memory.add_many(
        [
            ReflectionEntry(
                task=f"task {i}", reflection=f"lesson {i}", created_at=old + timedelta(hours=i)
            )
            for i in range(5)
        ]
    )
    memory.add("recent task", "recent lesson")
    assert memory.prune(older_than=timedelta(days=1)).removed == 5
    memory.add_many([{"task": f"t{i}", "reflection": f"l{i}"} for i in range(3)])
    assert memory.prune(max_entries=2).kept == 2
    assert [r.reflection for r in memory.entries()] == ["l1", "l2"]


def test_invalid_reflection_is_rejected(tmp_path: Path) -> None:
    memory = ReflexionMemory(tmp_path, embedder=EMB)
    with pytest.raises(ValueError, match="reflection"):
        memory.add("task", " ")
    with pytest.raises(ValueError, match="trial"):
        memory.add("task", "lesson", trial=-1)
    assert len(memory) == 0
