"""Review in LangSmith: picked runs go to an annotation queue, people's labels come back.

Why: where a team already reads its traces in LangSmith, reviewing there is
one click from the trace. When LangSmith is configured (``LANGSMITH_API_KEY``
or ``LANGCHAIN_API_KEY``; the endpoint from ``LANGSMITH_ENDPOINT`` or
``LANGCHAIN_ENDPOINT``), :func:`push_picks` adds each picked run's LangSmith
run to the annotation queue :data:`DEFAULT_QUEUE` (created on first use, with
instructions naming the feedback keys below) through ``langsmith.Client``.

A run can only go there when its trajectory recorded its LangSmith run id
(``metadata["langsmith_run_id"]``, :data:`LANGSMITH_RUN_KEY`). One that did not,
and every pick when LangSmith cannot be reached, goes to the local queue
instead, with a note saying why: a pick is never lost. Every pick is also
recorded in the local queue file (``destination`` says where it went), so
``forget`` and :func:`pull_labels` know it.

:func:`pull_labels` reads the queue's runs' feedback back as
:class:`~agentic_loop.trajectories.ReviewLabel` (``source="langsmith"``):
key ``accept`` (score 1 or value ``"accept"``: accept; score 0 or
``"reject"``: reject), key ``rating`` (a score 1-5), and the feedback's
comments. A label already pulled is not stored again. Each pulled label keeps how its
run was drawn (``drawn``: random or edge case) from the pick's local queue record
(:attr:`~agentic_loop.distill.review.queue.QueueItem.drawn`): a LangSmith annotation
queue item carries no metadata of its own, and the reviewer need not see it (knowing
a run is an edge case would colour the label).

Example:
    >>> from agentic_loop.trajectories import Trajectory
    >>> run = Trajectory(architecture="a", model_id="m", task="t",
    ...                  metadata={"langsmith_run_id": "0b7ac6a2-5d4c-4d2e-9a59-2f0d7a1c3e11"})
    >>> langsmith_run_id(run), langsmith_run_id(run.model_copy(update={"metadata": {}}))
    ('0b7ac6a2-5d4c-4d2e-9a59-2f0d7a1c3e11', None)
    >>> langsmith_configured({"LANGSMITH_API_KEY": "lsv2_..."}), langsmith_configured({})
    (True, False)
"""

from __future__ import annotations

import os
import uuid
import warnings
from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import BaseModel, Field

from agentic_loop.distill.review.queue import QueueItem, ReviewQueue, Verdict
from agentic_loop.distill.review.sampling import ReviewPick
from agentic_loop.errors import StorageError
from agentic_loop.trajectories import ReviewLabel, Trajectory

__all__ = ["DEFAULT_QUEUE", "LANGSMITH_RUN_KEY", "RATING_KEY", "VERDICT_KEY",
           "LangSmithQueueError", "PushResult", "langsmith_client", "langsmith_configured",
           "langsmith_run_id", "pull_labels", "push_picks"]

#: The trajectory metadata key holding the run's LangSmith run id (the graph run).
LANGSMITH_RUN_KEY = "langsmith_run_id"
#: The annotation queue picks go to.
DEFAULT_QUEUE = "agentic-loop review"
#: Feedback keys read back as a label.
VERDICT_KEY = "accept"
RATING_KEY = "rating"
INSTRUCTIONS = (f"Read the task and the final answer. Give feedback '{VERDICT_KEY}' (1: the "
                "answer may train the model, 0: it must not), optionally a "
                f"'{RATING_KEY}' from 1 (bad) to 5 (excellent), and a comment on what is wrong.")
_KEY_ENV = ("LANGSMITH_API_KEY", "LANGCHAIN_API_KEY")


class LangSmithQueueError(StorageError):
    """A LangSmith annotation queue could not be read."""


class PushResult(BaseModel):
    """Where the picks went: ``sent`` to the annotation queue, ``local`` (with a note why)."""

    queue_name: str
    queue_id: str | None = None
    sent: list[QueueItem] = Field(default_factory=list)
    local: list[QueueItem] = Field(default_factory=list)
    #: picks already in the queue (sampled before): neither sent nor queued again
    already: int = 0


def langsmith_configured(env: Mapping[str, str] | None = None) -> bool:
    """Whether a LangSmith API key is set (``LANGSMITH_API_KEY`` or ``LANGCHAIN_API_KEY``)."""
    env = os.environ if env is None else env
    return any((env.get(name) or "").strip() for name in _KEY_ENV)


def langsmith_client() -> Any:
    """A ``langsmith.Client`` from the environment (key and endpoint); tracing not batched."""
    from langsmith import Client

    return Client(auto_batch_tracing=False)


def langsmith_run_id(run: Trajectory) -> str | None:
    """The LangSmith run id the trajectory recorded, when it is a valid UUID; else None."""
    raw = run.metadata.get(LANGSMITH_RUN_KEY)
    try:
        return str(uuid.UUID(str(raw))) if raw else None
    except ValueError:
        return None


def _queue_id(client: Any, name: str) -> str:
    """The id of the annotation queue ``name``, created (with instructions) if missing."""
    for queue in client.list_annotation_queues(name=name, limit=1):
        return str(queue.id)
    created = client.create_annotation_queue(
        name=name, description="Runs agentic-loop picked for review (edge cases first).",
        rubric_instructions=INSTRUCTIONS)
    return str(created.id)


def push_picks(client: Any, queue: ReviewQueue, picks: Sequence[ReviewPick],
               runs: Mapping[str, Trajectory], *, queue_name: str = DEFAULT_QUEUE) -> PushResult:
    """Send the picks whose run recorded a LangSmith run id to the annotation queue
    ``queue_name``, the others to the local queue (see the module docstring)."""
    queued = {i.trajectory_id for i in queue.items()}
    new = [p for p in dict((p.trajectory_id, p) for p in picks).values()
           if p.trajectory_id not in queued]
    result = PushResult(queue_name=queue_name, already=len(picks) - len(new))

    def local(pick: ReviewPick, note: str) -> QueueItem:
        return QueueItem(trajectory_id=pick.trajectory_id, reasons=list(pick.reasons),
                         score=pick.score, note=note)

    ids = {p.trajectory_id: langsmith_run_id(runs[p.trajectory_id]) if p.trajectory_id in runs
           else None for p in new}
    remote = [p for p in new if ids[p.trajectory_id]]
    items = [local(p, f"no LangSmith run id recorded (metadata[{LANGSMITH_RUN_KEY!r}]): "
                      "review it here") for p in new if not ids[p.trajectory_id]]
    if remote:
        try:
            result.queue_id = _queue_id(client, queue_name)
            with warnings.catch_warnings():  # deprecated for a newer resource API, still served
                warnings.simplefilter("ignore", DeprecationWarning)
                client.add_runs_to_annotation_queue(
                    result.queue_id, run_ids=[ids[p.trajectory_id] for p in remote])
        except Exception as exc:  # noqa: BLE001 - an unreachable LangSmith must not lose picks
            why = f"LangSmith unreachable ({type(exc).__name__}: {str(exc)[:120]}): review it here"
            items += [local(p, why) for p in remote]
        else:
            sent = [QueueItem(trajectory_id=p.trajectory_id, reasons=list(p.reasons),
                              score=p.score, destination="langsmith", queue_id=result.queue_id,
                              langsmith_run_id=ids[p.trajectory_id]) for p in remote]
            items += sent
    added = queue.enqueue(items)
    result.sent = [i for i in added if i.destination == "langsmith"]
    result.local = [i for i in added if i.destination == "local"]
    return result


def _verdict(feedback: Any) -> Verdict | None:
    value = feedback.value if feedback.score is None else feedback.score
    if isinstance(value, str):
        word = value.strip().lower()
        return "accept" if word == "accept" else "reject" if word == "reject" else None
    if isinstance(value, (bool, int, float)):
        return "accept" if float(value) >= 0.5 else "reject"
    return None


def _rating(feedback: Any) -> int | None:
    value = feedback.score if feedback.score is not None else feedback.value
    if isinstance(value, (int, float)) and not isinstance(value, bool) and 1 <= value <= 5:
        return round(value)
    return None


def _reviewer(feedback: Any) -> str | None:
    source = feedback.feedback_source
    if source is None:
        return None
    name = source.user_name or source.user_id
    return str(name) if name else None


def pull_labels(client: Any, queue: ReviewQueue) -> list[ReviewLabel]:
    """Read the feedback people gave the queue's LangSmith runs back as labels, store the
    new ones in the log's ``reviews.jsonl`` and return them."""
    sent = {i.langsmith_run_id: i for i in queue.items() if i.langsmith_run_id}
    if not sent:
        return []
    try:
        found = list(client.list_feedback(run_ids=list(sent), feedback_key=[VERDICT_KEY,
                                                                             RATING_KEY]))
    except Exception as exc:  # noqa: BLE001 - any client or network failure, named
        raise LangSmithQueueError(f"could not read feedback from LangSmith ({type(exc).__name__}"
                                  f": {exc}); check LANGSMITH_ENDPOINT and the API key") from exc
    by_run: dict[str, list[Any]] = defaultdict(list)
    for feedback in found:
        if feedback.run_id is not None and str(feedback.run_id) in sent:
            by_run[str(feedback.run_id)].append(feedback)
    latest = {label.trajectory_id: label for label in queue.log.reviews()
              if label.source == "langsmith"}
    new = []
    for run_id, items in by_run.items():
        items.sort(key=lambda f: f.modified_at or f.created_at)
        verdicts = [v for f in items if f.key == VERDICT_KEY and (v := _verdict(f))]
        ratings = [r for f in items if f.key == RATING_KEY and (r := _rating(f)) is not None]
        comments = list(dict.fromkeys(f.comment.strip() for f in items
                                      if (f.comment or "").strip()))
        if not (verdicts or ratings or comments):
            continue
        label = ReviewLabel(trajectory_id=sent[run_id].trajectory_id,
                            verdict=verdicts[-1] if verdicts else None,
                            rating=ratings[-1] if ratings else None,
                            comment="\n".join(comments)[:4000] or None,
                            reviewer=next((who for f in reversed(items)
                                           if (who := _reviewer(f))), None),
                            source="langsmith", drawn=sent[run_id].drawn)
        before = latest.get(label.trajectory_id)
        if before is not None and (before.verdict, before.rating, before.comment) == (
                label.verdict, label.rating, label.comment):
            continue
        queue.log.record_review(label)
        new.append(label)
    return new
