"""TTRL, and GRPO with a judged reward part: the prompt set, the reward parts, the alarm.

Why (Zuo et al., 2025, "TTRL: Test-Time Reinforcement Learning"): on tasks
with a short answer, the answer most of a prompt's samples agree on is a
label-free reward: GRPO's group is sampled anyway, so majority vote across
it (:func:`~agentic_loop.judges.vote_rewards`) needs no checker and no
reference. ``ttrl`` trains GRPO (``judged_reward="vote"``) on the pool's tasks
that ask for a short answer (an exact ``answer`` check, or
``metadata["short_answer"]`` true), written *without their checks*
(:func:`label_free`, ``ttrl_prompts.jsonl``): the trainer votes only where no
check decides, so the vote is the whole reward, as in TTRL. The golden gate
still measures the result with the checks. The vote is label-free but still
judged, so the agreement alarm gates it like a judge.

``grpo`` with ``train_options["judged_reward"]`` (``"rank"``: the group ranker
scores each group; ``"vote"``) comes here too, for the alarm alone.

When the alarm refuses, the round trains GRPO on the checks' reward only
(``judged_reward="none"``, the whole pool) and records why. The judged part
weighs ``judged_reward_weight`` against the checks' part (the trainer's
settings, :mod:`agentic_loop.distill.train.settings`; ``train_options`` sets it).

Example:
    >>> from agentic_loop.tasks.spec import TaskSpec
    >>> has_short_answer(TaskSpec(task="2+2? Answer with the number.", constraints={"answer": 4}))
    True
    >>> has_short_answer(TaskSpec(task="Say hi.", constraints={"exact_words": 1}))
    False
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from agentic_loop.distill.loop.grow import known_answer
from agentic_loop.distill.loop.methods.common import alarm
from agentic_loop.tasks.spec import TaskSpec

__all__ = ["PROMPTS_FILE", "grpo_data", "has_short_answer", "label_free"]

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


def grpo_data(runner: Any, state: Any, pool: Sequence[TaskSpec]) -> dict[str, Any]:
    """The data stage of ``ttrl`` and of judged ``grpo``: the prompt set and the reward parts."""
    from agentic_loop.distill.loop.pool import write_pool

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
    if allowed and s.method == "ttrl" and runner.given is None:
        short = [spec for spec in pool if has_short_answer(spec)]
        judged["counts"] = {"tasks": len(pool), "short_answer": len(short),
                            "skipped": len(pool) - len(short)}
        if not short:
            return {"prompts": 0, "sft_rows": 0, "pairs": 0, "judged": judged,
                    **runner._end(state, f"round {state.number}: no pool task asks for a short "
                                         "answer a vote can count (an exact answer check, or "
                                         "metadata.short_answer); ttrl has nothing to train on")}
        source = state.dir / PROMPTS_FILE
        write_pool(source, [label_free(spec) for spec in short])
        prompts = len(short)
    reward = wanted if allowed else "none"
    # the trainer takes a judge for "rank" only: a refused or voted round drops it
    options: dict[str, Any] = {"judged_reward": reward, "judge": None}
    if reward == "rank":
        options["judge"] = s.judge or s.train_options.get("judge")
    judged["train_method"] = "grpo"
    return {"prompts": prompts, "source": str(source), **counts, "judged": judged,
            "train_method": "grpo", "train_options": options}
