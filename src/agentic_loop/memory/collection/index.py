"""Nearest-neighbour search over unit vectors with FAISS: exact when small, HNSW when large.

Cosine similarity of unit vectors is their inner product. Up to
``exact_limit`` rows the index is a brute-force ``IndexFlatIP`` (exact, and
fast enough: a few milliseconds at 50k rows). Past it, the index turns into
an ``IndexHNSWFlat`` graph with the inner-product metric, whose search time
barely grows with size; its ``ef_search`` default was chosen so recall
against exact search stays >= 0.95 on real sentence embeddings (see
``bench/archive.py``). Row numbers are positions: the n-th added vector is
row n, which is how callers map hits back to their records.

Example:
    >>> import numpy as np
    >>> from agentic_loop.memory.embeddings import normalize_rows
    >>> vectors = normalize_rows(np.array([[1, 0, 0, 0], [0.9, 0.1, 0, 0],
    ...                                    [0, 0, 1, 0], [0, 0, 0.8, 0.3]]))
    >>> index = VectorIndex(dim=4, exact_limit=100)
    >>> index.add(vectors)
    >>> sims, rows = index.search(vectors[2], k=2)
    >>> rows.tolist(), index.kind, len(index)
    ([2, 3], 'flat', 4)
    >>> small = VectorIndex(dim=4, exact_limit=2)          # past the limit: HNSW
    >>> small.add(vectors)
    >>> small.kind, small.search(vectors[1], k=1)[1].tolist()
    ('hnsw', [1])
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path

import faiss
import numpy as np

from agentic_loop.atomic import atomic_write
from agentic_loop.errors import ConfigError
from agentic_loop.memory.errors import IndexFileError

__all__ = ["IndexFileError", "VectorIndex"]


@contextlib.contextmanager
def _one_thread() -> Iterator[None]:
    """Run one query on the calling thread only.

    A single query gains nothing from OpenMP workers, and on a busy machine
    waiting for them costs 10-20x (measured: 16 ms instead of 0.7 ms for 10k
    rows). OpenMP's thread count is per calling thread, so this does not
    affect other threads or index builds.
    """
    previous = faiss.omp_get_max_threads()
    faiss.omp_set_num_threads(1)
    try:
        yield
    finally:
        faiss.omp_set_num_threads(previous)


class VectorIndex:
    """A growable inner-product index whose kind follows its size.

    ``exact_limit``: the most rows searched exactly. ``hnsw_m``,
    ``ef_construction`` and ``ef_search`` tune the HNSW graph used above it
    (more is slower and more accurate).
    """

    def __init__(
        self,
        dim: int,
        *,
        exact_limit: int = 50_000,
        hnsw_m: int = 32,
        ef_construction: int = 40,
        ef_search: int = 128,
    ) -> None:
        if dim < 1:
            raise ConfigError(f"dim={dim}: an index dimension must be a positive integer")
        if exact_limit < 0:
            raise ConfigError(f"exact_limit={exact_limit}: pass an integer >= 0")
        self.dim = dim
        self.exact_limit = exact_limit
        self.hnsw_m = hnsw_m
        self.ef_construction = ef_construction
        self.ef_search = ef_search
        self._index: faiss.Index = faiss.IndexFlatIP(dim)

    def __len__(self) -> int:
        return int(self._index.ntotal)

    def __repr__(self) -> str:
        return f"VectorIndex(kind={self.kind!r}, rows={len(self)}, dim={self.dim})"

    @property
    def kind(self) -> str:
        """``"flat"`` (exact) or ``"hnsw"`` (approximate)."""
        return "hnsw" if isinstance(self._index, faiss.IndexHNSW) else "flat"

    def add(self, vectors: np.ndarray) -> None:
        """Append rows (unit float32 vectors); switches to HNSW when passing ``exact_limit``."""
        batch = self.check(vectors)
        if not len(batch):
            return
        if self.kind == "flat" and len(self) + len(batch) > self.exact_limit:
            existing = self.reconstruct_all()
            self._index = self._new_hnsw()
            if len(existing):
                self._index.add(existing)
        self._index.add(batch)

    def search(self, query: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        """Return ``(similarities, rows)`` of the ``k`` best rows for one query, best first."""
        q = self.check(np.asarray(query, dtype=np.float32).reshape(1, -1))
        k = min(int(k), len(self))
        if k <= 0:
            return np.zeros(0, dtype=np.float32), np.zeros(0, dtype=np.int64)
        with _one_thread():
            if self.kind == "hnsw":
                # faiss's bundled stubs lack SearchParametersHNSW (present at runtime).
                hnsw_params = faiss.SearchParametersHNSW  # type: ignore[attr-defined]
                params = hnsw_params(efSearch=max(self.ef_search, k))
                sims, rows = self._index.search(q, k, params=params)
            else:
                sims, rows = self._index.search(q, k)
        keep = rows[0] >= 0
        return sims[0][keep], rows[0][keep].astype(np.int64)

    def reconstruct(self, rows: np.ndarray | list[int]) -> np.ndarray:
        """The stored vectors of ``rows``."""
        ids = np.asarray(rows, dtype=np.int64)
        if not len(ids):
            return np.zeros((0, self.dim), dtype=np.float32)
        return np.asarray(self._index.reconstruct_batch(ids), dtype=np.float32)

    def reconstruct_all(self) -> np.ndarray:
        """Every stored vector, in row order."""
        if not len(self):
            return np.zeros((0, self.dim), dtype=np.float32)
        return np.asarray(self._index.reconstruct_n(0, len(self)), dtype=np.float32)

    def save(self, path: str | os.PathLike[str]) -> None:
        """Write the index to ``path`` atomically (a reader sees the old file or the new one)."""
        with atomic_write(path) as tmp:
            faiss.write_index(self._index, str(tmp))

    def load(self, path: str | os.PathLike[str]) -> None:
        """Replace this index's content with the one saved at ``path``.

        Raises :class:`IndexFileError` when the file is missing, unreadable,
        of another dimension, or not an inner-product index.
        """
        target = Path(path)
        if not target.is_file():
            raise IndexFileError(
                f"index file {target} does not exist; it is derived: rebuild it from the log"
            )
        try:
            index = faiss.read_index(str(target))
        except RuntimeError as exc:
            raise IndexFileError(
                f"index file {target} is unreadable: {str(exc).strip()}; it is derived: "
                "delete it to rebuild it from the log"
            ) from exc
        if index.d != self.dim or index.metric_type != faiss.METRIC_INNER_PRODUCT:
            raise IndexFileError(
                f"index file {target} holds {index.d}-dimensional vectors with metric "
                f"{index.metric_type}; expected {self.dim}-dimensional inner-product vectors; "
                "delete it to rebuild it from the log"
            )
        self._index = index
        wanted = "hnsw" if len(self) > self.exact_limit else "flat"
        if wanted != self.kind:  # exact_limit changed since it was saved
            vectors = self.reconstruct_all()
            self._index = self._new_hnsw() if wanted == "hnsw" else faiss.IndexFlatIP(self.dim)
            self._index.add(vectors)

    def _new_hnsw(self) -> faiss.Index:
        index = faiss.IndexHNSWFlat(self.dim, self.hnsw_m, faiss.METRIC_INNER_PRODUCT)
        index.hnsw.efConstruction = self.ef_construction
        index.hnsw.efSearch = self.ef_search
        return index

    def check(self, vectors: np.ndarray) -> np.ndarray:
        """``vectors`` as a contiguous float32 ``(n, dim)`` array, or a clear error."""
        batch = np.ascontiguousarray(vectors, dtype=np.float32)
        if batch.ndim != 2 or batch.shape[1] != self.dim:
            raise ConfigError(
                f"expected vectors of shape (n, {self.dim}), got {batch.shape}; embed with the "
                "embedder this index was built with"
            )
        return batch
