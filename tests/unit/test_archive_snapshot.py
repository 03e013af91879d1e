"""read_collections: the read-only reader of memory folders (no embedder, nothing written), and
the one log replay it shares with the collections."""

from __future__ import annotations

import os
import stat
import warnings
from collections.abc import Iterator
from pathlib import Path

import pytest

from agentic_loop.errors import ConfigError
from agentic_loop.jsonl_log import LogCorruptionWarning
from agentic_loop.memory import (
    Archive,
    ArchiveCorruptedError,
    ArchiveEntry,
    CollectionSnapshot,
    HashingEmbedder,
    ReflectionEntry,
    ReflexionMemory,
    read_collections,
)
from agentic_loop.memory.collection.replay import LogReplay
from agentic_loop.memory.records import Tombstone


@pytest.fixture
def emb() -> HashingEmbedder:
    return HashingEmbedder(dim=64)


def _tree(root: Path) -> dict[str, bytes]:
    files = (p for p in sorted(root.rglob("*")) if p.is_file())
    return {str(p.relative_to(root)): p.read_bytes() for p in files}


def _fill(root: Path, emb: HashingEmbedder) -> None:
    """Two archive namespaces with replacements and deletions, and a reflexion memory."""
    with Archive(root, ("users", "ana@example.com"), emb) as archive:
        archive.add("Tagline for a bookstore", "Stories wait on every shelf.", score=8, id="a")
        archive.add("Tagline for a bakery", "Warm bread, every morning.", score=7, id="b")
        archive.add("Tagline for a florist", "Blooms for every mood.", score=6, id="c")
        archive.add("Tagline for a bookstore", "Find your next chapter here.", score=9, id="a")
        archive.delete("b")
    with Archive(root, "taglines", emb) as archive:
        archive.add("Tagline for a gym", "Stronger every day.", score=5, id="g")
    with ReflexionMemory(root, "lessons", emb) as memory:
        memory.add("Sum the prices", "Read every row before adding.", id="r")


def test_records_are_the_live_ones_in_the_collections_own_order(
    tmp_path: Path, emb: HashingEmbedder
) -> None:
    _fill(tmp_path, emb)
    snaps = read_collections(tmp_path, kind="archive")
    assert [s.namespace for s in snaps] == [("taglines",), ("users", "ana@example.com")]
    users = snaps[1]
    assert isinstance(users, CollectionSnapshot)
    assert users.entries_path == tmp_path / "users" / "ana%40example.com" / "entries.jsonl"
    assert all(isinstance(r, ArchiveEntry) for r in users.records)
    assert [(r.id, r.output) for r in users.records] == [
        ("c", "Blooms for every mood."),
        ("a", "Find your next chapter here."),
    ]
    assert users.problems == []
    with Archive(tmp_path, ("users", "ana@example.com"), emb) as archive:
        assert users.records == archive.entries()  # one replay: the same records, same order


def test_kind_selects_the_collections_and_their_record_type(
    tmp_path: Path, emb: HashingEmbedder
) -> None:
    _fill(tmp_path, emb)
    [lessons] = read_collections(tmp_path, kind="reflexion")
    assert lessons.namespace == ("lessons",)
    assert [type(r) for r in lessons.records] == [ReflectionEntry]
    assert lessons.records[0].reflection == "Read every row before adding."
    with pytest.raises(ConfigError, match=r"kind='notes' is not a memory collection kind"):
        read_collections(tmp_path, kind="notes")


def test_a_collection_at_the_root_has_the_empty_namespace(
    tmp_path: Path, emb: HashingEmbedder
) -> None:
    with Archive(tmp_path, embedder=emb) as archive:
        archive.add("Tagline for a bookstore", "Stories wait on every shelf.")
    [snap] = read_collections(str(tmp_path))
    assert snap.namespace == () and len(snap.records) == 1


def test_a_collection_without_a_log_is_left_out(tmp_path: Path, emb: HashingEmbedder) -> None:
    Archive(tmp_path, "empty", emb).close()  # meta.json, no entries.jsonl
    assert not (tmp_path / "empty" / "entries.jsonl").exists()
    assert read_collections(tmp_path) == []


def test_compaction_and_other_writers_are_seen(tmp_path: Path, emb: HashingEmbedder) -> None:
    with Archive(tmp_path, embedder=emb) as archive:
        for i in range(5):
            archive.add(f"Tagline number {i}", f"Output number {i}", score=i, id=str(i))
        archive.prune(min_score=2)
        archive.add("Tagline number 9", "Output number 9", score=9, id="9")
        [snap] = read_collections(tmp_path)
        assert [r.id for r in snap.records] == [r.id for r in archive.entries()] == [
            "2", "3", "4", "9"
        ]


def test_bad_lines_are_problems_named_as_the_log_warns_them(
    tmp_path: Path, emb: HashingEmbedder
) -> None:
    with Archive(tmp_path, embedder=emb) as archive:
        archive.add("Tagline for a bookstore", "Stories wait on every shelf.", id="a")
        archive.add("Tagline for a bakery", "Warm bread, every morning.", id="b")
    log = tmp_path / "entries.jsonl"
    lines = log.read_bytes().splitlines(keepends=True)
    lines[0] = b'{"id": "x", "task": 12}\n'
    log.write_bytes(b"".join(lines) + b'{"id": "torn", "task": "half')
    [snap] = read_collections(tmp_path)
    assert [r.id for r in snap.records] == ["b"]
    assert [p.split(": ")[0] for p in snap.problems] == [f"{log}:1", f"{log}:3"]
    assert "torn last line" in snap.problems[1]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", LogCorruptionWarning)
        Archive(tmp_path, embedder=emb).close()
    assert [str(w.message) for w in caught] == snap.problems


def test_a_corrupted_meta_json_is_reported(tmp_path: Path, emb: HashingEmbedder) -> None:
    Archive(tmp_path, "a", emb).close()
    (tmp_path / "a" / "meta.json").write_text("{not json")
    with pytest.raises(ArchiveCorruptedError, match=r"meta\.json is corrupted"):
        read_collections(tmp_path)


def test_the_root_must_be_a_folder(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="is not a folder"):
        read_collections(tmp_path / "missing")
    (tmp_path / "file").write_text("x")
    with pytest.raises(ConfigError, match="is not a folder"):
        read_collections(tmp_path / "file")


def test_no_embedder_is_loaded(
    tmp_path: Path, emb: HashingEmbedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    _fill(tmp_path, emb)

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("read_collections must not build an embedder")

    monkeypatch.setattr("agentic_loop.memory.embeddings.Embedder.__init__", refuse)
    monkeypatch.setattr("agentic_loop.memory.embeddings.HashingEmbedder.embed", refuse)
    assert len(read_collections(tmp_path)) == 2


@pytest.fixture
def read_only(tmp_path: Path) -> Iterator[Path]:
    """A folder tree made read-only (mode 0o555) for the test, writable again afterwards."""
    folders = [tmp_path, *(p for p in tmp_path.rglob("*") if p.is_dir())]
    yield tmp_path
    for folder in folders:
        os.chmod(folder, 0o755)


def test_a_read_only_folder_is_read_and_nothing_is_created(
    read_only: Path, emb: HashingEmbedder
) -> None:
    _fill(read_only, emb)
    for lock in read_only.rglob("*.lock"):  # left by the writers above
        lock.unlink()
    folders = [read_only, *(p for p in read_only.rglob("*") if p.is_dir())]
    for folder in folders:
        os.chmod(folder, 0o555)
    before = _tree(read_only)
    snaps = read_collections(read_only) + read_collections(read_only, kind="reflexion")
    assert [len(s.records) for s in snaps] == [1, 2, 1]
    # Tests may run as root, where 0o555 does not stop writes: check that none happened.
    assert _tree(read_only) == before
    assert not list(read_only.rglob("*.lock"))
    assert all(stat.S_IMODE(f.stat().st_mode) == 0o555 for f in folders)


def test_the_collections_and_the_reader_share_one_replay(
    tmp_path: Path, emb: HashingEmbedder
) -> None:
    a = ArchiveEntry(id="a", task="t", output="one")
    b = ArchiveEntry(id="b", task="t", output="two")
    replay: LogReplay[ArchiveEntry] = LogReplay()
    replay.apply([a, b, Tombstone(id="a"), a.model_copy(update={"output": "back"})])
    assert [(r.id, r.output) for r in replay.live()] == [("b", "two"), ("a", "back")]
    assert replay.live_rows() == [1, 2] and not replay.is_live(0)
    replay.apply([b], reset=True)
    assert replay.rows == [b] and replay.latest == {"b": 0}
    from agentic_loop.memory.collection import snapshot

    assert snapshot.LogReplay is LogReplay
    with Archive(tmp_path, embedder=emb) as archive:
        assert isinstance(archive._replay, LogReplay)
