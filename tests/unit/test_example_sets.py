"""The shipped golden set and task pool: big enough for the gate, checkable, disjoint."""

from __future__ import annotations

from pathlib import Path

from agentic_loop.distill.eval.gate import gate
from agentic_loop.distill.eval.golden import load_golden
from agentic_loop.distill.loop.pool import read_pool
from agentic_loop.judges import rubric_for_task

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def test_the_golden_set_meets_the_gates_minimum_and_the_pool_shares_no_task_with_it() -> None:
    golden = load_golden(EXAMPLES / "golden_set.jsonl")
    pool, unchecked = read_pool(EXAMPLES / "pool.jsonl", golden)  # refuses a shared task
    assert len(golden) >= 20 and len(pool) >= 40 and unchecked == 0
    assert not {g.task for g in golden} & {p.task for p in pool}
    assert len({g.id for g in golden}) == len(golden)
    for spec in golden:
        assert rubric_for_task(spec).check_features, spec.id
    # the library's default gate can decide on it (PROMOTE needs >= 20 tasks)
    n = len(golden)
    assert gate([2.0] * n, [9.0] * (n - 1) + [8.0]).decision.value == "PROMOTE"
