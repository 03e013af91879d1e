"""Round methods that rest on judges: Self-Rewarding, SPIN, TTRL and Constitutional AI.

Why a subpackage: ``sft``, ``dpo``, ``sft+dpo`` and ``grpo`` train on what
the checks decided; these four make a round's data with a *judge* (or a
reference, or a vote) and then train with one of those four trainers:

=================  ===========  ==================================================
method             trains       data
=================  ===========  ==================================================
``self-rewarding`` ``dpo``      the judge ranks the policy's own K samples of a
                                task (:class:`~agentic_loop.judges.GroupRanker`):
                                top against bottom, added to the checks' pairs
``spin``           ``dpo``      a task's reference answer against the policy's own
                                answer (tasks with no reference are skipped)
``ttrl``           ``grpo``     majority vote across each prompt's group is the
                                reward (tasks with a short answer; label-free)
``constitutional`` ``sft+dpo``  the judge critiques a sample against written
                                principles, the policy revises; a revision that
                                satisfies more principles is an SFT row and the
                                chosen side of a pair against the original
=================  ===========  ==================================================

Judged data trains only while people agree with the judge: before a round
trains on judged rewards (self-rewarding, constitutional, ttrl, and
``grpo`` with a ``judged_reward`` in its train options) the agreement alarm
(:func:`~agentic_loop.distill.release.judge_agreement.judged_rewards_allowed`)
is asked; when it refuses, the round trains on the checks' data only and its
record says so and why. Every round of these methods records which judge
and method made its data (the data stage's ``judged``).

Example:
    >>> train_method("self-rewarding"), train_method("ttrl"), train_method("sft")
    ('dpo', 'grpo', 'sft')
    >>> sorted(JUDGED)
    ['constitutional', 'self-rewarding', 'ttrl']
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from agentic_loop.distill.loop.settings import JUDGED, LOOP_METHODS, train_method

__all__ = ["JUDGED", "LOOP_METHODS", "handles", "judged_grpo", "method_data", "train_method"]


def judged_grpo(method: str, train_options: Mapping[str, Any]) -> bool:
    """Whether a ``grpo`` round's reward has a judged part (``judged_reward`` not ``"none"``).

    >>> judged_grpo("grpo", {"judged_reward": "rank"}), judged_grpo("grpo", {})
    (True, False)
    """
    return method == "grpo" and train_options.get("judged_reward", "none") not in ("none", None)


def handles(method: str, train_options: Mapping[str, Any]) -> bool:
    """Whether this subpackage makes the round's data (a loop method, or judged GRPO)."""
    return method in LOOP_METHODS or judged_grpo(method, train_options)


def method_data(runner: Any, state: Any, pool: Any) -> dict[str, Any]:
    """The data stage of a round whose method this subpackage handles (see the module doc).

    ``runner`` is the round's :class:`~agentic_loop.distill.loop.round.RoundRunner`,
    ``state`` its :class:`~agentic_loop.distill.loop.state.RoundState`. Returns the
    stage's result: the counts every data stage records, ``judged`` (method, judge,
    whether the alarm allowed judged data and why, the method's counts), and for the
    train stage ``train_method``, ``train_options`` and (GRPO) ``source``.
    """
    method = runner.settings.method
    if train_method(method) == "grpo":
        from agentic_loop.distill.loop.methods.ttrl import grpo_data

        return grpo_data(runner, state, pool)
    from agentic_loop.distill.loop.methods.pairs import pair_data

    return pair_data(runner, state, pool)
