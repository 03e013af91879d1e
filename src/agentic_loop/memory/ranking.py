"""The collection's nearest rows: the best rows a FAISS index returns that the caller accepts.

Why apart from the collection: a vector index knows nothing of deleted or
superseded records, or of a caller's ``where`` filter, so a search asks it
for a few more rows than wanted and widens the request while too many are
rejected. That loop is a pure function of an index and a predicate: the
local backend's search primitive, under the one memory policy
(:mod:`agentic_loop.memory.policy`), for task search and for the
near-duplicate gate alike.

Example:
    >>> import numpy as np
    >>> from agentic_loop.memory.collection.index import VectorIndex
    >>> index = VectorIndex(dim=2)
    >>> index.add(np.array([[1, 0], [0.8, 0.6], [0, 1]], dtype=np.float32))
    >>> ranked(index, np.array([1, 0], dtype=np.float32), 2, accept=lambda row: row != 0,
    ...        min_score=None)
    [(1, 0.800000011920929), (2, 0.0)]
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

import numpy as np

__all__ = ["SearchableIndex", "ranked"]


class SearchableIndex(Protocol):
    """What :func:`ranked` needs of an index (a
    :class:`~agentic_loop.memory.collection.index.VectorIndex`): its size, and its ``k``
    nearest rows to a unit vector, similarities and row numbers, best first."""

    def __len__(self) -> int: ...

    def search(self, query: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]: ...


def ranked(
    index: SearchableIndex,
    vector: np.ndarray,
    want: int,
    accept: Callable[[int], bool],
    min_score: float | None,
) -> list[tuple[int, float]]:
    """The ``want`` best accepted rows, best first, widening the search past rejected ones."""
    total = len(index)
    fetch = min(total, want + 8)
    while fetch > 0:
        sims, rows = index.search(vector, fetch)
        out: list[tuple[int, float]] = []
        below = False
        for sim, row in zip(sims.tolist(), rows.tolist()):
            if min_score is not None and sim < min_score:
                below = True
                break
            if accept(row):
                out.append((row, sim))
                if len(out) == want:
                    return out
        if below or fetch >= total:
            return out
        fetch = min(total, fetch * 4)
    return []

