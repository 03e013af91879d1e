"""The local review queue: runs waiting for a person, and the labels they give.

Why a file beside the trajectories: the queue must outlive the process that
sampled it, be shared by every terminal that reviews, and be found by
``forget`` with the runs it names. So it is one more append-only log in the
trajectory log's folder, ``review_queue.jsonl``
(:class:`~agentic_loop.jsonl_log.JsonlLog`: fsync'd, locked, torn lines
skipped). A run is queued once however often it is sampled; *pending* is
queued minus labelled (a label from anywhere: this queue, or pulled from a
LangSmith annotation queue). Labels go to the log's ``reviews.jsonl``
(:meth:`~agentic_loop.trajectories.TrajectoryLog.record_review`), where the
next export and the monitor read them. A label made here records how its run was
drawn (``drawn``: ``"random"`` for a run the sample's hash drew, ``"edge"`` for an
edge case; ``None`` for a run labelled without being queued), because the agreement
alarm may only decide on the random draw: edge cases have a restricted score range.

Example:
    >>> import tempfile
    >>> from agentic_loop.distill.review.sampling import ReviewPick
    >>> from agentic_loop.trajectories import Trajectory, TrajectoryLog
    >>> folder = tempfile.mkdtemp()
    >>> TrajectoryLog(folder).append(Trajectory(id="run1", architecture="a", model_id="m",
    ...                                         task="Say hi.", final_output="hi"))
    >>> queue = ReviewQueue(folder)
    >>> pick = ReviewPick(trajectory_id="run1", reasons=["thumbs_down"])
    >>> len(queue.add([pick])), len(queue.add([pick]))       # queued once
    (1, 0)
    >>> [i.trajectory_id for i in queue.pending()]
    ['run1']
    >>> label = queue.label("run1", verdict="reject", rating=2)
    >>> label.verdict, label.drawn                           # picked as an edge case
    ('reject', 'edge')
    >>> queue.pending()
    []
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from agentic_loop.clock import utc_now
from agentic_loop.distill.review.sampling import ReviewPick
from agentic_loop.errors import ConfigError
from agentic_loop.jsonl_log import JsonlLog
from agentic_loop.trajectories import ReviewLabel, Trajectory, TrajectoryLog

__all__ = ["QUEUE_FILE", "Drawn", "QueueItem", "ReviewQueue", "Verdict"]

#: The queue's file, beside ``trajectories.jsonl`` and ``reviews.jsonl``.
QUEUE_FILE = "review_queue.jsonl"
#: Shortest id prefix a person may type for a run.
MIN_PREFIX = 6

Verdict = Literal["accept", "reject"]
Drawn = Literal["random", "edge"]


class QueueItem(BaseModel):
    """One run waiting for review: why it was picked, and where it was sent.

    ``destination`` is ``"langsmith"`` when the run went to a LangSmith
    annotation queue (``queue_id``, ``langsmith_run_id``), else ``"local"``;
    ``note`` says why a run went local while LangSmith was configured.
    """

    model_config = ConfigDict(frozen=True)

    trajectory_id: str
    reasons: list[str] = Field(default_factory=list)
    score: float | None = None
    destination: Literal["local", "langsmith"] = "local"
    queue_id: str | None = None
    langsmith_run_id: str | None = None
    note: str | None = None
    queued_at: datetime = Field(default_factory=utc_now)

    @property
    def drawn(self) -> Drawn:
        """``"random"`` when the sample's hash drew the run (``"sampled"`` among its reasons,
        edge case or not: the hash draws from every eligible run), else ``"edge"`` (picked
        only as an edge case, or no reason recorded: never let it decide the alarm): the
        stratum its labels belong to (see the module docstring)."""
        return "random" if "sampled" in self.reasons else "edge"


class ReviewQueue:
    """The review queue of one trajectory log folder (``path``: the folder or its
    ``trajectories.jsonl``, as :class:`TrajectoryLog` takes it)."""

    def __init__(self, path: str | os.PathLike[str] | TrajectoryLog) -> None:
        self.log = path if isinstance(path, TrajectoryLog) else TrajectoryLog(path)
        self._items: JsonlLog[QueueItem] = JsonlLog(self.log.dir / QUEUE_FILE, QueueItem)

    @property
    def path(self) -> Path:
        """The queue file."""
        return self._items.path

    def add(self, picks: Sequence[ReviewPick]) -> list[QueueItem]:
        """Queue ``picks`` for local review; return the items new to the queue."""
        return self.enqueue([QueueItem(trajectory_id=p.trajectory_id, reasons=list(p.reasons),
                                       score=p.score) for p in picks])

    def enqueue(self, items: Sequence[QueueItem]) -> list[QueueItem]:
        """Append the items whose run is not queued yet (atomically, under the log's lock);
        return them."""
        with self._items.locked():
            queued = {i.trajectory_id for i in self._items.read_all()}
            new = []
            for item in items:
                if item.trajectory_id not in queued:
                    queued.add(item.trajectory_id)
                    new.append(item)
            if new:
                self._items.append_many(new)
        return new

    def items(self) -> list[QueueItem]:
        """Every queued run, oldest first (the first entry of a run, should one repeat)."""
        seen: dict[str, QueueItem] = {}
        for item in self._items.read_all():
            seen.setdefault(item.trajectory_id, item)
        return list(seen.values())

    def pending(self) -> list[QueueItem]:
        """The queued runs no one has labelled yet."""
        labelled = {label.trajectory_id for label in self.log.reviews()}
        return [i for i in self.items() if i.trajectory_id not in labelled]

    def runs(self) -> dict[str, Trajectory]:
        """The log's runs by id (reviews merged in)."""
        return {t.id: t for t in self.log.read()}

    def resolve(self, trajectory_id: str, runs: dict[str, Trajectory] | None = None) -> str:
        """The full id of the logged run ``trajectory_id`` names (a unique prefix of at least
        6 characters will do); a clear error when none or several match."""
        runs = self.runs() if runs is None else runs
        if trajectory_id in runs:
            return trajectory_id
        matches = ([i for i in runs if i.startswith(trajectory_id)]
                   if len(trajectory_id) >= MIN_PREFIX else [])
        if len(matches) == 1:
            return matches[0]
        where = self.log.path
        if matches:
            raise ConfigError(f"run id {trajectory_id!r} matches {len(matches)} runs in {where}; "
                              "type more of it (`agentic-loop review list` shows the ids)")
        raise ConfigError(f"no run {trajectory_id!r} in {where}; `agentic-loop review list` "
                          "shows the pending ids (a prefix of 6+ characters will do)")

    def label(self, trajectory_id: str, *, verdict: Verdict | None = None,
              rating: int | None = None, comment: str | None = None,
              reviewer: str | None = None) -> ReviewLabel:
        """Record a person's label on a logged run (queued or not) and return it; ``drawn``
        says how the queue drew the run (None: the run was never queued)."""
        run_id = self.resolve(trajectory_id)
        if rating is not None and not 1 <= rating <= 5:
            raise ConfigError(f"rating={rating!r}: rate a run from 1 (bad) to 5 (excellent)")
        if verdict is None and rating is None and not (comment or "").strip():
            raise ConfigError(f"label for run {run_id}: give a verdict (--accept/--reject), a "
                              "rating or a comment")
        item = next((i for i in self.items() if i.trajectory_id == run_id), None)
        label = ReviewLabel(trajectory_id=run_id, verdict=verdict, rating=rating,
                            comment=comment or None, reviewer=reviewer, source="local",
                            drawn=item.drawn if item is not None else None)
        self.log.record_review(label)
        return label
