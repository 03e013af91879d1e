"""People's labels in the export: a rejected run never trains and becomes a DPO negative.

Why: a person who reviewed a run (``agentic-loop review``; the label joins
the run on read as ``Trajectory.review``) saw something the checks and the
judge did not. So in the next export:

* every sample of a run a person **rejected** is out of the SFT set and can
  never be a chosen response, even when the run was accepted (rule
  ``rejected_by_review`` in the manifest's ``dropped``); an archive entry
  made from that run inherits the label (:func:`inherit_reviews`);
* the rejected run's final output becomes the rejected side of a DPO pair
  (source ``"review"``) against the best trainable final of another run of
  the same task, when one exists (:func:`review_candidates`); the person's
  verdict is the preference, so no score gap is asked of it;
* an **accepted** label rescues nothing: a sample that failed a check or
  raised a guard flag still never trains (counted as ``accepted_not_rescued``);
* a rating stays on the run (``review.rating``) for the monitor's agreement.

The manifest's ``review`` field counts what the labels did (:func:`review_counts`).

Example:
    >>> from agentic_loop.distill.data.samples import Sample
    >>> def final(run, reward, review=None):
    ...     return Sample("Say hi.", f"answer of {run}", reward, "final", run, None, "m",
    ...                   passed=True, review=review)
    >>> pairs = review_candidates([final("a", 0.9), final("b", 0.95, "reject"), final("c", 0.8)])
    >>> [(c.trajectory_id, r.trajectory_id) for c, r in pairs]
    [('a', 'b')]
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from agentic_loop.distill.data.episode_rows import is_sound
from agentic_loop.distill.data.samples import Sample
from agentic_loop.trajectories import Trajectory

__all__ = ["inherit_reviews", "review_candidates", "review_counts", "sample_candidates"]


def inherit_reviews(entries: Sequence[Trajectory], runs: Sequence[Trajectory]) -> list[Trajectory]:
    """Archive entries carrying the label of the run that produced them, when it has one.

    >>> from agentic_loop.trajectories import ReviewLabel
    >>> run = Trajectory(id="r1", architecture="a", model_id="m", task="t",
    ...                  review=ReviewLabel(trajectory_id="r1", verdict="reject"))
    >>> entry = Trajectory(architecture="archive", model_id="m", task="t",
    ...                    metadata={"trajectory_id": "r1"})
    >>> inherit_reviews([entry], [run])[0].review.verdict
    'reject'
    """
    labels = {t.id: t.review for t in runs if t.review is not None}
    return [e.model_copy(update={"review": labels[origin]})
            if e.review is None and (origin := e.metadata.get("trajectory_id")) in labels else e
            for e in entries]


def _groups(samples: Sequence[Sample]) -> dict[str, list[Sample]]:
    """Final outputs by task."""
    finals: dict[str, list[Sample]] = defaultdict(list)
    for s in samples:
        if s.source == "final":
            finals[s.key].append(s)
    return finals


def sample_candidates(samples: Sequence[Sample]) -> list[tuple[Sample, Sample]]:
    """Per task run more than once: the best final output against the worst (chosen first)."""
    pairs = []
    for group in _groups(samples).values():
        if len({s.trajectory_id for s in group}) < 2:
            continue
        chosen = max(group, key=lambda s: (s.trainable and is_sound(s), s.reward))
        others = [s for s in group if s.trajectory_id != chosen.trajectory_id]
        pairs.append((chosen, min(others, key=lambda s: s.reward)))
    return pairs


def review_candidates(samples: Sequence[Sample]) -> list[tuple[Sample, Sample]]:
    """Per final output a person rejected: the best trainable final of another run of the same
    task against it (chosen first); none when the task has no such run."""
    pairs = []
    for group in _groups(samples).values():
        good = [s for s in group if s.trainable and is_sound(s)]
        for rejected in (s for s in group if s.review == "reject"):
            others = [s for s in good if s.trajectory_id != rejected.trajectory_id]
            if others:
                pairs.append((max(others, key=lambda s: s.reward), rejected))
    return pairs


def review_counts(runs: Sequence[Trajectory], samples: Sequence[Sample],
                  pair_sources: Sequence[tuple[str, str]],
                  drops: dict[str, dict[str, int]]) -> dict[str, Any]:
    """The manifest's ``review`` field: the labels of the exported runs and what they did.

    ``pair_sources`` holds each written pair's ``(source, rejected trajectory id)``.

    >>> from agentic_loop.trajectories import ReviewLabel
    >>> run = Trajectory(id="r1", architecture="a", model_id="m", task="t",
    ...                  review=ReviewLabel(trajectory_id="r1", verdict="reject", rating=2))
    >>> review_counts([run], [], [], {"sft rows": {"rejected_by_review": 2}})["rejected"]
    1
    """
    labelled = [t for t in runs if t.review is not None]
    ratings = [t.review.rating for t in labelled if t.review and t.review.rating is not None]
    rejected = {t.id for t in labelled if t.review and t.review.verdict == "reject"}
    paired = {rid for source, rid in pair_sources if source == "review"}
    accepted = {t.id for t in labelled if t.review and t.review.verdict == "accept"}
    failed = {s.trajectory_id for s in samples if s.trajectory_id in accepted
              and s.source in ("final", "archive") and not s.trainable}

    def dropped(unit: str, rule: str) -> int:
        return drops.get(unit, {}).get(rule, 0)

    return {"labelled_runs": len(labelled), "accepted": len(accepted), "rejected": len(rejected),
            "rated": len(ratings),
            "mean_rating": round(sum(ratings) / len(ratings), 3) if ratings else None,
            "rejected_by_review": {"sft": dropped("sft rows", "rejected_by_review"),
                                   "chosen": dropped("pairs", "chosen_rejected_by_review")},
            "review_pairs": sum(source == "review" for source, _ in pair_sources),
            "rejected_not_paired": len(rejected - paired),
            "accepted_not_rescued": len(failed)}
