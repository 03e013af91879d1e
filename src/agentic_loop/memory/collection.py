"""The machinery behind Archive and ReflexionMemory: a record log plus derived vector indexes.

Both memories are "records on disk, found by task similarity". This class
does that once:

* The log (``entries.jsonl``, a :class:`~agentic_loop.jsonl_log.JsonlLog`)
  is the only source of truth. A change of a record is a new version with
  the same id; a deletion is a tombstone line. Writes are fsync'd under a
  cross-process lock.
* The indexes (``index.faiss`` for tasks, ``outputs.faiss`` for duplicate
  checks) are derived. ``index.json`` says how many log rows they cover and
  which embedder built them; if they are missing, unreadable or behind the
  log, only the missing rows are embedded. Index row *n* is the *n*-th
  record version in the log; superseded and deleted rows are skipped at
  search time and dropped by compaction.
* Every read first picks up what other processes appended (one ``stat``
  when nothing changed), so several workers can share one collection.

Subclasses choose the record type and expose a friendly API; see
:class:`~agentic_loop.memory.archive.Archive`.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import threading
import warnings
import weakref
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from types import TracebackType
from typing import Any, ClassVar, Generic, Self, TypeVar

import numpy as np
from pydantic import BaseModel, ValidationError

from agentic_loop.atomic import atomic_write_bytes
from agentic_loop.jsonl_log import JsonlLog, LogRead, write_jsonl
from agentic_loop.memory.embeddings import Embedder, TextEmbedder, normalize_rows
from agentic_loop.memory.errors import ArchiveError, EmbedderMismatchError
from agentic_loop.memory.index import IndexFileError, VectorIndex
from agentic_loop.memory.layout import (
    ENTRIES,
    INDEX_STATE,
    META,
    OUTPUT_INDEX,
    TASK_INDEX,
    Namespace,
    namespace_dir,
    normalize_namespace,
)
from agentic_loop.memory.meta import CollectionMeta, read_meta, write_meta
from agentic_loop.memory.mmr import mmr_select
from agentic_loop.memory.records import (
    AddResult,
    MemoryRecord,
    SearchHit,
    Tombstone,
    log_record_type,
    utc_now,
)

__all__ = ["IndexState", "PruneResult", "RecordCollection"]

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


@dataclass(frozen=True)
class PruneResult:
    """What a compaction did: live records ``kept`` and ``removed``, and ``lines_dropped``,
    the log lines it rewrote away in all (removed records, superseded versions,
    tombstones and unreadable lines, the last kept in ``entries.jsonl.corrupt``)."""

    kept: int
    removed: int
    lines_dropped: int


@dataclass
class _Indexes:
    tasks: VectorIndex
    outputs: VectorIndex | None
    saved_rows: int


class RecordCollection(Generic[R]):
    """A persistent, similarity-searchable collection of ``record_type`` records.

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
            raise ValueError(
                f"dedup_threshold must be a cosine similarity in (0, 1] or None, got {dedup_threshold}."
            )
        self.root = Path(path).expanduser()
        self.namespace = normalize_namespace(namespace)
        self.dir = namespace_dir(self.root, self.namespace)
        try:
            self.dir.mkdir(parents=True, exist_ok=True)
        except (FileExistsError, NotADirectoryError) as exc:
            raise ArchiveError(
                f"Cannot use {self.dir} as a {self.kind} folder: a file is in the way ({exc}). "
                "Pass the path of a folder."
            ) from exc
        except PermissionError as exc:
            raise ArchiveError(f"Cannot create the {self.kind} folder {self.dir}: {exc}.") from exc
        self.embedder: TextEmbedder = embedder if embedder is not None else Embedder()
        self.dedup_threshold = dedup_threshold
        self.exact_limit = exact_limit
        self.show_progress = show_progress
        self._keeps_outputs = dedup_threshold is not None and self.record_type.dedup_field is not None
        self._log: JsonlLog[Any] = JsonlLog(
            self.dir / ENTRIES, log_record_type(self.record_type), lock_timeout=lock_timeout
        )
        self._mutex = threading.RLock()
        self._rows: list[R] = []
        self._latest: dict[str, int] = {}
        self._indexes: _Indexes | None = None
        self._dim_checked = False
        with self._log.locked():
            self._remove_orphans()
            self.meta = self._open_meta(reembed)
            self._apply(self._log.read())
        _open_collections.add(self)

    # -- context manager / lifecycle ------------------------------------------------------

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"{type(self).__name__}({str(self.dir)!r}, entries={len(self._latest)})"

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

    # -- reading ----------------------------------------------------------------------

    def __len__(self) -> int:
        with self._mutex:
            self._refresh()
            return len(self._latest)

    def __contains__(self, record_id: object) -> bool:
        with self._mutex:
            self._refresh()
            return record_id in self._latest

    def get(self, record_id: str) -> R | None:
        """The current version of the record with ``record_id``, or ``None``."""
        with self._mutex:
            self._refresh()
            row = self._latest.get(record_id)
            return None if row is None else self._rows[row]

    def entries(self) -> list[R]:
        """Every current record, oldest version first (log order)."""
        with self._mutex:
            self._refresh()
            return [self._rows[row] for row in sorted(self._latest.values())]

    def search(
        self,
        query: str,
        k: int = 3,
        *,
        min_score: float | None = None,
        mmr: float | None = None,
        where: Callable[[R], bool] | None = None,
    ) -> list[SearchHit[R]]:
        """The ``k`` records whose task is most similar to ``query``, most similar first.

        ``min_score`` drops hits below that cosine similarity. ``mmr`` (a
        lambda in [0, 1]) re-ranks for variety with Maximal Marginal
        Relevance. ``where`` keeps only records it returns true for.
        """
        if not isinstance(query, str) or not query.strip():
            raise ValueError(f"search() needs a non-empty query string, got {query!r:.80}.")
        _check_search_args(k, min_score, mmr)
        vector = self.embed([query])[0]
        return self.search_by_vector(vector, k, min_score=min_score, mmr=mmr, where=where)

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Embed ``texts`` with this collection's embedder, as unit float32 rows.

        Normalizing here makes inner product equal cosine similarity even
        for a custom embedder that returns raw vectors.
        """
        vectors = normalize_rows(np.asarray(self.embedder.embed(texts)))
        if vectors.shape[0] != len(texts):
            raise ValueError(
                f"Embedder {self.embedder.name!r} returned {vectors.shape[0]} vectors for {len(texts)} texts."
            )
        return vectors

    def search_by_vector(
        self,
        vector: np.ndarray,
        k: int = 3,
        *,
        min_score: float | None = None,
        mmr: float | None = None,
        where: Callable[[R], bool] | None = None,
    ) -> list[SearchHit[R]]:
        """:meth:`search` with a query already embedded by this collection's embedder
        (see :meth:`embed`; e.g. to search many collections with one embedding)."""
        _check_search_args(k, min_score, mmr)
        with self._mutex:
            self._refresh()
            indexes = self._ensure_indexes()
            query = indexes.tasks.check(np.asarray(vector, dtype=np.float32).reshape(1, -1))[0]

            def accept(row: int) -> bool:
                return self._is_live(row) and (where is None or where(self._rows[row]))

            if mmr is None:
                ranked = _ranked(indexes.tasks, query, k, accept, min_score)
            else:
                pool = _ranked(indexes.tasks, query, max(4 * k, 20), accept, min_score)
                rows = [row for row, _ in pool]
                order = mmr_select(query, indexes.tasks.reconstruct(rows), k, float(mmr))
                ranked = [pool[i] for i in order]
            hits = [SearchHit(self._rows[row], float(sim)) for row, sim in ranked]
            self._save_indexes()
        return hits

    def export(self, path: str | os.PathLike[str]) -> int:
        """Write every current record to ``path`` as JSON Lines (atomically); return how many."""
        target = Path(path).expanduser()
        if target.is_dir():
            raise ValueError(f"Export path {target} is a folder; give a file path such as {target / 'export.jsonl'}.")
        with contextlib.suppress(FileNotFoundError):
            if target.samefile(self._log.path):
                raise ValueError(f"Refusing to export onto the collection's own log {target}.")
        return write_jsonl(target, self.entries(), self.record_type)

    # -- writing ----------------------------------------------------------------------

    def delete(self, *record_ids: str) -> int:
        """Delete records by id (a tombstone line each); return how many existed."""
        with self._mutex, self._log.locked():
            self._refresh()
            present = list(dict.fromkeys(i for i in record_ids if i in self._latest))
            if present:
                tombstones = [Tombstone(id=i) for i in present]
                self._log.append_many(tombstones, consume=True)
                self._apply(LogRead(list(tombstones)))
        return len(present)

    def add_many(
        self, records: Iterable[R | Mapping[str, Any]], *, dedup: bool = True
    ) -> list[AddResult[R]]:
        """Store many records in one durable write; one :class:`AddResult` each, in order.

        Records are validated first (a bad one raises and nothing is
        written). A record whose ``id`` is already stored replaces it. With
        ``dedup`` (and a ``dedup_threshold``), a record too close to a stored
        one, or to an earlier one of the same batch, is rejected.
        """
        items = [self._coerce(i, r) for i, r in enumerate(records)]
        return self._add_records(items, dedup=dedup)

    def _coerce(self, position: int, item: Any) -> R:
        if isinstance(item, self.record_type):
            return item  # type: ignore[return-value]
        if isinstance(item, Mapping):
            try:
                return self.record_type.model_validate(item)  # type: ignore[return-value]
            except ValidationError as exc:
                raise ValueError(f"{self.kind} record {position} is invalid: {exc}") from exc
        raise TypeError(
            f"{self.kind} record {position} is a {type(item).__name__}; pass "
            f"{self.record_type.__name__} objects or dicts with its fields."
        )

    def _add_records(self, records: Sequence[R], *, dedup: bool) -> list[AddResult[R]]:
        """Store records (new ids added, known ids replaced), rejecting near-duplicates."""
        if not records:
            return []
        texts = [r.search_text() for r in records]
        if self._keeps_outputs:  # one embedder call for both: per-call overhead dominates small adds
            texts += [r.dedup_text() or "" for r in records]
        vectors = self.embed(texts)
        task_vecs = vectors[: len(records)]
        out_vecs = vectors[len(records) :] if self._keeps_outputs else None
        check = dedup and out_vecs is not None
        threshold = self.dedup_threshold if self.dedup_threshold is not None else 1.0
        results: list[AddResult[R]] = []
        accepted: list[R] = []
        accepted_pos: list[int] = []
        with self._mutex, self._log.locked():
            self._refresh()
            indexes = self._ensure_indexes()
            pending: dict[str, R] = {}
            now = utc_now()
            for i, record in enumerate(records):
                previous = pending.get(record.id) or self._current(record.id)
                if previous is not None:
                    record = record.model_copy(update={"created_at": previous.created_at, "updated_at": now})
                if check and out_vecs is not None and indexes.outputs is not None:
                    duplicate = self._find_duplicate(indexes.outputs, out_vecs, i, record, accepted, accepted_pos, threshold)
                    if duplicate is not None:
                        results.append(AddResult("duplicate", record, duplicate[0], duplicate[1]))
                        continue
                results.append(AddResult("added" if previous is None else "replaced", record))
                accepted.append(record)
                accepted_pos.append(i)
                pending[record.id] = record
            if accepted:
                self._log.append_many(accepted, consume=True)
                self._apply(LogRead(list(accepted)))
                indexes.tasks.add(task_vecs[accepted_pos])
                if indexes.outputs is not None and out_vecs is not None:
                    indexes.outputs.add(out_vecs[accepted_pos])
            self._save_indexes()
        return results

    def _current(self, record_id: str) -> R | None:
        row = self._latest.get(record_id)
        return None if row is None else self._rows[row]

    def _find_duplicate(
        self,
        outputs: VectorIndex,
        out_vecs: np.ndarray,
        i: int,
        record: R,
        accepted: list[R],
        accepted_pos: list[int],
        threshold: float,
    ) -> tuple[R, float] | None:
        vector = out_vecs[i]
        best: tuple[R, float] | None = None
        hits = _ranked(
            outputs, vector, 1, lambda row: self._is_live(row) and self._rows[row].id != record.id, threshold
        )
        if hits:
            best = (self._rows[hits[0][0]], float(hits[0][1]))
        if accepted_pos:
            sims = out_vecs[accepted_pos] @ vector
            j = int(np.argmax(sims))
            if sims[j] >= threshold and accepted[j].id != record.id and (best is None or sims[j] > best[1]):
                best = (accepted[j], float(sims[j]))
        return best

    def _compact(self, choose: Callable[[list[R]], Iterable[R]]) -> PruneResult:
        """Rewrite the log keeping the records ``choose`` returns (from the live ones, oldest first).

        Atomic: a crash leaves the old log or the new one. Index vectors are
        carried over, not re-embedded.
        """
        with self._mutex, self._log.locked():
            self._refresh()
            indexes = self._ensure_indexes()
            live_rows = sorted(self._latest.values())
            live = [self._rows[row] for row in live_rows]
            keep_ids = {r.id for r in choose(live)}
            keep_rows = [row for row in live_rows if self._rows[row].id in keep_ids]
            kept = [self._rows[row] for row in keep_rows]
            task_vecs = indexes.tasks.reconstruct(keep_rows)
            out_vecs = indexes.outputs.reconstruct(keep_rows) if indexes.outputs is not None else None
            lines_before = self._log.lines_read
            self._remove_index_files()
            self._log.rewrite(kept)
            self._rows = kept
            self._latest = {r.id: i for i, r in enumerate(kept)}
            tasks = self._new_index()
            tasks.add(task_vecs)
            outputs = None
            if out_vecs is not None:
                outputs = self._new_index()
                outputs.add(out_vecs)
            self._indexes = _Indexes(tasks, outputs, saved_rows=0)
            self._save_indexes(force=True)
        return PruneResult(kept=len(kept), removed=len(live) - len(kept), lines_dropped=lines_before - len(kept))

    # -- internals ----------------------------------------------------------------------

    def _open_meta(self, reembed: bool) -> CollectionMeta:
        meta_path = self.dir / META
        meta = read_meta(meta_path)
        if meta is None:
            meta = CollectionMeta(kind=self.kind, embedder=self.embedder.name, dim=self.embedder.dim)
            write_meta(meta_path, meta)
            self._dim_checked = True
            return meta
        if meta.kind != self.kind:
            raise ArchiveError(
                f"{self.dir} holds a {meta.kind!r} collection (see {meta_path}), not a {self.kind!r} "
                "one. Open it with the matching class, or use another folder or namespace."
            )
        if meta.embedder != self.embedder.name:
            if not reembed:
                raise EmbedderMismatchError(
                    f"The {self.kind} at {self.dir} was built with the embedder {meta.embedder!r} "
                    f"(dim {meta.dim}), but it was opened with {self.embedder.name!r}. Open it with the "
                    f"same embedder, or pass reembed=True to re-embed every record with "
                    f"{self.embedder.name!r} (recorded in {meta_path})."
                )
            meta = CollectionMeta(
                kind=self.kind, embedder=self.embedder.name, dim=self.embedder.dim, created_at=meta.created_at
            )
            self._remove_index_files()
            write_meta(meta_path, meta)
            self._dim_checked = True
        return meta

    def _check_dim(self) -> None:
        if self._dim_checked:
            return
        dim = self.embedder.dim
        if dim != self.meta.dim:
            raise EmbedderMismatchError(
                f"The {self.kind} at {self.dir} holds {self.meta.dim}-dimensional vectors from "
                f"{self.meta.embedder!r}, but the embedder given under that name makes {dim}-dimensional "
                "ones. It is a different model: give it its own name, or pass reembed=True."
            )
        self._dim_checked = True

    def _apply(self, read: LogRead[Any]) -> None:
        if read.reset:
            self._rows = []
            self._latest = {}
            self._indexes = None
        for record in read.records:
            if isinstance(record, Tombstone):
                self._latest.pop(record.id, None)
            else:
                self._latest[record.id] = len(self._rows)
                self._rows.append(record)

    def _refresh(self) -> None:
        self._apply(self._log.read())

    def _is_live(self, row: int) -> bool:
        return self._latest.get(self._rows[row].id) == row

    def _new_index(self) -> VectorIndex:
        return VectorIndex(self.meta.dim, exact_limit=self.exact_limit)

    def _ensure_indexes(self) -> _Indexes:
        """Load the saved indexes if they match the log, then embed the rows they miss."""
        if self._indexes is None:
            self._check_dim()
            with self._log.locked():
                self._indexes = self._load_indexes()
        indexes = self._indexes
        self._embed_missing(indexes.tasks, lambda r: r.search_text(), "tasks")
        if indexes.outputs is not None:
            self._embed_missing(indexes.outputs, lambda r: r.dedup_text() or "", "outputs")
        return indexes

    def _load_indexes(self) -> _Indexes:
        state = self._read_state()
        tasks = self._new_index()
        outputs = self._new_index() if self._keeps_outputs else None
        saved = 0
        if state is not None:
            try:
                tasks.load(self.dir / TASK_INDEX)
                if len(tasks) != state.rows:
                    raise IndexFileError(f"{self.dir / TASK_INDEX} has {len(tasks)} rows, {INDEX_STATE} says {state.rows}")
                saved = state.rows
            except IndexFileError as exc:
                self._warn_rebuild(exc)
                tasks = self._new_index()
            if outputs is not None and state.outputs:
                try:
                    outputs.load(self.dir / OUTPUT_INDEX)
                    if len(outputs) != state.rows:
                        raise IndexFileError(
                            f"{self.dir / OUTPUT_INDEX} has {len(outputs)} rows, {INDEX_STATE} says {state.rows}"
                        )
                except IndexFileError as exc:
                    self._warn_rebuild(exc)
                    outputs = self._new_index()
            if outputs is not None and len(outputs) != len(tasks):
                saved = 0
        return _Indexes(tasks, outputs, saved_rows=saved)

    def _read_state(self) -> IndexState | None:
        path = self.dir / INDEX_STATE
        try:
            state = IndexState.model_validate_json(path.read_bytes())
        except FileNotFoundError:
            return None
        except (OSError, ValidationError) as exc:
            self._warn_rebuild(f"{path} is unreadable ({type(exc).__name__})")
            return None
        if state.embedder != self.embedder.name or state.dim != self.meta.dim or state.rows > len(self._rows):
            return None
        if state.rows:
            last = self._rows[state.rows - 1]
            if last.id != state.last_id or last.stamp != state.last_stamp:
                return None
        return state

    def _warn_rebuild(self, reason: object) -> None:
        warnings.warn(
            f"Rebuilding the search index of {self.dir}: {reason}. The index is derived from "
            f"{ENTRIES}, so nothing is lost; records are re-embedded.",
            stacklevel=4,
        )

    def _embed_missing(self, index: VectorIndex, text: Callable[[R], str], what: str) -> None:
        start = len(index)
        total = len(self._rows)
        if start >= total:
            return
        from rich.progress import Progress

        with Progress(transient=True, disable=not self.show_progress or total - start < _PROGRESS_FROM) as bar:
            task = bar.add_task(f"Embedding {what} of {self.dir.name}", total=total - start)
            for lo in range(start, total, _EMBED_CHUNK):
                chunk = self._rows[lo : lo + _EMBED_CHUNK]
                index.add(self.embed([text(r) for r in chunk]))
                bar.advance(task, len(chunk))

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
            if self._indexes is not indexes or rows > len(self._rows):
                return
            on_disk = self._read_state()
            if on_disk is not None and on_disk.rows >= rows and (indexes.outputs is None or on_disk.outputs):
                indexes.saved_rows = rows
                return
            (self.dir / INDEX_STATE).unlink(missing_ok=True)
            indexes.tasks.save(self.dir / TASK_INDEX)
            if indexes.outputs is not None:
                indexes.outputs.save(self.dir / OUTPUT_INDEX)
            last = self._rows[rows - 1] if rows else None
            state = IndexState(
                rows=rows,
                last_id=last.id if last else None,
                last_stamp=last.stamp if last else None,
                embedder=self.embedder.name,
                dim=self.meta.dim,
                outputs=indexes.outputs is not None,
            )
            atomic_write_bytes(self.dir / INDEX_STATE, state.model_dump_json().encode())
            indexes.saved_rows = rows

    def _remove_orphans(self) -> None:
        """Delete temporary files a crashed writer left (safe: writers hold the lock we hold)."""
        for name in (ENTRIES, META, TASK_INDEX, OUTPUT_INDEX, INDEX_STATE):
            for orphan in self.dir.glob(f".{name}.*.tmp"):
                orphan.unlink(missing_ok=True)

    def _remove_index_files(self) -> None:
        for name in (INDEX_STATE, TASK_INDEX, OUTPUT_INDEX):
            (self.dir / name).unlink(missing_ok=True)


_open_collections: weakref.WeakSet[RecordCollection[Any]] = weakref.WeakSet()


@atexit.register
def _save_open_collections() -> None:
    """At exit, save the index rows each open collection computed (best effort: derived data)."""
    for collection in list(_open_collections):
        with contextlib.suppress(Exception):
            collection.close()


def _ranked(
    index: VectorIndex,
    vector: np.ndarray,
    want: int,
    accept: Callable[[int], bool],
    min_score: float | None,
) -> list[tuple[int, float]]:
    """The ``want`` best accepted rows, best first, widening the search past rejected ones."""
    total = len(index)
    fetch = min(total, want + 8)
    while fetch > 0:
        sims, rows = index.search(vector, fetch)
        out: list[tuple[int, float]] = []
        below = False
        for sim, row in zip(sims.tolist(), rows.tolist()):
            if min_score is not None and sim < min_score:
                below = True
                break
            if accept(row):
                out.append((row, sim))
                if len(out) == want:
                    return out
        if below or fetch >= total:
            return out
        fetch = min(total, fetch * 4)
    return []


def _check_search_args(k: int, min_score: float | None, mmr: float | None) -> None:
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise ValueError(f"k must be a positive integer, got {k!r}.")
    if min_score is not None and not -1.0 <= min_score <= 1.0:
        raise ValueError(f"min_score is a cosine similarity in [-1, 1], got {min_score}.")
    if mmr is not None and (isinstance(mmr, bool) or not 0.0 <= float(mmr) <= 1.0):
        raise ValueError(f"mmr is the MMR lambda, a float in [0, 1] (1 = pure relevance), got {mmr!r}.")


def choose_kept(
    live: list[R],
    *,
    max_entries: int | None = None,
    older_than: timedelta | datetime | None = None,
    keep_if: Callable[[R], bool] | None = None,
    rank: Callable[[R], Any] | None = None,
) -> list[R]:
    """The records a prune keeps: those passing ``keep_if`` and not created before
    ``older_than``, then at most ``max_entries`` of them, highest ``rank`` first
    (newest first when ``rank`` is ``None``)."""
    if max_entries is not None and (isinstance(max_entries, bool) or max_entries < 0):
        raise ValueError(f"max_entries must be a non-negative integer, got {max_entries!r}.")
    kept = [r for r in live if keep_if is None or keep_if(r)]
    if older_than is not None:
        cutoff = older_than_cutoff(older_than)
        kept = [r for r in kept if r.created_at >= cutoff]
    if max_entries is not None and len(kept) > max_entries:
        key = rank or (lambda r: r.created_at)
        kept = sorted(kept, key=key, reverse=True)[:max_entries]
    return kept


def older_than_cutoff(older_than: timedelta | datetime) -> datetime:
    """The instant before which records count as "older than" ``older_than``."""
    if isinstance(older_than, timedelta):
        return utc_now() - older_than
    if isinstance(older_than, datetime):
        return older_than if older_than.tzinfo else older_than.replace(tzinfo=utc_now().tzinfo)
    raise TypeError(f"older_than takes a timedelta or a datetime, got {type(older_than).__name__}.")
