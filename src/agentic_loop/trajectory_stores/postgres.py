"""A trajectory log in Postgres, written by many workers on many hosts and read by the flywheel.

Why: a :class:`~agentic_loop.trajectories.TrajectoryLog` is a file on the
host that wrote it; workers spread over machines need one place to log
runs that the improvement loop reads (the same database as the shared
memory store). :class:`PostgresTrajectoryLog` has the file log's surface
(``append``, ``read``, ``record_feedback``, ``record_consent``,
``record_review``, ``reviews``, iteration, ``len``) plus :meth:`read_since`
and :meth:`forget_user`; :func:`~agentic_loop.trajectory_stores.open_trajectory_log`
picks it for a ``postgresql://`` URL.

Guarantees:

* **Durable appends.** ``append`` returns once its transaction committed.
  It is idempotent (``ON CONFLICT (run_id) DO NOTHING``), so a write retried
  after a lost connection never logs a run twice.
* **Outages are retried.** Every call runs in a fresh transaction on a
  pooled connection (``psycopg_pool``, connections checked before use); a
  connection error is retried with doubling waits for ``retry_s`` seconds
  (a Postgres restart), then raised as a
  :class:`~agentic_loop.errors.StorageError` naming the database without
  its password. Nothing committed before is lost: the rows are the database's.
* **Watermarks across hosts.** ``read_since(w)`` returns the runs with
  ``id > w`` and the new watermark. Ids come from one ``BIGSERIAL``, but a
  writer takes its id when it inserts and may commit after a writer that
  took a larger one: a reader that saw the larger id would then skip the
  smaller one forever. So the reader first takes the table in ``SHARE``
  mode (which waits for every insert in progress to commit or abort, and
  holds new ones back) just long enough to read ``max(id)``, and then reads
  the rows up to that id: each of them is committed (or gone) by then.
  Writers never wait for each other, only for that one index lookup.
* **Forget finds it.** Before its first append, a log records its database and table
  (without the password: ``user=app dbname=agents host=db table=runs``, the table left out
  when it is the default) in the data folder's ``places.jsonl``
  (:mod:`agentic_loop.text_places`), so ``agentic-loop forget`` erases a user's rows there
  without being told. The table can be named in the connection string itself
  (``postgresql://app@db/agents?table=runs``: :func:`~.schema.split_table`) or by ``table=``.
* **Tables appear by themselves.** The first call that writes or reads creates the four
  tables (:mod:`.schema`) if missing, under a transaction-level advisory lock, so two
  processes starting at once do not collide. An erasure never creates them: a log whose
  tables are missing has nothing to erase.
* **A bad connection string is refused at once**, as a
  :class:`~agentic_loop.errors.ConfigError` that shows the string with its password masked
  (never the parser's message, which may quote the password).

Example (with a server: ``dsn`` as ``postgresql://user@host/db``)::

    log = PostgresTrajectoryLog("postgresql://app@db/agents")
    log.append(trajectory)
    runs, mark = log.read_since(0)      # later: log.read_since(mark)
    log.forget_user(hash_user_id("alice"))  # {'trajectories': 3, 'feedback': 1, ...}

Without one, the name says where it points, never the password:
    >>> PostgresTrajectoryLog("postgresql://app:s3cret@db/agents")
    PostgresTrajectoryLog('user=app dbname=agents host=db')
    >>> PostgresTrajectoryLog("postgresql://app:s3cret@db/agents?table=runs").names.runs
    'runs'
    >>> PostgresTrajectoryLog("postgresql://app:s3 cret@db/agents")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    agentic_loop.errors.ConfigError: dsn 'postgresql://app:***@db/agents' is not a connection...
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from datetime import datetime
from types import TracebackType
from typing import TYPE_CHECKING, Any, TypeVar

from agentic_loop.errors import ConfigError, StorageError
from agentic_loop.text_places import data_root, record_place
from agentic_loop.trajectories import (
    ConsentEvent,
    Feedback,
    FeedbackEvent,
    ReviewLabel,
    Trajectory,
    hash_user_id,
    merge_side_records,
)
from agentic_loop.trajectory_stores.erase import DatabaseErasure, erase_rows
from agentic_loop.trajectory_stores.schema import (
    DEFAULT_TABLE,
    TableNames,
    create_sql,
    redacted,
    safe_dsn,
    split_table,
    with_table,
    without_nul,
)

if TYPE_CHECKING:
    from psycopg import Connection
    from psycopg_pool import ConnectionPool

__all__ = ["DEFAULT_RETRY_S", "PostgresTrajectoryLog"]

T = TypeVar("T")
#: Seconds a call keeps retrying a lost connection (a Postgres restart takes a few).
DEFAULT_RETRY_S = 15.0
_CONNECT_TIMEOUT_S = 5
#: Seconds one attempt waits for a pooled connection before asking the server why not.
_ATTEMPT_S = 2.0


def _conninfo(dsn: str) -> dict[str, Any]:
    """``dsn``'s parameters (empty without psycopg: its first call says so)."""
    try:
        from psycopg.conninfo import conninfo_to_dict
    except ImportError:
        return {}
    return conninfo_to_dict(dsn)


def _refused(cause: Exception) -> bool:
    """Whether the server refused the connection's credentials (no use retrying)."""
    text = str(cause).lower()
    return "password" in text or "authentication failed" in text


def _check_dsn(dsn: str) -> None:
    """Refuse a connection string libpq cannot parse, naming it with its password masked."""
    try:
        _conninfo(dsn)
    except Exception:  # noqa: BLE001 - the parser's message may quote the password
        raise ConfigError(
            f"dsn {redacted(dsn)!r} is not a connection string Postgres can parse; write it "
            "as postgresql://user:password@host:5432/db (percent-encode spaces and other "
            "special characters) or as key=value pairs such as 'host=db dbname=agents "
            "user=app'") from None


class PostgresTrajectoryLog:
    """Trajectories, feedback, reviews and consent in four Postgres tables (see the module)."""

    def __init__(self, dsn: str, *, table: str | None = None, pool_size: int = 4,
                 retry_s: float = DEFAULT_RETRY_S) -> None:
        if not isinstance(dsn, str) or not dsn.strip():
            raise ConfigError(f"dsn={dsn!r}: pass a Postgres connection string such as "
                              "postgresql://user@host:5432/db")
        bare, named = split_table(dsn.strip())
        if table is not None and named is not None and table != named:
            raise ConfigError(f"table={table!r} but the connection string names table "
                              f"{named!r}: name the table once")
        _check_dsn(bare)
        if isinstance(pool_size, bool) or not isinstance(pool_size, int) or pool_size < 1:
            raise ConfigError(f"pool_size={pool_size!r}: pass an integer >= 1")
        if not retry_s >= 0:
            raise ConfigError(f"retry_s={retry_s!r}: pass seconds >= 0")
        self.names = TableNames.of(table or named or DEFAULT_TABLE)
        self.dsn = bare
        #: the connection string without its password, with the table unless it is the
        #: default one (messages, reports, places; a log opened on it writes the same tables)
        self.location = with_table(safe_dsn(bare), self.names.runs)
        self.pool_size = pool_size
        self.retry_s = float(retry_s)
        self._pool: ConnectionPool[Any] | None = None
        self._ready = False
        self._place_recorded = False

    # -- connections ----------------------------------------------------------------------

    def _connections(self) -> ConnectionPool[Any]:
        if self._pool is None:
            try:
                from psycopg_pool import ConnectionPool
            except ImportError as exc:
                raise StorageError(f"the Postgres trajectory log {self.location} needs psycopg "
                                   f"and psycopg_pool ({exc}); install agentic-loop[postgres]"
                                   ) from None
            extra = ({} if "connect_timeout" in _conninfo(self.dsn)
                     else {"connect_timeout": _CONNECT_TIMEOUT_S})
            pool: ConnectionPool[Any] = ConnectionPool(
                self.dsn, min_size=1, max_size=self.pool_size, kwargs=extra, open=False,
                check=ConnectionPool.check_connection, name=f"trajectories:{self.names.runs}")
            pool.open(wait=False)
            self._pool = pool
        return self._pool

    def _run(self, what: str, work: Callable[[Connection[Any]], T], *, create: bool = True) -> T:
        """``work`` in one transaction; connection errors retried for ``retry_s`` seconds;
        the tables created first unless ``create`` is false."""
        import psycopg

        deadline = time.monotonic() + self.retry_s
        delay, attempts = 0.1, 0
        while True:
            attempts += 1
            try:
                left = max(min(deadline - time.monotonic(), _ATTEMPT_S), 1.0)
                with self._connections().connection(timeout=left) as conn:
                    if create and not self._ready:
                        self._create(conn)
                    with conn.transaction():
                        return work(conn)
            except psycopg.OperationalError as exc:  # the server is away: wait, try again
                # a refused password stays refused: said at once (the first failure asks why)
                cause = self._cause(exc) if attempts == 1 else exc
                if _refused(cause) or time.monotonic() + delay > deadline:
                    cause = cause if cause is not exc else self._cause(exc)
                    raise StorageError(
                        f"could not {what} the Postgres trajectory log {self.location} after "
                        f"{attempts} attempt(s) over {self.retry_s:g} s ({type(cause).__name__}: "
                        f"{str(cause).strip()[:300]}); {self._remedy(cause)}, then try again "
                        "(nothing committed before is lost)") from exc
                time.sleep(delay)
                delay = min(delay * 2, 2.0)
            except psycopg.Error as exc:
                raise StorageError(
                    f"could not {what} the Postgres trajectory log {self.location} "
                    f"({type(exc).__name__}: {str(exc).strip()[:300]}); check the user's rights "
                    f"on the tables {self.names.runs}* in that database") from exc

    def _cause(self, exc: Exception) -> Exception:
        """The server's own reason for a failed connection: the pool only says it timed out
        (it logs the reason), so one direct connection asks again."""
        import psycopg
        from psycopg_pool import PoolTimeout

        if not isinstance(exc, PoolTimeout):
            return exc
        try:
            psycopg.connect(self.dsn, connect_timeout=2).close()  # libpq's least
        except psycopg.Error as direct:
            return direct
        return exc

    def _remedy(self, cause: Exception) -> str:
        """What to do about a connection that failed with ``cause``."""
        if not _refused(cause):
            return "start the server or fix the address"
        if "password" in _conninfo(self.dsn) or os.environ.get("PGPASSWORD"):
            return "fix the password (or the user's entry in the server's pg_hba.conf)"
        return ("the server asks for a password and this connection string has none (a "
                "recorded place never keeps one): pass the string with it, such as "
                f"'{self.location} password=PASSWORD', or set PGPASSWORD or a ~/.pgpass line")

    def _create(self, conn: Connection[Any]) -> None:
        with conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (self.names.lock_key,))
            for statement in create_sql(self.names):
                conn.execute(statement.encode())
        self._ready = True

    # -- writing --------------------------------------------------------------------------

    def append(self, trajectory: Trajectory) -> None:
        """Store one trajectory; committed when this returns (a second append of the same run
        id is a no-op). The database's place is recorded first, for ``forget``."""
        from psycopg.types.json import Jsonb

        if not self._place_recorded:
            record_place("database", self.location, what="trajectory database",
                         near=[data_root()])
            self._place_recorded = True

        body = without_nul(trajectory.storable().model_dump(mode="json"))
        sql = (f"INSERT INTO {self.names.runs} (run_id, user_id_hash, created_at, body) "
               "VALUES (%s, %s, %s, %s) ON CONFLICT (run_id) DO NOTHING")
        self._run("append to", lambda conn: conn.execute(sql.encode(), (
            trajectory.id, trajectory.user_id_hash, trajectory.created_at, Jsonb(body))))

    def _side(self, table: str, key: str, created: datetime, body: dict[str, Any],
              what: str) -> None:
        from psycopg.types.json import Jsonb

        column = "user_id_hash" if table == self.names.consent else "trajectory_id"
        sql = f"INSERT INTO {table} ({column}, created_at, body) VALUES (%s, %s, %s)"
        self._run(what, lambda conn: conn.execute(sql.encode(), (key, created,
                                                                 Jsonb(without_nul(body)))))

    def record_feedback(self, trajectory_id: str, feedback: Feedback) -> None:
        """Attach a user's thumbs up/down to a logged run."""
        if feedback not in ("up", "down"):
            raise ConfigError(f"feedback={feedback!r}: pass 'up' or 'down'")
        event = FeedbackEvent(trajectory_id=trajectory_id, feedback=feedback)
        self._side(self.names.feedback, trajectory_id, event.created_at,
                   event.model_dump(mode="json"), "record feedback in")

    def record_consent(self, user_id: str, consent: bool, *, salt: str | None = None) -> None:
        """Record a user's consent given or withdrawn; :meth:`read` applies the latest."""
        event = ConsentEvent(user_id_hash=hash_user_id(user_id, salt), consent=bool(consent))
        self._side(self.names.consent, event.user_id_hash, event.created_at,
                   event.model_dump(mode="json"), "record consent in")

    def record_review(self, label: ReviewLabel) -> None:
        """Store a person's label on a logged run; :meth:`read` merges the latest one in."""
        if not isinstance(label, ReviewLabel):
            raise ConfigError(f"record_review takes a ReviewLabel, got {type(label).__name__}")
        self._side(self.names.reviews, label.trajectory_id, label.created_at,
                   label.model_dump(mode="json"), "record a review in")

    # -- reading --------------------------------------------------------------------------

    def _merged(self, conn: Connection[Any], bodies: list[Any]) -> list[Trajectory]:
        runs = [Trajectory.model_validate(b) for b in bodies]
        ids = [t.id for t in runs]
        users = sorted({t.user_id_hash for t in runs if t.user_id_hash})
        n = self.names
        feedback = [(FeedbackEvent.model_validate(b).trajectory_id,
                     FeedbackEvent.model_validate(b).feedback) for (b,) in conn.execute(
            f"SELECT body FROM {n.feedback} WHERE trajectory_id = ANY(%s) ORDER BY id".encode(),
            (ids,))]
        reviews = [ReviewLabel.model_validate(b) for (b,) in conn.execute(
            f"SELECT body FROM {n.reviews} WHERE trajectory_id = ANY(%s) ORDER BY id".encode(),
            (ids,))]
        consent = [(h, bool(c)) for h, c in conn.execute(
            f"SELECT user_id_hash, (body->>'consent')::boolean FROM {n.consent} "
            "WHERE user_id_hash = ANY(%s) ORDER BY id".encode(), (users,))]
        return merge_side_records(runs, feedback, reviews, consent)

    def read(self) -> list[Trajectory]:
        """Every trajectory, oldest first (by id), with the latest feedback, review and consent
        merged in."""
        def work(conn: Connection[Any]) -> list[Trajectory]:
            rows = conn.execute(f"SELECT body FROM {self.names.runs} ORDER BY id".encode())
            return self._merged(conn, [b for (b,) in rows])

        return self._run("read", work)

    def read_since(self, watermark: int) -> tuple[list[Trajectory], int]:
        """The trajectories after ``watermark`` (the id of the last row taken; 0: all), oldest
        first and merged like :meth:`read`, and the watermark to pass next time.

        Never misses a row committed late by another host (see the module).
        """
        if isinstance(watermark, bool) or not isinstance(watermark, int) or watermark < 0:
            raise ConfigError(f"watermark={watermark!r}: pass the integer read_since returned "
                              "last time (0 to read from the start)")
        runs = self.names.runs

        def barrier(conn: Connection[Any]) -> int:
            conn.execute(f"LOCK TABLE {runs} IN SHARE MODE".encode())
            row = conn.execute(f"SELECT coalesce(max(id), 0) FROM {runs}".encode()).fetchone()
            return int(row[0]) if row else 0

        top = self._run("read", barrier)  # every id up to it is now committed or gone

        def work(conn: Connection[Any]) -> list[Trajectory]:
            rows = conn.execute(f"SELECT body FROM {runs} WHERE id > %s AND id <= %s "
                                "ORDER BY id".encode(), (watermark, top))
            return self._merged(conn, [b for (b,) in rows])

        return (self._run("read", work) if top > watermark else []), max(top, watermark)

    def reviews(self) -> list[ReviewLabel]:
        """Every stored review label, oldest first (a run labelled twice appears twice)."""
        return self._run("read", lambda conn: [ReviewLabel.model_validate(b) for (b,) in
                                               conn.execute(f"SELECT body FROM {self.names.reviews}"
                                                            " ORDER BY id".encode())])

    # -- erasing --------------------------------------------------------------------------

    def erase(self, *, user_id_hash: str | None = None, before: datetime | None = None,
              dry_run: bool = False) -> DatabaseErasure:
        """Erase the runs of ``user_id_hash`` and/or created before ``before``, with their
        feedback and reviews (and a forgotten user's consent rows), in one transaction; return
        what went (see :func:`~.erase.erase_rows`). ``dry_run``: count only."""
        if user_id_hash is None and before is None:
            raise ConfigError("erase needs user_id_hash, before, or both; it never erases all")

        def work(conn: Connection[Any]) -> DatabaseErasure:
            row = conn.execute("SELECT to_regclass(%s) IS NOT NULL", (self.names.runs,)
                               ).fetchone()
            if not (self._ready or (row and row[0])):
                return DatabaseErasure()  # no tables, nothing to erase (and none made)
            return erase_rows(conn, self.names, user_id_hash=user_id_hash, before=before,
                              dry_run=dry_run)

        return self._run("erase from", work, create=False)

    def forget_user(self, user_id_hash: str) -> dict[str, int]:
        """Erase every row of one user (by the hash runs store, :func:`hash_user_id`) from every
        table; return the rows erased per table (``trajectories``, ``feedback``, ``reviews``,
        ``consent``)."""
        if not isinstance(user_id_hash, str) or not user_id_hash:
            raise ConfigError(f"user_id_hash={user_id_hash!r}: pass hash_user_id(user_id)")
        return self.erase(user_id_hash=user_id_hash).counts

    # -- the rest of the surface ----------------------------------------------------------

    def __iter__(self) -> Iterator[Trajectory]:
        return iter(self.read())

    def __len__(self) -> int:
        def work(conn: Connection[Any]) -> int:
            row = conn.execute(f"SELECT count(*) FROM {self.names.runs}".encode()).fetchone()
            return int(row[0]) if row else 0

        return self._run("count", work)

    def __repr__(self) -> str:
        return f"PostgresTrajectoryLog({self.location!r})"

    def close(self) -> None:
        """Close the pooled connections (a later call opens new ones)."""
        pool, self._pool = self._pool, None
        if pool is not None:
            pool.close()

    def __enter__(self) -> PostgresTrajectoryLog:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()
