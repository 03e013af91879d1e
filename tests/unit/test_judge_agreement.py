"""The agreement alarm on logged runs with people's labels: it fires on a planted disagreeing
judge and stays quiet on an agreeing one, respects the minimum of labels, keeps judges and
versions apart, and gates judged rewards for the improve loop. It decides on the random draw
only (edge-case labels have a restricted score range) and measures the judge's own part of
the score, not a score the checks decide."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Literal

import pytest
from distill_helpers import tagline_registry

from agentic_loop.distill.release.judge_agreement import (
    cohen_kappa,
    judge_agreement,
    judged_rewards_allowed,
    judged_score,
    spearman,
)
from agentic_loop.errors import ConfigError
from agentic_loop.judges import Feature, Rubric
from agentic_loop.trajectories import ReviewLabel, Round, Trajectory, TrajectoryLog


def labelled(log: TrajectoryLog, n: int, *, judge: str | None, agrees: bool, seed: int = 0,
             model: str | None = None, rating: bool = True, verdict: bool = True,
             drawn: Literal["random", "edge"] | None = None) -> None:
    """``n`` runs judged by ``judge``, each labelled by a person with a 1-5 rating and a verdict.

    The person's rating is drawn; an agreeing judge scores 2 * rating plus noise and accepts
    what the person accepts (rating >= 3), a disagreeing one scores 12 - 2 * rating and
    accepts what the person rejects. ``drawn``: how the labels say their runs were drawn.
    """
    rng = random.Random(seed)
    for i in range(n):
        human = rng.randint(1, 5)
        score = (2.0 * human if agrees else 12.0 - 2.0 * human) + rng.uniform(-0.4, 0.4)
        score = min(10.0, max(0.0, score))
        t = Trajectory(architecture="reflection", model_id=model or "m", task=f"task {i}",
                       rounds=[Round(iteration=0, draft="d", score=score, judge=judge,
                                     model=model)],
                       final_output="d", final_score=score, accepted=(human >= 3) == agrees)
        log.append(t)
        log.record_review(ReviewLabel(
            trajectory_id=t.id, rating=human if rating else None,
            verdict=("accept" if human >= 3 else "reject") if verdict else None,
            reviewer="ann", drawn=drawn))


def test_a_planted_disagreeing_judge_raises_the_alarm(tmp_path: Path):
    log = TrajectoryLog(tmp_path / "traj")
    labelled(log, 30, judge="bad-judge", agrees=False)
    report = judge_agreement([*log.read(), *log.read()])  # a run read twice counts once
    assert report.raised
    (row,) = report.rows
    assert (row.judge, row.version, row.labels, row.ratings, row.verdicts) == (
        "bad-judge", None, 30, 30, 30)
    assert row.spearman is not None and row.spearman < -0.9
    assert row.kappa is not None and row.kappa < 0  # it accepts exactly what people reject
    assert row.breached and row.status == "breach"
    assert "bad-judge disagrees with people" in row.reason and "spearman -0." in row.reason
    assert "on 30 labels < 0.7" in row.reason


def test_an_agreeing_judge_stays_quiet(tmp_path: Path):
    log = TrajectoryLog(tmp_path / "traj")
    labelled(log, 30, judge="good-judge", agrees=True)
    report = judge_agreement(log.read())
    (row,) = report.rows
    assert not report.raised and row.status == "agrees"
    assert row.spearman is not None and row.spearman > 0.9
    assert row.kappa == pytest.approx(1.0)
    assert "agrees with people" in row.reason


def test_min_labels_is_respected(tmp_path: Path):
    log = TrajectoryLog(tmp_path / "traj")
    labelled(log, 19, judge="bad-judge", agrees=False)
    few = judge_agreement(log.read(), min_labels=20)
    (row,) = few.rows
    assert not few.raised and row.status == "too few labels" and row.labels == 19
    assert "1 more needed" in row.reason
    assert row.spearman is not None and row.spearman < 0  # measured, just not judged yet
    assert judge_agreement(log.read(), min_labels=19).raised
    assert judge_agreement(log.read(), min_labels=5).rows[0].breached


def test_each_statistic_needs_its_own_labels(tmp_path: Path):
    """25 verdicts but no ratings: kappa is judged, Spearman is not (and stays None)."""
    log = TrajectoryLog(tmp_path / "traj")
    labelled(log, 25, judge="bad-judge", agrees=False, rating=False)
    (row,) = judge_agreement(log.read()).rows
    assert (row.labels, row.ratings, row.verdicts, row.spearman) == (25, 0, 25, None)
    assert row.breached and "kappa" in row.reason and "spearman" not in row.reason


def test_two_judges_in_one_log_only_the_bad_one_breaches(tmp_path: Path):
    log = TrajectoryLog(tmp_path / "traj")
    labelled(log, 25, judge="good-judge", agrees=True, seed=1)
    labelled(log, 25, judge="bad-judge", agrees=False, seed=2)
    labelled(log, 7, judge=None, agrees=True, seed=3)  # the checks decided: no judge to check
    report = judge_agreement(log.read())
    by_judge = {r.judge: r for r in report.rows}
    assert sorted(by_judge) == ["bad-judge", "good-judge"]
    assert by_judge["bad-judge"].breached and not by_judge["good-judge"].breached
    assert by_judge["good-judge"].labels == by_judge["bad-judge"].labels == 25
    assert report.unjudged == 7 and report.raised
    assert "bad-judge" in report.describe() and "good-judge" not in report.describe()
    allowed, why = judged_rewards_allowed(log.read())
    assert not allowed and "agreement alarm raised" in why and "bad-judge" in why
    assert judged_rewards_allowed(log.read(), judge="good-judge")[0]
    # a judge people never checked (a new round's model id) is refused while an alarm is up
    allowed, why = judged_rewards_allowed(log.read(), judge="round-3-model")
    assert not allowed and "round-3-model" in why and "fewer than 20 labels" in why


def test_rows_are_per_registry_version(tmp_path: Path):
    """The same judge agrees on v1's runs and disagrees on v2's: only v2's row breaches."""
    reg = tagline_registry(tmp_path)
    log = TrajectoryLog(tmp_path / "traj")
    labelled(log, 22, judge="j", agrees=True, model="tagline-v1")
    labelled(log, 22, judge="j", agrees=False, model="tagline-v2")
    labelled(log, 3, judge="j", agrees=True, model="someone-else")
    report = judge_agreement(log.read(), registry=reg)
    assert [(r.judge, r.version, r.labels, r.breached) for r in report.rows] == [
        ("j", "v1", 22, False), ("j", "v2", 22, True), ("j", None, 3, False)]
    pooled = judge_agreement(log.read())  # without a registry: one row per judge
    assert [(r.version, r.labels) for r in pooled.rows] == [(None, 47)]


def test_no_labels_is_no_alarm_and_says_so(tmp_path: Path):
    log = TrajectoryLog(tmp_path / "traj")
    log.append(Trajectory(architecture="a", model_id="m", task="t", final_score=9.0,
                          rounds=[Round(iteration=0, draft="d", judge="j")]))
    log.record_review(ReviewLabel(trajectory_id=log.read()[0].id, comment="only a note"))
    report = judge_agreement(log.read())
    assert report.rows == [] and not report.raised
    assert judged_rewards_allowed(log.read()) == (
        True, "no labelled run with a judge: nothing to check the judge against")


def test_undefined_statistics_never_breach(tmp_path: Path):
    """People rate everything 5 and accept everything, like the judge: nothing to correlate."""
    runs = [Trajectory(architecture="a", model_id="m", task="t", final_score=float(i % 10),
                       accepted=True, rounds=[Round(iteration=0, draft="d", judge="j")],
                       review=ReviewLabel(trajectory_id="x", rating=5, verdict="accept"))
            for i in range(25)]
    (row,) = judge_agreement(runs).rows
    assert (row.spearman, row.kappa, row.breached, row.status) == (None, None, False,
                                                                   "undefined")


def test_statistics_match_scipy_and_a_hand_count():
    from scipy.stats import spearmanr

    xs, ys = [3.0, 1.0, 4.0, 1.5, 5.0, 9.0], [2.0, 1.0, 3.0, 2.0, 5.0, 4.0]
    assert spearman(xs, ys) == pytest.approx(float(spearmanr(xs, ys).statistic))
    # 6 of 8 agree; judge says yes 5/8, people 3/8: chance = 5/8*3/8 + 3/8*5/8 = 30/64
    a = [True, True, True, True, True, False, False, False]
    b = [True, True, True, False, False, False, False, False]
    assert cohen_kappa(a, b) == pytest.approx((6 / 8 - 30 / 64) / (1 - 30 / 64))


def test_bad_settings_are_refused():
    with pytest.raises(ConfigError, match="min_labels must be at least 1"):
        judge_agreement([], min_labels=0)
    with pytest.raises(ConfigError, match="threshold"):
        judge_agreement([], threshold=1.5)


def near_the_line(log: TrajectoryLog, n: int, *, judge: str, seed: int = 0) -> None:
    """``n`` edge-case labels of a judge that agrees with people in general (as ``labelled``
    with ``agrees=True``: score about 2 * rating, accepting ratings 3 and up): its runs scored
    5.5-6.5, around its line, where people's ratings (2-4) and verdicts are near coin flips
    against its score. A restricted range: no correlation is left to see."""
    rng = random.Random(seed)
    for i in range(n):
        human = rng.choice([2, 3, 3, 4])
        score = round(6.0 + rng.uniform(-0.5, 0.5), 2)
        t = Trajectory(architecture="reflection", model_id="m", task=f"edge {i}",
                       rounds=[Round(iteration=0, draft="d", score=score, judge=judge)],
                       final_output="d", final_score=score, accepted=score >= 6.0)
        log.append(t)
        log.record_review(ReviewLabel(trajectory_id=t.id, rating=human, drawn="edge",
                                      verdict="accept" if human >= 3 else "reject"))


def test_edge_case_labels_alone_never_raise_the_alarm(tmp_path: Path):
    """An agreeing judge, labelled mostly near its line: the edge cases alone show a low
    Spearman (restricted range), the random draw shows the agreement, and only that decides."""
    log = TrajectoryLog(tmp_path / "traj")
    labelled(log, 25, judge="good-judge", agrees=True, seed=4, drawn="random")
    near_the_line(log, 60, judge="good-judge", seed=5)
    report = judge_agreement(log.read())
    (row,) = report.rows
    assert not report.raised and row.status == "agrees"
    assert (row.labels, row.ratings, row.unqueued, row.edge.labels, row.edge.ratings) == (
        25, 25, 0, 60, 60)
    assert row.spearman is not None and row.spearman > 0.9
    assert row.edge.spearman is not None and row.edge.spearman < 0.7  # restricted range
    assert row.edge.kappa is not None and row.edge.kappa < 0.7
    assert "60 edge-case labels (not a random draw" in row.reason
    assert judged_rewards_allowed(log.read())[0]
    # the same labels taken for a random draw (what the alarm did before) raise a false alarm
    pooled = [t.model_copy(update={"review": t.review.model_copy(update={"drawn": None})})
              for t in log.read() if t.review is not None]
    assert judge_agreement(pooled).raised
    # edge cases alone, however many, never count towards the minimum
    edges = [t for t in log.read() if t.task.startswith("edge")]
    (alone,) = judge_agreement(edges).rows
    assert (alone.status, alone.labels, alone.edge.labels, alone.breached) == (
        "too few labels", 0, 60, False)


def test_a_disagreeing_judge_fires_on_the_random_draw_whatever_its_edge_cases_say(
        tmp_path: Path):
    log = TrajectoryLog(tmp_path / "traj")
    labelled(log, 22, judge="bad-judge", agrees=False, seed=6, drawn="random")
    labelled(log, 40, judge="bad-judge", agrees=True, seed=7, drawn="edge")  # looks fine
    (row,) = judge_agreement(log.read()).rows
    assert row.breached and (row.labels, row.edge.labels) == (22, 40)
    assert row.spearman is not None and row.spearman < -0.9
    assert row.edge.spearman is not None and row.edge.spearman > 0.9
    assert "spearman -0." in row.reason and "on 22 labels < 0.7" in row.reason
    assert not judged_rewards_allowed(log.read())[0]
    # labels given outside a queue (drawn None) are part of the random stratum
    labelled(log, 10, judge="bad-judge", agrees=False, seed=8)
    (row,) = judge_agreement(log.read()).rows
    assert (row.labels, row.unqueued, row.edge.labels, row.breached) == (32, 10, 40, True)


JUDGED = [Feature(f"judged_{k}", f"Judged trait {k}.", 0.1) for k in range(4)]


def checks_decide(log: TrajectoryLog, n: int, *, judge: str, keep_rubric: bool = True) -> None:
    """``n`` runs of a rubric whose check (5 words exactly, weight 1) outweighs its four judged
    features (0.1 each): the checks agree with people (the better the rating, the nearer 5
    words), the judge says the opposite (it grants ``5 - rating`` of its four features)."""
    rubric = Rubric.for_constraints(exact_words=5, features=JUDGED)
    for i in range(n):
        human = 1 + i % 5
        values = {"exact_words": 5 + (5 - human),
                  **{f.name: k < 5 - human for k, f in enumerate(JUDGED)}}
        score = rubric.score(values)
        t = Trajectory(architecture="reflection", model_id="m", task=f"task {i}",
                       rubric=rubric.to_dict() if keep_rubric else None,
                       rounds=[Round(iteration=0, draft="d", score=score, features=values,
                                     judge=judge)],
                       final_output="d", final_score=score, accepted=human >= 3)
        log.append(t)
        log.record_review(ReviewLabel(trajectory_id=t.id, rating=human, drawn="random",
                                      verdict="accept" if human >= 3 else "reject"))


def test_the_judges_own_part_is_compared_not_a_score_the_checks_decide(tmp_path: Path):
    log = TrajectoryLog(tmp_path / "traj")
    checks_decide(log, 30, judge="j")
    runs = log.read()
    final = spearman([t.final_score or 0.0 for t in runs],
                     [float(t.review.rating or 0) for t in runs if t.review is not None])
    assert final is not None and final > 0.9  # the final score agrees: the checks decide it
    (row,) = judge_agreement(runs).rows
    assert (row.score, row.judged_scores, row.final_scores) == ("judged", 30, 0)
    assert row.spearman is not None and row.spearman < -0.9 and row.breached
    assert row.kappa == pytest.approx(1.0)  # the verdict side still compares `accepted`
    assert judged_score(runs[0]) == 10.0  # rated 1: the judge granted all four features
    # the same runs without a saved rubric: no judged part recorded, the final score stands in
    log2 = TrajectoryLog(tmp_path / "traj2")
    checks_decide(log2, 30, judge="j", keep_rubric=False)
    (row,) = judge_agreement(log2.read()).rows
    assert (row.score, row.judged_scores, row.final_scores, row.breached) == (
        "final", 0, 30, False)
    assert "30 of 30 runs recorded no judged part" in row.reason
    (mixed,) = judge_agreement([*runs[:20], *log2.read()[20:]]).rows
    assert (mixed.score, mixed.judged_scores, mixed.final_scores) == ("mixed", 20, 10)


def test_a_run_without_a_judged_part_has_no_judged_score():
    rubric = Rubric.for_constraints(exact_words=5, features=JUDGED)
    all_met = {"exact_words": 5, **{f.name: True for f in JUDGED}}
    run = Trajectory(architecture="a", model_id="m", task="t", rubric=rubric.to_dict(),
                     final_output="d", final_score=10.0,
                     rounds=[Round(iteration=0, draft="d", judge="j", features=all_met)])
    assert judged_score(run) == 10.0

    def changed(**update: object) -> Trajectory:
        return run.model_copy(update=update)

    def round_with(**update: object) -> list[Round]:
        return [run.rounds[0].model_copy(update=update)]

    names_only = {"name": "r", "version": "1", "features": ["exact_words", "judged_0"]}
    for no_part in (changed(rubric=None), changed(rubric=names_only),
                    changed(rubric=Rubric.for_constraints(exact_words=5).to_dict()),
                    changed(rounds=round_with(judge=None)),               # the checks decided
                    changed(rounds=round_with(features={"exact_words": 5})),  # values missing
                    changed(rounds=round_with(features={**all_met, "judged_0": "yes"}))):
        assert judged_score(no_part) is None
