"""When the flywheel starts a round: enough new accepted runs, or a schedule with new runs.

Why here, and why through the improve watermark: a round's pool is the
tasks of trajectories *past the watermark* improve keeps
(:class:`~agentic_loop.distill.loop.state.Watermark`), read the way the
pool reads them (:func:`~agentic_loop.distill.loop.pool.trajectory_pool`:
the loop's own grown runs, ``metadata["improve"]``, are not traffic). The
trigger counts exactly those runs, accepted ones only, so "50 new runs"
means 50 runs the next round would learn from, and no run is counted twice
across rounds or hosts (the watermark is a time and ids, not a file offset).

It fires when either rule holds (both may be set): ``min_new_runs`` new
accepted runs, or ``every_s`` seconds since the last round and at least one
new accepted run (a schedule never starts a round on nothing).

Sources are TrajectoryLog folders or ``.jsonl`` files (a missing one has no
runs yet), or ``postgresql://`` URLs (the shared trajectory sink, read
through :func:`agentic_loop.trajectory_stores.open_trajectory_log`).

Example:
    >>> from datetime import datetime, timedelta, timezone
    >>> from agentic_loop.trajectories import Trajectory
    >>> now = datetime(2026, 1, 1, tzinfo=timezone.utc)
    >>> runs = [Trajectory(architecture="a", model_id="m", task="t", accepted=True)
    ...         for _ in range(3)]
    >>> check_trigger(runs, Watermark(), min_new_runs=5, every_s=None, last_round_at=None,
    ...               now=now).fire
    False
    >>> check = check_trigger(runs, Watermark(), min_new_runs=5, every_s=3600,
    ...                       last_round_at=now - timedelta(hours=2), now=now)
    >>> check.fire, check.reason
    (True, 'schedule: 7200 s since the last round (every 3600 s) and 3 new accepted runs')
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from agentic_loop.distill.loop.pool import new_pool_runs, read_pool_runs
from agentic_loop.distill.loop.state import Watermark
from agentic_loop.trajectories import Trajectory
from agentic_loop.trajectory_stores import is_database_url

__all__ = ["TriggerCheck", "check_trigger", "existing_sources", "read_sources"]


def existing_sources(sources: Sequence[str | os.PathLike[str]]) -> list[str | os.PathLike[str]]:
    """The sources that can be read now: URLs, and paths that exist."""
    return [s for s in sources if is_database_url(s) or Path(s).expanduser().exists()]


def read_sources(sources: Sequence[str | os.PathLike[str]]) -> list[Trajectory]:
    """Every run in the ``sources`` that exist now (none yet: no run), as the pool reads them."""
    existing = existing_sources(sources)
    return read_pool_runs(existing) if existing else []


@dataclass(frozen=True)
class TriggerCheck:
    """The trigger's answer: fire or not, the new accepted runs it counted, and why."""

    fire: bool
    accepted: int
    reason: str
    #: every new traffic run past the watermark (accepted or not)
    runs: list[Trajectory] = field(default_factory=list)


def check_trigger(runs: Iterable[Trajectory], watermark: Watermark, *,
                  min_new_runs: int | None, every_s: float | None,
                  last_round_at: datetime | None, now: datetime) -> TriggerCheck:
    """Whether a round should start now (see the module doc)."""
    fresh = new_pool_runs(runs, watermark)
    accepted = sum(1 for t in fresh if t.accepted)
    if min_new_runs is not None and accepted >= min_new_runs:
        return TriggerCheck(True, accepted, f"{accepted} new accepted runs (>= {min_new_runs})",
                            fresh)
    if every_s is not None and accepted >= 1:
        since = None if last_round_at is None else (now - last_round_at).total_seconds()
        if since is None or since >= every_s:
            when = "no round yet" if since is None else f"{since:.0f} s since the last round"
            return TriggerCheck(True, accepted, f"schedule: {when} (every {every_s:g} s) and "
                                f"{accepted} new accepted runs", fresh)
    rules = [f"{min_new_runs} new accepted runs" if min_new_runs is not None else "",
             f"every {every_s:g} s" if every_s is not None else ""]
    wanted = " or ".join(r for r in rules if r) or "no trigger set"
    return TriggerCheck(False, accepted, f"{accepted} new accepted runs; waiting for {wanted}",
                        fresh)
