"""Episodes of agents run to their end as data: limits, tool errors, huge results, crashes."""

from __future__ import annotations

import time
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.runnables import RunnableLambda
from langchain_core.tools import tool
from langgraph.graph import START, MessagesState, StateGraph

from agentic_loop.agents import (
    as_agent,
    episode_thread_id,
    run_episode,
    run_episodes,
    split_generator,
    tool_agent,
)
from agentic_loop.episodes import MAX_TOOL_RESULT_CHARS
from agentic_loop.errors import ConfigError
from agentic_loop.judges import Rubric
from agentic_loop.models.errors import ModelSpecError
from agentic_loop.testing import ScriptedChatModel

ASK = [HumanMessage("What is 53 * 47?")]


def call(name: str, call_id: str = "c1", **args: Any) -> AIMessage:
    """A scripted model answer that asks for one tool call."""
    return AIMessage("", tool_calls=[{"name": name, "args": args, "id": call_id}])


@tool
def calculator(expression: str) -> str:
    """Evaluate an arithmetic expression such as 53*47."""
    left, right = expression.split("*")
    return str(int(left) * int(right))


@tool
def broken(expression: str) -> str:
    """A tool that always fails."""
    raise ValueError("the tool broke")


@tool
def flood(expression: str) -> str:
    """A tool that returns 9 MB of text."""
    return "x" * 9_000_000


@tool
def slow(expression: str) -> str:
    """A tool that takes its time."""
    time.sleep(0.6)
    return "late"


def tools_agent(responses: list[Any], tools: list[Any]) -> Any:
    llm = ScriptedChatModel(responses=responses, model_id="m")
    return as_agent(llm, tools), llm


def test_a_tool_episode_records_every_step_in_order() -> None:
    agent, _ = tools_agent([call("calculator", expression="53*47"), "53 * 47 = 2491"],
                           [calculator])
    episode = run_episode(agent, ASK)
    assert [s.kind for s in episode.steps] == ["model", "tool", "model"]
    first, result, last = episode.steps
    assert first.tool_calls[0].args == {"expression": "53*47"} and first.model == "m"
    assert first.input_tokens is not None and first.latency_s is not None
    assert (result.name, result.content, result.call_id) == ("calculator", "2491", "c1")
    assert result.latency_s is not None and result.args == {"expression": "53*47"}
    assert episode.final == last.text == "53 * 47 = 2491" and episode.stop_reason == "final"
    assert episode.called("calculator", expression="53*47") and episode.latency_s


def test_a_tool_that_raises_is_an_error_step_and_the_episode_goes_on() -> None:
    agent, llm = tools_agent([call("broken", expression="1"), "I could not compute it."],
                             [broken])
    episode = run_episode(agent, ASK)
    assert episode.stop_reason == "final" and episode.final == "I could not compute it."
    (step,) = episode.tool_steps
    assert step.error and "the tool broke" in step.error and step.content == ""
    assert "the tool broke" in llm.calls[-1].prompt  # the model saw the error


def test_a_9_mb_tool_result_is_capped_in_the_record_and_for_the_agent() -> None:
    agent, llm = tools_agent([call("flood", expression="1"), "done"], [flood])
    episode = run_episode(agent, ASK)
    (step,) = episode.tool_steps
    assert step.cut_from == 9_000_000 and len(step.content) == MAX_TOOL_RESULT_CHARS
    assert len(llm.calls[-1].prompt) < 2 * MAX_TOOL_RESULT_CHARS
    assert len(episode.model_dump_json()) < 3 * MAX_TOOL_RESULT_CHARS


def test_the_step_limit_stops_an_agent_that_never_answers() -> None:
    agent, llm = tools_agent([], [calculator])
    llm.default = call("calculator", expression="2*2")
    episode = run_episode(agent, ASK, max_steps=3)
    assert episode.stop_reason == "step_limit" and episode.model_calls == 3
    assert episode.tools_called == ["calculator"] * 3 and episode.final == ""
    assert len(llm.calls) == 3


def test_a_safe_tool_is_one_step_when_the_episode_stops_on_a_limit() -> None:
    """safe_tool runs its inner tool as a child run: the record keeps the outer call only."""
    from agentic_loop.tools import safe_tool

    agent, llm = tools_agent([], [safe_tool(calculator)])
    llm.default = call("calculator", expression="2*2")
    episode = run_episode(agent, ASK, max_steps=1)
    assert episode.stop_reason == "step_limit"
    assert [(s.call_id, s.content) for s in episode.tool_steps] == [("c1", "4")]


def test_a_graph_recursion_limit_is_a_step_limit() -> None:
    def loop(state: MessagesState) -> dict[str, Any]:
        return {"messages": [AIMessage("thinking", tool_calls=[])]}

    graph = StateGraph(MessagesState)
    graph.add_node("loop", loop)
    graph.add_edge(START, "loop")
    graph.add_edge("loop", "loop")
    agent = as_agent(graph.compile())
    episode = run_episode(agent, ASK, max_steps=2)
    assert episode.stop_reason == "step_limit" and "Recursion" in (episode.error or "")


def test_the_time_limit_stops_a_slow_tool_and_a_hanging_agent() -> None:
    agent, _ = tools_agent([call("slow", expression="1"), call("slow", expression="2"), "ok"],
                           [slow])
    started = time.perf_counter()
    episode = run_episode(agent, ASK, timeout_s=0.3)
    assert episode.stop_reason == "time_limit" and time.perf_counter() - started < 0.6
    assert episode.model_calls == 1
    hang = as_agent(RunnableLambda(lambda m: time.sleep(3) or "late"))
    started = time.perf_counter()
    assert run_episode(hang, ASK, timeout_s=0.2).stop_reason == "time_limit"
    assert time.perf_counter() - started < 1.0


def test_a_graph_that_raises_mid_episode_keeps_what_it_had() -> None:
    llm = ScriptedChatModel(responses=[call("calculator", expression="53*47"), "2491"])
    bound = llm.bind_tools([calculator])
    seen = {"n": 0}

    def agent_node(state: MessagesState) -> dict[str, Any]:
        seen["n"] += 1
        if seen["n"] == 2:
            raise RuntimeError("the agent's graph fell over")
        return {"messages": [bound.invoke(state["messages"])]}

    def tools_node(state: MessagesState) -> dict[str, Any]:
        from langgraph.prebuilt import ToolNode
        return ToolNode([calculator]).invoke(state)

    graph = StateGraph(MessagesState)
    graph.add_node("agent", agent_node)
    graph.add_node("tools", tools_node)
    graph.add_edge(START, "agent")
    graph.add_edge("agent", "tools")
    graph.add_edge("tools", "agent")
    episode = run_episode(as_agent(graph.compile()), ASK)
    assert episode.stop_reason == "error" and "fell over" in (episode.error or "")
    assert [s.kind for s in episode.steps] == ["model", "tool"]
    assert episode.tool_steps[0].content == "2491"


def test_best_of_n_episodes_run_concurrently_on_threads_of_their_own() -> None:
    seen: list[str] = []

    def slow_answer(messages: Any, config: Any) -> str:
        seen.append(config["configurable"]["thread_id"])
        time.sleep(0.3)
        return "ok"

    agent = as_agent(RunnableLambda(slow_answer))
    started = time.perf_counter()
    episodes = run_episodes(agent, ASK, n=3, run_id="r1", iteration=2)
    assert time.perf_counter() - started < 0.8  # concurrent, not 0.9 s in a row
    assert [e.final for e in episodes] == ["ok"] * 3
    assert sorted(seen) == [episode_thread_id("r1", 2, i) for i in range(3)]


def test_what_is_no_agent_and_what_needs_a_judge() -> None:
    assert as_agent(ScriptedChatModel()) is None
    with pytest.raises(ConfigError, match="tools= goes with a chat model"):
        as_agent(RunnableLambda(lambda m: m), tools=[calculator])
    no_messages = StateGraph(dict)
    no_messages.add_node("x", lambda s: s)
    no_messages.add_edge(START, "x")
    with pytest.raises(ConfigError, match="no 'messages' state"):
        as_agent(no_messages.compile())
    echo = RunnableLambda(lambda m: "hi")
    with pytest.raises(ModelSpecError, match="judge="):
        split_generator(echo, rubric=Rubric.for_constraints(exact_words=1), reflects=True)
    judged = split_generator(echo, judge=ScriptedChatModel(model_id="j"))
    assert judged.agent is not None and judged.judge.model_id == "j"  # type: ignore[attr-defined]


def test_a_first_tool_choice_forces_only_the_first_call_and_the_graph_finds_its_model() -> None:
    llm = ScriptedChatModel(responses=[call("calculator", expression="53*47"), "2491"],
                            model_id="m")
    graph = tool_agent(llm, [calculator], first_tool_choice="any", system="Use the tools.")
    agent = as_agent(graph)
    assert agent.kind == "graph" and agent.chat_model is llm
    episode = run_episode(agent, ASK)
    assert episode.final == "2491" and episode.system == "Use the tools."
    assert [c.kwargs.get("tool_choice") for c in llm.calls] == ["any", None]
    # a few-shot episode shown before the task (AI turns of its own) still gets the forced call
    shown = [HumanMessage("What is 2 * 3?"), AIMessage("6"), *ASK]
    llm = ScriptedChatModel(responses=[call("calculator", expression="53*47"), "2491"])
    run_episode(as_agent(tool_agent(llm, [calculator], first_tool_choice="any")), shown)
    assert [c.kwargs.get("tool_choice") for c in llm.calls] == ["any", None]


def test_an_agent_that_interrupts_pauses_on_its_own_thread_and_can_be_resumed() -> None:
    from langgraph.checkpoint.memory import InMemorySaver
    from langgraph.types import Command, interrupt

    def ask_human(state: MessagesState) -> dict[str, Any]:
        answer = interrupt("approve?")
        return {"messages": [AIMessage(f"approved: {answer}")]}

    graph = StateGraph(MessagesState)
    graph.add_node("ask", ask_human)
    graph.add_edge(START, "ask")
    compiled = graph.compile(checkpointer=InMemorySaver())
    episode = run_episode(as_agent(compiled), ASK, run_id="r9")
    assert episode.stop_reason == "error" and "interrupted" in (episode.error or "")
    thread = {"configurable": {"thread_id": episode_thread_id("r9", 0, 0)}}
    resumed = compiled.invoke(Command(resume="yes"), thread)
    assert resumed["messages"][-1].content == "approved: yes"
