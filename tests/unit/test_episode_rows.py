"""An agent's episode as TRL tool-calling messages, and what curation asks of it.

Episodes are built by hand (real :class:`~agentic_loop.episodes.Episode` objects), as an agent
records them: model calls with tool calls, tool results, a simulated user's turns.
"""

from __future__ import annotations

import json

import pytest

from agentic_loop.distill.data.curate import CurationLog
from agentic_loop.distill.data.datasets import preference_pairs, sft_rows
from agentic_loop.distill.data.episode_rows import (
    Message,
    conversation_chars,
    episode_messages,
    episode_meta,
    episode_problem,
    episode_signature,
    split_shared,
)
from agentic_loop.distill.data.samples import Sample, trajectory_samples
from agentic_loop.episodes import Episode, ModelStep, ToolCall, ToolStep, UserStep
from agentic_loop.trajectories import Round, Trajectory

CALC = {"type": "function", "function": {
    "name": "calculator", "description": "Evaluates an arithmetic expression.",
    "parameters": {"type": "object", "properties": {"expression": {"type": "string"}},
                   "required": ["expression"]}}}


def calc_episode(result: str = "2491", answer: str = "53 * 47 = 2491.", *,
                 expression: str = "53*47", call_id: str | None = "call_a") -> Episode:
    return Episode(steps=[
        ModelStep(tool_calls=[ToolCall(name="calculator", args={"expression": expression},
                                       id=call_id)]),
        ToolStep(call_id=call_id, name="calculator", args={"expression": expression},
                 content=result),
        ModelStep(text=answer)], final=answer, tools=[CALC])


def dumped(messages: list[Message]) -> list[dict[str, object]]:
    return [json.loads(m.model_dump_json()) for m in messages]


def test_an_episode_is_the_shared_format_conversation() -> None:
    assert dumped(episode_messages(calc_episode(), "53 * 47 = 2491.")) == [
        {"role": "assistant", "content": "", "tool_calls": [
            {"id": "call_a", "type": "function",
             "function": {"name": "calculator", "arguments": {"expression": "53*47"}}}]},
        {"role": "tool", "content": "2491", "tool_call_id": "call_a", "name": "calculator"},
        {"role": "assistant", "content": "53 * 47 = 2491."}]


def test_ids_errors_user_turns_and_the_judged_answer() -> None:
    episode = Episode(steps=[
        ModelStep(text="Checking.", tool_calls=[ToolCall(name="lookup", args={"id": 7}),
                                                ToolCall(name="calculator", args={})]),
        ToolStep(name="calculator", error="bad expression"),  # answered out of order, no ids
        ToolStep(name="lookup", args={"id": 7}, content="shipped"),
        ModelStep(text="It shipped. Anything else?"),
        UserStep(text="What did it cost?"),
        ModelStep(text="It cost $12.")], final="It cost $12.")
    messages = dumped(episode_messages(episode, "It cost $12 in total."))
    assert [m["role"] for m in messages] == ["assistant", "tool", "tool", "assistant", "user",
                                             "assistant"]
    assert [c["id"] for c in messages[0]["tool_calls"]] == ["call_1", "call_2"]  # type: ignore
    assert messages[1] == {"role": "tool", "content": "Error: bad expression",
                           "tool_call_id": "call_2", "name": "calculator"}
    assert messages[2]["tool_call_id"] == "call_1"
    assert messages[4] == {"role": "user", "content": "What did it cost?"}
    # the last text-only turn is the answer: replaced by the judged draft, not repeated
    assert messages[-1] == {"role": "assistant", "content": "It cost $12 in total."}
    meta = episode_meta(episode).model_dump(mode="json")
    assert meta == {"model_steps": 3, "tool_calls": 2,
                    "tools_called": ["calculator", "lookup"], "user_turns": 1}


def test_an_episode_that_stopped_on_a_call_ends_with_the_answer_after_it() -> None:
    episode = Episode(steps=[ModelStep(tool_calls=[ToolCall(name="f", id="1")]),
                             ToolStep(call_id="1", name="f", content="x")], final="")
    assert [m.role for m in episode_messages(episode, "x it is")] == ["assistant", "tool",
                                                                      "assistant"]


@pytest.mark.parametrize(("episode", "problem"), [
    (calc_episode(), None),
    (calc_episode().model_copy(update={"stop_reason": "time_limit"}), "stopped_time_limit"),
    (Episode(steps=[ModelStep(tool_calls=[ToolCall(name="calculator", id="1")]),
                    ModelStep(text="2491")], final="2491"), "unanswered_call"),
    (Episode(steps=[ModelStep(tool_calls=[ToolCall(name="calculator", id="1")]),
                    ToolStep(call_id="1", name="calculator", error="boom"),
                    ModelStep(text="2491")], final="2491"), "tool_error"),
    (Episode(steps=[ToolStep(call_id="9", name="calculator", content="1"),
                    ModelStep(text="1")], final="1"), "orphan_result"),
    (Episode(steps=[ModelStep(tool_calls=[ToolCall(name="rm_rf", id="1")]),
                    ToolStep(call_id="1", name="rm_rf", content="done"),
                    ModelStep(text="ok")], final="ok", tools=[CALC]), "unknown_tool"),
    (calc_episode(answer=" "), "empty_final"),
])
def test_broken_episodes(episode: Episode, problem: str | None) -> None:
    assert episode_problem(episode) == problem


def test_calls_without_recorded_schemas_cannot_train() -> None:
    episode = Episode(steps=[ModelStep(tool_calls=[ToolCall(name="rm_rf", id="1")]),
                             ToolStep(call_id="1", name="rm_rf", content="done"),
                             ModelStep(text="ok")], final="ok")
    assert episode_problem(episode) == "no_tool_schemas"  # a trainer needs the schemas
    # an agent that answered without calling a tool needs none
    assert episode_problem(Episode(steps=[ModelStep(text="ok")], final="ok")) is None


def test_shared_prefix_stops_at_the_first_differing_step_and_renames_ids() -> None:
    good = episode_messages(calc_episode(), "2491")
    wrong_result = episode_messages(calc_episode("2419", call_id="call_z"), "2419")
    shared, chosen, rejected = split_shared(good, wrong_result)
    assert [m.role for m in shared] == ["assistant"]
    assert [m.content for m in chosen] == ["2491", "2491"]
    assert [(m.content, m.tool_call_id) for m in rejected] == [("2419", "call_a"), ("2419", None)]
    other_call = episode_messages(calc_episode(expression="53 * 47"), "2491")
    shared, chosen, rejected = split_shared(good, other_call)
    assert shared == [] and len(chosen) == len(rejected) == 3  # diverged at the first step


def test_signature_and_length() -> None:
    assert episode_signature(None) == ()
    assert episode_signature(calc_episode(call_id=None)) == episode_signature(calc_episode())
    assert conversation_chars(episode_messages(calc_episode(), "ok")) == (
        len("calculator") + len('{"expression": "53*47"}') + len("2491") + len("ok"))


def agent_run(task: str, rounds: list[tuple[Episode, float]], **fields: object) -> Trajectory:
    return Trajectory(architecture="reflection", model_id="m", task=task, rounds=[
        Round(iteration=i, draft=ep.final, score=score, passed=score >= 8, episode=ep)
        for i, (ep, score) in enumerate(rounds)],
        final_output=rounds[-1][0].final, final_score=rounds[-1][1],
        accepted=rounds[-1][1] >= 8, **fields)  # type: ignore[arg-type]


def test_sft_rows_of_agents_dedup_on_calls_and_answer_and_drop_broken_ones() -> None:
    same = [agent_run("What is 53 * 47?", [(calc_episode(call_id=f"c{i}"), 9.0)])
            for i in range(2)]
    other_path = agent_run("What is 53 * 47?", [(calc_episode(expression="47*53"), 9.0)])
    broken = agent_run("What is 53 * 47?", [(calc_episode().model_copy(
        update={"stop_reason": "step_limit"}), 9.0)])
    samples = [s for t in [*same, other_path, broken] for s in trajectory_samples(t)]
    log = CurationLog()
    rows = sft_rows(samples, min_score=0.8, log=log, dedup_threshold=None)
    assert len(rows) == 2  # the two identical paths are one row; another path is another row
    assert log.drops == {"sft rows": {"broken_episode:stopped_step_limit": 1}}
    row = json.loads(rows[0].model_dump_json())
    assert row["tools"] == [CALC]
    assert row["metadata"]["episode"] == {"model_steps": 2, "tool_calls": 1,
                                          "tools_called": ["calculator"]}
    assert [m["role"] for m in row["messages"]] == ["system", "user", "assistant", "tool",
                                                    "assistant"]


def test_the_length_limit_counts_the_whole_conversation() -> None:
    run = agent_run("What is 53 * 47?", [(calc_episode(result="2491 " * 50), 9.0)])
    samples = trajectory_samples(run)
    prompt_chars = sum(len(c) for _, c in samples[0].chat)
    log = CurationLog()
    # the answer alone fits, the tool result makes the conversation too long
    assert sft_rows(samples, min_score=0.8, log=log, dedup_threshold=None,
                    max_chars=prompt_chars + 100) == []
    assert log.drops == {"sft rows": {"too_long": 1}}


def test_pairs_of_episodes_share_their_common_steps() -> None:
    run = agent_run("What is 53 * 47?", [(calc_episode("2419", "It is 2419.", call_id="x"), 2.0),
                                         (calc_episode(), 9.0)])
    [pair] = preference_pairs(trajectory_samples(run), min_score=0.8, log=CurationLog())
    row = json.loads(pair.model_dump_json())
    assert [m["role"] for m in row["prompt"]] == ["system", "user", "assistant"]
    assert row["prompt"][-1]["tool_calls"][0]["id"] == "call_a"
    assert row["chosen"] == [
        {"role": "tool", "content": "2491", "tool_call_id": "call_a", "name": "calculator"},
        {"role": "assistant", "content": "53 * 47 = 2491."}]
    assert (row["rejected"][0]["tool_call_id"], row["rejected"][0]["content"]) == ("call_a", "2419")
    assert row["tools"] == [CALC] and row["metadata"]["shared_steps"] == 1
    assert row["metadata"]["chosen_episode"]["tool_calls"] == 1


def test_a_pair_with_one_plain_side_keeps_the_plain_prompt() -> None:
    plain = Trajectory(architecture="reflection", model_id="m", task="What is 53 * 47?",
                       rounds=[Round(iteration=0, draft="2419", score=2.0, passed=False)],
                       final_output="2419", final_score=2.0)
    agent = agent_run("What is 53 * 47?", [(calc_episode(), 9.0)])
    samples = [*trajectory_samples(plain), *trajectory_samples(agent)]
    [pair] = preference_pairs(samples, min_score=0.8, log=CurationLog())
    assert [m.role for m in pair.prompt] == ["system", "user"]
    assert [m.role for m in pair.chosen] == ["assistant", "tool", "assistant"]
    assert [m.model_dump(mode="json") for m in pair.rejected] == [
        {"role": "assistant", "content": "2419"}]
    assert pair.metadata.shared_steps == 0 and pair.metadata.rejected_episode is None


def test_a_pair_identical_after_its_shared_steps_is_dropped_and_counted() -> None:
    ep = calc_episode()
    chosen = Sample("t", ep.final, 0.9, "final", "a", 0, "m", passed=True, episode=ep)
    rejected = Sample("t", ep.final.upper(), 0.2, "final", "b", 0, "m", passed=False,
                      episode=ep.model_copy(update={"final": ep.final.upper()}))
    log = CurationLog()
    assert preference_pairs([chosen, rejected], min_score=0.8, log=log) == []
    assert log.drops == {"pairs": {"identical_sides": 1}}


def test_plain_rows_are_written_as_before() -> None:
    run = Trajectory(architecture="reflection", model_id="m", task="Say hi.",
                     rounds=[Round(iteration=0, draft="yo", score=2.0),
                             Round(iteration=1, draft="Hi!", score=9.0)],
                     final_output="Hi!", final_score=9.0, accepted=True)
    samples = trajectory_samples(run)
    [row] = sft_rows(samples, min_score=0.8, log=CurationLog())
    line = json.loads(row.model_dump_json())
    assert set(line) == {"messages", "metadata"} and "episode" not in line["metadata"]
    assert all(set(m) == {"role", "content"} for m in line["messages"])
    assert line["metadata"]["passed"] is True and "iteration" in line["metadata"]
    [pair] = preference_pairs(samples, min_score=0.8, log=CurationLog())
    line = json.loads(pair.model_dump_json())
    assert set(line) == {"prompt", "chosen", "rejected", "metadata"}
    assert not {"chosen_episode", "rejected_episode", "shared_steps"} & set(line["metadata"])


def test_best_of_n_episodes_that_diverge_at_once_keep_the_plain_prompt() -> None:
    from agentic_loop.trajectories import Candidate

    loser = calc_episode("2491", "About 2500.", expression="50*50", call_id="z")
    run = Trajectory(architecture="reflection", model_id="m", task="What is 53 * 47?",
                     rounds=[Round(iteration=0, draft="53 * 47 = 2491.", score=9.0, passed=True,
                                   episode=calc_episode(), alternatives=[Candidate(
                                       draft="About 2500.", score=2.0, passed=False,
                                       judged=True, episode=loser)])],
                     final_output="53 * 47 = 2491.", final_score=9.0, accepted=True)
    [pair] = preference_pairs(trajectory_samples(run), min_score=0.8, log=CurationLog())
    assert pair.metadata.source == "best_of_n" and pair.metadata.shared_steps == 0
    assert [m.role for m in pair.prompt] == ["system", "user"]
    assert pair.rejected[0].tool_calls is not None
    assert pair.rejected[0].tool_calls[0].function.arguments == {"expression": "50*50"}
    assert pair.rejected[1].tool_call_id == "z"  # its own call, its own id


def rm_episode(tools: list[dict[str, object]]) -> Episode:
    return Episode(steps=[ModelStep(tool_calls=[ToolCall(name="rm_rf", id="r")]),
                          ToolStep(call_id="r", name="rm_rf", content="gone"),
                          ModelStep(text="Deleted.")], final="Deleted.", tools=tools)


def test_a_pair_takes_both_sides_schemas_and_drops_what_a_trainer_cannot_read() -> None:
    rm = {"type": "function", "function": {"name": "rm_rf", "parameters": {}}}
    chosen = Sample("t", "53 * 47 = 2491.", 0.9, "final", "a", 0, "m", passed=True,
                    episode=calc_episode())
    offered = Sample("t", "Deleted.", 0.1, "final", "b", 0, "m", passed=False,
                     episode=rm_episode([CALC, rm]))
    [pair] = preference_pairs([chosen, offered], min_score=0.8, log=CurationLog())
    assert pair.tools == [CALC, rm]  # the row offers what either side was offered
    unknown = Sample("t", "Deleted.", 0.1, "final", "b", 0, "m", passed=False,
                     episode=rm_episode([CALC]))  # it called a tool it was not offered
    log = CurationLog()
    assert preference_pairs([chosen, unknown], min_score=0.8, log=log) == []
    assert log.drops == {"pairs": {"rejected_unknown_tool": 1}}
