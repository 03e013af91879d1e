"""The Postgres trajectory log's tables, and the plain-data steps around them.

Why apart from the log: the SQL that creates the tables, the names they
get, how a record becomes a row (``body JSONB``) and how the side records
(feedback, reviews, consent) are merged into the runs read back are pure
functions, testable without a server; the log (:mod:`.postgres`) only
moves rows.

One table per record kind, each named after the log's ``table``:
``<table>`` (the runs: ``id BIGSERIAL``, ``run_id`` unique,
``user_id_hash`` indexed, ``created_at``, ``body``), ``<table>_feedback``,
``<table>_reviews`` and ``<table>_consent``. Postgres cannot store a NUL
character in ``JSONB`` (or ``TEXT``), which a trajectory may carry in an
error or in metadata (its drafts are cleaned): each NUL is stored as
U+FFFD, the one change a record goes through.

A log names its table in its connection string too, as a ``table``
parameter that libpq itself never accepts (so it cannot clash with a real
one): ``postgresql://app@db/agents?table=runs`` or ``user=app dbname=agents
table=runs``. That is how a log records where it writes (the data folder's
``places.jsonl`` keeps one string per place) and how ``forget`` is pointed
at a log whose table is not the default: :func:`split_table` takes it out
before psycopg sees the string, :func:`with_table` puts it back.

Example:
    >>> names = TableNames.of("runs")
    >>> names.feedback, names.lock_key
    ('runs_feedback', 'agentic_loop:runs')
    >>> TableNames.of("Runs; DROP")
    Traceback (most recent call last):
    ...
    agentic_loop.errors.ConfigError: table='Runs; DROP': pass a lower-case SQL name ...
    >>> without_nul({"errors": ["bad \\x00"], "n": 1})
    {'errors': ['bad \\ufffd'], 'n': 1}
    >>> safe_dsn("postgresql://app:s3cret@db:5432/agents")
    'user=app dbname=agents host=db port=5432'
    >>> split_table("postgresql://app@db/agents?table=runs")
    ('postgresql://app@db/agents', 'runs')
    >>> safe_dsn("postgresql://app:s3cret@db/agents?table=runs")
    'user=app dbname=agents host=db table=runs'
    >>> redacted("host=db password='s 3' dbname=a"), redacted("postgresql://app:pw@db/a")
    ('host=db password=*** dbname=a', 'postgresql://app:***@db/a')
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from agentic_loop.errors import ConfigError

__all__ = ["DEFAULT_TABLE", "TableNames", "create_sql", "database_key", "redacted", "safe_dsn",
           "split_table", "with_table", "without_nul"]

DEFAULT_TABLE = "agentic_loop_trajectories"
_NAME = re.compile(r"[a-z_][a-z0-9_]{0,40}")
_URL = re.compile(r"^\s*postgres(?:ql)?://", re.IGNORECASE)
_TABLE_WORD = re.compile(r"(?:^|\s+)table\s*=\s*(\S*)")
_SECRETS = ((re.compile(r"(://[^/@?:]*:).*@"), r"\1***@"),  # postgresql://user:PASSWORD@
            (re.compile(r"(password\s*=\s*)(?:'(?:[^'\\]|\\.)*'?|[^\s&]*)", re.IGNORECASE),
             r"\1***"))


@dataclass(frozen=True)
class TableNames:
    """The four tables of one log, and the advisory lock key that guards their creation."""

    runs: str
    feedback: str
    reviews: str
    consent: str

    @classmethod
    def of(cls, table: str) -> TableNames:
        """The tables of a log named ``table`` (a plain lower-case SQL name)."""
        if not isinstance(table, str) or not _NAME.fullmatch(table):
            raise ConfigError(f"table={table!r}: pass a lower-case SQL name of letters, digits "
                              "and underscores (at most 41 characters), such as "
                              f"{DEFAULT_TABLE!r}")
        return cls(table, f"{table}_feedback", f"{table}_reviews", f"{table}_consent")

    @property
    def lock_key(self) -> str:
        """Hashed (``hashtext``) into the advisory lock every creator and reader-barrier takes."""
        return f"agentic_loop:{self.runs}"


def create_sql(names: TableNames) -> list[str]:
    """The statements that create the tables and indexes when missing (idempotent).

    >>> [s.split("(")[0].strip() for s in create_sql(TableNames.of("t"))][:2]
    ['CREATE TABLE IF NOT EXISTS t', 'CREATE INDEX IF NOT EXISTS t_user_idx ON t']
    """
    r, f, v, c = names.runs, names.feedback, names.reviews, names.consent
    return [
        f"CREATE TABLE IF NOT EXISTS {r} (id BIGSERIAL PRIMARY KEY, run_id TEXT NOT NULL UNIQUE,"
        " user_id_hash TEXT, created_at TIMESTAMPTZ NOT NULL, body JSONB NOT NULL)",
        f"CREATE INDEX IF NOT EXISTS {r}_user_idx ON {r} (user_id_hash)",
        f"CREATE INDEX IF NOT EXISTS {r}_created_idx ON {r} (created_at)",
        *(stmt for side in (f, v) for stmt in (
            f"CREATE TABLE IF NOT EXISTS {side} (id BIGSERIAL PRIMARY KEY, trajectory_id TEXT "
            "NOT NULL, created_at TIMESTAMPTZ NOT NULL, body JSONB NOT NULL)",
            f"CREATE INDEX IF NOT EXISTS {side}_run_idx ON {side} (trajectory_id)")),
        f"CREATE TABLE IF NOT EXISTS {c} (id BIGSERIAL PRIMARY KEY, user_id_hash TEXT NOT NULL,"
        " created_at TIMESTAMPTZ NOT NULL, body JSONB NOT NULL)",
        f"CREATE INDEX IF NOT EXISTS {c}_user_idx ON {c} (user_id_hash)",
    ]


def without_nul(value: Any) -> Any:
    """``value`` (plain data) with every NUL character in its strings replaced by U+FFFD."""
    if isinstance(value, str):
        return value.replace("\x00", "\ufffd")
    if isinstance(value, dict):
        return {without_nul(k): without_nul(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [without_nul(v) for v in value]
    return value


def split_table(dsn: str) -> tuple[str, str | None]:
    """``dsn`` without its ``table`` parameter (see the module), and that table (``None``:
    not named). A table that is not a plain lower-case SQL name is a ConfigError.

    >>> split_table("user=app table=runs dbname=a"), split_table("postgresql:///a?host=/s")
    (('user=app dbname=a', 'runs'), ('postgresql:///a?host=/s', None))
    """
    table: str | None = None
    if _URL.match(dsn):
        head, sep, query = dsn.partition("?")
        kept = []
        for part in query.split("&") if sep else []:
            if part.startswith("table="):
                table = part[len("table="):]
            else:
                kept.append(part)
        dsn = head + (f"?{'&'.join(kept)}" if kept else "")
    else:
        found = _TABLE_WORD.search(dsn)
        if found:
            table = found.group(1)
            dsn = (dsn[:found.start()] + dsn[found.end():]).strip()
    if table is not None:
        TableNames.of(table)  # a bad name is refused here, before any SQL
    return dsn, table


def with_table(location: str, table: str) -> str:
    """``location`` (a key=value connection string) naming ``table`` when it is not the
    default one (so a default log's place reads as it always did).

    >>> with_table("user=app dbname=a", "runs"), with_table("dbname=a", DEFAULT_TABLE)
    ('user=app dbname=a table=runs', 'dbname=a')
    """
    return location if table == DEFAULT_TABLE else f"{location} table={table}"


def redacted(dsn: str) -> str:
    """``dsn`` as given with any password masked, for naming a string that does not parse."""
    for secret, mask in _SECRETS:
        dsn = secret.sub(mask, dsn)
    return dsn


def safe_dsn(dsn: str) -> str:
    """A connection string with its password left out (for messages, reports and places),
    naming its table when the string does (see the module)."""
    try:
        from psycopg.conninfo import conninfo_to_dict, make_conninfo
    except ImportError:  # pragma: no cover - psycopg comes with the postgres extra
        return redacted(dsn)
    try:
        bare, table = split_table(dsn)
        params = conninfo_to_dict(bare)
    except Exception:  # noqa: BLE001 - not a connection string: show no part that may be secret
        return "<unparsable connection string>"
    location = make_conninfo(**{k: str(v) for k, v in params.items() if k != "password"})
    return with_table(location, table or DEFAULT_TABLE)


def database_key(dsn: str) -> str:
    """The same for two spellings of one log (a URL or key=value, with or without the
    password and a connect timeout; the default table named or not).

    >>> url, conninfo = "postgresql://app:pw@db/agents", "user=app host=db dbname=agents"
    >>> database_key(url) == database_key(conninfo), database_key(url + "?table=x") == (
    ...     database_key(conninfo))
    (True, False)
    """
    try:
        from psycopg.conninfo import conninfo_to_dict

        bare, table = split_table(dsn)
        params = conninfo_to_dict(bare)
    except Exception:  # noqa: BLE001 - no psycopg, or not a connection string: as given
        return dsn
    return with_table(" ".join(f"{k}={params[k]}" for k in sorted(params)
                               if k not in ("password", "connect_timeout")),
                      table or DEFAULT_TABLE)


