"""Support conversations: deterministic by seed, split by wording, and passed only by an
agent that looked the order up (and asked for its number when the customer did not give it)."""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage

from agentic_loop.agents import as_agent, run_episode
from agentic_loop.episodes import Episode, ModelStep, ToolCall, ToolStep, judging_episode
from agentic_loop.errors import ConfigError
from agentic_loop.tasks import TaskSpec
from agentic_loop.tasks.support_tasks import SupportTask, answer_given, support_tasks
from agentic_loop.testing import ScriptedChatModel
from agentic_loop.tools import ORDER_TABLE, ORDERS, order_by_id, order_lookup, ready_tools


def lookup(order_id: str) -> AIMessage:
    return AIMessage("", tool_calls=[{"name": "order_lookup", "args": {"key": order_id},
                                      "id": "c1"}])


def right_answer(task: SupportTask) -> str:
    if task.metadata["question"] == "status":
        return f"Your order {task.order_id} is {task.answer}."
    return f"You paid ${task.answer}"


def passes(task: SupportTask, episode: Episode) -> bool:
    rubric = task.rubric()
    assert rubric is not None
    with judging_episode(episode):
        return rubric.evaluate(task.task, episode.final).passed


def test_tasks_are_deterministic_distinct_and_split_by_wording() -> None:
    train = support_tasks(40, split="train", seed=3)
    assert [t.model_dump() for t in train] == [t.model_dump() for t in
                                               support_tasks(40, split="train", seed=3)]
    held = support_tasks(40, split="held_out", seed=3)
    assert len({t.task for t in train}) == 40 and len({t.id for t in held}) == 40
    assert not {t.task for t in train} & {t.task for t in held}
    kinds = {(t.metadata["question"], t.metadata["gives_id"]) for t in held}
    assert kinds == {("status", True), ("status", False), ("total", True), ("total", False)}
    assert [t.user_sim.kind for t in held if t.user_sim] == ["scripted"] * 40


def test_a_task_without_the_number_gives_it_only_in_the_user_reply() -> None:
    for task in support_tasks(8, split="held_out"):
        assert task.user_sim is not None
        if task.metadata["gives_id"]:
            assert task.order_id in task.task
        else:
            assert task.order_id not in task.task
            assert task.order_id in task.user_sim.replies[0]
        assert [tool.name for tool in task.tools] == ["order_lookup"]
        order = order_by_id(task.order_id)
        assert task.answer in (order.status, order.total_text)


def test_the_rubric_needs_the_right_answer_and_the_lookup_of_this_order() -> None:
    status, total = support_tasks(3, split="train")[0], support_tasks(3, split="train")[2]
    assert status.metadata["question"] == "status" and total.metadata["question"] == "total"
    for task in (status, total):
        record = ORDER_TABLE[task.order_id]
        looked = [ModelStep(tool_calls=[ToolCall(name="order_lookup",
                                                 args={"key": task.order_id})]),
                  ToolStep(name="order_lookup", args={"key": task.order_id}, content=record)]
        answer = right_answer(task)
        assert passes(task, Episode(steps=[*looked, ModelStep(text=answer)], final=answer))
        guessed = Episode(steps=[ModelStep(text=answer)], final=answer)
        assert not passes(task, guessed)
        other = next(o for o in ORDERS if o.id != task.order_id)
        wrong = [looked[0], ToolStep(name="order_lookup", args={"key": other.id},
                                     content=ORDER_TABLE[other.id])]
        assert not passes(task, Episode(steps=[*wrong, ModelStep(text=answer)], final=answer))
        said = "It is on its way, I think."
        assert not passes(task, Episode(steps=[*looked, ModelStep(text=said)], final=said))


def test_the_scripted_customer_stops_once_the_answer_is_right() -> None:
    task = next(t for t in support_tasks(8, split="held_out") if not t.metadata["gives_id"])
    llm = ScriptedChatModel(model_id="agent", responses=[
        "Could you give me your order number?", lookup(task.order_id), right_answer(task)])
    agent = as_agent(llm, tools=task.tools)
    assert agent is not None
    episode = run_episode(agent, [HumanMessage(task.task)], user=task.user_sim)
    assert [s.kind for s in episode.steps] == ["model", "user", "model", "tool", "model"]
    assert episode.user_stop == "goal" and passes(task, episode)


def test_a_wrong_answer_gets_pushed_back_until_the_turns_run_out() -> None:
    task = next(t for t in support_tasks(8, split="held_out") if t.metadata["gives_id"])
    llm = ScriptedChatModel(model_id="agent", default="It should arrive soon.")
    agent = as_agent(llm, tools=task.tools)
    assert agent is not None and task.user_sim is not None
    episode = run_episode(agent, [HumanMessage(task.task)], user=task.user_sim)
    assert episode.user_stop == "turn_limit"
    assert [s.text for s in episode.user_steps] == task.user_sim.replies
    assert not passes(task, episode)


def test_a_support_task_round_trips_as_a_task_spec() -> None:
    task = support_tasks(2, split="train", seed=7)[1]
    again = TaskSpec.model_validate_json(task.model_dump_json(by_alias=True))
    assert again.user_sim == task.user_sim and again.constraints == task.constraints
    assert again.user_sim is not None and again.user_sim.stop_test() is answer_given
    assert "tools" not in task.model_dump()


def test_the_order_tool_is_ready_by_name_and_forgiving_of_the_number() -> None:
    tool = ready_tools("orders")[0]
    assert tool is order_lookup
    order = ORDERS[5]
    call: dict[str, Any] = {"type": "tool_call", "name": "order_lookup", "id": "1"}
    assert tool.invoke({**call, "args": {"key": f"#{order.id.lower()}"}}).content == \
        order.record()
    missing = tool.invoke({**call, "args": {"key": "Z0000"}})
    assert missing.status == "error" and "no entry" in missing.content


@pytest.mark.parametrize("kwargs", [{"n": 0}, {"n": 5, "split": "test"}, {"n": 10_000}])
def test_bad_requests_say_what_to_change(kwargs: dict[str, Any]) -> None:
    with pytest.raises(ConfigError):
        support_tasks(**kwargs)
