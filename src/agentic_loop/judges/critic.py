"""The critique node: the LLM commits to a few features, Python decides the score.

A :class:`Critic` builds a pydantic schema holding exactly the rubric's LLM
features (a ``bool`` per yes/no feature, a bounded ``int`` per count
feature), plus ``critique`` (one short paragraph of advice) and
``overall_score`` (the model's own 1-10 grade, kept *only* to compare with
the composite in :func:`~agentic_loop.judges.spread.spread_report`; it never
enters the score). Check features are computed in Python and are never
asked of the model; their measured facts are shown to it so the critique
text can build on them.

With no LLM features and ``critique_text=False`` the critic makes no model
call at all: the evaluation is pure Python. With ``checks_first=True`` it
makes none either when a check fails: the failed check already decides the
output, so its LLM features count as not satisfied and the feedback comes
from the failed checks (Reflexion's evaluate step works this way).

When the answer came from an agent, pass its
:class:`~agentic_loop.episodes.Episode` (``episode=`` to :meth:`Critic.critique`,
``episodes=`` to :meth:`Critic.batch`): the checks and guards of that item run
inside :func:`~agentic_loop.episodes.judging_episode`, so episode checks
(``tool_called``, ``max_steps``, ...) and the tool-claim guards read what the
agent really did. The context is set in the thread that runs the checks.

Example:
    >>> from agentic_loop.testing import ScriptedChatModel
    >>> from agentic_loop.judges.features import Feature
    >>> from agentic_loop.judges.rubric import CheckResults, Rubric
    >>> rubric = Rubric.for_constraints(exact_words=3,
    ...                                 features=[Feature("vivid", "Uses concrete imagery.")])
    >>> fake = ScriptedChatModel(structured={"RubricJudgement": [
    ...     {"vivid": True, "critique": "Name the smell of paper.", "overall_score": 9}]})
    >>> c = Critic(fake, rubric).critique("Tagline for a bookshop, 3 words.", "Books for you")
    >>> c.score, c.values, c.overall_score, c.attempts
    (10.0, {'exact_words': 3, 'vivid': True}, 9, 1)
    >>> sorted(Critic(fake, rubric).schema.model_fields)
    ['critique', 'overall_score', 'vivid']
    >>> quick = Critic(fake, rubric, checks_first=True).critique("3 words.", "Too many words here")
    >>> quick.values, quick.attempts, len(fake.calls)   # a check failed: no model call
    ({'exact_words': 4, 'vivid': False}, 0, 1)
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from contextlib import nullcontext
from typing import Any, Literal, overload

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import BaseMessage, HumanMessage, SystemMessage
from pydantic import BaseModel, ConfigDict, Field, create_model

from agentic_loop.episodes import Episode, judging_episode
from agentic_loop.errors import ConfigError
from agentic_loop.judges.evaluation import Evaluation
from agentic_loop.judges.features import CheckResult, FeatureValue
from agentic_loop.judges.judge_calls import (
    JudgeCallError,
    ainvoke_structured,
    batch_structured,
    invoke_structured,
    judge_retry,
)
from agentic_loop.judges.rubric import CheckResults, Rubric
from agentic_loop.models.retry import RetryPolicy

__all__ = ["CRITIQUE_MAX_CHARS", "Critic", "CriticError", "Critique"]

#: Longest critique text the schema accepts (keeps small models from rambling).
CRITIQUE_MAX_CHARS = 300

_SYSTEM = (
    "You are a strict, literal reviewer. Judge only what the OUTPUT actually contains, "
    "against the TASK. A yes/no field is true only if the output clearly satisfies it; "
    "when in doubt, answer false. A count field is the exact number of items asked for."
)


class CriticError(JudgeCallError):
    """The critic's model gave no valid judgement within its retries."""


class Critique(BaseModel):
    """A critic's verdict: the evaluation (deciding score) plus the model's own words."""

    model_config = ConfigDict(frozen=True)

    evaluation: Evaluation
    critique: str | None = None
    overall_score: int | None = None
    attempts: int = 0

    @property
    def score(self) -> float:
        """The composite 0-10 score (never the model's ``overall_score``)."""
        return self.evaluation.score

    @property
    def values(self) -> dict[str, FeatureValue]:
        """Feature name -> value."""
        return self.evaluation.values

    @property
    def passed(self) -> bool:
        """True when every check feature holds."""
        return self.evaluation.passed

    @property
    def feedback(self) -> str:
        """What a refine step should fix: failed checks, weak LLM features, the critique."""
        parts = [self.evaluation.feedback] if self.evaluation.feedback else []
        weak = [f for f in self.evaluation.features if f.source == "llm" and f.credit < 1.0]
        if weak:
            parts.append("Improve these qualities:\n" + "\n".join(f"- {f.hint}" for f in weak))
        if self.critique and self.critique.strip():
            parts.append("Reviewer's advice: " + self.critique.strip())
        return "\n".join(parts)


class Critic:
    """Judge outputs with a rubric: LLM features through a typed schema, checks in Python.

    Args:
        llm: any LangChain chat model supporting ``with_structured_output``.
        rubric: the features and weights that decide the score.
        max_retries: extra attempts after an invalid answer or a model error;
            then :class:`CriticError` is raised.
        critique_text: ask for a short critique paragraph. When False and the
            rubric has no LLM features, no model call is made at all.
        checks_first: run the checks first and ask the model only when they
            all pass; a failed check decides the output without a model call.
        retry: the :class:`~agentic_loop.models.retry.RetryPolicy` of the
            model calls (overrides ``max_retries``); by default
            :data:`~agentic_loop.models.retry.DEFAULT_RETRY` with
            ``1 + max_retries`` attempts.
    """

    #: The schema's class name (what ``ScriptedChatModel(structured=...)`` keys on).
    SCHEMA_NAME = "RubricJudgement"

    def __init__(self, llm: BaseChatModel, rubric: Rubric, *, max_retries: int = 2,
                 critique_text: bool = True, checks_first: bool = False,
                 retry: RetryPolicy | None = None) -> None:
        if not isinstance(rubric, Rubric):
            raise ConfigError(f"Critic needs a Rubric, got {type(rubric).__name__}; "
                              "build one with Rubric([...]) or Rubric.for_constraints(...)")
        self.retry = judge_retry(max_retries, retry)
        self.llm = llm
        self.rubric = rubric
        self.max_retries = self.retry.max_attempts - 1
        self.critique_text = critique_text
        self.checks_first = checks_first
        self.schema: type[BaseModel] | None = (
            self._build_schema() if rubric.llm_features or critique_text else None
        )

    def _build_schema(self) -> type[BaseModel]:
        fields: dict[str, Any] = {}
        for f in self.rubric.llm_features:
            if f.kind == "bool":
                fields[f.name] = (bool, Field(description=f.description))
            else:
                fields[f.name] = (int, Field(ge=0, le=f.count_limit, description=f.description))
        if self.critique_text:
            fields["critique"] = (str, Field(
                max_length=CRITIQUE_MAX_CHARS,
                description="The single most useful fix, in one or two sentences.",
            ))
        fields["overall_score"] = (int, Field(
            ge=1, le=10, description="Your overall grade of the output from 1 (bad) to 10."))
        return create_model(
            self.SCHEMA_NAME,
            __config__=ConfigDict(extra="forbid"),
            __doc__=f"Judgement of an output against rubric {self.rubric.name!r}.",
            **fields,
        )

    def messages(self, task: str, output: str,
                 check_results: dict[str, CheckResult]) -> list[BaseMessage]:
        """The judge prompt: task, output, the fields to answer and the measured facts."""
        assert self.schema is not None
        lines = []
        for f in self.rubric.llm_features:
            kind = "true/false" if f.kind == "bool" else f"count, 0-{f.count_limit}"
            lines.append(f"- {f.name} ({kind}): {f.description}")
        if self.critique_text:
            lines.append(f"- critique (at most {CRITIQUE_MAX_CHARS} characters): the single most "
                         "useful fix.")
        lines.append("- overall_score (1-10): your overall grade.")
        parts = [f"TASK:\n{task}", f"OUTPUT:\n{output}",
                 "Answer these fields:\n" + "\n".join(lines)]
        if check_results:
            facts = []
            for f in self.rubric.check_features:
                result = check_results[f.name]
                status = "OK" if f.credit(result.value) >= 1.0 else "NOT MET"
                detail = f" ({result.detail})" if result.detail else ""
                facts.append(f"- {f.description} -> {status}{detail}")
            parts.append("Facts measured by code (already decided; use them in the critique):\n"
                         + "\n".join(facts))
        return [SystemMessage(_SYSTEM), HumanMessage("\n\n".join(parts))]

    def _finish(self, check_results: dict[str, CheckResult], answer: BaseModel | None,
                attempts: int) -> Critique:
        if answer is None:
            return Critique(evaluation=self.rubric.compose(check_results), attempts=0)
        data = answer.model_dump()
        llm_values = {f.name: data[f.name] for f in self.rubric.llm_features}
        return Critique(
            evaluation=self.rubric.compose(check_results, llm_values),
            critique=data.get("critique"),
            overall_score=data["overall_score"],
            attempts=attempts,
        )

    def decided_by_checks(self, check_results: dict[str, CheckResult],
                          checks_first: bool | None = None) -> Critique | None:
        """The critique when no model call is needed, else None.

        No call is needed when the critic asks the model nothing (no LLM
        features, no critique text), when a guard voided the output (empty,
        or the task handed back), or, with ``checks_first``, when a check
        failed: then every LLM feature counts as not satisfied (its
        :meth:`~agentic_loop.judges.features.Feature.unmet_value`: ``False``,
        or a count with no credit).
        """
        if self.schema is None:
            return self._finish(check_results, None, 0)
        guards = getattr(check_results, "guards", None)
        voided = guards is not None and guards.voids is not None  # nothing to judge
        if not voided and not (self.checks_first if checks_first is None else checks_first):
            return None
        not_judged = {f.name: f.unmet_value() for f in self.rubric.llm_features}
        verdict = self.rubric.compose(check_results, not_judged)
        return None if verdict.passed else Critique(evaluation=verdict)

    @property
    def _what(self) -> str:
        return f"Critic[{self.rubric.name}]"

    def run_checks(self, task: str, output: str, exemplars: Sequence[str] = (), *,
                   episode: Episode | None = None) -> dict[str, CheckResult]:
        """The rubric's checks and guards; ``exemplars`` are outputs the model was shown, so
        a near-copy of one is caught (the ``exemplar_copy`` guard, which voids the checks).

        ``episode`` is the agent episode that produced ``output``; checks and guards
        run with it as the :func:`~agentic_loop.episodes.current_episode`. ``None``
        (a plain model's answer) leaves the current one as it is: none, unless the
        caller judges inside its own :func:`~agentic_loop.episodes.judging_episode`.
        """
        with judging_episode(episode) if episode is not None else nullcontext():
            results = self.rubric.run_checks(task, output)
            if not exemplars:
                return results
            return CheckResults(results, self.rubric.inspect(task, output, exemplars=exemplars))

    def by_checks(self, task: str, output: str, exemplars: Sequence[str] = (), *,
                  episode: Episode | None = None) -> Critique:
        """The verdict of the checks alone, no model call: judged features count as unmet.

        Ranks samples cheaply (best-of-n); the winner is then judged in full.

        >>> from agentic_loop.testing import ScriptedChatModel
        >>> critic = Critic(ScriptedChatModel(), Rubric.for_constraints(exact_words=2))
        >>> critic.by_checks("Two words.", "Hi there").score
        10.0
        """
        checks = self.run_checks(task, output, exemplars, episode=episode)
        not_judged = {f.name: f.unmet_value() for f in self.rubric.llm_features}
        return Critique(evaluation=self.rubric.compose(checks, not_judged))

    def critique(self, task: str, output: str, *, checks_first: bool | None = None,
                 exemplars: Sequence[str] = (), episode: Episode | None = None) -> Critique:
        """Judge ``output`` for ``task``; raises :class:`CriticError` after the retries.

        ``checks_first`` overrides the critic's own setting for this call;
        ``exemplars`` are outputs the model was shown, ``episode`` the agent episode
        that produced ``output`` (see :meth:`run_checks`).
        """
        check_results = self.run_checks(task, output, exemplars, episode=episode)
        decided = self.decided_by_checks(check_results, checks_first)
        if decided is not None:
            return decided
        assert self.schema is not None
        answer, attempts = invoke_structured(
            self.llm, self.schema, self.messages(task, output, check_results),
            retry=self.retry, what=self._what, error_cls=CriticError)
        return self._finish(check_results, answer, attempts)

    async def acritique(self, task: str, output: str, *, checks_first: bool | None = None,
                        exemplars: Sequence[str] = (),
                        episode: Episode | None = None) -> Critique:
        """Async :meth:`critique`; checks (which may run a sandbox) run in a worker thread,
        with ``episode`` set in that thread."""
        check_results = await asyncio.to_thread(self.run_checks, task, output, exemplars,
                                                episode=episode)
        decided = self.decided_by_checks(check_results, checks_first)
        if decided is not None:
            return decided
        assert self.schema is not None
        answer, attempts = await ainvoke_structured(
            self.llm, self.schema, self.messages(task, output, check_results),
            retry=self.retry, what=self._what, error_cls=CriticError)
        return self._finish(check_results, answer, attempts)

    @overload
    def batch(self, items: Sequence[tuple[str, str]], *,
              return_exceptions: Literal[False] = False, exemplars: Sequence[str] = (),
              episodes: Sequence[Episode | None] | None = None) -> list[Critique]: ...

    @overload
    def batch(self, items: Sequence[tuple[str, str]], *,
              return_exceptions: Literal[True], exemplars: Sequence[str] = (),
              episodes: Sequence[Episode | None] | None = None
              ) -> list[Critique | CriticError]: ...

    def batch(self, items: Sequence[tuple[str, str]], *, return_exceptions: bool = False,
              exemplars: Sequence[str] = (), episodes: Sequence[Episode | None] | None = None
              ) -> list[Critique] | list[Critique | CriticError]:
        """Judge many ``(task, output)`` pairs, sending the model one batch per retry round.

        With ``return_exceptions=False`` the first item that stays invalid
        raises its :class:`CriticError`; with True it takes that item's place
        in the returned list and the other critiques are kept. ``exemplars``:
        outputs every item's writer was shown (see :meth:`run_checks`). ``episodes``: the
        agent episode of each item, in order (``None`` for a plain model's answer).
        """
        if episodes is None:
            episodes = [None] * len(items)
        elif len(episodes) != len(items):
            raise ConfigError(f"Critic.batch got {len(items)} items but {len(episodes)} "
                              "episodes; pass one episode (or None) per item")
        all_checks = [self.run_checks(task, output, exemplars, episode=episode)
                      for (task, output), episode in zip(items, episodes, strict=True)]
        out: list[Critique | CriticError | None] = [
            self.decided_by_checks(checks) for checks in all_checks]
        ask = [i for i, decided in enumerate(out) if decided is None]
        if ask:
            assert self.schema is not None
            prompts = [self.messages(*items[i], all_checks[i]) for i in ask]
            answers = batch_structured(self.llm, self.schema, prompts, retry=self.retry,
                                       what=self._what, error_cls=CriticError, item_ids=ask)
            for i, answer in zip(ask, answers):
                if isinstance(answer, JudgeCallError):
                    if not return_exceptions:
                        raise answer
                    assert isinstance(answer, CriticError)
                    out[i] = answer
                else:
                    out[i] = self._finish(all_checks[i], answer[0], answer[1])
        return [c for c in out if c is not None]
