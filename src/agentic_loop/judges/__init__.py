"""Judges: deterministic multi-feature scores and programmatic checks.

A single LLM "score 1-10" comes back flat. Here the LLM commits only to a few
independent features through a typed schema, Python computes everything it
can (word counts, forbidden words, JSON validity, exact answers, unit tests
in a sandbox), and Python composes the deciding score, feature by feature.

Example:
    >>> from agentic_loop.judges import Rubric
    >>> rubric = Rubric.for_constraints(word_count=(3, 6), exclude_words=["we", "our"])
    >>> ev = rubric.evaluate("Write a tagline for a bookshop.", "Stories waiting on every shelf")
    >>> ev.score, ev.passed
    (10.0, True)

Your own verifier: a check function saved by reference (``"mypkg.checks:valid_invoice"``
or a name given to :func:`register_check`) travels with a saved rubric and is resolved
when the rubric is read back (:mod:`.check_refs`).

The rubric a task is scored by when none is given is :func:`rubric_for_task`
(:mod:`.task_rubric`): its stated constraints as checks, plus two judged features.

An agent's answer is judged with its episode (``Critic.critique(..., episode=ep)``):
the constraint keywords in :data:`EPISODE_KEYWORDS` (``tool_called``, ``max_steps``,
``verified_with``, ...; :mod:`.checks.episode_checks`) check what the agent did, a task
saying "use the calculator" or "at most 5 steps" states them (:func:`tool_demands`), and
the ``tool_claim`` / ``skipped_verification`` guards flag an answer that claims a tool
result no tool returned, or an episode that skipped a demanded tool.

Judging a group rather than one answer: :class:`GroupRanker` (:mod:`.group_rank`) scores
n candidates of one task relative to each other under the structured-output grammar,
shown in two orders against position bias; :func:`majority_vote` (:mod:`.majority_vote`)
is the label-free signal for short answers with no checker.
"""

from agentic_loop.judges.check_refs import (
    CheckReferenceError,
    check_reference,
    register_check,
    registered_checks,
    registrations,
    resolve_check,
    restore_registrations,
    unregister_check,
)
from agentic_loop.judges.checks.constraint_features import (
    CONSTRAINT_KEYWORDS,
    constraint_feature,
    constraints_to_text,
)
from agentic_loop.judges.checks.episode_checks import EPISODE_KEYWORDS
from agentic_loop.judges.checks.lexicon import CLICHES
from agentic_loop.judges.checks.text_measures import extract_code
from agentic_loop.judges.checks.tool_phrases import tool_claims, tool_demands, tool_matches
from agentic_loop.judges.critic import Critic, CriticError, Critique
from agentic_loop.judges.evaluation import Evaluation, FailedCheck, FeatureResult
from agentic_loop.judges.features import CheckResult, Feature
from agentic_loop.judges.group_rank import GroupRanker, GroupRanking
from agentic_loop.judges.guards import GuardReport, inspect_output
from agentic_loop.judges.judge_calls import JudgeCallError, JudgeError
from agentic_loop.judges.llm_judge import Judgement, LLMJudge
from agentic_loop.judges.majority_vote import Vote, majority_vote, short_answer, vote_rewards
from agentic_loop.judges.ready_rubrics import (
    code_rubric,
    copywriting_rubric,
    instruction_rubric,
    math_rubric,
)
from agentic_loop.judges.rubric import Rubric
from agentic_loop.judges.sandbox.run import (
    SandboxResult,
    SandboxUnavailableError,
    run_python_tests,
    sandbox_layers,
)
from agentic_loop.judges.spread import SpreadReport, spread_report
from agentic_loop.judges.task_rubric import TASK_CHECK_WEIGHT, TaskWithRubric, rubric_for_task

__all__ = [
    "CLICHES",
    "CONSTRAINT_KEYWORDS",
    "EPISODE_KEYWORDS",
    "CheckReferenceError",
    "CheckResult",
    "Critic",
    "CriticError",
    "Critique",
    "Evaluation",
    "FailedCheck",
    "Feature",
    "FeatureResult",
    "GroupRanker",
    "GroupRanking",
    "JudgeError",
    "JudgeCallError",
    "Judgement",
    "LLMJudge",
    "Rubric",
    "GuardReport",
    "SandboxResult",
    "SandboxUnavailableError",
    "SpreadReport",
    "TASK_CHECK_WEIGHT",
    "TaskWithRubric",
    "Vote",
    "code_rubric",
    "constraint_feature",
    "constraints_to_text",
    "copywriting_rubric",
    "extract_code",
    "instruction_rubric",
    "majority_vote",
    "math_rubric",
    "register_check",
    "registered_checks",
    "registrations",
    "restore_registrations",
    "resolve_check",
    "rubric_for_task",
    "check_reference",
    "unregister_check",
    "vote_rewards",
    "inspect_output",
    "run_python_tests",
    "sandbox_layers",
    "short_answer",
    "spread_report",
    "tool_claims",
    "tool_demands",
    "tool_matches",
]
