"""A LangGraph ``BaseStore`` whose namespaces are archives on disk.

LangGraph graphs reach long-term memory through ``runtime.store``; apps
that already run on a LangGraph store (``PostgresStore`` for many workers)
expect that interface. :class:`ArchiveStore` gives it over our archives, so
graph code can read and write exemplars the LangGraph way and keep the
archive's durability, sharing between processes and similarity search:

* a namespace tuple is an :class:`~agentic_loop.memory.archive.Archive`
  folder under ``root`` (``("archive", "taglines")`` ->
  ``root/archive/taglines``);
* a key is an entry id, and a value is an archive entry's fields: ``task``
  and ``output`` (required) plus any of ``score``, ``features``,
  ``iterations``, ``model_id``, ``trajectory_id``, ``metadata``. Unknown
  fields are an error rather than silently dropped;
* ``put`` stores or replaces (never rejected as a duplicate: a keyed write
  must be readable back), ``put(..., None)``/``delete`` deletes;
* ``search(prefix, query=...)`` ranks by similarity of the entries' *task*
  to the query, across every archive under the prefix; ``filter`` matches
  value fields (``{"score": {"$gte": 8}}``, operators ``$eq $ne $gt $gte
  $lt $lte``). The task is always what gets embedded, so ``index=`` may be
  ``None``, ``False`` or ``["task"]``. TTLs are not supported.

Example:
    >>> import tempfile
    >>> from agentic_loop.memory.embeddings import HashingEmbedder
    >>> store = ArchiveStore(tempfile.mkdtemp(), embedder=HashingEmbedder())
    >>> store.put(("archive", "taglines"), "t1", {"task": "Tagline for a bookstore",
    ...           "output": "Stories wait on every shelf.", "score": 9})
    >>> store.put(("archive", "taglines"), "t2", {"task": "Tagline for a bakery",
    ...           "output": "Warm bread, every morning.", "score": 7})
    >>> store.get(("archive", "taglines"), "t1").value["output"]
    'Stories wait on every shelf.'
    >>> [item.key for item in store.search(("archive",), query="bookstore tagline", limit=1)]
    ['t1']
    >>> [item.key for item in store.search(("archive",), filter={"score": {"$lt": 8}})]
    ['t2']
    >>> store.list_namespaces()
    [('archive', 'taglines')]
"""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import Iterable, Mapping
from pathlib import Path
from types import TracebackType
from typing import Any, Self

from langgraph.store.base import (
    BaseStore,
    GetOp,
    Item,
    ListNamespacesOp,
    MatchCondition,
    Op,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
    validate_op_namespace,
)
from pydantic import ValidationError

from agentic_loop.errors import ConfigError
from agentic_loop.memory.archive import Archive
from agentic_loop.memory.embeddings import Embedder, TextEmbedder, normalize_rows
from agentic_loop.memory.errors import ArchiveError
from agentic_loop.memory.layout import META, namespace_dir, namespace_of
from agentic_loop.memory.meta import collection_dirs
from agentic_loop.memory.records import ArchiveEntry

__all__ = ["ArchiveStore"]

_MANAGED = frozenset({"id", "created_at", "updated_at"})
_VALUE_FIELDS = sorted(set(ArchiveEntry.model_fields) - _MANAGED)


class ArchiveStore(BaseStore):
    """A LangGraph store over the archives under ``root`` (see the module docstring).

    ``embedder`` (default: the bundled all-MiniLM-L6-v2) is shared by every
    namespace. ``dedup_threshold`` and ``exact_limit`` are passed to each
    :class:`Archive`, so archives opened here and elsewhere keep the same
    indexes; puts themselves are never rejected as duplicates.
    """

    supports_ttl = False

    def __init__(
        self,
        root: str | os.PathLike[str],
        embedder: TextEmbedder | None = None,
        *,
        dedup_threshold: float | None = 0.95,
        exact_limit: int = 50_000,
        lock_timeout: float = 60.0,
    ) -> None:
        self.root = Path(root).expanduser()
        if self.root.exists() and not self.root.is_dir():
            raise ArchiveError(
                f"cannot use {self.root} as the ArchiveStore root: a file is in the way; "
                "pass the path of a folder"
            )
        self.embedder: TextEmbedder = embedder if embedder is not None else Embedder()
        self._options: dict[str, Any] = {
            "dedup_threshold": dedup_threshold,
            "exact_limit": exact_limit,
            "lock_timeout": lock_timeout,
        }
        self._archives: dict[tuple[str, ...], Archive] = {}
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

    def close(self) -> None:
        """Save the index rows computed here in every archive opened so far."""
        with self._lock:
            for archive in self._archives.values():
                archive.close()

    def archive(self, namespace: tuple[str, ...], *, create: bool = True) -> Archive | None:
        """The :class:`Archive` behind ``namespace`` (created if needed, unless
        ``create=False``)."""
        key = tuple(namespace)
        with self._lock:
            if key not in self._archives:
                folder = namespace_dir(self.root, key)
                if not create and not (folder / META).is_file():
                    return None
                self._archives[key] = Archive(self.root, key, self.embedder, **self._options)
            return self._archives[key]

    # -- BaseStore ------------------------------------------------------------------

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        """Run ``ops`` in order; consecutive puts are grouped into one durable write per archive."""
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
        archive = self.archive(op.namespace, create=False)
        entry = archive.get(op.key) if archive is not None else None
        return None if entry is None else _item(tuple(op.namespace), entry)

    def _flush(self, pending: dict[tuple[tuple[str, ...], str], PutOp]) -> None:
        if not pending:
            return
        by_namespace: dict[tuple[str, ...], list[PutOp]] = {}
        for (namespace, _), op in pending.items():
            by_namespace.setdefault(namespace, []).append(op)
        pending.clear()
        for namespace, ops in by_namespace.items():
            upserts = [_entry(namespace, op) for op in ops if op.value is not None]
            deletions = [op.key for op in ops if op.value is None]
            if upserts:
                self.archive(namespace).add_many(upserts, dedup=False)  # type: ignore[union-attr]
            if deletions:
                archive = self.archive(namespace, create=False)
                if archive is not None:
                    archive.delete(*deletions)

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
        # Embedded once for all namespaces (they share the store's embedder).
        vector = normalize_rows(self.embedder.embed([op.query]))[0] if op.query else None

        def keep(entry: ArchiveEntry) -> bool:
            return op.filter is None or _matches(_value(entry), op.filter)

        found: list[SearchItem] = []
        for namespace in namespaces:
            archive = self.archive(namespace, create=False)
            if archive is None:
                continue
            if vector is not None:
                hits = archive.search_by_vector(vector, k=wanted, where=keep)
                found.extend(_item(namespace, h.entry, h.similarity) for h in hits)
            else:
                found.extend(_item(namespace, e) for e in archive.entries() if keep(e))
        if vector is not None:
            found.sort(key=lambda item: item.score or 0.0, reverse=True)
        return found[op.offset : wanted]

    def _list_namespaces(self, op: ListNamespacesOp) -> list[tuple[str, ...]]:
        conditions = op.match_conditions or ()
        namespaces = [
            ns for ns in self._namespaces() if all(_match_condition(c, ns) for c in conditions)
        ]
        if op.max_depth is not None:
            namespaces = sorted({ns[: op.max_depth] for ns in namespaces})
        return namespaces[op.offset : op.offset + op.limit]

    def _namespaces(self, prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
        """Every namespace under ``root`` starting with ``prefix`` that holds an archive, sorted."""
        base = namespace_dir(self.root, prefix)
        if not base.is_dir():
            return []
        # A corrupted meta.json is reported when that archive is opened, not while listing.
        folders = collection_dirs(base, Archive.kind, skip_corrupted=True)
        return sorted(namespace_of(self.root, f) for f in folders if f != self.root)


# -- value mapping ------------------------------------------------------------------------


def _entry(namespace: tuple[str, ...], op: PutOp) -> ArchiveEntry:
    if op.index is not None and op.index is not False and list(op.index) != ["task"]:
        raise ConfigError(
            f"index={op.index!r} (for key {op.key!r} in {namespace}) cannot be honoured: "
            "ArchiveStore always indexes the entry's 'task'; pass index=None"
        )
    value = dict(op.value or {})
    managed = _MANAGED & value.keys()
    if managed:
        raise ConfigError(
            f"value for key {op.key!r} in {namespace} sets {sorted(managed)}, which the store "
            "manages (the key is the id; times are set on write); remove them"
        )
    try:
        return ArchiveEntry(id=op.key, **value)
    except ValidationError as exc:
        optional = ", ".join(f for f in _VALUE_FIELDS if f not in ("task", "output"))
        raise ConfigError(
            f"value for key {op.key!r} in {namespace} is not an archive entry; values need 'task' "
            f"and 'output' strings and may have {optional}; problem: {exc}"
        ) from exc


def _value(entry: ArchiveEntry) -> dict[str, Any]:
    return entry.model_dump(mode="json", exclude=set(_MANAGED))


def _item(
    namespace: tuple[str, ...], entry: ArchiveEntry, score: float | None = None
) -> SearchItem:
    return SearchItem(
        namespace=namespace,
        key=entry.id,
        value=_value(entry),
        created_at=entry.created_at,
        updated_at=entry.stamp,
        score=score,
    )


# -- filters and namespace matching -----------------------------------------------------

_OPERATORS = {
    "$eq": lambda a, b: a == b,
    "$ne": lambda a, b: a != b,
    "$gt": lambda a, b: a is not None and a > b,
    "$gte": lambda a, b: a is not None and a >= b,
    "$lt": lambda a, b: a is not None and a < b,
    "$lte": lambda a, b: a is not None and a <= b,
}


def _matches(value: Any, condition: Any) -> bool:
    """Whether ``value`` satisfies a LangGraph-style filter (nested dicts, ``$`` operators)."""
    if isinstance(condition, Mapping):
        if condition and all(isinstance(k, str) and k.startswith("$") for k in condition):
            for operator, operand in condition.items():
                test = _OPERATORS.get(operator)
                if test is None:
                    raise ConfigError(
                        f"unsupported filter operator {operator!r}; use one of "
                        f"{', '.join(_OPERATORS)}"
                    )
                try:
                    if not test(value, operand):
                        return False
                except TypeError:
                    return False
            return True
        return isinstance(value, Mapping) and all(
            _matches(value.get(k), v) for k, v in condition.items()
        )
    return bool(value == condition)


def _match_condition(condition: MatchCondition, namespace: tuple[str, ...]) -> bool:
    path = tuple(condition.path)
    if len(namespace) < len(path):
        return False
    if condition.match_type == "prefix":
        part = namespace[: len(path)]
    elif condition.match_type == "suffix":
        part = namespace[len(namespace) - len(path) :]
    else:
        raise ConfigError(
            f"unsupported namespace match type {condition.match_type!r}; use 'prefix' or 'suffix'"
        )
    return all(p == "*" or p == n for p, n in zip(path, part))
