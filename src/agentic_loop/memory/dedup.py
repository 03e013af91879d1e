"""Near-duplicate check: is a new record's output too close to one stored or just accepted?

Why apart from the collection: the rule has two halves that are easy to
get subtly wrong together. A candidate is compared with the stored live
records through the output index, and with the records accepted earlier in
the same batch (not in any index yet) directly; another version of the
candidate's own id never counts as its duplicate (that is a replacement).

Example:
    >>> import numpy as np
    >>> from agentic_loop.memory.collection.index import VectorIndex
    >>> from agentic_loop.memory.records import ArchiveEntry
    >>> from agentic_loop.memory.collection.replay import LogReplay
    >>> stored = ArchiveEntry(id="s", task="t", output="stored")
    >>> replay = LogReplay(); replay.apply([stored])
    >>> outputs = VectorIndex(dim=2); outputs.add(np.array([[1, 0]], dtype=np.float32))
    >>> batch = np.array([[0.99, 0.141], [0, 1.0]], dtype=np.float32)   # unit rows
    >>> new = ArchiveEntry(task="t", output="almost stored")
    >>> match = find_duplicate(outputs, replay, batch, 0, new, [], [], threshold=0.95)
    >>> match[0].id, round(match[1], 2)
    ('s', 0.99)
    >>> find_duplicate(outputs, replay, batch, 1, new, [], [], threshold=0.95) is None
    True
"""

from __future__ import annotations

from typing import TypeVar

import numpy as np

from agentic_loop.memory.collection.index import VectorIndex
from agentic_loop.memory.collection.replay import LogReplay
from agentic_loop.memory.ranking import ranked
from agentic_loop.memory.records import MemoryRecord

__all__ = ["find_duplicate"]

R = TypeVar("R", bound=MemoryRecord)


def find_duplicate(
    outputs: VectorIndex,
    replay: LogReplay[R],
    out_vecs: np.ndarray,
    i: int,
    record: R,
    accepted: list[R],
    accepted_pos: list[int],
    *,
    threshold: float,
) -> tuple[R, float] | None:
    """The closest record to ``record`` at cosine ``threshold`` or above, with its similarity.

    ``outputs`` indexes the dedup texts of ``replay.rows``; ``out_vecs[i]`` is
    ``record``'s vector; ``accepted`` are the batch's records accepted so
    far, their vectors at ``out_vecs[accepted_pos]``.
    """
    vector = out_vecs[i]
    rows = replay.rows
    best: tuple[R, float] | None = None
    hits = ranked(
        outputs,
        vector,
        1,
        lambda row: replay.is_live(row) and rows[row].id != record.id,
        threshold,
    )
    if hits:
        best = (rows[hits[0][0]], float(hits[0][1]))
    if accepted_pos:
        sims = out_vecs[accepted_pos] @ vector
        j = int(np.argmax(sims))
        closer = best is None or sims[j] > best[1]
        if sims[j] >= threshold and accepted[j].id != record.id and closer:
            best = (accepted[j], float(sims[j]))
    return best
