"""The quality bench's dev set: the package's dev set (every task family) plus the golden file.

The generator lives in :mod:`agentic_loop.tasks.dev_set` (the demo measures its
rounds on it too); this module adds the hand-written golden tasks
(``examples/golden.jsonl``), held-out only, and re-exports the names the
bench uses.

Same seed, same tasks, for every row of a run and across runs.

Example:
    >>> names = [s.name for s in suites()]
    >>> {"constrained", "arithmetic"} <= set(names)
    True
    >>> train, held = dev_set(30, 10, seed=0, golden=None)
    >>> len(held), {s.split for s in held}, not {s.task for s in train} & {s.task for s in held}
    (30, {'held_out'}, True)
"""

from __future__ import annotations

from pathlib import Path

from agentic_loop.tasks.dev_set import NOT_SUITES, Suite, family_of, interleave, suite_of, suites
from agentic_loop.tasks.dev_set import dev_set as package_dev_set
from agentic_loop.tasks.spec import TaskSpec

__all__ = ["GOLDEN", "NOT_SUITES", "Suite", "dev_set", "family_of", "interleave", "load_golden",
           "suite_of", "suites"]

GOLDEN = Path(__file__).resolve().parents[1] / "examples" / "golden.jsonl"


def load_golden(path: Path | None) -> list[TaskSpec]:
    """The hand-written golden tasks as held-out specs (suite ``golden``); none without a file.

    A golden row that states its constraints only in its text gets them parsed
    into ``constraints``, so it is scored by Python checks like every other task
    (the architectures' default task rubric would add judged features, putting
    the model's own judgement into the measurement); a row with none is left out.
    """
    if path is None or not path.is_file():
        return []
    from agentic_loop.distill.eval.golden import load_golden as read
    from agentic_loop.judges.checks.task_constraint_parser import constraints_from_task

    out = []
    for s in read(path):
        constraints = s.constraints or constraints_from_task(s.task)
        if constraints or s.saved_rubric is not None:
            out.append(s.model_copy(update={
                "split": "held_out", "constraints": constraints,
                "metadata": {**s.metadata, "suite": "golden",
                             "family": s.metadata.get("family", s.id)}}))
    return out


def dev_set(held_out_tasks: int, train_tasks: int, *, seed: int = 0, held_out: float = 0.3,
            golden: Path | None = GOLDEN) -> tuple[list[TaskSpec], list[TaskSpec]]:
    """``(train, held_out)`` of :func:`agentic_loop.tasks.dev_set.dev_set`, golden tasks included.

    The golden tasks count towards ``held_out_tasks``; the rest is shared equally
    by the generated suites.
    """
    return package_dev_set(held_out_tasks, train_tasks, seed=seed, held_out=held_out,
                           golden=load_golden(golden))
