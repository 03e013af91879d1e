"""Grow and hint retry: the improve loop's samples, scored by each task's locked checks.

*Grow* (ReST's grow step, expert iteration's sampling) runs an architecture
with the current model over the pool, ``samples`` times per task, each
sample at its own temperature, through the batch runner
(:func:`~agentic_loop.architectures.runner.run_specs`). Every run is written
as a trajectory, tagged ``metadata["improve"]`` with the round, the sample
and the task id, so the export reads them like any other logged run.

*Hint retry* is STaR's rationalization: a task none of whose samples passed
is tried once more with a hint. For a task with a known answer (an exact
``answer`` check, :func:`known_answer`) the hint gives the answer and asks
for the working that leads to it, as STaR does; for other tasks it is the
verifier's verdict (the earlier answer and the checks it failed,
:attr:`~agentic_loop.judges.Evaluation.feedback`).
What is kept is the answer, not the hint: the hinted run is rewritten as
if the plain task had been asked (the task without the hint, every
fresh-draft prompt the plain one the architectures send, refine prompts
dropped, every draft re-scored against the plain task), so a model trained
on it learns to answer the task as it will be asked. A rationalized draft
whose working only restates the given answer (:func:`restates_answer`)
taught nothing: it is flagged ``restated_answer`` and the export drops and
counts it like any other guard flag.

Example (the hint names the check the answer failed):
    >>> from agentic_loop.tasks.spec import TaskSpec
    >>> from agentic_loop.judges import Rubric
    >>> spec = TaskSpec(task="Say hi in 2 words.", rubric=Rubric.for_constraints(exact_words=2))
    >>> print(hint_task(spec, "hi"))
    Say hi in 2 words.
    <BLANKLINE>
    Hint: an earlier answer was "hi". Fix these requirements:
    - Use exactly 2 words. (1 words)
    >>> math = TaskSpec(task="Ann has 3 pens and buys 4. How many now?", constraints={"answer": 7})
    >>> print(hint_task(math, "5"))
    Ann has 3 pens and buys 4. How many now?
    <BLANKLINE>
    Hint: the correct answer is 7. Show the working that leads to it, then give the answer.
    >>> restates_answer("The answer is 7.", "7"), restates_answer("3 + 4 = 7, so 7.", "7")
    (True, False)
"""

from __future__ import annotations

import re
import shutil
import warnings
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agentic_loop.architectures.results import best_round
from agentic_loop.architectures.runner import Runner, run_specs
from agentic_loop.architectures.settings import UncheckedConstraintsWarning
from agentic_loop.judges import Rubric
from agentic_loop.prompt_format import fresh_draft_prompt, rubric_requirements
from agentic_loop.tasks.spec import TaskSpec
from agentic_loop.trajectories import Trajectory, TrajectoryLog

__all__ = ["RESTATED", "Outcome", "failed_tasks", "grow", "hint_retry", "hint_task",
           "known_answer", "outcomes", "plain_trajectory", "pool_counts", "restates_answer"]

#: Makes the architecture that samples at a temperature (the loop binds model and options).
ArchFactory = Callable[[float], Runner]
_MAX_SHOWN = 200
#: The guard flag of a rationalized draft whose working only restates the given answer.
RESTATED = "restated_answer"
_TOKEN = re.compile(r"[^\W\d_]+|\d+(?:[.,]\d+)*", re.UNICODE)
_OPERATOR = re.compile(r"[=+*/\u00d7\u00f7^<>]|\d\s*-\s*\d")
#: Words that state an answer without working towards it ("so the final answer is ...").
_STATING = frozenset(
    "a an the answer answers final result is are was it its this that so thus therefore hence "
    "equals equal to total of in be will would correct number value my our we i get gives "
    "then which comes out".split())


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


def known_answer(spec: TaskSpec) -> str | None:
    """The answer a task's exact ``answer`` check expects, as text; None for other tasks.

    >>> known_answer(TaskSpec(task="2+2?", constraints={"answer": {"value": 4.0}}))
    '4'
    >>> known_answer(TaskSpec(task="Say hi.", constraints={"exact_words": 1})) is None
    True
    """
    rubric = spec.rubric()
    for feature in rubric.check_features if rubric is not None else ():
        if feature.constraint is None or feature.constraint[0] != "answer":
            continue
        value = feature.constraint[1]
        value = value.get("value") if isinstance(value, Mapping) else value
        if isinstance(value, float) and value.is_integer():
            return str(int(value))
        return str(value)
    return None


def restates_answer(output: str, answer: str) -> bool:
    """Whether ``output`` only states ``answer``, with no working towards it.

    What is left once the answer and the words that state an answer ("so
    the final answer is") are taken out must hold some working: three
    words or more, and for a numeric answer another number or an operator
    (a sum, a product, a comparison). Text statistics only, for any task.

    >>> restates_answer("Tom has 42 apples now.", "42"), restates_answer("12 + 30 = 42", "42")
    (True, False)
    >>> restates_answer("Paris.", "Paris")
    True
    """
    wanted = {t.casefold() for t in _TOKEN.findall(answer)}
    rest = [t.casefold() for t in _TOKEN.findall(output)]
    working = [t for t in rest if t not in wanted and t not in _STATING]
    if wanted and all(t[0].isdigit() for t in wanted):  # a number: is anything computed?
        return not (any(t[0].isdigit() for t in working) or _OPERATOR.search(output))
    return len(working) < 3


def hint_task(spec: TaskSpec, failed_output: str) -> str:
    """The task with STaR's hint appended: the known answer, asking for the working; for other
    tasks, the verifier's verdict on a failed answer."""
    rubric = spec.rubric()
    answer = known_answer(spec)
    if answer is not None:
        verdict = rubric.evaluate(spec.task, failed_output) if rubric is not None else None
        others = [c.hint for c in verdict.failed_checks if c.name != "answer"] if verdict else []
        also = (" Also: " + "; ".join(others) + ".") if others else ""
        return (f"{spec.task}\n\nHint: the correct answer is {answer}. Show the working that "
                f"leads to it, then give the answer.{also}")
    feedback = rubric.evaluate(spec.task, failed_output).feedback if rubric is not None else ""
    shown = failed_output.strip().replace("\n", " ")[:_MAX_SHOWN] or "(empty)"
    return f"{spec.task}\n\nHint: an earlier answer was \"{shown}\". {feedback}".rstrip()


def plain_trajectory(run: Trajectory, spec: TaskSpec, rubric: Rubric,
                     answer: str | None = None) -> Trajectory:
    """A hinted run rewritten as an answer to the plain task (see the module doc).

    With the ``answer`` the hint gave, a draft that only restates it is
    flagged :data:`RESTATED` (never trained on) and cannot be the accepted final.
    """
    plain = fresh_draft_prompt(spec.task, rubric_requirements(rubric))
    rounds = []
    for r in run.rounds:
        verdict = rubric.evaluate(spec.task, r.draft)
        fresh = r.prompt is None or r.prompt.template == "generate"
        guards = dict(r.guards)
        if answer is not None and restates_answer(r.draft, answer):
            guards[RESTATED] = f"the working only restates the given answer {answer!r}"
        rounds.append(r.model_copy(update={
            "score": verdict.score, "passed": verdict.passed, "feedback": verdict.feedback or None,
            "critique": None, "prompt": plain if fresh else None, "guards": guards}))
    best = best_round([r for r in rounds if RESTATED not in r.guards]) or best_round(rounds)
    final = best.draft if best is not None else None
    last = rubric.evaluate(spec.task, final) if final else None
    restated = best is not None and RESTATED in best.guards
    return run.model_copy(update={
        "task": spec.task, "rounds": rounds, "final_output": final,
        "final_score": last.score if last else None,
        "accepted": bool(last and last.passed and not run.errors and not restated),
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
    # The hint restates the locked rubric's own failed checks in words the task parser reads as
    # further constraints; the run is scored by that rubric on purpose, so the architectures'
    # "task states constraints the rubric does not check" warning would only be noise here.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UncheckedConstraintsWarning)
        results = run_specs(make_arch(temperature), hinted, max_concurrency=max_concurrency)
    rewritten: list[Trajectory] = []
    for (spec, _), result in zip(failed, results, strict=True):
        rubric = spec.rubric()
        assert rubric is not None  # pool tasks are locked: each has its checks
        answer = known_answer(spec)
        run = plain_trajectory(result.trajectory, spec, rubric, answer)
        run = _tagged(run, round=round_number, sample="hint", task_id=spec.id, hinted=True,
                      temperature=temperature, rationalized=answer is not None)
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
