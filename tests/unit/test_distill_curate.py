"""Curation filters, each with the counts it records."""

from __future__ import annotations

import pytest
from distill_helpers import make_run

from agentic_loop.distill.data.curate import (
    CurationLog,
    cap_per_task,
    drop_errored,
    drop_exact_duplicates,
    drop_invalid_scores,
    drop_latency_outliers,
    drop_near_duplicates,
    filter_consent,
    filter_k_anonymity,
    latency_bound,
    score_threshold,
    task_pattern,
)
from agentic_loop.distill.data.samples import Sample, trajectory_samples
from agentic_loop.memory import HashingEmbedder


def sample(prompt: str, response: str, reward: float = 0.9, run: str = "r") -> Sample:
    return Sample(prompt, response, reward, "round", run, 0, "m")


def test_errored_runs_are_dropped() -> None:
    runs = [make_run("t", [("a", 9.0)]), make_run("t", [("b", 9.0)], errors=["timeout"])]
    log = CurationLog()
    kept = log.keep("errored runs", "records", runs, drop_errored(runs))
    assert kept == runs[:1]
    assert (log.steps[0].before, log.steps[0].after, log.steps[0].removed) == (2, 1, 1)


def test_invalid_scores_are_dropped_with_the_field_named() -> None:
    good, bad = make_run("t", [("a", 9.0)]), make_run("t", [("b", 9.0), ("c", 11.0)])
    kept, notes = drop_invalid_scores([good, bad])
    assert kept == [good]
    assert notes == [f"trajectory {bad.id}: rounds[1].score=11.0, final_score=11.0"]


def test_consent_filter_is_automatic_when_consent_is_tracked() -> None:
    yes, no, unknown = (make_run("t", [("a", 9.0)], consent=c) for c in (True, False, None))
    assert filter_consent([yes, no, unknown]) == ([yes], True)
    untracked = [make_run("t", [("a", 9.0)]), make_run("t", [("b", 9.0)])]
    assert filter_consent(untracked) == (untracked, False)
    assert filter_consent(untracked, require=True) == ([], True)
    assert filter_consent([yes, no], require=False) == ([yes], False)  # refusal always wins


def test_latency_outliers_use_a_robust_bound() -> None:
    latencies = [1.0, 1.2, 0.9, 1.1, 1.0, 0.8, 1.3, 1.0, 1.1, 45.0]
    runs = [make_run("t", [("a", 9.0)], latency_s=v) for v in latencies]
    runs.append(make_run("t", [("b", 9.0)], latency_s=None))
    kept, bound = drop_latency_outliers(runs)
    assert bound is not None and 1.3 < bound < 45.0
    # only the stalled run goes; a run without a latency is kept
    assert [t.latency_s for t in kept] == [*latencies[:-1], None]
    assert drop_latency_outliers(runs, z=None) == (runs, None)


def test_latency_filter_needs_enough_runs_and_spread() -> None:
    assert latency_bound([1.0, 50.0, 1.0]) is None  # too few runs to call anything an outlier
    assert latency_bound([2.0] * 20) is None  # no spread
    assert latency_bound([2.0] * 9 + [2.5, 60.0]) is not None  # MAD is 0, mean deviation is not


def test_k_anonymity_drops_rare_task_patterns() -> None:
    common = [make_run(f"Call <PERSON> at {h}:00", [("ok", 9.0)], user_id_hash=f"u{i}")
              for i, h in enumerate([9, 10, 11])]
    same_user = [make_run("Rare request from <PERSON>", [("ok", 9.0)], user_id_hash="u1")
                 for _ in range(3)]
    anonymous = [make_run("Anonymous task", [("ok", 9.0)]) for _ in range(3)]
    kept = filter_k_anonymity(common + same_user + anonymous, k=3)
    # three users share "call <person> at #:#"; one user three times is still one person;
    # runs without a user id count as distinct contributors
    assert kept == common + anonymous
    assert filter_k_anonymity(same_user, k=None) == same_user
    assert task_pattern("Call <PERSON> at 9:00") == task_pattern("call  <PERSON> at 11:00")


def test_score_threshold_and_exact_duplicates() -> None:
    samples = [sample("t", "A", 0.9), sample("t", "a ", 0.85), sample("t", "B", 0.5),
               sample("u", "A", 0.8)]
    passed = score_threshold(samples, 0.8)
    assert [s.response for s in passed] == ["A", "a ", "A"]
    deduped = drop_exact_duplicates(passed, lambda s: (s.key, s.response.strip().casefold()))
    # the same answer to another task is kept
    assert [(s.prompt, s.response) for s in deduped] == [("t", "A"), ("u", "A")]


def test_near_duplicates_need_a_similar_prompt_and_response() -> None:
    samples = [
        sample("Write a tagline for a bookstore", "Stories wait on every shelf"),
        # a near duplicate
        sample("Write a tagline for a bookstore", "Stories wait on every shelf!"),
        # a distinct draft
        sample("Write a tagline for a bookstore", "Find your next favourite chapter"),
        # a near prompt with a near answer
        sample("Write a tagline for a book store", "Stories wait on every shelf."),
        # another task
        sample("Summarize the tax code", "Stories wait on every shelf"),
    ]
    kept = drop_near_duplicates(samples, HashingEmbedder(), threshold=0.8)
    assert kept == [samples[0], samples[2], samples[4]]
    exact_only = drop_near_duplicates(samples, HashingEmbedder(), threshold=1.0)
    assert exact_only == [samples[i] for i in (0, 1, 2, 3, 4)]
    with pytest.raises(ValueError, match="cosine in"):
        drop_near_duplicates(samples, HashingEmbedder(), threshold=0)


def test_cap_per_task_keeps_the_first_ones() -> None:
    samples = [sample("t", str(i)) for i in range(5)] + [sample("u", "x")]
    assert [s.response for s in cap_per_task(samples, 2, lambda s: s.key)] == ["0", "1", "x"]
    assert cap_per_task(samples, None, lambda s: s.key) == samples
    with pytest.raises(ValueError, match="at least 1"):
        cap_per_task(samples, 0, lambda s: s.key)


def test_emptied_by_names_the_step_that_removed_the_last_items() -> None:
    log = CurationLog()
    log.record("read", "records", 4, 4)
    log.record("consent", "records", 4, 2)
    log.record("sft candidates", "sft rows", 5, 5)
    log.record("score threshold", "sft rows", 5, 0)
    assert log.emptied_by("sft rows", ["records"]).name == "score threshold"
    assert log.emptied_by("pairs", ["records"]) is None
    assert [s["removed"] for s in log.to_list()] == [0, 2, 0, 5]


def test_samples_mark_the_final_and_score_on_the_unit_scale() -> None:
    run = make_run("t", [("draft", 4.0), ("better", 9.0)], feedback="down", latency_s=40.0)
    assert [(s.response, s.reward, s.source, s.iteration) for s in trajectory_samples(run)] == [
        ("draft", 0.4, "round", 0), ("better", 0.9, "final", 1)]
    composite = trajectory_samples(run, reward="composite")
    assert composite[0].reward == 0.4  # a draft no user saw: rubric only
    assert composite[1].reward < 0.9  # thumbs down and a slow run lower the final's reward
    unmatched = make_run("t", [("draft", 4.0)], final="edited by hand", final_score=8.0)
    last = trajectory_samples(unmatched)[-1]
    assert (last.response, last.source) == ("edited by hand", "final")
