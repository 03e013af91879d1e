"""One way to name a trajectory log: a folder or ``.jsonl`` file, or a Postgres URL.

Why: every place that takes a trajectory log (an architecture's
``trajectories=``, the improve loop's trajectory pool, ``forget``) should
accept both kinds the same way, so a worker fleet switches to a shared
database by changing a string. A ``postgresql://`` or ``postgres://`` URL
opens a :class:`~agentic_loop.trajectory_stores.postgres.PostgresTrajectoryLog`
(``?table=runs`` in the URL: its tables are ``runs``, ``runs_feedback``... instead of the
default ones);
any other string or path a :class:`~agentic_loop.trajectories.TrajectoryLog`;
a log object is returned as it is.

Example:
    >>> import tempfile
    >>> is_database_url("postgresql://app@db/agents"), is_database_url("runs/trajectories")
    (True, False)
    >>> open_trajectory_log("postgres://app:pw@db/agents")
    PostgresTrajectoryLog('user=app dbname=agents host=db')
    >>> type(open_trajectory_log(tempfile.mkdtemp())).__name__
    'TrajectoryLog'
"""

from __future__ import annotations

import os

from agentic_loop.errors import ConfigError
from agentic_loop.trajectories import TrajectoryLog
from agentic_loop.trajectory_stores.postgres import PostgresTrajectoryLog

__all__ = ["DATABASE_SCHEMES", "AnyTrajectoryLog", "is_database_url", "open_trajectory_log"]

#: URL schemes that name a Postgres trajectory log.
DATABASE_SCHEMES = ("postgresql://", "postgres://")

AnyTrajectoryLog = TrajectoryLog | PostgresTrajectoryLog


def is_database_url(where: object) -> bool:
    """Whether ``where`` is a string naming a Postgres database by URL."""
    return isinstance(where, str) and where.strip().lower().startswith(DATABASE_SCHEMES)


def open_trajectory_log(where: str | os.PathLike[str] | TrajectoryLog | PostgresTrajectoryLog,
                        ) -> TrajectoryLog | PostgresTrajectoryLog:
    """The trajectory log ``where`` names (see the module)."""
    if isinstance(where, (TrajectoryLog, PostgresTrajectoryLog)):
        return where
    if is_database_url(where):
        assert isinstance(where, str)
        return PostgresTrajectoryLog(where.strip())
    if isinstance(where, (str, os.PathLike)):
        return TrajectoryLog(where)
    raise ConfigError(f"trajectories={where!r}: pass a TrajectoryLog folder or .jsonl file, a "
                      "postgresql:// URL, or a TrajectoryLog/PostgresTrajectoryLog")
