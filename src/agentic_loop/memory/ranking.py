"""Ranking search hits: the best rows an index returns that the caller accepts, and argument checks.

Why apart from the collection: a vector index knows nothing of deleted or
superseded records, or of a caller's ``where`` filter, so a search asks it
for a few more rows than wanted and widens the request while too many are
rejected. That loop, and the validation of ``k``, ``min_score`` and
``mmr`` shared by every search entry point, are pure functions of an
index and a predicate.

Example:
    >>> import numpy as np
    >>> from agentic_loop.memory.collection.index import VectorIndex
    >>> index = VectorIndex(dim=2)
    >>> index.add(np.array([[1, 0], [0.8, 0.6], [0, 1]], dtype=np.float32))
    >>> ranked(index, np.array([1, 0], dtype=np.float32), 2, accept=lambda row: row != 0,
    ...        min_score=None)
    [(1, 0.800000011920929), (2, 0.0)]
    >>> check_search_args(0, None, None)
    Traceback (most recent call last):
    ...
    agentic_loop.errors.ConfigError: k=0: k must be a positive integer (how many hits to return)
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from agentic_loop.errors import ConfigError
from agentic_loop.memory.collection.index import VectorIndex

__all__ = ["check_search_args", "ranked"]


def ranked(
    index: VectorIndex,
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


def check_search_args(k: int, min_score: float | None, mmr: float | None) -> None:
    """Raise :class:`~agentic_loop.errors.ConfigError` naming the first bad search argument."""
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise ConfigError(f"k={k!r}: k must be a positive integer (how many hits to return)")
    if min_score is not None and not -1.0 <= min_score <= 1.0:
        raise ConfigError(
            f"min_score={min_score}: min_score is a cosine similarity; pass a value in [-1, 1]"
        )
    if mmr is not None and (isinstance(mmr, bool) or not 0.0 <= float(mmr) <= 1.0):
        raise ConfigError(
            f"mmr={mmr!r}: mmr is the MMR lambda; pass a float in [0, 1] (1 = pure relevance)"
        )
