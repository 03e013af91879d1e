"""Output diversity: catch a model that collapsed into saying one thing to everything.

Training on its own best outputs can make a model converge on one phrasing
that the rubric rewards ("mode collapse"): golden scores may even rise while
every answer becomes the same sentence. The mean pairwise cosine distance
between the embeddings of the outputs for *different* tasks measures it:
unrelated sentences sit around 0.7-0.9 apart with all-MiniLM-L6-v2, and
near-copies below ~0.15, the default collapse threshold.

Example:
    >>> import numpy as np
    >>> mean_pairwise_distance(np.eye(3))
    1.0
    >>> mean_pairwise_distance(np.array([[1.0, 0.0], [1.0, 0.0]]))
    0.0
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from pydantic import BaseModel, ConfigDict, computed_field

from agentic_loop.memory.embeddings import normalize_rows

__all__ = ["COLLAPSE_THRESHOLD", "DiversityReport", "diversity", "mean_pairwise_distance"]

#: Below this mean pairwise cosine distance the outputs are flagged as collapsed.
COLLAPSE_THRESHOLD = 0.15


class DiversityReport(BaseModel):
    """Mean pairwise cosine distance of a set of outputs, and whether it looks collapsed.

    A pydantic record: ``model_dump`` holds the fields and ``collapsed``.
    """

    model_config = ConfigDict(frozen=True)

    mean_distance: float
    n: int
    threshold: float

    @computed_field  # type: ignore[prop-decorator]
    @property
    def collapsed(self) -> bool:
        """True when the outputs are nearly all the same."""
        return self.n >= 2 and self.mean_distance < self.threshold


def mean_pairwise_distance(vectors: np.ndarray) -> float:
    """Mean cosine distance ``1 - cos`` over all pairs of rows (0.0 for fewer than two rows)."""
    unit = normalize_rows(np.asarray(vectors, dtype=np.float64))
    n = len(unit)
    if n < 2:
        return 0.0
    sims = unit @ unit.T
    upper = sims[np.triu_indices(n, k=1)]
    return round(float(np.mean(1.0 - upper)), 6)


def diversity(outputs: Sequence[str], embedder: Any = None, *,
              threshold: float = COLLAPSE_THRESHOLD) -> DiversityReport:
    """Embed ``outputs`` (the bundled all-MiniLM-L6-v2 unless ``embedder``) and measure them."""
    if embedder is None:
        from agentic_loop.memory import Embedder

        embedder = Embedder()
    texts = [o if o.strip() else "(empty)" for o in outputs]
    vectors = embedder.embed(texts) if texts else np.zeros((0, 1))
    return DiversityReport(mean_distance=mean_pairwise_distance(vectors), n=len(texts),
                           threshold=threshold)
