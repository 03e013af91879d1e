"""One error root for the whole package, with one subclass per area.

Why: a caller (the CLI, an app, a batch worker) should catch *our* errors,
the ones a user can fix, with one ``except AgenticLoopError`` and let real
bugs surface as tracebacks. Every exception the package raises on purpose
derives from :class:`AgenticLoopError`; each area has one root below it, and
the areas define their specific errors under those roots (``ModelSpecError``
under :class:`ModelError`, ``ArchiveCorruptedError`` under
:class:`StorageError`, ...). Roots that replace a builtin the package used to
raise keep it as a second base (``TaskError`` is still a ``ValueError``), so
code written against the old types keeps working.

Message style, everywhere: start in lower case (unless the first word is a
name or an acronym), name the input (file, spec, parameter, value), say what
to do about it, and end without a period; join sentences with ``;``.

Example:
    >>> from agentic_loop.errors import AgenticLoopError, ConfigError, TaskError
    >>> try:
    ...     raise ConfigError("max_iterations=0: pass an integer >= 1")
    ... except AgenticLoopError as exc:
    ...     print(f"error: {exc}")
    error: max_iterations=0: pass an integer >= 1
    >>> issubclass(TaskError, ValueError), issubclass(ConfigError, TypeError)
    (True, True)
"""

from __future__ import annotations

__all__ = [
    "AgenticLoopError",
    "ConfigError",
    "DataError",
    "JudgeError",
    "ModelError",
    "ReleaseError",
    "StorageError",
    "TaskError",
    "TrainError",
    "short_error",
]


class AgenticLoopError(Exception):
    """The root: a problem the user can fix; the message says which input and how."""


class ConfigError(AgenticLoopError, ValueError, TypeError):
    """An argument or setting has a wrong value or type (any area)."""


class ModelError(AgenticLoopError, RuntimeError):
    """A model spec, a model load, or a model call failed."""


class JudgeError(AgenticLoopError, RuntimeError):
    """A rubric, check, sandbox or critic could not judge an output."""


class StorageError(AgenticLoopError, RuntimeError):
    """Memory and logs: an archive, a reflection store or a JSONL log cannot be used as asked."""


class DataError(AgenticLoopError, ValueError):
    """Training data: trajectories, exports, PII redaction or datasets are unusable as given."""


class TrainError(AgenticLoopError, RuntimeError):
    """Training (SFT, DPO, GRPO) could not start, resume or finish."""


class ReleaseError(AgenticLoopError, RuntimeError):
    """Golden sets, evaluation, gate, registry or serving failed."""


class TaskError(AgenticLoopError, ValueError):
    """A task (or a task file) is empty, too large or malformed."""


def short_error(exc: BaseException) -> str:
    """An error in one line: its first line, and the last line of a log it quotes (its type's
    name when it says nothing).

    >>> short_error(RuntimeError("")), short_error(OSError("no room"))
    ('RuntimeError', 'no room')
    """
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    if not lines:
        return type(exc).__name__
    text = lines[0] if len(lines) < 2 else f"{lines[0]} {lines[-1]}"
    return text[:400]
