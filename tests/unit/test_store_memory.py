"""Memory through the graph's LangGraph store: ArchiveRefine and Reflexion on any BaseStore."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from langgraph.graph import END, StateGraph
from langgraph.store.memory import InMemoryStore
from typing_extensions import TypedDict

from agentic_loop.architectures import ArchiveRefine, Reflexion, create_reflexion_graph
from agentic_loop.errors import ConfigError
from agentic_loop.judges import Rubric
from agentic_loop.memory import (
    Archive,
    ArchiveError,
    ArchiveStore,
    EmbedderMismatchError,
    HashingEmbedder,
    ReflexionMemory,
    StoreMemory,
    open_memory,
    store_index,
)
from agentic_loop.memory.store.policy import META_PREFIX
from agentic_loop.testing import ScriptedChatModel

ONE_WORD = Rubric.for_constraints(exact_words=1)
NO_WE = Rubric.for_constraints(exclude_words=["we"])
EMB = HashingEmbedder()
NOTE = {"root_cause": "used we", "correction": "drop it", "lesson": "Never write we."}


def indexed_store() -> InMemoryStore:
    return InMemoryStore(index=store_index(EMB))


def outputs(store: Any, namespace: tuple[str, ...], field: str = "output") -> list[str]:
    return sorted(item.value[field] for item in store.search(namespace, limit=100))


def test_archive_refine_keeps_accepted_outputs_in_the_store_and_retrieves_them() -> None:
    store = indexed_store()
    arch = ArchiveRefine(ScriptedChatModel(default="Shelves"), rubric=ONE_WORD, store=store)
    assert arch.archive is None and arch.build().store is store
    first = arch.run("Name a bookstore in one word.")
    assert first.archived and outputs(store, ("archive", "default")) == ["Shelves"]
    stored = store.search(("archive", "default"))[0]
    assert stored.value["score"] == first.score
    assert stored.value["trajectory_id"] == first.trajectory_id
    second = ArchiveRefine(ScriptedChatModel(default="Pages"), rubric=ONE_WORD, store=store).run(
        "Name a bookstore in one word!")
    assert second.exemplar_ids == [stored.key]
    assert outputs(store, ("archive", "default")) == ["Pages", "Shelves"]


def test_the_near_duplicate_gate_holds_in_a_store() -> None:
    store = indexed_store()
    arch = ArchiveRefine(ScriptedChatModel(default="one"), rubric=ONE_WORD, store=store,
                         archive_namespace="words")
    assert arch.run("Say one word.").archived
    assert not arch.run("Say one word, please.").archived  # same output: a duplicate
    assert outputs(store, ("archive", "words")) == ["one"]


def test_reflexion_keeps_reflections_in_the_store_and_recalls_them() -> None:
    store = indexed_store()
    llm = ScriptedChatModel(responses=["We sell books", "Books for all"],
                            structured={"ReflectionNote": [NOTE]})
    result = Reflexion(llm, rubric=NO_WE, store=store, memory_namespace="taglines").run(
        "Bookstore tagline.")
    assert result.output == "Books for all" and result.iterations == 2
    assert outputs(store, ("reflexion", "taglines"), "reflection") == ["Never write we."]
    llm2 = ScriptedChatModel(responses=["Books for all"])
    again = Reflexion(llm2, rubric=NO_WE, store=store, memory_namespace="taglines",
                      min_similarity=None).run("Bookstore tagline!")
    assert len(again.reflection_ids) == 1 and "Never write we." in llm2.calls[0].prompt


def test_the_default_is_the_local_archive_served_as_a_store(tmp_path: Path) -> None:
    archive = Archive(tmp_path / "archive", embedder=EMB)
    arch = ArchiveRefine(ScriptedChatModel(default="Shelves"), rubric=ONE_WORD, archive=archive)
    assert isinstance(arch.store, ArchiveStore) and arch.archive is archive
    assert arch.run("Name a bookstore in one word.").archived and len(archive) == 1
    # the archive on disk and the graph's store are one memory
    assert outputs(arch.build().store, ("archive", "default")) == ["Shelves"]
    memory = ReflexionMemory(tmp_path / "lessons", "taglines", EMB)
    reflexion = Reflexion(ScriptedChatModel(default="x"), memory=memory)
    assert reflexion.memory is memory and reflexion.memory_slot.namespace == (
        "reflexion", "taglines")


def test_a_parent_graphs_store_holds_the_memory_of_a_subgraph(tmp_path: Path) -> None:
    class Outer(TypedDict, total=False):
        task: str
        output: str

    lessons = ReflexionMemory(tmp_path, embedder=EMB)

    def parent(store: Any) -> Any:
        llm = ScriptedChatModel(responses=["We sell books", "Books for all"],
                                structured={"ReflectionNote": [NOTE]})
        inner = create_reflexion_graph(llm, rubric=NO_WE, memory=lessons)

        def call(state: Outer) -> dict[str, Any]:
            return {"output": inner.invoke({"task": state["task"]})["output"]}

        graph = StateGraph(Outer)
        graph.add_node("inner", call)
        graph.set_entry_point("inner")
        graph.add_edge("inner", END)
        return graph.compile(store=store)

    shared = indexed_store()
    assert parent(shared).invoke({"task": "Bookstore tagline."})["output"] == "Books for all"
    assert outputs(shared, ("reflexion", "default"), "reflection") == ["Never write we."]
    assert len(lessons) == 0  # the parent's store, not the subgraph's own
    parent(None).invoke({"task": "Bookstore tagline."})  # no parent store: the subgraph's own
    assert len(lessons) == 1


def test_arun_goes_through_the_store_too() -> None:
    store = indexed_store()
    arch = ArchiveRefine(ScriptedChatModel(default="Shelves"), rubric=ONE_WORD, store=store)
    assert asyncio.run(arch.arun("Name a bookstore in one word.")).archived
    assert outputs(store, ("archive", "default")) == ["Shelves"]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"archive": None}, r"archive=None: ArchiveRefine keeps its memory.*use Reflection"),
        ({"archive": 42}, r"archive=42 \(int\): pass a folder path or an Archive"),
        ({"archive": "ARCHIVE", "store": "STORE"}, r"got both archive= and store="),
        ({"store": "postgres://db"}, r"store='postgres://db': pass a LangGraph BaseStore"),
        ({"store": InMemoryStore()}, r"InMemoryStore has no vector index.*store_index\(\)"),
        ({"store": "STORE", "archive_namespace": "a.b"}, r"label 'a.b'.*without periods"),
        ({"archive": "ARCHIVE", "archive_namespace": "other"},
         r"archive_namespace='other'.*drop archive_namespace"),
    ],
)
def test_wrong_memory_arguments_get_clear_errors(
    tmp_path: Path, kwargs: dict[str, Any], message: str
) -> None:
    if kwargs.get("archive") == "ARCHIVE":
        kwargs["archive"] = Archive(tmp_path, embedder=EMB)
    if kwargs.get("store") == "STORE":
        kwargs["store"] = indexed_store()
    with pytest.raises(ConfigError, match=message):
        ArchiveRefine(ScriptedChatModel(default="x"), rubric=ONE_WORD, **kwargs)


def test_reflexion_refuses_none_and_a_store_ranked_by_another_distance() -> None:
    with pytest.raises(ConfigError, match=r"memory=None: Reflexion.*a ReflexionMemory"):
        Reflexion(ScriptedChatModel(default="x"), memory=None)
    store = InMemoryStore(index={**store_index(EMB), "distance_type": "l2"})  # type: ignore[typeddict-unknown-key]
    with pytest.raises(ConfigError, match="distance_type='l2'.*cosine"):
        Reflexion(ScriptedChatModel(default="x"), store=store)


def test_store_memory_search_min_score_mmr_and_replace() -> None:
    store = indexed_store()
    memory = open_memory(store, ("archive", "t"), "archive")
    assert isinstance(memory, StoreMemory)
    assert open_memory(store, ("archive", "t"), "archive") is memory  # one view per namespace
    added = memory.add_many([
        {"id": "a", "task": "Tagline for a bookstore", "output": "Stories on every shelf."},
        {"id": "b", "task": "Tagline for a book store", "output": "Chapters for every reader."},
        {"id": "c", "task": "Sum the prices in an invoice", "output": "The total is 42."},
    ])
    assert [r.status for r in added] == ["added", "added", "added"]
    assert [h.entry.id for h in memory.search("Tagline for a bookstore", k=3, min_score=0.5)] == [
        "a", "b"]
    hits = memory.search("Tagline for a bookstore", k=2, mmr=0.0)  # pure variety after the first
    assert [h.entry.id for h in hits] == ["a", "c"]
    replaced = memory.add_many([{"id": "a", "task": "Tagline for a bookstore",
                                 "output": "Every story, one shelf."}])[0]
    assert replaced.status == "replaced"
    assert store.get(("archive", "t"), "a").value["output"] == "Every story, one shelf."
    with pytest.raises(ConfigError, match="non-empty query"):
        memory.search("  ")


def test_store_memory_refuses_a_namespace_written_by_another_embedder() -> None:
    store = indexed_store()
    store.put((META_PREFIX, "archive", "t"), "embedder",
              {"kind": "archive", "embedder": "all-MiniLM-L6-v2", "dims": 384}, index=False)
    with pytest.raises(EmbedderMismatchError, match="written with the embedder 'all-MiniLM"):
        open_memory(store, ("archive", "t"), "archive").search("anything")
    fresh = open_memory(store, ("archive", "other"), "archive")
    fresh.search("anything")  # first use records the store's embedder
    assert store.get((META_PREFIX, "archive", "other"), "embedder").value == {
        "kind": "archive", "embedder": EMB.name, "dims": EMB.dim}


def test_store_memory_says_which_item_is_not_a_record() -> None:
    store = indexed_store()
    store.put(("archive", "t"), "foreign", {"task": "Tagline for a bookstore", "colour": "red"})
    with pytest.raises(ArchiveError, match="item 'foreign'.*not a record of kind 'archive'"):
        open_memory(store, ("archive", "t"), "archive").search("Tagline for a bookstore")


def test_archive_store_serves_given_collections_at_their_namespaces(tmp_path: Path) -> None:
    archive = Archive(tmp_path / "a", "taglines", EMB)
    lessons = ReflexionMemory(tmp_path / "r", embedder=EMB)
    store = ArchiveStore([archive, lessons])
    assert store.list_namespaces() == [("archive", "taglines"), ("reflexion", "default")]
    store.put(("reflexion", "default"), "r1", {"task": "Sum a column", "reflection": "Read all."})
    store.put(("archive", "taglines"), "t1", {"task": "Tagline", "output": "Stories."})
    assert lessons.get("r1").reflection == "Read all." and archive.get("t1").output == "Stories."
    assert store.collection(("archive", "taglines")) is archive
    with pytest.raises(ConfigError, match=r"not in this ArchiveStore, which holds only"):
        store.put(("archive", "elsewhere"), "k", {"task": "t", "output": "o"})
    with pytest.raises(ConfigError, match="not a reflexion entry.*'task' and 'reflection'"):
        store.put(("reflexion", "default"), "r2", {"task": "t", "output": "o"})
    with pytest.raises(ConfigError, match="ArchiveStore takes a folder path"):
        ArchiveStore(42)  # type: ignore[arg-type]
    assert ArchiveStore(archive).search(("archive",), query="Tagline")[0].key == "t1"


def test_archive_store_folders_hold_both_kinds(tmp_path: Path) -> None:
    store = ArchiveStore(tmp_path, embedder=EMB)
    store.put(("reflexion", "x"), "r", {"task": "Sum a column", "reflection": "Read all rows."})
    store.put(("archive", "x"), "a", {"task": "Sum a column", "output": "42"})
    store.close()
    reopened = ArchiveStore(tmp_path, embedder=EMB)
    assert isinstance(reopened.collection(("reflexion", "x")), ReflexionMemory)
    hits = reopened.search((), query="Sum the column", limit=5)
    assert sorted(h.key for h in hits) == ["a", "r"]
    with pytest.raises(ArchiveError, match="holds 'reflexion' records, not 'archive'"):
        reopened.collection(("reflexion", "x"), "archive")
    lessons = ReflexionMemory(tmp_path, ("reflexion", "x"), EMB)
    assert lessons.get("r").reflection == "Read all rows."


class CountingEmbedder(HashingEmbedder):
    """The hashing embedder, counting its calls and the texts it embedded."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[int] = []

    def embed(self, texts: Any) -> Any:
        self.calls.append(len(texts))
        return super().embed(texts)


def test_a_store_write_embeds_in_batches_and_gates_duplicates_within_it() -> None:
    emb = CountingEmbedder()
    store = InMemoryStore(index=store_index(emb))
    memory = StoreMemory(store, ("archive", "batch"), Archive.record_type)
    stored = memory.add_many([{"task": "Tagline for a bakery", "output": "Warm bread daily."}])
    assert [r.status for r in stored] == ["added"]
    emb.calls.clear()
    records = [{"task": f"Tagline for shop {i}", "output": f"Shop {i} sells fine goods {i}."}
               for i in range(20)]
    records += [{"task": "Tagline for shop 3 again", "output": "Shop 3 sells fine goods 3!"},
                {"task": "Bakery tagline", "output": "Warm bread daily!"}]
    results = memory.add_many(records)
    assert [r.status for r in results] == ["added"] * 20 + ["duplicate", "duplicate"]
    assert results[20].duplicate_of.output == "Shop 3 sells fine goods 3."  # same batch
    assert results[21].duplicate_of.output == "Warm bread daily."  # stored before
    # The store embeds each search query on its own (InMemoryStore's choice); memory's own
    # work is ONE call for every output of the write, and the put re-embeds nothing.
    singles = [n for n in emb.calls if n == 1]
    assert len(singles) == len(records) and len(emb.calls) == len(records) + 1
    assert max(emb.calls) == len(records)  # the 22 new outputs (the stored one is cached)
    assert outputs(store, ("archive", "batch")) == sorted(
        ["Warm bread daily."] + [f"Shop {i} sells fine goods {i}." for i in range(20)])


@pytest.mark.parametrize("backend", ["collection", "store"])
def test_both_backends_apply_the_one_accept_rule(tmp_path: Path, backend: str) -> None:
    """One memory policy (agentic_loop.memory.policy): the local collection and a store view
    decide a write the same way: another version of an id in the same batch replaces it (and
    keeps its created_at), it is never its own duplicate, and a near-copy of another record's
    output is a duplicate of that record."""
    memory: Any = (Archive(tmp_path, "t", embedder=EMB) if backend == "collection"
                   else StoreMemory(indexed_store(), ("archive", "t"), Archive.record_type))
    results = memory.add_many([
        {"id": "x", "task": "Tagline for a bakery", "output": "Warm bread daily."},
        {"id": "y", "task": "Tagline for a fishmonger", "output": "Fresh fish every morning."},
        {"id": "x", "task": "Tagline for a bakery", "output": "Warm bread daily!"},
        {"id": "z", "task": "Tagline for a fish shop", "output": "Fresh fish every morning!"},
    ])
    assert [r.status for r in results] == ["added", "added", "replaced", "duplicate"]
    assert results[2].entry.created_at == results[0].entry.created_at
    assert results[3].duplicate_of is not None and results[3].duplicate_of.id == "y"
    stored = {h.entry.id: h.entry for h in memory.search("Tagline for a fishmonger", k=3)}
    again = memory.add_many([{"id": "y", "task": "Tagline for a fishmonger",
                              "output": "Fresh fish every morning."}])[0]
    assert again.status == "replaced" and again.entry.created_at == stored["y"].created_at
    hits = memory.search("Tagline for a bakery", k=2, min_score=0.3)
    assert [h.entry.id for h in hits][:1] == ["x"] and hits[0].entry.output == "Warm bread daily!"
