"""Tasks and task files: what ``agentic-loop run --tasks``, the benchmarks and the golden set read.

One task type, :class:`TaskSpec`, for every place a task comes with a way
to check it: a run's task file, a generated task family, a golden set. A
task file is JSONL, one task a line::

    {"task": "Write a tagline in 6 to 10 words.", "constraints": {"word_count": [6, 10]}}

``constraints`` are ``Rubric.for_constraints`` keywords; a row may instead
carry ``"rubric"`` (a saved :meth:`Rubric.to_dict`), or neither (then the
task's own stated constraints are used). Your own check function goes by
reference, ``"constraints": {"check": "mypkg.checks:valid_invoice"}`` or a
rubric feature's ``"check"``, and is imported when the file is read
(:mod:`agentic_loop.judges.check_refs`); one that does not resolve is an
error naming the line and the reference. ``id``, ``split`` and
``metadata`` are optional. A multi-turn task names its simulated user,
``"user_sim": {"kind": "scripted", "replies": ["It is order A1001."]}`` or
``{"kind": "chat", "persona": ..., "goal": ..., "model": "local"}`` (no
``model``: the run's own model answers as the user), which answers the agent
after each final answer (:class:`~agentic_loop.agents.user_sim.UserSimulator`).
A line may also be plain text (one task), and
blank lines and ``#`` comments are skipped. Every row is checked when the
file is read, and an error names ``file:line``.

Example:
    >>> import tempfile, pathlib
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "tasks.jsonl"
    >>> _ = path.write_text('{"task": "Say hi.", "constraints": {"exact_words": 1}}\\n'
    ...                     'Name a color.\\n')
    >>> [(t.task, t.rubric().names if t.constraints else None) for t in load_tasks(path)]
    [('Say hi.', ('exact_words',)), ('Name a color.', None)]
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_serializer,
    field_validator,
)

from agentic_loop.agents.user_sim import UserSimulator
from agentic_loop.errors import AgenticLoopError, TaskError
from agentic_loop.judges import Rubric

__all__ = ["TaskFileError", "TaskSpec", "load_tasks", "read_task_file"]


class TaskFileError(TaskError):
    """A task file is missing or has a line that is not a task (names file:line)."""


class TaskSpec(BaseModel):
    """One task and, optionally, what verifies it: constraints or a saved rubric.

    Built with keywords (``TaskSpec(task=..., constraints={...})``); the
    saved rubric is given as ``rubric=`` (a :class:`Rubric` or its
    ``to_dict()``) and read back through :meth:`rubric`.

    >>> spec = TaskSpec(task="Say hi in 2 words.", constraints={"exact_words": 2}, id="g1")
    >>> spec.rubric().evaluate(spec.task, "hi there").passed
    True
    >>> TaskSpec(task="Whisper.", rubric=Rubric.for_constraints(lowercase=True)).rubric().names
    ('lowercase',)
    >>> talk = TaskSpec(task="Where is my order?", user_sim={"replies": ["It is A1001."]})
    >>> TaskSpec.model_validate_json(talk.model_dump_json(by_alias=True)).user_sim.replies
    ['It is A1001.']
    """

    model_config = ConfigDict(arbitrary_types_allowed=True, validate_by_name=True,
                              validate_by_alias=True)

    task: str = Field(min_length=1)
    constraints: dict[str, Any] = Field(default_factory=dict)
    saved_rubric: Rubric | None = Field(default=None, alias="rubric",
                                        exclude_if=lambda value: value is None)
    id: str | None = None
    split: str | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)
    #: the simulated user who answers the agent after each final answer (None: one turn)
    user_sim: UserSimulator | None = Field(default=None, exclude_if=lambda value: value is None)

    @field_validator("id", mode="before")
    @classmethod
    def _id_as_text(cls, value: Any) -> Any:
        """JSON ids may be numbers (``{"id": 3}``); they pair scores as text."""
        return str(value) if isinstance(value, int) and not isinstance(value, bool) else value

    @field_validator("saved_rubric", mode="before")
    @classmethod
    def _load_rubric(cls, value: Any) -> Any:
        return Rubric.from_dict(value) if isinstance(value, dict) else value

    @field_serializer("saved_rubric")
    def _save_rubric(self, rubric: Rubric | None) -> dict[str, Any] | None:
        """Dumped as the task file writes it (``model_dump(by_alias=True)`` gives ``"rubric"``)."""
        return rubric.to_dict() if rubric is not None else None

    def rubric(self) -> Rubric | None:
        """The saved rubric, else ``Rubric.for_constraints(**constraints)``, else None.

        None means "use the task's own stated constraints":
        :func:`~agentic_loop.judges.rubric_for_task` of the spec answers the
        whole question (this rubric, else the stated one).
        """
        if self.saved_rubric is not None:
            return self.saved_rubric
        return Rubric.for_constraints(**self.constraints) if self.constraints else None


def read_task_file(path: str | os.PathLike[str], *, label: str = "task file",
                   error: type[TaskFileError] = TaskFileError) -> list[tuple[int, TaskSpec]]:
    """Every task of a task file with its line number; ``error`` names ``label path:line``.

    The golden set reads through this too (``label="golden set"``), so a
    golden file is a task file.
    """
    file = Path(path).expanduser()
    tasks: list[tuple[int, TaskSpec]] = []
    for number, line in enumerate(_read_lines(file, label, error), start=1):
        try:
            text = line.decode("utf-8").strip()
        except UnicodeDecodeError as exc:
            raise error(f"{file}:{number}: not UTF-8 text (byte {line[exc.start]:#04x} at column "
                        f"{exc.start + 1}); save the {label} as UTF-8") from None
        if not text or text.startswith("#"):
            continue
        try:
            tasks.append((number, _task(text)))
        except _NotATask as exc:
            raise error(f"{file}:{number}: not a task: {exc}") from None
    if not tasks:
        raise error(f"{label} {file} holds no task; write one task a line")
    return tasks


def _read_lines(file: Path, label: str, error: type[TaskFileError]) -> list[bytes]:
    """The file's lines as bytes (decoded one by one, so a bad byte is named by line)."""
    fix = 'pass a JSONL file of {"task": ..., "constraints": {...}} rows, or plain lines'
    if file.is_dir():
        raise error(f"{label} {file} is a directory; {fix}")
    if not file.exists():
        raise error(f"{label} {file} does not exist; {fix}")
    try:
        return file.read_bytes().splitlines()
    except OSError as exc:
        raise error(f"cannot read {label} {file}: {exc.strerror}; check its permissions, "
                    f"or {fix}") from None


def load_tasks(path: str | os.PathLike[str]) -> list[TaskSpec]:
    """Read a task file (JSONL objects or plain lines); blank lines and ``#`` comments skipped."""
    return [spec for _, spec in read_task_file(path)]


class _NotATask(TaskError):
    """Why one line is not a task (turned into the caller's file:line error)."""


def _task(text: str) -> TaskSpec:
    """One checked task from one line; the rubric is built now, not mid-run."""
    try:
        row = json.loads(text) if text.startswith("{") else {"task": text}
    except json.JSONDecodeError as exc:
        raise _NotATask(f"not valid JSON ({exc.msg}); write one JSON object a line") from None
    if not isinstance(row, dict) or not isinstance(row.get("task"), str) or not row["task"].strip():
        raise _NotATask('each row needs a non-empty "task" string')
    if row.get("rubric") is not None and row.get("constraints"):
        raise _NotATask("give either 'constraints' or 'rubric', not both")
    constraints = row.get("constraints")
    if constraints is None:
        row.pop("constraints", None)
    elif not isinstance(constraints, dict):
        raise _NotATask("'constraints' must be an object of Rubric.for_constraints keywords, "
                        f"got {constraints!r:.100}")
    try:
        spec = TaskSpec.model_validate(row)
        spec.rubric()
    except ValidationError as exc:
        raise _NotATask("; ".join(_describe(e) for e in exc.errors())) from None
    except (AgenticLoopError, ValueError, TypeError) as exc:
        raise _NotATask(str(exc)) from None
    return spec


def _describe(error: Any) -> str:
    where = ".".join(str(part) for part in error.get("loc", ()))
    message = str(error.get("msg", "invalid"))
    return f"{where}: {message}" if where else message
