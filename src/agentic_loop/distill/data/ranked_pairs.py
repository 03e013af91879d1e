"""DPO pairs from a judge's group ranking (Self-Rewarding): the best of a group against the worst.

Why: the checks' pairs (:func:`~agentic_loop.distill.data.datasets.preference_pairs`)
need a score gap the checks can see; samples the checks *tie* (every one
passes, or the task has no check) give no pair at all, though a reader sees
one answer is better. A :class:`~agentic_loop.judges.GroupRanker` (a judge
model, ideally not the policy) scores a group of answers to one task
against each other on the rubric's judged features, in two presentation
orders; a pair is kept only when the judge is sure of it:

* chosen = the highest-scored answer that may train (it passed every check,
  raised no guard flag, no person rejected its run, its episode is sound:
  the checks still rule);
* rejected = the lowest-scored other answer;
* their judge score gap, on ``[0, 1]`` (score / 10), is at least ``min_gap``;
* **every** presentation order put chosen above rejected, and the ranking's
  ``consistency`` (pairwise agreement across orders) is at least
  ``min_consistency`` (a ranking with one order has none: kept only with
  ``min_consistency=0``).

A failed ranking (``GroupRanking.error``) gives no pair and is counted.
Rows are the export's own :class:`~agentic_loop.distill.data.datasets.PairRow`
(TRL's conversational preference format, built by the same row builder as
the checks' pairs, agent episodes included), with
:class:`RankedPairMeta`: ``source`` says where the group came from
(``"best_of_n"``: one round's draft and alternatives; ``"samples"``: the
finals of several runs of a task), and ``judge``, the two judge scores and
the consistency say the judge chose it. Every drop is counted in ``log``.

Example (a scripted judge that prefers the longer answer):
    >>> from agentic_loop.distill.data.samples import Sample
    >>> from agentic_loop.judges import GroupRanker
    >>> from agentic_loop.judges.group_rank import candidates_shown
    >>> from agentic_loop.testing import ScriptedChatModel
    >>> def longer(schema, messages):
    ...     shown = candidates_shown(messages[-1].content)
    ...     return {f"candidate_{k}": min(10, len(v)) for k, v in shown.items()}
    >>> ranker = GroupRanker(ScriptedChatModel(default_structured=longer, model_id="judge-1"))
    >>> group = [Sample(prompt="Greet me.", response=text, reward=1.0, source=source,
    ...                 trajectory_id="t1", iteration=0, model_id="m", passed=True)
    ...          for text, source in (("Hi", "round"), ("Good morning!", "alternative"))]
    >>> row = ranked_pairs([group], ranker)[0]
    >>> row.chosen[0].content, row.rejected[0].content
    ('Good morning!', 'Hi')
    >>> row.metadata.judge, row.metadata.gap, row.metadata.source, row.metadata.consistency
    ('judge-1', 0.8, 'best_of_n', 1.0)
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from agentic_loop.distill.data.curate import CurationLog
from agentic_loop.distill.data.datasets import PairMeta, PairRow, _Pair
from agentic_loop.distill.data.episode_rows import episode_meta_of, is_sound, side_key
from agentic_loop.distill.data.reward import composite_reward
from agentic_loop.distill.data.samples import Sample, trajectory_samples
from agentic_loop.errors import ConfigError
from agentic_loop.trajectories import Trajectory

if TYPE_CHECKING:
    from agentic_loop.judges import GroupRanker, GroupRanking

__all__ = ["RankedPairMeta", "RankedPairRow", "ranked_pairs", "round_groups", "task_groups"]

_UNIT = "ranked pairs"


class RankedPairMeta(PairMeta):
    """:class:`PairMeta` with the judge's say: ``gap`` is the judge score gap on ``[0, 1]``."""

    #: the judge model that ranked the group
    judge: str
    #: the two sides' 0-10 judge scores (relative to their group)
    chosen_judge_score: float
    rejected_judge_score: float
    #: agreement across the presentation orders (None: one order)
    consistency: float | None
    #: how many answers the judge compared
    group_size: int


class RankedPairRow(PairRow):
    """One DPO example chosen by a judge (TRL's conversational preference format)."""

    metadata: RankedPairMeta


def round_groups(trajectories: Sequence[Trajectory]) -> list[list[Sample]]:
    """Per best-of-n round: its draft and every alternative, as one group to rank.

    The export keeps an alternative only when its score is its whole score;
    a ranking needs no score, so here every alternative with text joins its
    round (its ``reward`` is then the checks' part alone, ``passed`` and
    flags as recorded), with the round draft's prompt.

    >>> from agentic_loop.trajectories import Candidate, Round
    >>> run = Trajectory(architecture="reflection", model_id="m", task="Say hi.", rounds=[
    ...     Round(iteration=0, draft="Hi!", score=9.0, alternatives=[
    ...         Candidate(draft="Hello.", score=6.0, passed=True)])],
    ...     final_output="Hi!", final_score=9.0)
    >>> [(s.response, s.source) for s in round_groups([run])[0]]
    [('Hi!', 'final'), ('Hello.', 'alternative')]
    """
    groups: list[list[Sample]] = []
    for run in trajectories:
        samples = trajectory_samples(run)
        by_round: dict[int | None, list[Sample]] = defaultdict(list)
        for s in samples:
            if s.source != "archive":
                by_round[s.iteration].append(s)
        for r in run.rounds:
            group = by_round.get(r.iteration, [])
            if not r.alternatives or not group:
                continue
            draft = group[0]
            have = {s.response for s in group}
            for c in r.alternatives:
                if c.draft.strip() and c.cut_from is None and c.draft not in have:
                    have.add(c.draft)
                    group.append(Sample(
                        prompt=draft.prompt, response=c.draft,
                        reward=composite_reward(c.score) if c.score is not None else 0.0,
                        source="alternative", trajectory_id=run.id, iteration=r.iteration,
                        model_id=run.model_id, chat=draft.chat, passed=c.passed,
                        flags=tuple(sorted(c.guards)), episode=c.episode))
            if len(group) > 1:
                groups.append(group)
    return groups


def task_groups(samples: Sequence[Sample]) -> list[list[Sample]]:
    """Per task run more than once: the final outputs of its runs, as one group to rank.

    >>> finals = [Sample(prompt="Say hi.", response=r, reward=0.9, source="final",
    ...                  trajectory_id=t, iteration=0, model_id="m") for r, t in
    ...           (("Hi", "a"), ("Hey", "b"), ("Hi", "c"))]
    >>> [[s.response for s in g] for g in task_groups(finals)]
    [['Hi', 'Hey']]
    """
    by_task: dict[str, list[Sample]] = defaultdict(list)
    for s in samples:
        if s.source == "final" and s.response not in {o.response for o in by_task[s.key]}:
            by_task[s.key].append(s)
    return [g for g in by_task.values() if len({s.trajectory_id for s in g}) > 1]


@dataclass(frozen=True)
class _Ranked:
    group: list[Sample]
    ranking: GroupRanking


def _source(group: Sequence[Sample]) -> str:
    return "best_of_n" if any(s.source == "alternative" for s in group) else "samples"


def _rank(groups: Sequence[list[Sample]], ranker: GroupRanker) -> list[_Ranked]:
    """Each group ranked: batched for plain answers, one call set per group with episodes."""
    plain = [g for g in groups if all(s.episode is None for s in g)]
    agents = [g for g in groups if any(s.episode is not None for s in g)]
    done = [_Ranked(g, r) for g, r in zip(plain, ranker.rank_many(
        [(g[0].prompt, [s.response for s in g]) for g in plain]), strict=True)]
    done += [_Ranked(g, ranker.rank(g[0].prompt, [s.response for s in g],
                                    episodes=[s.episode for s in g])) for g in agents]
    return done


def _pick(item: _Ranked, min_gap: float, min_consistency: float,
          log: CurationLog) -> tuple[_Pair, float, float] | None:
    """The group's (chosen, rejected) pair and their scores, or None (the drop counted)."""
    scores, ranking = item.ranking.scores, item.ranking
    if not ranking.ok or scores is None:
        log.count_drop(_UNIT, "ranking_failed")
        return None
    order = sorted(range(len(scores)), key=lambda i: (-scores[i], i))
    chosen = next((i for i in order if item.group[i].trainable
                   and is_sound(item.group[i])), None)
    if chosen is None:
        log.count_drop(_UNIT, "no_trainable_answer")
        return None
    rejected = max((i for i in range(len(scores)) if i != chosen),
                   key=lambda i: (-scores[i], i))
    if pair_gap(scores[chosen], scores[rejected]) < min_gap:
        log.count_drop(_UNIT, "judge_gap_below_min")
        return None
    agree = all(o[chosen] > o[rejected] for o in ranking.per_order)
    consistency = ranking.consistency
    if not agree or (consistency if consistency is not None else 0.0) < min_consistency:
        log.count_drop(_UNIT, "orders_disagree")
        return None
    pair = _Pair(item.group[chosen], item.group[rejected], "best_of_n")
    return pair, scores[chosen], scores[rejected]


def ranked_pairs(groups: Sequence[Sequence[Sample]], ranker: GroupRanker, *,
                 min_gap: float = 0.2, min_consistency: float = 0.75,
                 log: CurationLog | None = None) -> list[RankedPairRow]:
    """The DPO pairs a judge's ranking of each group gives (see the module doc).

    Args:
        groups: answers to one task each (:func:`round_groups`, :func:`task_groups`).
        ranker: the judge (its rubric's judged features are the criteria).
        min_gap: the least judge score gap, on ``[0, 1]``, between chosen and rejected.
        min_consistency: the least agreement across presentation orders.
        log: where every drop is counted (unit ``"ranked pairs"``).
    """
    from agentic_loop.judges.group_rank import MAX_GROUP

    if not 0.0 < min_gap <= 1.0:
        raise ConfigError(f"min_gap is a judge score gap in (0, 1], got {min_gap!r}")
    if not 0.0 <= min_consistency <= 1.0:
        raise ConfigError(f"min_consistency is an agreement rate in [0, 1], got "
                          f"{min_consistency!r}")
    log = log if log is not None else CurationLog()
    fit = [list(g) for g in groups if 2 <= len(g) <= MAX_GROUP]
    log.count_drop(_UNIT, "group_too_large", sum(len(g) > MAX_GROUP for g in groups))
    rows: list[RankedPairRow] = []
    for item in _rank(fit, ranker):
        picked = _pick(item, min_gap, min_consistency, log)
        if picked is None:
            continue
        pair, high, low = picked
        if side_key(pair.split[1]) == side_key(pair.split[2]):
            log.count_drop(_UNIT, "identical_sides")
            continue
        if pair.problem is not None:
            log.count_drop(_UNIT, pair.problem)
            continue
        c, r = pair.chosen, pair.rejected
        rows.append(RankedPairRow(
            prompt=pair.split[0], chosen=pair.split[1], rejected=pair.split[2], tools=pair.tools,
            metadata=RankedPairMeta(
                task=c.prompt, source=_source(item.group), gap=pair_gap(high, low),
                chosen_reward=c.reward, rejected_reward=r.reward,
                chosen_trajectory_id=c.trajectory_id, rejected_trajectory_id=r.trajectory_id,
                chosen_iteration=c.iteration, rejected_iteration=r.iteration,
                chosen_passed=c.passed, rejected_passed=r.passed,
                chosen_episode=episode_meta_of(c), rejected_episode=episode_meta_of(r),
                shared_steps=pair.split[3], judge=item.ranking.judge,
                chosen_judge_score=high, rejected_judge_score=low,
                consistency=item.ranking.consistency, group_size=len(item.group))))
    log.record("judge-ranked pairs", _UNIT, len(groups), len(rows),
               f"judge gap >= {min_gap:g}, every order agrees, consistency >= "
               f"{min_consistency:g}")
    return rows


def pair_gap(high: float, low: float) -> float:
    """Two 0-10 judge scores' gap on ``[0, 1]``.

    >>> pair_gap(9.0, 1.0)
    0.8
    """
    return round((high - low) / 10, 6)
