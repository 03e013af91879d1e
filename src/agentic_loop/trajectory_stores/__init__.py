"""Trajectory logs beyond the local file: Postgres, shared by workers on many hosts.

Why a package: the file log (:class:`~agentic_loop.trajectories.TrajectoryLog`)
stays where it is, the floor every reader stands on; the stores that need a
server live here, above it, and import their driver only when used
(importing :mod:`agentic_loop` never imports psycopg).

Modules: :mod:`.postgres` (:class:`PostgresTrajectoryLog`), :mod:`.schema`
(its tables, rows and merging), :mod:`.erase` (erasing a user's rows, or
those past a retention age), :mod:`.open` (:func:`open_trajectory_log`: a
path or a URL to a log).

Example:
    >>> is_database_url("postgresql://app@db/agents")
    True
"""

from agentic_loop.trajectory_stores.erase import DatabaseErasure
from agentic_loop.trajectory_stores.open import (
    DATABASE_SCHEMES,
    AnyTrajectoryLog,
    is_database_url,
    open_trajectory_log,
)
from agentic_loop.trajectory_stores.postgres import PostgresTrajectoryLog
from agentic_loop.trajectory_stores.schema import database_key, safe_dsn

__all__ = [
    "DATABASE_SCHEMES",
    "AnyTrajectoryLog",
    "DatabaseErasure",
    "PostgresTrajectoryLog",
    "database_key",
    "is_database_url",
    "open_trajectory_log",
    "safe_dsn",
]
