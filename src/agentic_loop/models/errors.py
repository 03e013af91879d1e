"""Errors raised while resolving, loading or calling a model. Each names the input and the fix.

All of them sit under the package's one :class:`~agentic_loop.errors.ModelError`
root (re-exported here), so ``except ModelError`` catches every model problem
and ``except AgenticLoopError`` every problem the user can fix.

Example:
    >>> from agentic_loop.errors import AgenticLoopError
    >>> err = ModelCallError("critic: the model call failed after 3 attempt(s)", attempts=3)
    >>> isinstance(err, ModelError), isinstance(err, AgenticLoopError), err.attempts
    (True, True, 3)
    >>> issubclass(ModelSpecError, ValueError)
    True
"""

from __future__ import annotations

from typing import Any

from agentic_loop.errors import ModelError

__all__ = [
    "GrammarError",
    "ModelCallError",
    "ModelDirError",
    "ModelError",
    "ModelLoadError",
    "ModelSpecError",
    "ModelTimeoutError",
    "StructuredOutputError",
]


class ModelSpecError(ModelError, ValueError):
    """A model spec string (or a model directory named by one) could not be used."""


class ModelLoadError(ModelError):
    """A model (or its server) could not be reached or loaded."""


class ModelDirError(ModelSpecError, ModelLoadError):
    """A spec names no usable model directory (missing, not a model, or a served model).

    Both a spec error and a load error, so code catching either keeps working.
    """


class StructuredOutputError(ModelError):
    """The model's answer did not validate against the requested schema.

    ``raw`` keeps the model's message when there was one, so a retry can show
    the model its own answer next to the error.
    """

    def __init__(self, message: str, *, raw: Any = None) -> None:
        super().__init__(message)
        self.raw = raw


class GrammarError(ModelError, ValueError):
    """A schema cannot be compiled into a decoding grammar (or the grammar dead-ends)."""


class ModelCallError(ModelError):
    """A model call gave no (valid) answer within its retry policy's attempts.

    ``attempts`` is how many calls were made (0 when none could be made) and
    ``last_error`` the error of the last one.
    """

    def __init__(self, message: str, *, attempts: int = 0,
                 last_error: BaseException | None = None) -> None:
        super().__init__(message)
        self.attempts = attempts
        self.last_error = last_error


class ModelTimeoutError(ModelError):
    """One model call gave no answer within its policy's ``timeout_s``.

    A call error like a dropped connection: the policy waits and tries again,
    and reports it in its :class:`ModelCallError` when the attempts run out.
    """

    def __init__(self, message: str, *, timeout_s: float) -> None:
        super().__init__(message)
        self.timeout_s = timeout_s
