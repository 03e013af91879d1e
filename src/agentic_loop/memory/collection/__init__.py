"""The local collection: a memory namespace as a durable log, FAISS indexes and a lock in a folder.

Why a package: an :class:`~agentic_loop.memory.Archive` or
:class:`~agentic_loop.memory.ReflexionMemory` on one machine keeps its
records in an append-only log (:mod:`agentic_loop.jsonl_log`), replays it
into an in-memory view (:mod:`.replay`), derives vector indexes from it
(:mod:`.index`, :mod:`.index_files`) and guards its embedder
(:mod:`.meta`); :mod:`.layout` maps namespaces to folders,
:mod:`.base` keeps the open state in step with the disk, and
:mod:`.record_collection` adds the operations (add with the
near-duplicate gate, search, delete, compact; :mod:`.prune` chooses what a
prune keeps), as FAISS primitives under the one memory policy
(:mod:`agentic_loop.memory.policy`). :mod:`.snapshot` reads collections without opening them
(exports, forget), :mod:`.slots` lets an architecture take a collection or
a path. The store backend (any LangGraph store) lives in
:mod:`agentic_loop.memory.store`.

Example:
    >>> import tempfile
    >>> from agentic_loop.memory import Archive, HashingEmbedder
    >>> from agentic_loop.memory.collection.snapshot import read_collections
    >>> root = tempfile.mkdtemp()
    >>> with Archive(root, "taglines", embedder=HashingEmbedder()) as archive:
    ...     _ = archive.add("Tagline for a bookstore", "Stories wait on every shelf.")
    >>> [(s.namespace, len(s.records)) for s in read_collections(root, kind="archive")]
    [(('taglines',), 1)]
"""
