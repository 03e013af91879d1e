"""Where an architecture's memory lives: its namespace, and the store a graph falls back to.

Why: ArchiveRefine and Reflexion accept the same three ways to place their
memory, and the rules must read the same for both:

* nothing: the local default, a collection folder (``data/archive``,
  ``data/reflections``) served as an
  :class:`~agentic_loop.memory.store.archive_store.ArchiveStore`, so single-machine users
  keep the durable log and FAISS search;
* a path or a collection (``archive=Archive(...)``): that local collection,
  served the same way;
* ``store=`` any LangGraph ``BaseStore`` (``PostgresStore`` for many
  workers): memory moves there, in ``(kind, namespace)``.

Passing both a collection and a store, ``None``, or anything else is a
:class:`~agentic_loop.errors.ConfigError` that says what to pass. At run
time, the graph's store (``runtime.store``; a parent graph's when the
architecture runs as a subgraph) is used, else the slot's own.

Example:
    >>> import tempfile
    >>> from langgraph.store.memory import InMemoryStore
    >>> from agentic_loop.memory.embeddings import HashingEmbedder
    >>> from agentic_loop.memory.store.index import store_index
    >>> slot = memory_slot("archive", UNSET, InMemoryStore(index=store_index(HashingEmbedder())),
    ...                    "taglines", default_path="data/archive", owner="ArchiveRefine")
    >>> slot.namespace, slot.local is None
    (('archive', 'taglines'), True)
    >>> local = memory_slot("reflexion", tempfile.mkdtemp(), None, None,
    ...                     default_path="data/reflections", owner="Reflexion")
    >>> local.namespace, type(local.store).__name__, type(local.local).__name__
    (('reflexion', 'default'), 'ArchiveStore', 'ReflexionMemory')
    >>> memory_slot("archive", None, None, None, default_path="data/archive", owner="ArchiveRefine")
    Traceback (most recent call last):
    ...
    agentic_loop.errors.ConfigError: archive=None: ArchiveRefine keeps its memory in a collection; \
pass a folder path, an Archive, or store=<a LangGraph BaseStore> (omit archive= for the default \
data/archive); for no memory across runs use Reflection
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from langgraph.store.base import BaseStore

from agentic_loop.errors import ConfigError
from agentic_loop.memory.collection.layout import Namespace, normalize_namespace
from agentic_loop.memory.collection.record_collection import RecordCollection
from agentic_loop.memory.store.archive_store import COLLECTIONS, ArchiveStore, store_namespace
from agentic_loop.memory.store.policy import MemoryView, check_store_index, open_memory

__all__ = ["UNSET", "MemorySlot", "memory_slot"]


class _Unset:
    """The default of ``archive=`` / ``memory=``: "not given" (``None`` is an error)."""

    def __repr__(self) -> str:
        return "UNSET"


UNSET: Any = _Unset()

_ARGS = {"archive": ("archive", "archive_namespace"), "reflexion": ("memory", "memory_namespace")}


@dataclass(frozen=True)
class MemorySlot:
    """An architecture's memory: ``kind``, store ``namespace``, the ``store`` its graph is
    compiled with, and the ``local`` collection when memory is on this machine."""

    kind: str
    namespace: tuple[str, ...]
    store: BaseStore
    local: RecordCollection[Any] | None

    def view(self, runtime_store: BaseStore | None = None) -> MemoryView[Any]:
        """The memory to read and write in a run: in ``runtime_store`` (the graph's store)
        when there is one, else in :attr:`store`."""
        store = runtime_store if runtime_store is not None else self.store
        return open_memory(store, self.namespace, self.kind)


def memory_slot(
    kind: str,
    given: Any,
    store: Any,
    namespace: Namespace | None,
    *,
    default_path: str,
    owner: str,
) -> MemorySlot:
    """Place ``owner``'s memory of ``kind`` from its arguments (see the module docstring).

    ``given``: the ``archive=`` / ``memory=`` argument (:data:`UNSET` when
    omitted); ``store``: the ``store=`` argument; ``namespace``: the
    namespace argument (for a path or a store).
    """
    arg, ns_arg = _ARGS[kind]
    cls = COLLECTIONS[kind]
    if store is not None and not isinstance(store, BaseStore):
        raise ConfigError(
            f"store={store!r:.80}: pass a LangGraph BaseStore (e.g. "
            "InMemoryStore(index=store_index()) or a PostgresStore with an index), or omit it "
            "for the local store"
        )
    if given is None:
        raise ConfigError(
            f"{arg}=None: {owner} keeps its memory in a collection; pass a folder path, "
            f"{_article(cls.__name__)} {cls.__name__}, or store=<a LangGraph BaseStore> (omit "
            f"{arg}= for the default {default_path}); for no memory across runs use Reflection"
        )
    if given is UNSET and store is not None:
        if not isinstance(store, ArchiveStore):
            check_store_index(store)
        return MemorySlot(kind, store_namespace(kind, namespace), store, None)
    if store is not None:
        raise ConfigError(
            f"{owner} got both {arg}= and store=; pass {arg}= to keep memory in that local "
            f"{cls.__name__}, or store= to keep it in that store, not both"
        )
    if given is UNSET:
        given = default_path
    if isinstance(given, str | os.PathLike):
        collection = cls(given, namespace=namespace)
    elif isinstance(given, cls):
        if namespace is not None and normalize_namespace(namespace) != given.namespace:
            raise ConfigError(
                f"{ns_arg}={namespace!r} names a namespace for a path or a store, but the "
                f"{cls.__name__} given has namespace {given.namespace!r}; drop {ns_arg}"
            )
        collection = given
    else:
        raise ConfigError(
            f"{arg}={given!r:.80} ({type(given).__name__}): pass a folder path or "
            f"{_article(cls.__name__)} {cls.__name__}, or store=<a LangGraph BaseStore>"
        )
    return MemorySlot(kind, store_namespace(kind, collection.namespace),
                      ArchiveStore(collection), collection)


def _article(word: str) -> str:
    return "an" if word[:1].lower() in "aeiou" else "a"
