"""A LangGraph ``BaseStore`` whose namespaces are memory collections on disk.

LangGraph graphs reach long-term memory through ``runtime.store``, and apps
that run many workers pass a shared ``PostgresStore``. :class:`ArchiveStore`
is the local default behind that interface: the architectures read and
write memory through the graph's store, and when the user passes no store
they get this one, so single-machine users keep the archive's durable log,
its sharing between processes, its FAISS search and its near-duplicate
gate:

* a namespace is a collection folder: an
  :class:`~agentic_loop.memory.archive.Archive`, or a
  :class:`~agentic_loop.memory.reflexion.ReflexionMemory` when its values
  are reflections. ``ArchiveStore(root)`` maps ``("archive", "taglines")``
  to ``root/archive/taglines``; ``ArchiveStore(Archive(...))`` (or a list of
  collections) serves exactly those collections, each at
  :func:`store_namespace` of its kind and namespace (an existing archive
  keeps its folder);
* a key is a record id, and a value is the record's fields less ``id`` and
  the times (:mod:`~agentic_loop.memory.store.values`): ``task`` and
  ``output`` for an archive entry, ``task`` and ``reflection`` for a
  reflection. Unknown fields are an error rather than silently dropped;
* ``put`` stores or replaces (never rejected as a duplicate: a keyed write
  must be readable back), ``put(..., None)``/``delete`` deletes;
* ``search(prefix, query=...)`` ranks by similarity of the records' *task*
  to the query, across every collection under the prefix; ``filter``
  matches value fields (``{"score": {"$gte": 8}}``, operators ``$eq $ne
  $gt $gte $lt $lte``). The task is always what gets embedded, so
  ``index=`` may be ``None``, ``False`` or ``["task"]``. TTLs are not
  supported.

:func:`~agentic_loop.memory.store.policy.open_memory` hands the
architectures the collection itself, so the policy (duplicate gate, MMR)
runs on the FAISS indexes.

Example:
    >>> import tempfile
    >>> from agentic_loop.memory.embeddings import HashingEmbedder
    >>> store = ArchiveStore(tempfile.mkdtemp(), embedder=HashingEmbedder())
    >>> store.put(("archive", "taglines"), "t1", {"task": "Tagline for a bookstore",
    ...           "output": "Stories wait on every shelf.", "score": 9})
    >>> store.put(("archive", "taglines"), "t2", {"task": "Tagline for a bakery",
    ...           "output": "Warm bread, every morning.", "score": 7})
    >>> store.put(("reflexion", "taglines"), "r1", {"task": "Tagline for a bakery",
    ...           "reflection": "Name the product."})
    >>> store.get(("archive", "taglines"), "t1").value["output"]
    'Stories wait on every shelf.'
    >>> [item.key for item in store.search(("archive",), query="bookstore tagline", limit=1)]
    ['t1']
    >>> [item.key for item in store.search(("archive",), filter={"score": {"$lt": 8}})]
    ['t2']
    >>> store.list_namespaces()
    [('archive', 'taglines'), ('reflexion', 'taglines')]
    >>> from agentic_loop.memory.archive import Archive
    >>> mounted = ArchiveStore(Archive(tempfile.mkdtemp(), "taglines", HashingEmbedder()))
    >>> mounted.list_namespaces(), mounted.collection(("archive", "taglines")).namespace
    ([('archive', 'taglines')], ('taglines',))
"""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import Iterable, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any, Self

import numpy as np
from langgraph.store.base import (
    BaseStore,
    GetOp,
    Item,
    ListNamespacesOp,
    Op,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
    validate_op_namespace,
)

from agentic_loop.errors import ConfigError
from agentic_loop.memory.archive import Archive
from agentic_loop.memory.collection.layout import META, Namespace, namespace_dir, namespace_of
from agentic_loop.memory.collection.meta import collection_dirs, read_meta
from agentic_loop.memory.collection.record_collection import RecordCollection
from agentic_loop.memory.embeddings import Embedder, TextEmbedder
from agentic_loop.memory.errors import ArchiveError
from agentic_loop.memory.records import MemoryRecord
from agentic_loop.memory.reflexion import ReflexionMemory
from agentic_loop.memory.store.values import (
    item_of,
    kind_of_value,
    match_condition,
    matches,
    record_of,
    value_of,
)

__all__ = ["COLLECTIONS", "ArchiveStore", "store_namespace"]

Collection = RecordCollection[Any]

COLLECTIONS: dict[str, type[RecordCollection[Any]]] = {
    "archive": Archive,
    "reflexion": ReflexionMemory,
}
"""The collection class of each memory kind (the first label of its store namespace)."""


def store_namespace(kind: str, namespace: Namespace | None = None) -> tuple[str, ...]:
    """The store namespace of a ``kind`` collection with ``namespace``: ``(kind, *labels)``,
    or ``(kind, "default")`` for none.

    >>> store_namespace("archive", "taglines"), store_namespace("reflexion")
    (('archive', 'taglines'), ('reflexion', 'default'))
    """
    if namespace is None or namespace == ():
        labels: tuple[str, ...] = ("default",)
    else:
        labels = (namespace,) if isinstance(namespace, str) else tuple(namespace)
    for label in labels:
        if not isinstance(label, str) or not label or "." in label:
            raise ConfigError(
                f"namespace {namespace!r} has the label {label!r}; LangGraph stores take "
                "non-empty labels without periods: pass e.g. 'taglines' or ('users', 'ana')"
            )
    return (kind, *labels)


class ArchiveStore(BaseStore):
    """A LangGraph store over memory collections on disk (see the module docstring).

    ``root`` is a folder (every namespace a collection under it), or an
    :class:`Archive` / :class:`ReflexionMemory` or a list of them (a store
    of exactly those). ``embedder`` (default: the first collection's, else
    the bundled all-MiniLM-L6-v2) opens the collections of a folder.
    ``dedup_threshold`` and ``exact_limit`` are passed to each archive
    opened here, so archives opened here and elsewhere keep the same
    indexes; puts themselves are never rejected as duplicates.
    """

    supports_ttl = False

    def __init__(
        self,
        root: str | os.PathLike[str] | Collection | Sequence[Collection],
        embedder: TextEmbedder | None = None,
        *,
        dedup_threshold: float | None = 0.95,
        exact_limit: int = 50_000,
        lock_timeout: float = 60.0,
    ) -> None:
        collections = _collections(root)
        self._mounts: dict[tuple[str, ...], Collection] = {}
        for collection in collections:
            key = store_namespace(collection.kind, collection.namespace)
            if key in self._mounts:
                raise ConfigError(
                    f"two collections map to the store namespace {key}; give them different "
                    "namespaces"
                )
            self._mounts[key] = collection
        self.root: Path | None = None
        if not collections:
            self.root = Path(root).expanduser()  # type: ignore[arg-type]
            if self.root.exists() and not self.root.is_dir():
                raise ArchiveError(
                    f"cannot use {self.root} as the ArchiveStore root: a file is in the way; "
                    "pass the path of a folder"
                )
        if embedder is None:
            embedder = collections[0].embedder if collections else Embedder()
        self.embedder: TextEmbedder = embedder
        self._options: dict[str, Any] = {
            "dedup_threshold": dedup_threshold,
            "exact_limit": exact_limit,
            "lock_timeout": lock_timeout,
        }
        self._open: dict[tuple[str, ...], Collection] = {}
        self._lock = threading.RLock()

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
        where = str(self.root) if self.root is not None else sorted(self._mounts)
        return f"ArchiveStore({where!r})"

    def close(self) -> None:
        """Save the index rows computed here in every collection opened so far."""
        with self._lock:
            for collection in [*self._mounts.values(), *self._open.values()]:
                collection.close()

    def collection(
        self, namespace: tuple[str, ...], kind: str | None = None, *, create: bool = True
    ) -> Collection | None:
        """The collection behind ``namespace``: created if needed (of ``kind``, default
        ``"archive"``) unless ``create=False``, then ``None`` when there is none."""
        key = tuple(namespace)
        if kind is not None and kind not in COLLECTIONS:
            raise ConfigError(f"kind={kind!r}: pass one of {', '.join(COLLECTIONS)}")
        with self._lock:
            found = self._mounts.get(key)  # (an empty collection is falsy: no `or` here)
            if found is None:
                found = self._open.get(key)
            if found is None:
                found = self._open_folder(key, kind, create)
                if found is None:
                    return None
            if kind is not None and found.kind != kind:
                raise ArchiveError(
                    f"the store namespace {key} holds {found.kind!r} records, not {kind!r} "
                    "ones; use another namespace"
                )
            return found

    def archive(self, namespace: tuple[str, ...], *, create: bool = True) -> Archive | None:
        """The :class:`Archive` behind ``namespace`` (created if needed, unless
        ``create=False``)."""
        found = self.collection(namespace, "archive", create=create)
        return found if isinstance(found, Archive) else None

    def _open_folder(
        self, key: tuple[str, ...], kind: str | None, create: bool
    ) -> Collection | None:
        if self.root is None:
            if not create:
                return None
            raise ConfigError(
                f"namespace {key} is not in this ArchiveStore, which holds only "
                f"{sorted(self._mounts)}; pass ArchiveStore(<folder>) for a store of many "
                "namespaces"
            )
        meta = read_meta(namespace_dir(self.root, key) / META)
        if meta is None and not create:
            return None
        chosen = kind or (meta.kind if meta is not None else "archive")
        cls = COLLECTIONS.get(chosen)
        if cls is None:
            raise ArchiveError(
                f"the folder of namespace {key} holds a {chosen!r} collection, which this "
                f"store does not serve; use a namespace of {', '.join(COLLECTIONS)} records"
            )
        options = dict(self._options)
        if cls is ReflexionMemory:
            options.pop("dedup_threshold")
        collection = cls(self.root, key, self.embedder, **options)
        self._open[key] = collection
        return collection

    # -- BaseStore ------------------------------------------------------------------

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        """Run ``ops`` in order; consecutive puts are grouped into one durable write per
        collection."""
        ops = list(ops)
        for op in ops:
            validate_op_namespace(op)
        results: list[Result] = [None] * len(ops)
        pending: dict[tuple[tuple[str, ...], str], PutOp] = {}
        for i, op in enumerate(ops):
            if isinstance(op, PutOp):
                pending[(tuple(op.namespace), op.key)] = op
                continue
            self._flush(pending)
            if isinstance(op, GetOp):
                results[i] = self._get(op)
            elif isinstance(op, SearchOp):
                results[i] = self._search(op)
            elif isinstance(op, ListNamespacesOp):
                results[i] = self._list_namespaces(op)
            else:
                raise ConfigError(
                    f"operation {type(op).__name__} is not one ArchiveStore runs: {op!r:.200}; "
                    "pass GetOp, PutOp, SearchOp or ListNamespacesOp"
                )
        self._flush(pending)
        return results

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        """:meth:`batch` in a worker thread (file and model work must not block the event loop)."""
        ops = list(ops)
        return await asyncio.get_running_loop().run_in_executor(None, self.batch, ops)

    # -- operations -----------------------------------------------------------------

    def _get(self, op: GetOp) -> Item | None:
        collection = self.collection(op.namespace, create=False)
        record = collection.get(op.key) if collection is not None else None
        return None if record is None else item_of(tuple(op.namespace), record)

    def _flush(self, pending: dict[tuple[tuple[str, ...], str], PutOp]) -> None:
        if not pending:
            return
        by_namespace: dict[tuple[str, ...], list[PutOp]] = {}
        for (namespace, _), op in pending.items():
            by_namespace.setdefault(namespace, []).append(op)
        pending.clear()
        for namespace, ops in by_namespace.items():
            upserts = [op for op in ops if op.value is not None]
            deletions = [op.key for op in ops if op.value is None]
            if upserts:
                existing = self.collection(namespace, create=False)
                first = upserts[0].value or {}
                kind = existing.kind if existing is not None else kind_of_value(first)
                # Validated before a new collection's folder is created for them.
                record_type = COLLECTIONS[kind].record_type
                records = [_record(record_type, namespace, op) for op in upserts]
                collection = existing if existing is not None else self.collection(namespace, kind)
                assert collection is not None
                collection.add_many(records, dedup=False)
            if deletions:
                collection = self.collection(namespace, create=False)
                if collection is not None:
                    collection.delete(*deletions)

    def _search(self, op: SearchOp) -> list[SearchItem]:
        if op.limit < 0 or op.offset < 0:
            raise ConfigError(
                f"search limit and offset must be >= 0, got limit={op.limit}, "
                f"offset={op.offset}; pass non-negative integers"
            )
        wanted = op.offset + op.limit
        namespaces = self._namespaces(tuple(op.namespace_prefix))
        if wanted == 0 or not namespaces:
            return []
        vectors: dict[str, np.ndarray] = {}  # the query, embedded once per embedder

        def keep(record: MemoryRecord) -> bool:
            return op.filter is None or matches(value_of(record), op.filter)

        found: list[SearchItem] = []
        for namespace in namespaces:
            collection = self.collection(namespace, create=False)
            if collection is None:
                continue
            if op.query:
                name = collection.embedder.name
                if name not in vectors:
                    vectors[name] = collection.embed([op.query])[0]
                hits = collection.search_by_vector(vectors[name], k=wanted, where=keep)
                found.extend(item_of(namespace, h.entry, h.similarity) for h in hits)
            else:
                found.extend(item_of(namespace, r) for r in collection.entries() if keep(r))
        if op.query:
            found.sort(key=lambda item: item.score or 0.0, reverse=True)
        return found[op.offset : wanted]

    def _list_namespaces(self, op: ListNamespacesOp) -> list[tuple[str, ...]]:
        conditions = op.match_conditions or ()
        namespaces = [
            ns for ns in self._namespaces() if all(match_condition(c, ns) for c in conditions)
        ]
        if op.max_depth is not None:
            namespaces = sorted({ns[: op.max_depth] for ns in namespaces})
        return namespaces[op.offset : op.offset + op.limit]

    def _namespaces(self, prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
        """Every namespace starting with ``prefix`` that holds a collection, sorted."""
        found = {ns for ns in self._mounts if ns[: len(prefix)] == prefix}
        if self.root is not None:
            base = namespace_dir(self.root, prefix)
            if base.is_dir():
                for kind in COLLECTIONS:
                    # A corrupted meta.json is reported when that collection is opened.
                    folders = collection_dirs(base, kind, skip_corrupted=True)
                    found.update(namespace_of(self.root, f) for f in folders if f != self.root)
        return sorted(found)


def _record(record_type: type[MemoryRecord], namespace: tuple[str, ...], op: PutOp
            ) -> MemoryRecord:
    if op.index is not None and op.index is not False and list(op.index) != ["task"]:
        raise ConfigError(
            f"index={op.index!r} (for key {op.key!r} in {namespace}) cannot be honoured: "
            "ArchiveStore always indexes the entry's 'task'; pass index=None"
        )
    return record_of(record_type, namespace, op.key, op.value)


def _collections(root: object) -> list[Collection]:
    """The collections ``root`` names (none when it is a path); :class:`ConfigError` otherwise."""
    if isinstance(root, RecordCollection):
        return [root]
    if isinstance(root, str | os.PathLike):
        return []
    if isinstance(root, Sequence) and root and all(isinstance(c, RecordCollection) for c in root):
        return list(root)
    raise ConfigError(
        f"ArchiveStore takes a folder path, an Archive or ReflexionMemory, or a list of them; "
        f"got {type(root).__name__}: {root!r:.80}"
    )
