"""The single-score baseline: ask the model "how good is this, 1 to 10?".

This is the judge most loops start with, and the reason this package exists:
its grades come back flat (9/10 on nearly everything), so they cannot tell a
good draft from a bad one. It is kept, typed and bounded like the
:class:`~agentic_loop.judges.critic.Critic`, so
:func:`~agentic_loop.judges.spread.spread_report` can measure that flatness
side by side with the composite score.

Example:
    >>> from agentic_loop.testing import ScriptedChatModel
    >>> fake = ScriptedChatModel(structured={"OverallJudgement": [
    ...     {"score": 9, "reason": "Great tagline."}]})
    >>> LLMJudge(fake).judge("Write a tagline.", "Books, always.")
    Judgement(score=9, reason='Great tagline.', attempts=1)
"""

from __future__ import annotations

from collections.abc import Sequence

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import BaseMessage, HumanMessage, SystemMessage
from pydantic import BaseModel, ConfigDict, Field

from agentic_loop.judges.judge_calls import (
    JudgeCallError,
    ainvoke_structured,
    batch_structured,
    invoke_structured,
    judge_retry,
)
from agentic_loop.models.retry import RetryPolicy

__all__ = ["Judgement", "LLMJudge", "OverallJudgement"]

_SYSTEM = "You are a demanding reviewer. Grade how well the OUTPUT fulfils the TASK."


class OverallJudgement(BaseModel):
    """The schema the baseline judge fills: one grade and a short reason."""

    model_config = ConfigDict(extra="forbid")

    score: int = Field(ge=1, le=10, description="Overall grade from 1 (bad) to 10 (perfect).")
    reason: str = Field(max_length=100, description="Why, in one short sentence.")


class Judgement(BaseModel):
    """The baseline's verdict and how many model calls it took."""

    model_config = ConfigDict(frozen=True)

    score: int
    reason: str
    attempts: int


class LLMJudge:
    """Single 1-10 score from the model (baseline; use :class:`Critic` to decide).

    Raises :class:`~agentic_loop.judges.judge_calls.JudgeCallError` (a
    :class:`~agentic_loop.errors.JudgeError`) when the model gives no valid
    answer within ``1 + max_retries`` attempts; ``retry`` (a
    :class:`~agentic_loop.models.retry.RetryPolicy`) overrides ``max_retries``.
    """

    def __init__(self, llm: BaseChatModel, *, max_retries: int = 2,
                 retry: RetryPolicy | None = None) -> None:
        self.retry = judge_retry(max_retries, retry)
        self.llm = llm
        self.max_retries = self.retry.max_attempts - 1

    @staticmethod
    def messages(task: str, output: str) -> list[BaseMessage]:
        """The baseline prompt."""
        return [SystemMessage(_SYSTEM), HumanMessage(f"TASK:\n{task}\n\nOUTPUT:\n{output}")]

    def judge(self, task: str, output: str) -> Judgement:
        """Grade ``output`` for ``task`` on 1-10."""
        answer, attempts = invoke_structured(
            self.llm, OverallJudgement, self.messages(task, output),
            retry=self.retry, what="LLMJudge",
        )
        return Judgement(score=answer.score, reason=answer.reason, attempts=attempts)

    async def ajudge(self, task: str, output: str) -> Judgement:
        """Async :meth:`judge`."""
        answer, attempts = await ainvoke_structured(
            self.llm, OverallJudgement, self.messages(task, output),
            retry=self.retry, what="LLMJudge",
        )
        return Judgement(score=answer.score, reason=answer.reason, attempts=attempts)

    def batch(self, items: Sequence[tuple[str, str]]) -> list[Judgement]:
        """Grade many ``(task, output)`` pairs in batched model calls; raise the first failure."""
        answers = batch_structured(
            self.llm, OverallJudgement, [self.messages(t, o) for t, o in items],
            retry=self.retry, what="LLMJudge",
        )
        judgements = []
        for answer in answers:
            if isinstance(answer, JudgeCallError):
                raise answer
            judgements.append(Judgement(score=answer[0].score, reason=answer[0].reason,
                                        attempts=answer[1]))
        return judgements
