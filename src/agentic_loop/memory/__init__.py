"""Long-term memory: the archive of accepted outputs and the Reflexion memory.

Both are folders on disk (append-only JSONL plus a derived FAISS index),
searched by task similarity, safe against crashes and shared between
processes. :class:`ArchiveStore` exposes them as a LangGraph store (the
architectures' default); :func:`open_memory` applies the same policy
(:class:`StoreMemory`) in any LangGraph store, such as a ``PostgresStore``
built with :func:`store_index`. That policy (ranking with a minimum
similarity and MMR, the near-duplicate gate, the embedder guard) is
written once, in :mod:`agentic_loop.memory.policy`; the local collection
(:mod:`~agentic_loop.memory.collection`) and the store adapter
(:mod:`~agentic_loop.memory.store`) only supply its primitives;
:func:`read_collections` reads their records without opening them (no
embedder, nothing written), for exports.

Example:
    >>> import tempfile
    >>> from agentic_loop.memory import Archive, HashingEmbedder
    >>> archive = Archive(tempfile.mkdtemp(), embedder=HashingEmbedder())
    >>> archive.add("Tagline for a bookstore", "Stories wait on every shelf.", score=9).added
    True
    >>> archive.search("bookstore tagline", k=1)[0].entry.score
    9.0
"""

from agentic_loop.memory.archive import Archive
from agentic_loop.memory.collection.prune import PruneResult
from agentic_loop.memory.collection.snapshot import CollectionSnapshot, read_collections
from agentic_loop.memory.embeddings import Embedder, EmbedderError, HashingEmbedder, TextEmbedder
from agentic_loop.memory.errors import ArchiveCorruptedError, ArchiveError, EmbedderMismatchError
from agentic_loop.memory.records import AddResult, ArchiveEntry, ReflectionEntry, SearchHit
from agentic_loop.memory.reflexion import ReflexionMemory
from agentic_loop.memory.stats import ArchiveStats
from agentic_loop.memory.store.archive_store import ArchiveStore, store_namespace
from agentic_loop.memory.store.index import StoreEmbeddings, store_index
from agentic_loop.memory.store.policy import StoreMemory, open_memory

__all__ = [
    "AddResult",
    "Archive",
    "ArchiveCorruptedError",
    "ArchiveEntry",
    "ArchiveError",
    "ArchiveStats",
    "ArchiveStore",
    "CollectionSnapshot",
    "Embedder",
    "EmbedderError",
    "EmbedderMismatchError",
    "HashingEmbedder",
    "PruneResult",
    "ReflectionEntry",
    "ReflexionMemory",
    "SearchHit",
    "StoreEmbeddings",
    "StoreMemory",
    "TextEmbedder",
    "open_memory",
    "read_collections",
    "store_index",
    "store_namespace",
]
