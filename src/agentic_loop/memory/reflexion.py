"""Reflexion memory: verbal lessons from failed attempts, retrieved for similar tasks.

Reflexion (Shinn et al., 2023) turns a failure into a short written lesson
("the answer must be the last number; I ended with a sentence") and shows
the lessons of similar past tasks to the next attempt. This is the same
durable, shared, similarity-searched store as the archive, holding
:class:`~agentic_loop.memory.records.ReflectionEntry` records.

Example:
    >>> import tempfile
    >>> from agentic_loop.memory.embeddings import HashingEmbedder
    >>> memory = ReflexionMemory(tempfile.mkdtemp(), embedder=HashingEmbedder())
    >>> _ = memory.add("Sum the prices in the invoice table",
    ...                "Read every row before adding; I skipped the last one.",
    ...                failure_summary="total off by 12.50", outcome="wrong answer", trial=1)
    >>> _ = memory.add("Write a haiku about rain", "Count syllables per line: 5, 7, 5.")
    >>> [hit.entry.reflection for hit in memory.search("Sum the amounts in the invoice", k=1)]
    ['Read every row before adding; I skipped the last one.']
    >>> len(memory)
    2
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any

from agentic_loop.memory.collection.layout import Namespace
from agentic_loop.memory.collection.prune import PruneResult, choose_kept
from agentic_loop.memory.collection.record_collection import RecordCollection
from agentic_loop.memory.embeddings import TextEmbedder
from agentic_loop.memory.records import AddResult, ReflectionEntry

__all__ = ["ReflexionMemory"]


class ReflexionMemory(RecordCollection[ReflectionEntry]):
    """A persistent store of reflections, searched by task similarity.

    Arguments as for :class:`~agentic_loop.memory.archive.Archive`, without
    duplicate rejection: the same lesson drawn again is evidence, not noise.
    """

    record_type = ReflectionEntry
    kind = ReflectionEntry.collection_kind

    def __init__(
        self,
        path: str | os.PathLike[str],
        namespace: Namespace | None = None,
        embedder: TextEmbedder | None = None,
        *,
        reembed: bool = False,
        exact_limit: int = 50_000,
        lock_timeout: float = 60.0,
        show_progress: bool = True,
    ) -> None:
        super().__init__(
            path,
            namespace,
            embedder,
            dedup_threshold=None,
            reembed=reembed,
            exact_limit=exact_limit,
            lock_timeout=lock_timeout,
            show_progress=show_progress,
        )

    def add(
        self,
        task: str,
        reflection: str,
        *,
        failure_summary: str = "",
        outcome: str | None = None,
        trial: int = 0,
        metadata: Mapping[str, Any] | None = None,
        id: str | None = None,
    ) -> AddResult[ReflectionEntry]:
        """Store one reflection durably (fsync'd before returning)."""
        fields: dict[str, Any] = {
            "task": task,
            "reflection": reflection,
            "failure_summary": failure_summary,
            "outcome": outcome,
            "trial": trial,
            "metadata": dict(metadata or {}),
        }
        if id is not None:
            fields["id"] = id
        return self.add_many([fields])[0]

    def prune(
        self, *, max_entries: int | None = None, older_than: timedelta | datetime | None = None
    ) -> PruneResult:
        """Keep the newest ``max_entries`` reflections and/or drop those created before
        ``older_than``; compacts the log atomically."""
        return self._compact(
            lambda live: choose_kept(live, max_entries=max_entries, older_than=older_than)
        )
