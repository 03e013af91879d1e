"""Checks over an agent's episode, on hand-built episodes (no model): tools called, errors,
step limits, verification, restated results; a plain model's answer; saving and loading."""

from __future__ import annotations

import json
from typing import Any

import pytest

from agentic_loop.episodes import Episode, ModelStep, ToolCall, ToolStep, judging_episode
from agentic_loop.errors import ConfigError
from agentic_loop.judges import EPISODE_KEYWORDS, Rubric, constraint_feature

TASK = "What is 53 * 47?"


def episode(*tools: tuple[str, dict[str, Any], str, str | None], final: str = "2491",
            extra_model_calls: int = 0) -> Episode:
    """An episode: one model call per tool (asking for it), its result, then the answer."""
    steps: list[ModelStep | ToolStep] = []
    for i, (name, args, content, error) in enumerate(tools):
        steps.append(ModelStep(tool_calls=[ToolCall(name=name, args=args, id=f"c{i}")]))
        steps.append(ToolStep(call_id=f"c{i}", name=name, args=args, content=content,
                              error=error))
    steps += [ModelStep(text="thinking") for _ in range(extra_model_calls)]
    steps.append(ModelStep(text=final))
    return Episode(steps=steps, final=final)


CALC = episode(("calculator", {"expression": "53*47"}, "2491", None),
               final="53 * 47 = 2,491.")


def check(keyword: str, value: Any, output: str, ep: Episode | None) -> tuple[Any, str]:
    feature = constraint_feature(keyword, value)
    with judging_episode(ep):
        result = feature.run_check(TASK, output)
    return result.value, result.detail


@pytest.mark.parametrize(("value", "ep", "expected"), [
    ("calculator", CALC, True),
    ("search", CALC, False),
    ({"name": "calculator", "args": {"expression": "53 * 47"}}, CALC, True),  # spaces ignored
    ({"name": "calculator", "args": {"expression": "47*53"}}, CALC, False),
    ("calculator", episode(("calculator", {}, "", "ZeroDivisionError")), False),  # it failed
    ("python", episode(("run_python", {"code": "print(53*47)"}, "2491", None)), True),
    (["calculator", "search"], CALC, False),
    (["calculator", "search"],
     episode(("calculator", {}, "1", None), ("web_search", {}, "x", None)), True),
    ("calculator", None, False),  # a plain model: nothing was called
])
def test_tool_called(value: Any, ep: Episode | None, expected: bool) -> None:
    assert check("tool_called", value, "53 * 47 = 2491", ep)[0] is expected


def test_tool_called_explains_what_ran() -> None:
    assert check("tool_called", "search", "x", CALC) == (
        False, "search never ran (tools that ran: calculator)")
    assert check("tool_called", "calculator", "x", None) == (
        False, "no tool ran (not an agent episode)")


def test_no_tool_errors() -> None:
    failing = episode(("calculator", {}, "", "division by zero"), ("calculator", {}, "4", None))
    assert check("no_tool_errors", True, "4", CALC)[0] is True
    assert check("no_tool_errors", True, "4", failing) == (
        False, "1 tool call(s) failed, first calculator: division by zero")
    assert check("no_tool_errors", True, "4", None)[0] is True  # nothing ran, nothing failed


@pytest.mark.parametrize(("keyword", "limit", "ep", "expected"), [
    ("max_steps", 2, CALC, True),                               # 2 model calls
    ("max_steps", 1, CALC, False),
    ("max_steps", 3, episode(extra_model_calls=3), False),      # 4 model calls
    ("max_steps", 1, None, True),                               # a plain model: one call
    ("max_tool_calls", 1, CALC, True),
    ("max_tool_calls", 0, CALC, False),
    ("max_tool_calls", 0, None, True),
])
def test_limits(keyword: str, limit: int, ep: Episode | None, expected: bool) -> None:
    assert check(keyword, limit, "2491", ep)[0] is expected


def test_tool_calls_asked_for_count_even_without_a_result() -> None:
    asked = Episode(steps=[ModelStep(tool_calls=[ToolCall(name="a"), ToolCall(name="b")])],
                    stop_reason="step_limit")
    assert check("max_tool_calls", 1, "x", asked) == (False, "2 tool calls")


TESTS_OK = episode(("run_tests", {}, "3 passed in 0.1s", None), final="def f(): ...")


@pytest.mark.parametrize(("value", "ep", "expected"), [
    ("run_tests", TESTS_OK, True),
    ("tests", TESTS_OK, True),                                   # "the tests": run_tests
    ({"tool": "run_tests", "contains": "PASSED"}, TESTS_OK, True),
    ({"tool": "run_tests", "contains": "failed"}, TESTS_OK, False),
    ({"tool": "run_tests", "equals": "3 passed in 0.1s"}, TESTS_OK, True),
    ("run_tests", episode(("run_tests", {}, "", "timeout")), False),
    ("run_tests", CALC, False),
    ("run_tests", None, False),
])
def test_verified_with(value: Any, ep: Episode | None, expected: bool) -> None:
    assert check("verified_with", value, "def f(): ...", ep)[0] is expected


@pytest.mark.parametrize(("value", "output", "ep", "expected"), [
    (True, "53 * 47 = 2,491.", CALC, True),
    (True, "It is 2491.0", CALC, True),
    (True, "53 * 47 = 2492.", CALC, False),
    ("calculator", "The answer is 2491", CALC, True),
    ("search", "The answer is 2491", CALC, False),                # no search result
    (True, "The capital is Paris.", episode(("lookup", {}, "Paris", None)), True),
    (True, "The capital is Rome.", episode(("lookup", {}, "Paris", None)), False),
    (True, "53 * 47 = 2492", episode(("calculator", {}, "53*47 = 2491", None)), False),
    (True, "53 * 47 = 2491", episode(("calculator", {}, "53*47 = 2491", None)), True),
    (True, "2491", None, False),
    (True, "2491", episode(("calculator", {}, "", "boom")), False),  # only an error came back
])
def test_restates_tool_result(value: Any, output: str, ep: Episode | None,
                              expected: bool) -> None:
    assert check("restates_tool_result", value, output, ep)[0] is expected


@pytest.mark.parametrize("keyword", EPISODE_KEYWORDS)
def test_blank_answer_fails_every_episode_check(keyword: str) -> None:
    value = {"tool_called": "calculator", "max_steps": 5, "max_tool_calls": 3,
             "verified_with": "calculator"}.get(keyword, True)
    assert check(keyword, value, "  ", CALC) == (False, "the output is empty")


@pytest.mark.parametrize(("keyword", "value"), [
    ("tool_called", ""), ("tool_called", {"name": "x", "argz": {}}), ("tool_called", []),
    ("tool_called", 3), ("no_tool_errors", False), ("max_steps", 0), ("max_steps", True),
    ("max_tool_calls", -1), ("verified_with", {"tool": "t", "contains": "a", "equals": "a"}),
    ("verified_with", {"contains": "a"}), ("restates_tool_result", 1),
])
def test_bad_values_name_the_keyword(keyword: str, value: Any) -> None:
    with pytest.raises(ConfigError, match=keyword):
        constraint_feature(keyword, value)


def test_episode_rubric_round_trips_and_scores_the_same() -> None:
    rubric = Rubric.for_constraints(
        tool_called={"name": "calculator", "args": {"expression": "53*47"}},
        verified_with=["calculator"], max_steps=4, max_tool_calls=2, no_tool_errors=True,
        restates_tool_result="calculator", exact_words=3)
    loaded = Rubric.from_dict(json.loads(json.dumps(rubric.to_dict())))
    assert loaded.to_dict() == rubric.to_dict()
    assert loaded.constraints["verified_with"] == "calculator"  # a list of one is one
    with judging_episode(CALC):
        assert loaded.evaluate(TASK, "53 * 47 = 2,491.") == rubric.evaluate(
            TASK, "53 * 47 = 2,491.")
        assert loaded.evaluate(TASK, "53 * 47 = 2,491.").score == 10.0
    plain = rubric.evaluate(TASK, "53 * 47 = 2,491.")  # no episode: the tool checks fail
    assert plain.values["tool_called"] is False and plain.values["max_steps"] is True
    assert "never ran" not in plain.feedback and "no tool ran" in plain.feedback
