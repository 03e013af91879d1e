"""Tool calling for local models without loading one: plans, call schemas, the text-or-call
grammar, reading replies, and the prompt (tools described, calls and results written back)."""

from __future__ import annotations

import json

import pytest
from langchain_core.messages import (
    AIMessage,
    AIMessageChunk,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)
from langchain_core.tools import tool
from pydantic import BaseModel, Field

from agentic_loop.errors import ConfigError
from agentic_loop.models.engine.grammar import PLAIN_TEXT_PATTERN
from agentic_loop.models.structured_output import message_text
from agentic_loop.models.tools import ToolPlan, as_chunk, chat_dicts


@tool
def multiply(a: int, b: int) -> int:
    """Multiply two integers."""
    return a * b


class Lookup(BaseModel):
    """Look a word up in the dictionary."""

    word: str = Field(description="The word.")


def role_of(message):
    return {"system": "system", "human": "user", "ai": "assistant"}.get(message.type, "tool")


@pytest.mark.parametrize(("choice", "callable_names", "forced"), [
    (None, ("multiply", "Lookup"), False),
    ("auto", ("multiply", "Lookup"), False),
    ("any", ("multiply", "Lookup"), True),
    ("required", ("multiply", "Lookup"), True),
    (True, ("multiply", "Lookup"), True),
    ("Lookup", ("Lookup",), True),
    ({"type": "function", "function": {"name": "multiply"}}, ("multiply",), True),
    ("none", (), False),
])
def test_tool_choice_decides_what_may_be_called(choice, callable_names, forced):
    plan = ToolPlan.of([multiply, Lookup], choice)
    assert (plan.callable_names, plan.forced) == (callable_names, forced)
    assert plan.names == ("multiply", "Lookup")


def test_an_unknown_tool_choice_or_tool_is_a_config_error():
    with pytest.raises(ConfigError, match="names no bound tool"):
        ToolPlan.of([multiply], "divide")
    with pytest.raises(ConfigError, match="cannot use 42 as a tool"):
        ToolPlan.of([42])


def test_a_call_schema_names_the_tool_and_closes_its_arguments():
    one = ToolPlan.of([multiply], "multiply").call_schema()
    assert one["properties"]["name"] == {"const": "multiply"}
    assert one["required"] == ["name", "arguments"] and one["additionalProperties"] is False
    arguments = one["properties"]["arguments"]
    assert arguments["additionalProperties"] is False and arguments["required"] == ["a", "b"]
    both = ToolPlan.of([multiply, Lookup], "any").call_schema()
    assert [o["properties"]["name"]["const"] for o in both["anyOf"]] == ["multiply", "Lookup"]
    word = both["anyOf"][1]["properties"]["arguments"]["properties"]["word"]
    assert word["pattern"] == PLAIN_TEXT_PATTERN  # strings bounded as for structured answers


def test_auto_is_text_or_one_call_and_forced_is_json_only():
    lark = ToolPlan.of([multiply]).lark()
    assert lark is not None and "start: call | TEXT" in lark
    call = json.loads(lark.split("call: %json ", 1)[1].split("\n", 1)[0])
    assert call["x-guidance"] == {"whitespace_flexible": False}
    assert call["properties"]["name"] == {"const": "multiply"}
    assert ToolPlan.of([multiply], "any").lark() is None
    assert ToolPlan.of([multiply], "none").lark() is None


def test_replies_become_tool_calls_or_text():
    plan = ToolPlan.of([multiply, Lookup])
    call = plan.message('{"name":"multiply","arguments":{"a":6,"b":7}}',
                        response_metadata={"finish_reason": "stop"})
    assert call.content == "" and call.response_metadata["finish_reason"] == "stop"
    [made] = call.tool_calls
    assert (made["name"], made["args"], made["type"]) == ("multiply", {"a": 6, "b": 7},
                                                          "tool_call")
    assert made["id"].startswith("call_")
    assert plan.message("It is 42.").content == "It is 42." and not plan.message("x").tool_calls
    cut = plan.message('{"name":"multiply","argu')  # out of tokens mid-call
    assert not cut.tool_calls and "max_tokens" in cut.invalid_tool_calls[0]["error"]
    stranger = plan.message('{"name":"divide","arguments":{}}')
    assert not stranger.tool_calls and stranger.invalid_tool_calls
    assert ToolPlan.of([multiply], "none").message('{"a": 1}').content == '{"a": 1}'


def test_a_streamed_call_is_one_chunk_that_merges_back_into_the_call():
    message = ToolPlan.of([multiply]).message('{"name":"multiply","arguments":{"a":2,"b":3}}')
    chunk = as_chunk(message)
    assert isinstance(chunk, AIMessageChunk) and chunk.chunk_position == "last"
    merged = AIMessageChunk(content="") + chunk
    assert [(c["name"], c["args"]) for c in merged.tool_calls] == [("multiply", {"a": 2, "b": 3})]


def test_the_prompt_describes_the_tools_and_writes_calls_and_results_back():
    history = [
        SystemMessage("Be brief."),
        HumanMessage("What is 6 times 7?"),
        AIMessage("", tool_calls=[{"name": "multiply", "args": {"a": 6, "b": 7}, "id": "c1"}]),
        ToolMessage("42", tool_call_id="c1", name="multiply"),
    ]
    plan = ToolPlan.of([multiply])
    chat = chat_dicts(history, plan, role_of=role_of, text_of=message_text, tool_role=False)
    system, user, call, result = chat
    assert system["role"] == "system" and system["content"].startswith("Be brief.\n\n")
    assert "- multiply: Multiply two integers." in system["content"]
    assert '{"name": "<tool name>", "arguments": {...}}' in system["content"]
    assert user == {"role": "user", "content": "What is 6 times 7?"}
    assert call == {"role": "assistant", "content": "I called multiply(a=6, b=7)."}
    assert result == {"role": "user", "content": "The tool multiply returned: 42"}
    native = chat_dicts(history[1:], plan, role_of=role_of, text_of=message_text,
                        tool_role=True)
    assert native[0]["role"] == "system" and native[-1] == {"role": "tool", "content": "42"}
    quiet = chat_dicts(history[1:2], ToolPlan.of([multiply], "none"), role_of=role_of,
                       text_of=message_text, tool_role=False)
    assert quiet == [{"role": "user", "content": "What is 6 times 7?"}]  # nothing to call
