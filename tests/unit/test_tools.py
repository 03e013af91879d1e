"""Ready tools: the calculator's arithmetic and refusals, safe_tool's error results, timeouts
and caps (sync, async, inside a LangGraph ToolNode), and the lookup tools."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest
from langchain_core.messages import AIMessage, ToolMessage
from langchain_core.tools import BaseTool, StructuredTool, tool
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode

from agentic_loop.episodes import MAX_TOOL_RESULT_CHARS, episode_from_messages
from agentic_loop.errors import AgenticLoopError, ConfigError
from agentic_loop.tools import (
    ELEMENTS,
    REFERENCE_TABLE,
    UNITS,
    CalculatorError,
    SafeTool,
    ToolFailed,
    calculate,
    calculator,
    cut_note,
    lookup_key,
    lookup_tool,
    reference_lookup,
    safe_tool,
)

NINE_MB = 9 * 1024 * 1024


def call(tool_: BaseTool, **args: Any) -> ToolMessage:
    """Invoke ``tool_`` as a model's tool call does, so the result is a ToolMessage."""
    out = tool_.invoke({"type": "tool_call", "name": tool_.name, "args": args, "id": "c1"})
    assert isinstance(out, ToolMessage)
    return out


@tool
def huge(n: int) -> str:
    """Return ``n`` characters."""
    return "y" * n


@tool
def sleepy(seconds: float) -> str:
    """Sleep, then say so."""
    time.sleep(seconds)
    return "woke"


@tool
def boom(text: str) -> str:
    """Always raise."""
    raise RuntimeError(f"kaput {text}")


# ------------------------------------------------------------------ calculator

@pytest.mark.parametrize(("expression", "value"), [
    ("53 * 47", "2491"), ("53*47", "2491"), ("53 × 47", "2491"), ("53 x 47", "2491"),
    ("1234 * 5678", "7006652"), ("12,345 + 67,890", "80235"), ("2,491", "2491"),
    ("(2 + 3) * 4", "20"), ("-(2 - 5)", "3"), ("+7", "7"), ("7 / 2", "3.5"),
    ("7 // 2", "3"), ("-7 // 2", "-4"), ("7 % 3", "1"), ("2 ** 10", "1024"), ("2^10", "1024"),
    ("10 ** -2", "0.01"), ("0.1 + 0.2", "0.3"), ("1.5 * 4", "6"), ("2.50 * 2", "5"),
    ("1 / 3", "0.333333333333"), ("22 / 7", "3.14285714286"), ("9 ÷ 4", "2.25"),
    ("5 − 8", "-3"), ("2 ** 0.5", "1.41421356237"), ("1e3 * 2", "2000"),
    ("123456789 * 987654321", "121932631112635269"), ("10 ** 99", "1" + "0" * 99),
    ("1609.344 * 7", "11265.408"),
])
def test_calculator_is_exact(expression: str, value: str) -> None:
    assert calculate(expression) == value
    assert calculator.invoke({"expression": expression}) == value


@pytest.mark.parametrize(("expression", "why"), [
    ("__import__('os').system('true')", "function call"),
    ("open('/etc/passwd')", "function call"),
    ("x + 1", "a name"),
    ("(1).real", "attribute"),
    ("1 < 2", "comparison"),
    ("[1, 2][0]", "index"),
    ("'a' * 3", "literal"),
    ("True + 1", "literal"),
    ("1, 2", "comma"),
    ("1 +", "not an arithmetic expression"),
    ("lambda: 1", "lambda"),
    ("1 / 0", "division by zero"),
    ("5 // 0", "division by zero"),
    ("5 % 0", "division by zero"),
    ("0 ** -1", "division by zero"),
    ("2 ** 100000", "exponent is over 1000"),
    ("9 ** 999", "too large"),
    ("10 ** 100", "too large"),
    ("1e300 * 1e300", "too large"),
    ("(-8) ** (1 / 3)", "fractional power"),
    ("2 ** 2 ** 2 ** 2 ** 2", "exponent is over"),
    ("3 ** 3 ** 5", "too large"),
])
def test_calculator_refuses_with_a_reason(expression: str, why: str) -> None:
    with pytest.raises(CalculatorError, match=why):
        calculate(expression)
    result = call(calculator, expression=expression)
    assert result.status == "error" and why in result.content


def test_calculator_refuses_long_and_empty_expressions_quickly() -> None:
    started = time.monotonic()
    for expression in ("1+" * 400 + "1", "", "   ", "9" * 200 + " * 2"):
        assert call(calculator, expression=expression).status == "error"
    assert time.monotonic() - started < 2.0
    with pytest.raises(CalculatorError, match="at most 500"):
        calculate("1+" * 400 + "1")


def test_calculator_errors_are_the_packages_and_the_tools() -> None:
    from langchain_core.tools import ToolException

    assert issubclass(CalculatorError, AgenticLoopError)
    assert issubclass(CalculatorError, ToolException)
    with pytest.raises(CalculatorError, match="non-empty string"):
        calculate(53)  # type: ignore[arg-type]


def test_calculator_arguments_are_one_flat_string() -> None:
    schema = calculator.tool_call_schema.model_json_schema()
    assert schema["required"] == ["expression"]
    assert schema["properties"]["expression"]["type"] == "string"
    assert calculator.name == "calculator" and "53 * 47" in calculator.description


# ------------------------------------------------------------------ safe_tool

def test_a_raising_tool_gives_an_error_result() -> None:
    safe = safe_tool(boom)
    result = call(safe, text="now")
    assert (result.status, result.content) == ("error", "RuntimeError: kaput now")
    assert safe.invoke({"text": "now"}) == "RuntimeError: kaput now"  # plain input: the text


def test_invalid_arguments_give_an_error_result_naming_the_field() -> None:
    result = call(calculator, expr="1")
    assert result.status == "error"
    assert "expression" in result.content and "Field required" in result.content


def test_a_hanging_tool_times_out_as_an_error_result() -> None:
    safe = safe_tool(sleepy, timeout_s=0.2)
    started = time.monotonic()
    result = call(safe, seconds=5)
    assert time.monotonic() - started < 2.0
    assert result.status == "error" and "timed out after 0.2 s" in result.content
    assert call(safe, seconds=0).content == "woke"


def test_nine_megabytes_are_cut_to_the_limit_and_the_record_keeps_the_length() -> None:
    safe = safe_tool(huge)
    started = time.monotonic()
    result = call(safe, n=NINE_MB)
    assert time.monotonic() - started < 5.0
    assert result.status == "success"
    assert len(result.content) <= MAX_TOOL_RESULT_CHARS
    assert result.content.endswith(cut_note(NINE_MB))
    assert result.artifact == {"cut_from": NINE_MB}
    asked = AIMessage("", tool_calls=[{"name": "huge", "args": {"n": NINE_MB}, "id": "c1"}])
    step = episode_from_messages([asked, result]).tool_steps[0]
    assert step.cut_from == NINE_MB and len(step.content) <= MAX_TOOL_RESULT_CHARS


def test_a_short_result_is_untouched_and_keeps_the_tools_artifact() -> None:
    def with_artifact(x: int) -> tuple[str, dict[str, int]]:
        """Echo with an artifact."""
        return str(x), {"x": x}

    inner = StructuredTool.from_function(with_artifact, response_format="content_and_artifact")
    result = call(safe_tool(inner), x=3)
    assert (result.content, result.artifact, result.status) == ("3", {"x": 3}, "success")


def test_a_tool_that_returns_an_error_result_stays_an_error() -> None:
    inner = StructuredTool.from_function(boom.func, name="boom", description="raises",
                                         handle_tool_error=True)
    result = call(safe_tool(inner), text="x")
    assert result.status == "error" and "kaput x" in result.content


def test_safe_tool_keeps_the_name_description_and_schema() -> None:
    safe = safe_tool(huge, limit=500)
    assert (safe.name, safe.description) == (huge.name, huge.description)
    assert safe.tool_call_schema.model_json_schema() == huge.tool_call_schema.model_json_schema()
    again = safe_tool(safe, timeout_s=1.0)
    assert again.inner is huge and again.timeout_s == 1.0 and again.limit == MAX_TOOL_RESULT_CHARS


def test_safe_tool_wraps_a_plain_function() -> None:
    def double(x: int) -> int:
        """Double a number."""
        return 2 * x

    safe = safe_tool(double)
    assert isinstance(safe, SafeTool) and safe.name == "double"
    assert call(safe, x=21).content == "42"


@pytest.mark.parametrize("bad", [{"timeout_s": 0}, {"timeout_s": -1}, {"timeout_s": True},
                                 {"limit": 10}, {"limit": 1.5}])
def test_safe_tool_refuses_bad_settings(bad: dict[str, Any]) -> None:
    with pytest.raises(ConfigError):
        safe_tool(huge, **bad)
    with pytest.raises(ConfigError, match="LangChain tool or a function"):
        safe_tool(42)  # type: ignore[arg-type]


def test_async_calls_are_safe_too() -> None:
    async def main() -> list[ToolMessage]:
        calls = [(safe_tool(boom), {"text": "a"}), (safe_tool(sleepy, timeout_s=0.2),
                                                    {"seconds": 5}),
                 (safe_tool(huge), {"n": NINE_MB}), (calculator, {"expression": "53*47"})]
        return list(await asyncio.gather(*(
            t.ainvoke({"type": "tool_call", "name": t.name, "args": a, "id": "c"})
            for t, a in calls)))

    started = time.monotonic()
    raised, late, cut, ok = asyncio.run(main())
    assert time.monotonic() - started < 3.0  # the hung thread does not hold up the loop's end
    assert raised.status == late.status == "error" and "timed out" in late.content
    assert cut.artifact == {"cut_from": NINE_MB} and ok.content == "2491"


def test_an_async_tool_times_out() -> None:
    async def nap(seconds: float) -> str:
        """Sleep asynchronously."""
        await asyncio.sleep(seconds)
        return "woke"

    safe = safe_tool(StructuredTool.from_function(coroutine=nap, name="nap", description="nap"),
                     timeout_s=0.2)
    result = asyncio.run(safe.ainvoke({"type": "tool_call", "name": "nap",
                                       "args": {"seconds": 5}, "id": "c"}))
    assert result.status == "error" and "timed out after 0.2 s" in result.content


def test_a_tool_node_batch_survives_raising_hanging_and_huge_tools() -> None:
    tools = [calculator, safe_tool(boom), safe_tool(sleepy, timeout_s=0.2), safe_tool(huge)]
    graph = StateGraph(MessagesState)
    graph.add_node("tools", ToolNode(tools))
    graph.add_edge(START, "tools")
    graph.add_edge("tools", END)
    asked = AIMessage("", tool_calls=[
        {"name": "calculator", "args": {"expression": "53 * 47"}, "id": "1"},
        {"name": "boom", "args": {"text": "x"}, "id": "2"},
        {"name": "sleepy", "args": {"seconds": 5}, "id": "3"},
        {"name": "huge", "args": {"n": NINE_MB}, "id": "4"},
    ])
    messages = graph.compile().invoke({"messages": [asked]})["messages"]
    episode = episode_from_messages(messages)
    assert episode.results_of("calculator") == ["2491"]
    assert [s.name for s in episode.tool_errors] == ["boom", "sleepy"]
    assert episode.tool_steps[3].cut_from == NINE_MB


def test_tool_failed_is_a_tool_exception_of_the_package() -> None:
    from langchain_core.tools import ToolException

    assert issubclass(ToolFailed, AgenticLoopError) and issubclass(ToolFailed, ToolException)


# ------------------------------------------------------------------ lookup

def test_lookup_matches_keys_forgivingly() -> None:
    table = lookup_tool({"Nautical mile": "1852 m", "inch": "0.0254 m", "foot": "0.3048 m",
                         "berry": "fruit"}, name="units")
    for key, value in [("nautical-mile", "1852 m"), ("  NAUTICAL   MILE ", "1852 m"),
                       ("inches", "0.0254 m"), ("feet", "0.3048 m"), ("berries", "fruit")]:
        assert call(table, key=key).content == value
    missing = call(table, key="foo")
    assert missing.status == "error" and 'no entry "foo" in units' in missing.content
    assert "foot" in call(table, key="fooot").content  # closest keys are named


def test_lookup_describes_itself_and_refuses_bad_tables() -> None:
    tool_ = lookup_tool({"a": "1"})
    assert tool_.name == "lookup" and "a" in tool_.description
    assert tool_.tool_call_schema.model_json_schema()["required"] == ["key"]
    for bad in ({}, {"a": 1}, {"": "x"}, {"Mile": "1", "mile": "2"}, ["a"]):
        with pytest.raises(ConfigError):
            lookup_tool(bad)  # type: ignore[arg-type]
    assert lookup_key("U.S. Gallon") == "us gallon"


def test_the_reference_table_holds_every_unit_and_element() -> None:
    for unit in UNITS:
        assert call(reference_lookup, key=unit.plural).content == REFERENCE_TABLE[unit.name]
        assert unit.factor in REFERENCE_TABLE[unit.name]
    for element in ELEMENTS:
        entry = call(reference_lookup, key=element.name.upper()).content
        assert f"atomic number {element.number}," in entry and element.weight in entry
    assert call(reference_lookup, key="lb").content == "1 pound = 0.45359237 kilograms"
    assert call(reference_lookup, key="gallons").content == "1 US gallon = 3.785411784 liters"


def test_reference_factors_are_the_exact_definitions() -> None:
    from decimal import Decimal

    factor = {u.name: Decimal(u.factor) for u in UNITS}
    assert factor["foot"] == 12 * factor["inch"] and factor["yard"] == 3 * factor["foot"]
    assert factor["mile"] == 1760 * factor["yard"] and factor["chain"] == 22 * factor["yard"]
    assert factor["furlong"] == 10 * factor["chain"] and factor["fathom"] == 2 * factor["yard"]
    assert factor["stone"] == 14 * factor["pound"] and factor["short ton"] == 2000 * factor["pound"]
    assert factor["long ton"] == 2240 * factor["pound"]
    assert factor["ounce"] * 16 == factor["pound"] * 1000  # grams vs kilograms
    assert factor["us gallon"] == 231 * (factor["inch"] * 10) ** 3  # dm^3 = liters
    assert factor["us quart"] * 4 == factor["us gallon"] == factor["us pint"] * 8
    assert factor["us fluid ounce"] * 128 == factor["us gallon"] * 1000
    assert factor["imperial pint"] * 8 == factor["imperial gallon"]
    assert factor["acre"] == 43560 * factor["foot"] ** 2 == 4840 * factor["yard"] ** 2
    assert factor["square mile"] * 10 ** 6 == factor["mile"] ** 2
    assert factor["square foot"] == factor["foot"] ** 2
    assert [e.number for e in ELEMENTS] == sorted({e.number for e in ELEMENTS})
