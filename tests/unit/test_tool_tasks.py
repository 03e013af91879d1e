"""Tool tasks: counts, determinism, train and held-out phrasings disjoint, answers right, and
checks that pass the right answer (however formatted) and fail a wrong one."""

from __future__ import annotations

import re
from decimal import Decimal

import pytest

from agentic_loop.errors import ConfigError
from agentic_loop.tasks import TaskSpec, ToolTask, tool_tasks
from agentic_loop.tasks.dev_set import suites
from agentic_loop.tasks.tool_tasks import _FAMILIES, TOOL_TASK_FAMILIES, default_task_tools
from agentic_loop.tools import ELEMENTS, UNITS, calculate, python_tool


def passes(task: ToolTask, reply: str) -> bool:
    rubric = task.rubric()
    assert rubric is not None
    return rubric.evaluate(task.task, reply).passed


def test_counts_splits_and_ids() -> None:
    held = tool_tasks(240, split="held_out", seed=3)
    train = tool_tasks(300, split="train", seed=3)
    assert len(held) == 240 and len(train) == 300
    assert {t.split for t in held} == {"held_out"} and {t.split for t in train} == {"train"}
    assert len({t.task for t in held}) == 240 and len({t.id for t in held}) == 240
    assert not {t.task for t in held} & {t.task for t in train}
    assert {t.metadata["family"] for t in held} == set(TOOL_TASK_FAMILIES)
    assert all(isinstance(t, TaskSpec) for t in held)


def test_the_bench_gets_two_hundred_held_out_tasks_of_every_family() -> None:
    held = tool_tasks(600, split="held_out", seed=0)
    assert len({t.task for t in held}) == 600
    counts = {f: sum(t.metadata["family"] == f for t in held) for f in TOOL_TASK_FAMILIES}
    assert min(counts.values()) >= 50, counts


def test_held_out_phrasings_are_never_train_phrasings() -> None:
    for family, (_, train, held) in _FAMILIES.items():
        assert train and held and not set(train) & set(held), family

    def skeleton(text: str) -> str:  # the wording without the numbers and names
        return re.sub(r"[\d,.]+|\b[A-Z][a-z]+\b", "#", text)

    held = {skeleton(t.task) for t in tool_tasks(300, split="held_out", seed=1)}
    train = {skeleton(t.task) for t in tool_tasks(300, split="train", seed=1)}
    assert not held & train


def test_same_seed_same_tasks_other_seed_other_tasks() -> None:
    first = tool_tasks(30, split="held_out", seed=5)
    assert tool_tasks(30, split="held_out", seed=5) == first
    assert [t.task for t in tool_tasks(30, split="held_out", seed=6)] != [t.task for t in first]


def test_every_answer_is_right() -> None:
    units = {u.plural: u for u in UNITS}
    elements = {e.name: e for e in ELEMENTS}
    for task in tool_tasks(240, split="held_out", seed=2) + tool_tasks(240, seed=2):
        family, text = task.metadata["family"], task.task
        found = [int(n.replace(",", "")) for n in re.findall(r"\d[\d,]*\d|\d", text)]
        if family == "product":
            assert task.answer == found[0] * found[1], text
        elif family == "sum":
            assert task.answer == sum(found), text
        elif family == "two_step":
            assert task.answer == found[0] * found[1] - found[2], text
        elif family == "convert":
            unit = next(units[p] for p in sorted(units, key=len, reverse=True) if p in text)
            assert Decimal(str(task.answer)) == found[0] * Decimal(unit.factor), text
        elif family == "atomic_number":
            element = next(e for name, e in elements.items() if f" {name}" in text)
            assert task.answer == element.number, text
        else:
            element = next(e for name, e in elements.items() if f" {name}" in text)
            assert Decimal(str(task.answer)) == found[0] * Decimal(element.weight), text


def test_sum_tasks_have_no_stray_number() -> None:
    for task in tool_tasks(60, families=["sum"], seed=0):
        numbers = [int(n) for n in re.findall(r"\d+", task.task)]
        assert sum(numbers) == task.answer


def test_checks_pass_the_right_answer_in_any_format_and_fail_a_wrong_one() -> None:
    for task in tool_tasks(60, split="held_out", seed=4):
        shown = task.metadata["answer_text"]
        value = Decimal(shown)
        replies = [shown, f"The answer is {shown}.", f"{float(value)}", f"{value:,}"]
        if value == value.to_integral_value():
            replies += [f"{int(value):,}", f"{int(value)}.0"]
        for reply in replies:
            assert passes(task, reply), (task.task, reply)
        wrongs = [value + 1, value * 10]
        if value != value.to_integral_value():  # within 0.0051 passes: exact or rounded
            wrongs.append(value - Decimal("0.02"))
        for wrong in wrongs:
            assert not passes(task, f"It is {wrong}."), (task.task, wrong)
        assert not passes(task, "I do not know.")


def test_the_calculator_solves_the_arithmetic_families() -> None:
    for task in tool_tasks(30, families=["product", "two_step"], seed=0):
        numbers = [n.replace(",", "") for n in re.findall(r"\d[\d,]*", task.task)]
        expression = f"{numbers[0]} * {numbers[1]}"
        if task.metadata["family"] == "two_step":
            expression += f" - {numbers[2]}"
        assert passes(task, calculate(expression))


def test_tools_metadata_and_serialisation() -> None:
    task = tool_tasks(1, split="held_out")[0]
    assert task.tools == default_task_tools()
    assert task.metadata["tools"] == ["calculator", "lookup"]
    assert task.metadata["needs"] == ["calculator"]
    dumped = task.model_dump(by_alias=True)
    assert "tools" not in dumped and dumped["answer"] == task.answer
    assert TaskSpec.model_validate({k: v for k, v in dumped.items() if k != "answer"}).rubric()
    python = python_tool()
    with_python = tool_tasks(2, tools=[python])
    assert with_python[0].tools == (python,) and with_python[0].metadata["tools"] == ["python"]


def test_needs_name_the_tools_each_family_requires() -> None:
    needs = {t.metadata["family"]: t.metadata["needs"] for t in tool_tasks(12, seed=0)}
    assert needs["convert"] == ["lookup", "calculator"] and needs["atomic_number"] == ["lookup"]
    assert needs["molar_mass"] == ["lookup", "calculator"] and needs["sum"] == ["calculator"]


def test_a_small_family_runs_out_and_the_others_fill_in() -> None:
    tasks = tool_tasks(200, families=["atomic_number", "product"], seed=0)
    counts = {f: sum(t.metadata["family"] == f for t in tasks) for f in ("atomic_number",
                                                                         "product")}
    assert counts["atomic_number"] <= len(ELEMENTS) * 2 and sum(counts.values()) == 200
    with pytest.raises(ConfigError, match="distinct"):
        tool_tasks(len(ELEMENTS) * 2 + 1, families=["atomic_number"])


@pytest.mark.parametrize("bad", [{"split": "test"}, {"families": ["poetry"]}, {"families": []},
                                 {"n": 0}])
def test_bad_arguments_are_refused(bad: dict[str, object]) -> None:
    args: dict[str, object] = {"n": 3} | bad
    with pytest.raises(ConfigError):
        tool_tasks(**args)  # type: ignore[arg-type]


def test_tool_tasks_stay_out_of_the_dev_set() -> None:
    assert "tool" not in {s.name for s in suites()}


def test_a_scripted_agent_solves_a_task_with_its_tools_and_the_episode_shows_it() -> None:
    from langchain.agents import create_agent
    from langchain_core.messages import AIMessage, HumanMessage

    from agentic_loop.episodes import episode_from_messages
    from agentic_loop.testing import ScriptedChatModel

    task = tool_tasks(6, split="held_out", seed=0, families=["molar_mass"])[0]
    element = next(e for e in ELEMENTS if f" {e.name}" in task.task)
    moles = int(re.findall(r"\d+", task.task)[0])
    model = ScriptedChatModel(responses=[
        AIMessage("", tool_calls=[{"name": "lookup", "args": {"key": element.name}, "id": "1"}]),
        AIMessage("", tool_calls=[{"name": "calculator",
                                   "args": {"expression": f"{moles} * {element.weight}"},
                                   "id": "2"}]),
        lambda messages: f"The mass is {messages[-1].content} grams.",
    ])
    agent = create_agent(model, list(task.tools))
    messages = agent.invoke({"messages": [HumanMessage(task.task)]})["messages"]
    episode = episode_from_messages(messages, start=1)
    assert episode.tools_called == ["lookup", "calculator"] and not episode.tool_errors
    assert element.weight in episode.results_of("lookup")[0]
    assert passes(task, episode.final), episode.final
