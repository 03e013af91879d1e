"""Which records an erasure takes: one user's, everything before a cutoff, or a user's before it.

Why one rule object: the trajectory log, the feedback and consent logs, the
memory collections, the exported datasets and their leftover files all ask
the same question of different shapes (a parsed record with a hashed user
id and a time, or a raw line no parser accepts). Answering it in one place
keeps ``forget --user`` and ``--older-than`` meaning the same thing in
every store.

A record made *from* a taken run (an archive entry, a reflection, a dataset
row) goes with it whatever its own fields say: that link is checked by the
stores through the run ids this selection took (``ids`` below).

Example:
    >>> from datetime import UTC, datetime
    >>> old, new = datetime(2025, 1, 1, tzinfo=UTC), datetime(2025, 6, 1, tzinfo=UTC)
    >>> user = Selection(user_hash="h1")
    >>> user.takes("h1", new), user.takes("h2", old), user.takes(None, old)
    (True, False, False)
    >>> retention = Selection(before=datetime(2025, 3, 1, tzinfo=UTC))
    >>> retention.takes(None, old), retention.takes("h1", new), retention.takes("h1", None)
    (True, False, False)
    >>> both = Selection(user_hash="h1", before=datetime(2025, 3, 1, tzinfo=UTC))
    >>> both.takes("h1", old), both.takes("h1", new), both.takes("h2", old)
    (True, False, False)
    >>> user.takes_line(b'{"user_id_hash": "h1", "task": "torn', ids=set())
    True
    >>> retention.takes_line(b'{"id": "r9", "created_at": "2024-12-01T00:00:00+00:00"}', ids=set())
    True
    >>> retention.takes_line(b'garbage with no date', ids={"r9"}, fallback=new)
    False
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from agentic_loop.distill.forget.files import line_time, strings_in

__all__ = ["RUNS_ONLY", "RunsOnly", "Selection"]


@dataclass(frozen=True)
class Selection:
    """A user (by the hash trajectories store) and/or a cutoff time; at least one is set."""

    user_hash: str | None = None
    before: datetime | None = None

    @property
    def kind(self) -> str:
        """``"user"``, ``"retention"`` or ``"user+retention"`` (for reports and audits)."""
        parts = [name for name, on in (("user", self.user_hash), ("retention", self.before)) if on]
        return "+".join(parts)

    def takes(self, user_hash: str | None, created: datetime | None) -> bool:
        """Whether a record of ``user_hash`` created at ``created`` is selected.

        A record of unknown time is never taken for its age alone.
        """
        if self.user_hash is not None and user_hash != self.user_hash:
            return False
        return self.before is None or (created is not None and created < self.before)

    def takes_line(self, raw: bytes, ids: set[str], fallback: datetime | None = None) -> bool:
        """Whether a raw line (maybe torn or corrupt) belongs to what this selection erases.

        It does when it names one of ``ids`` (runs and records already
        taken), or when its own user hash and time match; ``fallback`` is the
        time to assume for a line that carries none (e.g. the modification
        time of a quarantine file: its lines are all older than that).
        """
        strings = strings_in(raw)
        if not ids.isdisjoint(strings):
            return True
        user = self.user_hash if self.user_hash in strings else None
        return self.takes(user, line_time(raw) or fallback)


@dataclass(frozen=True)
class RunsOnly(Selection):
    """A selection that takes no record by its own user or time: only what names the given runs.

    An erasure given run ids and this selection removes what was made from
    those runs and nothing else (a person's ``reject`` label withdraws a run's
    archived output, :mod:`~agentic_loop.distill.forget.rejected`).

    >>> RUNS_ONLY.takes(None, None), RUNS_ONLY.takes("h1", None)
    (False, False)
    >>> RUNS_ONLY.takes_line(b'{"trajectory_id": "run1"}', ids={"run1"})
    True
    >>> RUNS_ONLY.takes_line(b'{"trajectory_id": "run2"}', ids={"run1"})
    False
    """

    @property
    def kind(self) -> str:
        return "runs"

    def takes(self, user_hash: str | None, created: datetime | None) -> bool:
        return False


#: The one :class:`RunsOnly` selection.
RUNS_ONLY = RunsOnly()
