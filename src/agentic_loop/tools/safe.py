"""Any tool made safe for a batch: failures, hangs and huge outputs come back as data.

Why: one agent's tool raising, hanging or returning 9 MB must not crash a
batch of episodes, stall it, or make its records unloggable. :func:`safe_tool`
wraps a LangChain tool (or a plain function) so that every call ends as a
tool *result*:

* an exception (any, not only ``ToolException``) or invalid arguments become an
  error result: a ``ToolMessage`` with ``status="error"`` whose text names the
  error, which :func:`~agentic_loop.episodes.episode_from_messages` records as
  the step's ``error``;
* a call running past ``timeout_s`` becomes the error result ``timed out after
  N s`` (a synchronous tool's thread cannot be killed: it is left to finish in
  the background, and its result is dropped; a tool that can hang forever should
  bound itself, as :func:`~agentic_loop.tools.python_tool` does);
* a result longer than ``limit`` characters is cut with
  :func:`~agentic_loop.episodes.cap_tool_output`, ends with a note telling the
  agent it was cut, and carries the length it had as the message's artifact
  ``{"cut_from": n}``, which the episode's record keeps in ``cut_from``.

Example:
    >>> from langchain_core.tools import tool
    >>> @tool
    ... def shout(text: str) -> str:
    ...     '''Repeat the text, louder.'''
    ...     if not text:
    ...         raise ValueError("nothing to shout")
    ...     return text.upper() * 10
    >>> loud = safe_tool(shout, limit=100)
    >>> call = {"type": "tool_call", "name": "shout", "id": "c1"}
    >>> ok = loud.invoke({**call, "args": {"text": "hey"}})
    >>> ok.status, ok.content
    ('success', 'HEYHEYHEYHEYHEYHEYHEYHEYHEYHEY')
    >>> bad = loud.invoke({**call, "args": {"text": ""}})
    >>> bad.status, bad.content
    ('error', 'ValueError: nothing to shout')
    >>> cut = loud.invoke({**call, "args": {"text": "a very long text"}})
    >>> len(cut.content) <= 100, cut.artifact
    (True, {'cut_from': 160})
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import threading
import uuid
from collections.abc import Callable
from typing import Any, Literal

from langchain_core.callbacks import AsyncCallbackManagerForToolRun, CallbackManagerForToolRun
from langchain_core.messages import ToolMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool, StructuredTool, ToolException
from langchain_core.tools import tool as as_tool
from pydantic import ValidationError
from pydantic.v1 import ValidationError as ValidationErrorV1

from agentic_loop.episodes import MAX_TOOL_RESULT_CHARS, cap_tool_output
from agentic_loop.errors import AgenticLoopError, ConfigError

__all__ = ["DEFAULT_TOOL_TIMEOUT_S", "SafeTool", "ToolFailed", "cut_note", "safe_tool"]

#: How long a wrapped tool call may run before it becomes a ``timed out`` error result.
DEFAULT_TOOL_TIMEOUT_S = 30.0


class ToolFailed(AgenticLoopError, ToolException):
    """A tool call failed in a way the agent should read (bad input, a timeout, a crash).

    A ``ToolException``, so a tool with ``handle_tool_error`` turns it into an
    error result instead of raising it.
    """


def cut_note(had: int) -> str:
    """The line that ends a result cut to the limit, so the agent knows it saw only the start.

    >>> cut_note(9_000_000)
    '\\n[output cut: 9000000 characters in all]'
    """
    return f"\n[output cut: {had} characters in all]"


def _capped(content: Any, limit: int) -> tuple[str, int | None]:
    text, had = cap_tool_output(content, limit)
    if had is None:
        return text, None
    note = cut_note(had)
    return text[:max(0, limit - len(note))] + note, had


def _describe(err: BaseException) -> str:
    text = str(err).strip()
    if isinstance(err, ToolException):
        return text or type(err).__name__
    return f"{type(err).__name__}: {text}" if text else type(err).__name__


def _in_thread(fn: Callable[[], Any], timeout_s: float, name: str) -> Any:
    """``fn()`` in a daemon thread, waited for at most ``timeout_s`` seconds."""
    box: dict[str, Any] = {}
    context = contextvars.copy_context()  # callbacks and tracing follow the call

    def target() -> None:
        try:
            box["out"] = context.run(fn)
        except BaseException as err:  # noqa: BLE001 - re-raised in the caller's thread
            box["err"] = err

    worker = threading.Thread(target=target, daemon=True, name=f"tool-{name}")
    worker.start()
    worker.join(timeout_s)
    if worker.is_alive():
        raise ToolFailed(f"tool {name!r} timed out after {timeout_s:g} s")
    if "err" in box:
        raise box["err"]
    return box.get("out")


async def _awaited_in_thread(fn: Callable[[], Any], timeout_s: float | None, name: str) -> Any:
    """``fn()`` in a daemon thread, awaited for at most ``timeout_s`` seconds.

    Not the loop's executor: a hung call left there would hold up the loop's
    shutdown (``asyncio.run`` waits for its executor's threads).
    """
    loop = asyncio.get_running_loop()
    done: asyncio.Future[Any] = loop.create_future()
    context = contextvars.copy_context()

    def settle(out: Any, err: BaseException | None) -> None:
        if done.done():
            return
        if err is not None:
            done.set_exception(err)
        else:
            done.set_result(out)

    def target() -> None:
        try:
            out, err = context.run(fn), None
        except BaseException as exc:  # noqa: BLE001 - re-raised in the awaiting task
            out, err = None, exc
        with contextlib.suppress(RuntimeError):  # the loop closed after a timeout
            loop.call_soon_threadsafe(settle, out, err)

    threading.Thread(target=target, daemon=True, name=f"tool-{name}").start()
    try:
        return await asyncio.wait_for(done, timeout_s)
    except TimeoutError:
        raise ToolFailed(f"tool {name!r} timed out after {timeout_s:g} s") from None


def _natively_async(tool: BaseTool) -> bool:
    if isinstance(tool, StructuredTool):
        return tool.coroutine is not None
    return type(tool)._arun is not BaseTool._arun


def _invalid_arguments(err: ValidationError | ValidationErrorV1) -> str:
    found = "; ".join(f"{'.'.join(str(p) for p in e.get('loc', ())) or 'arguments'}: "
                      f"{e.get('msg', 'invalid')}" for e in err.errors())
    return f"invalid arguments ({found}); call the tool with the arguments its schema names"


class SafeTool(BaseTool):
    """A tool whose every call ends as a result: see :func:`safe_tool`."""

    inner: BaseTool
    timeout_s: float | None = DEFAULT_TOOL_TIMEOUT_S
    limit: int = MAX_TOOL_RESULT_CHARS
    handle_tool_error: bool = True
    handle_validation_error: (bool | str | Callable[[ValidationError | ValidationErrorV1], str]
                              | None) = _invalid_arguments
    response_format: Literal["content", "content_and_artifact"] = "content_and_artifact"

    def _call(self, kwargs: dict[str, Any]) -> dict[str, Any]:
        return {"type": "tool_call", "name": self.inner.name, "args": kwargs,
                "id": f"safe-{uuid.uuid4().hex[:12]}"}

    def _result(self, out: Any) -> tuple[str, Any]:
        if isinstance(out, ToolMessage):
            if out.status == "error":
                raise ToolFailed(_capped(out.content, self.limit)[0] or "the tool failed")
            content, artifact = out.content, out.artifact
        else:
            content, artifact = out, None
        text, had = _capped(content, self.limit)
        return text, {"cut_from": had} if had is not None else artifact

    def _run(self, *args: Any, run_manager: CallbackManagerForToolRun | None = None,
             **kwargs: Any) -> tuple[str, Any]:
        config: RunnableConfig = {"callbacks": run_manager.get_child()} if run_manager else {}
        call = self._call(kwargs)

        def go() -> Any:
            return self.inner.invoke(call, config)

        try:
            out = go() if self.timeout_s is None else _in_thread(go, self.timeout_s, self.name)
        except ToolFailed:
            raise
        except Exception as err:  # noqa: BLE001 - every failure becomes an error result
            raise ToolFailed(_describe(err)) from err
        return self._result(out)

    async def _arun(self, *args: Any, run_manager: AsyncCallbackManagerForToolRun | None = None,
                    **kwargs: Any) -> tuple[str, Any]:
        config: RunnableConfig = {"callbacks": run_manager.get_child()} if run_manager else {}
        call = self._call(kwargs)
        try:
            if _natively_async(self.inner):
                try:
                    out = await asyncio.wait_for(self.inner.ainvoke(call, config), self.timeout_s)
                except TimeoutError:
                    raise ToolFailed(f"tool {self.name!r} timed out after "
                                     f"{self.timeout_s:g} s") from None
            else:
                out = await _awaited_in_thread(lambda: self.inner.invoke(call, config),
                                               self.timeout_s, self.name)
        except ToolFailed:
            raise
        except Exception as err:  # noqa: BLE001 - every failure becomes an error result
            raise ToolFailed(_describe(err)) from err
        return self._result(out)


def safe_tool(tool: BaseTool | Callable[..., Any], *,
              timeout_s: float | None = DEFAULT_TOOL_TIMEOUT_S,
              limit: int = MAX_TOOL_RESULT_CHARS) -> SafeTool:
    """``tool`` (a LangChain tool, or a typed function with a docstring) safe for a batch.

    The result keeps the tool's name, description and arguments. ``timeout_s``
    ``None`` waits for ever; ``limit`` is the most characters a result keeps
    (the cut note included). Wrapping a :class:`SafeTool` again replaces its
    settings rather than nesting it.

    Raises:
        ConfigError: for a ``timeout_s`` that is not positive, or a ``limit`` under 80.
    """
    if timeout_s is not None and (isinstance(timeout_s, bool)
                                  or not isinstance(timeout_s, (int, float)) or timeout_s <= 0):
        raise ConfigError(f"timeout_s must be a positive number of seconds or None, "
                          f"got {timeout_s!r}")
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 80:
        raise ConfigError(f"limit must be an int >= 80 characters, got {limit!r}")
    if isinstance(tool, SafeTool):
        tool = tool.inner
    elif not isinstance(tool, BaseTool):
        if not callable(tool):
            raise ConfigError(f"safe_tool needs a LangChain tool or a function, got "
                              f"{type(tool).__name__}")
        tool = as_tool(tool)
    return SafeTool(name=tool.name, description=tool.description, args_schema=tool.args_schema,
                    inner=tool, timeout_s=timeout_s, limit=limit, return_direct=tool.return_direct,
                    tags=tool.tags, metadata=tool.metadata)
