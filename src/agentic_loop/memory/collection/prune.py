"""Prune policy: which live records a compaction keeps, and what it reports.

Why apart from the collection: the rule (drop what a filter rejects, what
is older than a cutoff, then keep the best or newest ``max_entries``) is
plain list logic on records; the collection only carries it out (rewrites
the log and carries index vectors over). Keeping the two apart lets the
policy be read and tested without any file.

Example:
    >>> from datetime import UTC, datetime, timedelta
    >>> from agentic_loop.memory.records import ArchiveEntry
    >>> day = lambda d: datetime(2025, 1, d, tzinfo=UTC)
    >>> live = [ArchiveEntry(task="t", output=f"o{d}", score=d, created_at=day(d))
    ...         for d in (1, 2, 3)]
    >>> [e.output for e in choose_kept(live, max_entries=2)]                 # newest first
    ['o3', 'o2']
    >>> [e.output for e in choose_kept(live, older_than=day(2))]
    ['o2', 'o3']
    >>> [e.output for e in choose_kept(live, keep_if=lambda e: e.score < 3, max_entries=1,
    ...                                rank=lambda e: e.score)]
    ['o2']
    >>> choose_kept(live, max_entries=-1)
    Traceback (most recent call last):
    ...
    agentic_loop.errors.ConfigError: max_entries=-1: pass a non-negative integer or None
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar

from agentic_loop.clock import utc_now
from agentic_loop.errors import ConfigError
from agentic_loop.memory.records import MemoryRecord

__all__ = ["PruneResult", "choose_kept", "older_than_cutoff"]

R = TypeVar("R", bound=MemoryRecord)


@dataclass(frozen=True)
class PruneResult:
    """What a compaction did: live records ``kept`` and ``removed``, and ``lines_dropped``,
    the log lines it rewrote away in all (removed records, superseded versions,
    tombstones and unreadable lines, the last kept in ``entries.jsonl.corrupt``)."""

    kept: int
    removed: int
    lines_dropped: int


def choose_kept(
    live: list[R],
    *,
    max_entries: int | None = None,
    older_than: timedelta | datetime | None = None,
    keep_if: Callable[[R], bool] | None = None,
    rank: Callable[[R], Any] | None = None,
) -> list[R]:
    """The records a prune keeps: those passing ``keep_if`` and not created before
    ``older_than``, then at most ``max_entries`` of them, highest ``rank`` first
    (newest first when ``rank`` is ``None``)."""
    if max_entries is not None and (isinstance(max_entries, bool) or max_entries < 0):
        raise ConfigError(f"max_entries={max_entries!r}: pass a non-negative integer or None")
    kept = [r for r in live if keep_if is None or keep_if(r)]
    if older_than is not None:
        cutoff = older_than_cutoff(older_than)
        kept = [r for r in kept if r.created_at >= cutoff]
    if max_entries is not None and len(kept) > max_entries:
        key = rank or (lambda r: r.created_at)
        kept = sorted(kept, key=key, reverse=True)[:max_entries]
    return kept


def older_than_cutoff(older_than: timedelta | datetime) -> datetime:
    """The instant before which records count as "older than" ``older_than``
    (a naive ``datetime`` is taken as UTC)."""
    if isinstance(older_than, timedelta):
        return utc_now() - older_than
    if isinstance(older_than, datetime):
        return older_than if older_than.tzinfo else older_than.replace(tzinfo=UTC)
    raise ConfigError(
        f"older_than is a {type(older_than).__name__}; pass a timedelta (back from now) "
        "or a datetime"
    )
