"""The golden set: fixed tasks every candidate model is scored on before it may serve.

One JSON object a line::

    {"task": "Write a tagline for a bookstore in 6 to 10 words.",
     "constraints": {"word_count": [6, 10], "exclude_words": ["cheap"]}}

``constraints`` are :meth:`Rubric.for_constraints` keywords and become a
rubric of Python checks, the same for both models, so the comparison is
deterministic. A row may instead carry ``"rubric"`` (a saved
:meth:`Rubric.to_dict`), or neither: then the architecture's task rubric
(the task's own stated constraints plus judged features) is used. An ``id``
is optional (default: the line number). Every row is checked when the file
is read, and an error names ``file:line``.

Example:
    >>> import tempfile, pathlib
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "golden.jsonl"
    >>> _ = path.write_text('{"task": "Say hi in 2 words.", "constraints": {"exact_words": 2}}\\n'
    ...                     '{"task": "Name a fruit."}\\n')
    >>> tasks = load_golden(path)
    >>> [(t.id, t.rubric.names if t.rubric else None) for t in tasks]
    [('1', ('exact_words',)), ('2', None)]
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agentic_loop.judges import Rubric

__all__ = ["GoldenError", "GoldenTask", "load_golden"]


class GoldenError(ValueError):
    """The golden set cannot be used; the message names the file and line."""


@dataclass(frozen=True)
class GoldenTask:
    """One golden task and the rubric that scores it (``None``: the task rubric)."""

    id: str
    task: str
    rubric: Rubric | None = None
    constraints: dict[str, Any] = field(default_factory=dict)


def _rubric(row: dict[str, Any], where: str) -> Rubric | None:
    if "rubric" in row and "constraints" in row:
        raise GoldenError(f"{where}: give either 'constraints' or 'rubric', not both.")
    try:
        if "rubric" in row:
            return Rubric.from_dict(row["rubric"])
        constraints = row.get("constraints") or {}
        if not isinstance(constraints, dict):
            raise GoldenError(f"{where}: 'constraints' must be an object of Rubric.for_constraints "
                              f"keywords, got {constraints!r:.100}.")
        return Rubric.for_constraints(**constraints) if constraints else None
    except (TypeError, ValueError) as exc:
        if isinstance(exc, GoldenError):
            raise
        raise GoldenError(f"{where}: {exc}") from None


def load_golden(path: str | os.PathLike[str]) -> list[GoldenTask]:
    """Read and check a golden-set JSONL file (see the module doc)."""
    path = Path(path).expanduser()
    if not path.is_file():
        raise GoldenError(f"golden set {path} does not exist; pass a JSONL file of "
                          '{"task": ..., "constraints": {...}} rows.')
    tasks: list[GoldenTask] = []
    seen: set[str] = set()
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        where = f"{path}:{number}"
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            raise GoldenError(f"{where}: not valid JSON ({exc.msg}).") from None
        if not isinstance(row, dict) or not isinstance(row.get("task"), str) or not row["task"].strip():
            raise GoldenError(f'{where}: each row needs a non-empty "task" string.')
        task_id = str(row.get("id", number))
        if task_id in seen:
            raise GoldenError(f"{where}: duplicate id {task_id!r}; ids pair the two models' scores.")
        seen.add(task_id)
        tasks.append(GoldenTask(task_id, row["task"], _rubric(row, where),
                                dict(row.get("constraints") or {})))
    if not tasks:
        raise GoldenError(f"golden set {path} has no tasks.")
    return tasks
