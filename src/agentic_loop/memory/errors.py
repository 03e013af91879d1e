"""Errors raised by memory collections. Each message names the file or value and the fix.

Example:
    >>> issubclass(EmbedderMismatchError, ArchiveError), issubclass(ArchiveCorruptedError, ArchiveError)
    (True, True)
"""

from __future__ import annotations

__all__ = ["ArchiveCorruptedError", "ArchiveError", "EmbedderMismatchError"]


class ArchiveError(RuntimeError):
    """A memory collection cannot be opened or used as asked."""


class ArchiveCorruptedError(ArchiveError):
    """A file of a collection is unreadable; the message says which and how to recover."""


class EmbedderMismatchError(ArchiveError):
    """The collection was built with another embedder; searching it with this one would be wrong."""
