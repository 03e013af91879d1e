"""Erasing runs from Postgres trajectory logs, in the same pass as the file logs.

Why beside :mod:`.logs`: workers on many hosts log their runs to one
database (:class:`~agentic_loop.trajectory_stores.PostgresTrajectoryLog`),
named among the trajectory logs by its ``postgresql://`` URL. The erasure
asks each database to delete the selected runs with their feedback, reviews
and (forgetting a user) consent rows, in one transaction
(:mod:`agentic_loop.trajectory_stores.erase`), and adds what went to the
same :class:`~.logs.RunErasure` as the files: the erased runs' ids and
texts lead on to memory records and dataset rows, and the report lists the
database (without its password) with the rows erased there. Besides the
databases given, every one a log recorded in ``places.jsonl`` (kind
``database``: :mod:`agentic_loop.text_places`), in the table it recorded, is
reached. A database that cannot be reached is a warning in the report, never
skipped silently; a recorded place has no password, so for a server that asks
for one the warning says to give forget the database with its password (it is
then reached once, by the string given).

Example:
    >>> split_databases(["data/trajectories", "postgresql://app@db/agents"])
    (['data/trajectories'], ['postgresql://app@db/agents'])
    >>> split_databases(None)
    (None, [])
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import TypeVar

from agentic_loop.distill.forget.files import parse_time
from agentic_loop.distill.forget.logs import RunErasure, _run_texts
from agentic_loop.distill.forget.recorded import PlaceResult
from agentic_loop.distill.forget.selection import Selection
from agentic_loop.errors import AgenticLoopError
from agentic_loop.trajectory_stores import (
    PostgresTrajectoryLog,
    database_key,
    is_database_url,
    safe_dsn,
)

__all__ = ["WHAT", "erase_databases", "split_databases", "unique_databases", "withdraw_in"]

P = TypeVar("P", bound="str | os.PathLike[str]")
#: How the report names a Postgres trajectory log.
WHAT = "trajectory database"


def split_databases(given: Sequence[P] | P | None) -> tuple[list[P] | None, list[str]]:
    """``given`` trajectory places split into the paths (``None`` stays ``None``: the
    defaults) and the database URLs."""
    if given is None:
        return None, []
    items: list[P] = [given] if isinstance(given, (str, os.PathLike)) else list(given)
    urls = [str(p) for p in items if is_database_url(p)]
    return [p for p in items if not is_database_url(p)], urls


def unique_databases(urls: Sequence[str]) -> list[str]:
    """``urls`` with each database once (its first spelling), however it is spelled.

    >>> unique_databases(["postgresql://app@db/a", "user=app dbname=a host=db",
    ...                   "user=app dbname=b"])
    ['postgresql://app@db/a', 'user=app dbname=b']
    """
    first: dict[str, str] = {}
    for url in urls:
        first.setdefault(database_key(url), url)
    return list(first.values())


def erase_databases(urls: Sequence[str], selection: Selection, into: RunErasure, *,
                    dry_run: bool = False) -> list[PlaceResult]:
    """Erase what ``selection`` takes from each database in ``urls`` (count only with
    ``dry_run``), adding it to ``into``; return the databases that could not be reached."""
    problems: list[PlaceResult] = []
    for url in unique_databases(urls):
        try:
            with PostgresTrajectoryLog(url, retry_s=5.0) as log:
                gone = log.erase(user_id_hash=selection.user_hash, before=selection.before,
                                 dry_run=dry_run)
        except AgenticLoopError as exc:
            problems.append(_unreached(url, exc))
            continue
        into.known |= gone.known
        for run in gone.runs:
            into.ids.add(str(run.get("id")))
            into.texts[str(run.get("id"))] = _run_texts(run)
            when = parse_time(run.get("created_at"))
            if when is not None and (into.earliest is None or when < into.earliest):
                into.earliest = when
        for kind in ("trajectories", "feedback", "reviews", "consent"):
            setattr(into, kind, getattr(into, kind) + gone.counts.get(kind, 0))
        if gone.total:
            into.per_file[log.location] = into.per_file.get(log.location, 0) + gone.total
    return problems


def withdraw_in(urls: Sequence[str], user_id: str, *,
                salt: str | None) -> tuple[list[str], list[PlaceResult]]:
    """Record in each database of ``urls`` that ``user_id`` withdrew consent; return the
    databases reached (without their passwords) and those that could not be."""
    reached: list[str] = []
    problems: list[PlaceResult] = []
    for url in unique_databases(urls):
        try:
            with PostgresTrajectoryLog(url, retry_s=5.0) as log:
                log.record_consent(user_id, False, salt=salt)
        except AgenticLoopError as exc:
            problems.append(_unreached(url, exc))
            continue
        reached.append(log.location)
    return reached, problems


def _unreached(url: str, exc: AgenticLoopError) -> PlaceResult:
    """A database out of reach, with what to pass forget when it wants a password."""
    problem = str(exc)
    if "password=PASSWORD" in problem:  # the log's hint: no password in a recorded place
        problem += ("; give forget that string (-t/--trajectories, trajectories= in Python) "
                    "and run it again")
    return PlaceResult(kind="trajectories", path=safe_dsn(url), what=WHAT, problem=problem)
