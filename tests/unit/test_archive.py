"""Archive behaviour with the model-free HashingEmbedder (retrieval quality is tested with the
real model in tests/integration)."""

from __future__ import annotations

import json
import os
import warnings
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import pytest

from agentic_loop.jsonl_log import LogCorruptionWarning
from agentic_loop.memory import (
    Archive,
    ArchiveCorruptedError,
    ArchiveEntry,
    ArchiveError,
    EmbedderMismatchError,
    HashingEmbedder,
    ReflexionMemory,
)

TOPICS = {
    "bakery": ["fresh bread", "croissant pastry", "sourdough loaf", "baker oven"],
    "bicycle": ["bike repair", "bicycle tyres", "cycling gears", "chain and pedals"],
    "law": ["legal contract", "tax lawyer", "court appeal", "law firm"],
}


class CountingEmbedder:
    """Wraps an embedder and counts the texts it embeds, to prove what is (not) re-embedded."""

    def __init__(self, inner: HashingEmbedder) -> None:
        self.inner = inner
        self.texts = 0
        self.calls = 0

    @property
    def name(self) -> str:
        return self.inner.name

    @property
    def dim(self) -> int:
        return self.inner.dim

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        self.texts += len(texts)
        self.calls += 1
        return self.inner.embed(texts)


@pytest.fixture
def emb() -> HashingEmbedder:
    return HashingEmbedder(dim=128)


@pytest.fixture
def archive(tmp_path: Path, emb: HashingEmbedder) -> Archive:
    return Archive(tmp_path / "arch", embedder=emb)


def fill(archive: Archive) -> None:
    for topic, phrases in TOPICS.items():
        for i, phrase in enumerate(phrases):
            archive.add(
                f"Write a tagline for a {phrase} business",
                f"{topic} output {i}: {phrase} done well",
                score=5 + i,
            )


# -- add / get / dedup ----------------------------------------------------------------


def test_add_stores_every_field_and_is_on_disk_before_returning(archive: Archive) -> None:
    result = archive.add("Tagline for a bookstore", "Stories wait on every shelf.", score=8.5,
                         features={"word_count": 5}, iterations=2, model_id="m1",
                         trajectory_id="traj-1", metadata={"user": "u1"})
    assert result.status == "added" and result.added
    entry = archive.get(result.entry.id)
    assert entry == result.entry
    assert (entry.score, entry.features, entry.iterations, entry.model_id, entry.trajectory_id,
            entry.metadata) == (8.5, {"word_count": 5}, 2, "m1", "traj-1", {"user": "u1"})
    line = json.loads((archive.path / "entries.jsonl").read_text().splitlines()[0])
    assert line["id"] == entry.id and line["output"] == "Stories wait on every shelf."
    assert archive.get("no-such-id") is None and len(archive) == 1 and entry.id in archive


def test_near_duplicate_output_is_rejected_and_names_the_stored_entry(archive: Archive) -> None:
    first = archive.add("Tagline for a bookstore", "Stories wait on every shelf.")
    dup = archive.add("Slogan for a book shop", "Stories wait on every shelf!")
    assert dup.status == "duplicate" and not dup.added
    assert dup.duplicate_of == first.entry and dup.similarity is not None and dup.similarity >= 0.95
    assert len(archive) == 1


def test_different_outputs_for_the_same_task_are_all_kept(archive: Archive) -> None:
    task = "Tagline for a bookstore"
    outputs = ["Stories wait on every shelf.", "Find your next favourite chapter here.",
               "Where readers meet their next adventure."]
    assert [archive.add(task, o).status for o in outputs] == ["added"] * 3
    assert len(archive) == 3


def test_duplicates_inside_one_batch_are_caught(archive: Archive) -> None:
    results = archive.add_many([
        {"task": "a", "output": "Warm bread every morning."},
        {"task": "b", "output": "Warm bread, every morning!"},
        {"task": "c", "output": "Fixing bikes since 1999."},
    ])
    assert [r.status for r in results] == ["added", "duplicate", "added"]
    assert results[1].duplicate_of == results[0].entry


def test_a_batch_is_one_embedder_call_and_one_fsync(
    tmp_path: Path, emb: HashingEmbedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    counting = CountingEmbedder(emb)
    archive = Archive(tmp_path, embedder=counting, show_progress=False)
    archive.add("warm", "the log and indexes exist now")
    fsyncs: list[int] = []
    real_fsync = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (fsyncs.append(fd), real_fsync(fd))[1])
    calls = counting.calls
    batch = [{"task": f"task {i}", "output": " ".join(f"w{i}x{j}" for j in range(5))}
             for i in range(50)]
    batch.append({"task": "task 3 again", "output": "w3x0 w3x1 w3x2 w3x3 w3x4!"})  # a dup
    results = archive.add_many(batch)
    assert [r.status for r in results] == ["added"] * 50 + ["duplicate"]
    assert results[50].duplicate_of == results[3].entry
    assert counting.calls == calls + 1 and counting.texts == 1 * 2 + 51 * 2  # tasks + outputs
    assert len(fsyncs) == 1  # one write, one fsync for the whole batch
    assert len(Archive(tmp_path, embedder=emb, show_progress=False)) == 51


def test_dedup_can_be_switched_off(tmp_path: Path, emb: HashingEmbedder) -> None:
    archive = Archive(tmp_path, embedder=emb, dedup_threshold=None)
    archive.add("a", "same output")
    assert archive.add("b", "same output").status == "added"
    other = Archive(tmp_path / "x", embedder=emb)
    other.add("a", "same output")
    assert other.add("b", "same output", dedup=False).status == "added"


def test_add_with_a_known_id_replaces_it_keeping_created_at(archive: Archive) -> None:
    first = archive.add("Tagline for a bakery", "Warm bread.", score=6)
    second = archive.add(
        "Tagline for a bakery", "Warm bread, every morning.", score=9, id=first.entry.id
    )
    assert second.status == "replaced"
    stored = archive.get(first.entry.id)
    assert stored.score == 9 and stored.created_at == first.entry.created_at
    assert stored.updated_at is not None and len(archive) == 1


def test_delete_removes_from_get_len_and_search(archive: Archive) -> None:
    fill(archive)
    victim = archive.search("bicycle tyres tagline", k=1)[0].entry
    assert archive.delete(victim.id, "unknown") == 1
    assert archive.get(victim.id) is None and len(archive) == 11
    assert victim.id not in [h.entry.id for h in archive.search("bicycle tyres tagline", k=11)]


def test_invalid_inputs_get_clear_errors(archive: Archive) -> None:
    with pytest.raises(ValueError, match="task"):
        archive.add("   ", "output")
    with pytest.raises(ValueError, match="score"):
        archive.add("task", "output", score=float("nan"))
    with pytest.raises(ValueError, match="record 1 is invalid"):
        archive.add_many([{"task": "a", "output": "b"}, {"task": "a"}])
    with pytest.raises(TypeError, match="record 0 is a int"):
        archive.add_many([3])  # type: ignore[list-item]
    with pytest.raises(ValueError, match="extra_field"):
        archive.add_many([{"task": "a", "output": "b", "extra_field": 1}])
    assert len(archive) == 0
    with pytest.raises(ValueError, match="non-empty query"):
        archive.search("")
    with pytest.raises(ValueError, match="k must be a positive integer"):
        archive.search("x", k=0)
    with pytest.raises(ValueError, match="mmr is the MMR lambda"):
        archive.search("x", mmr=True)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="min_score"):
        archive.search("x", min_score=2.0)
    with pytest.raises(ValueError, match="dedup_threshold"):
        Archive(archive.root, embedder=archive.embedder, dedup_threshold=1.5)


# -- search -------------------------------------------------------------------------------


def test_search_ranks_by_task_similarity(archive: Archive) -> None:
    fill(archive)
    hits = archive.search("Write a tagline for a sourdough loaf business", k=3)
    assert hits[0].entry.output.startswith("bakery output 2")
    assert [h.similarity for h in hits] == sorted((h.similarity for h in hits), reverse=True)
    assert len(archive.search("anything", k=100)) == 12


def test_search_min_score_where_and_mmr(archive: Archive) -> None:
    fill(archive)
    query = "Write a tagline for a court appeal business"
    assert all(h.similarity >= 0.5 for h in archive.search(query, k=12, min_score=0.5))
    assert len(archive.search(query, k=12, min_score=0.99)) == 1
    only_law = archive.search(query, k=12, where=lambda e: e.output.startswith("law"))
    assert len(only_law) == 4 and all(h.entry.output.startswith("law") for h in only_law)
    plain = archive.search(query, k=3)
    diverse = archive.search(query, k=3, mmr=0.0)
    assert plain[0].entry == diverse[0].entry
    assert [h.entry for h in archive.search(query, k=3, mmr=1.0)] == [h.entry for h in plain]
    # lambda 0 maximises spread: the picked tasks are less similar to each other than the top-3
    def spread(hits):
        vecs = archive.embedder.embed([h.entry.task for h in hits])
        return float(np.mean(vecs @ vecs.T))

    assert spread(diverse) < spread(plain)


def test_search_on_an_empty_archive_returns_nothing(archive: Archive) -> None:
    assert archive.search("anything") == []


def test_hnsw_index_above_the_exact_limit_still_finds_the_right_entries(
    tmp_path: Path, emb: HashingEmbedder
) -> None:
    archive = Archive(tmp_path, embedder=emb, exact_limit=40, dedup_threshold=None)
    archive.add_many(
        [{"task": f"task {i} about subject {i}", "output": f"out {i}"} for i in range(200)]
    )
    archive.search("x")
    assert archive._indexes is not None and archive._indexes.tasks.kind == "hnsw"
    found = sum(archive.search(f"task {i} about subject {i}", k=1)[0].entry.output == f"out {i}"
                for i in range(0, 200, 10))
    assert found == 20


# -- persistence and the derived index -------------------------------------------------------


def test_reopen_uses_the_saved_index_without_re_embedding(
    tmp_path: Path, emb: HashingEmbedder
) -> None:
    with Archive(tmp_path, embedder=emb) as archive:
        fill(archive)
    counting = CountingEmbedder(emb)
    reopened = Archive(tmp_path, embedder=counting)
    assert len(reopened) == 12
    hits = reopened.search("Write a tagline for a legal contract business", k=1)
    assert hits[0].entry.output.startswith("law output 0")
    assert counting.texts == 1  # only the query
    state = json.loads((tmp_path / "index.json").read_text())
    assert state["rows"] == 12 and state["embedder"] == emb.name


def test_index_behind_the_log_embeds_only_the_missing_rows(
    tmp_path: Path, emb: HashingEmbedder
) -> None:
    with Archive(tmp_path, embedder=emb) as archive:
        fill(archive)
    # not closed:
    Archive(tmp_path, embedder=emb).add("Tagline for a florist", "Blooms for every mood.")
    counting = CountingEmbedder(emb)
    reopened = Archive(tmp_path, embedder=counting)
    assert reopened.search("florist tagline", k=1)[0].entry.output == "Blooms for every mood."
    assert counting.texts == 1 + 2  # the query, plus task and output of the one missing row


def test_a_corrupted_index_file_is_rebuilt_with_a_warning(
    tmp_path: Path, emb: HashingEmbedder
) -> None:
    with Archive(tmp_path, embedder=emb) as archive:
        fill(archive)
    (tmp_path / "index.faiss").write_bytes(b"garbage")
    reopened = Archive(tmp_path, embedder=emb)
    with pytest.warns(UserWarning, match="rebuilding the search index"):
        hits = reopened.search("Write a tagline for a bike repair business", k=1)
    assert hits[0].entry.output.startswith("bicycle output 0")


def test_missing_index_files_are_rebuilt(tmp_path: Path, emb: HashingEmbedder) -> None:
    with Archive(tmp_path, embedder=emb) as archive:
        fill(archive)
    for name in ("index.faiss", "outputs.faiss", "index.json"):
        (tmp_path / name).unlink()
    reopened = Archive(tmp_path, embedder=emb)
    best = reopened.search("Write a tagline for a baker oven business", k=1)[0]
    assert best.entry.output.startswith("bakery")
    assert reopened.add("x", "bakery output 3: baker oven done well").status == "duplicate"


def test_an_open_archive_sees_entries_added_by_another_instance(
    tmp_path: Path, emb: HashingEmbedder
) -> None:
    reader = Archive(tmp_path, embedder=emb)
    assert len(reader) == 0
    writer = Archive(tmp_path, embedder=emb)
    writer.add("Tagline for a florist", "Blooms for every mood.")
    assert len(reader) == 1
    assert reader.search("florist", k=1)[0].entry.output == "Blooms for every mood."
    assert reader.add("Slogan for flowers", "Blooms for every mood!").status == "duplicate"


def test_namespaces_are_separate_folders(tmp_path: Path, emb: HashingEmbedder) -> None:
    taglines = Archive(tmp_path, "taglines", emb)
    math = Archive(tmp_path, ("tasks", "math"), emb)
    taglines.add("Tagline for a bakery", "Warm bread.")
    assert len(math) == 0 and (tmp_path / "taglines" / "entries.jsonl").is_file()
    assert (tmp_path / "tasks" / "math" / "meta.json").is_file()
    with pytest.raises(ValueError, match="reserved"):
        Archive(tmp_path, "entries.jsonl", emb)
    with pytest.raises(ValueError, match="empty"):
        Archive(tmp_path, ("a", ""), emb)


# -- meta.json and embedders --------------------------------------------------------------------


def test_opening_with_another_embedder_is_a_clear_error(tmp_path: Path) -> None:
    Archive(tmp_path, embedder=HashingEmbedder(64)).add("Tagline for a bakery", "Warm bread.")
    with pytest.raises(EmbedderMismatchError, match=r"built with the embedder 'hashing-v1-64'.*"
                                                    r"opened with 'hashing-v1-128'.*reembed=True"):
        Archive(tmp_path, embedder=HashingEmbedder(128))


def test_reembed_switches_the_embedder(tmp_path: Path) -> None:
    with Archive(tmp_path, embedder=HashingEmbedder(64)) as archive:
        fill(archive)
    switched = Archive(tmp_path, embedder=HashingEmbedder(128), reembed=True)
    assert switched.search("Write a tagline for a croissant pastry business", k=1)[
        0
    ].entry.output.startswith("bakery output 1")
    assert json.loads((tmp_path / "meta.json").read_text())["embedder"] == "hashing-v1-128"
    Archive(tmp_path, embedder=HashingEmbedder(128))  # now the recorded one


def test_same_name_with_another_dimension_is_refused(tmp_path: Path, emb: HashingEmbedder) -> None:
    class Impostor(HashingEmbedder):
        @property
        def name(self) -> str:
            return emb.name

    Archive(tmp_path, embedder=emb).add("a", "b")
    impostor = Archive(tmp_path, embedder=Impostor(64))
    with pytest.raises(EmbedderMismatchError, match="128-dimensional.*64-dimensional"):
        impostor.search("a")


def test_corrupted_meta_json_is_a_clear_error_and_loses_nothing(
    tmp_path: Path, emb: HashingEmbedder
) -> None:
    with Archive(tmp_path, embedder=emb) as archive:
        fill(archive)
    entries_before = (tmp_path / "entries.jsonl").read_bytes()
    (tmp_path / "meta.json").write_text('{"schema_version": 1, "kind": "archive", "embe')
    with pytest.raises(
        ArchiveCorruptedError, match=r"meta\.json is corrupted .*delete .*meta\.json and reopen"
    ):
        Archive(tmp_path, embedder=emb)
    assert (tmp_path / "entries.jsonl").read_bytes() == entries_before
    (tmp_path / "meta.json").unlink()  # the documented recovery
    assert len(Archive(tmp_path, embedder=emb)) == 12


def test_meta_from_a_newer_version_is_refused(tmp_path: Path, emb: HashingEmbedder) -> None:
    Archive(tmp_path, embedder=emb)
    meta = json.loads((tmp_path / "meta.json").read_text())
    (tmp_path / "meta.json").write_text(json.dumps({**meta, "schema_version": 99}))
    with pytest.raises(ArchiveCorruptedError, match="newer"):
        Archive(tmp_path, embedder=emb)


def test_a_reflexion_folder_is_not_opened_as_an_archive(
    tmp_path: Path, emb: HashingEmbedder
) -> None:
    ReflexionMemory(tmp_path, embedder=emb)
    with pytest.raises(ArchiveError, match="holds a 'reflexion' collection .*not a 'archive' one"):
        Archive(tmp_path, embedder=emb)


def test_a_file_in_place_of_the_folder_is_a_clear_error(
    tmp_path: Path, emb: HashingEmbedder
) -> None:
    (tmp_path / "file").write_text("x")
    with pytest.raises(ArchiveError, match="a file is in the way"):
        Archive(tmp_path / "file", embedder=emb)


# -- crash damage ------------------------------------------------------------------------------


def test_torn_last_line_is_skipped_then_repaired_on_the_next_add(
    tmp_path: Path, emb: HashingEmbedder
) -> None:
    with Archive(tmp_path, embedder=emb) as archive:
        fill(archive)
    with (tmp_path / "entries.jsonl").open("ab") as fh:
        fh.write(b'{"id": "torn", "task": "half a rec')
    with pytest.warns(LogCorruptionWarning, match=r"entries\.jsonl:13: torn last line"):
        reopened = Archive(tmp_path, embedder=emb)
    assert len(reopened) == 12
    with pytest.warns(LogCorruptionWarning, match="repaired a torn last line"):
        reopened.add("Tagline for a florist", "Blooms for every mood.")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        again = Archive(tmp_path, embedder=emb)
        assert len(again) == 13 and again.get("torn") is None


def test_corrupt_middle_line_costs_only_itself(tmp_path: Path, emb: HashingEmbedder) -> None:
    with Archive(tmp_path, embedder=emb) as archive:
        fill(archive)
    path = tmp_path / "entries.jsonl"
    lines = path.read_bytes().splitlines(keepends=True)
    lines[4] = b'{"id": "x", "task": 12}\n'
    path.write_bytes(b"".join(lines))
    with pytest.warns(LogCorruptionWarning, match=r"entries\.jsonl:5: "):
        reopened = Archive(tmp_path, embedder=emb)
    assert len(reopened) == 11
    assert reopened.prune().kept == 11
    assert b'"task": 12' in (tmp_path / "entries.jsonl.corrupt").read_bytes()


# -- prune / export / stats ----------------------------------------------------------------------


def test_prune_by_min_score_max_entries_and_age(tmp_path: Path, emb: HashingEmbedder) -> None:
    archive = Archive(tmp_path, embedder=emb)
    old = datetime.now(UTC) - timedelta(days=30)
    archive.add_many(
        [
            ArchiveEntry(task=f"task {i}", output=f"output number {i}", score=i, created_at=old)
            for i in range(5)
        ]
    )
    archive.add_many(
        [ArchiveEntry(task=f"task {i}", output=f"output number {i}", score=i) for i in range(5, 10)]
    )
    archive.add("unscored", "no score here")
    assert archive.prune(min_score=2).removed == 3  # scores 0, 1 and the unscored one
    assert archive.prune(older_than=timedelta(days=7)).removed == 3  # scores 2, 3, 4
    result = archive.prune(max_entries=2)
    assert (result.kept, result.removed) == (2, 3)
    assert sorted(e.score for e in archive.entries()) == [8, 9]
    newest = archive.add("fresh", "freshest output", score=1)
    assert [e.id for e in Archive(tmp_path, embedder=emb).entries()][-1] == newest.entry.id
    archive.prune(max_entries=1, keep="newest")
    assert [e.id for e in archive.entries()] == [newest.entry.id]
    with pytest.raises(ValueError, match="keep must be"):
        archive.prune(keep="worst")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="max_entries"):
        archive.prune(max_entries=-1)


def test_prune_compacts_superseded_versions_and_keeps_search_working(
    tmp_path: Path, emb: HashingEmbedder
) -> None:
    archive = Archive(tmp_path, embedder=emb)
    fill(archive)
    first = archive.entries()[0]
    archive.add(first.task, "bakery output rewritten entirely", id=first.id)
    archive.delete(archive.entries()[1].id)
    lines_before = len((tmp_path / "entries.jsonl").read_text().splitlines())
    result = archive.prune()
    assert (result.kept, result.removed, result.lines_dropped) == (11, 0, lines_before - 11)
    assert len((tmp_path / "entries.jsonl").read_text().splitlines()) == 11
    other = Archive(tmp_path, embedder=emb)
    assert other.get(first.id).output == "bakery output rewritten entirely"
    hits = other.search("Write a tagline for a cycling gears business", k=1)
    assert hits[0].entry.output.startswith("bicycle output 2")


def test_another_instance_sees_a_prune(tmp_path: Path, emb: HashingEmbedder) -> None:
    reader = Archive(tmp_path, embedder=emb)
    fill(reader)
    assert len(reader.search("tagline", k=12)) == 12
    Archive(tmp_path, embedder=emb).prune(max_entries=3)
    assert len(reader) == 3 and len(reader.search("tagline", k=12)) == 3


def test_export_writes_current_entries(tmp_path: Path, archive: Archive) -> None:
    fill(archive)
    archive.delete(archive.entries()[0].id)
    target = tmp_path / "exports" / "archive.jsonl"
    assert archive.export(target) == 11
    rows = [json.loads(line) for line in target.read_text().splitlines()]
    assert len(rows) == 11 and {"task", "output", "score", "id"} <= rows[0].keys()
    with pytest.raises(ValueError, match="is a folder"):
        archive.export(tmp_path)
    with pytest.raises(ValueError, match="own log"):
        archive.export(archive.path / "entries.jsonl")


def test_stats_reports_count_scores_growth_and_drift(archive: Archive) -> None:
    empty = archive.stats()
    assert (empty.count, empty.scores, empty.drift, empty.growth) == (0, None, None, [])
    fill(archive)
    stats = archive.stats()
    assert stats.count == 12 and stats.scored == 12
    assert (stats.scores.min, stats.scores.max) == (5.0, 8.0)
    assert stats.growth[-1].total == 12
    assert stats.drift is not None and stats.drift.window == 4


def test_orphan_temp_files_from_a_crash_are_cleaned_on_open(
    tmp_path: Path, emb: HashingEmbedder
) -> None:
    Archive(tmp_path, embedder=emb).add("a", "b")
    orphan = tmp_path / ".index.faiss.abc123.tmp"
    orphan.write_bytes(b"half an index")
    Archive(tmp_path, embedder=emb)
    assert not orphan.exists()


def test_threads_sharing_one_archive_lose_nothing(tmp_path: Path, emb: HashingEmbedder) -> None:
    from concurrent.futures import ThreadPoolExecutor

    archive = Archive(tmp_path, embedder=emb)
    other = Archive(tmp_path, embedder=emb)  # a second instance in the same process

    def work(worker: int) -> list[str]:
        target = archive if worker % 2 else other
        ids = []
        for i in range(40):
            result = target.add(
                f"worker {worker} task {i}", f"worker {worker} wrote output {i} {worker * 1000 + i}"
            )
            assert result.added
            ids.append(result.entry.id)
            target.search(f"worker {worker} task", k=2)
        return ids

    with ThreadPoolExecutor(4) as pool:
        ids = [i for chunk in pool.map(work, range(4)) for i in chunk]
    assert len(ids) == 160
    assert (
        sorted(e.id for e in archive.entries())
        == sorted(ids)
        == sorted(e.id for e in other.entries())
    )


def test_a_custom_embedder_returning_raw_vectors_still_gives_cosine(
    tmp_path: Path, emb: HashingEmbedder
) -> None:
    class Raw(CountingEmbedder):
        def embed(self, texts: Sequence[str]) -> np.ndarray:
            return 5.0 * self.inner.embed(texts)

    archive = Archive(tmp_path, embedder=Raw(emb))
    archive.add("Tagline for a bakery", "Warm bread, every morning.")
    hit = archive.search("Tagline for a bakery", k=1)[0]
    assert hit.similarity == pytest.approx(1.0, abs=1e-5)
    assert archive.add("x", "Warm bread, every morning.").status == "duplicate"
