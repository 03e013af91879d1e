"""The vector index of a LangGraph store, built on this package's embedder.

Why: a LangGraph store (``InMemoryStore``, ``PostgresStore`` with pgvector)
embeds what it indexes with the ``embed`` of its ``index`` config. Memory
compares those vectors with its own (MMR, the near-duplicate gate) and
records which embedder wrote a namespace, so the store should embed with
the same model the local archive uses. :func:`store_index` is that config:
the bundled all-MiniLM-L6-v2 (offline) indexing each record's ``task``.

Example:
    >>> from langgraph.store.memory import InMemoryStore
    >>> from agentic_loop.memory.embeddings import HashingEmbedder
    >>> store = InMemoryStore(index=store_index(HashingEmbedder(dim=64)))
    >>> store.put(("archive", "default"), "k", {"task": "Tagline for a bookstore", "output": "x"})
    >>> round(store.search(("archive",), query="Tagline for a bookstore")[0].score, 3)
    1.0
    >>> store_embedder(store)
    ('hashing-v1-64', 64)
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any

import numpy as np
from langchain_core.embeddings import Embeddings

from agentic_loop.memory.embeddings import Embedder, TextEmbedder, normalize_rows

__all__ = ["StoreEmbeddings", "embed_texts", "store_embedder", "store_index"]


class StoreEmbeddings(Embeddings):
    """A :class:`TextEmbedder` as LangChain ``Embeddings`` (what LangGraph stores call).

    ``embedder`` defaults to the bundled all-MiniLM-L6-v2; rows are unit
    length, so a store's cosine score is the similarity memory uses.
    """

    def __init__(self, embedder: TextEmbedder | None = None, *, cache_rows: int = 1024) -> None:
        self.embedder: TextEmbedder = embedder if embedder is not None else Embedder()
        self.cache_rows = cache_rows
        self._cache: OrderedDict[str, list[float]] = OrderedDict()
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"StoreEmbeddings({self.embedder.name!r})"

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        """One unit vector per text; texts embedded recently come from a small cache.

        Why a cache: a gated add searches the store with each record's task (the store
        embeds it as a query) and then puts the record (the store embeds the same task
        again); the second time is free.
        """
        texts = list(texts)
        with self._lock:
            missing = list(dict.fromkeys(t for t in texts if t not in self._cache))
        found = dict(zip(missing, self._fresh(missing)))
        with self._lock:
            for text, vector in found.items():
                self._cache[text] = vector
            for text in texts:
                if text in self._cache:
                    found.setdefault(text, self._cache[text])
                    self._cache.move_to_end(text)
            while len(self._cache) > self.cache_rows:
                self._cache.popitem(last=False)
        evicted = list(dict.fromkeys(t for t in texts if t not in found))  # by another thread
        if evicted:
            found.update(zip(evicted, self._fresh(evicted)))
        return [list(found[t]) for t in texts]  # copies: callers may keep and change them

    def _fresh(self, texts: list[str]) -> list[list[float]]:
        return normalize_rows(np.asarray(self.embedder.embed(texts))).tolist() if texts else []

    def embed_query(self, text: str) -> list[float]:
        """The unit vector of one text."""
        return self.embed_documents([text])[0]


def store_index(
    embedder: TextEmbedder | None = None, *, fields: Sequence[str] = ("task",)
) -> dict[str, Any]:
    """The ``index=`` config for a LangGraph store holding memory.

    Pass it to ``InMemoryStore(index=...)`` or ``PostgresStore(conn,
    index=...)``: ``dims`` and ``embed`` from ``embedder`` (default: the
    bundled all-MiniLM-L6-v2), indexing the records' ``fields`` (the
    ``task`` is what memory searches by).
    """
    embeddings = StoreEmbeddings(embedder)
    return {"dims": embeddings.embedder.dim, "embed": embeddings, "fields": list(fields)}


_default: StoreEmbeddings | None = None
_default_lock = threading.Lock()


def embed_texts(texts: Sequence[str]) -> list[list[float]]:
    """Embed ``texts`` with the bundled all-MiniLM-L6-v2 (384 dims), as lists of floats.

    For configs that name an embedding function by import path, such as a
    LangGraph server's ``langgraph.json``:
    ``"store": {"index": {"embed": "agentic_loop.memory.store.index:embed_texts",
    "dims": 384, "fields": ["task"]}}``.
    """
    global _default
    with _default_lock:
        if _default is None:
            _default = StoreEmbeddings()
    return _default.embed_documents(list(texts))


def store_embedder(store: Any) -> tuple[str, int | None] | None:
    """The name and dimension of the embedder ``store`` indexes with, or ``None`` when it
    does not say (a store without an ``index_config``).

    The name is the embedder's own for :class:`StoreEmbeddings`, the
    ``"provider:model"`` string a config gave, else the class (or
    function) and its model.
    """
    config = getattr(store, "index_config", None)
    if not isinstance(config, dict):
        return None
    dims = config.get("dims")
    embed = config.get("embed")
    if isinstance(embed, StoreEmbeddings):
        return embed.embedder.name, dims
    if isinstance(embed, str):
        return embed, dims
    if embed is None:
        return None
    func = getattr(embed, "func", None) or getattr(embed, "afunc", None)  # a wrapped function
    target = func if func is not None else embed
    label = getattr(target, "__qualname__", None) or type(target).__qualname__
    module = getattr(target, "__module__", None) or type(target).__module__
    model = getattr(embed, "model", None) or getattr(embed, "model_name", None)
    return f"{module}.{label}" + (f":{model}" if model else ""), dims
