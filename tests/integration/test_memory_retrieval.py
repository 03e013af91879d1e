"""Retrieval quality with the real bundled embedder (all-MiniLM-L6-v2)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest

from agentic_loop.memory import Archive, ArchiveStore, Embedder, ReflexionMemory
from agentic_loop.memory.collection.index import VectorIndex

pytestmark = pytest.mark.slow

# Six stored tasks per topic, and two queries per topic worded differently from all of them.
TOPICS: dict[str, tuple[list[str], list[str]]] = {
    "coffee": (
        [
            "Write a tagline for a small coffee roastery",
            "Describe our new espresso blend in two sentences",
            "Write a welcome message for a cafe loyalty app",
            "Write an Instagram caption for a latte art contest",
            "Summarize customer reviews of our cold brew",
            "Write a menu description for a cappuccino",
        ],
        ["Write a slogan for an espresso bar", "Draft a product blurb for our decaf coffee beans"],
    ),
    "python": (
        [
            "Fix the IndexError in this Python list loop",
            "Write a Python function that reverses a linked list",
            "Explain what a Python decorator does",
            "Write pytest unit tests for a function that parses dates",
            "Refactor this Python class to use dataclasses",
            "Why does my pandas merge drop rows?",
        ],
        ["My Python script raises KeyError when reading a dict; how do I fix it?",
         "Write a Python function to merge two sorted lists"],
    ),
    "math": (
        [
            "Compute 17 times 23",
            "Solve 3x + 5 = 20 for x",
            "What is the derivative of x cubed?",
            "How many ways can 5 books be arranged on a shelf?",
            "Find the area of a circle with radius 4",
            "What is 15 percent of 240?",
        ],
        ["Calculate 19 multiplied by 31", "Solve the equation 2x - 7 = 9"],
    ),
    "travel": (
        [
            "Plan a three-day itinerary for Kyoto",
            "Suggest what to pack for a hiking trip in Patagonia",
            "Write a packing list for a beach holiday",
            "Recommend budget hotels near the Lisbon old town",
            "Write an email to a hotel requesting late check-out",
            "Describe the best time of year to visit Iceland",
        ],
        [
            "Plan a weekend city trip to Barcelona",
            "What should I pack for a ski vacation in the Alps?",
        ],
    ),
    "fitness": (
        [
            "Suggest a beginner running plan for a 5k race",
            "Explain the benefits of stretching after exercise",
            "Describe how to do a proper push-up",
            "Create a weekly strength training routine for beginners",
            "Give tips for staying motivated to work out",
            "How should I warm up before a long run?",
        ],
        [
            "Create a four-week plan to start jogging",
            "What exercises build upper body strength at home?",
        ],
    ),
}


@pytest.fixture(scope="module")
def labelled_archive(tmp_path_factory: pytest.TempPathFactory, real_embedder: Embedder) -> Archive:
    archive = Archive(tmp_path_factory.mktemp("labelled"), embedder=real_embedder)
    archive.add_many(
        {"task": task, "output": f"An accepted answer to: {task}", "metadata": {"topic": topic}}
        for topic, (tasks, _) in TOPICS.items()
        for task in tasks
    )
    return archive


def test_real_embedder_is_normalized_384_d_and_batch_independent(real_embedder: Embedder) -> None:
    texts = [tasks[0] for tasks, _ in TOPICS.values()]
    batch = real_embedder.embed(texts)
    assert batch.shape == (5, 384) and batch.dtype == np.float32 and real_embedder.dim == 384
    assert np.allclose(np.linalg.norm(batch, axis=1), 1.0, atol=1e-5)
    single = np.vstack([real_embedder.embed([t]) for t in texts])
    assert np.allclose(batch, single, atol=1e-4)


@pytest.mark.parametrize("topic", list(TOPICS))
def test_top3_come_from_the_right_topic(labelled_archive: Archive, topic: str) -> None:
    for query in TOPICS[topic][1]:
        hits = labelled_archive.search(query, k=3)
        assert [h.entry.metadata["topic"] for h in hits] == [topic] * 3, (
            query, [h.entry.task for h in hits])


def test_min_score_cuts_unrelated_tasks(labelled_archive: Archive) -> None:
    hits = labelled_archive.search("Compute 12 times 14", k=30, min_score=0.5)
    assert hits and all(h.entry.metadata["topic"] == "math" for h in hits)


def test_reflections_are_found_for_similar_tasks(tmp_path: Path, real_embedder: Embedder) -> None:
    memory = ReflexionMemory(tmp_path, embedder=real_embedder)
    memory.add("Sum the prices in the invoice table",
               "Read every row before adding; I skipped the last one.")
    memory.add("Write a haiku about autumn rain", "Count syllables per line: five, seven, five.")
    memory.add("Translate the contract clause into French",
               "Keep legal terms exact; do not paraphrase.")
    hit = memory.search("Add up the amounts in this billing spreadsheet", k=1)[0]
    assert hit.entry.reflection.startswith("Read every row")


def test_store_search_uses_real_similarity(tmp_path: Path, real_embedder: Embedder) -> None:
    store = ArchiveStore(tmp_path, embedder=real_embedder)
    for topic, (tasks, _) in TOPICS.items():
        for i, task in enumerate(tasks[:3]):
            store.put((topic,), f"{topic}-{i}", {"task": task, "output": f"answer {i}"})
    hits = store.search((), query="Plan a weekend city trip to Barcelona", limit=2)
    assert [h.namespace for h in hits] == [("travel",), ("travel",)]


def test_hnsw_recall_against_exact_search_on_real_embeddings(real_embedder: Embedder) -> None:
    spec = importlib.util.spec_from_file_location(
        "corpus", Path(__file__).parents[2] / "bench" / "corpus.py")
    assert spec is not None and spec.loader is not None
    corpus = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(corpus)
    texts = corpus.sentences(1200)
    assert len(texts) == 1200
    vectors = real_embedder.embed(texts)
    base, queries = vectors[:1000], vectors[1000:]
    exact = VectorIndex(384, exact_limit=10**9)
    approx = VectorIndex(384, exact_limit=0)  # the archive's HNSW settings, forced at this size
    exact.add(base)
    approx.add(base)
    assert approx.kind == "hnsw"
    recall = np.mean([len(set(exact.search(q, 10)[1]) & set(approx.search(q, 10)[1])) / 10
                      for q in queries])
    assert recall >= 0.95
