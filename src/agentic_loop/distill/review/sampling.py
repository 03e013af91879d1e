"""Which runs a person reviews: a small fraction (default 2%), edge cases first.

Why a sample and why edge cases: people are the scarcest judge, and a random
2% spends most of their time on runs the checks already settle. The runs worth
a person's minute are those where the package's own verdict is least sure:

``near_threshold``
    the final score lies within ``margin`` of the acceptance threshold (a
    point either way flips accepted and rejected);
``checks_pass_judge_fails``
    every check held but the judge said no to every judged feature;
``judge_score_gap``
    the judge's own overall score and the composed score differ by at least
    ``gap`` points;
``rejected_judged_high``
    a rejected run the judge rated at least ``high``;
``guard_flags``
    a reward-hacking guard fired on a round (:mod:`agentic_loop.judges.guards`);
``thumbs_down``
    the user said no.

Edge cases are always picked, even past the fraction (the report says so);
at least ``random_share`` (half) of the budget is still drawn at random beside them,
and the rest of the budget (``round(fraction * eligible runs)``) is filled with the
runs whose id hashes lowest, recorded as ``sampled``. The hash walks every eligible
run, edge cases included (one it meets gets ``sampled`` added, and the walk goes
on), so the runs it draws are a uniform sample: the stratum the agreement alarm
decides on, since edge cases alone have a narrow score range. The hash is
:func:`agentic_loop.hashing.unit_hash` (SHA-256 of the id, the canary's bucket
function: a run's draw does not depend on the order runs are read in nor on the
host; ``hash_unit`` is its name here).
Runs without a final output have nothing to review and are not eligible.

Example:
    >>> from agentic_loop.trajectories import Round, Trajectory
    >>> runs = [Trajectory(id=f"r{i}", architecture="a", model_id="m", task="t",
    ...                    final_output="x", final_score=9.5, accepted=True)
    ...         for i in range(200)]
    >>> runs[7] = runs[7].model_copy(update={"final_score": 8.2})   # near 8.0
    >>> runs[9] = runs[9].model_copy(update={"feedback": "down"})
    >>> picked = sample_for_review(runs, fraction=0.02)
    >>> len(picked.picks), picked.reasons()
    (4, {'near_threshold': 1, 'sampled': 2, 'thumbs_down': 1})
    >>> [p.trajectory_id for p in picked.picks if p.edge]
    ['r7', 'r9']
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from agentic_loop.errors import ConfigError
from agentic_loop.hashing import unit_hash as hash_unit
from agentic_loop.judges.rubric import saved_llm_features
from agentic_loop.trajectories import Trajectory

__all__ = ["EDGE_REASONS", "ReviewPick", "ReviewSample", "edge_reasons", "hash_unit",
           "sample_for_review"]

#: Every reason a run is an edge case, in the order they are checked.
EDGE_REASONS = ("near_threshold", "checks_pass_judge_fails", "judge_score_gap",
                "rejected_judged_high", "guard_flags", "thumbs_down")


class ReviewPick(BaseModel):
    """One run picked for review, and why (``sampled``: by the hash, not an edge case)."""

    model_config = ConfigDict(frozen=True)

    trajectory_id: str
    reasons: list[str]
    score: float | None = None

    @property
    def edge(self) -> bool:
        """Whether the run was picked as an edge case (not only by the hash)."""
        return any(r != "sampled" for r in self.reasons)


class ReviewSample(BaseModel):
    """What one draw picked, out of how many eligible runs, and a note when edge cases
    went past the requested fraction."""

    picks: list[ReviewPick] = Field(default_factory=list)
    eligible: int = 0
    fraction: float = 0.02
    budget: int = 0
    note: str = ""

    def reasons(self) -> dict[str, int]:
        """How many picks gave each reason (a pick may give several)."""
        return dict(sorted(Counter(r for p in self.picks for r in p.reasons).items()))


def _judged_names(rubric: Mapping[str, Any] | None) -> set[str]:
    """The features of a saved rubric that a judge model answers (no check, no constraint)."""
    return {str(f["name"]) for f in saved_llm_features(rubric) if "name" in f}


def edge_reasons(run: Trajectory, *, threshold: float = 8.0, margin: float = 0.5,
                 gap: float = 4.0, high: int = 8) -> list[str]:
    """Why ``run`` is an edge case (empty: it is not); see the module docstring.

    >>> from agentic_loop.trajectories import Round
    >>> rubric = {"features": [{"name": "helpful", "kind": "bool"},
    ...                        {"name": "short", "constraint": "max_words", "value": 9}]}
    >>> run = Trajectory(architecture="a", model_id="m", task="t", rubric=rubric,
    ...                  final_output="x", final_score=5.0, rounds=[Round(
    ...                      iteration=0, draft="x", score=5.0, passed=True, overall_score=9,
    ...                      features={"helpful": False, "short": True})])
    >>> edge_reasons(run)
    ['checks_pass_judge_fails', 'judge_score_gap', 'rejected_judged_high']
    """
    reasons = []
    if run.final_score is not None and abs(run.final_score - threshold) <= margin:
        reasons.append("near_threshold")
    final = Trajectory.output_round(run)
    if final is not None:
        judged = _judged_names(run.rubric) & set(final.features)
        if final.passed and judged and not any(final.features[n] for n in judged):
            reasons.append("checks_pass_judge_fails")
        if (final.overall_score is not None and final.score is not None
                and abs(final.overall_score - final.score) >= gap):
            reasons.append("judge_score_gap")
        if not run.accepted and (final.overall_score or 0) >= high:
            reasons.append("rejected_judged_high")
    if any(r.guards for r in run.rounds):
        reasons.append("guard_flags")
    if run.feedback == "down":
        reasons.append("thumbs_down")
    return reasons


def sample_for_review(runs: Iterable[Trajectory], *, fraction: float = 0.02,
                      threshold: float = 8.0, margin: float = 0.5, gap: float = 4.0,
                      high: int = 8, salt: str = "", random_share: float = 0.5
                      ) -> ReviewSample:
    """Pick runs for people to review: every edge case, then the lowest hashes up to
    ``round(fraction * eligible)`` picks (see the module docstring).

    ``threshold`` is the acceptance score on the 0-10 scale (the architectures'
    ``target_score``); ``salt`` draws a different, equally stable, sample.
    ``random_share`` of the budget is always drawn by the hash, however many edge
    cases there are: the agreement alarm decides on those runs alone, and edge cases
    multiply exactly when a judge drifts.
    """
    if not 0.0 <= fraction <= 1.0:
        raise ConfigError(f"fraction={fraction!r}: pass a share of runs in [0, 1], e.g. 0.02")
    if not 0.0 <= random_share <= 1.0:
        raise ConfigError(f"random_share={random_share!r}: pass a share of the budget in "
                          "[0, 1], e.g. 0.5")
    if not 0.0 <= threshold <= 10.0 or margin < 0 or gap <= 0:
        raise ConfigError(f"threshold={threshold!r}, margin={margin!r}, gap={gap!r}: the "
                          "threshold is a 0-10 score, the margin at least 0, the gap above 0")
    eligible = [t for t in runs if t.final_output is not None]
    budget = round(fraction * len(eligible))
    edges: dict[str, ReviewPick] = {}
    for t in eligible:
        why = edge_reasons(t, threshold=threshold, margin=margin, gap=gap, high=high)
        if why:
            edges[t.id] = ReviewPick(trajectory_id=t.id, reasons=why, score=t.final_score)
    # The hash draws from every eligible run, edge cases included, so the runs it draws are
    # a uniform sample (the agreement alarm's unbiased stratum); an edge case it meets is
    # marked sampled too and the draw goes on until ``room`` other runs are taken.
    room = max(budget - len(edges), math.ceil(random_share * budget))
    fill, taken = list[ReviewPick](), set[str]()
    for t in sorted(eligible, key=lambda t: (hash_unit(t.id, salt), t.id)):
        if len(fill) >= room:
            break
        if t.id in edges:
            edge = edges[t.id]
            if "sampled" not in edge.reasons:
                edges[t.id] = edge.model_copy(update={"reasons": [*edge.reasons, "sampled"]})
        elif t.id not in taken:
            taken.add(t.id)
            fill.append(ReviewPick(trajectory_id=t.id, reasons=["sampled"], score=t.final_score))
    note = ""
    if len(edges) > budget:
        note = (f"{len(edges)} edge cases exceed the {fraction:.1%} budget of {budget} runs: "
                f"all are queued, and {len(fill)} runs drawn at random beside them (the "
                f"random share, {random_share:.0%} of the budget, that the agreement alarm "
                "decides on)")
    return ReviewSample(picks=_in_order(eligible, [*edges.values(), *fill]),
                        eligible=len(eligible), fraction=fraction, budget=budget, note=note)


def _in_order(runs: Sequence[Trajectory], picks: list[ReviewPick]) -> list[ReviewPick]:
    """``picks`` in the order their runs were read (edge cases and samples mixed)."""
    by_id = {p.trajectory_id: p for p in picks}
    return [by_id[i] for i in dict.fromkeys(t.id for t in runs) if i in by_id]
