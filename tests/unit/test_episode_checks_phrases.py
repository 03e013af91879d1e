"""Tool demands read from a task's words, the agent guards (tool claims, skipped verification)
and the critic judging with episodes (one per item, in its own thread for the async path)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from agentic_loop.episodes import (
    Episode,
    ModelStep,
    ToolCall,
    ToolStep,
    current_episode,
    judging_episode,
)
from agentic_loop.errors import ConfigError
from agentic_loop.judges import Critic, Rubric, inspect_output, rubric_for_task, tool_claims
from agentic_loop.judges.checks.task_constraint_parser import constraints_from_task
from agentic_loop.testing import ScriptedChatModel

TOOL_KEYS = {"tool_called", "verified_with", "max_steps", "max_tool_calls"}


def stated(task: str) -> dict[str, Any]:
    return {k: v for k, v in constraints_from_task(task).items() if k in TOOL_KEYS}


@pytest.mark.parametrize(("task", "expected"), [
    ("What is 53 * 47? Use the calculator.", {"tool_called": "calculator"}),
    ("Using a calculator, find 17% of 2,340.", {"tool_called": "calculator"}),
    ("Convert 5 miles to km with the unit_convert tool.", {"tool_called": "unit_convert"}),
    ("Use the python tool to count the primes below 1000.", {"tool_called": "python"}),
    ("Look it up with the `geo_lookup` tool, then answer.", {"tool_called": "geo_lookup"}),
    ("Call the web search tool once and summarize.", {"tool_called": "web_search"}),
    ("Use the calculator and the lookup table.", {"tool_called": "calculator"}),
    ("Use the Python interpreter for the sums.", {"tool_called": "python_interpreter"}),
    ("Write the function and run the tests before answering.", {"verified_with": "tests"}),
    ("Verify with run_python before you reply.", {"verified_with": "run_python"}),
    ("Check your answer with the calculator.", {"verified_with": "calculator"}),
    ("Use the calculator and verify the result using the `checker` tool.",
     {"tool_called": "calculator", "verified_with": "checker"}),
    ("Use the calculator. Answer in at most 5 steps.",
     {"tool_called": "calculator", "max_steps": 5}),
    ("Solve it in no more than 3 tool calls.", {"max_tool_calls": 3}),
    ("You have tools; take fewer than 4 steps.", {"max_steps": 3}),
    ("Answer within 6 model calls.", {"max_steps": 6}),
    ("Please use the calculator tool to compute 17*23.", {"tool_called": "calculator"}),
    ("Use your search tool to find the population of Oslo.", {"tool_called": "search"}),
    ("Before answering, run the unit tests.", {"verified_with": "tests"}),
    ("Make sure to verify the result with the calculator.", {"verified_with": "calculator"}),
    ("Answer using no more than 2 tool calls.", {"max_tool_calls": 2}),
    ("Use the calculator, then verify with the calculator.",
     {"tool_called": "calculator", "verified_with": "calculator"}),
    ("Verify using the calculator.", {"verified_with": "calculator"}),
])
def test_tool_phrases_are_read(task: str, expected: dict[str, Any]) -> None:
    assert stated(task) == expected


@pytest.mark.parametrize("task", [
    "Use the following words: sun, sea, sky.",
    "Use the passive voice throughout.",
    "Use the word 'harbor' twice.",
    "Use the present tense and the second person.",
    "Explain how to use the calculator on a phone.",
    "Do not use the search tool; answer from memory.",
    "Never use the calculator for this.",
    "Write a review of the calculator app you use the most.",
    "Use the search results below to write a summary: ...",
    "Use the tests below to check your function: assert f(1) == 2.",
    "Write code with tests for a stack.",
    "Pick the right tool for the job and explain why.",
    "Explain in at most 5 steps how to bake bread.",
    "List exactly 3 tool calls an agent could make.",
    "Describe when you would use the python tool.",
    "Verify with care that the dates match.",
    "Help with the search for a new apartment.",
    "Write a tagline in exactly 12 words, without commas.",
    "Use the search bar at the top of the page.",
    "Write a poem; use the calculator as a metaphor for time.",
    "Write a story where the hero must use the calculator to escape.",
    "Use the lookup table below to answer: a=1, b=2.",
    "Use the search function in your editor.",
    "Use at most 4 steps to explain photosynthesis.",
    "Tell me about the python tool.",
    "Steps: 1 model call, 0 tool calls.",
])
def test_negatives_state_no_tool_demand(task: str) -> None:
    assert stated(task) == {}


def test_rubric_for_task_checks_the_stated_tools() -> None:
    rubric = rubric_for_task("What is 53 * 47? Use the calculator, in at most 4 steps.",
                             checks_only=True)
    assert rubric is not None and rubric.constraints == {"tool_called": "calculator",
                                                         "max_steps": 4}


# -- guards ----------------------------------------------------------------------------------


def ep(*results: tuple[str, str, str | None]) -> Episode:
    steps: list[ModelStep | ToolStep] = []
    for name, content, error in results:
        steps += [ModelStep(tool_calls=[ToolCall(name=name)]),
                  ToolStep(name=name, content=content, error=error)]
    return Episode(steps=[*steps, ModelStep(text="done")], final="done")


CALC = ep(("calculator", "2491", None))
TESTS_PASS = ep(("run_tests", "3 passed in 0.02s", None))
TESTS_FAIL = ep(("run_tests", "1 failed, 2 passed", None))


@pytest.mark.parametrize(("output", "episode"), [
    ("The calculator returned 2492, so 53 * 47 = 2492.", CALC),
    ("I used the calculator and it returned 2492.", CALC),
    ("The search tool says 'Paris'.", CALC),                        # no search ran
    ("The lookup tool returned 'Rome' as the capital.", ep(("lookup", "Paris", None))),
    ("I ran the tests and they all pass.", CALC),                    # no test tool ran
    ("I ran the tests and they pass.", TESTS_FAIL),
    ("I ran the tests and they pass.", ep(("run_tests", "AssertionError: f(2) != 4", None))),
    ("I ran the tests and they pass.", ep(("run_tests", "", "timeout"))),
    ("I checked it with the calculator: 2491.", ep(("search", "x", None))),
])
def test_tool_claim_flags_a_claim_the_episode_refutes(output: str, episode: Episode) -> None:
    assert "tool_claim" in inspect_output("t", output, episode=episode).flags


@pytest.mark.parametrize(("output", "episode"), [
    ("The calculator returned 2491, so 53 * 47 = 2491.", CALC),
    ("The calculator returned 2,491.", CALC),
    ("I used the calculator and it gave 2491.", CALC),
    ("I ran the tests and they all pass.", TESTS_PASS),
    ("I ran the tests and one failed; fixing it.", TESTS_FAIL),
    ("I ran the tests and one failed.", TESTS_PASS),  # owning up to a failure games nothing
    ("The function returns 5 when x is 2.", CALC),                   # not a tool
    ("53 * 47 = 2491.", CALC),
    ("The right tool returned nothing useful.", CALC),
    ("The lookup tool returned 'Paris'.", ep(("lookup", "Paris, France", None))),
    ("If the calculator returned 0, the input was empty.", ep()),  # a supposition
    ("I ran the tests and they pass.", ep(("run_python", "OK: 4 passed", None))),
    ("I ran the tests and they all pass.", ep(("run_tests", "4 passed, 0 failed", None))),
])
def test_tool_claim_keeps_true_claims_and_plain_answers(output: str, episode: Episode) -> None:
    assert "tool_claim" not in inspect_output("t", output, episode=episode).flags


def test_agent_guards_need_an_episode() -> None:
    report = inspect_output("Run the tests before answering.", "I ran the tests and they pass.")
    assert report.flags == []  # a plain model's answer: nothing to refute it with


def test_skipped_verification() -> None:
    task = "Write is_even(n). Run the tests before answering."
    report = inspect_output(task, "def is_even(n): return n % 2 == 0", episode=CALC)
    assert report.flags == ["skipped_verification"]
    assert report.reasons["skipped_verification"].startswith("the task asks to verify with tests")
    assert inspect_output(task, "def is_even(n): return n % 2 == 0", episode=TESTS_PASS).flags == []
    failed = ep(("run_tests", "", "sandbox timeout"))
    assert "skipped_verification" in inspect_output(task, "def f(): ...", episode=failed).flags
    assert inspect_output("Use the calculator: 53 * 47?", "2491", episode=CALC).flags == []
    assert inspect_output("Use the calculator: 53 * 47?", "2491",
                          episode=ep()).flags == ["skipped_verification"]


def test_agent_guards_do_not_void_and_are_recorded_in_the_evaluation() -> None:
    rubric = Rubric.for_constraints(exact_words=4)
    critic = Critic(ScriptedChatModel(), rubric, critique_text=False)
    verdict = critic.critique("t", "The calculator returned 2492.", episode=CALC)
    assert verdict.score == 10.0 and verdict.evaluation.void is None
    assert list(verdict.evaluation.guards) == ["tool_claim"]


def test_tool_claims_reads_values_and_test_verdicts() -> None:
    claims = tool_claims("The calculator returned 2,491. I ran the tests; they failed.")
    assert [(c.tool, c.value, c.passed) for c in claims] == [
        ("calculator", "2,491", None), ("tests", None, False)]


# -- the critic with episodes ------------------------------------------------------------------


def test_critic_batch_judges_each_item_with_its_episode() -> None:
    rubric = Rubric.for_constraints(tool_called="calculator", max_steps=2)
    critic = Critic(ScriptedChatModel(), rubric, critique_text=False)
    items = [("t", "2491"), ("t", "2491"), ("t", "2491")]
    long_episode = Episode(steps=[ModelStep(text="hm")] * 3 + CALC.steps)
    critiques = critic.batch(items, episodes=[CALC, None, long_episode])
    assert [c.values for c in critiques] == [
        {"tool_called": True, "max_steps": True},
        {"tool_called": False, "max_steps": True},
        {"tool_called": True, "max_steps": False}]
    assert current_episode() is None  # set only while each item's checks ran
    assert [c.score for c in critic.batch(items[:1])] == [5.0]  # no episodes: plain answers
    with pytest.raises(ConfigError, match="2 items but 1 episodes"):
        critic.batch(items[:2], episodes=[CALC])


def test_critic_critique_acritique_and_by_checks_take_the_episode() -> None:
    critic = Critic(ScriptedChatModel(), Rubric.for_constraints(tool_called="calculator"),
                    critique_text=False)
    assert critic.critique("t", "2491", episode=CALC).passed
    assert not critic.critique("t", "2491").passed
    assert critic.by_checks("t", "2491", episode=CALC).passed
    assert asyncio.run(critic.acritique("t", "2491", episode=CALC)).passed  # worker thread
    assert critic.run_checks("t", "2491", ["an exemplar"], episode=CALC)["tool_called"].value
    with judging_episode(CALC):  # episode=None leaves the caller's own episode in place
        assert critic.critique("t", "2491").passed
        assert not critic.critique("t", "2491", episode=Episode()).passed
    assert critic.rubric.evaluate("t", "2491", episode=CALC).passed
