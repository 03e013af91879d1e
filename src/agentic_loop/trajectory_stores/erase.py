"""Erasing runs from the Postgres trajectory log: a user's, those past a cutoff, or both.

Why in SQL, in one transaction: ``forget`` must leave none of a user's rows
in any of the log's tables, while workers keep appending. The selected runs
are locked (``FOR UPDATE``) and deleted with their feedback and reviews
(found by run id: those rows name no user), and, when a user is forgotten
(not in retention), that user's consent rows; a retention pass also drops
feedback and reviews older than the cutoff whose run is gone, as the file
log's erasure does (:mod:`agentic_loop.distill.forget.logs`). The erased
runs' bodies come back so the erasure can follow them into memory and
dataset rows. Postgres keeps a deleted row's bytes until ``VACUUM`` reuses
the space: run ``VACUUM FULL`` on the tables when the bytes on disk must go.

Example:
    >>> DatabaseErasure(counts={"trajectories": 2, "feedback": 1}).total
    3
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

from agentic_loop.trajectory_stores.schema import TableNames

if TYPE_CHECKING:
    from psycopg import Connection

__all__ = ["DatabaseErasure", "erase_rows"]


@dataclass
class DatabaseErasure:
    """What went (or, in a dry run, would go): rows per table, the erased runs' bodies, and
    every run id the log held before."""

    counts: dict[str, int] = field(default_factory=dict)
    runs: list[dict[str, Any]] = field(default_factory=list)
    known: set[str] = field(default_factory=set)

    @property
    def total(self) -> int:
        """Rows erased in all tables."""
        return sum(self.counts.values())


def _rows(conn: Connection[Any], table: str, where: str, params: dict[str, Any], *,
          dry_run: bool) -> int:
    """Delete (or count) the rows of ``table`` that ``where`` picks; how many."""
    if dry_run:
        row = conn.execute(f"SELECT count(*) FROM {table} WHERE {where}".encode(),
                           params).fetchone()
        return int(row[0]) if row else 0
    return conn.execute(f"DELETE FROM {table} WHERE {where}".encode(), params).rowcount


def erase_rows(conn: Connection[Any], names: TableNames, *, user_id_hash: str | None,
               before: datetime | None, dry_run: bool) -> DatabaseErasure:
    """Erase (in the caller's transaction) what the module describes; return what went."""
    result = DatabaseErasure()
    result.known = {r for (r,) in conn.execute(f"SELECT run_id FROM {names.runs}".encode())}
    params: dict[str, Any] = {"user": user_id_hash, "before": before}
    picked = conn.execute(
        f"SELECT run_id, body FROM {names.runs} WHERE (%(user)s::text IS NULL OR "
        "user_id_hash = %(user)s) AND (%(before)s::timestamptz IS NULL OR "
        "created_at < %(before)s) ORDER BY id FOR UPDATE".encode(), params).fetchall()
    ids = [run_id for run_id, _ in picked]
    result.runs = [body for _, body in picked]
    params |= {"ids": ids, "retention": user_id_hash is None and before is not None}
    result.counts["trajectories"] = _rows(conn, names.runs, "run_id = ANY(%(ids)s)", params,
                                          dry_run=dry_run)
    for key, table in (("feedback", names.feedback), ("reviews", names.reviews)):
        result.counts[key] = _rows(
            conn, table, "trajectory_id = ANY(%(ids)s) OR (%(retention)s AND created_at < "
            f"%(before)s AND NOT EXISTS (SELECT 1 FROM {names.runs} r WHERE r.run_id = "
            f"{table}.trajectory_id))", params, dry_run=dry_run)
    forgets_user = user_id_hash is not None and before is None
    result.counts["consent"] = _rows(conn, names.consent, "user_id_hash = %(user)s", params,
                                     dry_run=dry_run) if forgets_user else 0
    return result
