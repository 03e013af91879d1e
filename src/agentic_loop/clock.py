"""The one UTC clock: every timestamp the package writes comes from here.

Why one helper: trajectories, archive records, manifests and model cards are
compared and sorted across files and machines, so they must all be aware
datetimes in UTC (never naive local time), serialized the same way.

Example:
    >>> now = utc_now()
    >>> now.tzinfo is not None and now.utcoffset().total_seconds() == 0
    True
    >>> utc_stamp(datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC))
    '2026-01-02T03:04:05+00:00'
"""

from __future__ import annotations

from datetime import UTC, datetime

__all__ = ["utc_now", "utc_stamp"]


def utc_now() -> datetime:
    """The current time as an aware UTC datetime."""
    return datetime.now(UTC)


def utc_stamp(when: datetime | None = None) -> str:
    """ISO 8601 with seconds and offset (``2026-01-02T03:04:05+00:00``); now by default."""
    return (when or utc_now()).isoformat(timespec="seconds")
