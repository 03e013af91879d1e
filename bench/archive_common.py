"""What the archive benchmarks share: the corpus embedder, the timers, the results file.

Why apart: ``bench/archive.py`` (FAISS) and ``bench/archive_postgres.py``
(PostgresStore beside it) both measure on the same precomputed vectors and
write the same results file; ``archive.py`` runs the Postgres part at its
end, so the pieces both need live here and neither script imports the other
back.
"""

from __future__ import annotations

import hashlib
import re
import statistics
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from rich.console import Console
from rich.progress import Progress

from agentic_loop.memory import Archive, Embedder
from agentic_loop.memory.embeddings import normalize_rows

RESULTS = Path(__file__).parent / "results" / "archive.json"
CACHE = Path(__file__).parent / ".cache"
N_BASE = 20_000  # real sentences stored
NOISE = 0.35  # Gaussian noise norm added to a copy of a real vector (cosine to it ~0.94)
console = Console(stderr=True)


class CorpusEmbedder:
    """Answers with precomputed vectors for the benchmark's own entries, real embeddings otherwise.

    Entry tasks end in ``[i]``: row ``i`` gets the real embedding of corpus
    sentence ``i % N_BASE``, plus, for every copy after the first, a fixed
    noise vector of norm ``NOISE`` (64 different ones). Queries are embedded
    by the real model unless ``cached`` is set; then their precomputed vectors
    are returned, so the archive's own overhead can be timed without the model.
    """

    TAG = re.compile(r"\[(\d+)\]$")

    def __init__(self, real: Embedder, base: np.ndarray, queries: dict[str, np.ndarray]) -> None:
        self.real = real
        self.base = base
        self.queries = queries
        self.cached = False
        noise = np.random.default_rng(7).standard_normal((64, base.shape[1])).astype(np.float32)
        self.noise = NOISE * noise / np.linalg.norm(noise, axis=1, keepdims=True)
        self.noise[0] = 0.0  # the first copy is the real vector itself

    @property
    def name(self) -> str:
        return self.real.name

    @property
    def dim(self) -> int:
        return int(self.base.shape[1])

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        rows, pos, real = [], [], []
        for j, text in enumerate(texts):
            match = self.TAG.search(text)
            if match:
                rows.append(int(match.group(1)))
                pos.append(j)
            elif self.cached and text in self.queries:
                out[j] = self.queries[text]
            else:
                real.append(j)
        if pos:
            r = np.array(rows)
            n = len(self.base)
            out[pos] = normalize_rows(self.base[r % n] + self.noise[(r // n) % 64])
        if real:
            out[real] = self.real.embed([texts[j] for j in real])
        return out


def percentiles(ms: list[float]) -> dict[str, float]:
    ordered = sorted(ms)
    p99 = ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))]
    return {"p50": round(statistics.median(ordered), 3), "p99": round(p99, 3), "n": len(ordered)}


def timed(fn, *args, **kwargs) -> tuple[float, object]:
    start = time.perf_counter()
    result = fn(*args, **kwargs)
    return time.perf_counter() - start, result


def bench_embedder(real: Embedder, texts: list[str],
                   vectors_too: bool = True) -> tuple[dict, np.ndarray | None]:
    """Measure the raw embedder on 2,000 texts; return its numbers and the corpus vectors.

    The corpus vectors are cached in ``bench/.cache`` (they only depend on the
    texts and the model), so a second run skips the long embedding.
    """
    sample = texts[:2000]
    console.log(f"Raw embedder baseline on {len(sample):,} sentences...")
    seconds, _ = timed(real.embed, sample)
    single = [timed(real.embed, [text])[0] * 1000 for text in texts[:50]]
    digest = hashlib.sha1("\n".join(texts).encode()).hexdigest()[:12]
    cache = CACHE / f"corpus-{len(texts)}-{digest}.npy"
    vectors: np.ndarray | None = None
    if not vectors_too:
        pass
    elif cache.is_file():
        vectors = np.load(cache)
    else:
        console.log(f"Embedding the {len(texts):,}-sentence corpus "
                    f"(cached in {cache} for later runs)...")
        parts = []
        with Progress(console=console, transient=True) as bar:
            task = bar.add_task("embedding corpus", total=len(texts))
            for lo in range(0, len(texts), 1000):
                chunk = texts[lo : lo + 1000]
                parts.append(real.embed(chunk))
                bar.advance(task, len(chunk))
        vectors = np.vstack(parts)
        cache.parent.mkdir(parents=True, exist_ok=True)
        np.save(cache, vectors)
    return {
        "name": real.name,
        "dim": real.dim,
        "batch_size": real.batch_size,
        "texts": len(sample),
        "seconds": round(seconds, 2),
        "texts_per_s": round(len(sample) / seconds, 1),
        "one_query_ms": percentiles(single),
    }, vectors


def build_archive(folder: Path, n: int, emb: CorpusEmbedder, texts: list[str]) -> float:
    archive = Archive(folder, embedder=emb, dedup_threshold=None, show_progress=False)
    start = time.perf_counter()
    chunk = 250_000
    with Progress(console=console, transient=True) as bar:
        task = bar.add_task(f"building {n:,}-entry archive", total=n)
        for lo in range(0, n, chunk):
            hi = min(n, lo + chunk)
            archive.add_many(
                ({"task": f"{texts[i % N_BASE]} [{i}]",
                  "output": f"Answer {i}: {texts[(i * 7 + 1) % N_BASE]}",
                  "score": float(i % 11)} for i in range(lo, hi)),
                dedup=False,
            )
            bar.advance(task, hi - lo)
    archive.close()
    return time.perf_counter() - start
