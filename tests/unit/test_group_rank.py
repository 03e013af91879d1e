"""Group ranking: scores relative to the group, position bias measured and countered, failures
recorded (never raised), including from a real OpenAI-compatible HTTP server that returns
malformed JSON; and the best-of-n tie-break that uses it."""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.language_models.fake_chat_models import FakeListChatModel

# The chat-completions stub server of the structured-output tests (a real HTTP server).
from test_structured_output import _ChatServer

from agentic_loop.architectures.sampling import pick_best
from agentic_loop.episodes import Episode, ModelStep, ToolCall, ToolStep
from agentic_loop.errors import ConfigError
from agentic_loop.judges import Critic, Feature, GroupRanker, GroupRanking, Rubric
from agentic_loop.judges.group_rank import SCHEMA_NAME, candidates_shown, consistency_of
from agentic_loop.models import load_chat_model
from agentic_loop.models.retry import RetryPolicy
from agentic_loop.testing import ScriptedChatModel

NO_WAIT = RetryPolicy(max_attempts=3, backoff_s=0.0)


def by_length(schema: Any, msgs: list[Any]) -> dict[str, int]:
    """A position-blind judge: a longer candidate scores higher (its length, capped at 10)."""
    return {f"candidate_{k}": min(10, len(text))
            for k, text in candidates_shown(msgs[-1].content).items()}


def likes_first(schema: Any, msgs: list[Any]) -> dict[str, int]:
    """A position-biased judge: whatever is shown first gets 10, the rest 0."""
    return {name: 10 if name == "candidate_a" else 0 for name in schema.model_fields}


def test_scores_come_back_in_the_callers_order_from_shuffled_orders() -> None:
    llm = ScriptedChatModel(default_structured=by_length)
    ranking = GroupRanker(llm, seed=3).rank("Name a colour.", ["red", "teal", "ultramarine", "ox"])
    assert ranking.ok and ranking.error is None
    assert ranking.scores == [3.0, 4.0, 10.0, 2.0]
    assert ranking.per_order == [[3.0, 4.0, 10.0, 2.0]] * 2
    first, second = ranking.orders
    assert sorted(first) == [0, 1, 2, 3] and second == first[::-1]
    assert ranking.consistency == 1.0 and ranking.best() == 2
    assert ranking.attempts == 2 and ranking.judge == "scripted"
    # each order's prompt shows the candidates in that order, labelled A, B, ...
    shown = [candidates_shown(c.prompt) for c in llm.calls]
    assert [list(s.values()) for s in shown] == [[["red", "teal", "ultramarine", "ox"][i]
                                                  for i in perm] for perm in ranking.orders]
    assert {c.schema_name for c in llm.calls} == {SCHEMA_NAME}


def test_a_judge_that_always_prefers_position_a_is_caught_and_averaged_out() -> None:
    ranking = GroupRanker(ScriptedChatModel(default_structured=likes_first)).rank(
        "Pick one.", ["x", "y", "z"])
    first, second = ranking.orders
    assert ranking.per_order[0][first[0]] == 10.0 and ranking.per_order[1][second[0]] == 10.0
    assert ranking.consistency is not None and ranking.consistency < 1.0
    assert ranking.consistency == pytest.approx(1 / 3)
    expected = [(a + b) / 2 for a, b in zip(*ranking.per_order, strict=True)]
    assert ranking.scores == expected and sorted(expected) == [0.0, 5.0, 5.0]


def test_one_order_has_no_consistency_and_orders_are_seeded() -> None:
    llm = ScriptedChatModel(default_structured=by_length)
    one = GroupRanker(llm, orders=1).rank("t", ["aa", "b"])
    assert one.consistency is None and len(one.orders) == 1 and one.scores == [2.0, 1.0]
    three = [GroupRanker(llm, orders=3, seed=7).rank("t", list("abcdef")).orders for _ in "12"]
    assert three[0] == three[1] and len(three[0]) == 3
    assert consistency_of([[1, 2, 3], [1, 2, 3], [3, 2, 1]]) == pytest.approx(1 / 3)
    assert consistency_of([[1, 1], [1, 2]]) == 0.5  # a tie against an order counts half


def test_one_candidate_scores_ten_without_a_call_and_none_is_refused() -> None:
    llm = ScriptedChatModel()
    ranking = GroupRanker(llm).rank("t", ["only"])
    assert ranking.scores == [10.0] and ranking.attempts == 0 and llm.calls == []
    assert ranking.consistency is None and ranking.best() == 0
    with pytest.raises(ConfigError, match="0 candidates"):
        GroupRanker(llm).rank("t", [])
    with pytest.raises(ConfigError, match="27 candidates"):
        GroupRanker(llm).rank("t", ["c"] * 27)
    with pytest.raises(ConfigError, match="orders=0"):
        GroupRanker(llm, orders=0)
    with pytest.raises(ConfigError, match="2 candidates but 1 episodes"):
        GroupRanker(llm).rank("t", ["a", "b"], episodes=[None])


def test_out_of_range_and_invalid_answers_are_retried_then_accepted() -> None:
    bad = {"candidate_a": 11, "candidate_b": 3}  # out of range: invalid under Field(le=10)
    llm = ScriptedChatModel(structured={SCHEMA_NAME: [bad, ValueError("garbled"),
                                                      {"candidate_a": 7, "candidate_b": 3},
                                                      {"candidate_a": 3, "candidate_b": 7}]})
    ranking = GroupRanker(llm, orders=2, retry=NO_WAIT).rank("t", ["p", "q"])
    assert ranking.ok and ranking.attempts == 4 and len(llm.calls) == 4
    assert all(0.0 <= s <= 10.0 for s in ranking.scores or [])
    retried = [c.messages[-1].content for c in llm.calls[2:]]
    assert any("invalid" in text for text in retried)  # the judge is told what was wrong


def test_a_judge_that_stays_invalid_is_a_recorded_failure_not_an_exception() -> None:
    llm = ScriptedChatModel(default_structured=lambda schema, msgs: {"candidate_a": 99})
    ranking = GroupRanker(llm, retry=NO_WAIT).rank("t", ["p", "q", "r"])
    assert not ranking.ok and ranking.scores is None and ranking.best() is None
    assert ranking.error is not None and "2 of 2 orders" in ranking.error
    assert ranking.attempts == 6 and len(llm.calls) == 6  # 3 attempts for each order
    assert len(ranking.orders) == 2 and ranking.per_order == []


def test_a_model_without_structured_output_is_a_recorded_failure() -> None:
    ranking = GroupRanker(FakeListChatModel(responses=["nope"]), retry=NO_WAIT).rank(
        "t", ["p", "q"])
    assert ranking.scores is None and ranking.error


def test_the_criteria_are_the_rubrics_judged_features_only() -> None:
    rubric = Rubric([Feature("warm", "The tone is warm and friendly.", 1.0, kind="bool"),
                     Feature("short", "At most five words.", 1.0,
                             check=lambda task, out: len(out.split()) <= 5)])
    llm = ScriptedChatModel(default_structured=by_length)
    GroupRanker(llm, rubric).rank("Greet a guest.", ["Hi", "Hello there"])
    prompt = llm.calls[0].messages[-1].content
    assert "The tone is warm and friendly." in prompt
    assert "At most five words." not in prompt and "overall quality" not in prompt


def test_episodes_are_shown_compactly_before_the_answer_and_cut_to_max_chars() -> None:
    episode = Episode(steps=[ModelStep(tool_calls=[ToolCall(name="calc", args={"e": "6*7"})]),
                             ToolStep(name="calc", args={"e": "6*7"}, content="42 " * 400),
                             ModelStep(text="It is 42.")], final="It is 42.")
    llm = ScriptedChatModel(default_structured=by_length)
    GroupRanker(llm, max_chars=300).rank("What is 6*7?", ["It is 42.", "x" * 5000],
                                         episodes=[episode, None])
    GroupRanker(llm, max_chars=300).rank("What is 6*7?", ["y" * 5000, "z"],
                                         episodes=[episode, episode])
    shown = candidates_shown(llm.calls[0].prompt)
    with_tools = next(t for t in shown.values() if t.startswith("Tool calls:"))
    assert '- calc({"e": "6*7"}) -> 42 42' in with_tools
    assert with_tools.endswith("Answer:\nIt is 42.") and len(with_tools) <= 300
    assert all(len(t) <= 300 for t in shown.values())
    long_one = next(t for t in candidates_shown(llm.calls[-1].prompt).values() if "yyy" in t)
    assert len(long_one) == 300 and long_one.endswith("y…") and "Answer:\ny" in long_one


def test_rank_many_ranks_each_group_as_rank_does() -> None:
    groups = [("a", ["x", "yy"]), ("b", ["only"]), ("c", ["p", "qqq", "rr"]),
              ("d", ["aaaa", "b", "cc"])]
    llm = ScriptedChatModel(default_structured=by_length)
    rankings = GroupRanker(llm).rank_many(groups)
    assert len(llm.calls) == 6  # 2 orders for each group of more than one
    assert [r.scores for r in rankings] == [[1.0, 2.0], [10.0], [1.0, 3.0, 2.0],
                                            [4.0, 1.0, 2.0]]
    assert rankings[2].orders == GroupRanker(llm).rank_many(groups[:3])[2].orders
    assert all(isinstance(r, GroupRanking) and r.ok for r in rankings)
    episode = Episode(steps=[ToolStep(name="search", content="found")], final="ok")
    judge = ScriptedChatModel(default_structured=by_length)
    [with_episode] = GroupRanker(judge).rank_many([("e", ["ok", "no"], [episode, None])])
    assert with_episode.ok and "- search({}) -> found" in judge.calls[0].prompt


def serve(replies: list[str]) -> _ChatServer:
    return _ChatServer(replies)


def test_an_openai_compatible_server_returning_malformed_json_is_retried_then_recorded() -> None:
    server = serve(['{"candidate_a": 7, "candidate_b": '] * 40)  # cut-off JSON, every time
    try:
        llm = load_chat_model(f"openai:{server.url}", model="smol")
        ranking = GroupRanker(llm, retry=RetryPolicy(max_attempts=2, backoff_s=0.0)).rank(
            "Pick the better answer.", ["yes", "no"])
    finally:
        server.close()
    assert ranking.scores is None and ranking.error is not None
    assert "GroupScores" in ranking.error and ranking.attempts == 4  # 2 orders x 2 attempts
    assert len(server.requests) >= 4  # every attempt reached the server
    fmt = server.requests[0]["response_format"]["json_schema"]
    props = fmt["schema"]["properties"]
    assert fmt["name"] == SCHEMA_NAME and props["candidate_b"]["maximum"] == 10


def test_an_openai_compatible_server_out_of_range_then_valid() -> None:
    valid = '{"candidate_a": 2, "candidate_b": 8}'
    server = serve(['{"candidate_a": 12, "candidate_b": -1}'] + [valid] * 10)
    try:
        llm = load_chat_model(f"openai:{server.url}", model="smol")
        ranking = GroupRanker(llm, retry=NO_WAIT).rank("Pick one.", ["yes", "no"])
    finally:
        server.close()
    assert ranking.ok and ranking.scores is not None and len(server.requests) == 3
    assert all(0 <= s <= 10 for s in ranking.scores)


THREE_WORDS = Rubric.for_constraints(word_count=(3, 3))


def samples(*drafts: str) -> list[dict[str, Any]]:
    return [{"draft": d, "model": "m", "cut_from": None, "episode": None} for d in drafts]


def test_best_of_n_tie_break_by_the_group_ranker() -> None:
    critic = Critic(ScriptedChatModel(), THREE_WORDS, critique_text=False)
    drafts = samples("one two", "tea is warm", "lovely warm afternoon", "warm tea cup")
    best, _, others = pick_best("t", drafts, critic)
    assert best == 1  # no ranker: ties go to the earlier sample, as before
    judge = ScriptedChatModel(default_structured=lambda schema, msgs: {  # half the length
        f"candidate_{k}": len(text) // 2 for k, text in candidates_shown(msgs[-1].content).items()})
    notes: list[str] = []
    best, critique, others = pick_best("t", drafts, critic, ranker=GroupRanker(judge),
                                       notes=notes)
    assert best == 2 and critique.passed  # the ranker's pick among the tied
    assert [o.draft for o in others] == ["warm tea cup", "tea is warm", "one two"]
    assert len(judge.calls) == 2 and "broke a tie of samples [1, 2, 3]" in notes[0]
    shown = set(candidates_shown(judge.calls[0].prompt).values())
    assert shown == {"tea is warm", "lovely warm afternoon", "warm tea cup"}  # only the tied


def test_best_of_n_without_a_tie_or_with_a_failing_ranker_keeps_the_checks_pick() -> None:
    critic = Critic(ScriptedChatModel(), THREE_WORDS, critique_text=False)
    judge = ScriptedChatModel(default_structured=likes_first)
    best, _, _ = pick_best("t", samples("x", "tea is warm", "y z"), critic,
                           ranker=GroupRanker(judge))
    assert best == 1 and judge.calls == []  # one top sample: nothing to break
    broken = ScriptedChatModel(default_structured=lambda schema, msgs: {"candidate_a": -3})
    notes: list[str] = []
    best, _, _ = pick_best("t", samples("tea is warm", "warm tea cup"), critic,
                           ranker=GroupRanker(broken, retry=NO_WAIT), notes=notes)
    assert best == 0 and "could not break a tie" in notes[0]
