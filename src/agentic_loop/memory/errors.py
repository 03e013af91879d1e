"""Errors raised by memory: collections, their index files and embedders, all under StorageError.

Why one module: a caller catching memory problems should find them in one
place, and all of them derive from :class:`~agentic_loop.errors.StorageError`
(the root for memory and logs), so ``except StorageError`` or ``except
AgenticLoopError`` catches every one. Each message names the file or value
and the fix.

Example:
    >>> from agentic_loop.errors import StorageError
    >>> issubclass(EmbedderMismatchError, ArchiveError)
    True
    >>> issubclass(ArchiveCorruptedError, ArchiveError)
    True
    >>> all(issubclass(e, StorageError) for e in (ArchiveError, EmbedderError, IndexFileError))
    True
"""

from __future__ import annotations

from agentic_loop.errors import StorageError

__all__ = [
    "ArchiveCorruptedError",
    "ArchiveError",
    "EmbedderError",
    "EmbedderMismatchError",
    "IndexFileError",
]


class ArchiveError(StorageError):
    """A memory collection cannot be opened or used as asked."""


class ArchiveCorruptedError(ArchiveError):
    """A file of a collection is unreadable; the message says which and how to recover."""


class EmbedderMismatchError(ArchiveError):
    """The collection was built with another embedder; searching it with this one would be wrong."""


class EmbedderError(StorageError):
    """The embedding model could not be found or loaded, or it returned unusable vectors."""


class IndexFileError(StorageError):
    """An index file could not be read (missing, truncated or corrupted); indexes are derived:
    rebuild them."""
