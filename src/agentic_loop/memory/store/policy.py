"""Memory policy over any LangGraph store: what Archive and ReflexionMemory do, in a namespace.

Why: the architectures read and write memory through the graph's store,
so the same run keeps its exemplars in the local archive, in an
``InMemoryStore`` or in a ``PostgresStore`` shared by many workers. The
policy must not change with the backend: search by task similarity with a
minimum similarity and MMR for variety, a near-duplicate gate on outputs,
and a guard against mixing embedders. :func:`open_memory` gives the
architectures one object with that policy for any store:

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
from pydantic import ValidationError

from agentic_loop.errors import ConfigError
from agentic_loop.memory.embeddings import Embedder, normalize_rows
from agentic_loop.memory.errors import ArchiveError, EmbedderMismatchError
from agentic_loop.memory.mmr import mmr_select
from agentic_loop.memory.ranking import check_search_args
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
        if not isinstance(query, str) or not query.strip():
            raise ConfigError(
                f"search() needs a non-empty query string, got {query!r:.80}; pass the task text"
            )
        check_search_args(k, min_score, mmr)
        self._check_embedder()
        pool = k if mmr is None else max(4 * k, 20)
        hits = [
            SearchHit(self._record(item), float(score))
            for item, score in self._ranked(query, pool)
            if min_score is None or score >= min_score
        ]
        if mmr is not None and len(hits) > 1:
            vectors = self._embed([query, *(h.entry.search_text() for h in hits)])
            hits = [hits[i] for i in mmr_select(vectors[0], vectors[1:], k, float(mmr))]
        return hits[:k]

    def add_many(
        self, records: Iterable[R | Mapping[str, Any]], *, dedup: bool = True
    ) -> list[AddResult[R]]:
        """Store records in one batch; one :class:`AddResult` each, in order.

        Records are validated first (a bad one raises and nothing is
        written). A record whose ``id`` is stored replaces it. With
        ``dedup`` (and a threshold), an output too close to a stored one, or
        to an earlier one of the batch, is rejected as ``"duplicate"``.
        """
        items = [self._coerce(i, r) for i, r in enumerate(records)]
        if not items:
            return []
        self._check_embedder()
        present = self.store.batch([GetOp(self.namespace, r.id) for r in items])
        gate = dedup and self.dedup_threshold is not None
        neighbours = self._neighbours(items) if gate else []
        vectors = self._dedup_vectors(items, neighbours) if gate else {}
        results: list[AddResult[R]] = []
        accepted: list[R] = []
        for i, (record, stored) in enumerate(zip(items, present)):
            if gate:
                duplicate = self._duplicate(record, [*neighbours[i], *accepted], vectors)
                if duplicate is not None:
                    results.append(AddResult("duplicate", record, *duplicate))
                    continue
            results.append(AddResult("added" if stored is None else "replaced", record))
            accepted.append(record)
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

    def _duplicate(
        self, record: R, pool: list[R], vectors: dict[str, np.ndarray]
    ) -> tuple[R, float] | None:
        """The closest record of ``pool`` (stored neighbours, then records accepted earlier in
        the batch) whose output reaches the threshold."""
        assert self.dedup_threshold is not None
        candidates = [r for r in pool if r.id != record.id]
        if not candidates:
            return None
        vector = vectors[record.dedup_text() or ""]
        sims = np.stack([vectors[r.dedup_text() or ""] for r in candidates]) @ vector
        best = int(np.argmax(sims))
        if sims[best] >= self.dedup_threshold:
            return candidates[best], float(sims[best])
        return None

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

    def _coerce(self, position: int, item: Any) -> R:
        if isinstance(item, self.record_type):
            return item
        if isinstance(item, Mapping):
            try:
                return self.record_type.model_validate(item)
            except ValidationError as exc:
                raise ConfigError(f"{self.kind} record {position} is invalid: {exc}") from exc
        raise ConfigError(
            f"{self.kind} record {position} is a {type(item).__name__}; pass "
            f"{self.record_type.__name__} objects or dicts with its fields"
        )

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
            elif (found.value.get("embedder"), found.value.get("dims")) != (name, dims):
                raise EmbedderMismatchError(
                    f"the {self.kind} in {self.namespace} of the {type(self.store).__name__} was "
                    f"written with the embedder {found.value.get('embedder')!r} (dim "
                    f"{found.value.get('dims')}), but the store embeds with {name!r} (dim "
                    f"{dims}); build the store's index with the embedder that wrote it, or use "
                    "another namespace"
                )
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
