"""The memory policy, once: what a search returns and what an add accepts, for every backend.

Why one module: memory lives in two backends, the local collection
(:class:`~agentic_loop.memory.collection.record_collection.RecordCollection`:
a log and FAISS indexes) and any LangGraph store
(:class:`~agentic_loop.memory.store.policy.StoreMemory`: the store's own
vector index), and a run must behave the same on both. So the policy steps
live here and each backend only supplies primitives (its nearest rows, the
vectors of some rows, the stored version of an id):

* :func:`check_search` and :func:`coerce_records` validate what a caller
  passes (the same errors from both backends);
* :func:`pool_size` and :func:`select` rank: the ``k`` most similar, none
  under ``min_score``, re-ranked with MMR (:mod:`~agentic_loop.memory.mmr`)
  from a wider pool when ``mmr`` is given;
* :func:`closest` and :func:`admit` are the accept rule: a record whose
  output is within the threshold of a stored one, or of one accepted
  earlier in the same batch, is a ``"duplicate"``; another version of its
  own id never is (that is a replacement, which keeps the first
  ``created_at``);
* :func:`check_embedder` is the embedder guard: vectors of two embedders
  are never compared.

Example:
    >>> import numpy as np
    >>> from agentic_loop.memory.records import ArchiveEntry
    >>> records = coerce_records(ArchiveEntry, "archive", [{"task": "t", "output": "a"},
    ...     {"task": "t", "output": "a!"}, {"task": "t", "output": "b"}])
    >>> outputs = np.array([[1, 0], [0.99, 0.141], [0, 1]], dtype=np.float32)   # unit rows
    >>> results, accepted = admit(records, previous=lambda i, r: None, threshold=0.95,
    ...                           out_vecs=outputs, stored_near=lambda i, r: [])
    >>> [r.status for r in results], accepted
    (['added', 'duplicate', 'added'], [0, 2])
    >>> select([("x", 0.9), ("y", 0.4)], 2, min_score=0.5, mmr=None, vectors=None)
    [('x', 0.9)]
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, TypeVar

import numpy as np
from pydantic import ValidationError

from agentic_loop.clock import utc_now
from agentic_loop.errors import ConfigError
from agentic_loop.memory.errors import EmbedderMismatchError
from agentic_loop.memory.mmr import mmr_select
from agentic_loop.memory.records import AddResult, MemoryRecord

__all__ = [
    "admit",
    "check_embedder",
    "check_search",
    "check_search_args",
    "closest",
    "coerce_records",
    "pool_size",
    "select",
]

R = TypeVar("R", bound=MemoryRecord)
T = TypeVar("T")

MMR_POOL = 20
"""The least number of candidates MMR re-ranks (``4 * k`` when larger)."""


# -- what a caller passes -------------------------------------------------------------


def check_search(query: object, k: int, min_score: float | None, mmr: float | None) -> None:
    """Raise :class:`~agentic_loop.errors.ConfigError` naming the first bad search argument.

    >>> check_search("  ", 3, None, None)
    Traceback (most recent call last):
    ...
    agentic_loop.errors.ConfigError: search() needs a non-empty query string, got '  '; ...
    """
    if not isinstance(query, str) or not query.strip():
        raise ConfigError(
            f"search() needs a non-empty query string, got {query!r:.80}; pass the task text"
        )
    check_search_args(k, min_score, mmr)


def check_search_args(k: int, min_score: float | None, mmr: float | None) -> None:
    """:func:`check_search` less the query (a search by vector has none).

    >>> check_search_args(0, None, None)
    Traceback (most recent call last):
    ...
    agentic_loop.errors.ConfigError: k=0: k must be a positive integer (how many hits to return)
    """
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


def coerce_records(record_type: type[R], kind: str, records: Iterable[Any]) -> list[R]:
    """Every item of ``records`` as a ``record_type``; a bad one raises before anything is
    written, naming its position."""
    out: list[R] = []
    for position, item in enumerate(records):
        if isinstance(item, record_type):
            out.append(item)
        elif isinstance(item, Mapping):
            try:
                out.append(record_type.model_validate(item))
            except ValidationError as exc:
                raise ConfigError(f"{kind} record {position} is invalid: {exc}") from exc
        else:
            raise ConfigError(
                f"{kind} record {position} is a {type(item).__name__}; pass "
                f"{record_type.__name__} objects or dicts with its fields"
            )
    return out


# -- search ---------------------------------------------------------------------------


def pool_size(k: int, mmr: float | None) -> int:
    """How many nearest candidates a backend fetches: ``k``, or a wider pool for MMR."""
    return k if mmr is None else max(4 * k, MMR_POOL)


def select(
    hits: Sequence[tuple[T, float]],
    k: int,
    *,
    min_score: float | None,
    mmr: float | None,
    vectors: Callable[[list[T]], tuple[np.ndarray, np.ndarray]] | None,
) -> list[tuple[T, float]]:
    """The ``k`` hits to return from a backend's nearest ``hits`` (best first, at most
    :func:`pool_size`): none under ``min_score``, re-ranked by MMR when ``mmr`` is given.

    ``vectors(items)`` gives the query's unit vector and the items' task
    vectors (rows); it is called only for MMR, so a backend that must embed
    to get them pays nothing otherwise.
    """
    kept = [hit for hit in hits if min_score is None or hit[1] >= min_score]
    if mmr is not None and len(kept) > 1:
        if vectors is None:
            raise ConfigError("select(mmr=...) needs vectors: pass the backend's vector lookup")
        query, rows = vectors([item for item, _ in kept])
        kept = [kept[i] for i in mmr_select(query, rows, k, float(mmr))]
    return kept[:k]


# -- add: the accept rule -------------------------------------------------------------


def closest(
    record_id: str, candidates: Iterable[tuple[R, float]], threshold: float
) -> tuple[R, float] | None:
    """The candidate most similar to the record ``record_id`` at ``threshold`` or above (the
    first on a tie), with its similarity; other versions of ``record_id`` do not count."""
    best: tuple[R, float] | None = None
    for candidate, sim in candidates:
        if candidate.id != record_id and (best is None or sim > best[1]):
            best = (candidate, sim)
    return best if best is not None and best[1] >= threshold else None


def admit(
    records: Sequence[R],
    *,
    previous: Callable[[int, R], R | None],
    threshold: float | None,
    out_vecs: np.ndarray | None,
    stored_near: Callable[[int, R], Iterable[tuple[R, float]]],
) -> tuple[list[AddResult[R]], list[int]]:
    """Decide every record of a write: one :class:`AddResult` each, and the accepted positions.

    ``previous(i, record)`` is the stored version of ``record.id`` (or
    ``None``); a replacement keeps its ``created_at``. With a ``threshold``
    and ``out_vecs`` (the records' unit dedup vectors, one row each), the
    gate compares record ``i`` with ``stored_near(i, record)`` (stored
    candidates with their output similarity) and with the records accepted
    before it in the batch.
    """
    results: list[AddResult[R]] = []
    accepted: list[R] = []
    positions: list[int] = []
    pending: dict[str, R] = {}
    now = utc_now()
    for i, record in enumerate(records):
        before = pending.get(record.id) or previous(i, record)
        if before is not None:
            record = record.model_copy(update={"created_at": before.created_at, "updated_at": now})
        if threshold is not None and out_vecs is not None:
            batch: list[tuple[R, float]] = []
            if positions:
                sims = out_vecs[positions] @ out_vecs[i]
                batch = list(zip(accepted, (float(s) for s in sims)))
            duplicate = closest(record.id, [*stored_near(i, record), *batch], threshold)
            if duplicate is not None:
                results.append(AddResult("duplicate", record, *duplicate))
                continue
        results.append(AddResult("added" if before is None else "replaced", record))
        accepted.append(record)
        positions.append(i)
        pending[record.id] = record
    return results, positions


# -- the embedder guard ---------------------------------------------------------------


def check_embedder(
    recorded: tuple[object, object],
    used: tuple[object, object],
    *,
    mismatch: Callable[[], str],
) -> None:
    """Raise :class:`~agentic_loop.memory.errors.EmbedderMismatchError` (with the backend's
    ``mismatch()`` message, which names where and the fix) when ``used`` (embedder name,
    dimension) is not the ``recorded`` one; a dimension of ``None`` is not compared (not yet
    known, and asking may load a model).

    >>> check_embedder(("hashing-v1-64", 64), ("hashing-v1-64", None), mismatch=str)
    >>> check_embedder(("a", 64), ("b", 64), mismatch=lambda: "built with 'a', opened with 'b'")
    Traceback (most recent call last):
    ...
    agentic_loop.memory.errors.EmbedderMismatchError: built with 'a', opened with 'b'
    """
    name_differs = recorded[0] != used[0]
    dims = (recorded[1], used[1])
    if name_differs or (None not in dims and dims[0] != dims[1]):
        raise EmbedderMismatchError(mismatch())
