"""Review sampling: the requested fraction over many runs, edge cases always in, stable draws."""

from __future__ import annotations

import random

import pytest

from agentic_loop.distill.review import ReviewSample, hash_unit, sample_for_review
from agentic_loop.trajectories import Round, Trajectory

RUBRIC = {"name": "support", "version": "1", "features": [
    {"name": "resolves", "kind": "bool", "description": "Resolves the request."},
    {"name": "polite", "kind": "bool", "description": "Polite."},
    {"name": "short", "weight": 1.0, "constraint": "max_words", "value": 80}]}


def plain(i: int, rng: random.Random) -> Trajectory:
    """A run no rule calls an edge case: clearly accepted or clearly rejected, judge agreeing."""
    good = rng.random() < 0.7
    score = rng.uniform(9.0, 10.0) if good else rng.uniform(2.0, 6.5)
    return Trajectory(
        id=f"run-{i:05d}", architecture="reflection", model_id="m", task=f"task {i % 300}",
        rubric=RUBRIC, final_output=f"answer {i}", final_score=score, accepted=good,
        feedback=rng.choice([None, None, "up"]),
        rounds=[Round(iteration=0, draft=f"answer {i}", score=score, passed=good,
                      overall_score=round(score), features={"resolves": good, "polite": True,
                                                            "short": True})])


def planted(i: int, kind: str) -> Trajectory:
    """An edge case of ``kind``."""
    run = plain(i, random.Random(i))
    final = run.rounds[0]
    if kind == "near_threshold":
        return run.model_copy(update={"final_score": 7.8})
    if kind == "checks_pass_judge_fails":
        final = final.model_copy(update={"passed": True, "features": {
            "resolves": False, "polite": False, "short": True}})
    elif kind == "judge_score_gap":
        final = final.model_copy(update={"score": 9.5, "overall_score": 3})
        run = run.model_copy(update={"final_score": 9.5, "accepted": True})
    elif kind == "rejected_judged_high":
        final = final.model_copy(update={"score": 5.0, "overall_score": 9})
        run = run.model_copy(update={"final_score": 5.0, "accepted": False})
    elif kind == "guard_flags":
        final = final.model_copy(update={"guards": {"recital": "repeats the task"}})
    elif kind == "thumbs_down":
        return run.model_copy(update={"feedback": "down"})
    return run.model_copy(update={"rounds": [final]})


KINDS = ("near_threshold", "checks_pass_judge_fails", "judge_score_gap", "rejected_judged_high",
         "guard_flags", "thumbs_down")


def corpus(n: int = 5000, edges_each: int = 5) -> tuple[list[Trajectory], dict[str, str]]:
    rng = random.Random(7)
    runs = [plain(i, rng) for i in range(n)]
    where = rng.sample(range(n), edges_each * len(KINDS))
    expected = {}
    for j, i in enumerate(where):
        kind = KINDS[j % len(KINDS)]
        runs[i] = planted(i, kind)
        expected[runs[i].id] = kind
    return runs, expected


@pytest.mark.parametrize("fraction", [0.02, 0.10])
def test_the_requested_fraction_is_picked_and_planted_edge_cases_always_are(fraction):
    runs, planted_ids = corpus()
    drawn = sample_for_review(runs, fraction=fraction)
    picked = {p.trajectory_id: p for p in drawn.picks}
    assert abs(len(picked) / len(runs) - fraction) <= 0.01
    missing = [i for i in planted_ids if i not in picked]
    assert missing == []
    for run_id, kind in planted_ids.items():
        assert kind in picked[run_id].reasons, (run_id, picked[run_id].reasons)
    # the plain runs filled the rest by the hash, and say so
    edges = [p for p in drawn.picks if p.edge]
    assert len(edges) == len(planted_ids)
    assert all(p.reasons == ["sampled"] for p in drawn.picks if not p.edge)
    # ... and edge cases the hash walked past are marked sampled too (a uniform draw)
    hashed = sum("sampled" in p.reasons for p in edges)
    assert drawn.reasons()["sampled"] == len(picked) - len(edges) + hashed
    assert drawn.note == ""


def test_a_draw_is_the_same_in_any_order_and_changes_with_the_salt():
    runs, _ = corpus(2000, edges_each=2)
    first = {p.trajectory_id for p in sample_for_review(runs, fraction=0.05).picks}
    shuffled = runs[:]
    random.Random(1).shuffle(shuffled)
    assert {p.trajectory_id for p in sample_for_review(shuffled, fraction=0.05).picks} == first
    salted = {p.trajectory_id for p in sample_for_review(runs, fraction=0.05, salt="b").picks}
    assert salted != first and len(salted) == len(first)
    assert hash_unit("run-00001") == hash_unit("run-00001") != hash_unit("run-00002")


def test_the_draw_is_the_canarys_hash_and_the_same_as_before_the_move():
    """hash_unit is agentic_loop.hashing.unit_hash, the router's bucket function; the draw
    it makes is the one the review's own 64-bit SHA-256 hash made (same order)."""
    import hashlib

    from agentic_loop.distill.release.router import bucket_of
    from agentic_loop.hashing import unit_hash

    assert hash_unit is unit_hash and bucket_of("run-7", "") == hash_unit("run-7")

    def before(trajectory_id: str, salt: str) -> float:  # the review's hash until the move
        digest = hashlib.sha256(f"{salt}:{trajectory_id}".encode()).digest()
        return int.from_bytes(digest[:8], "big") / 2**64

    runs, _ = corpus(5000, edges_each=0)
    for salt in ("", "b"):
        old = sorted(runs, key=lambda t: (before(t.id, salt), t.id))[:100]
        picked = sample_for_review(runs, fraction=0.02, salt=salt).picks
        assert {p.trajectory_id for p in picked} == {t.id for t in old}


def test_edge_cases_past_the_budget_are_all_queued_and_the_draw_says_so():
    runs, planted_ids = corpus(400, edges_each=3)  # 18 edge cases, a 2% budget of 8
    drawn = sample_for_review(runs, fraction=0.02)
    assert isinstance(drawn, ReviewSample) and drawn.budget == 8
    picked = {p.trajectory_id for p in drawn.picks}
    assert set(planted_ids) <= picked
    # half the budget is still drawn at random: the agreement alarm never goes silent
    assert len([p for p in drawn.picks if p.reasons == ["sampled"]]) == 4
    assert len(picked) == len(planted_ids) + 4
    assert "18 edge cases exceed" in drawn.note and "drawn at random" in drawn.note
    only_edges = sample_for_review(runs, fraction=0.02, random_share=0.0)
    assert {p.trajectory_id for p in only_edges.picks} == set(planted_ids)


def test_runs_without_an_output_are_not_eligible_and_bad_settings_are_refused():
    runs, _ = corpus(100, edges_each=0)
    runs += [Trajectory(architecture="a", model_id="m", task="refused", errors=["x"])] * 50
    drawn = sample_for_review(runs, fraction=0.1)
    assert drawn.eligible == 100 and len(drawn.picks) == 10
    with pytest.raises(ValueError, match="fraction=2"):
        sample_for_review(runs, fraction=2)
    with pytest.raises(ValueError, match="threshold=11"):
        sample_for_review(runs, threshold=11)


def test_the_hash_draws_edge_cases_too_so_its_draw_is_a_uniform_sample() -> None:
    """A third of the runs are edge cases (near the threshold): the hash-drawn runs, the
    agreement alarm's stratum, must hold about a third of them, not none."""
    rng = random.Random(3)
    runs = [plain(i, rng) for i in range(3000)]
    runs = [r.model_copy(update={"final_score": 7.9}) if i % 3 == 0 else r
            for i, r in enumerate(runs)]
    picked = sample_for_review(runs, fraction=0.5)
    drawn = [p for p in picked.picks if "sampled" in p.reasons]
    edge_share = sum(p.edge for p in drawn) / len(drawn)
    assert 0.28 <= edge_share <= 0.39, edge_share  # 1/3 expected; the old draw gave 0
    # 1000 edge cases, then half the budget of 1500 drawn at random beside them
    assert picked.budget == 1500 and len(picked.picks) == 1000 + 750
    assert len({p.trajectory_id for p in picked.picks}) == len(picked.picks)
