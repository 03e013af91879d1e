"""The archive: accepted outputs on disk, retrieved by task similarity as exemplars.

A loop that archives its good outputs can show the most *similar* past
successes to the model on the next task, and the archive doubles as the
training loop's source of many correct answers per task. It is durable (an
``add`` that returned survives a crash), shared (several processes may add
and search at once), and clean (an output too close to a stored one is
rejected, while different outputs for the same task are all kept).

Example:
    >>> import tempfile
    >>> from agentic_loop.memory.embeddings import HashingEmbedder
    >>> archive = Archive(tempfile.mkdtemp(), namespace="taglines", embedder=HashingEmbedder())
    >>> archive.add("Tagline for a bookstore", "Stories wait on every shelf.", score=8.5).status
    'added'
    >>> archive.add("Tagline for a bookstore", "Find your next favourite chapter here.",
    ...             score=9).status
    'added'
    >>> result = archive.add("Tagline for a book store", "Stories wait on every shelf!", score=7)
    >>> result.status, result.duplicate_of.output
    ('duplicate', 'Stories wait on every shelf.')
    >>> archive.add("Tagline for a bakery", "Warm bread, every morning.", score=8).status
    'added'
    >>> sorted(hit.entry.output for hit in archive.search("bookstore tagline", k=2))
    ['Find your next favourite chapter here.', 'Stories wait on every shelf.']
    >>> len(archive), archive.stats().scores.max
    (3, 9.0)
    >>> archive.prune(min_score=8.5).removed
    1
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any, Literal

from agentic_loop.episodes import Episode
from agentic_loop.errors import ConfigError
from agentic_loop.memory.collection.layout import Namespace
from agentic_loop.memory.collection.prune import PruneResult, choose_kept
from agentic_loop.memory.collection.record_collection import RecordCollection
from agentic_loop.memory.embeddings import TextEmbedder
from agentic_loop.memory.records import AddResult, ArchiveEntry
from agentic_loop.memory.stats import ArchiveStats, archive_stats

__all__ = ["Archive"]


class Archive(RecordCollection[ArchiveEntry]):
    """A persistent, similarity-searched store of accepted outputs.

    ``path``: the archive's root folder; ``namespace``: a label (or tuple of
    labels) separating unrelated task families under it. ``embedder``
    defaults to the bundled all-MiniLM-L6-v2. ``dedup_threshold``: an output
    whose cosine similarity to a stored output reaches it is rejected
    (``None`` turns the check off). ``reembed=True`` opens an archive built
    with another embedder by re-embedding every entry. ``exact_limit``: the
    size up to which search is exact (an HNSW index above it).

    Reads (``search``, ``get``, ``len``...) first pick up entries other
    processes appended. Call :meth:`close` (or use ``with``) when done, so
    the index rows computed here are saved for the next process.
    """

    record_type = ArchiveEntry
    kind = ArchiveEntry.collection_kind

    def __init__(
        self,
        path: str | os.PathLike[str],
        namespace: Namespace | None = None,
        embedder: TextEmbedder | None = None,
        *,
        dedup_threshold: float | None = 0.95,
        reembed: bool = False,
        exact_limit: int = 50_000,
        lock_timeout: float = 60.0,
        show_progress: bool = True,
    ) -> None:
        super().__init__(
            path,
            namespace,
            embedder,
            dedup_threshold=dedup_threshold,
            reembed=reembed,
            exact_limit=exact_limit,
            lock_timeout=lock_timeout,
            show_progress=show_progress,
        )

    def add(
        self,
        task: str,
        output: str,
        *,
        score: float | None = None,
        features: Mapping[str, Any] | None = None,
        iterations: int | None = None,
        model_id: str | None = None,
        trajectory_id: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        id: str | None = None,
        dedup: bool = True,
        episode: Episode | Mapping[str, Any] | None = None,
    ) -> AddResult[ArchiveEntry]:
        """Store one accepted output durably (fsync'd before returning).

        Returns an :class:`AddResult`: ``"added"``; ``"replaced"`` when
        ``id`` names a stored entry (a new version, same ``created_at``); or
        ``"duplicate"`` when the output is within ``dedup_threshold`` of a
        stored output (``duplicate_of`` says which). ``dedup=False`` skips
        that check for this call. ``episode``: the agent episode that wrote
        ``output`` (an :class:`~agentic_loop.episodes.Episode` or its JSON), kept
        with it and shown to later runs as a few-shot episode.
        """
        fields: dict[str, Any] = {
            "task": task,
            "output": output,
            "score": score,
            "features": dict(features or {}),
            "iterations": iterations,
            "model_id": model_id,
            "trajectory_id": trajectory_id,
            "metadata": dict(metadata or {}),
        }
        if episode is not None:
            fields["episode"] = episode
        if id is not None:
            fields["id"] = id
        return self.add_many([fields], dedup=dedup)[0]

    def stats(self) -> ArchiveStats:
        """Count, score distribution, growth per day and recent-vs-oldest score drift."""
        return archive_stats(self.entries())

    def prune(
        self,
        *,
        max_entries: int | None = None,
        min_score: float | None = None,
        older_than: timedelta | datetime | None = None,
        keep: Literal["best", "newest"] = "best",
    ) -> PruneResult:
        """Remove entries and compact the log atomically; the index is rebuilt without re-embedding.

        Removes entries scoring below ``min_score`` (unscored ones too),
        created before ``older_than`` (a ``timedelta`` back from now, or a
        ``datetime``), then all but ``max_entries``: the highest scoring
        (``keep="best"``, newer first on ties) or the newest. With no
        argument it only compacts (drops superseded versions and deletions).
        """
        if keep not in ("best", "newest"):
            raise ConfigError(f'keep={keep!r}: keep must be "best" or "newest"')

        def rank(entry: ArchiveEntry) -> tuple[float, datetime]:
            score = entry.score if entry.score is not None else float("-inf")
            return (score, entry.created_at) if keep == "best" else (0.0, entry.created_at)

        def passes(entry: ArchiveEntry) -> bool:
            return min_score is None or (entry.score is not None and entry.score >= min_score)

        return self._compact(
            lambda live: choose_kept(
                live, max_entries=max_entries, older_than=older_than, keep_if=passes, rank=rank
            )
        )
