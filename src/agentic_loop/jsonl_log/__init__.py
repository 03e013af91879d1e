"""A durable, append-only JSON Lines log of pydantic records, shared by processes.

The archive, the reflexion memory and the trajectory log all keep their
records in one JSON object per line. This package is the one place that
writes and reads such files, so they all get the same guarantees:

* **Durable appends.** ``append``/``append_many`` hold a cross-process file
  lock (``<log>.lock``, via ``filelock``), write whole lines, then flush and
  ``os.fsync`` before returning: a record whose append returned survives a
  SIGKILL or a power cut. A batch is all or nothing.
* **Torn tails are harmless.** A writer killed mid-line leaves a last line
  with no newline. Readers skip it with a :class:`LogCorruptionWarning` that
  names ``file:line``; the next append truncates it away (under the lock)
  before writing.
* **Corrupt lines never cost other lines.** A complete line that is not a
  valid record is reported as ``file:line`` and skipped; every other line is
  read. It stays in the file, and a compaction moves it to
  ``<log>.corrupt`` instead of dropping it.
* **Incremental reads.** ``read()`` returns only what was appended since the
  previous call (by any process), and says ``reset`` when the file was
  replaced (compacted) so the caller rebuilds its view.
* **Atomic compaction.** ``rewrite()`` replaces the whole file via a
  temporary file, ``fsync`` and ``os.replace``, refusing if the caller has
  not seen every record (which would lose them).
* **Reads write nothing.** ``read``/``read_all`` never create a folder or a
  lock file and work on a read-only disk (they take the lock only when its
  file exists and opens); :func:`read_snapshot` reads a log once without
  the lock at all (an export).

Modules: :mod:`.log` (the :class:`JsonlLog` class), :mod:`.scan` (reading
lines, naming bad ones, torn-tail repair), :mod:`.write` (encoding and
whole writes), :mod:`.errors`.

Example:
    >>> import tempfile, pathlib
    >>> from pydantic import BaseModel
    >>> class Note(BaseModel):
    ...     text: str
    >>> log = JsonlLog(pathlib.Path(tempfile.mkdtemp()) / "notes.jsonl", Note)
    >>> log.append(Note(text="first"))
    >>> log.append_many([Note(text="second"), {"text": "third"}])
    2
    >>> [n.text for n in log.read().records]
    ['first', 'second', 'third']
    >>> log.read().records                       # nothing new since the last read
    []
    >>> _ = log.path.open("ab").write(b'{"text": "torn')   # a writer died mid-line
    >>> import warnings
    >>> with warnings.catch_warnings(record=True) as caught:
    ...     warnings.simplefilter("always")
    ...     [n.text for n in log.read_all()]
    ['first', 'second', 'third']
    >>> print(str(caught[0].message).split("/")[-1])    # doctest: +ELLIPSIS
    notes.jsonl:4: torn last line (14 bytes, no newline) skipped; ...
"""

from __future__ import annotations

from agentic_loop.jsonl_log.errors import (
    LogCorruptionWarning,
    LogError,
    LogLockTimeout,
    RecordTooLargeError,
    StaleLogError,
)
from agentic_loop.jsonl_log.log import JsonlLog, LogRead
from agentic_loop.jsonl_log.scan import LogProblem, LogSnapshot, read_snapshot
from agentic_loop.jsonl_log.write import write_jsonl

__all__ = [
    "JsonlLog",
    "LogCorruptionWarning",
    "LogError",
    "LogLockTimeout",
    "LogProblem",
    "LogRead",
    "LogSnapshot",
    "RecordTooLargeError",
    "StaleLogError",
    "read_snapshot",
    "write_jsonl",
]
