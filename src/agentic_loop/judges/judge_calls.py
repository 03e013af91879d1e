"""A judge's model calls: ask for a pydantic object, retry by the one policy, fail clearly.

Both judges (:class:`~agentic_loop.judges.critic.Critic` and
:class:`~agentic_loop.judges.llm_judge.LLMJudge`) need the same thing: call
``llm.with_structured_output(Schema)``, accept only a valid ``Schema``
instance, retry a bounded number of times on any error or invalid answer,
and then fail loudly with the last error, never loop or return junk. The
retrying itself is :class:`~agentic_loop.models.retry.RetryPolicy`'s (one
policy for every LLM call); this module names the calls in traces and turns
a :class:`~agentic_loop.models.errors.ModelCallError` into the judge's own
:class:`JudgeCallError`.

Example:
    >>> from pydantic import BaseModel
    >>> from agentic_loop.models.retry import RetryPolicy
    >>> from agentic_loop.testing import ScriptedChatModel
    >>> class Verdict(BaseModel):
    ...     ok: bool
    >>> fake = ScriptedChatModel(structured={"Verdict": [ValueError("garbled"), {"ok": True}]})
    >>> invoke_structured(fake, Verdict, "judge", retry=RetryPolicy(max_attempts=2), what="demo")
    (Verdict(ok=True), 2)
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypeVar

from langchain_core.language_models import BaseChatModel, LanguageModelInput
from langchain_core.runnables import RunnableConfig
from pydantic import BaseModel

from agentic_loop.errors import ConfigError, JudgeError
from agentic_loop.models.errors import ModelCallError
from agentic_loop.models.retry import DEFAULT_RETRY, RetryPolicy, call_failure

__all__ = [
    "JudgeCallError",
    "JudgeError",
    "ainvoke_structured",
    "batch_structured",
    "invoke_structured",
    "judge_retry",
]

S = TypeVar("S", bound=BaseModel)

#: Traces tag every judge call, so a judge's runs are easy to find (LangSmith).
_CONFIG: RunnableConfig = {"tags": ["judge"]}


class JudgeCallError(JudgeError):
    """A judge model gave no valid structured answer within its retries.

    ``attempts`` is how many model calls were made, ``last_error`` the last one's error.
    """

    def __init__(self, message: str, *, attempts: int = 0,
                 last_error: BaseException | None = None) -> None:
        super().__init__(message)
        self.attempts = attempts
        self.last_error = last_error


def judge_retry(max_retries: int, retry: RetryPolicy | None = None) -> RetryPolicy:
    """The policy of a judge: ``retry`` if given, else the default with ``1 + max_retries`` calls.

    >>> judge_retry(0).max_attempts, judge_retry(2).backoff_s
    (1, 0.5)
    """
    if retry is not None:
        return retry
    if isinstance(max_retries, bool) or not isinstance(max_retries, int) or max_retries < 0:
        raise ConfigError(f"max_retries={max_retries!r}: pass an int >= 0")
    return DEFAULT_RETRY.model_copy(update={"max_attempts": 1 + max_retries})


def _judge_error(err: ModelCallError, error_cls: type[JudgeCallError]) -> JudgeCallError:
    """The judge's error for a failed call, with the same message plus the judge's fix."""
    hint = ("; raise max_retries, or check that the model supports structured output"
            if err.attempts else "")
    judge_err = error_cls(f"{err}{hint}", attempts=err.attempts, last_error=err.last_error)
    judge_err.__cause__ = err
    return judge_err


def invoke_structured(llm: BaseChatModel, schema: type[S], prompt: LanguageModelInput, *,
                      retry: RetryPolicy, what: str,
                      error_cls: type[JudgeCallError] = JudgeCallError) -> tuple[S, int]:
    """Return ``(answer, attempts)``; raise ``error_cls`` when ``retry`` gives up."""
    try:
        return retry.invoke_structured(llm, schema, prompt, _CONFIG, what=what)
    except ModelCallError as err:
        raise _judge_error(err, error_cls) from err


async def ainvoke_structured(llm: BaseChatModel, schema: type[S], prompt: LanguageModelInput, *,
                             retry: RetryPolicy, what: str,
                             error_cls: type[JudgeCallError] = JudgeCallError) -> tuple[S, int]:
    """Async twin of :func:`invoke_structured`."""
    try:
        return await retry.ainvoke_structured(llm, schema, prompt, _CONFIG, what=what)
    except ModelCallError as err:
        raise _judge_error(err, error_cls) from err


def batch_structured(llm: BaseChatModel, schema: type[S], prompts: Sequence[LanguageModelInput],
                     *, retry: RetryPolicy, what: str,
                     error_cls: type[JudgeCallError] = JudgeCallError,
                     item_ids: Sequence[int] | None = None,
                     ) -> list[tuple[S, int] | JudgeCallError]:
    """Batched :func:`invoke_structured`: one ``batch`` call per retry round.

    Each item is ``(answer, attempts)``, or the ``error_cls`` instance for an
    item that stayed invalid (the others are kept). Errors name the item by
    its position in ``prompts``, or by ``item_ids[position]`` when given
    (the caller's own numbering, when it sends only some of its items).

    >>> from pydantic import BaseModel
    >>> from agentic_loop.testing import ScriptedChatModel
    >>> class Verdict(BaseModel):
    ...     ok: bool
    >>> fake = ScriptedChatModel(default_structured=lambda schema, msgs: {
    ...     "ok": "good" in msgs[-1].content})
    >>> batch_structured(fake, Verdict, ["good", "bad"], retry=judge_retry(1), what="demo")
    [(Verdict(ok=True), 1), (Verdict(ok=False), 1)]
    """
    try:
        answers = retry.batch_structured(llm, schema, list(prompts), _CONFIG, what=what)
    except ModelCallError as err:  # the model cannot answer structured at all
        raise _judge_error(err, error_cls) from err
    out: list[tuple[S, int] | JudgeCallError] = []
    for position, answer in enumerate(answers):
        if not isinstance(answer, ModelCallError):
            out.append(answer)
            continue
        if item_ids is not None and answer.last_error is not None:
            answer = call_failure(f"{what} (item {item_ids[position]})", schema.__name__,
                                  answer.attempts, answer.last_error)
        out.append(_judge_error(answer, error_cls))
    return out
