"""An open collection folder: its log, meta and index files, and an in-memory view kept in step.

Why a base class: every operation of a collection (search, add, delete,
prune) starts the same way: pick up what other processes appended to the
log, make sure the vector indexes cover every row, and afterwards save
index rows worth saving. This class owns that state (the
:class:`~agentic_loop.memory.collection.replay.LogReplay` of the log, the
:class:`~agentic_loop.memory.collection.index_files.Indexes`, the lock) and the
opening checks (folder, ``meta.json``, embedder); the operations
themselves are in :class:`~agentic_loop.memory.collection.record_collection.RecordCollection`.

Example:
    >>> import tempfile
    >>> from agentic_loop.memory.embeddings import HashingEmbedder
    >>> from agentic_loop.memory.records import ReflectionEntry
    >>> class Notes(CollectionBase[ReflectionEntry]):
    ...     record_type = ReflectionEntry
    ...     kind = "reflexion"
    >>> with Notes(tempfile.mkdtemp(), namespace="demo", embedder=HashingEmbedder()) as notes:
    ...     notes.path.name, notes.meta.embedder, notes.embed(["a", "b"]).shape
    ('demo', 'hashing-v1-256', (2, 256))
"""

from __future__ import annotations

import atexit
import contextlib
import os
import threading
import weakref
from collections.abc import Callable, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any, ClassVar, Generic, Self, TypeVar

import numpy as np

from agentic_loop.errors import ConfigError
from agentic_loop.jsonl_log import JsonlLog, LogRead
from agentic_loop.memory.collection.index import VectorIndex
from agentic_loop.memory.collection.index_files import Indexes, IndexFiles, embed_missing
from agentic_loop.memory.collection.layout import (
    ENTRIES,
    Namespace,
    make_collection_dir,
    namespace_dir,
    normalize_namespace,
    remove_temporaries,
)
from agentic_loop.memory.collection.meta import check_dim, open_meta
from agentic_loop.memory.collection.replay import LogReplay
from agentic_loop.memory.embeddings import Embedder, TextEmbedder, normalize_rows
from agentic_loop.memory.errors import EmbedderError
from agentic_loop.memory.records import MemoryRecord, log_record_type
from agentic_loop.text_places import record_unless_default

__all__ = ["CollectionBase"]

R = TypeVar("R", bound=MemoryRecord)


class CollectionBase(Generic[R]):
    """An open collection folder whose in-memory view follows the files on disk.

    ``path`` is the root folder and ``namespace`` a label or tuple of labels
    under it (one folder each). ``embedder`` defaults to the bundled
    all-MiniLM-L6-v2. ``dedup_threshold`` (cosine, 0-1, or ``None``) rejects
    records whose dedup text is that close to a stored one. ``reembed``
    allows opening with another embedder than the one that built the
    collection (everything is re-embedded). ``exact_limit`` is the size up
    to which search is exact (HNSW above). ``lock_timeout`` bounds waits on
    other processes (seconds).
    """

    record_type: ClassVar[type[MemoryRecord]]
    kind: ClassVar[str]

    def __init__(
        self,
        path: str | os.PathLike[str],
        namespace: Namespace | None = None,
        embedder: TextEmbedder | None = None,
        *,
        dedup_threshold: float | None = None,
        reembed: bool = False,
        exact_limit: int = 50_000,
        lock_timeout: float = 60.0,
        show_progress: bool = True,
    ) -> None:
        if dedup_threshold is not None and not 0.0 < dedup_threshold <= 1.0:
            raise ConfigError(
                f"dedup_threshold={dedup_threshold}: pass a cosine similarity in (0, 1], "
                "or None to turn the duplicate check off"
            )
        self.root = Path(path).expanduser()
        self.namespace = normalize_namespace(namespace)
        self.dir = namespace_dir(self.root, self.namespace)
        make_collection_dir(self.dir, self.kind)
        # outside <data>/archive and <data>/reflections, forget must be told where this is
        record_unless_default("memory", self.root, what=f"{self.kind} memory")
        self.embedder: TextEmbedder = embedder if embedder is not None else Embedder()
        self.dedup_threshold = dedup_threshold
        self.exact_limit = exact_limit
        self.show_progress = show_progress
        self._keeps_outputs = (
            dedup_threshold is not None and self.record_type.dedup_field is not None
        )
        self._log: JsonlLog[Any] = JsonlLog(
            self.dir / ENTRIES, log_record_type(self.record_type), lock_timeout=lock_timeout
        )
        self._mutex = threading.RLock()
        self._replay: LogReplay[R] = LogReplay()
        self._indexes: Indexes | None = None
        with self._log.locked():
            remove_temporaries(self.dir)  # safe: writers hold the lock we hold
            self.meta, self._dim_checked = open_meta(
                self.dir, self.kind, self.embedder, reembed=reembed
            )
            self._files = IndexFiles(
                self.dir, embedder=self.embedder.name, dim=self.meta.dim, exact_limit=exact_limit
            )
            self._apply(self._log.read())
        _open_collections.add(self)

    # -- context manager / lifecycle ------------------------------------------------------

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"{type(self).__name__}({str(self.dir)!r}, entries={len(self._replay.latest)})"

    def close(self) -> None:
        """Save index rows not yet on disk, so the next process need not embed them again.

        Also done automatically at interpreter exit for every collection still open.
        """
        with self._mutex:
            if self._indexes is not None:
                self._save_indexes(force=True)

    @property
    def path(self) -> Path:
        """The folder holding this collection's files."""
        return self.dir

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Embed ``texts`` with this collection's embedder, as unit float32 rows.

        Normalizing here makes inner product equal cosine similarity even
        for a custom embedder that returns raw vectors.
        """
        vectors = normalize_rows(np.asarray(self.embedder.embed(texts)))
        if vectors.shape[0] != len(texts):
            raise EmbedderError(
                f"embedder {self.embedder.name!r} returned {vectors.shape[0]} vectors for "
                f"{len(texts)} texts; fix its embed() to return one row per text"
            )
        return vectors

    # -- keeping the view in step with the disk ---------------------------------------

    def _apply(self, read: LogRead[Any]) -> None:
        if read.reset:
            self._indexes = None
        self._replay.apply(read.records, reset=read.reset)

    def _refresh(self) -> None:
        self._apply(self._log.read())

    def _ensure_indexes(self) -> Indexes:
        """Load the saved indexes if they match the log, then embed the rows they miss."""
        if self._indexes is None:
            if not self._dim_checked:
                check_dim(self.meta, self.embedder, self.dir)
                self._dim_checked = True
            with self._log.locked():
                self._indexes = self._files.load(self._replay.rows, outputs=self._keeps_outputs)
        indexes = self._indexes
        self._embed_missing(indexes.tasks, lambda r: r.search_text(), "tasks")
        if indexes.outputs is not None:
            self._embed_missing(indexes.outputs, lambda r: r.dedup_text() or "", "outputs")
        return indexes

    def _embed_missing(self, index: VectorIndex, text: Callable[[R], str], what: str) -> None:
        embed_missing(
            index,
            self._replay.rows,
            self.embed,
            text,
            what,
            show_progress=self.show_progress,
            folder=self.dir.name,
        )

    def _save_indexes(self, *, force: bool = False) -> None:
        """Persist the indexes when enough rows are unsaved (always when ``force``)."""
        indexes = self._indexes
        if indexes is None:
            return
        rows = len(indexes.tasks)
        unsaved = rows - indexes.saved_rows
        if unsaved <= 0 or (not force and unsaved < max(256, rows // 20)):
            return
        if indexes.outputs is not None and len(indexes.outputs) != rows:
            return
        with self._log.locked():
            self._refresh()
            if self._indexes is not indexes or rows > len(self._replay.rows):
                return
            self._files.save(indexes, self._replay.rows)


_open_collections: weakref.WeakSet[CollectionBase[Any]] = weakref.WeakSet()


@atexit.register
def _save_open_collections() -> None:
    """At exit, save the index rows each open collection computed (best effort: derived data)."""
    for collection in list(_open_collections):
        with contextlib.suppress(Exception):
            collection.close()
