"""A durable, append-only JSON Lines log of pydantic records, shared by processes.

The archive, the reflexion memory and the trajectory log all keep their
records in one JSON object per line. This module is the one place that
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

import contextlib
import os
import warnings
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Generic, TypeVar

from filelock import FileLock, Timeout
from pydantic import TypeAdapter, ValidationError
from pydantic_core import PydanticSerializationError

from agentic_loop.atomic import atomic_write, fsync_dir

__all__ = [
    "JsonlLog",
    "LogCorruptionWarning",
    "LogError",
    "LogLockTimeout",
    "LogProblem",
    "LogRead",
    "RecordTooLargeError",
    "StaleLogError",
    "write_jsonl",
]

M = TypeVar("M")

_CHUNK = 8 * 1024 * 1024
_FINGERPRINT = 64  # bytes before the read position, re-checked to detect a replaced file


class LogCorruptionWarning(UserWarning):
    """A line of a log could not be read (torn by a crash, or corrupted) and was skipped."""


class LogError(RuntimeError):
    """A log operation could not be carried out; the message says why and what to do."""


class LogLockTimeout(LogError):
    """Another process held the log's lock for longer than ``lock_timeout``."""


class StaleLogError(LogError):
    """``rewrite`` was asked while records this reader has not seen exist in the file."""


class RecordTooLargeError(ValueError):
    """A record serializes to more bytes than the log accepts for one line."""


@dataclass(frozen=True)
class LogProblem:
    """One unreadable line: where it is, why it failed, and its raw bytes."""

    path: Path
    line: int
    reason: str
    raw: bytes = field(repr=False)

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.reason}"


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


@dataclass
class _Scan(Generic[M]):
    records: list[M]
    problems: list[LogProblem]
    end: int  # offset just past the last complete line
    lines: int  # complete lines scanned (valid, corrupt and blank)
    torn: bytes  # an unterminated last line, left unread


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
        max_record_bytes: int = 8 * 1024 * 1024,
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
        try:
            self._lock.acquire()
        except Timeout:
            raise LogLockTimeout(
                f"Timed out after {self._lock_timeout:g}s waiting for the lock {self._lock.lock_file} "
                f"on {self._path}: another process is holding it. Wait for it to finish, or pass a "
                "larger lock_timeout. (The lock is released automatically when its process exits.)"
            ) from None
        try:
            yield
        finally:
            self._lock.release()

    def append(self, record: M | dict[str, Any], *, consume: bool = False) -> None:
        """Append one record durably (fsync'd before returning). See :meth:`append_many`."""
        self.append_many([record], consume=consume)

    def append_many(self, records: Iterable[M | dict[str, Any]], *, consume: bool = False) -> int:
        """Append records as one all-or-nothing, fsync'd write; return how many.

        Records are validated and size-checked before anything is written.
        With ``consume=True`` the caller declares it has already applied
        these records to its own view, so :meth:`read` will not return them;
        this requires the reader to be current (call :meth:`read` under
        :meth:`locked` first), otherwise :class:`StaleLogError` is raised
        and nothing is written.
        """
        payload, count = self._encode(records)
        if count == 0:
            return 0
        self._path.parent.mkdir(parents=True, exist_ok=True)
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
                        f"append(consume=True) on {self._path} needs a reader that has read every "
                        "record: call read() while holding locked(), then append."
                    )
                self._write_all(fd, payload, size)
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
        ``file:line``.
        """
        try:
            st = os.stat(self._path)
        except FileNotFoundError:
            reset = self._identity is not None
            self._forget()
            return LogRead([], reset=reset)
        if (st.st_dev, st.st_ino) == self._identity and st.st_size == self._offset:
            return LogRead([])
        with self.locked():
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
        return LogRead(scan.records, reset=reset, problems=scan.problems, torn_bytes=len(scan.torn))

    def read_all(self) -> list[M]:
        """Read every valid record from the start, without moving :meth:`read`'s position."""
        with self.locked():
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
                self._quarantine(quarantined)
            self._path.parent.mkdir(parents=True, exist_ok=True)
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
        return _encode(self._adapter, records, self._path, self.max_record_bytes)

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
                f"Refusing to rewrite {self._path}: it holds records this reader has not seen "
                "(another process appended or compacted). Call read() while holding locked(), "
                "then rewrite."
            )

    def _scan(
        self, fd: int, start: int, end: int, first_line: int, identity: tuple[int, int]
    ) -> _Scan[M]:
        records: list[M] = []
        problems: list[LogProblem] = []
        pos = start
        lines = 0
        carry = b""
        while pos < end:
            chunk = os.pread(fd, min(_CHUNK, end - pos), pos)
            if not chunk:
                break
            pos += len(chunk)
            data = carry + chunk
            parts = data.split(b"\n")
            carry = parts.pop()
            for raw in parts:
                lines += 1
                if not raw.strip():
                    continue
                try:
                    records.append(self._adapter.validate_json(raw))
                except ValidationError as exc:
                    problem = LogProblem(self._path, first_line + lines, _first_error(exc), raw)
                    problems.append(problem)
                    self._warn(
                        identity,
                        problem.line,
                        f"{problem}; skipped, the other records are intact. The line is kept in the "
                        "file and moved to "
                        f"{self._path.name}.corrupt on compaction.",
                    )
        if carry:
            self._warn(
                identity,
                first_line + lines + 1,
                f"{self._path}:{first_line + lines + 1}: torn last line ({len(carry)} bytes, no newline) "
                "skipped; a writer was probably killed mid-write. It is repaired on the next append.",
            )
        return _Scan(records, problems, pos - len(carry), lines, carry)

    def _warn(self, identity: tuple[int, int] | None, line: int, message: str) -> None:
        key = (identity, line, message[:40])
        if key in self._warned:
            return
        self._warned.add(key)
        warnings.warn(message, LogCorruptionWarning, stacklevel=4)

    def _repair_torn_tail(self, fd: int, size: int, identity: tuple[int, int]) -> int:
        """Truncate an unterminated last line (held lock assumed); return the new size."""
        if size == 0 or os.pread(fd, 1, size - 1) == b"\n":
            return size
        pos = size
        cut = 0
        while pos > 0:
            step = min(_CHUNK, pos)
            block = os.pread(fd, step, pos - step)
            nl = block.rfind(b"\n")
            if nl >= 0:
                cut = pos - step + nl + 1
                break
            pos -= step
        torn = os.pread(fd, min(size - cut, self.max_record_bytes), cut)
        self._quarantine([torn])
        os.ftruncate(fd, cut)
        os.fsync(fd)
        where = (
            f"line {self._lines + 1}"
            if identity == self._identity and cut == self._offset
            else f"byte {cut}"
        )
        warnings.warn(
            f"{self._path}: repaired a torn last line at {where}: removed {size - cut} bytes that a "
            f"killed writer left unfinished (saved to {self._path.name}.corrupt). No complete record "
            "was lost.",
            LogCorruptionWarning,
            stacklevel=4,
        )
        return cut

    def _quarantine(self, raws: list[bytes]) -> None:
        target = self._path.with_name(self._path.name + ".corrupt")
        with open(target, "ab") as fh:
            fh.writelines(raw.rstrip(b"\n") + b"\n" for raw in raws)
            fh.flush()
            os.fsync(fh.fileno())

    def _write_all(self, fd: int, payload: bytes, size_before: int) -> None:
        view = memoryview(payload)
        try:
            while view:
                written = os.write(fd, view)
                view = view[written:]
        except OSError as exc:
            with contextlib.suppress(OSError):
                os.ftruncate(fd, size_before)
            raise LogError(
                f"Could not append to {self._path}: {exc}. Nothing from this batch was kept and the "
                "records already in the log are untouched; free disk space or fix permissions, then retry."
            ) from exc


def write_jsonl(
    path: str | os.PathLike[str],
    records: Iterable[Any],
    record_type: Any,
    *,
    max_record_bytes: int = 8 * 1024 * 1024,
) -> int:
    """Write ``records`` as a new JSONL file at ``path``, atomically; return how many.

    Encodes exactly as :class:`JsonlLog` does, so the file can be opened as a
    log or appended to later. An existing file at ``path`` is replaced.
    """
    target = Path(path)
    payload, count = _encode(TypeAdapter(record_type), records, target, max_record_bytes)
    target.parent.mkdir(parents=True, exist_ok=True)
    with atomic_write(target) as tmp:
        tmp.write_bytes(payload)
    return count


def _encode(
    adapter: TypeAdapter[Any], records: Iterable[Any], path: Path, max_record_bytes: int
) -> tuple[bytes, int]:
    lines: list[bytes] = []
    for i, record in enumerate(records):
        try:
            value = adapter.validate_python(record)
        except ValidationError as exc:
            raise ValueError(f"Record {i} is not a valid record for {path}: {_first_error(exc)}") from exc
        try:
            line = adapter.dump_json(value)
        except PydanticSerializationError as exc:
            raise ValueError(
                f"Record {i} for {path} cannot be written as JSON: {exc}. Convert such values "
                "(numpy numbers, sets, objects) to plain str/int/float/bool/list/dict first."
            ) from exc
        if len(line) > max_record_bytes:
            raise RecordTooLargeError(
                f"Record {i} serializes to {len(line):,} bytes, over the {max_record_bytes:,}-byte "
                f"limit of {path}. Shorten its text fields, or raise max_record_bytes. "
                "Nothing was written."
            )
        lines.append(line + b"\n")
    return b"".join(lines), len(lines)


def _first_error(exc: ValidationError) -> str:
    err = exc.errors()[0]
    loc = ".".join(str(p) for p in err.get("loc", ())) or "record"
    msg = str(err.get("msg", exc))
    return f"{loc}: {msg}"[:300] + (f" (+{exc.error_count() - 1} more)" if exc.error_count() > 1 else "")
