"""Self-Rewarding: the judge ranks the policy's own samples of a task into DPO pairs.

Why (Yuan et al., 2024, "Self-Rewarding Language Models"): the checks
tell a passing answer from a failing one, but not two passing answers
apart; a judge that sees a task's K samples together
(:class:`~agentic_loop.judges.GroupRanker`, scores 0-10 relative to the
group, under the grammar, in two presentation orders) can. The pairs are
:func:`~agentic_loop.distill.data.ranked_pairs.ranked_pairs`' (the export's
row format, agent episodes included): a task gives one when

* its top-ranked sample may train (it passed every check, no guard flag):
  the judge never makes a failing answer the chosen side;
* the top and bottom scores differ by at least ``min_rank_gap`` (0-10 scale);
* every presentation order put them the same way round (position bias
  measured and countered: a preference that flips with the order is noise).

Rankings that failed (the judge stayed invalid after its retries) are
counted, never raised. The judge is ``ImproveSettings.judge``, by default the
round's current model: the policy judging itself, as in the paper. Its
criteria are overall quality: the pool's rubrics are locked to their checks.

Example (a task's distinct samples, in pool order):
    >>> from agentic_loop.distill.data.samples import Sample
    >>> from agentic_loop.tasks.spec import TaskSpec
    >>> s = lambda text: Sample(prompt="q", response=text, reward=1.0, source="final",
    ...                         trajectory_id=text, iteration=0, model_id="m")
    >>> pool = [TaskSpec(task="q", id="t1"), TaskSpec(task="r", id="t2")]
    >>> [(spec.id, [x.response for x in group])
    ...  for spec, group in sample_groups([("t1", s("a")), ("t1", s("a ")), ("t1", s("b"))], pool)]
    [('t1', ['a', 'b']), ('t2', [])]
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from agentic_loop.distill.loop.methods.common import Judge, MethodRows
from agentic_loop.tasks.spec import TaskSpec

__all__ = ["sample_groups", "self_rewarding_rows"]


def sample_groups(samples: Sequence[tuple[str, Any]], pool: Sequence[TaskSpec]
                  ) -> list[tuple[TaskSpec, list[Any]]]:
    """The pool's tasks (in pool order) with their samples, each distinct answer once."""
    by_id: dict[str, list[Any]] = {str(spec.id): [] for spec in pool}
    for task_id, sample in samples:
        group = by_id.get(task_id)
        if group is not None and all(o.response.strip() != sample.response.strip()
                                     for o in group):
            group.append(sample)
    return [(spec, by_id[str(spec.id)]) for spec in pool]


def self_rewarding_rows(runner: Any, state: Any, groups: Sequence[tuple[TaskSpec, list[Any]]],
                        judge: Judge) -> MethodRows:
    """The judge's pairs over the round's grown samples (see the module doc)."""
    from agentic_loop.distill.data.curate import CurationLog
    from agentic_loop.distill.data.ranked_pairs import ranked_pairs
    from agentic_loop.judges import GroupRanker

    s = runner.settings
    ranked = [group for _, group in groups if len(group) >= 2]
    rows = MethodRows()
    log = CurationLog()
    if ranked:
        runner._start(state, f"self-rewarding: {judge.name} ranks {len(ranked)} tasks")
        ranker = GroupRanker(judge.llm, orders=2, seed=state.number,
                             max_chars=max(400, s.max_tokens * 8))
        found = ranked_pairs(ranked, ranker, min_gap=s.min_rank_gap / 10, min_consistency=0.0,
                             log=log)
        rows.pairs = [{**row.model_dump(mode="json"),
                       "metadata": {**row.metadata.model_dump(mode="json"),
                                    "method": "self-rewarding"}} for row in found]
    rows.counts = {"tasks": len(groups), "ranked": len(ranked), "pairs": len(rows.pairs),
                   **log.drops.get("ranked pairs", {})}
    return rows
