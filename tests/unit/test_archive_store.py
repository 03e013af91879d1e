"""ArchiveStore: the LangGraph BaseStore contract over archives on disk."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from langgraph.store.base import GetOp, InvalidNamespaceError, PutOp, SearchOp

from agentic_loop.memory import Archive, ArchiveStore, HashingEmbedder

NS = ("archive", "taglines")
EMB = HashingEmbedder(dim=128)


@pytest.fixture
def store(tmp_path: Path) -> ArchiveStore:
    return ArchiveStore(tmp_path, embedder=EMB)


def put_examples(store: ArchiveStore) -> None:
    store.put(
        NS,
        "book",
        {"task": "Tagline for a bookstore", "output": "Stories wait on every shelf.", "score": 9},
    )
    store.put(
        NS,
        "bread",
        {
            "task": "Tagline for a bakery",
            "output": "Warm bread, every morning.",
            "score": 7,
            "metadata": {"lang": "en"},
        },
    )
    store.put(("archive", "math"), "sum", {"task": "Add 2 and 3", "output": "5", "score": 10})


def test_put_then_get_round_trips_the_value(store: ArchiveStore) -> None:
    value = {
        "task": "Tagline for a bookstore",
        "output": "Stories wait on every shelf.",
        "score": 9.0,
        "features": {"words": 5},
        "iterations": 1,
        "model_id": "m",
        "trajectory_id": "t",
        "metadata": {"k": "v"},
    }
    store.put(NS, "book", value)
    item = store.get(NS, "book")
    assert item is not None and item.key == "book" and item.namespace == NS
    assert item.value == value
    assert item.created_at == item.updated_at


def test_put_overwrites_and_delete_removes(store: ArchiveStore) -> None:
    store.put(NS, "k", {"task": "t", "output": "first"})
    created = store.get(NS, "k").created_at
    # same value again: a keyed write is never a "duplicate"
    store.put(NS, "k", {"task": "t", "output": "first"})
    store.put(NS, "k", {"task": "t", "output": "second"})
    item = store.get(NS, "k")
    assert item.value["output"] == "second"
    assert item.created_at == created and item.updated_at > created
    store.delete(NS, "k")
    assert store.get(NS, "k") is None
    store.delete(NS, "never-existed")  # a no-op, as in every LangGraph store


def test_values_persist_in_the_archive_folder(store: ArchiveStore, tmp_path: Path) -> None:
    put_examples(store)
    store.close()
    reopened = ArchiveStore(tmp_path, embedder=EMB)
    assert reopened.get(NS, "bread").value["metadata"] == {"lang": "en"}
    archive = Archive(tmp_path, NS, EMB)
    assert archive.get("book").output == "Stories wait on every shelf."


def test_search_by_query_ranks_across_namespaces_under_the_prefix(store: ArchiveStore) -> None:
    put_examples(store)
    hits = store.search(("archive",), query="a tagline for my bakery", limit=3)
    assert hits[0].key == "bread" and len(hits) == 3
    assert all(h.score is not None for h in hits)
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
    assert {h.namespace for h in hits} == {NS, ("archive", "math")}
    assert [h.key for h in store.search(NS, query="bakery", limit=5)] == ["bread", "book"]


def test_search_filter_offset_and_limit(store: ArchiveStore) -> None:
    put_examples(store)
    # without a query: namespaces in sorted order, each in insertion order
    found = store.search(("archive",), filter={"score": {"$gte": 9}}, limit=10)
    assert [h.key for h in found] == ["sum", "book"]
    assert [h.key for h in store.search(NS, filter={"metadata": {"lang": "en"}})] == ["bread"]
    found = store.search(NS, query="bakery", filter={"score": {"$lt": 8}})
    assert [h.key for h in found] == ["bread"]
    assert [h.key for h in store.search(NS)] == ["book", "bread"]
    assert [h.key for h in store.search(NS, offset=1, limit=1)] == ["bread"]
    assert [h.key for h in store.search(NS, query="bakery", offset=1, limit=1)] == ["book"]
    with pytest.raises(ValueError, match="unsupported filter operator"):
        store.search(NS, filter={"score": {"$near": 3}})


def test_reads_of_unknown_namespaces_create_nothing(store: ArchiveStore, tmp_path: Path) -> None:
    assert store.get(("nothing", "here"), "k") is None
    assert store.search(("nothing",), query="x") == []
    store.delete(("nothing",), "k")
    assert list(tmp_path.iterdir()) == []


def test_list_namespaces_with_prefix_suffix_and_depth(store: ArchiveStore) -> None:
    put_examples(store)
    store.put(("users", "ana@example/com"), "k", {"task": "t", "output": "o"})
    assert store.list_namespaces() == [
        ("archive", "math"),
        ("archive", "taglines"),
        ("users", "ana@example/com"),
    ]
    assert store.list_namespaces(prefix=("archive",)) == [
        ("archive", "math"),
        ("archive", "taglines"),
    ]
    assert store.list_namespaces(suffix=("taglines",)) == [NS]
    assert store.list_namespaces(prefix=("*", "ana@example/com")) == [("users", "ana@example/com")]
    assert store.list_namespaces(max_depth=1) == [("archive",), ("users",)]
    assert store.list_namespaces(limit=1, offset=1) == [("archive", "taglines")]


def test_bad_values_get_clear_errors(store: ArchiveStore) -> None:
    with pytest.raises(ValueError, match=r"not an archive entry.*need 'task' and 'output'"):
        store.put(NS, "k", {"text": "a memory without a task"})
    with pytest.raises(ValueError, match="sets \\['id'\\]"):
        store.put(NS, "k", {"task": "t", "output": "o", "id": "other"})
    with pytest.raises(ValueError, match="always indexes the entry's 'task'"):
        store.put(NS, "k", {"task": "t", "output": "o"}, index=["output"])
    with pytest.raises(NotImplementedError, match="TTL"):
        store.put(NS, "k", {"task": "t", "output": "o"}, ttl=5)
    with pytest.raises(InvalidNamespaceError):
        store.put(("a.b",), "k", {"task": "t", "output": "o"})
    assert store.list_namespaces() == []


def test_batch_runs_in_order_and_groups_puts(store: ArchiveStore) -> None:
    results = store.batch([
        PutOp(NS, "a", {"task": "t1", "output": "one"}),
        PutOp(NS, "b", {"task": "t2", "output": "two"}),
        GetOp(NS, "a"),
        PutOp(NS, "a", None),
        GetOp(NS, "a"),
        SearchOp(NS, query="t2", limit=5),
    ])
    assert results[0] is None and results[1] is None
    assert results[2].value["output"] == "one"
    assert results[4] is None
    assert [i.key for i in results[5]] == ["b"]


def test_async_api(store: ArchiveStore) -> None:
    async def main() -> list[str]:
        await store.aput(NS, "a", {"task": "Tagline for a bakery", "output": "Warm bread."})
        item = await store.aget(NS, "a")
        hits = await store.asearch(NS, query="bakery")
        return [item.value["output"], hits[0].key]

    assert asyncio.run(main()) == ["Warm bread.", "a"]


def test_archive_accessor_returns_the_backing_archive(store: ArchiveStore) -> None:
    put_examples(store)
    archive = store.archive(NS)
    assert isinstance(archive, Archive) and len(archive) == 2
    assert store.archive(("missing",), create=False) is None
