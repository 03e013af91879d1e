"""Memory for agents (issue 32, point 6): the archive keeps an accepted run's episode and shows
it as a few-shot episode; Reflexion's reflection prompt shows what the agent did, so a lesson
can name a tool. Plain model runs and archives written before episodes read as before."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import tool
from langgraph.store.memory import InMemoryStore

from agentic_loop.architectures import ArchiveRefine, Reflexion
from agentic_loop.architectures.prompts import (
    attempt_summary,
    chat_messages,
    reflect_messages,
    tools_asked_for,
)
from agentic_loop.episodes import Episode, ModelStep, ToolCall, ToolStep
from agentic_loop.judges import Rubric
from agentic_loop.memory import (
    Archive,
    ArchiveStore,
    HashingEmbedder,
    ReflexionMemory,
    open_memory,
    store_index,
)
from agentic_loop.prompt_format import DraftPrompt, fresh_draft_prompt
from agentic_loop.testing import ScriptedChatModel

EMB = HashingEmbedder()
ONE_WORD = Rubric.for_constraints(exact_words=1)
TASK = "What is 53 * 47? Answer with the number in one word."
SIMILAR = "What is 61 * 38? Answer with the number in one word."
KINDS = {"constraint_kinds": ["exact_words"], "requirements": "- Use exactly 1 words."}


def calc_episode(result: str = "2491", error: str | None = None) -> Episode:
    return Episode(steps=[
        ModelStep(text="Let me compute.", tool_calls=[
            ToolCall(name="calculator", args={"expression": "53*47"}, id="call_9")]),
        ToolStep(call_id="call_9", name="calculator", args={"expression": "53*47"},
                 content="" if error else result, error=error),
        ModelStep(text="2491")], final="2491", latency_s=0.5)


# -- storage --------------------------------------------------------------------------------


def test_the_archive_keeps_an_episode_across_reopening(tmp_path: Path) -> None:
    archive = Archive(tmp_path, embedder=EMB)
    with_episode = archive.add(TASK, "2491", score=10, episode=calc_episode()).entry
    plain = archive.add("Name a color in one word.", "Teal", score=10).entry
    archive.close()
    reopened = Archive(tmp_path, embedder=EMB)
    stored, stored_plain = reopened.get(with_episode.id), reopened.get(plain.id)
    assert stored is not None and stored.episode == calc_episode()
    assert stored_plain is not None and stored_plain.episode is None
    # a plain model's entry is written exactly as before episodes existed
    lines = [json.loads(line) for line in (tmp_path / "entries.jsonl").read_text().splitlines()]
    assert "episode" in lines[0] and "episode" not in lines[1]


def test_an_archive_written_before_episodes_still_loads(tmp_path: Path) -> None:
    Archive(tmp_path, embedder=EMB).close()  # meta.json as the version writes it
    old: dict[str, Any] = {
        "id": "e1", "created_at": "2025-01-01T00:00:00Z", "updated_at": None, "metadata": {},
        "task": TASK, "output": "2491", "score": 9.0, "features": {}, "iterations": 1,
        "model_id": "m", "trajectory_id": None}
    (tmp_path / "entries.jsonl").write_text(json.dumps(old) + "\n")
    archive = Archive(tmp_path, embedder=EMB)
    [entry] = archive.entries()
    assert entry.output == "2491" and entry.episode is None
    assert archive.search(SIMILAR, k=1)[0].entry.id == "e1"


def test_the_store_adapters_round_trip_an_episode(tmp_path: Path) -> None:
    local = ArchiveStore(tmp_path, embedder=EMB)
    value = {"task": TASK, "output": "2491", "episode": calc_episode().model_dump(mode="json")}
    local.put(("archive", "calc"), "k1", value)
    item = ArchiveStore(tmp_path, embedder=EMB).get(("archive", "calc"), "k1")
    assert item is not None and Episode.model_validate(item.value["episode"]) == calc_episode()

    store = InMemoryStore(index=store_index(EMB))
    memory = open_memory(store, ("archive", "calc"), "archive")
    added, _ = memory.add_many([{"task": TASK, "output": "2491", "episode": calc_episode()},
                               {"task": "Name a color in one word.", "output": "Teal"}])
    assert memory.search(SIMILAR, k=1)[0].entry.episode == calc_episode()
    stored = store.get(("archive", "calc"), added.entry.id)
    assert stored is not None and stored.value["episode"]["steps"][1]["content"] == "2491"
    plain = [i.value for i in store.search(("archive", "calc")) if i.value["output"] == "Teal"]
    assert plain and "episode" not in plain[0]


# -- few-shot episodes ----------------------------------------------------------------------


def test_an_exemplar_with_an_episode_is_shown_as_a_few_shot_episode() -> None:
    prompt = fresh_draft_prompt(SIMILAR, exemplars_as="turns", exemplars=[
        {"id": "e1", "task": TASK, "output": "2491", "episode": calc_episode()}])
    messages = prompt.messages()
    assert [m["role"] for m in messages] == ["system", "user", "assistant", "tool", "assistant",
                                             "user"]
    call, result = messages[2], messages[3]
    assert call["content"] == "Let me compute."
    assert call["tool_calls"] == [{"id": "shot1_c1", "type": "function", "function": {
        "name": "calculator", "arguments": {"expression": "53*47"}}}]
    assert result == {"role": "tool", "tool_call_id": "shot1_c1", "name": "calculator",
                      "content": "2491"}
    assert messages[4]["content"] == "2491" and messages[5]["content"] == SIMILAR
    # the record stays JSON and reads back the same; training's plain prompt drops the episode
    assert DraftPrompt.model_validate_json(prompt.model_dump_json()) == prompt
    assert prompt.messages(drop=("exemplars",)) == fresh_draft_prompt(SIMILAR).messages()
    # sent as LangChain messages: an AIMessage with the call, a ToolMessage with its result
    sent = chat_messages(prompt)
    assert isinstance(sent[2], AIMessage) and sent[2].tool_calls[0]["args"] == {
        "expression": "53*47"}
    assert isinstance(sent[3], ToolMessage) and sent[3].tool_call_id == "shot1_c1"


def test_a_prompt_without_episodes_is_recorded_as_before() -> None:
    prompt = fresh_draft_prompt(SIMILAR, exemplars_as="turns", exemplars=[
        {"id": "e1", "task": TASK, "output": "2491"},
        {"id": "e2", "task": TASK, "output": "2491", "episode": Episode(
            steps=[ModelStep(text="2491")], final="2491")}])  # no tool step: a plain pair
    assert "shot_steps" not in prompt.model_dump()
    assert [m["role"] for m in prompt.messages()] == ["system", "user", "assistant", "user",
                                                      "assistant", "user"]


def test_text_exemplars_show_one_line_per_tool_call() -> None:
    prompt = fresh_draft_prompt(SIMILAR, exemplars=[
        {"task": TASK, "output": "2491", "episode": calc_episode(error="division by zero")}])
    assert ('Steps:\n- I called calculator(expression="53*47"); it failed: division by zero\n'
            "Accepted answer: 2491") in prompt.parts["exemplars"]


def test_a_few_shot_episode_shows_a_huge_tool_result_cut() -> None:
    turns = fresh_draft_prompt(SIMILAR, exemplars_as="turns", exemplars=[
        {"task": TASK, "output": "2491", "episode": calc_episode(result="9" * 50_000)}])
    assert len(turns.messages()[3]["content"]) < 1_000


def test_a_custom_prompt_keeps_an_agents_earlier_steps() -> None:
    sent = [HumanMessage(TASK), *calc_episode().messages()[:2]]
    prompt = DraftPrompt.of_messages(sent)
    assert DraftPrompt.model_validate_json(prompt.model_dump_json()) == prompt
    again = chat_messages(prompt)
    assert [type(m) for m in again] == [type(m) for m in sent]
    assert isinstance(again[1], AIMessage) and again[1].tool_calls == sent[1].tool_calls
    assert isinstance(again[2], ToolMessage) and again[2].tool_call_id == "call_9"


@pytest.fixture
def archive(tmp_path: Path) -> Archive:
    return Archive(tmp_path / "archive", embedder=EMB)


def test_archive_refine_sends_a_retrieved_episode_as_turns(archive: Archive) -> None:
    entry = archive.add(TASK, "2491", score=10, metadata=KINDS, episode=calc_episode()).entry
    llm = ScriptedChatModel(default="no such")  # never accepted: the archive stays as it is
    result = ArchiveRefine(llm, rubric=ONE_WORD, archive=archive, min_similarity=0.0,
                           show_episodes=True).run(SIMILAR)
    assert result.exemplar_ids == [entry.id]
    sent = next(c for c in llm.calls if c.kind == "text").messages
    assert [m.type for m in sent] == ["system", "human", "ai", "tool", "ai", "human"]
    assert isinstance(sent[2], AIMessage) and sent[2].tool_calls[0]["name"] == "calculator"
    prompt = result.trace[0].prompt
    assert prompt is not None and prompt.shot_steps["shot1"][1]["content"] == "2491"
    # a plain chat model (no tools to call) is shown the task and the answer by default
    plain = ScriptedChatModel(default="no such")
    ArchiveRefine(plain, rubric=ONE_WORD, archive=archive, min_similarity=0.0).run(SIMILAR)
    assert [m.type for m in next(c for c in plain.calls if c.kind == "text").messages] == [
        "system", "human", "ai", "human"]


def test_an_episode_below_the_similarity_floor_is_not_shown(archive: Archive) -> None:
    archive.add("Write a haiku about the ocean in one word.", "Waves", metadata=KINDS,
                episode=calc_episode())
    floor = archive.search(SIMILAR, k=1)[0].similarity + 0.01
    llm = ScriptedChatModel(default="no such")  # never accepted: the archive stays as it is
    result = ArchiveRefine(llm, rubric=ONE_WORD, archive=archive, min_similarity=floor,
                           show_episodes=True).run(SIMILAR)
    assert result.exemplar_ids == []
    assert [m.type for m in next(c for c in llm.calls if c.kind == "text").messages] == [
        "system", "human"]


class EpisodeArchiveRefine(ArchiveRefine):
    """An ArchiveRefine whose accepted round came from an agent (the agent runner's part)."""

    def _on_finalize(self, state: dict[str, Any], config: RunnableConfig) -> dict[str, Any]:
        final = state["final"].model_copy(update={"episode": calc_episode()})
        return super()._on_finalize({**state, "final": final}, config)


def test_archive_refine_archives_the_accepted_rounds_episode(archive: Archive) -> None:
    assert EpisodeArchiveRefine(ScriptedChatModel(default="2491"), rubric=ONE_WORD,
                                archive=archive).run(TASK).archived
    assert archive.entries()[0].episode == calc_episode()
    store = InMemoryStore(index=store_index(EMB))
    assert EpisodeArchiveRefine(ScriptedChatModel(default="2491"), rubric=ONE_WORD,
                                store=store).run(TASK).archived
    [item] = store.search(("archive", "default"))
    assert Episode.model_validate(item.value["episode"]) == calc_episode()
    # a plain model's accepted run is archived without one, as before
    ArchiveRefine(ScriptedChatModel(default="Teal"), rubric=ONE_WORD, archive=archive).run(
        "Name a color in one word.")
    assert [e.episode is None for e in archive.entries()] == [False, True]


# -- Reflexion -----------------------------------------------------------------------------


def test_the_reflection_prompt_shows_what_the_agent_did() -> None:
    failed = calc_episode(error="SyntaxError: bad expression")
    [_, human] = reflect_messages("What is 53 * 47? Use the calculator and the python tool.",
                                  "2500", "- The answer is 2491. (yours: 2500)", episode=failed,
                                  asked=["calculator", "python"])
    text = str(human.content)
    assert "What you did:\nSteps: 2 model calls, 1 tool call." in text
    assert ('- I called calculator(expression="53*47"); it failed: SyntaxError: bad expression'
            in text)
    assert "- The task asks for python; you never called it." in text
    assert "calculator; you never" not in text  # it was called (and failed)
    assert "name the tool to use" in text
    # without an episode, the prompt is the one plain models always got
    [_, plain] = reflect_messages("t", "a", "f")
    assert plain.content == ("Task: t\n\nFailed attempt:\na\n\nWhy it failed:\nf\n\nGive the "
                             "root cause, the correction, and a one-sentence lesson for the "
                             "next attempt.")


def test_the_summary_says_when_no_tool_ran_and_why_the_episode_stopped() -> None:
    stopped = Episode(steps=[ModelStep(text="thinking")], stop_reason="step_limit")
    assert attempt_summary(stopped) == ("Steps: 1 model call, 0 tool calls. It stopped: it hit "
                                        "the step limit before answering.\n- You called no tool.")
    assert tools_asked_for("Please use your calculator; call lookup_table first.",
                           ["calculator", "lookup_table", "python"]) == ["calculator",
                                                                         "lookup_table"]


class AgentReflexion(Reflexion):
    """A Reflexion whose attempts came from an agent with two tools (the agent runner's part)."""

    tools = [type("Tool", (), {"name": "calculator"})(), type("Tool", (), {"name": "python"})()]

    def _reflect(self, state: Any, config: RunnableConfig) -> dict[str, Any]:
        last = state["rounds"][-1].model_copy(update={"episode": Episode(steps=[
            ToolStep(name="python", args={"code": "53*47"}, error="NameError: x"),
            ModelStep(text="2500")], final="2500")})
        return super()._reflect({**state, "rounds": [*state["rounds"][:-1], last]}, config)


@pytest.mark.filterwarnings("ignore::UserWarning")  # the task's "use the calculator" goes unchecked
def test_reflexion_lessons_can_name_the_tool_the_agent_skipped(tmp_path: Path) -> None:
    lesson = "Use the calculator for products of two-digit numbers."
    llm = ScriptedChatModel(responses=["2500", "2491"], structured={"ReflectionNote": [
        {"root_cause": "python failed", "correction": "use the calculator", "lesson": lesson}]})
    memory = ReflexionMemory(tmp_path, embedder=EMB)
    rubric = Rubric.for_constraints(exact_words=1, include_words=["2491"])
    task = "What is 53 * 47? Use the calculator."
    result = AgentReflexion(llm, rubric=rubric, memory=memory).run(task)
    assert result.output == "2491" and result.iterations == 2
    asked = next(c for c in llm.calls if c.kind == "structured").messages[-1].content
    assert 'I called python(code="53*47"); it failed: NameError: x' in str(asked)
    assert "The task asks for calculator; you never called it." in str(asked)
    [entry] = memory.entries()
    assert entry.reflection == lesson
    assert entry.metadata["tools_called"] == ["python"]
    assert entry.metadata["tools_skipped"] == ["calculator"]
    # recalled as before: the next run on a similar task sees the lesson in its first prompt
    again = ScriptedChatModel(default="2491")
    Reflexion(again, rubric=rubric, memory=memory).run("What is 53 * 48? Use the calculator.")
    first = next(c for c in again.calls if c.kind == "text").messages[-1].content
    assert lesson in str(first)


# -- end to end, with the package's own tool loop --------------------------------------------


@tool
def calculator(expression: str) -> str:
    """Evaluate an arithmetic expression such as 53*47."""
    left, right = expression.split("*")
    return str(int(left) * int(right))


@tool
def python(code: str) -> str:
    """Run Python code."""
    raise RuntimeError("the sandbox is closed")


def calls(name: str, args: dict[str, Any], id: str) -> AIMessage:
    return AIMessage("", tool_calls=[{"name": name, "args": args, "id": id}])


def test_an_agents_accepted_episode_is_archived_then_shown_as_a_few_shot_episode(
        archive: Archive) -> None:
    first = ScriptedChatModel(responses=[calls("calculator", {"expression": "53*47"}, "a1"),
                                         "2491"])
    assert ArchiveRefine(first, tools=[calculator], rubric=ONE_WORD, archive=archive).run(
        TASK).archived
    [entry] = archive.entries()
    assert entry.episode is not None and entry.episode.tools_called == ["calculator"]
    second = ScriptedChatModel(responses=[calls("calculator", {"expression": "61*38"}, "a2"),
                                          "2318"])
    result = ArchiveRefine(second, tools=[calculator], rubric=ONE_WORD, archive=archive,
                           min_similarity=0.0).run(SIMILAR)
    assert result.exemplar_ids == [entry.id]
    sent = next(c for c in second.calls if c.kind == "text").messages
    assert [m.type for m in sent] == ["system", "human", "ai", "tool", "ai", "human"]
    assert isinstance(sent[2], AIMessage) and sent[2].tool_calls[0]["args"] == {
        "expression": "53*47"}
    assert sent[3].content == "2491" and sent[4].content == "2491"


@pytest.mark.filterwarnings("ignore::UserWarning")  # the task's "use the calculator" goes unchecked
def test_an_agents_failed_episode_is_reflected_on_with_its_tools(tmp_path: Path) -> None:
    lesson = "Use the calculator for products of two-digit numbers."
    llm = ScriptedChatModel(
        responses=[calls("python", {"code": "print(53*47)"}, "p1"), "2500", "2491"],
        structured={"ReflectionNote": [{"root_cause": "python failed", "correction": "calc",
                                        "lesson": lesson}]})
    memory = ReflexionMemory(tmp_path, embedder=EMB)
    rubric = Rubric.for_constraints(exact_words=1, include_words=["2491"])
    result = Reflexion(llm, tools=[calculator, python], rubric=rubric, memory=memory).run(
        "What is 53 * 47? Use the calculator.")
    assert result.output == "2491"
    asked = str(next(c for c in llm.calls if c.kind == "structured").messages[-1].content)
    assert 'I called python(code="print(53*47)"); it failed:' in asked
    assert "The task asks for calculator; you never called it." in asked
    [entry] = memory.entries()
    assert entry.reflection == lesson and entry.metadata["tools_skipped"] == ["calculator"]
