"""The pool watermark's lateness window: runs that reach a log late are taken once, never twice.

A run created at T can reach the log after a round took runs created after T
(a write retried through a Postgres restart, a lagging host clock). The
watermark keeps the ids of runs taken within ``grace_s`` of its newest time,
so such a run is still new, and taken exactly once. Real trajectory logs on
disk and the real pool reader; the watermark goes through its file between
rounds as ``improve`` and the flywheel use it.
"""

from __future__ import annotations

import json
import random
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from agentic_loop.distill.loop.pool import new_pool_runs, trajectory_pool
from agentic_loop.distill.loop.state import GRACE_S, ImproveStateError, Watermark
from agentic_loop.trajectories import Round, Trajectory, TrajectoryLog

T0 = datetime(2026, 11, 26, 12, 0, tzinfo=UTC)


def _run(task: str, created: datetime, run_id: str | None = None) -> Trajectory:
    extra = {"id": run_id} if run_id else {}
    return Trajectory(architecture="reflection", model_id="m", task=task, created_at=created,
                      rounds=[Round(iteration=0, draft="x", score=1.0)], final_output="x",
                      final_score=1.0, **extra)


def _round(logs: Path, mark_file: Path) -> list[str]:
    """One round's pool read as improve does it: load, take the new runs, save."""
    found = trajectory_pool([logs], Watermark.load(mark_file), golden=[])
    found.watermark.save(mark_file)
    return [t.task for t in found.tasks]


def test_a_run_that_reaches_the_log_late_is_taken_once(tmp_path: Path) -> None:
    log, mark_file = TrajectoryLog(tmp_path / "runs"), tmp_path / "watermark.json"
    log.append(_run("Write a motto in exactly 2 words.", T0))
    log.append(_run("Name a tool in exactly 2 words.", T0 + timedelta(minutes=10)))
    assert len(_round(tmp_path / "runs", mark_file)) == 2
    # created before the newest run taken, but committed only now (host B's retry)
    log.append(_run("Describe rain in exactly 2 words.", T0 + timedelta(minutes=5)))
    assert _round(tmp_path / "runs", mark_file) == ["Describe rain in exactly 2 words."]
    assert _round(tmp_path / "runs", mark_file) == []


def test_a_run_later_than_the_window_is_missed_and_nothing_is_taken_twice() -> None:
    taken = [_run("a", T0), _run("b", T0 + timedelta(hours=2))]
    mark = Watermark().after(taken)
    assert mark.floor == T0 + timedelta(hours=1) and set(mark.ids) == {taken[1].id}
    assert not mark.is_new(_run("late by two hours", T0 + timedelta(minutes=30)))
    assert not any(mark.is_new(t) for t in taken)
    edge = _run("exactly grace_s late", T0 + timedelta(hours=1))
    assert mark.is_new(edge) and not mark.after([edge]).is_new(edge)


def test_a_late_run_older_than_every_taken_one_is_remembered() -> None:
    """Taking only a late run (older than ``at``) must still record it: the old code
    returned the watermark unchanged, so the same run would be new again."""
    mark = Watermark().after([_run("a", T0)])
    late = _run("late", T0 - timedelta(minutes=20))
    assert mark.is_new(late)
    again = mark.after([late])
    assert again.at == T0 and not again.is_new(late)


def test_many_rounds_take_every_run_within_the_window_exactly_once(tmp_path: Path) -> None:
    rng = random.Random(35)
    tick = timedelta(minutes=5)
    grace = timedelta(seconds=GRACE_S)
    runs = []
    for n in range(400):  # six hours of traffic, each run arriving 0..1.5 h late
        created = T0 + timedelta(seconds=rng.uniform(0, 6 * 3600))
        delay = timedelta(seconds=rng.uniform(0, 1.5 * GRACE_S))
        runs.append((created + delay, delay, _run(f"t{n}", created, run_id=f"r{n:03d}")))
    mark_file, counts = tmp_path / "watermark.json", dict.fromkeys((r.id for *_, r in runs), 0)
    now, widest = T0, 0
    while now < T0 + timedelta(hours=9):
        now += tick
        mark = Watermark.load(mark_file)
        taken = new_pool_runs([r for arrived, _, r in runs if arrived <= now], mark)
        for r in taken:
            counts[r.id] += 1
        mark = mark.after(taken)
        mark.save(mark_file)
        assert mark.at is None or all(c >= mark.at - grace for c in mark.ids.values())
        widest = max(widest, len(mark.ids))
    assert max(counts.values()) == 1  # nothing taken twice, whatever the lateness
    on_time = [r.id for _, delay, r in runs if delay <= grace - tick]
    assert len(on_time) > 200 and all(counts[i] == 1 for i in on_time)
    assert sum(counts.values()) < len(runs)  # the latest ones are missed, as documented
    assert widest < len(runs) / 2  # only the window's ids are kept


def test_an_old_watermark_file_loads_and_takes_nothing_again(tmp_path: Path) -> None:
    path = tmp_path / "watermark.json"
    path.write_text(json.dumps({"at": T0.isoformat(), "ids": ["b", "a"]}))
    mark = Watermark.load(path)
    assert mark.at == T0 and mark.floor == T0 and set(mark.ids) == {"a", "b"}
    assert not mark.is_new(_run("taken", T0, run_id="a"))
    assert mark.is_new(_run("same time, not taken", T0, run_id="c"))
    assert not mark.is_new(_run("before the old mark", T0 - timedelta(minutes=1)))
    assert mark.is_new(_run("after it", T0 + timedelta(seconds=1)))
    later = mark.after([_run("x", T0 + timedelta(minutes=10), run_id="x")])
    assert later.floor == T0 and set(later.ids) == {"a", "b", "x"}  # never before the old mark
    later.save(path)
    assert Watermark.load(path) == later
    assert json.loads(path.read_text())["ids"] == {
        "a": T0.isoformat(), "b": T0.isoformat(), "x": (T0 + timedelta(minutes=10)).isoformat()}
    path.write_text(json.dumps({"at": None, "ids": []}))
    assert Watermark.load(path) == Watermark()


@pytest.mark.parametrize(("data", "problem"), [
    ({"at": "yesterday"}, "at: "),
    ({"at": T0.isoformat(), "ids": 3}, "ids: "),
    ({"at": T0.isoformat(), "ids": {"a": "soon"}}, "ids.a: "),
    ({"grace_s": -1}, "grace_s: "),
])
def test_a_malformed_watermark_is_refused_naming_the_file(
        tmp_path: Path, data: dict[str, object], problem: str) -> None:
    path = tmp_path / "watermark.json"
    path.write_text(json.dumps(data))
    with pytest.raises(ImproveStateError, match="delete it to read every trajectory again") as e:
        Watermark.load(path)
    assert str(path) in str(e.value) and problem in str(e.value)
