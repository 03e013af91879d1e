"""The log itself: appends and compaction under a cross-process lock, incremental reads.

Why a class: a log shared by processes needs per-reader state (how far
this reader has read, and a fingerprint of the bytes just before that
point, to notice a file replaced by another process's compaction) next to
the lock that makes read-check-append sequences atomic. Encoding lives in
:mod:`~agentic_loop.jsonl_log.write`, line scanning and torn-tail repair in
:mod:`~agentic_loop.jsonl_log.scan`; this module decides when to use them.

Example:
    >>> import tempfile, pathlib
    >>> from pydantic import BaseModel
    >>> class Note(BaseModel):
    ...     n: int
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "notes.jsonl"
    >>> log, other = JsonlLog(path, Note), JsonlLog(path, Note)
    >>> log.append_many([Note(n=1), Note(n=2)])
    2
    >>> [note.n for note in log.read().records], [note.n for note in other.read().records]
    ([1, 2], [1, 2])
    >>> with other.locked():
    ...     other.rewrite([Note(n=2)])            # compaction by another instance
    1
    >>> read = log.read()
    >>> read.reset, [note.n for note in read.records]
    (True, [2])
"""

from __future__ import annotations

import contextlib
import os
import warnings
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Generic, TypeVar

from filelock import FileLock, Timeout
from pydantic import TypeAdapter

from agentic_loop.atomic import atomic_write, fsync_dir
from agentic_loop.jsonl_log.errors import (
    LogCorruptionWarning,
    LogError,
    LogLockTimeout,
    StaleLogError,
)
from agentic_loop.jsonl_log.scan import (
    LineScan,
    LogProblem,
    quarantine,
    scan_lines,
    torn_tail_start,
)
from agentic_loop.jsonl_log.write import DEFAULT_MAX_RECORD_BYTES, encode_records, write_fully
from agentic_loop.paths import make_dir

__all__ = ["JsonlLog", "LogRead"]

M = TypeVar("M")

_FINGERPRINT = 64  # bytes before the read position, re-checked to detect a replaced file


@dataclass(frozen=True)
class LogRead(Generic[M]):
    """What one :meth:`JsonlLog.read` found.

    ``reset`` is true when the file was replaced or truncated since the
    previous read: ``records`` then hold the whole log and the caller must
    drop what it had built from earlier reads.
    """

    records: list[M]
    reset: bool = False
    problems: list[LogProblem] = field(default_factory=list)
    torn_bytes: int = 0


class JsonlLog(Generic[M]):
    """An append-only JSONL file of ``record_type`` records (a pydantic model or any type
    pydantic can validate, e.g. a union of models).

    One instance keeps the position of its incremental :meth:`read`; any
    number of instances, in any number of processes, may share a file.
    ``lock_timeout`` bounds the wait for another process's lock (seconds);
    ``max_record_bytes`` rejects a single absurdly large record before
    anything is written.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        record_type: Any,
        *,
        lock_timeout: float = 60.0,
        max_record_bytes: int = DEFAULT_MAX_RECORD_BYTES,
    ) -> None:
        self._path = Path(path)
        self._adapter: TypeAdapter[M] = TypeAdapter(record_type)
        # A short poll interval: filelock waits by polling, and a writer that re-locks
        # quickly would otherwise starve a waiter polling at the default 50 ms.
        self._lock = FileLock(f"{self._path}.lock", timeout=lock_timeout, poll_interval=0.002)
        self._lock_timeout = lock_timeout
        self.max_record_bytes = max_record_bytes
        self._identity: tuple[int, int] | None = None
        self._offset = 0
        self._lines = 0
        self._fingerprint = b""
        self._corrupt: list[LogProblem] = []
        self._torn = b""
        self._warned: set[tuple[tuple[int, int] | None, int, str]] = set()

    # -- public ---------------------------------------------------------------------

    @property
    def path(self) -> Path:
        """The log file."""
        return self._path

    @property
    def lines_read(self) -> int:
        """How many complete lines :meth:`read` has consumed so far (valid or not)."""
        return self._lines

    @contextlib.contextmanager
    def locked(self) -> Iterator[None]:
        """Hold the log's cross-process lock (re-entrant within a thread).

        Use it to make read-check-append sequences atomic across processes.
        """
        self._acquire()
        try:
            yield
        finally:
            self._lock.release()

    @contextlib.contextmanager
    def _reading(self) -> Iterator[None]:
        """Hold the lock for a read when that writes nothing; else read without it.

        Why: reading must never need write access (a read-only disk, someone
        else's logs) nor create a folder or a lock file. The lock only spares
        a reader the line a writer is halfway through; writers append whole
        lines and compact by renaming, so an unlocked read is still
        consistent (a line mid-write reads as a torn tail, and the next read
        takes it). A log no writer ever locked has no lock file and nothing
        to wait for; a lock file that cannot be opened for writing (read-only
        disk, another owner) is read past.
        """
        held = False
        if os.path.exists(self._lock.lock_file):
            try:
                self._acquire()  # a timeout still raises LogLockTimeout
                held = True
            except OSError:
                held = False
        try:
            yield
        finally:
            if held:
                self._lock.release()

    def _acquire(self) -> None:
        try:
            self._lock.acquire()
        except Timeout:
            raise LogLockTimeout(
                f"timed out after {self._lock_timeout:g}s waiting for the lock "
                f"{self._lock.lock_file} on {self._path}: another process is holding it; wait "
                "for it to finish, or pass a larger lock_timeout (the lock is released "
                "automatically when its process exits)"
            ) from None

    def append(self, record: M | dict[str, Any], *, consume: bool = False) -> None:
        """Append one record durably (fsync'd before returning). See :meth:`append_many`."""
        self.append_many([record], consume=consume)

    def append_many(self, records: Iterable[M | dict[str, Any]], *, consume: bool = False) -> int:
        """Append records as one write and one fsync; return how many.

        Records are validated and size-checked before anything is written, so
        a bad record writes nothing. A batch costs one ``write`` and one
        ``fsync`` however many records it holds (batch many records into one
        call rather than appending them one by one). Durability is per batch:
        once this returns, every record of it survives a crash. A crash during
        the call loses at most this batch: none of it, or (the OS having
        written part of the bytes) a prefix of whole lines and a torn last
        line, which readers skip and the next append cuts off (kept in
        ``<log>.corrupt``). Records of earlier batches are never touched.
        With ``consume=True`` the caller declares it has already applied
        these records to its own view, so :meth:`read` will not return them;
        this requires the reader to be current (call :meth:`read` under
        :meth:`locked` first), otherwise :class:`StaleLogError` is raised
        and nothing is written.
        """
        payload, count = self._encode(records)
        if count == 0:
            return 0
        make_dir(self._path.parent, what=f"folder of the log {self._path.name}", error=LogError)
        with self.locked():
            existed = self._path.exists()
            fd = os.open(self._path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o644)
            try:
                st = os.fstat(fd)
                size = self._repair_torn_tail(fd, st.st_size, (st.st_dev, st.st_ino))
                identity = (st.st_dev, st.st_ino)
                if consume and not (
                    (self._identity in (None, identity)) and self._offset == size
                ):
                    raise StaleLogError(
                        f"append(consume=True) on {self._path} needs a reader that has read "
                        "every record: call read() while holding locked(), then append"
                    )
                write_fully(fd, payload, size, self._path)
                os.fsync(fd)
            finally:
                os.close(fd)
            if not existed:
                fsync_dir(self._path.parent)
            if consume:
                self._identity = identity
                self._offset = size + len(payload)
                self._lines += count
                self._fingerprint = payload[-_FINGERPRINT:]
        return count

    def read(self) -> LogRead[M]:
        """Return the records appended since the previous ``read`` (all of them the first time).

        Cheap when nothing changed (one ``stat``, no lock). Corrupt lines
        and a torn last line are skipped and warned about once, naming
        ``file:line``. Writes nothing (no folder, no lock file), so it works
        on a read-only disk; a missing file reads as empty.
        """
        try:
            st = os.stat(self._path)
        except FileNotFoundError:
            reset = self._identity is not None
            self._forget()
            return LogRead([], reset=reset)
        if (st.st_dev, st.st_ino) == self._identity and st.st_size == self._offset:
            return LogRead([])
        with self._reading():
            try:
                fd = os.open(self._path, os.O_RDONLY)
            except FileNotFoundError:
                reset = self._identity is not None
                self._forget()
                return LogRead([], reset=reset)
            try:
                st = os.fstat(fd)
                identity = (st.st_dev, st.st_ino)
                reset = not self._continues(fd, identity, st.st_size)
                if reset:
                    had_view = self._identity is not None
                    self._forget()
                    reset = had_view
                scan = self._scan(fd, self._offset, st.st_size, self._lines, identity)
                self._identity = identity
                self._offset = scan.end
                self._lines += scan.lines
                self._corrupt.extend(scan.problems)
                self._torn = scan.torn
                take = min(_FINGERPRINT, scan.end)
                self._fingerprint = os.pread(fd, take, scan.end - take) if take else b""
            finally:
                os.close(fd)
        return LogRead(
            scan.records, reset=reset, problems=scan.problems, torn_bytes=len(scan.torn)
        )

    def read_all(self) -> list[M]:
        """Read every valid record from the start, without moving :meth:`read`'s position."""
        with self._reading():
            try:
                fd = os.open(self._path, os.O_RDONLY)
            except FileNotFoundError:
                return []
            try:
                st = os.fstat(fd)
                return self._scan(fd, 0, st.st_size, 0, (st.st_dev, st.st_ino)).records
            finally:
                os.close(fd)

    def rewrite(self, records: Iterable[M | dict[str, Any]]) -> int:
        """Atomically replace the whole log with ``records`` (compaction); return how many.

        Call it while holding :meth:`locked`, right after a :meth:`read`:
        if the file holds records this reader has not seen, nothing is
        written and :class:`StaleLogError` is raised (rewriting would drop
        them). Corrupt lines and a torn tail are moved to ``<log>.corrupt``
        rather than lost.
        """
        payload, count = self._encode(records)
        with self.locked():
            if self._path.exists() or self._identity is not None:
                self._check_current()
            quarantined = [p.raw for p in self._corrupt] + ([self._torn] if self._torn else [])
            if quarantined:
                quarantine(self._path, quarantined)
            make_dir(self._path.parent, what=f"folder of the log {self._path.name}", error=LogError)
            with atomic_write(self._path) as tmp:
                tmp.write_bytes(payload)
            st = os.stat(self._path)
            self._forget()
            self._identity = (st.st_dev, st.st_ino)
            self._offset = len(payload)
            self._lines = count
            self._fingerprint = payload[-_FINGERPRINT:]
        return count

    # -- internals ------------------------------------------------------------------

    def _encode(self, records: Iterable[M | dict[str, Any]]) -> tuple[bytes, int]:
        return encode_records(self._adapter, records, self._path, self.max_record_bytes)

    def _forget(self) -> None:
        self._identity = None
        self._offset = 0
        self._lines = 0
        self._fingerprint = b""
        self._corrupt = []
        self._torn = b""

    def _continues(self, fd: int, identity: tuple[int, int], size: int) -> bool:
        """Whether the open file is the one this reader has read, grown or not."""
        if identity != self._identity or size < self._offset:
            return False
        take = len(self._fingerprint)
        return not take or os.pread(fd, take, self._offset - take) == self._fingerprint

    def _check_current(self) -> None:
        try:
            fd = os.open(self._path, os.O_RDONLY)
        except FileNotFoundError:
            return
        try:
            st = os.fstat(fd)
            if st.st_size == 0:
                return
            current = self._continues(fd, (st.st_dev, st.st_ino), st.st_size)
            unseen = os.pread(fd, st.st_size - self._offset, self._offset) if current else b""
        finally:
            os.close(fd)
        if not current or b"\n" in unseen:
            raise StaleLogError(
                f"refusing to rewrite {self._path}: it holds records this reader has not seen "
                "(another process appended or compacted); call read() while holding locked(), "
                "then rewrite"
            )

    def _scan(
        self, fd: int, start: int, end: int, first_line: int, identity: tuple[int, int]
    ) -> LineScan[M]:
        """Scan a range and warn (once per line) about what it skipped."""
        scan = scan_lines(fd, start, end, self._adapter, self._path, first_line=first_line)
        for problem in scan.problems:
            self._warn(identity, problem.line, problem.message())
        torn = scan.torn_message(self._path)
        if torn is not None:
            self._warn(identity, first_line + scan.lines + 1, torn)
        return scan

    def _warn(self, identity: tuple[int, int] | None, line: int, message: str) -> None:
        key = (identity, line, message[:40])
        if key in self._warned:
            return
        self._warned.add(key)
        warnings.warn(message, LogCorruptionWarning, stacklevel=4)

    def _repair_torn_tail(self, fd: int, size: int, identity: tuple[int, int]) -> int:
        """Truncate an unterminated last line (held lock assumed); return the new size."""
        cut = torn_tail_start(fd, size)
        if cut == size:
            return size
        torn = os.pread(fd, min(size - cut, self.max_record_bytes), cut)
        quarantine(self._path, [torn])
        os.ftruncate(fd, cut)
        os.fsync(fd)
        where = (
            f"line {self._lines + 1}"
            if identity == self._identity and cut == self._offset
            else f"byte {cut}"
        )
        warnings.warn(
            f"{self._path}: repaired a torn last line at {where}: removed {size - cut} bytes "
            f"that a killed writer left unfinished (saved to {self._path.name}.corrupt); no "
            "complete record was lost",
            LogCorruptionWarning,
            stacklevel=4,
        )
        return cut
