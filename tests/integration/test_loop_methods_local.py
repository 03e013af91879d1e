"""The judged improve methods on the real embedded model: real samples, a real judge, real rows.

Tiny budgets: three pool tasks, two samples each, 32 new tokens, no hint
retry; the trainer is stopped before it loads anything (the data stage is
what is tested here; training is ``test_improve_local``'s). The embedded
model judges itself (the default judge): its structured answers go through
the grammar, so every ranking and every critique must come back valid,
and every row the method writes must be one ``train`` reads.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from agentic_loop.distill.loop.improve import ImproveBackend, improve
from agentic_loop.distill.train.training_data import load_training_data
from agentic_loop.memory import HashingEmbedder
from agentic_loop.tasks.sets import constrained_tasks, split_tasks

pytestmark = pytest.mark.slow


class _Stopped(Exception):
    pass


def _stop(data: Path, out: Path, **kwargs: Any) -> Any:
    raise _Stopped(f"stopped before training {kwargs.get('method')} on {data}")


@pytest.mark.parametrize("method", ["self-rewarding", "constitutional"])
def test_a_judged_round_makes_rows_train_reads(tmp_path: Path, method: str) -> None:
    pool, golden = split_tasks(constrained_tasks(5, seed=5), held_out=0.4, seed=0)
    options: dict[str, Any] = dict(
        rounds=1, samples=2, max_tokens=32, thresholds=(0.0,), hint_retry=False,
        max_concurrency=2, method=method, min_rank_gap=1.0,
        export_options={"pii": "regex", "embedder": HashingEmbedder()},
        eval_options={"min_tasks": 2, "kl": False, "embedder": HashingEmbedder()})
    work = tmp_path / "work"
    try:
        improve(pool, golden=golden, registry=tmp_path / "reg", work_dir=work,
                backend=ImproveBackend(train=_stop), **options)
    except _Stopped:
        pass
    state = json.loads((work / "round-001" / "state.json").read_text())
    data = state["stages"]["data"]["result"]
    judged = data["judged"]
    assert judged["method"] == method and judged["judge"] and judged["allowed"] is True
    counts = judged["counts"]
    if method == "self-rewarding":  # the grammar: every judgement valid
        assert counts["ranked"] >= 1 and counts.get("ranking_failed", 0) == 0, counts
    else:
        assert counts["critiqued"] == len(pool) and counts["failed"] == 0, counts
    if data.get("empty"):  # nothing the trainer could take: the round says why and stops
        assert "no " in data["reason"]
        return
    # every row checked, as train checks them before it loads a model
    rows = load_training_data(work / "round-001" / "data", need_sft=data["sft_rows"] > 0,
                              need_pairs=data["pairs"] > 0)
    assert len(rows.sft) == data["sft_rows"] and len(rows.pairs) == data["pairs"]
