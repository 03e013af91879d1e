"""Add throughput of an Archive against the raw embedder, for ``bench/archive.py``.

Why apart: the add measurement is the one ``BENCH_ONLY=add`` reruns on its own,
and ``bench/archive.py`` is long enough without it.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from archive_common import console, timed

from agentic_loop.memory import Archive, Embedder


def bench_add(real: Embedder, texts: list[str], workdir: Path) -> dict:
    """Entries/s of ``add_many`` (batches of 100) and ``add``, against two embedder baselines.

    ``bulk``: the same texts embedded in one call (the embedder's best case).
    ``same_calls``: the same texts embedded in the same calls the archive makes
    (200 texts per batch of 100 entries, 2 per single add), so the ratio to it
    is the share of time the archive spends embedding rather than on its own work.
    """
    console.log("Add throughput with the real embedder...")
    n_many, n_single = 1000, 200
    entries = [{"task": texts[i], "output": texts[-1 - i], "score": i % 10}
               for i in range(n_many + n_single)]
    archive = Archive(workdir / "add", embedder=real, show_progress=False)

    def pair(e: dict) -> list[str]:
        return [e["task"], e["output"]]

    # Each add is timed right after embedding the same texts in the same call, so both see the
    # same machine load (other jobs may share the CPUs).
    seconds_many = same_many_s = seconds_single = same_single_s = 0.0
    for lo in range(0, n_many, 100):
        batch = entries[lo : lo + 100]
        same_many_s += timed(real.embed, [t for e in batch for t in pair(e)])[0]
        seconds_many += timed(archive.add_many, batch)[0]
    for e in entries[n_many:]:
        same_single_s += timed(real.embed, pair(e))[0]
        seconds_single += timed(archive.add, **e)[0]
    bulk_s, _ = timed(real.embed, [t for e in entries[:n_many] for t in pair(e)])
    many_rate, single_rate = n_many / seconds_many, n_single / seconds_single
    bulk_rate = 2 * n_many / bulk_s

    def row(entries: int, rate: float, same_s: float, seconds: float) -> dict:
        return {
            "entries": entries,
            "entries_per_s": round(rate, 1),
            "texts_ratio_to_bulk_embedding": round(2 * rate / bulk_rate, 3),
            "ratio_to_bulk_embedding": round(rate / bulk_rate, 3),
            "ratio_to_same_calls": round(same_s / seconds, 3),
        }

    return {
        "baseline_bulk_texts_per_s": round(bulk_rate, 1),
        "add_many_batches_of_100": row(n_many, many_rate, same_many_s, seconds_many),
        "add_one_at_a_time": row(n_single, single_rate, same_single_s, seconds_single),
        "ideal_ratio_to_bulk_embedding": 0.5,
        "target_texts_ratio_to_bulk_embedding_batched": 0.9,
        "embedder_batch_size": real.batch_size,
        "measured_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "notes": [
            ("texts_ratio_to_bulk_embedding = (2 texts x entries/s) / bulk texts/s: the add's "
             "speed against embedding the same texts in one 2,000-text call; 1.0 is the ceiling "
             "when embedding dominates"),
            ("an add_many batch embeds all its texts (tasks and outputs) in one embedder call, "
             "checks near-duplicates against the store and the batch itself, then appends the "
             "batch as one write and one fsync"),
            ("each entry embeds two texts (task for search, output for the near-duplicate check): "
             "0.5 entries per embedded text/s is the ceiling when embedding dominates"),
            ("ratio_to_same_calls = time embedding the same texts in the same calls / "
             "time adding: 1.0 means the archive's own work (lock, duplicate check, "
             "fsync'd append, index) is free"),
            ("dedup on (threshold 0.95); a few docstring sentences are near-duplicates "
             "and are rejected"),
        ],
    }
