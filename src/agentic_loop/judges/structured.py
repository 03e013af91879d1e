"""Ask a chat model for a pydantic object, with bounded retries and a clear failure.

Both judges (:class:`~agentic_loop.judges.critic.Critic` and
:class:`~agentic_loop.judges.llm_judge.LLMJudge`) need the same thing: call
``llm.with_structured_output(Schema)``, accept only a valid ``Schema``
instance, retry a bounded number of times on any error or invalid answer,
and then fail loudly with the last error, never loop or return junk.

Example:
    >>> from pydantic import BaseModel
    >>> from agentic_loop.testing import ScriptedChatModel
    >>> class Verdict(BaseModel):
    ...     ok: bool
    >>> fake = ScriptedChatModel(structured={"Verdict": [ValueError("garbled"), {"ok": True}]})
    >>> invoke_structured(fake, Verdict, "judge", max_retries=1, what="demo")
    (Verdict(ok=True), 2)
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, TypeVar

from langchain_core.language_models import BaseChatModel, LanguageModelInput
from langchain_core.runnables import Runnable, RunnableConfig
from pydantic import BaseModel

__all__ = ["JudgeError", "ainvoke_structured", "batch_structured", "invoke_structured"]

S = TypeVar("S", bound=BaseModel)


class JudgeError(RuntimeError):
    """A judge model gave no valid structured answer within its retries."""

    def __init__(self, message: str, *, attempts: int, last_error: BaseException | None) -> None:
        super().__init__(message)
        self.attempts = attempts
        self.last_error = last_error


def _bind(llm: BaseChatModel, schema: type[S], what: str) -> Runnable[LanguageModelInput, Any]:
    try:
        return llm.with_structured_output(schema)
    except NotImplementedError as err:
        raise JudgeError(
            f"{what}: the model {type(llm).__name__} does not support with_structured_output; "
            "use a model from load_chat_model(...) or another tool-calling chat model.",
            attempts=0, last_error=err,
        ) from err


def _coerce(schema: type[S], answer: Any) -> S:
    if isinstance(answer, schema):
        return answer
    if isinstance(answer, BaseModel):
        answer = answer.model_dump()
    if answer is None:
        raise ValueError("the model returned no parsable answer")
    return schema.model_validate(answer)


def _config(what: str, attempt: int) -> RunnableConfig:
    """Name the call in traces (LangSmith), so a judge's runs are easy to find."""
    return {"run_name": what, "tags": ["judge"], "metadata": {"judge_attempt": attempt}}


def _validate_retries(max_retries: int) -> None:
    if isinstance(max_retries, bool) or not isinstance(max_retries, int) or max_retries < 0:
        raise ValueError(f"max_retries must be an int >= 0, got {max_retries!r}.")


def _failure(error_cls: type[JudgeError], what: str, schema: type[BaseModel], attempts: int,
             last: BaseException) -> JudgeError:
    return error_cls(
        f"{what}: no valid {schema.__name__} from the model after {attempts} attempt(s); "
        f"last error: {type(last).__name__}: {str(last)[:500]}. Raise max_retries, or check "
        "that the model supports structured output.",
        attempts=attempts, last_error=last,
    )


def invoke_structured(llm: BaseChatModel, schema: type[S], prompt: LanguageModelInput, *,
                      max_retries: int, what: str,
                      error_cls: type[JudgeError] = JudgeError) -> tuple[S, int]:
    """Return ``(answer, attempts)``; raise ``error_cls`` after ``1 + max_retries`` failures."""
    _validate_retries(max_retries)
    runnable = _bind(llm, schema, what)
    last: BaseException | None = None
    for attempt in range(1, max_retries + 2):
        try:
            return _coerce(schema, runnable.invoke(prompt, _config(what, attempt))), attempt
        except Exception as err:  # noqa: BLE001 - any model/parse failure is retried, then reported
            last = err
    assert last is not None
    raise _failure(error_cls, what, schema, max_retries + 1, last) from last


async def ainvoke_structured(llm: BaseChatModel, schema: type[S], prompt: LanguageModelInput, *,
                             max_retries: int, what: str,
                             error_cls: type[JudgeError] = JudgeError) -> tuple[S, int]:
    """Async twin of :func:`invoke_structured`."""
    _validate_retries(max_retries)
    runnable = _bind(llm, schema, what)
    last: BaseException | None = None
    for attempt in range(1, max_retries + 2):
        try:
            return _coerce(schema, await runnable.ainvoke(prompt, _config(what, attempt))), attempt
        except Exception as err:  # noqa: BLE001 - as in invoke_structured
            last = err
    assert last is not None
    raise _failure(error_cls, what, schema, max_retries + 1, last) from last


def batch_structured(llm: BaseChatModel, schema: type[S], prompts: Sequence[LanguageModelInput], *,
                     max_retries: int, what: str,
                     error_cls: type[JudgeError] = JudgeError) -> list[tuple[S, int] | JudgeError]:
    """Batched :func:`invoke_structured`: one ``runnable.batch`` per round, failures retried.

    Batching lets a local engine decode the prompts together. Each item is
    ``(answer, attempts)``, or the ``error_cls`` instance for an item that
    stayed invalid after ``1 + max_retries`` attempts (the others are kept).

    >>> from pydantic import BaseModel
    >>> from agentic_loop.testing import ScriptedChatModel
    >>> class Verdict(BaseModel):
    ...     ok: bool
    >>> fake = ScriptedChatModel(default_structured=lambda schema, msgs: {
    ...     "ok": "good" in msgs[-1].content})
    >>> batch_structured(fake, Verdict, ["good", "bad"], max_retries=1, what="demo")
    [(Verdict(ok=True), 1), (Verdict(ok=False), 1)]
    """
    _validate_retries(max_retries)
    runnable = _bind(llm, schema, what)
    results: list[tuple[S, int] | JudgeError | None] = [None] * len(prompts)
    last: dict[int, BaseException] = {}
    pending = list(range(len(prompts)))
    for attempt in range(1, max_retries + 2):
        if not pending:
            break
        answers = runnable.batch([prompts[i] for i in pending], _config(what, attempt),
                                 return_exceptions=True)
        still: list[int] = []
        for i, answer in zip(pending, answers):
            try:
                if isinstance(answer, BaseException):
                    raise answer
                results[i] = (_coerce(schema, answer), attempt)
            except Exception as err:  # noqa: BLE001 - as in invoke_structured
                last[i] = err
                still.append(i)
        pending = still
    for i in pending:
        results[i] = _failure(error_cls, f"{what} (item {i})", schema, max_retries + 1, last[i])
    return [r for r in results if r is not None]
