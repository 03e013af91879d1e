"""A collection's derived search files: ``index.faiss``, ``outputs.faiss`` and ``index.json``.

Why apart from the collection: the log is the only source of truth, and
everything here can be rebuilt from it, so this module's whole job is to
load what is still valid and say what is not. ``index.json`` names the
embedder, the dimension and how many log rows the two index files cover
(with the id and time of the last one, which catches a log replaced under
the same row count). Files that are missing, unreadable, built by another
embedder or ahead of the log are ignored with a warning, and the rows they
miss are embedded again (:func:`embed_missing`).

Example:
    >>> import tempfile, pathlib
    >>> from agentic_loop.memory.embeddings import HashingEmbedder
    >>> from agentic_loop.memory.records import ArchiveEntry
    >>> embedder = HashingEmbedder(dim=16)
    >>> files = IndexFiles(pathlib.Path(tempfile.mkdtemp()), embedder=embedder.name, dim=16,
    ...                    exact_limit=100)
    >>> rows = [ArchiveEntry(task="Tagline for a bookstore", output="Stories wait.")]
    >>> indexes = files.load(rows, outputs=False)          # nothing saved yet: empty
    >>> embed_missing(indexes.tasks, rows, embedder.embed, lambda r: r.search_text(), "tasks",
    ...               show_progress=False, folder="demo")
    >>> files.save(indexes, rows)
    >>> len(files.load(rows, outputs=False).tasks), files.read_state(rows).rows
    (1, 1)
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TypeVar

import numpy as np
from pydantic import BaseModel, ValidationError

from agentic_loop.atomic import atomic_write_bytes
from agentic_loop.memory.collection.index import VectorIndex
from agentic_loop.memory.collection.layout import (
    ENTRIES,
    INDEX_STATE,
    OUTPUT_INDEX,
    TASK_INDEX,
    remove_index_files,
)
from agentic_loop.memory.errors import IndexFileError
from agentic_loop.memory.records import MemoryRecord

__all__ = ["IndexFiles", "IndexState", "Indexes", "embed_missing"]

R = TypeVar("R", bound=MemoryRecord)

_EMBED_CHUNK = 1024
_PROGRESS_FROM = 2000  # rows to embed before a progress bar is worth showing


class IndexState(BaseModel):
    """The content of ``index.json``: what the saved index files cover."""

    rows: int
    last_id: str | None = None
    last_stamp: datetime | None = None
    embedder: str
    dim: int
    outputs: bool = False


@dataclass
class Indexes:
    """A collection's in-memory indexes and how many of their rows are saved on disk."""

    tasks: VectorIndex
    outputs: VectorIndex | None
    saved_rows: int


class IndexFiles:
    """The derived index files of the collection in ``directory``.

    ``embedder`` and ``dim`` identify the vector space the files must be in;
    ``exact_limit`` is passed to every :class:`VectorIndex` made here. Row
    *n* of an index is the *n*-th record version of the log (``rows``).
    """

    def __init__(self, directory: Path, *, embedder: str, dim: int, exact_limit: int) -> None:
        self.dir = directory
        self.embedder = embedder
        self.dim = dim
        self.exact_limit = exact_limit

    def new_index(self) -> VectorIndex:
        """An empty index of this collection's dimension."""
        return VectorIndex(self.dim, exact_limit=self.exact_limit)

    def read_state(self, rows: Sequence[MemoryRecord]) -> IndexState | None:
        """``index.json`` if it describes index files usable with the log rows ``rows``."""
        path = self.dir / INDEX_STATE
        try:
            state = IndexState.model_validate_json(path.read_bytes())
        except FileNotFoundError:
            return None
        except (OSError, ValidationError) as exc:
            self._warn_rebuild(f"{path} is unreadable ({type(exc).__name__})")
            return None
        if state.embedder != self.embedder or state.dim != self.dim or state.rows > len(rows):
            return None
        if state.rows:
            last = rows[state.rows - 1]
            if last.id != state.last_id or last.stamp != state.last_stamp:
                return None
        return state

    def load(self, rows: Sequence[MemoryRecord], *, outputs: bool) -> Indexes:
        """The saved indexes that match ``rows`` (empty ones where they do not).

        ``outputs`` asks for the output index too (collections with a
        duplicate check). ``saved_rows`` says how many rows came from disk.
        """
        state = self.read_state(rows)
        tasks = self.new_index()
        out_index = self.new_index() if outputs else None
        saved = 0
        if state is not None:
            try:
                tasks = self._load_file(TASK_INDEX, state.rows)
                saved = state.rows
            except IndexFileError as exc:
                self._warn_rebuild(exc)
            if out_index is not None and state.outputs:
                try:
                    out_index = self._load_file(OUTPUT_INDEX, state.rows)
                except IndexFileError as exc:
                    self._warn_rebuild(exc)
            if out_index is not None and len(out_index) != len(tasks):
                saved = 0
        return Indexes(tasks, out_index, saved_rows=saved)

    def save(self, indexes: Indexes, rows: Sequence[MemoryRecord]) -> None:
        """Write the index files and then ``index.json`` for the first ``len(indexes.tasks)`` rows.

        Call it holding the log's lock with ``rows`` current. Skips the
        writing when the files on disk already cover as much (another
        process saved them). ``index.json`` is removed first and written
        last, so a crash in between leaves no claim about half-written files.
        """
        count = len(indexes.tasks)
        on_disk = self.read_state(rows)
        if (
            on_disk is not None
            and on_disk.rows >= count
            and (indexes.outputs is None or on_disk.outputs)
        ):
            indexes.saved_rows = count
            return
        (self.dir / INDEX_STATE).unlink(missing_ok=True)
        indexes.tasks.save(self.dir / TASK_INDEX)
        if indexes.outputs is not None:
            indexes.outputs.save(self.dir / OUTPUT_INDEX)
        last = rows[count - 1] if count else None
        state = IndexState(
            rows=count,
            last_id=last.id if last else None,
            last_stamp=last.stamp if last else None,
            embedder=self.embedder,
            dim=self.dim,
            outputs=indexes.outputs is not None,
        )
        atomic_write_bytes(self.dir / INDEX_STATE, state.model_dump_json().encode())
        indexes.saved_rows = count

    def remove(self) -> None:
        """Delete the index files (they are rebuilt from the log when next needed)."""
        remove_index_files(self.dir)

    def _load_file(self, name: str, rows: int) -> VectorIndex:
        index = self.new_index()
        index.load(self.dir / name)
        if len(index) != rows:
            raise IndexFileError(
                f"{self.dir / name} has {len(index)} rows, {INDEX_STATE} says {rows}"
            )
        return index

    def _warn_rebuild(self, reason: object) -> None:
        warnings.warn(
            f"rebuilding the search index of {self.dir}: {reason}; the index is derived from "
            f"{ENTRIES}, so nothing is lost; records are re-embedded",
            stacklevel=4,
        )


def embed_missing(
    index: VectorIndex,
    rows: Sequence[R],
    embed: Callable[[Sequence[str]], np.ndarray],
    text: Callable[[R], str],
    what: str,
    *,
    show_progress: bool,
    folder: str,
) -> None:
    """Add to ``index`` the vectors of the ``rows`` it does not cover yet, in chunks.

    A progress bar (``Embedding <what> of <folder>``) shows for large
    catch-ups when ``show_progress`` is true.
    """
    start = len(index)
    total = len(rows)
    if start >= total:
        return
    from rich.progress import Progress

    quiet = not show_progress or total - start < _PROGRESS_FROM
    with Progress(transient=True, disable=quiet) as bar:
        task = bar.add_task(f"Embedding {what} of {folder}", total=total - start)
        for lo in range(start, total, _EMBED_CHUNK):
            chunk = rows[lo : lo + _EMBED_CHUNK]
            index.add(embed([text(r) for r in chunk]))
            bar.advance(task, len(chunk))
