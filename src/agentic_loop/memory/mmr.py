"""Maximal Marginal Relevance: pick results that are relevant *and* unlike each other.

The top-k most similar exemplars are often near-copies of one another, so a
prompt built from them shows the model one idea three times. MMR (Carbonell
& Goldstein, 1998) picks greedily, scoring each candidate
``lambda * sim(query, c) - (1 - lambda) * max sim(c, already picked)``:
``lambda=1`` is plain similarity ranking, lower values trade relevance for
variety.

Example:
    >>> import numpy as np
    >>> from agentic_loop.memory.embeddings import normalize_rows
    >>> query = normalize_rows(np.array([[1.0, 0.0, 0.0]]))[0]
    >>> candidates = normalize_rows(np.array([[1.0, 0.1, 0.0],     # relevant
    ...                                       [1.0, 0.12, 0.0],    # relevant, a near-copy of 0
    ...                                       [0.8, 0.0, 0.6]]))   # less relevant, different
    >>> mmr_select(query, candidates, k=2, lambda_=1.0)
    [0, 1]
    >>> mmr_select(query, candidates, k=2, lambda_=0.5)
    [0, 2]
"""

from __future__ import annotations

import numpy as np

from agentic_loop.errors import ConfigError

__all__ = ["mmr_select"]


def mmr_select(query: np.ndarray, candidates: np.ndarray, k: int, lambda_: float) -> list[int]:
    """Return the positions of up to ``k`` candidates (unit rows) in MMR order."""
    if not 0.0 <= lambda_ <= 1.0:
        raise ConfigError(f"lambda_={lambda_}: the MMR lambda must be between 0 and 1")
    n = len(candidates)
    if n == 0 or k <= 0:
        return []
    relevance = candidates @ query
    redundancy = np.full(n, -np.inf, dtype=np.float64)
    picked: list[int] = []
    available = np.ones(n, dtype=bool)
    for _ in range(min(k, n)):
        if picked:
            score = lambda_ * relevance - (1.0 - lambda_) * redundancy
        else:
            score = relevance.astype(np.float64)
        score = np.where(available, score, -np.inf)
        best = int(np.argmax(score))
        picked.append(best)
        available[best] = False
        redundancy = np.maximum(redundancy, candidates @ candidates[best])
    return picked
