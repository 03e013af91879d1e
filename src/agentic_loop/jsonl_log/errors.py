"""What a JSONL log raises and warns: storage errors a user can act on, and skipped-line warnings.

Why here: the log and its helpers (scanning, writing) raise the same few
errors, and callers (the archive, the trajectory log, the CLI) catch them
under :class:`~agentic_loop.errors.StorageError`, the one root for memory
and logs. An unreadable line is not an error, only a warning: the other
records are intact and are read.

Example:
    >>> from agentic_loop.errors import StorageError
    >>> issubclass(StaleLogError, LogError), issubclass(LogError, StorageError)
    (True, True)
    >>> issubclass(RecordTooLargeError, StorageError), issubclass(RecordTooLargeError, ValueError)
    (True, True)
"""

from __future__ import annotations

from agentic_loop.errors import StorageError

__all__ = [
    "LogCorruptionWarning",
    "LogError",
    "LogLockTimeout",
    "RecordTooLargeError",
    "StaleLogError",
]


class LogCorruptionWarning(UserWarning):
    """A line of a log could not be read (torn by a crash, or corrupted) and was skipped."""


class LogError(StorageError):
    """A log operation could not be carried out; the message says why and what to do."""


class LogLockTimeout(LogError):
    """Another process held the log's lock for longer than ``lock_timeout``."""


class StaleLogError(LogError):
    """``rewrite`` was asked while records this reader has not seen exist in the file."""


class RecordTooLargeError(StorageError, ValueError):
    """A record serializes to more bytes than the log accepts for one line."""
