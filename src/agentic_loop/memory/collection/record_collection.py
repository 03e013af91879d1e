"""The machinery behind Archive and ReflexionMemory: a record log plus derived vector indexes.

Both memories are "records on disk, found by task similarity". This class
does that once:

* The log (``entries.jsonl``, a :class:`~agentic_loop.jsonl_log.JsonlLog`)
  is the only source of truth. A change of a record is a new version with
  the same id; a deletion is a tombstone line
  (:mod:`~agentic_loop.memory.collection.replay` says what they add up to). Writes
  are fsync'd under a cross-process lock.
* The indexes (``index.faiss`` for tasks, ``outputs.faiss`` for duplicate
  checks) are derived (:mod:`~agentic_loop.memory.collection.index_files`); if they
  are missing, unreadable or behind the log, only the missing rows are
  embedded. Index row *n* is the *n*-th record version in the log;
  superseded and deleted rows are skipped at search time
  (:mod:`~agentic_loop.memory.ranking`) and dropped by compaction
  (:mod:`~agentic_loop.memory.collection.prune` chooses what stays).
* Every read first picks up what other processes appended (one ``stat``
  when nothing changed), so several workers can share one collection.

:class:`~agentic_loop.memory.collection.base.CollectionBase` holds the open folder and
keeps the in-memory view in step; this module adds the operations, as the
primitives (FAISS nearest rows, stored vectors, the current version of an
id) of the one memory policy, :mod:`agentic_loop.memory.policy`, which
decides what a search returns and what an add accepts.
Subclasses choose the record type and expose a friendly API; see
:class:`~agentic_loop.memory.archive.Archive`.

Example:
    >>> import tempfile
    >>> from agentic_loop.memory.embeddings import HashingEmbedder
    >>> from agentic_loop.memory.records import ReflectionEntry
    >>> class Notes(RecordCollection[ReflectionEntry]):
    ...     record_type = ReflectionEntry
    ...     kind = "reflexion"
    >>> folder = tempfile.mkdtemp()
    >>> with Notes(folder, embedder=HashingEmbedder()) as notes:
    ...     results = notes.add_many([{"task": "sum a column", "reflection": "read all rows"},
    ...                               {"task": "write a haiku", "reflection": "5-7-5"}])
    >>> [r.status for r in results]
    ['added', 'added']
    >>> other = Notes(folder, embedder=HashingEmbedder())    # another process, same folder
    >>> [hit.entry.reflection for hit in other.search("sum the column", k=1)]
    ['read all rows']
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

from agentic_loop.errors import ConfigError
from agentic_loop.jsonl_log import LogRead, write_jsonl
from agentic_loop.memory.collection.base import CollectionBase
from agentic_loop.memory.collection.index_files import Indexes
from agentic_loop.memory.collection.prune import PruneResult
from agentic_loop.memory.policy import (
    admit,
    check_search,
    check_search_args,
    coerce_records,
    pool_size,
    select,
)
from agentic_loop.memory.ranking import ranked
from agentic_loop.memory.records import AddResult, MemoryRecord, SearchHit, Tombstone

__all__ = ["RecordCollection"]

R = TypeVar("R", bound=MemoryRecord)


class RecordCollection(CollectionBase[R]):
    """A persistent, similarity-searchable collection of ``record_type`` records.

    Arguments as for :class:`~agentic_loop.memory.collection.base.CollectionBase`: ``path``
    is the root folder and ``namespace`` a label or tuple of labels under it
    (one folder each). ``embedder`` defaults to the bundled all-MiniLM-L6-v2.
    ``dedup_threshold`` (cosine, 0-1, or ``None``) rejects records whose
    dedup text is that close to a stored one. ``reembed`` allows opening
    with another embedder than the one that built the collection
    (everything is re-embedded). ``exact_limit`` is the size up to which
    search is exact (HNSW above). ``lock_timeout`` bounds waits on other
    processes (seconds).
    """


    def __len__(self) -> int:
        with self._mutex:
            self._refresh()
            return len(self._replay.latest)

    def __contains__(self, record_id: object) -> bool:
        with self._mutex:
            self._refresh()
            return record_id in self._replay.latest

    def get(self, record_id: str) -> R | None:
        """The current version of the record with ``record_id``, or ``None``."""
        with self._mutex:
            self._refresh()
            return self._replay.current(record_id)

    def entries(self) -> list[R]:
        """Every current record, oldest version first (log order)."""
        with self._mutex:
            self._refresh()
            return self._replay.live()

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
        check_search(query, k, min_score, mmr)
        if len(self) == 0:  # nothing to find: spare loading the embedding model
            return []
        vector = self.embed([query])[0]
        return self.search_by_vector(vector, k, min_score=min_score, mmr=mmr, where=where)

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
        check_search_args(k, min_score, mmr)
        with self._mutex:
            self._refresh()
            indexes = self._ensure_indexes()
            query = indexes.tasks.check(np.asarray(vector, dtype=np.float32).reshape(1, -1))[0]
            rows = self._replay.rows

            def accept(row: int) -> bool:
                return self._replay.is_live(row) and (where is None or where(rows[row]))

            def vectors(pool: list[int]) -> tuple[np.ndarray, np.ndarray]:
                return query, indexes.tasks.reconstruct(pool)

            pool = ranked(indexes.tasks, query, pool_size(k, mmr), accept, min_score)
            hits = select(pool, k, min_score=min_score, mmr=mmr, vectors=vectors)
            found = [SearchHit(rows[row], float(sim)) for row, sim in hits]
            self._save_indexes()
        return found

    def export(self, path: str | os.PathLike[str]) -> int:
        """Write every current record to ``path`` as JSON Lines (atomically); return how many."""
        target = Path(path).expanduser()
        if target.is_dir():
            raise ConfigError(
                f"export path {target} is a folder; pass a file path such as "
                f"{target / 'export.jsonl'}"
            )
        with contextlib.suppress(FileNotFoundError):
            if target.samefile(self._log.path):
                raise ConfigError(
                    f"export path {target} is the collection's own log; pass another file path"
                )
        return write_jsonl(target, self.entries(), self.record_type)

    # -- writing ----------------------------------------------------------------------

    def delete(self, *record_ids: str) -> int:
        """Delete records by id (a tombstone line each); return how many existed."""
        with self._mutex, self._log.locked():
            self._refresh()
            live = self._replay.latest
            present = list(dict.fromkeys(i for i in record_ids if i in live))
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
        items = coerce_records(self.record_type, self.kind, records)
        return self._add_records(items, dedup=dedup)  # type: ignore[arg-type]

    def _add_records(self, records: Sequence[R], *, dedup: bool) -> list[AddResult[R]]:
        """Store records (new ids added, known ids replaced), rejecting near-duplicates."""
        if not records:
            return []
        n = len(records)
        texts = [r.search_text() for r in records]
        if self._keeps_outputs:  # one embedder call for both: per-call overhead dominates
            texts += [r.dedup_text() or "" for r in records]
        vectors = self.embed(texts)
        task_vecs = vectors[:n]
        out_vecs = vectors[n:] if self._keeps_outputs else None
        with self._mutex, self._log.locked():
            self._refresh()
            indexes = self._ensure_indexes()
            stored_outputs = indexes.outputs
            gate = dedup and out_vecs is not None and stored_outputs is not None
            rows = self._replay.rows
            threshold = self.dedup_threshold if self.dedup_threshold is not None else 1.0

            def stored_near(i: int, record: R) -> list[tuple[R, float]]:
                assert out_vecs is not None and stored_outputs is not None
                hits = ranked(
                    stored_outputs,
                    out_vecs[i],
                    1,
                    lambda row: self._replay.is_live(row) and rows[row].id != record.id,
                    threshold,
                )
                return [(rows[row], float(sim)) for row, sim in hits]

            results, accepted_pos = admit(
                records,
                previous=lambda i, record: self._replay.current(record.id),
                threshold=threshold if gate else None,
                out_vecs=out_vecs,
                stored_near=stored_near,
            )
            accepted = [results[i].entry for i in accepted_pos]
            if accepted:
                self._log.append_many(accepted, consume=True)
                self._apply(LogRead(list(accepted)))
                indexes.tasks.add(task_vecs[accepted_pos])
                if indexes.outputs is not None and out_vecs is not None:
                    indexes.outputs.add(out_vecs[accepted_pos])
            self._save_indexes()
        return results

    def _compact(self, choose: Callable[[list[R]], Iterable[R]]) -> PruneResult:
        """Rewrite the log keeping the records ``choose`` picks from the live ones (oldest first).

        Atomic: a crash leaves the old log or the new one. Index vectors are
        carried over, not re-embedded.
        """
        with self._mutex, self._log.locked():
            self._refresh()
            indexes = self._ensure_indexes()
            live_rows = self._replay.live_rows()
            live = [self._replay.rows[row] for row in live_rows]
            keep_ids = {r.id for r in choose(live)}
            keep_rows = [row for row in live_rows if self._replay.rows[row].id in keep_ids]
            kept = [self._replay.rows[row] for row in keep_rows]
            task_vecs = indexes.tasks.reconstruct(keep_rows)
            out_vecs = None
            if indexes.outputs is not None:
                out_vecs = indexes.outputs.reconstruct(keep_rows)
            lines_before = self._log.lines_read
            self._files.remove()
            self._log.rewrite(kept)
            self._replay.apply(kept, reset=True)
            tasks = self._files.new_index()
            tasks.add(task_vecs)
            outputs = None
            if out_vecs is not None:
                outputs = self._files.new_index()
                outputs.add(out_vecs)
            self._indexes = Indexes(tasks, outputs, saved_rows=0)
            self._save_indexes(force=True)
        return PruneResult(
            kept=len(kept), removed=len(live) - len(kept), lines_dropped=lines_before - len(kept)
        )

    # -- internals ----------------------------------------------------------------------
