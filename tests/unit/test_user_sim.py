"""A simulated user answers the agent after each final answer: one episode is the whole
conversation, under the episode's step and time limits, and the checks see all of it."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage
from langchain_core.runnables import RunnableLambda
from pydantic_core import PydanticSerializationError

from agentic_loop.agents import (
    USER_SIM_KEY,
    UserSimulator,
    as_agent,
    run_episode,
    simulating,
)
from agentic_loop.architectures import ArchiveRefine, Reflection, Reflexion
from agentic_loop.episodes import Episode, ModelStep, ToolStep, UserStep, judging_episode
from agentic_loop.errors import ConfigError
from agentic_loop.judges import Rubric
from agentic_loop.judges.check_refs import CheckReferenceError
from agentic_loop.memory import Archive, HashingEmbedder, ReflexionMemory
from agentic_loop.tasks import TaskSpec, load_tasks
from agentic_loop.testing import ScriptedChatModel
from agentic_loop.tools import ORDERS, order_lookup

ORDER = ORDERS[0]
ASK = [HumanMessage("Where is my order?")]


def lookup(call_id: str = "c1", key: str = ORDER.id) -> AIMessage:
    """A scripted model answer that asks for the order lookup."""
    return AIMessage("", tool_calls=[{"name": "order_lookup", "args": {"key": key},
                                      "id": call_id}])


def support_agent(*responses: Any, **kwargs: Any) -> tuple[Any, ScriptedChatModel]:
    llm = ScriptedChatModel(model_id="agent", responses=list(responses), **kwargs)
    agent = as_agent(llm, tools=[order_lookup])
    assert agent is not None
    return agent, llm


def said_status(episode: Episode, status: str) -> bool:
    """Stop predicate of these tests: the last answer names the status."""
    return status in episode.final


def test_the_conversation_is_one_episode_with_the_user_turns_in_order() -> None:
    agent, llm = support_agent("Which order number is it?", lookup(),
                               f"Your order is {ORDER.status}.")
    user = UserSimulator.scripted([f"It is {ORDER.id}.", "Please check again."],
                                  stop=said_status, stop_args={"status": ORDER.status})
    episode = run_episode(agent, ASK, user=user)
    assert [s.kind for s in episode.steps] == ["model", "user", "model", "tool", "model"]
    assert [s.text for s in episode.user_steps] == [f"It is {ORDER.id}."]
    assert episode.stop_reason == "final" and episode.user_stop == "goal"
    assert episode.final == f"Your order is {ORDER.status}."
    assert episode.model_calls == 3 and episode.results_of("order_lookup") == [ORDER.record()]
    # the agent's third call saw the whole conversation, the user's reply included
    last_prompt = [m for m in llm.calls[-1].messages if not isinstance(m, SystemMessage)]
    assert [type(m).__name__ for m in last_prompt] == [
        "HumanMessage", "AIMessage", "HumanMessage", "AIMessage", "ToolMessage"]
    assert [type(m).__name__ for m in episode.messages()] == [
        "AIMessage", "HumanMessage", "AIMessage", "ToolMessage", "AIMessage"]


def test_the_turn_limit_ends_the_conversation() -> None:
    agent, _ = support_agent(default="I cannot tell.")
    user = UserSimulator.scripted(["a", "b", "c"], max_turns=2)
    episode = run_episode(agent, ASK, user=user)
    assert [s.kind for s in episode.steps] == ["model", "user", "model", "user", "model"]
    assert episode.user_stop == "turn_limit" and episode.final == "I cannot tell."


def test_a_done_marker_ends_the_conversation_and_is_not_sent() -> None:
    agent, llm = support_agent("It shipped.", "Anything else?")
    episode = run_episode(agent, ASK, user=UserSimulator.scripted(["Thanks! [done]", "more"]))
    assert episode.user_stop == "goal" and not episode.user_steps
    assert len(llm.calls) == 1


def test_the_step_limit_covers_the_whole_conversation() -> None:
    agent, _ = support_agent("Which order?", lookup(), "It shipped.")
    episode = run_episode(agent, ASK, user=UserSimulator.scripted([f"It is {ORDER.id}."]),
                          max_steps=2)
    assert episode.stop_reason == "step_limit" and episode.model_calls == 2
    assert [s.kind for s in episode.steps][:4] == ["model", "user", "model", "tool"]
    assert episode.user_stop is None and episode.final == ""


def slow_goal(episode: Episode) -> bool:
    time.sleep(0.6)
    return False


def test_the_wall_clock_covers_the_user_turns() -> None:
    agent, _ = support_agent(default="Which order?")
    user = UserSimulator.scripted(["A1", "A2", "A3"], stop=slow_goal)
    began = time.perf_counter()
    episode = run_episode(agent, ASK, user=user, timeout_s=0.3)
    assert episode.stop_reason == "time_limit" and time.perf_counter() - began < 0.6


def test_a_chat_user_without_a_model_speaks_with_the_run_model_and_costs_no_step() -> None:
    # one script for both: the agent's answer, the simulated user's reply, the agent again
    agent, llm = support_agent("Which order?", f"It is {ORDER.id}.", "Thanks, looking: shipped.",
                               "[DONE]")
    user = UserSimulator.chat("a hurried customer", f"learn where order {ORDER.id} is")
    episode = run_episode(agent, ASK, user=user)
    assert episode.model_calls == 2 and episode.user_stop == "goal"
    assert [s.text for s in episode.user_steps] == [f"It is {ORDER.id}."]
    sim_prompt = llm.calls[1].messages
    assert isinstance(sim_prompt[0], SystemMessage) and "hurried" in sim_prompt[0].content
    # roles swapped: the user's opening is the simulator's own turn, the agent's answer its input
    assert [type(m).__name__ for m in sim_prompt[1:]] == ["AIMessage", "HumanMessage"]


def test_a_chat_user_with_no_model_to_borrow_is_the_episode_error() -> None:
    agent = as_agent(RunnableLambda(lambda messages: "Which order?"))
    assert agent is not None
    episode = run_episode(agent, ASK, user=UserSimulator.chat("a customer", "get an answer"))
    assert episode.stop_reason == "error" and "names no model" in (episode.error or "")


def test_episodes_read_the_simulator_the_run_binds() -> None:
    agent, _ = support_agent("Which order?", "It shipped.")
    with simulating(UserSimulator.scripted(["A1"])):
        episode = run_episode(agent, ASK)
    assert [s.kind for s in episode.steps] == ["model", "user", "model"]
    assert run_episode(support_agent("Hi.")[0], ASK).user_stop is None


def test_an_episode_check_sees_the_lookup_across_the_conversation() -> None:
    agent, _ = support_agent("Which order?", lookup(), f"It is {ORDER.status}.")
    episode = run_episode(agent, ASK, user=UserSimulator.scripted([ORDER.id]))
    rubric = Rubric.for_constraints(answer=ORDER.status,
                                    verified_with={"tool": "order_lookup", "contains": ORDER.id})
    with judging_episode(episode):
        assert rubric.evaluate(ASK[0].content, episode.final).passed
    guessed = Episode(steps=[ModelStep(text="Which order?"), UserStep(text=ORDER.id),
                             ModelStep(text=f"It is {ORDER.status}.")],
                      final=f"It is {ORDER.status}.")
    with judging_episode(guessed):
        assert not rubric.evaluate(ASK[0].content, guessed.final).passed


def _architecture(name: str, llm: ScriptedChatModel, tmp_path: Any) -> Any:
    kwargs: dict[str, Any] = {"tools": [order_lookup], "max_iterations": 1}
    if name == "reflection":
        return Reflection(llm, **kwargs)
    if name == "archive_refine":
        return ArchiveRefine(llm, archive=Archive(tmp_path / "a", embedder=HashingEmbedder()),
                             **kwargs)
    return Reflexion(llm, memory=ReflexionMemory(tmp_path / "r", embedder=HashingEmbedder()),
                     **kwargs)


@pytest.mark.parametrize("name", ["reflection", "archive_refine", "reflexion"])
def test_every_architecture_runs_the_task_simulator_from_the_run_config(
        name: str, tmp_path: Any) -> None:
    llm = ScriptedChatModel(model_id="agent", responses=[
        "Which order number is it?", lookup(), f"Order {ORDER.id} is {ORDER.status}."])
    arch = _architecture(name, llm, tmp_path)
    user = UserSimulator.scripted([f"It's {ORDER.id}."])
    rubric = Rubric.for_constraints(answer=ORDER.status,
                                    verified_with={"tool": "order_lookup", "contains": ORDER.id})
    result = arch.run("Where is my order?", rubric=rubric,
                      config={"configurable": {USER_SIM_KEY: user}})
    assert result.passed, (result.features, result.errors)
    episode = result.trajectory.rounds[-1].episode
    assert episode is not None and [s.kind for s in episode.steps] == [
        "model", "user", "model", "tool", "model"]
    assert result.trajectory.rounds[-1].draft == f"Order {ORDER.id} is {ORDER.status}."


def test_a_task_with_a_simulator_round_trips_as_json(tmp_path: Any) -> None:
    spec = TaskSpec(task="Where is my order?", constraints={"answer": ORDER.status},
                    user_sim=UserSimulator.scripted(
                        [ORDER.id], stop="agentic_loop.tasks.support_tasks:answer_given",
                        stop_args={"answer": ORDER.status}))
    text = spec.model_dump_json(by_alias=True)
    again = TaskSpec.model_validate_json(text)
    assert again == spec and again.user_sim is not None
    assert again.user_sim.stop_test() is not None
    path = tmp_path / "tasks.jsonl"
    chat = {"task": "Help me.", "user_sim": {"kind": "chat", "persona": "a customer",
                                             "goal": "get a refund", "model": "local"}}
    path.write_text(text + "\n" + json.dumps(chat) + "\n")
    loaded = load_tasks(path)
    assert loaded[0].user_sim == spec.user_sim
    assert loaded[1].user_sim is not None and loaded[1].user_sim.model == "local"
    assert "user_sim" not in TaskSpec(task="Say hi.").model_dump(by_alias=True)


def test_a_simulator_that_cannot_be_saved_says_how_to_fix_it() -> None:
    user = UserSimulator.scripted(["hi"], stop=lambda episode: True)
    with pytest.raises((CheckReferenceError, PydanticSerializationError), match="lambda"):
        user.model_dump_json()
    with pytest.raises((ConfigError, ValueError), match="replies"):
        UserSimulator(kind="scripted")
    with pytest.raises((ConfigError, ValueError), match="goal"):
        UserSimulator(kind="chat", persona="someone")


def test_old_episode_records_read_unchanged() -> None:
    old = ('{"steps": [{"kind": "model", "sent": 1, "text": "", "tool_calls": [{"name": "calc", '
           '"args": {"x": "1"}, "id": "c"}]}, {"kind": "tool", "call_id": "c", "name": "calc", '
           '"content": "1"}, {"kind": "model", "text": "1"}], "final": "1", '
           '"stop_reason": "final"}')
    episode = Episode.model_validate_json(old)
    assert [s.kind for s in episode.steps] == ["model", "tool", "model"]
    assert episode.user_stop is None and episode.user_steps == []
    dumped = episode.model_dump()
    assert "user_stop" not in dumped
    assert Episode.model_validate(dumped) == episode
    assert isinstance(Episode.model_validate(dumped).steps[1], ToolStep)


def test_a_conversation_survives_a_strict_checkpoint_serializer() -> None:
    from langgraph.checkpoint.memory import InMemorySaver
    from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

    saver = InMemorySaver(serde=JsonPlusSerializer(allowed_msgpack_modules=None))
    llm = ScriptedChatModel(model_id="agent", responses=["Which order?", lookup(), "Shipped."])
    arch = Reflection(llm, tools=[order_lookup], max_iterations=1, checkpointer=saver,
                      rubric=Rubric.for_constraints(tool_called="order_lookup"))
    arch.run("Where is my order?", thread_id="talk",
             config={"configurable": {USER_SIM_KEY: UserSimulator.scripted([ORDER.id])}})
    values = arch.build().get_state({"configurable": {"thread_id": "talk"}}).values
    episode = values["final"].episode
    assert isinstance(episode.steps[1], UserStep) and episode.steps[1].text == ORDER.id
    assert values["settings"]["user_sim"]["replies"] == [ORDER.id]


def test_the_run_settings_keep_the_simulator_from_a_context_or_the_config() -> None:
    from types import SimpleNamespace

    from agentic_loop.architectures.settings import _user_sim

    user = UserSimulator.scripted([ORDER.id])
    from_config = _user_sim(None, {USER_SIM_KEY: user})
    assert from_config == user.model_dump(mode="json")
    context = SimpleNamespace(user_sim={"kind": "chat", "persona": "p", "goal": "g"})
    assert _user_sim(context, {USER_SIM_KEY: user})["kind"] == "chat"
    assert _user_sim(None, {}) is None
    with pytest.raises((ConfigError, ValueError)):
        _user_sim(None, {USER_SIM_KEY: {"kind": "scripted"}})


def test_a_run_context_sends_a_simulator_but_never_an_import_path_or_a_model() -> None:
    """A served graph takes its context from anyone: a simulator rides in it as plain data."""
    from agentic_loop.architectures.schemas import RunSettings

    llm = ScriptedChatModel(model_id="agent", responses=[
        "Which order number is it?", lookup(), f"Order {ORDER.id} is {ORDER.status}."])
    result = Reflection(llm, tools=[order_lookup]).run(
        "Where is my order?", user_sim=UserSimulator.scripted([f"It's {ORDER.id}."]),
        constraints={"answer": ORDER.status})
    episode = result.trajectory.rounds[-1].episode
    assert result.passed and episode is not None and episode.user_steps[0].text.endswith(
        f"{ORDER.id}.")
    with pytest.raises(ValueError, match="registered stop check"):  # pydantic wraps ConfigError
        RunSettings(user_sim={"replies": ["hi"], "stop": "os:system"})
    with pytest.raises(ValueError, match="may not name a model"):
        RunSettings(user_sim=UserSimulator.chat("p", "g", model="local"))
    assert RunSettings(user_sim={"replies": ["hi"]}).user_sim["kind"] == "scripted"  # type: ignore[index]
