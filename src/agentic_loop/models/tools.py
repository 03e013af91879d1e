"""Tool calling for local models: tools in the prompt, calls decoded under a grammar.

A 135M model asked to emit a tool call in JSON gets the JSON wrong most of the
time, and a tool loop (``langgraph.prebuilt.create_react_agent``) then stalls
on text it cannot run. As with structured output, the answer is decoded under
a grammar, so a call is always valid JSON naming a bound tool with arguments
that match its schema:

* ``tool_choice`` ``None`` / ``"auto"``: the answer is *either* plain text
  (its first character is not ``{``) *or* one call
  ``{"name": <tool>, "arguments": {...}}``; the model picks at its first token;
* ``"any"`` / ``"required"`` / ``True``: one call of any bound tool;
* a tool's name (or ``{"type": "function", "function": {"name": ...}}``):
  one call of that tool;
* ``"none"``: plain text, no grammar.

One call per turn (no parallel calls). The prompt format is ours for every
model, whatever its chat template: the tools and the call format are
described in the system message, earlier calls are written back in words
(``I called multiply(a=6, b=7).``), and tool results go in as ``tool``
messages when the chat template knows that role, else as user messages that
name the tool.

Example:
    >>> from langchain_core.tools import tool
    >>> @tool
    ... def multiply(a: int, b: int) -> int:
    ...     '''Multiply two integers.'''
    ...     return a * b
    >>> plan = ToolPlan.of([multiply], "multiply")
    >>> plan.forced, plan.names
    (True, ('multiply',))
    >>> message = plan.message('{"name":"multiply","arguments":{"a":6,"b":7}}')
    >>> [(c["name"], c["args"]) for c in message.tool_calls]
    [('multiply', {'a': 6, 'b': 7})]
    >>> plan.message("Forty-two.").content
    'Forty-two.'
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from langchain_core.messages import (
    AIMessage,
    AIMessageChunk,
    BaseMessage,
    ChatMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)
from langchain_core.messages.tool import invalid_tool_call, tool_call, tool_call_chunk
from langchain_core.utils.function_calling import convert_to_openai_tool

from agentic_loop.errors import ConfigError
from agentic_loop.models.engine.grammar import constrained_json_schema
from agentic_loop.models.structured_output import message_text

__all__ = ["ToolPlan", "as_chunk", "call_json", "chat_dicts", "engine_chat", "message_role",
           "template_has_tool_role", "tool_specs"]

_ANY = ("any", "required")


def tool_specs(tools: Sequence[Any]) -> list[dict[str, Any]]:
    """OpenAI-format function specs of LangChain tools, functions, pydantic classes or dicts."""
    specs = []
    for item in tools:
        try:
            spec = convert_to_openai_tool(item)
        except Exception as exc:  # noqa: BLE001 - LangChain raises several kinds; one fix
            raise ConfigError(f"cannot use {item!r} as a tool: {exc}; pass a LangChain tool, a "
                              "typed function with a docstring, a pydantic class or an "
                              "OpenAI tool dict") from exc
        if spec.get("type") != "function":
            raise ConfigError(f"tool {item!r} is not a function tool; a local model can only "
                              "call function tools")
        specs.append(spec)
    return specs


def _chosen(names: tuple[str, ...], tool_choice: Any) -> tuple[tuple[str, ...], bool] | None:
    """``(callable tool names, forced)``, or None when no call may be made."""
    if tool_choice in (None, "auto", False):
        return names, False
    if tool_choice == "none":
        return None
    if tool_choice is True or tool_choice in _ANY:
        return names, True
    name = tool_choice
    if isinstance(tool_choice, dict):
        name = (tool_choice.get("function") or {}).get("name") or tool_choice.get("name")
    if isinstance(name, str) and name in names:
        return (name,), True
    raise ConfigError(f"tool_choice={tool_choice!r} names no bound tool; pass 'auto', 'any', "
                      f"'none' or one of {list(names)}")


@dataclass(frozen=True)
class ToolPlan:
    """What one request with tools may do: the tools' specs, which may be called, how."""

    specs: tuple[dict[str, Any], ...]
    callable_names: tuple[str, ...]  # empty when tool_choice is "none"
    forced: bool

    @classmethod
    def of(cls, tools: Sequence[Any], tool_choice: Any = None) -> ToolPlan:
        """The plan for ``tools`` (specs or anything :func:`tool_specs` takes)."""
        specs = tuple(tool_specs(tools))
        names = tuple(s["function"]["name"] for s in specs)
        chosen = _chosen(names, tool_choice)
        return cls(specs, chosen[0] if chosen else (), bool(chosen and chosen[1]))

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(s["function"]["name"] for s in self.specs)

    def call_schema(self) -> dict[str, Any]:
        """The JSON schema of one call of a callable tool (strings bounded as for answers)."""
        options = []
        for spec in self.specs:
            function = spec["function"]
            if function["name"] not in self.callable_names:
                continue
            params = function.get("parameters") or {"type": "object", "properties": {}}
            options.append({
                "type": "object",
                "properties": {"name": {"const": function["name"]},
                               "arguments": constrained_json_schema(params)},
                "required": ["name", "arguments"], "additionalProperties": False})
        return options[0] if len(options) == 1 else {"anyOf": options}

    def lark(self) -> str | None:
        """The Lark grammar of "text or one call" (``tool_choice="auto"``); None otherwise."""
        if self.forced or not self.callable_names:
            return None
        call = {**self.call_schema(), "x-guidance": {"whitespace_flexible": False}}
        return ("%llguidance {}\nstart: call | TEXT\n"
                f"call: %json {json.dumps(call)}\n"
                "TEXT: /[^{\\s][\\s\\S]*/\n")

    def system_text(self) -> str:
        """The tools and the call format, for the system message."""
        lines = ["You can call these tools:"]
        for spec in self.specs:
            function = spec["function"]
            props = (function.get("parameters") or {}).get("properties") or {}
            args = ", ".join(f'"{k}": {v.get("type", "value")}' for k, v in props.items())
            lines.append(f"- {function['name']}: {function.get('description', '').strip()} "
                         f"Arguments: {{{args}}}")
        lines.append('To call a tool, reply with only this JSON: '
                     '{"name": "<tool name>", "arguments": {...}}.')
        if not self.forced:
            lines.append("When you have what you need, answer the user in plain text.")
        return "\n".join(lines)

    def call_json(self, name: str, arguments: dict[str, Any]) -> str:
        """The text the engine decodes a call of ``name`` as (see :func:`call_json`)."""
        params = next((s["function"].get("parameters") for s in self.specs
                       if s["function"]["name"] == name), None)
        return call_json(name, arguments, params)

    def message(self, text: str, **fields: Any) -> AIMessage:
        """The model's reply as a message: a tool call when ``text`` is one, else text."""
        if not self.callable_names or not text.lstrip().startswith("{"):
            return AIMessage(content=text, **fields)
        call_id = f"call_{uuid.uuid4().hex[:24]}"
        try:
            data = json.loads(text)
        except ValueError as exc:
            data, problem = None, str(exc)
        name = data.get("name") if isinstance(data, dict) else None
        args = data.get("arguments") if isinstance(data, dict) else None
        if name in self.callable_names and isinstance(args, dict):
            return AIMessage(content="", tool_calls=[tool_call(name=name, args=args, id=call_id)],
                             **fields)
        if data is not None:
            problem = f"no call of a bound tool ({list(self.callable_names)}) with arguments"
        error = (f"the tool call is not valid: {problem}; raise max_tokens if the answer was "
                 "cut off")
        bad = invalid_tool_call(name=name if isinstance(name, str) else None, args=text,
                                id=call_id, error=error)
        return AIMessage(content="", invalid_tool_calls=[bad], **fields)


def as_chunk(message: AIMessage) -> AIMessageChunk:
    """A whole reply as the one (last) chunk of a stream, tool calls included."""
    chunks = [tool_call_chunk(name=c["name"], args=json.dumps(c["args"]), id=c["id"], index=i)
              for i, c in enumerate(message.tool_calls)]
    return AIMessageChunk(content=message.content, tool_call_chunks=chunks,
                          usage_metadata=message.usage_metadata,
                          response_metadata=message.response_metadata, chunk_position="last")


def call_json(name: str, arguments: dict[str, Any],
              parameters: dict[str, Any] | None = None) -> str:
    """One call exactly as the engine decodes it, so training can show the model that text.

    The grammar (``whitespace_flexible: False``) writes compact JSON, ``name``
    before ``arguments``, and the arguments in the order of the tool schema's
    ``properties`` (seen from SmolLM2 under ``bind_tools``:
    ``{"name":"calculator","arguments":{"expression":"53","precision":1}}``);
    keys the schema does not list come last, as given.

    >>> params = {"type": "object", "properties": {"a": {"type": "integer"},
    ...                                            "b": {"type": "integer"}}}
    >>> call_json("multiply", {"b": 7, "a": 6}, params)
    '{"name":"multiply","arguments":{"a":6,"b":7}}'
    """
    order = list((parameters or {}).get("properties") or {})
    ordered = {k: arguments[k] for k in order if k in arguments}
    ordered.update({k: v for k, v in arguments.items() if k not in ordered})
    return json.dumps({"name": name, "arguments": ordered}, separators=(",", ":"),
                      ensure_ascii=False)


def _call_text(message: AIMessage) -> str:
    """An earlier call written back in words, ``I called multiply(a=6, b=7).``

    Not as the JSON the model wrote: shown its own JSON, SmolLM2-135M copied it
    as its next answer instead of using the tool's result (it answered with
    the result when the call was written in words).
    """
    calls = ", ".join(
        f"{c['name']}({', '.join(f'{k}={json.dumps(v)}' for k, v in c['args'].items())})"
        for c in message.tool_calls)
    text = message.content if isinstance(message.content, str) else ""
    return f"{text.strip()}\nI called {calls}.".strip()


def chat_dicts(messages: Sequence[BaseMessage], plan: ToolPlan | None, *, role_of: Any,
               text_of: Any, tool_role: bool) -> list[dict[str, str]]:
    """Messages as chat-template dicts, with the tools described and calls written back.

    ``role_of`` / ``text_of`` map a message to its role and text; ``tool_role``
    says whether the chat template knows the ``tool`` role.
    """
    chat: list[dict[str, str]] = []
    for message in messages:
        if isinstance(message, AIMessage) and message.tool_calls:
            chat.append({"role": "assistant", "content": _call_text(message)})
        elif isinstance(message, ToolMessage) and not tool_role:
            name = message.name or "the tool"
            chat.append({"role": "user",
                         "content": f"The tool {name} returned: {text_of(message)}"})
        else:
            chat.append({"role": role_of(message), "content": text_of(message)})
    if plan is not None and plan.callable_names:  # "none": no call format to follow
        if messages and isinstance(messages[0], SystemMessage):
            chat[0]["content"] = f"{chat[0]['content']}\n\n{plan.system_text()}"
        else:
            chat.insert(0, {"role": "system", "content": plan.system_text()})
    return chat


def message_role(message: BaseMessage) -> str:
    """The chat-template role of a LangChain message (``ai`` -> ``assistant``, ...).

    >>> from langchain_core.messages import HumanMessage
    >>> message_role(HumanMessage("hi")), message_role(ToolMessage("4", tool_call_id="c"))
    ('user', 'tool')
    """
    if isinstance(message, SystemMessage):
        return "system"
    if isinstance(message, HumanMessage):
        return "user"
    if isinstance(message, AIMessage):
        return "assistant"
    if isinstance(message, ToolMessage):
        return "tool"
    if isinstance(message, ChatMessage):
        return message.role
    raise ConfigError(f"unsupported message type {type(message).__name__}; pass system, human, "
                      "AI, tool or chat messages")


def template_has_tool_role(chat_template: str | None) -> bool:
    """Whether a chat template knows the ``tool`` role (else results go in as user turns)."""
    return "tool" in (chat_template or "")


def engine_chat(messages: Sequence[BaseMessage], plan: ToolPlan | None,
                chat_template: str | None) -> list[dict[str, str]]:
    """``messages`` as the in-process engine renders them for a model with ``chat_template``.

    The one rendering that both inference (``LocalChatModel.prompt_ids``) and
    training (``distill.train.tool_format``) use, so a model is trained on the
    very prompt it is later shown.

    >>> from langchain_core.messages import HumanMessage
    >>> call = AIMessage("", tool_calls=[tool_call(name="f", args={"x": 1}, id="c1")])
    >>> engine_chat([HumanMessage("go"), call, ToolMessage("2", tool_call_id="c1", name="f")],
    ...             None, chat_template=None)[1:]
    [{'role': 'assistant', 'content': 'I called f(x=1).'}, \
{'role': 'user', 'content': 'The tool f returned: 2'}]
    """
    return chat_dicts(messages, plan, role_of=message_role, text_of=message_text,
                      tool_role=template_has_tool_role(chat_template))
