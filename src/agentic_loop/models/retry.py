"""One retry-and-validate policy for every LLM call (generation, critique, reflection).

Why one: a model call fails in two different ways and each wants its own
answer. A *call error* (server down, timeout, overload) is transient, so we
wait and try again, doubling the wait each time. An *invalid answer* (JSON
that does not parse, a field out of range) means the model answered but
wrongly; waiting does not help, so we retry at once and show the model its
validation error, once, in the next attempt's prompt (only the latest
error: the prompt never grows past the original plus one correction). Both
are bounded by ``max_attempts`` and end in one :class:`ModelCallError` that
says what was asked, how many attempts were made and the last error.

A model that *hangs* is a call error too: every attempt is cut off after
``timeout_s`` (a :class:`~agentic_loop.models.errors.ModelTimeoutError`),
then retried like any other call error. An async call is cancelled at the
deadline. A sync call runs in a worker thread that the policy stops waiting
for; Python cannot kill a thread, so that worker may still finish in the
background (a local engine decodes the abandoned request to its end, a
server call returns when the server does) and its answer is dropped.
``timeout_s=None`` calls in the caller's thread with no deadline.

An invalid answer is a ``ValueError`` (pydantic's ``ValidationError``,
JSON decoding errors and LangChain's output-parser errors all are) or a
:class:`~agentic_loop.models.errors.StructuredOutputError`; any other
exception is a call error.

Configure retries in one place, :data:`DEFAULT_RETRY`, or pass your own
:class:`RetryPolicy` where a component accepts one.

Example:
    >>> from pydantic import BaseModel
    >>> from agentic_loop.testing import ScriptedChatModel
    >>> class Verdict(BaseModel):
    ...     ok: bool
    >>> fake = ScriptedChatModel(structured={"Verdict": [{"ok": "maybe"}, {"ok": True}]})
    >>> RetryPolicy(max_attempts=2).invoke_structured(fake, Verdict, "Is it ok?", what="demo")
    (Verdict(ok=True), 2)
    >>> "That answer was invalid" in fake.calls[1].prompt   # the error was fed back
    True
"""

from __future__ import annotations

import asyncio
import contextvars
import threading
import time
from collections.abc import Awaitable, Callable, Sequence
from concurrent.futures import Future
from functools import partial
from typing import Any, TypeVar

from langchain_core.language_models import LanguageModelInput
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, convert_to_messages
from langchain_core.prompt_values import PromptValue
from langchain_core.runnables import Runnable, RunnableConfig
from pydantic import BaseModel, ConfigDict, Field

from agentic_loop.models.errors import ModelCallError, ModelTimeoutError, StructuredOutputError
from agentic_loop.models.wrappers import ChatModelLike, with_structured_output

__all__ = [
    "DEFAULT_RETRY",
    "DEFAULT_TIMEOUT_S",
    "ModelCallError",
    "ModelTimeoutError",
    "RetryPolicy",
    "as_messages",
    "call_failure",
    "is_invalid_answer",
]

S = TypeVar("S", bound=BaseModel)
T = TypeVar("T")

#: Seconds one call may take before it is cut off. Sized for the embedded 135M model on a
#: busy CPU: a structured answer of up to 1024 tokens at ~5 tokens/s per row of a batch of 8
#: (bench/results/models.json: 40 tokens/s for 8 rows on one core) takes ~200 s; a hung
#: server is still caught within minutes. Raise it for slow models, or pass None.
DEFAULT_TIMEOUT_S = 300.0

#: How the policy waits; tests replace these with fakes (``monkeypatch.setattr``).
_sleep: Callable[[float], None] = time.sleep
_asleep: Callable[[float], Any] = asyncio.sleep


def is_invalid_answer(error: BaseException) -> bool:
    """True when ``error`` says the model answered wrongly (fed back), not that the call failed."""
    return isinstance(error, (ValueError, StructuredOutputError))


def as_messages(value: LanguageModelInput) -> list[BaseMessage]:
    """Any chat-model input (text, prompt value, message list) as a list of messages."""
    if isinstance(value, str):
        return [HumanMessage(content=value)]
    if isinstance(value, PromptValue):
        return list(value.to_messages())
    return list(convert_to_messages(value))


def _feedback(value: LanguageModelInput, error: BaseException, name: str) -> list[BaseMessage]:
    """The original input plus one correction message (and the bad answer when known)."""
    raw = getattr(error, "raw", None)
    answer = [raw] if isinstance(raw, AIMessage) else []
    note = HumanMessage(content=f"That answer was invalid: {error}. Reply again with only a JSON "
                                f"object that matches the {name} schema.")
    return [*as_messages(value), *answer, note]


def _config(config: RunnableConfig | None, what: str, attempt: int) -> RunnableConfig:
    """Name the call in traces (LangSmith) and record the attempt number."""
    merged: dict[str, Any] = dict(config or {})
    merged.setdefault("run_name", what)
    merged["metadata"] = {**(merged.get("metadata") or {}), "attempt": attempt}
    return merged  # type: ignore[return-value]


def _coerce(schema: type[S], answer: Any) -> S:
    """Accept a ``schema`` instance, another model or a dict; anything else is invalid."""
    if isinstance(answer, schema):
        return answer
    if isinstance(answer, BaseModel):
        answer = answer.model_dump()
    if answer is None:
        raise StructuredOutputError("the model returned no parsable answer")
    return schema.model_validate(answer)


def _bind(llm: ChatModelLike, schema: type[S], what: str) -> Runnable[LanguageModelInput, Any]:
    """``llm``'s structured output for ``schema``; wrappers of a chat model work too."""
    try:
        return with_structured_output(llm, schema)
    except NotImplementedError as err:
        raise ModelCallError(
            f"{what}: the model {type(llm).__name__} does not support with_structured_output; "
            "use a model from load_chat_model(...) or another tool-calling chat model",
            attempts=0, last_error=err) from err


def _timeout_error(what: str, timeout_s: float) -> ModelTimeoutError:
    return ModelTimeoutError(
        f"{what}: the model gave no answer within timeout_s={timeout_s:g} s; raise "
        "RetryPolicy(timeout_s=...) for a slow model or a busy machine, or check that the model "
        "server is up", timeout_s=timeout_s)


def _timed(call: Callable[[], T], timeout_s: float | None, what: str) -> T:
    """``call()``, cut off after ``timeout_s`` (see the module docstring for the worker thread).

    >>> _timed(lambda: 42, 1.0, "demo")
    42
    >>> import threading
    >>> _timed(threading.Event().wait, 0.05, "demo")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    agentic_loop.models.errors.ModelTimeoutError: demo: the model gave no answer within ...
    """
    if timeout_s is None:
        return call()
    future: Future[T] = Future()
    context = contextvars.copy_context()  # tracing and LangGraph context follow the call

    def work() -> None:
        try:
            future.set_result(context.run(call))
        except BaseException as err:  # noqa: BLE001 - handed to the waiting caller
            future.set_exception(err)

    threading.Thread(target=work, name=f"agentic-loop-call:{what}", daemon=True).start()
    try:
        return future.result(timeout=timeout_s)
    except TimeoutError:
        if future.done():  # the call itself raised a TimeoutError: report that one
            raise
        raise _timeout_error(what, timeout_s) from None


async def _atimed(call: Callable[[], Awaitable[T]], timeout_s: float | None, what: str) -> T:
    """Async :func:`_timed`: the awaited call is cancelled at the deadline."""
    if timeout_s is None:
        return await call()
    scope = asyncio.timeout(timeout_s)
    try:
        async with scope:
            return await call()
    except TimeoutError:
        if not scope.expired():  # the call itself raised a TimeoutError: report that one
            raise
        raise _timeout_error(what, timeout_s) from None


def call_failure(what: str, expected: str, attempts: int, last: BaseException) -> ModelCallError:
    """The error a policy gives up with: what was asked, how often, and the last error.

    >>> str(call_failure("critic", "Verdict", 2, ValueError("bad json")))
    'critic: no valid Verdict from the model after 2 attempt(s); last error: ValueError: bad json'
    """
    return ModelCallError(
        f"{what}: no valid {expected} from the model after {attempts} attempt(s); "
        f"last error: {type(last).__name__}: {str(last)[:500]}",
        attempts=attempts, last_error=last)


class RetryPolicy(BaseModel):
    """Bounded attempts with exponential backoff, and invalid answers fed back once.

    Args:
        max_attempts: total calls, the first included (>= 1).
        backoff_s: wait before the second attempt after a call error; doubles each time.
        max_backoff_s: the longest single wait.
        timeout_s: seconds one call may take before it is cut off and retried like a
            call error (:data:`DEFAULT_TIMEOUT_S`); None waits forever.
    """

    model_config = ConfigDict(frozen=True)

    max_attempts: int = Field(default=3, ge=1)
    backoff_s: float = Field(default=0.5, ge=0.0)
    max_backoff_s: float = Field(default=8.0, ge=0.0)
    timeout_s: float | None = Field(default=DEFAULT_TIMEOUT_S, gt=0.0)

    def delay(self, attempt: int) -> float:
        """Seconds to wait after failed attempt ``attempt`` (1-based) before the next one.

        >>> [RetryPolicy(backoff_s=1.0, max_backoff_s=3.0).delay(n) for n in (1, 2, 3)]
        [1.0, 2.0, 3.0]
        """
        return min(self.backoff_s * 2 ** (attempt - 1), self.max_backoff_s)

    # -- plain calls: retry call errors with backoff --------------------------
    def invoke(self, runnable: Runnable[Any, Any], input: Any,
               config: RunnableConfig | None = None, *, what: str) -> Any:
        """``runnable.invoke(input)``, retried on any exception, then :class:`ModelCallError`."""
        last: BaseException | None = None
        for attempt in range(1, self.max_attempts + 1):
            if attempt > 1:
                _sleep(self.delay(attempt - 1))
            cfg = _config(config, what, attempt)
            try:
                return _timed(partial(runnable.invoke, input, cfg), self.timeout_s, what)
            except Exception as err:  # noqa: BLE001 - retried, then reported with the cause
                last = err
        assert last is not None
        raise call_failure(what, "answer", self.max_attempts, last) from last

    async def ainvoke(self, runnable: Runnable[Any, Any], input: Any,
                      config: RunnableConfig | None = None, *, what: str) -> Any:
        """Async :meth:`invoke`."""
        last: BaseException | None = None
        for attempt in range(1, self.max_attempts + 1):
            if attempt > 1:
                await _asleep(self.delay(attempt - 1))
            cfg = _config(config, what, attempt)
            try:
                return await _atimed(partial(runnable.ainvoke, input, cfg), self.timeout_s, what)
            except Exception as err:  # noqa: BLE001 - as in invoke
                last = err
        assert last is not None
        raise call_failure(what, "answer", self.max_attempts, last) from last

    # -- validated calls: call errors back off, invalid answers are fed back ---
    def invoke_validated(self, runnable: Runnable[Any, Any], input: LanguageModelInput,
                         parse: Callable[[Any], T], config: RunnableConfig | None = None, *,
                         what: str, expected: str = "answer") -> tuple[T, int]:
        """``(parse(answer), attempts)``: the loop under :meth:`invoke_structured`.

        ``parse`` raises on an invalid answer (see :func:`is_invalid_answer`);
        ``expected`` names what a valid answer is (a schema name) in messages.
        """
        value, last = input, None
        for attempt in range(1, self.max_attempts + 1):
            ask = partial(runnable.invoke, value, _config(config, what, attempt))
            try:
                answer = _timed(ask, self.timeout_s, what)
                return parse(answer), attempt
            except Exception as err:  # noqa: BLE001 - retried, then reported with the cause
                last = err
            if attempt < self.max_attempts:
                if is_invalid_answer(last):
                    value = _feedback(input, last, expected)
                else:
                    _sleep(self.delay(attempt))
        assert last is not None
        raise call_failure(what, expected, self.max_attempts, last) from last

    async def ainvoke_validated(self, runnable: Runnable[Any, Any], input: LanguageModelInput,
                                parse: Callable[[Any], T], config: RunnableConfig | None = None,
                                *, what: str, expected: str = "answer") -> tuple[T, int]:
        """Async :meth:`invoke_validated`."""
        value, last = input, None
        for attempt in range(1, self.max_attempts + 1):
            aask = partial(runnable.ainvoke, value, _config(config, what, attempt))
            try:
                answer = await _atimed(aask, self.timeout_s, what)
                return parse(answer), attempt
            except Exception as err:  # noqa: BLE001 - as in invoke_validated
                last = err
            if attempt < self.max_attempts:
                if is_invalid_answer(last):
                    value = _feedback(input, last, expected)
                else:
                    await _asleep(self.delay(attempt))
        assert last is not None
        raise call_failure(what, expected, self.max_attempts, last) from last

    def invoke_structured(self, llm: ChatModelLike, schema: type[S], input: LanguageModelInput,
                          config: RunnableConfig | None = None, *, what: str) -> tuple[S, int]:
        """``(answer, attempts)`` from ``llm.with_structured_output(schema)``."""
        runnable = _bind(llm, schema, what)
        return self.invoke_validated(runnable, input, lambda a: _coerce(schema, a), config,
                                     what=what, expected=schema.__name__)

    async def ainvoke_structured(self, llm: ChatModelLike, schema: type[S],
                                 input: LanguageModelInput, config: RunnableConfig | None = None,
                                 *, what: str) -> tuple[S, int]:
        """Async :meth:`invoke_structured`."""
        runnable = _bind(llm, schema, what)
        return await self.ainvoke_validated(runnable, input, lambda a: _coerce(schema, a),
                                            config, what=what, expected=schema.__name__)

    def batch_structured(self, llm: ChatModelLike, schema: type[S],
                         inputs: Sequence[LanguageModelInput],
                         config: RunnableConfig | None = None, *,
                         what: str) -> list[tuple[S, int] | ModelCallError]:
        """Batched :meth:`invoke_structured`: one ``batch`` call per round, failures retried.

        Batching lets a local engine decode the inputs together. ``timeout_s``
        bounds each round's ``batch`` call (one call); a round cut off retries
        all its items. Each item is
        ``(answer, attempts)``, or the :class:`ModelCallError` of an item that
        stayed invalid (its ``what`` names the item); the others are kept.

        >>> from pydantic import BaseModel
        >>> from agentic_loop.testing import ScriptedChatModel
        >>> class Verdict(BaseModel):
        ...     ok: bool
        >>> fake = ScriptedChatModel(default_structured=lambda schema, msgs: {
        ...     "ok": "good" in msgs[-1].content})
        >>> RetryPolicy().batch_structured(fake, Verdict, ["good", "bad"], what="demo")
        [(Verdict(ok=True), 1), (Verdict(ok=False), 1)]
        """
        runnable = _bind(llm, schema, what)
        results: dict[int, tuple[S, int] | ModelCallError] = {}
        values = list(inputs)
        last: dict[int, BaseException] = {}
        pending = list(range(len(values)))
        for attempt in range(1, self.max_attempts + 1):
            if not pending:
                break
            if attempt > 1 and any(not is_invalid_answer(last[i]) for i in pending):
                _sleep(self.delay(attempt - 1))
            ask_all = partial(runnable.batch, [values[i] for i in pending],
                              _config(config, what, attempt), return_exceptions=True)
            try:
                answers = _timed(ask_all, self.timeout_s, what)
            except ModelTimeoutError as err:  # the whole round hung: every item retries
                answers = [err] * len(pending)
            still: list[int] = []
            for i, answer in zip(pending, answers):
                try:
                    if isinstance(answer, BaseException):
                        raise answer
                    results[i] = (_coerce(schema, answer), attempt)
                except Exception as err:  # noqa: BLE001 - as in invoke_validated
                    last[i] = err
                    still.append(i)
                    if is_invalid_answer(err):
                        values[i] = _feedback(inputs[i], err, schema.__name__)
            pending = still
        for i in pending:
            error = call_failure(f"{what} (item {i})", schema.__name__, self.max_attempts, last[i])
            error.__cause__ = last[i]
            results[i] = error
        return [results[i] for i in range(len(values))]


#: The policy every LLM call uses unless a component is given another one.
DEFAULT_RETRY = RetryPolicy()
