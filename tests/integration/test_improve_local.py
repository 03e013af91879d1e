"""Two improve rounds on the real embedded model, on CPU, with a kill mid-round and a resume.

Tiny budgets: six pool tasks and four golden tasks from the constrained task
families (split apart), two samples per task, 32 new tokens, two LoRA steps.
The gate is told a four-task golden set may decide (it will mostly say
MANUAL_REVIEW) and not to roll back on noise, so both rounds run. The first
attempt is killed after grow, hint and export (the trainer raises); the
second must continue from there without growing again, and finish two
registered versions, their reports and the curve.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from agentic_loop.distill.loop.improve import ImproveBackend, improve
from agentic_loop.distill.release import Registry
from agentic_loop.distill.train.model_card import read_card
from agentic_loop.memory import HashingEmbedder
from agentic_loop.tasks.sets import constrained_tasks, split_tasks

pytestmark = pytest.mark.slow


class _Killed(Exception):
    pass


def _killed_trainer(data: Path, out: Path, **kwargs: Any) -> Any:
    raise _Killed(f"simulated kill before training {out}")


def test_two_rounds_on_the_local_model_resume_after_a_kill(tmp_path: Path) -> None:
    pool, golden = split_tasks(constrained_tasks(10, seed=3), held_out=0.4, seed=0)
    assert (len(pool), len(golden)) == (6, 4)
    work, reg = tmp_path / "work", tmp_path / "reg"
    options: dict[str, Any] = dict(
        rounds=2, samples=2, max_tokens=32, thresholds=(3.0, 4.0), patience=5,
        max_concurrency=2,
        train_options={"max_steps": 2, "batch_size": 2, "max_length": 128, "progress": False},
        export_options={"pii": "regex", "embedder": HashingEmbedder()},
        eval_options={"min_tasks": 2, "kl": False, "rollback_ratio": 0.01,
                      "embedder": HashingEmbedder()})

    with pytest.raises(_Killed):
        improve(pool, golden=golden, registry=reg, work_dir=work,
                backend=ImproveBackend(train=_killed_trainer), **options)
    state = json.loads((work / "round-001" / "state.json").read_text())
    assert set(state["stages"]) == {"grow", "hint", "data"}
    grown = (work / "round-001" / "grown" / "trajectories.jsonl").read_bytes()

    result = improve(pool, golden=golden, registry=reg, work_dir=work, **options)
    assert (work / "round-001" / "grown" / "trajectories.jsonl").read_bytes() == grown
    assert len(result.reports) == 2 and result.stopped == "rounds", result.reason
    registry = Registry(reg)
    assert [v.version for v in registry.versions()] == ["v1", "v2"] == result.versions
    for report in result.reports:
        assert report.pool is not None and report.golden is not None
        assert report.data is not None and report.train is not None
        assert report.pool.n == 12 and report.golden.tasks == 4
        assert report.data.sft_rows >= 1 and report.train.steps == 2
        low, high = report.golden.candidate.interval
        assert 0.0 <= low <= high <= 1.0
        assert report.decision in ("PROMOTE", "MANUAL_REVIEW")
        assert (work / f"round-00{report.round}" / "report.json").is_file()
    card = read_card(registry.get("v2").path)
    assert card.evals[-1]["improve"]["round"] == 2
    assert "improve round 1" in (registry.history()[0].reason or "")
    assert (work / "improve.png").stat().st_size > 1000
    overall = json.loads((work / "improve.json").read_text())
    assert [r["round"] for r in overall["rounds"]] == [1, 2]
