"""The labelled judge pair set (bench/data/judge_pairs.jsonl) and the bench scoring judges on it.

The set is the ground truth of the judges bench, so its rows are checked the way a
reviewer would: every id once, every task kind present, the worse answer really
different, tool rows whose transcript is their episode, math rows whose answer key
matches the better answer only, and checks that never prefer the worse answer. The
bench's arithmetic is checked with scripted judges whose right answers are known.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from bench_helpers import BENCH, load_bench

from agentic_loop.distill.eval.stats import wilson
from agentic_loop.errors import ConfigError
from agentic_loop.judges import short_answer
from agentic_loop.testing import ScriptedChatModel


@pytest.fixture(scope="module")
def jq() -> ModuleType:
    """bench/judges_quality.py (the bench is scripts, not a package)."""
    return load_bench("judges_quality")


def test_the_set_loads_with_unique_ids_every_kind_and_distinct_answers(jq: ModuleType) -> None:
    pairs = jq.load_pairs()
    assert len(pairs) >= 60
    assert len({p.id for p in pairs}) == len(pairs)
    kinds = Counter(p.kind for p in pairs)
    assert set(kinds) == set(jq.KINDS) and min(kinds.values()) >= 8, kinds
    for p in pairs:
        assert p.better.strip() != p.worse.strip(), p.id
        assert p.why.strip() and "\n" not in p.why, p.id
        better, worse = p.shown("better"), p.shown("worse")  # a tool row: its final answer
        assert len(worse) >= 0.3 * len(better), f"{p.id}: the worse answer is trivially short"
        for feature in p.features:
            assert set(feature) == {"name", "description"}, p.id
    raw = (BENCH / "data" / "judge_pairs.jsonl").read_text(encoding="utf-8").splitlines()
    assert all(json.loads(line)["id"] for line in raw if line.strip())


def test_tool_rows_are_their_episodes_and_math_rows_carry_their_answer(jq: ModuleType) -> None:
    pairs = jq.load_pairs()
    tools = [p for p in pairs if p.kind == "tool_use"]
    assert tools and all(p.episodes is not None for p in tools)
    for p in tools:
        assert p.better == jq.transcript(p.episodes["better"]), p.id
        assert p.worse == jq.transcript(p.episodes["worse"]), p.id
        episode = p.episode("better")
        assert episode.final == p.episodes["better"].final and episode.tools_called, p.id
    guessed = [p for p in tools if not p.episodes["worse"].steps]
    assert guessed and len(guessed) < len(tools)  # some guessed, some called and misread
    for p in (p for p in pairs if p.kind == "math"):
        assert p.answer is not None and p.checks == {"answer": p.answer}, p.id
        assert short_answer(p.better) == p.answer != short_answer(p.worse), p.id


def test_the_checks_never_prefer_the_worse_answer(jq: ModuleType) -> None:
    pairs = jq.load_pairs()
    prefs = dict(zip([p.id for p in pairs], jq.judge_checks(pairs), strict=True))
    checked = {k: v for k, v in prefs.items() if v is not None}
    assert {p.kind for p in pairs if p.id in checked} >= {
        "constrained_writing", "math", "code", "tool_use"}
    assert all(v >= 0.5 for v in checked.values()), checked
    ties = sorted(k for k, v in checked.items() if v == 0.5)
    assert ties == ["tool_use-02", "tool_use-04", "tool_use-08"]  # the tool was called in both
    assert prefs["support-01"] is None and prefs["tone-01"] is None  # nothing to check


@pytest.mark.parametrize(("row", "message"), [
    ({"id": "x-1", "better": "a", "worse": "a"}, "same better and worse"),
    ({"id": "x-1", "kind": "poetry"}, "kind 'poetry'"),
    ({"id": "x-1", "colour": "red"}, "not a valid pair row"),
])
def test_a_bad_row_is_refused_with_its_id(jq: ModuleType, tmp_path: Path,
                                          row: dict[str, Any], message: str) -> None:
    good = {"id": "x-0", "kind": "tone", "task": "t", "better": "b", "worse": "w", "why": "y"}
    path = tmp_path / "pairs.jsonl"
    path.write_text(json.dumps(good) + "\n" + json.dumps({**good, **row}) + "\n")
    with pytest.raises(ConfigError, match=message):
        jq.load_pairs(path)
    path.write_text(json.dumps(good) + "\n" + json.dumps(good) + "\n")
    with pytest.raises(ConfigError, match="appears twice"):
        jq.load_pairs(path)


def _judge(answers: dict[str, str]) -> ScriptedChatModel:
    """A judge that says yes to every feature (as the 135M model does), always ranks the
    candidate shown first higher, and, sampled, answers each math task correctly."""

    def structured(schema: Any, messages: Any) -> dict[str, Any]:
        if schema.__name__ == "GroupScores":
            return {"candidate_a": 8, "candidate_b": 3}
        return {name: (True if field.annotation is bool else 7)
                for name, field in schema.model_fields.items()}

    def text(messages: Any) -> str:
        return f"Answer: {answers[str(messages[-1].content)]}"

    return ScriptedChatModel(default_structured=structured, default=text, model_id="yes-man")


def test_the_bench_scores_a_yes_saying_position_biased_judge_as_chance(
        jq: ModuleType, tmp_path: Path) -> None:
    pairs = jq.quick_subset(jq.load_pairs(), per_kind=2)
    answers = {p.task: p.answer for p in pairs if p.answer is not None}
    judge = _judge(answers)
    out = tmp_path / "judges.json"
    out.write_text(json.dumps({"spread": {"kept": True}}))
    section = jq.bench_quality(out, pairs=pairs, votes=3, load=lambda spec, **kw: judge)
    rows = section["rows"]
    saved = json.loads(out.read_text())
    assert saved["spread"] == {"kept": True} and saved["quality"]["rows"].keys() == rows.keys()
    # Yes to every feature: only the checks separate the pair (tasks that state constraints).
    critic = rows["critic"]
    assert critic["model"] == "yes-man" and critic["failed"] == 0
    assert critic["by_kind"]["support"] == 0.5 and critic["by_kind"]["tone"] == 0.5
    assert critic["by_kind"]["constrained_writing"] == 1.0
    assert critic["position_consistency"] is None
    assert critic["accuracy_where_checks_tie"] == 0.5  # the judge itself adds nothing
    assert rows["critic_grade"]["accuracy"] == 0.5  # the same 7 for both answers
    assert "accuracy_where_checks_tie" not in rows["checks"]
    assert "only model" in rows["separate"]["note"]
    # Always the first shown: every pair flips with the order, so it is a coin (a tie each).
    group = rows["group"]
    assert group["accuracy"] == 0.5 and group["ties"] == len(pairs)
    assert group["position_consistency"] == 0.0 and group["first_shown_wins"] == 1.0
    # A vote that always finds the answer key: right on every short-answer row it covers.
    vote = rows["vote"]
    assert vote["pairs"] == len(answers) and vote["coverage"] == 1.0 and vote["accuracy"] == 1.0
    assert rows["checks"]["accuracy"] > 0.9 and rows["checks"]["coverage"] < 1.0
    low, high = critic["wilson95"]
    assert 0.0 <= low < critic["accuracy"] < high <= 1.0


def _half_broken(pairs: list[Any]) -> tuple[ScriptedChatModel, set[str]]:
    """A judge that fails on every support and tone task (junk it never repairs) and, where it
    answers, says yes to every feature of the better answer and no to the worse; as a group
    ranker it calls every pair a tie."""
    broken = {p.task for p in pairs if p.kind in ("support", "tone")}
    better = {p.shown("better") for p in pairs}

    def structured(schema: Any, messages: Any) -> dict[str, Any]:
        text = "\n".join(str(m.content) for m in messages)
        if any(task in text for task in broken):
            raise ConnectionError("the judge's server dropped the request")
        if schema.__name__ == "GroupScores":
            return {"candidate_a": 5, "candidate_b": 5}
        good = any(answer in text for answer in better)
        return {name: (good if field.annotation is bool else 7)
                for name, field in schema.model_fields.items()}

    judge = ScriptedChatModel(default_structured=structured, default="Answer: 0",
                              model_id="flaky")
    return judge, {p.id for p in pairs if p.task in broken}


def test_a_failed_judgement_is_counted_as_failed_never_as_a_tie(
        jq: ModuleType, tmp_path: Path) -> None:
    pairs = [p for p in jq.quick_subset(jq.load_pairs(), per_kind=2) if p.kind != "tool_use"]
    judge, broken = _half_broken(pairs)
    section = jq.bench_quality(tmp_path / "judges.json", pairs=pairs, votes=1,
                               load=lambda spec, **kw: judge)
    n, k = len(pairs), len(broken)
    assert k == 4 and n == 12
    for name in ("critic", "group"):
        row = section["rows"][name]
        assert row["failed"] == k and row["decided"] == n - k, name
        assert row["coverage"] == (n - k) / n, name
        assert all(row["per_pair"][i] is None for i in broken), name
    critic, group = section["rows"]["critic"], section["rows"]["group"]
    # Where it answered it was right every time: failures do not drag it towards a coin.
    assert critic["accuracy"] == 1.0 and critic["ties"] == 0
    assert critic["wilson95"] == [wilson(n - k, n - k)[0], wilson(n - k, n - k)[1]]
    # The ranker ties every pair it decided; order statistics only count those pairs.
    assert group["accuracy"] == 0.5 and group["ties"] == n - k
    assert group["position_consistency"] == 1.0 and group["first_shown_wins"] == 0.5
    with pytest.raises(ConfigError, match="never a tie"):
        jq.summarize("j", "m", [0.5, 1.0], kinds=["a", "a"], failed=1)


def test_ties_count_half_and_the_interval_spans_both_roundings(jq: ModuleType) -> None:
    row = jq.summarize("j", "m", [1.0, 0.5, 0.5, None], kinds=["a", "a", "b", "b"])
    assert row["accuracy"] == pytest.approx(2 / 3) and row["coverage"] == 0.75
    assert row["ties"] == 2 and row["by_kind"] == {"a": 0.75, "b": 0.5}
    assert row["wilson95"] == [wilson(2, 3)[0], wilson(2, 3)[1]]
    odd = jq.summarize("j", "m", [1.0, 0.5], kinds=["a", "a"])  # credit 1.5 of 2
    assert odd["wilson95"] == [wilson(1, 2)[0], wilson(2, 2)[1]]
