"""People in the loop: a small, edge-cases-first sample of runs for review, and labels back.

Why: the checks and the judge decide what trains; people check them on a
sample. :func:`sample_for_review` picks a fraction of the runs (default 2%),
edge cases first (scores near the threshold, judge and checks disagreeing,
guard flags, thumbs down), each with its reasons; :class:`ReviewQueue` keeps
them beside the trajectory log (``review_queue.jsonl``) and records labels
(``reviews.jsonl``: accept/reject, a 1-5 rating, a comment); when LangSmith is
configured :func:`push_picks` sends them to an annotation queue and
:func:`pull_labels` reads people's feedback back. ``agentic-loop review`` is the
terminal's way in. Labels become data in the next export: a rejected run
never trains and becomes a DPO negative (:mod:`agentic_loop.distill.data`).

Modules: :mod:`.sampling`, :mod:`.queue`, :mod:`.langsmith_queue`.

Example:
    >>> from agentic_loop.trajectories import Trajectory
    >>> runs = [Trajectory(id=f"r{i}", architecture="a", model_id="m", task="t",
    ...                    final_output="x", final_score=9.5) for i in range(100)]
    >>> len(sample_for_review(runs, fraction=0.05).picks)
    5
"""

from agentic_loop.distill.review.langsmith_queue import (
    DEFAULT_QUEUE,
    LANGSMITH_RUN_KEY,
    LangSmithQueueError,
    PushResult,
    langsmith_client,
    langsmith_configured,
    langsmith_run_id,
    pull_labels,
    push_picks,
)
from agentic_loop.distill.review.queue import QUEUE_FILE, QueueItem, ReviewQueue
from agentic_loop.distill.review.sampling import (
    EDGE_REASONS,
    ReviewPick,
    ReviewSample,
    edge_reasons,
    hash_unit,
    sample_for_review,
)

__all__ = [
    "DEFAULT_QUEUE",
    "EDGE_REASONS",
    "LANGSMITH_RUN_KEY",
    "QUEUE_FILE",
    "LangSmithQueueError",
    "PushResult",
    "QueueItem",
    "ReviewPick",
    "ReviewQueue",
    "ReviewSample",
    "edge_reasons",
    "hash_unit",
    "langsmith_client",
    "langsmith_configured",
    "langsmith_run_id",
    "pull_labels",
    "push_picks",
    "sample_for_review",
]
