"""TTRL, and GRPO with a judged reward part: the prompt set, the reward parts, the alarm.

Why (Zuo et al., 2025, "TTRL: Test-Time Reinforcement Learning"): on tasks
with a short answer, the answer most of a prompt's samples agree on is a
label-free reward: GRPO's group is sampled anyway, so majority vote across
it (:func:`~agentic_loop.judges.vote_rewards`) needs no checker and no
reference. ``ttrl`` trains GRPO (``judged_reward="vote"``) on the pool
(``ttrl_prompts.jsonl``), each task rewarded by what it has:

* a task with **no check** (the pool keeps them for a vote,
  :func:`~agentic_loop.distill.loop.pool.lock_pool`): the vote, label-free, as in TTRL;
* a task asking for a **short answer** (an exact ``answer`` check, or
  ``metadata["short_answer"]`` true) is written *without its checks*
  (:func:`label_free`): its answer check is the label TTRL goes without, so
  the vote is its whole reward (the trainer votes only where no check decides);
* **any other task with checks** keeps them: the checks' reward, as in ``grpo``.

The golden gate still measures the result with the checks. The vote is
label-free but still judged, so the agreement alarm gates it like a judge.

``grpo`` with ``train_options["judged_reward"]`` (``"rank"``: the group ranker
scores each group; ``"vote"``: the vote on the pool's tasks without a check)
comes here too, for the alarm alone.

When the alarm refuses, the round trains GRPO on the checks' reward only
(``judged_reward="none"``, the pool's tasks with a check) and records why;
a pool with no such task ends the round instead. The judged part weighs
``judged_reward_weight`` against the checks' part (the trainer's settings,
:mod:`agentic_loop.distill.train.settings`; ``train_options`` sets it).

Example:
    >>> from agentic_loop.tasks.spec import TaskSpec
    >>> has_short_answer(TaskSpec(task="2+2? Answer with the number.", constraints={"answer": 4}))
    True
    >>> has_short_answer(TaskSpec(task="Say hi.", constraints={"exact_words": 1}))
    False
    >>> [s.rubric() is None for s in ttrl_prompts([
    ...     TaskSpec(task="2+2?", constraints={"answer": 4}), TaskSpec(task="Name a colour."),
    ...     TaskSpec(task="Say hi.", constraints={"exact_words": 1})])[0]]
    [True, True, False]
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from agentic_loop.distill.loop.grow import known_answer
from agentic_loop.distill.loop.methods.common import alarm
from agentic_loop.tasks.spec import TaskSpec

__all__ = ["PROMPTS_FILE", "grpo_data", "has_short_answer", "label_free", "ttrl_prompts"]

#: The round's TTRL prompt set (the pool's short-answer tasks), beside ``pool.jsonl``.
PROMPTS_FILE = "ttrl_prompts.jsonl"


def has_short_answer(spec: TaskSpec) -> bool:
    """Whether a task asks for a short answer a vote can count (an exact answer, or marked so)."""
    return bool(spec.metadata.get("short_answer")) or known_answer(spec) is not None


def label_free(spec: TaskSpec) -> TaskSpec:
    """The task without its checks (its labels), marked as asking for a short answer.

    TTRL's reward is the group's vote alone: a task with checks would be rewarded
    by them instead (the trainer votes only where no check decides).

    >>> label_free(TaskSpec(task="2+2?", constraints={"answer": 4}, id="a")).constraints
    {}
    """
    return TaskSpec(task=spec.task, id=spec.id, split=spec.split,
                    metadata={**spec.metadata, "short_answer": True})


def ttrl_prompts(pool: Sequence[TaskSpec]) -> tuple[list[TaskSpec], dict[str, int]]:
    """TTRL's prompt set from the pool (see the module doc) and its counts: ``short_answer``
    (voted, label withheld), ``unchecked`` (voted), ``checked`` (the checks' reward)."""
    prompts: list[TaskSpec] = []
    counts = {"tasks": len(pool), "short_answer": 0, "unchecked": 0, "checked": 0}
    for spec in pool:
        if spec.rubric() is None:
            counts["unchecked"] += 1
            prompts.append(label_free(spec))
        elif has_short_answer(spec):
            counts["short_answer"] += 1
            prompts.append(label_free(spec))
        else:
            counts["checked"] += 1
            prompts.append(spec)
    return prompts, counts


def grpo_data(runner: Any, state: Any, pool: Sequence[TaskSpec]) -> dict[str, Any]:
    """The data stage of ``ttrl`` and of judged ``grpo``: the prompt set and the reward parts."""
    from agentic_loop.distill.loop.pool import checked, write_pool

    s = runner.settings
    wanted = "vote" if s.method == "ttrl" else str(s.train_options["judged_reward"])
    judge_spec = s.judge or s.train_options.get("judge") or str(state.data["model"])
    runner._start(state, "agreement alarm")
    allowed, reason = alarm(runner, state)
    judged: dict[str, Any] = {"method": s.method, "judge": None if wanted == "vote"
                              else judge_spec, "judge_spec": judge_spec,
                              "judged_reward": wanted, "allowed": allowed, "reason": reason}
    source, counts = state.dir / "pool.jsonl", {"sft_rows": 0, "pairs": 0}
    if runner.given is not None:  # given runs: the export's (PII-gated) prompt set
        source = state.dir / "data"
        base = runner.export(state, end_on_empty=True)
        if base.get("empty"):
            return {**base, "judged": judged}
        counts = {k: base[k] for k in ("sft_rows", "pairs", "dropped")}
    prompts = len(pool)
    if runner.given is None and not allowed:  # the checks' reward alone: tasks with a check
        prompts = len(checked(pool))
        if not prompts:
            return _ended(runner, state, judged, "the agreement alarm refused the vote and no "
                          f"pool task has a check to reward instead ({reason}); label more "
                          "runs, or give tasks checks")
    elif runner.given is None and wanted == "vote":
        voted, judged["counts"] = ttrl_prompts(pool) if s.method == "ttrl" else (
            pool, {"tasks": len(pool), "unchecked": len(pool) - len(checked(pool))})
        if not judged["counts"].get("short_answer", 0) + judged["counts"]["unchecked"]:
            return _ended(runner, state, judged, "no pool task has a short answer a vote can "
                          "count (an exact answer check, metadata.short_answer, or no check "
                          f"at all); {s.method} has nothing to vote on: use --method grpo")
        if s.method == "ttrl":
            source = state.dir / PROMPTS_FILE
            write_pool(source, voted)
        prompts = len(voted)
    reward = wanted if allowed else "none"
    # the trainer takes a judge for "rank" only: a refused or voted round drops it
    options: dict[str, Any] = {"judged_reward": reward, "judge": None}
    if reward == "rank":
        options["judge"] = s.judge or s.train_options.get("judge")
    judged["train_method"] = "grpo"
    return {"prompts": prompts, "source": str(source), **counts, "judged": judged,
            "train_method": "grpo", "train_options": options}


def _ended(runner: Any, state: Any, judged: dict[str, Any], why: str) -> dict[str, Any]:
    """The data stage of a round that has nothing to train on: it ends, saying why."""
    return {"prompts": 0, "sft_rows": 0, "pairs": 0, "judged": judged,
            **runner._end(state, f"round {state.number}: {why}")}
