"""SFT rows (rejection sampling) and DPO pairs (min gap, refine rounds, best-of-n rounds,
several samples)."""

from __future__ import annotations

import json

import pytest
from distill_helpers import corpus, make_run

from agentic_loop.distill.data.curate import CurationLog, drop_errored
from agentic_loop.distill.data.datasets import Message, preference_pairs, sft_rows
from agentic_loop.distill.data.samples import trajectory_samples
from agentic_loop.judges import Rubric
from agentic_loop.judges.ready_rubrics import copywriting_rubric, math_rubric
from agentic_loop.memory import HashingEmbedder
from agentic_loop.trajectories import Candidate, Round, Trajectory


def samples_of(runs):  # type: ignore[no-untyped-def]
    return [s for t in runs for s in trajectory_samples(t)]


def test_sft_keeps_accepted_finals_and_distinct_accepted_drafts() -> None:
    log = CurationLog()
    rows = sft_rows(samples_of(drop_errored(corpus())), min_score=0.8, log=log,
                    embedder=HashingEmbedder(), dedup_threshold=0.9)
    answers = [(r.messages[-2].content, r.messages[-1].content, r.metadata.reward) for r in rows]
    assert answers == [
        ("Write a tagline for a bookstore.", "Stories wait on every shelf.", 0.9),
        ("Write a tagline for a bookstore.", "Find your next favourite chapter!", 0.85),
        ("Write a slogan for a bakery.", "Fresh loaves at dawn.", 0.95),
        ("Write a slogan for a bakery.", "Warm bread, every morning.", 0.8),
    ]
    assert [(s.name, s.before, s.after) for s in log.steps] == [
        ("sft candidates", 8, 8), ("failed check", 8, 5), ("guard flags", 5, 5),
        ("broken episodes", 5, 5), ("score threshold", 5, 5), ("conversation length", 5, 5),
        ("exact duplicates", 5, 5), ("near duplicates", 5, 4), ("per-task cap", 4, 4)]
    assert log.drops == {"sft rows": {"failed_check": 3}}  # the 3 failing drafts


def test_sft_rows_are_trl_conversational_messages() -> None:
    run = make_run("Say hi.", [("Hi!", 9.0)])
    [first] = sft_rows(trajectory_samples(run), min_score=0.8, log=CurationLog())
    row = json.loads(first.model_dump_json())
    assert row["messages"][1:] == [{"role": "user", "content": "Say hi."},
                                   {"role": "assistant", "content": "Hi!"}]
    assert row["messages"][0]["role"] == "system"
    assert row["metadata"]["source"] == "final" and row["metadata"]["trajectory_id"] == run.id


def test_sft_cap_per_task_keeps_the_best() -> None:
    runs = [make_run("t", [(f"answer number {i}", 8.0 + i / 10)]) for i in range(5)]
    rows = sft_rows(samples_of(runs), min_score=0.8, log=CurationLog(), max_per_task=2)
    assert [r.messages[-1].content for r in rows] == ["answer number 4", "answer number 3"]


def test_pairs_from_refine_rounds_and_from_several_samples() -> None:
    log = CurationLog()
    pairs = preference_pairs(samples_of(drop_errored(corpus())), min_score=0.8, min_gap=0.2,
                             log=log)
    got = [(p.metadata.source, p.chosen[0].content, p.rejected[0].content, p.metadata.gap)
           for p in pairs]
    assert got == [
        ("samples", "Stories wait on every shelf.", "Shop books.", 0.7),
        ("refine", "Stories wait on every shelf.", "Books are here.", 0.6),
        ("refine", "Fresh loaves at dawn.", "Bread.", 0.55),
    ]
    steps = {s.name: (s.before, s.after) for s in log.steps}
    # candidates: 3 runs with earlier rounds (the one-round failing run has none)
    # + 1 task run 3 times;
    # the plateau run's pair (8.5 vs 8.5) misses the gap
    assert steps["pair candidates"] == (4, 4)
    assert steps["min gap"] == (4, 3)


def test_pair_format_is_trl_conversational() -> None:
    pairs = preference_pairs(samples_of([make_run("Say hi.", [("yo", 2.0), ("Hi!", 9.0)])]),
                             min_score=0.8, min_gap=0.2, log=CurationLog())
    row = json.loads(pairs[0].model_dump_json())
    assert [m["role"] for m in row["prompt"]] == ["system", "user"]
    assert row["prompt"][1] == {"role": "user", "content": "Say hi."}
    assert row["chosen"] == [{"role": "assistant", "content": "Hi!"}]
    assert row["rejected"] == [{"role": "assistant", "content": "yo"}]
    assert row["metadata"]["chosen_iteration"] == 1 and row["metadata"]["rejected_iteration"] == 0


def all_passing(run: Trajectory) -> Trajectory:
    """``run`` with every round's checks held: only the scores tell its drafts apart."""
    rounds = [r.model_copy(update={"passed": True}) for r in run.rounds]
    return run.model_copy(update={"rounds": rounds})


@pytest.mark.parametrize(("low", "high", "gap", "expected"), [
    (4.0, 6.0, 0.2, 1),   # exactly the gap: 0.6 - 0.4 is 0.2, not 0.19999999999999996
    (4.1, 6.0, 0.2, 0),   # just under
    (2.0, 9.0, 0.8, 0),   # 0.7 < 0.8
    (1.0, 9.0, 0.8, 1),
])
def test_min_gap(low: float, high: float, gap: float, expected: int) -> None:
    run = all_passing(make_run("t", [("low answer", low), ("high answer", high)]))
    pairs = preference_pairs(trajectory_samples(run), min_score=0.5, min_gap=gap,
                             log=CurationLog())
    assert len(pairs) == expected


def test_a_rejected_side_that_failed_a_check_needs_no_min_gap() -> None:
    # make_run marks drafts under 8 as failing: 0.2 < 0.9 by less than the gap, but a check failed
    run = make_run("t", [("low answer", 2.0), ("high answer", 9.0)])
    log = CurationLog()
    pairs = preference_pairs(trajectory_samples(run), min_score=0.5, min_gap=0.8, log=log)
    assert len(pairs) == 1 and pairs[0].metadata.rejected_passed is False
    same = make_run("t", [("low answer", 9.0), ("high answer", 9.0)], final="high answer",
                    final_score=9.0)
    same.rounds[0].passed = False  # failed, but not scored lower: no preference to learn
    assert preference_pairs(trajectory_samples(same), min_score=0.5, log=log) == []
    assert log.drops["pairs"]["rejected_not_worse"] == 1


def test_chosen_must_reach_min_score_and_rejected_must_be_earlier() -> None:
    weak = all_passing(make_run("t", [("bad", 1.0), ("meh", 6.0)]))
    log = CurationLog()
    assert preference_pairs(trajectory_samples(weak), min_score=0.8, log=log) == []
    step = next(s for s in log.steps if s.name == "chosen meets min_score")
    assert step.before == 1 and step.after == 0
    assert log.drops == {"pairs": {"chosen_below_threshold": 1}}
    failing = make_run("t", [("bad", 1.0), ("meh", 6.0)])  # "meh" failed a check: never chosen
    log = CurationLog()
    assert preference_pairs(trajectory_samples(failing), min_score=0.5, log=log) == []
    assert log.drops == {"pairs": {"chosen_failed_check": 1}}
    # the best draft came first: later worse drafts are not "early drafts vs the accepted final"
    regress = make_run("t", [("great", 9.0), ("worse", 2.0)], final="great", final_score=9.0)
    assert preference_pairs(trajectory_samples(regress), min_score=0.8, log=CurationLog()) == []


def test_identical_and_repeated_pairs_are_dropped() -> None:
    same_text = [make_run("t", [("same words", 9.0)]), make_run("t", [("same words", 3.0)])]
    assert preference_pairs(samples_of(same_text), min_score=0.8, log=CurationLog()) == []
    twice = [make_run("t", [("bad", 2.0), ("good", 9.0)]) for _ in range(2)]
    log = CurationLog()
    pairs = preference_pairs(samples_of(twice), min_score=0.8, log=log)
    assert len(pairs) == 1  # two runs gave the same (prompt, chosen, rejected)
    assert {s.name: s.removed for s in log.steps}["duplicate pairs"] == 1


def test_pairs_cap_per_task_keeps_the_widest_gaps() -> None:
    runs = [make_run("t", [(f"bad {i}", 1.0 + i), (f"good {i}", 9.0)]) for i in range(4)]
    pairs = preference_pairs(samples_of(runs), min_score=0.8, log=CurationLog(), max_per_task=2)
    # the cross-run pair (0.9 vs 0.9) has no gap
    assert [p.metadata.gap for p in pairs] == [0.8, 0.7]


def test_min_gap_must_be_on_the_unit_scale() -> None:
    with pytest.raises(ValueError, match="min_gap"):
        preference_pairs([], min_score=0.8, min_gap=2, log=CurationLog())


def best_of_n_run(rubric: Rubric, *, judged: bool = False) -> Trajectory:
    """One best-of-4 round: the winner, two scored losers and one cut at the output limit."""
    losers = [Candidate(draft="The answer is 4.", score=10.0, passed=True, judged=judged),
              Candidate(draft="Five.", score=0.0, passed=False, judged=judged),
              Candidate(draft="Let me think step by st", score=0.0, cut_from=900, judged=judged)]
    return Trajectory(architecture="best_of_n", model_id="m", task="What is 2 + 2?",
                      rubric=rubric.to_dict(), final_output="4", final_score=10.0, accepted=True,
                      rounds=[Round(iteration=0, draft="4", score=10.0, passed=True,
                                    alternatives=losers)])


def test_best_of_n_losers_become_pairs_and_accepted_ones_sft_rows() -> None:
    run = best_of_n_run(math_rubric(4))
    samples = trajectory_samples(run)
    assert [(s.response, s.source, s.iteration) for s in samples] == [
        ("4", "final", 0), ("The answer is 4.", "alternative", 0), ("Five.", "alternative", 0)]
    rows = sft_rows(samples, min_score=0.8, log=CurationLog())
    assert [(r.messages[-1].content, r.metadata.source) for r in rows] == [
        ("4", "final"), ("The answer is 4.", "alternative")]
    log = CurationLog()
    pairs = preference_pairs(samples, min_score=0.8, log=log)
    assert [(p.metadata.source, p.chosen[0].content, p.rejected[0].content, p.metadata.gap)
            for p in pairs] == [("best_of_n", "4", "Five.", 1.0)]
    assert "1 from best-of-n rounds" in log.steps[0].detail
    assert pairs[0].prompt == [Message(role=m["role"], content=m["content"])
                               for m in samples[0].messages]


def test_losers_scored_without_the_judge_give_no_sample_when_the_rubric_judges() -> None:
    """A copywriting rubric asks the judge too: an unjudged loser's check-only score is
    not its score, so it makes no pair; a judged one does."""
    unjudged = trajectory_samples(best_of_n_run(copywriting_rubric()))
    assert [s.source for s in unjudged] == ["final"]
    judged = trajectory_samples(best_of_n_run(copywriting_rubric(), judged=True))
    assert [s.source for s in judged] == ["final", "alternative", "alternative"]
    unknown = best_of_n_run(math_rubric(4)).model_copy(update={"rubric": None})
    assert [s.source for s in trajectory_samples(unknown)] == ["final"]


def test_a_loser_that_outscores_its_round_is_paired_against_the_worst_other_loser() -> None:
    """A round's draft is picked before the judge scores it, so a loser can end above it:
    that loser is then the chosen side (not the round's draft), against the worst other
    loser; with no other loser the round gives no best-of-n pair."""
    def run(*losers: Candidate) -> Trajectory:
        return Trajectory(architecture="best_of_n", model_id="m", task="What is 2 + 2?",
                          rubric=math_rubric(4).to_dict(), final_output="Four-ish.",
                          final_score=4.0, accepted=False,
                          rounds=[Round(iteration=0, draft="Four-ish.", score=4.0, passed=False,
                                        alternatives=list(losers))])

    best = Candidate(draft="4", score=10.0, passed=True)
    worst = Candidate(draft="Five.", score=0.0, passed=False)
    pairs = preference_pairs(trajectory_samples(run(best, worst)), min_score=0.8,
                             log=CurationLog())
    assert [(p.metadata.source, p.chosen[0].content, p.rejected[0].content) for p in pairs
            if p.metadata.source == "best_of_n"] == [("best_of_n", "4", "Five.")]
    alone = preference_pairs(trajectory_samples(run(best)), min_score=0.8, log=CurationLog())
    assert [p for p in alone if p.metadata.source == "best_of_n"] == []
