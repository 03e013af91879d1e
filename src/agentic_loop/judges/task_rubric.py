"""The one answer to "which rubric scores this task?": :func:`rubric_for_task`.

Why one function: the same question was answered three ways (the
architectures' default rubric, the checks-only rubric of a GRPO prompt, and a
task spec's own rubric), and a run parsed its task into a rubric once per
node. Every caller now asks here, once: a task that brings its own rubric (a
:class:`~agentic_loop.tasks.spec.TaskSpec` with constraints or a saved
rubric) keeps it, else the first rubric the caller was given, else the
constraints the task states, parsed from its text.

A task's own rubric may hold the user's check functions: they were saved by
reference and resolved when the task was read (:mod:`.check_refs`), so every
stage that asks here (a run, the pool, the gate, GRPO's prompt set) runs them.

The stated constraints become checks that outweigh the two judged features
(:data:`TASK_CHECK_WEIGHT`: a 135M judge says "true" to nearly anything);
``checks_only=True`` gives the checks alone at equal weights (the same score
on checks), or None when the task states none: a training reward must not let
the policy grade itself.

Example:
    >>> rubric_for_task("Write a tagline in exactly 5 words.").names
    ('exact_words', 'on_task', 'well_written')
    >>> rubric_for_task("Write a motto in exactly 4 words, all lowercase.", checks_only=True).names
    ('exact_words', 'lowercase')
    >>> rubric_for_task("Name a color.", checks_only=True) is None
    True
    >>> given = Rubric.for_constraints(lowercase=True)
    >>> rubric_for_task("Say hi in exactly 2 words.", None, given) is given
    True
"""

from __future__ import annotations

from typing import Any, Literal, Protocol, overload, runtime_checkable

from agentic_loop.judges.checks.constraint_features import constraint_feature
from agentic_loop.judges.checks.task_constraint_parser import constraints_from_task
from agentic_loop.judges.features import Feature
from agentic_loop.judges.rubric import Rubric

__all__ = ["TASK_CHECK_WEIGHT", "TaskWithRubric", "rubric_for_task"]

#: Check features outweigh judged ones: a 135M judge says "true" to nearly anything.
TASK_CHECK_WEIGHT = 4.0


@runtime_checkable
class TaskWithRubric(Protocol):
    """A task that may bring its own rubric (``None``: the task's stated one), e.g. a TaskSpec."""

    task: str

    def rubric(self) -> Rubric | None: ...


@overload
def rubric_for_task(task: str | TaskWithRubric, *given: Rubric | None,
                    checks_only: Literal[False] = False) -> Rubric: ...


@overload
def rubric_for_task(task: str | TaskWithRubric, *given: Rubric | None,
                    checks_only: Literal[True]) -> Rubric | None: ...


def rubric_for_task(task: str | TaskWithRubric, *given: Rubric | None,
                    checks_only: bool = False) -> Rubric | None:
    """The rubric ``task`` is scored by: its own, else the first of ``given``, else its stated.

    ``task`` is the task's text or a spec with ``.task`` and ``.rubric()``;
    ``given`` are rubrics in order of precedence (``None`` skipped), e.g. a
    run's ``rubric=`` then the architecture's. Only the last resort parses the
    task's text. With ``checks_only``, the stated constraints give checks of
    weight 1 and no judged feature, and a task stating none gives None.
    """
    if isinstance(task, TaskWithRubric):
        own = task.rubric()
        if own is not None:
            return own
        text = task.task
    else:
        text = task
    for rubric in given:
        if rubric is not None:
            return rubric
    stated: dict[str, Any] = constraints_from_task(text)
    if checks_only:
        return Rubric.for_constraints(name="task", **stated) if stated else None
    checks = [constraint_feature(k, v, weight=TASK_CHECK_WEIGHT) for k, v in stated.items()]
    judged = [
        Feature("on_task", "It does exactly what the task asks (right subject, form and purpose).",
                1.0, kind="bool"),
        Feature("well_written", "It is clear and fluent, with no filler, repetition or "
                "preamble.", 1.0, kind="bool"),
    ]
    return Rubric([*checks, *judged], name="task", version="1")
