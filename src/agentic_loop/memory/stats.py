"""What an archive holds, at a glance: size, scores, growth and drift.

An archive that only grows is not necessarily getting better. ``stats``
answers the questions that matter when watching it: how many entries, how
their scores are spread (a pile-up at the top hints at a lenient judge),
how fast it grows per day, and whether recent entries score higher than
the oldest ones (``drift``; negative means quality is slipping).

Example:
    >>> from datetime import datetime, timezone
    >>> from agentic_loop.memory.records import ArchiveEntry
    >>> day = lambda d: datetime(2025, 1, d, tzinfo=timezone.utc)
    >>> entries = [ArchiveEntry(task="t", output=f"o{i}", score=s, created_at=day(1 + i // 2))
    ...            for i, s in enumerate([6, 7, 7, 8, 9, 9])]
    >>> stats = archive_stats(entries)
    >>> stats.count, stats.scores.mean, stats.scores.median
    (6, 7.67, 7.5)
    >>> [(p.date.day, p.added, p.total) for p in stats.growth]
    [(1, 2, 2), (2, 2, 4), (3, 2, 6)]
    >>> stats.drift.oldest_mean, stats.drift.recent_mean, stats.drift.change
    (6.5, 9.0, 2.5)
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from datetime import date, datetime

import numpy as np
from pydantic import BaseModel

from agentic_loop.memory.records import ArchiveEntry

__all__ = ["ArchiveStats", "GrowthPoint", "ScoreDrift", "ScoreSummary", "archive_stats"]


class ScoreSummary(BaseModel):
    """Distribution of the scores of scored entries (rounded to 2 decimals)."""

    count: int
    mean: float
    std: float
    min: float
    p10: float
    median: float
    p90: float
    max: float
    # (lower, upper, count): 10 equal bins over [min, max]
    histogram: list[tuple[float, float, int]]


class GrowthPoint(BaseModel):
    """Entries added on one UTC day, and the running total."""

    date: date
    added: int
    total: int


class ScoreDrift(BaseModel):
    """Mean score of the newest ``window`` scored entries against the oldest ``window``."""

    window: int
    oldest_mean: float
    recent_mean: float
    change: float


class ArchiveStats(BaseModel):
    """The answer of ``Archive.stats()``."""

    count: int
    scored: int
    first_at: datetime | None
    last_at: datetime | None
    scores: ScoreSummary | None
    growth: list[GrowthPoint]
    drift: ScoreDrift | None


def _r(value: float) -> float:
    return round(float(value), 2)


def archive_stats(entries: Sequence[ArchiveEntry]) -> ArchiveStats:
    """Summarize ``entries`` (any order); see the module docstring."""
    ordered = sorted(entries, key=lambda e: e.created_at)
    scored = [e.score for e in ordered if e.score is not None]
    summary = None
    drift = None
    if scored:
        arr = np.asarray(scored, dtype=np.float64)
        counts, edges = np.histogram(arr, bins=10)
        summary = ScoreSummary(
            count=len(arr),
            mean=_r(arr.mean()),
            std=_r(arr.std()),
            min=_r(arr.min()),
            p10=_r(np.percentile(arr, 10)),
            median=_r(np.median(arr)),
            p90=_r(np.percentile(arr, 90)),
            max=_r(arr.max()),
            histogram=[
                (_r(lo), _r(hi), int(c)) for lo, hi, c in zip(edges[:-1], edges[1:], counts)
            ],
        )
        if len(arr) >= 2:
            window = max(1, min(100, len(arr) // 3))
            oldest, recent = arr[:window].mean(), arr[-window:].mean()
            drift = ScoreDrift(
                window=window,
                oldest_mean=_r(oldest),
                recent_mean=_r(recent),
                change=_r(recent - oldest),
            )
    per_day = Counter(e.created_at.date() for e in ordered)
    growth: list[GrowthPoint] = []
    total = 0
    for day in sorted(per_day):
        total += per_day[day]
        growth.append(GrowthPoint(date=day, added=per_day[day], total=total))
    return ArchiveStats(
        count=len(ordered),
        scored=len(scored),
        first_at=ordered[0].created_at if ordered else None,
        last_at=ordered[-1].created_at if ordered else None,
        scores=summary,
        growth=growth,
        drift=drift,
    )
