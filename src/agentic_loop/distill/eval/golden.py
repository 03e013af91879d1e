"""The golden set: fixed tasks every candidate model is scored on before it may serve.

A golden file is a task file (:mod:`agentic_loop.tasks.spec`), one task a line::

    {"task": "Write a tagline for a bookstore in 6 to 10 words.",
     "constraints": {"word_count": [6, 10], "exclude_words": ["cheap"]}}

``constraints`` are :meth:`Rubric.for_constraints` keywords and become a
rubric of Python checks, the same for both models, so the comparison is
deterministic (``"check": "mypkg.checks:valid_invoice"`` is your own check
function, by reference). A row may instead carry ``"rubric"`` (a saved
:meth:`Rubric.to_dict`, its custom checks by reference), or neither: then the
architecture's task rubric (the task's own stated constraints plus judged
features) is used. What the
golden set adds to a task file: every task has an ``id`` (default: its
line number), and ids are unique, because they pair the two models' scores.

Example:
    >>> import tempfile, pathlib
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "golden.jsonl"
    >>> _ = path.write_text('{"task": "Say hi in 2 words.", "constraints": {"exact_words": 2}}\\n'
    ...                     '{"task": "Name a fruit."}\\n')
    >>> tasks = load_golden(path)
    >>> [(t.id, t.rubric().names if t.rubric() else None) for t in tasks]
    [('1', ('exact_words',)), ('2', None)]
"""

from __future__ import annotations

import os

from agentic_loop.tasks.spec import TaskFileError, TaskSpec, read_task_file

__all__ = ["GoldenError", "GoldenTask", "load_golden"]

#: A golden task is a task (the name stays for code written against it).
GoldenTask = TaskSpec


class GoldenError(TaskFileError):
    """The golden set cannot be used; the message names the file and line.

    A :class:`~agentic_loop.tasks.spec.TaskFileError`, so a
    :class:`~agentic_loop.errors.TaskError` (and still a ``ValueError``).
    """


def load_golden(path: str | os.PathLike[str]) -> list[TaskSpec]:
    """Read and check a golden-set file (see the module doc): every task with a unique id."""
    tasks: list[TaskSpec] = []
    seen: set[str] = set()
    for number, spec in read_task_file(path, label="golden set", error=GoldenError):
        task_id = spec.id if spec.id is not None else str(number)
        if task_id in seen:
            raise GoldenError(f"{os.fspath(path)}:{number}: duplicate id {task_id!r}; ids pair "
                              "the two models' scores, so give each task its own")
        seen.add(task_id)
        tasks.append(spec if spec.id == task_id else spec.model_copy(update={"id": task_id}))
    return tasks
