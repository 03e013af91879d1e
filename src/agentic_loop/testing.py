"""Test doubles for code that talks to a chat model.

langchain-core's fake chat models replay text, but they cannot answer
``with_structured_output`` and they do not record what they were asked. Loops
in this library call both, so unit tests need a model that follows a script
for each and keeps a log of every call.

Example:
    >>> from pydantic import BaseModel
    >>> class Verdict(BaseModel):
    ...     ok: bool
    >>> fake = ScriptedChatModel(responses=["first draft", "second draft"],
    ...                          structured={"Verdict": [{"ok": False}, {"ok": True}]})
    >>> fake.invoke("write").content
    'first draft'
    >>> fake.with_structured_output(Verdict).invoke("judge")
    Verdict(ok=False)
    >>> [c.kind for c in fake.calls]
    ['text', 'structured']

A response may be an ``AIMessage`` with tool calls, to script a tool-using
agent; ``bind_tools`` records the tools bound (``call.kwargs["tools"]``):

    >>> agent = ScriptedChatModel(responses=[
    ...     AIMessage("", tool_calls=[{"name": "calc", "args": {"x": "2+2"}, "id": "c1"}]),
    ...     "4"])
    >>> agent.bind_tools([]).invoke("2+2?").tool_calls[0]["name"]
    'calc'
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel, LanguageModelInput
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.runnables import Runnable, RunnableLambda
from pydantic import BaseModel, PrivateAttr

from agentic_loop.errors import AgenticLoopError, ConfigError

TextScript = (str | AIMessage | BaseException
              | Callable[[list[BaseMessage]], str | AIMessage])
StructuredScript = (Mapping[str, Any] | BaseModel | BaseException
                    | Callable[[type[BaseModel], list[BaseMessage]], Any])

__all__ = ["ScriptedCall", "ScriptedChatModel", "ScriptExhausted"]


class ScriptExhausted(AgenticLoopError, AssertionError):
    """The test asked the fake for more answers than its script holds.

    An ``AssertionError`` too, so a test framework reports it as a failed test.
    """


@dataclass
class ScriptedCall:
    """One recorded call: ``kind`` is ``"text"`` or ``"structured"``."""

    kind: str
    messages: list[BaseMessage]
    schema_name: str | None = None
    kwargs: dict[str, Any] = field(default_factory=dict)

    @property
    def prompt(self) -> str:
        """All message contents joined, for ``assert "x" in call.prompt``."""
        return "\n".join(str(m.content) for m in self.messages)


class ScriptedChatModel(BaseChatModel):
    """A chat model that answers from a script and records every call.

    ``responses`` answer plain calls in order. ``structured`` answers
    ``with_structured_output(Schema)`` calls, keyed by ``Schema.__name__``
    (or ``"*"`` for any schema), in order. An item may be a value, an
    exception instance (raised, to test error paths) or a callable computing
    the answer from the messages. When a script runs out, ``default`` /
    ``default_structured`` answer if set, otherwise :class:`ScriptExhausted`
    is raised, so a test never silently loops.
    """

    responses: list[Any] = []
    structured: dict[str, list[Any]] = {}
    default: Any = None
    default_structured: Any = None
    model_id: str = "scripted"

    _calls: list[ScriptedCall] = PrivateAttr(default_factory=list)
    _text_pos: int = PrivateAttr(default=0)
    _struct_pos: dict[str, int] = PrivateAttr(default_factory=dict)

    @property
    def _llm_type(self) -> str:
        return "scripted"

    @property
    def calls(self) -> list[ScriptedCall]:
        """Every call so far, oldest first."""
        return self._calls

    def _next_text(self, messages: list[BaseMessage]) -> str | AIMessage:
        if self._text_pos < len(self.responses):
            item = self.responses[self._text_pos]
            self._text_pos += 1
        elif self.default is not None:
            item = self.default
        else:
            raise ScriptExhausted(
                f"ScriptedChatModel has no text response left after {self._text_pos} calls; "
                "add more `responses=` or set `default=`"
            )
        if isinstance(item, BaseException):
            raise item
        if callable(item):
            item = item(messages)
        return item if isinstance(item, AIMessage) else str(item)

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        self._calls.append(ScriptedCall("text", list(messages), kwargs=dict(kwargs)))
        item = self._next_text(list(messages))
        scripted = item if isinstance(item, AIMessage) else AIMessage(content=item)
        n_in = sum(len(str(m.content).split()) for m in messages)
        n_out = len(str(scripted.content).split()) + len(scripted.tool_calls)
        msg = AIMessage(
            content=scripted.content, tool_calls=scripted.tool_calls,
            usage_metadata={"input_tokens": n_in, "output_tokens": n_out,
                            "total_tokens": n_in + n_out},
            response_metadata={"model_name": self.model_id},
        )
        return ChatResult(generations=[ChatGeneration(message=msg)])

    def _next_structured(self, schema: type[BaseModel], messages: list[BaseMessage]) -> BaseModel:
        name = schema.__name__
        key = name if name in self.structured else "*"
        queue: Sequence[Any] = self.structured.get(key, [])
        pos = self._struct_pos.get(key, 0)
        if pos < len(queue):
            item = queue[pos]
            self._struct_pos[key] = pos + 1
        elif self.default_structured is not None:
            item = self.default_structured
        else:
            raise ScriptExhausted(
                f"ScriptedChatModel has no structured answer left for schema {name!r} "
                f"after {pos} calls; add more to `structured[{name!r}]` or set "
                "`default_structured=`"
            )
        if isinstance(item, BaseException):
            raise item
        if callable(item) and not isinstance(item, BaseModel):
            item = item(schema, messages)
        if isinstance(item, BaseModel):
            item = item.model_dump()
        return schema.model_validate(item)

    def bind_tools(self, tools: Sequence[Any], *, tool_choice: Any = None,
                   **kwargs: Any) -> Runnable[LanguageModelInput, AIMessage]:
        """Bind ``tools`` (recorded with each call as ``kwargs["tools"]``); the script decides
        whether an answer calls one (an ``AIMessage`` response with ``tool_calls``)."""
        names = [getattr(t, "name", None) or getattr(t, "__name__", repr(t)) for t in tools]
        bound: dict[str, Any] = {"tools": names, **kwargs}
        if tool_choice is not None:
            bound["tool_choice"] = tool_choice
        return self.bind(**bound)

    def with_structured_output(
        self, schema: Any, *, include_raw: bool = False, **kwargs: Any
    ) -> Runnable[LanguageModelInput, Any]:
        if not (isinstance(schema, type) and issubclass(schema, BaseModel)):
            raise ConfigError(f"ScriptedChatModel.with_structured_output got {schema!r}; "
                              "pass a pydantic model class")

        def answer(value: LanguageModelInput, **call_kwargs: Any) -> Any:
            # Keyword arguments bound around the structured runnable (``.bind(...)``) arrive
            # here, as they reach a real model's call; they are recorded with the call.
            messages = self._convert_input(value).to_messages()
            self._calls.append(ScriptedCall("structured", messages, schema.__name__,
                                            {**kwargs, **call_kwargs}))
            parsed = self._next_structured(schema, messages)
            if include_raw:
                raw = AIMessage(content=parsed.model_dump_json())
                return {"raw": raw, "parsed": parsed, "parsing_error": None}
            return parsed

        return RunnableLambda(answer, name=f"structured[{schema.__name__}]")
