"""The agreement alarm on logged runs with people's labels: it fires on a planted disagreeing
judge and stays quiet on an agreeing one, respects the minimum of labels, keeps judges and
versions apart, and gates judged rewards for the improve loop."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from distill_helpers import tagline_registry

from agentic_loop.distill.release.judge_agreement import (
    cohen_kappa,
    judge_agreement,
    judged_rewards_allowed,
    spearman,
)
from agentic_loop.errors import ConfigError
from agentic_loop.trajectories import ReviewLabel, Round, Trajectory, TrajectoryLog


def labelled(log: TrajectoryLog, n: int, *, judge: str | None, agrees: bool, seed: int = 0,
             model: str | None = None, rating: bool = True, verdict: bool = True) -> None:
    """``n`` runs judged by ``judge``, each labelled by a person with a 1-5 rating and a verdict.

    The person's rating is drawn; an agreeing judge scores 2 * rating plus noise and accepts
    what the person accepts (rating >= 3), a disagreeing one scores 12 - 2 * rating and
    accepts what the person rejects.
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
            reviewer="ann"))


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
