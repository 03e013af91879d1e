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

*Agent rounds*: a pool task that gives the agent tools
(:func:`~agentic_loop.distill.loop.tool_use.task_tools`) is run by the
agent (the factory gets the task's tools; tasks with the same tools share
one agent, plain tasks run as before), so each sample is an episode, kept
on its round. Its hint is the verifier's verdict, never the answer: an
agent given the number would answer without the tools it is meant to learn
to use. The episode's steps hold no prompt, but a model step may quote the
hint (or pass it to a tool): every hinted draft, alternative and episode
text is searched for the hint (:func:`quotes_hint`), and one that quotes
it is **dropped** from the record, not only flagged, so no hint text
reaches any dataset (a flagged draft could still be a DPO pair's rejected
side); the run counts them in ``metadata["improve"]["hint_echo"]``.

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
    >>> print(hint_task(math, "5", give_answer=False))
    Ann has 3 pens and buys 4. How many now?
    <BLANKLINE>
    Hint: an earlier answer was "5". Fix these requirements:
    - Give the final answer as the last number in your reply. (the last number is 5)
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

from agentic_loop.architectures.results import RunResult, best_round
from agentic_loop.architectures.runner import Runner, run_specs
from agentic_loop.architectures.settings import UncheckedConstraintsWarning
from agentic_loop.distill.loop.tool_use import task_tools, tool_groups
from agentic_loop.episodes import Episode, ModelStep, ToolStep, UserStep
from agentic_loop.judges import Rubric
from agentic_loop.prompt_format import fresh_draft_prompt, rubric_requirements
from agentic_loop.tasks.spec import TaskSpec
from agentic_loop.trajectories import Trajectory, TrajectoryLog

__all__ = ["RESTATED", "Outcome", "failed_tasks", "grow", "hint_retry", "hint_task",
           "known_answer", "outcomes", "plain_trajectory", "pool_counts", "quotes_hint",
           "restates_answer"]

#: Makes the architecture that samples at a temperature (the loop binds model and options):
#: ``make(temperature)`` for plain tasks, ``make(temperature, tools)`` for an agent's tool tasks.
ArchFactory = Callable[..., Runner]
_MAX_SHOWN = 200
#: The guard flag of a rationalized draft whose working only restates the given answer.
RESTATED = "restated_answer"
_TOKEN = re.compile(r"[^\W\d_]+|\d+(?:[.,]\d+)*", re.UNICODE)
_OPERATOR = re.compile(r"[=+*/\u00d7\u00f7^<>]|\d\s*-\s*\d")
_SENTENCE = re.compile(r"\n+|(?<=[.!?:])\s+")
_NOT_WORD = re.compile(r"[\W_]+", re.UNICODE)
_HINT_WORD = re.compile(r"\bhints?\b", re.IGNORECASE)
#: A sentence of the hint this long (in words) found in a draft is a quote of the hint; shorter
#: ones ("the correct answer is 7") are what a good answer says anyway.
_QUOTE_WORDS = 6
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
        results = _run_grouped(make_arch, pool, temperature, max_concurrency)
        for spec, result in zip(pool, results, strict=True):
            run = _tagged(result.trajectory, round=round_number, sample=sample,
                          task_id=spec.id, temperature=temperature, **_tools_tag(spec))
            log.append(run)
            grown.append(run)
        if advance is not None:
            advance(len(pool))
    return grown


def _run_grouped(make_arch: ArchFactory, specs: Sequence[TaskSpec], temperature: float,
                 max_concurrency: int) -> list[RunResult]:
    """Each task run by the architecture for its tools (one per distinct set), in input order."""
    results: list[RunResult | None] = [None] * len(specs)
    for tools, indexes in tool_groups(specs):
        arch = make_arch(temperature, tools) if tools else make_arch(temperature)
        done = run_specs(arch, [specs[i] for i in indexes], max_concurrency=max_concurrency)
        for i, result in zip(indexes, done, strict=True):
            results[i] = result
    return [r for r in results if r is not None]


def _tools_tag(spec: TaskSpec) -> dict[str, Any]:
    """The tools an agent sample was given, for its ``improve`` tag (nothing for a plain task)."""
    names = [t.name for t in task_tools(spec)]
    return {"tools": names} if names else {}


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


def hint_task(spec: TaskSpec, failed_output: str, *, give_answer: bool = True) -> str:
    """The task with STaR's hint appended: the known answer, asking for the working; for other
    tasks (and with ``give_answer=False``, as for an agent's tool task), the verifier's verdict
    on a failed answer."""
    rubric = spec.rubric()
    answer = known_answer(spec) if give_answer else None
    if answer is not None:
        verdict = rubric.evaluate(spec.task, failed_output) if rubric is not None else None
        others = [c.hint for c in verdict.failed_checks if c.name != "answer"] if verdict else []
        also = (" Also: " + "; ".join(others) + ".") if others else ""
        return (f"{spec.task}\n\nHint: the correct answer is {answer}. Show the working that "
                f"leads to it, then give the answer.{also}")
    feedback = rubric.evaluate(spec.task, failed_output).feedback if rubric is not None else ""
    shown = failed_output.strip().replace("\n", " ")[:_MAX_SHOWN] or "(empty)"
    return f"{spec.task}\n\nHint: an earlier answer was \"{shown}\". {feedback}".rstrip()


def _normal(text: str) -> str:
    """Words only, casefolded, one space apart, padded: for word-aligned substring search."""
    return f" {_NOT_WORD.sub(' ', text.casefold()).strip()} "


def quotes_hint(texts: Sequence[str], hinted_task: str, task: str, *,
                plain: str | None = None) -> str | None:
    """The part of the hint that ``texts`` quote, or None when they quote none of it.

    The hint is what ``hinted_task`` adds to ``task``; a text quotes it when it
    says "hint" or holds one of its sentences of six words or more (words
    compared, case and punctuation ignored), unless the plain prompt says it
    too (``plain``: its text, the task and its requirements; default the task).

    >>> hinted = hint_task(TaskSpec(task="Say hi in 2 words.", constraints={"exact_words": 2}),
    ...                    "hi there you")
    >>> quotes_hint(["Hello friend"], hinted, "Say hi in 2 words.") is None
    True
    >>> quotes_hint(["The hint says: an earlier answer was hi there you"], hinted,
    ...             "Say hi in 2 words.")
    'hint'
    >>> quotes_hint(["an earlier answer was hi there you. so: hello"], hinted,
    ...             "Say hi in 2 words.")
    'an earlier answer was hi there you'
    """
    added = hinted_task[len(task):] if hinted_task.startswith(task) else hinted_task
    shown = _normal(plain if plain is not None else task)
    pieces = [] if _HINT_WORD.search(shown) else ["hint"]
    for sentence in _SENTENCE.split(added):
        words = _normal(sentence).split()
        if words[:1] == ["hint"]:
            words = words[1:]
        if len(words) >= _QUOTE_WORDS and f" {' '.join(words)} " not in shown:
            pieces.append(" ".join(words))
    said = [_normal(t) for t in texts if t]
    return next((p for p in pieces if any(f" {p} " in t for t in said)), None)


def _episode_texts(episode: Episode | None) -> list[str]:
    """Every text of an episode the model wrote or a tool echoed back: what a hint could hide in."""
    if episode is None:
        return []
    texts = [episode.final, episode.error or ""]
    for step in episode.steps:
        if isinstance(step, ModelStep):
            texts += [step.text, *(f"{c.name} {c.args}" for c in step.tool_calls)]
        elif isinstance(step, ToolStep):
            texts += [f"{step.name} {step.args}", step.content, step.error or ""]
        elif isinstance(step, UserStep):  # a simulated user's reply may repeat what it was told
            texts.append(step.text)
    return texts


def plain_trajectory(run: Trajectory, spec: TaskSpec, rubric: Rubric,
                     answer: str | None = None, *, hinted_task: str | None = None
                     ) -> Trajectory:
    """A hinted run rewritten as an answer to the plain task (see the module doc).

    With the ``answer`` the hint gave, a draft that only restates it is
    flagged :data:`RESTATED` (never trained on) and cannot be the accepted final.
    With the ``hinted_task`` the run was asked, a draft or best-of-n
    alternative whose text or episode quotes the hint (:func:`quotes_hint`)
    is dropped; how many drafts were is ``metadata["improve"]["hint_echo"]``.
    """
    requirements = rubric_requirements(rubric)
    plain = fresh_draft_prompt(spec.task, requirements)

    def echoes(draft: str, episode: Episode | None) -> bool:
        return hinted_task is not None and quotes_hint(
            [draft, *_episode_texts(episode)], hinted_task, spec.task,
            plain=f"{spec.task}\n{requirements}") is not None

    rounds = []
    echoed = 0
    for r in run.rounds:
        if echoes(r.draft, r.episode):
            echoed += 1
            continue
        alternatives = [c for c in r.alternatives if not echoes(c.draft, c.episode)]
        echoed += len(r.alternatives) - len(alternatives)
        verdict = rubric.evaluate(spec.task, r.draft)
        fresh = r.prompt is None or r.prompt.template == "generate"
        guards = dict(r.guards)
        if answer is not None and restates_answer(r.draft, answer):
            guards[RESTATED] = f"the working only restates the given answer {answer!r}"
        rounds.append(r.model_copy(update={
            "score": verdict.score, "passed": verdict.passed, "feedback": verdict.feedback or None,
            "critique": None, "prompt": plain if fresh else None, "guards": guards,
            "alternatives": alternatives}))
    best = best_round([r for r in rounds if RESTATED not in r.guards]) or best_round(rounds)
    final = best.draft if best is not None else None
    last = rubric.evaluate(spec.task, final) if final else None
    restated = best is not None and RESTATED in best.guards
    improve = {**run.metadata.get("improve", {}), "hint_echo": echoed}
    return run.model_copy(update={
        "task": spec.task, "rounds": rounds, "final_output": final,
        "final_score": last.score if last else None,
        "accepted": bool(last and last.passed and not run.errors and not restated),
        "exemplar_ids": [], "reflection_ids": [],
        "metadata": {**run.metadata, "improve": improve}}).storable()


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
    # an agent's tool task is hinted with the verifier's verdict, never the answer (module doc)
    hinted = [spec.model_copy(update={"task": hint_task(spec, output,
                                                        give_answer=not task_tools(spec))})
              for spec, output in failed]
    # The hint restates the locked rubric's own failed checks in words the task parser reads as
    # further constraints; the run is scored by that rubric on purpose, so the architectures'
    # "task states constraints the rubric does not check" warning would only be noise here.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UncheckedConstraintsWarning)
        results = _run_grouped(make_arch, hinted, temperature, max_concurrency)
    rewritten: list[Trajectory] = []
    for (spec, _), asked, result in zip(failed, hinted, results, strict=True):
        rubric = spec.rubric()
        assert rubric is not None  # pool tasks are locked: each has its checks
        answer = known_answer(spec) if not task_tools(spec) else None
        run = plain_trajectory(result.trajectory, spec, rubric, answer, hinted_task=asked.task)
        run = _tagged(run, round=round_number, sample="hint", task_id=spec.id, hinted=True,
                      temperature=temperature, rationalized=answer is not None,
                      **_tools_tag(spec))
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
