"""The embedded model behaves like a chat model: real token counts, tool calls under a grammar,
a LangGraph ReAct tool loop offline, and TypedDict structured output."""

from __future__ import annotations

import warnings

import pytest
from langchain_core.messages import (
    AIMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
    trim_messages,
)
from langchain_core.tools import tool
from typing_extensions import TypedDict

pytestmark = pytest.mark.slow

#: Greedy and short: each call costs seconds on a CPU.
FAST = {"temperature": 0.0, "max_tokens": 24}


@tool
def multiply(a: int, b: int) -> int:
    """Multiply two integers."""
    return a * b


def test_token_counts_use_the_real_tokenizer_and_trim_messages_works(local_llm):
    tokenizer = local_llm.engine.tokenizer
    text = "Hello world, how are you?"
    assert local_llm.get_num_tokens(text) == len(tokenizer.encode(text)) > 0
    system, first, second = (SystemMessage("Be brief."), HumanMessage("one two three"),
                             HumanMessage("four five six seven"))
    count = local_llm.get_num_tokens_from_messages
    parts = [count([system]), count([first]), count([second])]
    assert all(n > 0 for n in parts) and count([system, first, second]) == sum(parts)
    assert count([first], tools=[multiply]) > count([first])  # the tools are in the prompt
    kept = trim_messages([system, first, second], max_tokens=parts[0] + parts[2],
                         token_counter=local_llm, strategy="last", include_system=True)
    assert kept == [system, second]


def test_a_forced_call_is_valid_and_streams_as_a_tool_call(local_llm):
    bound = local_llm.bind_tools([multiply], tool_choice="multiply", **FAST)
    reply = bound.invoke("Compute 12 times 3.")
    [call] = reply.tool_calls
    assert call["name"] == "multiply" and set(call["args"]) == {"a", "b"}
    assert all(isinstance(v, int) for v in call["args"].values())
    assert reply.response_metadata["grammar_complete"] is True
    chunks = list(bound.stream("Compute 12 times 3."))
    merged = chunks[0]
    for chunk in chunks[1:]:
        merged += chunk
    assert [c["args"] for c in merged.tool_calls] == [call["args"]]  # greedy: the same call


def test_auto_is_text_or_a_valid_call(local_llm):
    replies = local_llm.bind_tools([multiply], **FAST).batch(
        ["Compute 12 times 3.", "Say hello to Ann.", "Use the multiply tool on 4 and 5."])
    for reply in replies:
        assert isinstance(reply, AIMessage) and not reply.invalid_tool_calls
        if reply.tool_calls:
            assert reply.content == "" and reply.tool_calls[0]["name"] == "multiply"
        else:
            assert reply.content.strip() and not reply.content.lstrip().startswith("{")


def test_create_react_agent_calls_a_python_tool_and_uses_its_result(local_llm):
    from langgraph.prebuilt import create_react_agent

    calls: list[dict[str, int]] = []

    @tool
    def multiply_numbers(a: int, b: int) -> int:
        """Multiply two integers."""
        calls.append({"a": a, "b": b})
        return a * b

    def model(state, runtime):
        # Force a call first, then forbid one: a deterministic two-step loop for a 135M model.
        done = any(isinstance(m, ToolMessage) for m in state["messages"])
        return local_llm.bind_tools([multiply_numbers], tool_choice="none" if done else "any",
                                    **FAST)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # it warns that it moved to langchain.agents
        agent = create_react_agent(model, [multiply_numbers])
    state = agent.invoke({"messages": [HumanMessage("Compute 12 times 3.")]},
                         {"recursion_limit": 6})
    asked, called, result, answer = state["messages"]
    assert len(calls) == 1 and called.tool_calls[0]["args"] == calls[0]
    product = str(calls[0]["a"] * calls[0]["b"])
    assert isinstance(result, ToolMessage) and result.content == product
    assert isinstance(answer, AIMessage) and not answer.tool_calls
    assert product in answer.content  # the model used the tool's result


def test_structured_output_with_a_typed_dict(local_llm):
    class Answer(TypedDict):
        value: int
        unit: str

    out = local_llm.with_structured_output(Answer).invoke("How tall is a door, in cm?", **FAST)
    assert isinstance(out, dict) and set(out) == {"value", "unit"}
    assert isinstance(out["value"], int) and isinstance(out["unit"], str)
