"""Writing JSONL: records validated and encoded before a byte is written, then written whole.

Why a module of its own: an append to a log, a compaction and an export
(:func:`write_jsonl`) must encode a record the same way, or a file one of
them wrote would not read back through another. Encoding everything first
also makes a batch all or nothing: a bad record raises before the file is
touched.

Example:
    >>> import tempfile, pathlib
    >>> from pydantic import BaseModel
    >>> class Note(BaseModel):
    ...     n: int
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "notes.jsonl"
    >>> write_jsonl(path, [Note(n=1), {"n": 2}], Note)
    2
    >>> path.read_bytes()
    b'{"n":1}\\n{"n":2}\\n'
    >>> write_jsonl(path, [{"n": "two"}], Note)         # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    agentic_loop.errors.ConfigError: record 0 is not a valid record for .../notes.jsonl: n: ...
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from pydantic import TypeAdapter, ValidationError
from pydantic_core import PydanticSerializationError

from agentic_loop.atomic import atomic_write
from agentic_loop.errors import ConfigError
from agentic_loop.jsonl_log.errors import LogError, RecordTooLargeError
from agentic_loop.jsonl_log.scan import first_error

__all__ = ["DEFAULT_MAX_RECORD_BYTES", "encode_records", "write_fully", "write_jsonl"]

DEFAULT_MAX_RECORD_BYTES = 8 * 1024 * 1024


def encode_records(
    adapter: TypeAdapter[Any], records: Iterable[Any], path: Path, max_record_bytes: int
) -> tuple[bytes, int]:
    """Validate and encode ``records`` as newline-terminated JSON lines; return bytes and count.

    Raises before returning anything when a record is invalid, cannot be
    written as JSON, or is longer than ``max_record_bytes``.
    """
    lines: list[bytes] = []
    for i, record in enumerate(records):
        try:
            value = adapter.validate_python(record)
        except ValidationError as exc:
            raise ConfigError(
                f"record {i} is not a valid record for {path}: {first_error(exc)}"
            ) from exc
        try:
            line = adapter.dump_json(value)
        except PydanticSerializationError as exc:
            raise ConfigError(
                f"record {i} for {path} cannot be written as JSON: {exc}; convert such values "
                "(numpy numbers, sets, objects) to plain str/int/float/bool/list/dict first"
            ) from exc
        if len(line) > max_record_bytes:
            raise RecordTooLargeError(
                f"record {i} serializes to {len(line):,} bytes, over the {max_record_bytes:,}-byte "
                f"limit of {path}; shorten its text fields, or raise max_record_bytes; "
                "nothing was written"
            )
        lines.append(line + b"\n")
    return b"".join(lines), len(lines)


def write_fully(fd: int, payload: bytes, size_before: int, path: Path) -> None:
    """Write all of ``payload`` to ``fd``; on failure cut the file back to ``size_before``."""
    view = memoryview(payload)
    try:
        while view:
            written = os.write(fd, view)
            view = view[written:]
    except OSError as exc:
        with contextlib.suppress(OSError):
            os.ftruncate(fd, size_before)
        raise LogError(
            f"could not append to {path}: {exc}; nothing from this batch was kept and the "
            "records already in the log are untouched; free disk space or fix permissions, "
            "then retry"
        ) from exc


def write_jsonl(
    path: str | os.PathLike[str],
    records: Iterable[Any],
    record_type: Any,
    *,
    max_record_bytes: int = DEFAULT_MAX_RECORD_BYTES,
) -> int:
    """Write ``records`` as a new JSONL file at ``path``, atomically; return how many.

    Encodes exactly as :class:`~agentic_loop.jsonl_log.JsonlLog` does, so the
    file can be opened as a log or appended to later. An existing file at
    ``path`` is replaced.
    """
    target = Path(path)
    payload, count = encode_records(TypeAdapter(record_type), records, target, max_record_bytes)
    target.parent.mkdir(parents=True, exist_ok=True)
    with atomic_write(target) as tmp:
        tmp.write_bytes(payload)
    return count
