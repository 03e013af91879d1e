"""Scored samples: every (prompt, response, reward) a trajectory offers to the datasets.

A run of a critique-refine loop leaves one draft per round, each with a
rubric score; its final output is one of them (or, for archive entries, the
only one). Distillation reads them all as :class:`Sample` objects with a
reward in ``[0, 1]``, the scale every threshold of the export uses:

``"rubric"`` (default)
    ``score / 10``, the rubric's own verdict.
``"composite"``
    :func:`agentic_loop.distill.data.reward.composite_reward`: the final output also
    gets the user's thumbs up/down and the run's latency; intermediate
    drafts, which no user saw, get the rubric part only.

The prompt of every sample is the task itself (the user message), not the
refine prompt the model saw in later rounds: a trained model must produce
the good answer from the task alone.

Example:
    >>> from agentic_loop.trajectories import Round, Trajectory
    >>> t = Trajectory(architecture="reflection", model_id="m", task="Say hi.",
    ...                rounds=[Round(iteration=0, draft="yo", score=4.0),
    ...                        Round(iteration=1, draft="Hi!", score=9.0)],
    ...                final_output="Hi!", final_score=9.0, accepted=True)
    >>> [(s.response, s.reward, s.source) for s in trajectory_samples(t)]
    [('yo', 0.4, 'round'), ('Hi!', 0.9, 'final')]
    >>> task_key("  Say   HI. ")
    'say hi.'
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Literal

from agentic_loop.distill.data.reward import composite_reward
from agentic_loop.errors import ConfigError
from agentic_loop.trajectories import Trajectory

__all__ = [
    "RewardKind",
    "Sample",
    "SampleSource",
    "invalid_scores",
    "task_key",
    "trajectory_samples",
]

RewardKind = Literal["rubric", "composite"]
SampleSource = Literal["round", "final", "archive"]

_SPACES = re.compile(r"\s+")


def task_key(text: str) -> str:
    """The grouping key of a prompt: case-folded, whitespace collapsed (same task, same key)."""
    return _SPACES.sub(" ", text).strip().casefold()


@dataclass(frozen=True)
class Sample:
    """One candidate response to a task, with its reward in ``[0, 1]`` and where it came from."""

    prompt: str
    response: str
    reward: float
    source: SampleSource
    trajectory_id: str
    iteration: int | None
    model_id: str

    @property
    def key(self) -> str:
        """The task grouping key (see :func:`task_key`)."""
        return task_key(self.prompt)


def invalid_scores(trajectory: Trajectory) -> list[str]:
    """Where a trajectory holds a score outside the rubric's 0-10 range (empty when all are valid).

    >>> t = Trajectory(architecture="a", model_id="m", task="t", final_output="x", final_score=12.0)
    >>> invalid_scores(t)
    ['final_score=12.0']
    """
    found = [
        f"rounds[{i}].score={r.score!r}"
        for i, r in enumerate(trajectory.rounds)
        if r.score is not None and not _valid(r.score)
    ]
    if trajectory.final_score is not None and not _valid(trajectory.final_score):
        found.append(f"final_score={trajectory.final_score!r}")
    return found


def _valid(score: float) -> bool:
    return math.isfinite(score) and 0.0 <= score <= 10.0


def trajectory_samples(trajectory: Trajectory, reward: RewardKind = "rubric") -> list[Sample]:
    """The scored, non-empty drafts of a run, in round order; the final one is marked ``"final"``.

    A final output that matches no round (an archive entry, or a log that
    kept only the final) becomes a sample of its own. Archive entries (runs
    whose ``architecture`` is ``"archive"``) give ``source="archive"``.
    Scores must be valid (see :func:`invalid_scores`).
    """
    if reward not in ("rubric", "composite"):
        raise ConfigError(f"reward must be 'rubric' or 'composite', got {reward!r}")
    final = trajectory.final_output if trajectory.final_score is not None else None
    final_round = None
    if final is not None:
        matches = [i for i, r in enumerate(trajectory.rounds)
                   if r.draft == final and r.score is not None]
        final_round = matches[-1] if matches else None
    final_source: SampleSource = "archive" if trajectory.architecture == "archive" else "final"

    def make(text: str, score: float, iteration: int | None, is_final: bool) -> Sample:
        if is_final and reward == "composite":
            value = composite_reward(score, feedback=trajectory.feedback,
                                     latency_s=trajectory.latency_s)
        else:
            value = composite_reward(score)
        return Sample(
            prompt=trajectory.task,
            response=text,
            reward=value,
            source=final_source if is_final else "round",
            trajectory_id=trajectory.id,
            iteration=iteration,
            model_id=trajectory.model_id,
        )

    samples = [
        make(r.draft, r.score, r.iteration, i == final_round)
        for i, r in enumerate(trajectory.rounds)
        if r.score is not None and r.draft.strip()
    ]
    if final is not None and final_round is None and final.strip():
        assert trajectory.final_score is not None
        samples.append(make(final, trajectory.final_score, None, True))
    return samples
