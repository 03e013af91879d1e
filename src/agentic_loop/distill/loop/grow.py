"""Grow and hint retry: the improve loop's samples, scored by each task's locked checks.

*Grow* (ReST's grow step, expert iteration's sampling) runs an architecture
with the current model over the pool, ``samples`` times per task, each
sample at its own temperature, through the batch runner
(:func:`~agentic_loop.architectures.runner.run_specs`). Every run is written
as a trajectory, tagged ``metadata["improve"]`` with the round, the sample
and the task id, so the export reads them like any other logged run.

*Hint retry* is STaR's rationalization: a task none of whose samples passed
is tried once more with the verifier's verdict in the prompt (the earlier
answer and the checks it failed, :attr:`~agentic_loop.judges.Evaluation.feedback`).
What is kept is the answer, not the hint: the hinted run is rewritten as
if the plain task had been asked (the task without the hint, every
fresh-draft prompt the plain one the architectures send, refine prompts
dropped, every draft re-scored against the plain task), so a model trained
on it learns to answer the task as it will be asked.

Example (the hint names the check the answer failed):
    >>> from agentic_loop.tasks.spec import TaskSpec
    >>> from agentic_loop.judges import Rubric
    >>> spec = TaskSpec(task="Say hi in 2 words.", rubric=Rubric.for_constraints(exact_words=2))
    >>> print(hint_task(spec, "hi"))
    Say hi in 2 words.
    <BLANKLINE>
    Hint: an earlier answer was "hi". Fix these requirements:
    - Use exactly 2 words. (1 words)
"""

from __future__ import annotations

import shutil
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agentic_loop.architectures.results import best_round
from agentic_loop.architectures.runner import Runner, run_specs
from agentic_loop.judges import Rubric
from agentic_loop.prompt_format import fresh_draft_prompt, rubric_requirements
from agentic_loop.tasks.spec import TaskSpec
from agentic_loop.trajectories import Trajectory, TrajectoryLog

__all__ = ["Outcome", "failed_tasks", "grow", "hint_retry", "hint_task", "outcomes",
           "plain_trajectory", "pool_counts"]

#: Makes the architecture that samples at a temperature (the loop binds model and options).
ArchFactory = Callable[[float], Runner]
_MAX_SHOWN = 200


@dataclass(frozen=True)
class Outcome:
    """One sample of a task: its output, its score and whether every check passed."""

    task_id: str
    output: str
    score: float
    passed: bool
    hinted: bool = False


def _tagged(trajectory: Trajectory, **improve: Any) -> Trajectory:
    meta = {**trajectory.metadata, "improve": {**trajectory.metadata.get("improve", {}),
                                               **improve}}
    return trajectory.model_copy(update={"metadata": meta}).storable()


def _fresh_log(folder: Path) -> TrajectoryLog:
    """An empty log in ``folder``: a stage redone after a kill starts over, never appends twice."""
    shutil.rmtree(folder, ignore_errors=True)
    return TrajectoryLog(folder)


def grow(make_arch: ArchFactory, pool: Sequence[TaskSpec], folder: Path, *, round_number: int,
         temperatures: Sequence[float], max_concurrency: int = 4,
         advance: Callable[[int], None] | None = None) -> list[Trajectory]:
    """Run every pool task once per temperature (one sample each) and log the runs in ``folder``.

    Tasks carry their locked rubric (the runner scores each run by it).
    Returns the trajectories, tagged with round, sample and task id.
    """
    log = _fresh_log(folder)
    grown: list[Trajectory] = []
    for sample, temperature in enumerate(temperatures):
        arch = make_arch(temperature)
        results = run_specs(arch, pool, max_concurrency=max_concurrency)
        for spec, result in zip(pool, results, strict=True):
            run = _tagged(result.trajectory, round=round_number, sample=sample,
                          task_id=spec.id, temperature=temperature)
            log.append(run)
            grown.append(run)
        if advance is not None:
            advance(len(pool))
    return grown


def outcomes(runs: Sequence[Trajectory], pool: Sequence[TaskSpec]) -> dict[str, list[Outcome]]:
    """Each pool task's samples (in ``runs``), scored again by its locked rubric; no model."""
    by_id = {str(s.id): s for s in pool}
    found: dict[str, list[Outcome]] = {str(s.id): [] for s in pool}
    for run in runs:
        tag = run.metadata.get("improve") or {}
        spec = by_id.get(str(tag.get("task_id")))
        if spec is None:
            continue
        output = run.final_output or ""
        rubric = spec.rubric()
        verdict = rubric.evaluate(spec.task, output) if rubric is not None and output else None
        found[str(spec.id)].append(Outcome(
            str(spec.id), output, verdict.score if verdict else 0.0,
            bool(verdict and verdict.passed and not run.errors), bool(tag.get("hinted"))))
    return found


def hint_task(spec: TaskSpec, failed_output: str) -> str:
    """The task with the verifier's verdict on a failed answer appended (STaR's hint)."""
    rubric = spec.rubric()
    feedback = rubric.evaluate(spec.task, failed_output).feedback if rubric is not None else ""
    shown = failed_output.strip().replace("\n", " ")[:_MAX_SHOWN] or "(empty)"
    return f"{spec.task}\n\nHint: an earlier answer was \"{shown}\". {feedback}".rstrip()


def plain_trajectory(run: Trajectory, spec: TaskSpec, rubric: Rubric) -> Trajectory:
    """A hinted run rewritten as an answer to the plain task (see the module doc)."""
    plain = fresh_draft_prompt(spec.task, rubric_requirements(rubric))
    rounds = []
    for r in run.rounds:
        verdict = rubric.evaluate(spec.task, r.draft)
        fresh = r.prompt is None or r.prompt.template == "generate"
        rounds.append(r.model_copy(update={
            "score": verdict.score, "passed": verdict.passed, "feedback": verdict.feedback or None,
            "critique": None, "prompt": plain if fresh else None}))
    best = best_round(rounds)
    final = best.draft if best is not None else None
    last = rubric.evaluate(spec.task, final) if final else None
    return run.model_copy(update={
        "task": spec.task, "rounds": rounds, "final_output": final,
        "final_score": last.score if last else None,
        "accepted": bool(last and last.passed and not run.errors),
        "exemplar_ids": [], "reflection_ids": []}).storable()


def hint_retry(make_arch: ArchFactory, failed: Sequence[tuple[TaskSpec, str]], folder: Path, *,
               round_number: int, temperature: float, max_concurrency: int = 4,
               advance: Callable[[int], None] | None = None) -> list[Trajectory]:
    """Retry each ``(task, best failed output)`` once with the hint; log the plain rewrites.

    The hinted task is run under the task's own locked rubric; the logged
    trajectory is :func:`plain_trajectory` of the run, so no hint reaches a dataset.
    """
    log = _fresh_log(folder)
    if not failed:
        return []
    hinted = [spec.model_copy(update={"task": hint_task(spec, output)}) for spec, output in failed]
    results = run_specs(make_arch(temperature), hinted, max_concurrency=max_concurrency)
    rewritten: list[Trajectory] = []
    for (spec, _), result in zip(failed, results, strict=True):
        rubric = spec.rubric()
        assert rubric is not None  # pool tasks are locked: each has its checks
        run = plain_trajectory(result.trajectory, spec, rubric)
        run = _tagged(run, round=round_number, sample="hint", task_id=spec.id, hinted=True,
                      temperature=temperature)
        log.append(run)
        rewritten.append(run)
    if advance is not None:
        advance(len(failed))
    return rewritten


def failed_tasks(found: dict[str, list[Outcome]],
                 pool: Sequence[TaskSpec]) -> list[tuple[TaskSpec, str]]:
    """The tasks with no passing sample, each with its best-scoring failed output."""
    out = []
    for spec in pool:
        samples = found.get(str(spec.id), [])
        if samples and not any(o.passed for o in samples):
            best = max(samples, key=lambda o: o.score)
            out.append((spec, best.output))
    return out


def pool_counts(found: dict[str, list[Outcome]]) -> dict[str, int]:
    """Samples, passing samples, tasks, and tasks with a passing sample."""
    samples = [o for group in found.values() for o in group]
    per_task: dict[str, bool] = defaultdict(bool)
    for o in samples:
        per_task[o.task_id] |= o.passed
    return {"samples": len(samples), "passed": sum(o.passed for o in samples),
            "tasks": len(found), "tasks_solved": sum(per_task.values())}
