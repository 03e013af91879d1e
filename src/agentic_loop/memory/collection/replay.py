"""Replaying a collection's log: record versions and tombstones in, the live records out.

Why one function: a collection's ``entries.jsonl`` never changes a line; a
changed record is a new version with the same id and a deletion is a
tombstone line. What the log *means* (which records are live, and which
version of each) is decided by replaying it, and two replays that disagree
would make an export see records the archive itself no longer has.
:class:`~agentic_loop.memory.collection.record_collection.RecordCollection` keeps a
:class:`LogReplay` up to date as it reads; the read-only reader
(:func:`~agentic_loop.memory.collection.snapshot.read_collections`) replays a whole log
once. Both call :meth:`LogReplay.apply`.

Example:
    >>> from agentic_loop.memory.records import ArchiveEntry, Tombstone
    >>> a = ArchiveEntry(id="a", task="t", output="one")
    >>> b = ArchiveEntry(id="b", task="t", output="two")
    >>> replay: LogReplay[ArchiveEntry] = LogReplay()
    >>> replay.apply([a, b, a.model_copy(update={"output": "one, again"}), Tombstone(id="b")])
    >>> [(r.id, r.output) for r in replay.live()]
    [('a', 'one, again')]
    >>> len(replay.rows), replay.is_live(0), replay.is_live(2), replay.current("b")
    (3, False, True, None)
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from agentic_loop.memory.records import MemoryRecord, Tombstone

__all__ = ["LogReplay"]

R = TypeVar("R", bound=MemoryRecord)


@dataclass
class LogReplay(Generic[R]):
    """The state a log's lines add up to.

    ``rows`` holds every record version in log order (row *n* is the *n*-th
    version, which is also row *n* of the collection's vector indexes);
    ``latest`` maps each live id to the row of its newest version.
    """

    rows: list[R] = field(default_factory=list)
    latest: dict[str, int] = field(default_factory=dict)

    def apply(self, lines: Iterable[R | Tombstone], *, reset: bool = False) -> None:
        """Apply log lines in order; ``reset`` first forgets everything (a replaced log)."""
        if reset:
            self.rows = []
            self.latest = {}
        for line in lines:
            if isinstance(line, Tombstone):
                self.latest.pop(line.id, None)
            else:
                self.latest[line.id] = len(self.rows)
                self.rows.append(line)

    def live(self) -> list[R]:
        """The newest version of every live record, ordered by where that version is in the log."""
        return [self.rows[row] for row in sorted(self.latest.values())]

    def live_rows(self) -> list[int]:
        """The rows of :meth:`live`, in the same order."""
        return sorted(self.latest.values())

    def is_live(self, row: int) -> bool:
        """Whether ``row`` is the newest version of a record that is not deleted."""
        return self.latest.get(self.rows[row].id) == row

    def current(self, record_id: str) -> R | None:
        """The newest version of the record with ``record_id``, or ``None`` (unknown or deleted)."""
        row = self.latest.get(record_id)
        return None if row is None else self.rows[row]
