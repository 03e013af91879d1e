"""Reading a JSONL log's bytes: valid lines become records, bad lines are named, a torn tail waits.

Why a module of its own: the log (:class:`~agentic_loop.jsonl_log.JsonlLog`,
which reads under its lock and warns) and read-only readers (an export
reading an archive on a read-only disk, which must not even create a lock
file) decide the same things about the same bytes: which lines are records,
which are corrupt (``file:line`` and why), and whether the last line was
torn by a killed writer. :func:`scan_lines` is that decision, once;
:func:`read_snapshot` is the read-only reader. The repair helpers
(:func:`torn_tail_start`, :func:`quarantine`) live here too: they find and
set aside exactly the bytes a scan refuses.

Example:
    >>> import tempfile, pathlib
    >>> from pydantic import BaseModel
    >>> class Note(BaseModel):
    ...     n: int
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "notes.jsonl"
    >>> _ = path.write_bytes(b'{"n": 1}\\nnot json\\n{"n": 3}\\n{"n": 4')
    >>> snap = read_snapshot(path, Note)
    >>> [note.n for note in snap.records]
    [1, 3]
    >>> for message in snap.problems:
    ...     print(message.split("/")[-1])     # doctest: +ELLIPSIS
    notes.jsonl:2: record: Invalid JSON: ...; skipped, the other records are intact; ...
    notes.jsonl:4: torn last line (7 bytes, no newline) skipped; ...
    >>> sorted(p.name for p in path.parent.iterdir())   # nothing written, no lock file
    ['notes.jsonl']
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Generic, TypeVar

from pydantic import TypeAdapter, ValidationError

__all__ = [
    "CHUNK",
    "LineScan",
    "LogProblem",
    "LogSnapshot",
    "first_error",
    "quarantine",
    "read_snapshot",
    "scan_lines",
    "torn_message",
    "torn_tail_start",
]

M = TypeVar("M")

CHUNK = 8 * 1024 * 1024  # bytes read per system call


@dataclass(frozen=True)
class LogProblem:
    """One unreadable line: where it is, why it failed, and its raw bytes."""

    path: Path
    line: int
    reason: str
    raw: bytes = field(repr=False)

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.reason}"

    def message(self) -> str:
        """The sentence a reader reports (and the log warns) for this line."""
        return (
            f"{self}; skipped, the other records are intact; the line stays in the file and "
            f"moves to {self.path.name}.corrupt on compaction"
        )


def torn_message(path: Path, line: int, size: int) -> str:
    """The sentence reported for an unterminated last line of ``size`` bytes at ``line``."""
    return (
        f"{path}:{line}: torn last line ({size} bytes, no newline) skipped; a writer was "
        "probably killed mid-write; the next append repairs it"
    )


@dataclass
class LineScan(Generic[M]):
    """What :func:`scan_lines` found between two offsets of a log file."""

    records: list[M]
    problems: list[LogProblem]
    end: int  # offset just past the last complete line
    lines: int  # complete lines scanned (valid, corrupt and blank)
    torn: bytes  # an unterminated last line, left unread
    first_line: int = 0  # complete lines before the scanned range

    def torn_message(self, path: Path) -> str | None:
        """The report for :attr:`torn`, or ``None`` when the range ended on a newline."""
        if not self.torn:
            return None
        return torn_message(path, self.first_line + self.lines + 1, len(self.torn))

    def messages(self, path: Path) -> list[str]:
        """Every problem of the scan as a ``file:line`` sentence, in file order."""
        torn = self.torn_message(path)
        return [p.message() for p in self.problems] + ([torn] if torn else [])


def scan_lines(
    fd: int,
    start: int,
    end: int,
    adapter: TypeAdapter[M],
    path: Path,
    *,
    first_line: int = 0,
) -> LineScan[M]:
    """Validate every complete line of ``fd`` between ``start`` and ``end``; skip blank ones.

    ``first_line`` is the number of complete lines before ``start`` (for
    ``file:line`` numbers). Reads with ``pread``, so the file position of
    ``fd`` is neither used nor moved.
    """
    records: list[M] = []
    problems: list[LogProblem] = []
    pos = start
    lines = 0
    carry = b""
    while pos < end:
        chunk = os.pread(fd, min(CHUNK, end - pos), pos)
        if not chunk:
            break
        pos += len(chunk)
        parts = (carry + chunk).split(b"\n")
        carry = parts.pop()
        for raw in parts:
            lines += 1
            if not raw.strip():
                continue
            try:
                records.append(adapter.validate_json(raw))
            except ValidationError as exc:
                problems.append(LogProblem(path, first_line + lines, first_error(exc), raw))
    return LineScan(records, problems, pos - len(carry), lines, carry, first_line)


def first_error(exc: ValidationError) -> str:
    """``location: message`` of a validation error's first problem (and how many more)."""
    err = exc.errors()[0]
    loc = ".".join(str(p) for p in err.get("loc", ())) or "record"
    msg = str(err.get("msg", exc))
    more = f" (+{exc.error_count() - 1} more)" if exc.error_count() > 1 else ""
    return f"{loc}: {msg}"[:300] + more


@dataclass(frozen=True)
class LogSnapshot(Generic[M]):
    """Every valid line of a log file as read once, and a ``file:line`` sentence per bad line."""

    records: list[M]
    problems: list[str]


def read_snapshot(path: str | os.PathLike[str], record_type: Any) -> LogSnapshot[Any]:
    """Read the whole log at ``path`` once, without its lock and without writing anything.

    For readers that must leave the files alone (a read-only disk, an
    export): no lock file is created and a torn tail is reported, not
    repaired. Safe beside writers: they append whole lines and compact by
    renaming, so a scan sees complete lines of one file; a line being
    appended at that moment is reported as a torn tail. A missing file
    reads as empty.
    """
    target = Path(path)
    adapter: TypeAdapter[Any] = TypeAdapter(record_type)
    try:
        fd = os.open(target, os.O_RDONLY)
    except FileNotFoundError:
        return LogSnapshot([], [])
    try:
        scan = scan_lines(fd, 0, os.fstat(fd).st_size, adapter, target)
    finally:
        os.close(fd)
    return LogSnapshot(scan.records, scan.messages(target))


def torn_tail_start(fd: int, size: int) -> int:
    """The offset where an unterminated last line begins (``size`` when the file ends a line)."""
    if size == 0 or os.pread(fd, 1, size - 1) == b"\n":
        return size
    pos = size
    while pos > 0:
        step = min(CHUNK, pos)
        block = os.pread(fd, step, pos - step)
        newline = block.rfind(b"\n")
        if newline >= 0:
            return pos - step + newline + 1
        pos -= step
    return 0


def quarantine(log_path: Path, raws: list[bytes]) -> None:
    """Append unreadable lines to ``<log>.corrupt`` (fsync'd), so a repair never loses bytes."""
    target = log_path.with_name(log_path.name + ".corrupt")
    with open(target, "ab") as fh:
        fh.writelines(raw.rstrip(b"\n") + b"\n" for raw in raws)
        fh.flush()
        os.fsync(fh.fileno())
