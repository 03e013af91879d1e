"""Erasing lines from the project's files for good: what a line names, how old it is, leftovers.

Why a module of its own: forgetting a user (or enforcing retention) must
reach every copy of a record, not only the live one. A JSONL log keeps
unreadable lines in ``<log>.corrupt``, a crashed atomic write leaves
``.<name>.*.tmp``, a backup sits in ``<name>.bak``; any of them can hold a
user's text long after the record itself is gone. The stores
(:mod:`.logs`, :mod:`.memory`, :mod:`.exports`) decide *which* records go;
this module answers the questions they share about raw bytes: which ids a
line names (found as JSON string literals, so a torn or corrupt line that
no parser accepts is still recognized), when a line was written, and how
to rewrite a file without some of its lines (atomically, deleting it when
nothing is left).

Example:
    >>> import tempfile, pathlib
    >>> sorted(strings_in(b'{"id": "t1", "metadata": {"trajectory_id": "t2"}, "tor'))
    ['id', 'metadata', 't1', 't2', 'trajectory_id']
    >>> parse_age("90d"), parse_age("12h")
    (datetime.timedelta(days=90), datetime.timedelta(seconds=43200))
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "log.jsonl.corrupt"
    >>> _ = path.write_bytes(b'{"id": "t1"\\n{"id": "t2"}\\n')
    >>> scrub_lines(path, lambda raw: b"t1" in raw)
    1
    >>> path.read_bytes()
    b'{"id": "t2"}\\n'
    >>> scrub_lines(path, lambda raw: True), path.exists()
    (1, False)
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable
from datetime import UTC, datetime, timedelta
from pathlib import Path

from agentic_loop.atomic import atomic_write_bytes
from agentic_loop.errors import ConfigError

__all__ = [
    "leftover_files",
    "line_time",
    "names_any",
    "parse_age",
    "parse_time",
    "scrub_lines",
    "strings_in",
]

_STRING = re.compile(rb'"((?:[^"\\\n]|\\.)*)"')
_AGE = re.compile(r"\s*(\d+(?:\.\d+)?)\s*([smhdw])\s*")
_UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days", "w": "weeks"}
_TIME_KEYS = ("created_at", "at", "deleted_at", "updated_at")
_TIME_VALUE = re.compile(rb'"(?:created_at|at)"\s*:\s*"([^"]{10,40})"')


def parse_age(text: str) -> timedelta:
    """A retention age such as ``"90d"``, ``"12h"``, ``"2w"``, ``"30m"`` or ``"45s"``."""
    match = _AGE.fullmatch(text or "")
    if match is None:
        raise ConfigError(f"older_than={text!r} is not an age; pass a number and a unit, "
                          "e.g. 90d (days), 12h (hours), 2w (weeks), 30m (minutes), 45s")
    return timedelta(**{_UNITS[match.group(2)]: float(match.group(1))})


def parse_time(value: object) -> datetime | None:
    """An ISO 8601 time as an aware UTC datetime (naive means UTC); ``None`` if it is not one."""
    if not isinstance(value, str):
        return None
    try:
        when = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return when if when.tzinfo else when.replace(tzinfo=UTC)


def strings_in(raw: bytes) -> set[str]:
    """Every complete JSON string literal in ``raw`` (keys and values), even in a broken line."""
    found = set()
    for match in _STRING.finditer(raw):
        literal = match.group(1)
        try:
            found.add(json.loads(b'"' + literal + b'"'))
        except ValueError:
            found.add(literal.decode("utf-8", "replace"))
    return found


def names_any(raw: bytes, needles: Iterable[str] | set[str]) -> bool:
    """Whether a line names any of ``needles`` as a whole JSON string (an id, a user hash)."""
    wanted = needles if isinstance(needles, (set, frozenset)) else set(needles)
    return bool(wanted) and not wanted.isdisjoint(strings_in(raw))


def line_time(raw: bytes) -> datetime | None:
    """When a log line was written: its ``created_at`` (or ``at``), parsed or found by pattern."""
    try:
        obj = json.loads(raw)
    except ValueError:
        obj = None
    if isinstance(obj, dict):
        for key in _TIME_KEYS:
            when = parse_time(obj.get(key))
            if when is not None:
                return when
        return None
    match = _TIME_VALUE.search(raw)
    return parse_time(match.group(1).decode("ascii", "replace")) if match else None


def scrub_lines(path: Path, drop: Callable[[bytes], bool]) -> int:
    """Rewrite ``path`` without the lines ``drop`` picks; return how many went.

    The file is replaced atomically, or deleted when no line is left. A
    missing file counts as nothing to do. The caller holds whatever lock
    guards the file.
    """
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return 0
    lines = data.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    kept = [line for line in lines if not line.strip() or not drop(line)]
    removed = len(lines) - len(kept)
    if removed == 0:
        return 0
    if any(line.strip() for line in kept):
        atomic_write_bytes(path, b"".join(line + b"\n" for line in kept))
    else:
        path.unlink()
    return removed


def leftover_files(path: Path) -> list[Path]:
    """Copies of ``path``'s lines that outlive a rewrite: ``.corrupt``, ``.bak``, temporaries.

    Call it holding the lock of ``path``: every writer holds that lock while
    its temporary file exists, so a temporary found then is an orphan.
    """
    folder = path.parent
    found = [folder / f"{path.name}.corrupt", folder / f"{path.name}.bak"]
    found += sorted(folder.glob(f".{path.name}.*.tmp"))
    return [p for p in found if p.is_file()]
