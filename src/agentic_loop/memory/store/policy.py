"""Memory over any LangGraph store: what Archive and ReflexionMemory do, in a namespace.

Why: the architectures read and write memory through the graph's store,
so the same run keeps its exemplars in the local archive, in an
``InMemoryStore`` or in a ``PostgresStore`` shared by many workers. The
policy must not change with the backend (search by task similarity with a
minimum similarity and MMR for variety, a near-duplicate gate on outputs,
a guard against mixing embedders), so it is written once, in
:mod:`agentic_loop.memory.policy`; this module is the store backend's
primitives under it (the store's vector search, get and put, embedding
with the store's embeddings). :func:`open_memory` gives the architectures
one object with that policy for any store:

* over an :class:`~agentic_loop.memory.store.archive_store.ArchiveStore` (the local
  default), the :class:`~agentic_loop.memory.Archive` or
  :class:`~agentic_loop.memory.ReflexionMemory` itself (FAISS indexes,
  its ``meta.json`` embedder guard, a gate over every stored output);
* over any other store, a :class:`StoreMemory`: the store ranks by its
  vector index (cosine); MMR and the gate embed candidates with the
  store's own embeddings; the gate compares an output with the outputs of
  the ``dedup_pool`` records whose tasks are most similar (the records
  retrieval would show together); the embedder that first wrote the
  namespace is recorded under ``("agentic_loop_meta", *namespace)`` and a
  store that embeds with another one is refused. A store that persists
  outside the process (a ``PostgresStore``) is recorded, before the first
  write, in the data folder's ``places.jsonl`` (:mod:`agentic_loop.text_places`),
  so ``agentic-loop forget`` erases a user's records there too.

Example:
    >>> from langgraph.store.memory import InMemoryStore
    >>> from agentic_loop.memory.embeddings import HashingEmbedder
    >>> from agentic_loop.memory.store.index import store_index
    >>> store = InMemoryStore(index=store_index(HashingEmbedder()))
    >>> archive = open_memory(store, ("archive", "taglines"), "archive")
    >>> [r.status for r in archive.add_many([
    ...     {"task": "Tagline for a bookstore", "output": "Stories wait on every shelf."},
    ...     {"task": "Tagline for a book shop", "output": "Stories wait on every shelf!"},
    ...     {"task": "Tagline for a bakery", "output": "Warm bread, every morning."}])]
    ['added', 'duplicate', 'added']
    >>> [h.entry.output for h in archive.search("bookstore tagline", k=1, min_score=0.3)]
    ['Stories wait on every shelf.']
    >>> store.get(("archive", "taglines"), archive.search("bakery", k=1)[0].entry.id).value["task"]
    'Tagline for a bakery'
"""

from __future__ import annotations

import threading
import weakref
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Generic, Protocol, TypeVar

import numpy as np
from langchain_core.embeddings import Embeddings
from langgraph.store.base import BaseStore, GetOp, PutOp, SearchItem, SearchOp

from agentic_loop.errors import ConfigError
from agentic_loop.memory.embeddings import Embedder, normalize_rows
from agentic_loop.memory.errors import ArchiveError
from agentic_loop.memory.policy import (
    admit,
    check_embedder,
    check_search,
    coerce_records,
    pool_size,
    select,
)
from agentic_loop.memory.records import RECORD_TYPES, AddResult, MemoryRecord, SearchHit
from agentic_loop.memory.store.archive_store import ArchiveStore
from agentic_loop.memory.store.index import StoreEmbeddings, store_embedder
from agentic_loop.memory.store.values import record_of, value_of
from agentic_loop.text_places import record_store

__all__ = ["META_PREFIX", "MemoryView", "StoreMemory", "check_store_index", "open_memory"]

R = TypeVar("R", bound=MemoryRecord)
R_co = TypeVar("R_co", bound=MemoryRecord, covariant=True)

META_PREFIX = "agentic_loop_meta"
"""First label of the namespace where :class:`StoreMemory` records a namespace's embedder."""

_CACHE_ROWS = 4096  # vectors of recently seen texts (MMR pools repeat from run to run)


class MemoryView(Protocol[R_co]):
    """What the architectures use of a memory: similarity search and gated adds."""

    def search(
        self, query: str, k: int = 3, *, min_score: float | None = None,
        mmr: float | None = None,
    ) -> Sequence[SearchHit[Any]]: ...

    def add_many(
        self, records: Iterable[Any], *, dedup: bool = True
    ) -> Sequence[AddResult[Any]]: ...


class StoreMemory(Generic[R]):
    """The records of ``record_type`` in ``namespace`` of a LangGraph ``store``, with the
    memory policy (see the module docstring).

    ``dedup_threshold``: cosine similarity at which an output is a
    near-duplicate (``None``: no gate; reflections have none).
    ``dedup_pool``: how many task-similar records the gate compares with.
    """

    def __init__(
        self,
        store: BaseStore,
        namespace: tuple[str, ...],
        record_type: type[R],
        *,
        dedup_threshold: float | None = 0.95,
        dedup_pool: int = 32,
    ) -> None:
        if not isinstance(store, BaseStore):
            raise ConfigError(
                f"store={store!r:.80} is not a LangGraph BaseStore; pass e.g. "
                "InMemoryStore(index=store_index()) or a PostgresStore with an index"
            )
        check_store_index(store)
        if dedup_threshold is not None and not 0.0 < dedup_threshold <= 1.0:
            raise ConfigError(
                f"dedup_threshold={dedup_threshold}: pass a cosine similarity in (0, 1], "
                "or None to turn the duplicate check off"
            )
        self.store = store
        self.namespace = tuple(namespace)
        self.record_type = record_type
        self.kind = record_type.collection_kind
        self.dedup_threshold = dedup_threshold if record_type.dedup_field else None
        self.dedup_pool = dedup_pool
        self._embed_texts = _vectors_of(store)
        self._cache: OrderedDict[str, np.ndarray] = OrderedDict()
        self._lock = threading.Lock()
        self._embedder_checked = False
        self._recorded = False

    def __repr__(self) -> str:
        return f"StoreMemory({type(self.store).__name__}, {self.namespace!r}, {self.kind!r})"

    def search(
        self,
        query: str,
        k: int = 3,
        *,
        min_score: float | None = None,
        mmr: float | None = None,
    ) -> list[SearchHit[R]]:
        """The ``k`` records whose task is most similar to ``query``, most similar first.

        As :meth:`Archive.search <agentic_loop.memory.Archive.search>`:
        ``min_score`` drops hits below that cosine similarity; ``mmr`` (a
        lambda in [0, 1]) re-ranks a wider pool for variety.
        """
        check_search(query, k, min_score, mmr)
        self._check_embedder()
        pool = [(self._record(item), score) for item, score in
                self._ranked(query, pool_size(k, mmr))
                if min_score is None or score >= min_score]

        def vectors(records: list[R]) -> tuple[np.ndarray, np.ndarray]:
            rows = self._embed([query, *(r.search_text() for r in records)])
            return rows[0], rows[1:]

        hits = select(pool, k, min_score=min_score, mmr=mmr, vectors=vectors)
        return [SearchHit(record, score) for record, score in hits]

    def add_many(
        self, records: Iterable[R | Mapping[str, Any]], *, dedup: bool = True
    ) -> list[AddResult[R]]:
        """Store records in one batch; one :class:`AddResult` each, in order.

        Records are validated first (a bad one raises and nothing is
        written). A record whose ``id`` is stored replaces it. With
        ``dedup`` (and a threshold), an output too close to a stored one, or
        to an earlier one of the batch, is rejected as ``"duplicate"``.
        """
        items = coerce_records(self.record_type, self.kind, records)
        if not items:
            return []
        self._check_embedder()
        present = self.store.batch([GetOp(self.namespace, r.id) for r in items])
        gate = dedup and self.dedup_threshold is not None
        neighbours = self._neighbours(items) if gate else []
        vectors = self._dedup_vectors(items, neighbours) if gate else {}
        out_vecs = np.stack([vectors[r.dedup_text() or ""] for r in items]) if gate else None

        def stored_near(i: int, record: R) -> list[tuple[R, float]]:
            pool = neighbours[i]
            if not pool or out_vecs is None:
                return []
            sims = np.stack([vectors[n.dedup_text() or ""] for n in pool]) @ out_vecs[i]
            return list(zip(pool, (float(s) for s in sims)))

        def previous(i: int, record: R) -> R | None:
            stored = present[i]
            return None if stored is None else self._record(stored)  # type: ignore[arg-type]

        results, positions = admit(
            items,
            previous=previous,
            threshold=self.dedup_threshold if gate else None,
            out_vecs=out_vecs,
            stored_near=stored_near,
        )
        accepted = [results[i].entry for i in positions]
        if accepted and not self._recorded:  # before the first write: `forget` must find it
            self._recorded = True
            record_store(self.store, what=f"{self.kind} memory store")
        field = [self.record_type.search_field]
        self.store.batch([PutOp(self.namespace, r.id, value_of(r), index=field) for r in accepted])
        return results

    # -- internals ------------------------------------------------------------------

    def _ranked(self, query: str, limit: int) -> list[tuple[SearchItem, float]]:
        """Hits of ``query`` with their similarity. Items the store could not score (written
        without a vector, e.g. by another program) are passed over; a store that scores none
        has no vector index, which is an error."""
        return self._scored(self.store.search(self.namespace, query=query, limit=limit))

    def _scored(self, items: list[SearchItem]) -> list[tuple[SearchItem, float]]:
        ranked = [(item, float(item.score)) for item in items if item.score is not None]
        if items and not ranked:
            raise ConfigError(
                f"the {type(self.store).__name__} returned unranked items for a query in "
                f"{self.namespace}: it has no vector index; build it with "
                "index=store_index() (agentic_loop.memory)"
            )
        return ranked

    def _neighbours(self, records: list[R]) -> list[list[R]]:
        """The ``dedup_pool`` stored records most task-similar to each record: one store
        batch for the whole write (the store embeds the queries together)."""
        ops = [SearchOp(self.namespace, query=r.search_text(), limit=self.dedup_pool)
               for r in records]
        found = self.store.batch(ops)
        return [[self._record(item) for item, _ in self._scored(items)]  # type: ignore[arg-type]
                for items in found]

    def _dedup_vectors(self, records: list[R], neighbours: list[list[R]]) -> dict[str, np.ndarray]:
        """The dedup-text vector of every record and candidate of a write, in one embedder
        call (texts seen recently come from the cache)."""
        texts = [r.dedup_text() or "" for r in records]
        texts += [n.dedup_text() or "" for pool in neighbours for n in pool]
        unique = list(dict.fromkeys(texts))
        return dict(zip(unique, self._embed(unique))) if unique else {}

    def _embed(self, texts: list[str]) -> np.ndarray:
        with self._lock:
            missing = list(dict.fromkeys(t for t in texts if t not in self._cache))
        if missing:
            fresh = self._embed_texts(missing)
            with self._lock:
                for text, vector in zip(missing, fresh):
                    self._cache[text] = vector
                while len(self._cache) > _CACHE_ROWS:
                    self._cache.popitem(last=False)
        with self._lock:
            rows = [self._cache.get(t) for t in texts]
        if any(row is None for row in rows):  # evicted meanwhile by another thread: embed again
            return self._embed_texts(texts)
        return np.stack(rows)  # type: ignore[arg-type]

    def _record(self, item: SearchItem) -> R:
        try:
            return record_of(self.record_type, self.namespace, item.key, item.value,
                             created_at=item.created_at, updated_at=item.updated_at)
        except ConfigError as exc:
            raise ArchiveError(
                f"item {item.key!r} in {tuple(item.namespace)} of the "
                f"{type(self.store).__name__} is not a record of kind {self.kind!r} ({exc}); "
                "remove it, or keep memory in a namespace of its own"
            ) from exc

    def _check_embedder(self) -> None:
        """Refuse a store that embeds with another model than the one that wrote here."""
        if self._embedder_checked:
            return
        described = store_embedder(self.store)
        if described is not None:
            name, dims = described
            meta_ns = (META_PREFIX, *self.namespace)
            found = self.store.get(meta_ns, "embedder")
            if found is None:
                value = {"kind": self.kind, "embedder": name, "dims": dims}
                self.store.put(meta_ns, "embedder", value, index=False)
            else:
                recorded = (found.value.get("embedder"), found.value.get("dims"))
                check_embedder(recorded, (name, dims), mismatch=lambda: (
                    f"the {self.kind} in {self.namespace} of the {type(self.store).__name__} was "
                    f"written with the embedder {recorded[0]!r} (dim {recorded[1]}), but the "
                    f"store embeds with {name!r} (dim {dims}); build the store's index with the "
                    "embedder that wrote it, or use another namespace"
                ))
        self._embedder_checked = True


# -- opening ----------------------------------------------------------------------------

_views: weakref.WeakKeyDictionary[BaseStore, dict[tuple[Any, ...], StoreMemory[Any]]] = (
    weakref.WeakKeyDictionary()
)
_views_lock = threading.Lock()


def open_memory(store: BaseStore, namespace: tuple[str, ...], kind: str) -> MemoryView[Any]:
    """The memory of ``kind`` (``"archive"`` or ``"reflexion"``) in ``namespace`` of ``store``.

    The collection itself for an :class:`ArchiveStore`; else a
    :class:`StoreMemory`, one per store and namespace (its embedder check
    and vector cache live as long as the store).
    """
    if kind not in RECORD_TYPES:
        raise ConfigError(f"kind={kind!r}: pass one of {', '.join(RECORD_TYPES)}")
    if isinstance(store, ArchiveStore):
        collection = store.collection(tuple(namespace), kind)
        assert collection is not None
        return collection
    key = (tuple(namespace), kind)
    with _views_lock:
        views = _views.setdefault(store, {}) if isinstance(store, BaseStore) else {}
        view = views.get(key)
        if view is None:
            view = StoreMemory(store, tuple(namespace), RECORD_TYPES[kind])
            views[key] = view
    return view


def check_store_index(store: BaseStore) -> None:
    """Refuse a store memory cannot search: no vector index, or one not ranked by cosine."""
    config = getattr(store, "index_config", "unknown")
    if config is None:
        raise ConfigError(
            f"the {type(store).__name__} has no vector index, so memory cannot be searched by "
            "similarity; build it with index=store_index() (agentic_loop.memory), e.g. "
            "InMemoryStore(index=store_index())"
        )
    if isinstance(config, dict) and config.get("distance_type", "cosine") != "cosine":
        raise ConfigError(
            f"the {type(store).__name__}'s index uses distance_type="
            f"{config.get('distance_type')!r}; memory compares cosine similarities: "
            "use distance_type='cosine' (the default)"
        )


def _vectors_of(store: BaseStore) -> Callable[[list[str]], np.ndarray]:
    """Unit vectors in the store's embedding space (the bundled embedder if it has none)."""
    embeddings = getattr(store, "embeddings", None)
    if isinstance(embeddings, StoreEmbeddings):
        inner = embeddings.embedder
        return lambda texts: normalize_rows(np.asarray(inner.embed(texts)))
    if isinstance(embeddings, Embeddings):
        lc = embeddings
        return lambda texts: normalize_rows(np.asarray(lc.embed_documents(texts), np.float32))
    fallback = Embedder()
    return lambda texts: fallback.embed(texts)
