"""Reading memory collections without opening them: records only, nothing loaded, nothing written.

Why: an export (``agentic-loop export --archive``) needs the live records
of every archive under a folder, possibly on a read-only disk, and has no
use for an embedder or a search index. Opening each one as an
:class:`~agentic_loop.memory.Archive` would load a model, take locks
(creating lock files) and write ``meta.json``. :func:`read_collections`
reads ``meta.json`` and ``entries.jsonl`` only and replays the log with
the same :class:`~agentic_loop.memory.collection.replay.LogReplay` the collections
use, so it sees exactly the records the archive would.

Example:
    >>> import tempfile
    >>> from agentic_loop.memory import Archive, HashingEmbedder
    >>> root = tempfile.mkdtemp()
    >>> with Archive(root, namespace=("users", "ana"), embedder=HashingEmbedder()) as archive:
    ...     kept = archive.add("Tagline for a bookstore", "Stories wait on every shelf.")
    ...     gone = archive.add("Tagline for a bakery", "Warm bread, every morning.")
    ...     archive.delete(gone.entry.id)
    1
    >>> [snap] = read_collections(root, kind="archive")
    >>> snap.namespace, [entry.output for entry in snap.records], snap.problems
    (('users', 'ana'), ['Stories wait on every shelf.'], [])
    >>> read_collections(root, kind="reflexion")
    []
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Generic, TypeVar

from agentic_loop.errors import ConfigError
from agentic_loop.jsonl_log import read_snapshot
from agentic_loop.memory.collection.layout import ENTRIES, namespace_of
from agentic_loop.memory.collection.meta import collection_dirs
from agentic_loop.memory.collection.replay import LogReplay
from agentic_loop.memory.records import RECORD_TYPES, MemoryRecord, log_record_type

__all__ = ["CollectionSnapshot", "read_collections"]

R = TypeVar("R", bound=MemoryRecord)


@dataclass(frozen=True)
class CollectionSnapshot(Generic[R]):
    """One collection as read from disk at one moment.

    ``entries_path`` is its log (``entries.jsonl``); ``namespace`` the labels
    of its folder under the root; ``records`` the live records (deletions
    applied, the newest version of each id, in the collection's own
    order); ``problems`` a ``file:line`` sentence per unreadable or torn
    line, the same sentences the log warns with.
    """

    entries_path: Path
    namespace: tuple[str, ...]
    records: list[R]
    problems: list[str]


def read_collections(
    root: str | os.PathLike[str], kind: str = "archive"
) -> list[CollectionSnapshot[Any]]:
    """Every collection of ``kind`` (``"archive"`` or ``"reflexion"``) under ``root``, recursively.

    Collections are found by their ``meta.json`` and ordered by folder; one
    that never stored a record (no ``entries.jsonl``) is left out. Reads
    without locks and creates nothing, so it works on a read-only folder
    and beside running writers. A corrupted ``meta.json`` raises
    :class:`~agentic_loop.memory.ArchiveCorruptedError`.
    """
    record_type = RECORD_TYPES.get(kind)
    if record_type is None:
        raise ConfigError(
            f"kind={kind!r} is not a memory collection kind; pass one of {sorted(RECORD_TYPES)}"
        )
    root_dir = Path(root).expanduser()
    if not root_dir.is_dir():
        raise ConfigError(
            f"memory path {root_dir} is not a folder; pass the folder a collection was created "
            "with (it holds meta.json and entries.jsonl, or namespace folders)"
        )
    snapshots: list[CollectionSnapshot[Any]] = []
    for folder in collection_dirs(root_dir, kind):
        entries_path = folder / ENTRIES
        if not entries_path.is_file():
            continue
        log = read_snapshot(entries_path, log_record_type(record_type))
        replay: LogReplay[Any] = LogReplay()
        replay.apply(log.records)
        snapshots.append(
            CollectionSnapshot(
                entries_path=entries_path,
                namespace=namespace_of(root_dir, folder),
                records=replay.live(),
                problems=log.problems,
            )
        )
    return snapshots
