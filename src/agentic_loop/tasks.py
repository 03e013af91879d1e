"""Task files: what ``agentic-loop run --tasks`` and the evaluations read.

A task file is JSONL, one task a line: ``{"task": "...", "constraints": {...}}``
(constraints as ``Rubric.for_constraints`` keywords; optional, in which case
the task's own stated constraints are used), or plain text, one task a line.

Example:
    >>> import tempfile, pathlib
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "tasks.jsonl"
    >>> _ = path.write_text('{"task": "Say hi.", "constraints": {"exact_words": 1}}\\nName a color.\\n')
    >>> [(t.task, t.rubric().names if t.constraints else None) for t in load_tasks(path)]
    [('Say hi.', ('exact_words',)), ('Name a color.', None)]
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field, ValidationError

from agentic_loop.judges import Rubric

__all__ = ["TaskFileError", "TaskSpec", "load_tasks"]


class TaskFileError(ValueError):
    """A task file is missing or has a line that is not a task (names file:line)."""


class TaskSpec(BaseModel):
    """One task and, optionally, the constraints that verify it."""

    task: str = Field(min_length=1)
    constraints: dict[str, Any] = Field(default_factory=dict)
    id: str | None = None
    split: str | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)

    def rubric(self) -> Rubric | None:
        """``Rubric.for_constraints(**constraints)``, or None to use the task's stated ones."""
        return Rubric.for_constraints(**self.constraints) if self.constraints else None


def load_tasks(path: str | os.PathLike[str]) -> list[TaskSpec]:
    """Read a task file (JSONL objects or plain lines); blank lines and ``#`` comments skipped."""
    path = Path(path)
    if not path.is_file():
        raise TaskFileError(f"task file {path} does not exist")
    tasks: list[TaskSpec] = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        text = line.strip()
        if not text or text.startswith("#"):
            continue
        try:
            data = json.loads(text) if text.startswith("{") else {"task": text}
            spec = TaskSpec.model_validate(data)
            spec.rubric()  # validate constraints now, not mid-run
        except (json.JSONDecodeError, ValidationError, ValueError, TypeError) as exc:
            raise TaskFileError(f"{path}:{number}: not a task: {exc}") from exc
        tasks.append(spec)
    if not tasks:
        raise TaskFileError(f"task file {path} holds no task")
    return tasks
