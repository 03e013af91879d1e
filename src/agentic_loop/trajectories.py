"""Trajectories: one durable record per architecture run, the training loop's only input.

Every round's draft, features, score and critique are kept (the same
:class:`Round` objects the graph state held), along with what
the run saw (exemplar and reflection ids), what it cost (latency, tokens,
LLM calls) and what went wrong (errors as data). Distillation later turns
these into SFT sets (accepted finals and drafts) and DPO pairs (an early
low-scoring draft against the accepted final).

The log is append-only JSONL with the archive's guarantees (fsync before
``append`` returns, cross-process lock, torn tails skipped): see
:mod:`agentic_loop.jsonl_log`. User feedback arrives later than the run, so it
is appended to its own ``feedback.jsonl`` and merged when reading.

Example:
    >>> import tempfile
    >>> log = TrajectoryLog(tempfile.mkdtemp())
    >>> t = Trajectory(architecture="reflection", model_id="m", task="Say hi.",
    ...                rounds=[Round(iteration=0, draft="hi", score=9.5, passed=True)],
    ...                final_output="hi", final_score=9.5, accepted=True)
    >>> log.append(t)
    >>> log.record_feedback(t.id, "up")
    >>> [(r.task, r.feedback) for r in log.read()]
    [('Say hi.', 'up')]
"""

from __future__ import annotations

import hashlib
import os
import uuid
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from agentic_loop.clock import utc_now
from agentic_loop.errors import ConfigError, StorageError
from agentic_loop.jsonl_log import JsonlLog

__all__ = [
    "FeedbackEvent",
    "Round",
    "TokenUsage",
    "Trajectory",
    "TrajectoryLog",
    "TrajectoryPathError",
    "hash_user_id",
]

SCHEMA_VERSION = 1
Feedback = Literal["up", "down"]


class TrajectoryPathError(StorageError, NotADirectoryError):
    """A trajectory log path names a file that is not a ``.jsonl`` log."""


def hash_user_id(user_id: str, salt: str | None = None) -> str:
    """A salted SHA-256 of a user id, so trajectories never hold the raw id.

    The salt comes from ``$AGENTIC_LOOP_USER_SALT`` unless given.

    >>> hash_user_id("alice", salt="s") == hash_user_id("alice", salt="s")
    True
    >>> len(hash_user_id("alice", salt="s"))
    64
    """
    salt = salt if salt is not None else os.environ.get("AGENTIC_LOOP_USER_SALT", "agentic-loop")
    return hashlib.sha256(f"{salt}:{user_id}".encode()).hexdigest()


class TokenUsage(BaseModel):
    """Tokens and model calls a run consumed (all LLM calls, critiques included)."""

    input_tokens: int = 0
    output_tokens: int = 0
    total_tokens: int = 0
    llm_calls: int = 0


class Round(BaseModel):
    """One draft and its judgement: the only round model of the package.

    The architectures' graph state accumulates these, a trajectory stores
    them, and ``RunResult.trace`` shows them; one shape from node to disk.
    """

    iteration: int
    draft: str
    score: float | None = None
    passed: bool | None = None
    features: dict[str, Any] = Field(default_factory=dict)
    critique: str | None = None
    overall_score: int | None = None
    feedback: str | None = None
    latency_s: float | None = None
    #: reward-hacking guards that fired on the draft (flag -> reason); counted by exports
    guards: dict[str, str] = Field(default_factory=dict)


class Trajectory(BaseModel):
    """Everything one architecture run did, as data."""

    model_config = ConfigDict(extra="ignore")

    schema_version: int = SCHEMA_VERSION
    id: str = Field(default_factory=lambda: uuid.uuid4().hex)
    created_at: datetime = Field(default_factory=utc_now)
    architecture: str
    model_id: str
    task: str
    rubric: dict[str, Any] | None = None
    exemplar_ids: list[str] = Field(default_factory=list)
    reflection_ids: list[str] = Field(default_factory=list)
    rounds: list[Round] = Field(default_factory=list)
    final_output: str | None = None
    final_score: float | None = None
    accepted: bool = False
    archived: bool = False
    stop_reason: str | None = None
    latency_s: float | None = None
    usage: TokenUsage = Field(default_factory=TokenUsage)
    errors: list[str] = Field(default_factory=list)
    user_id_hash: str | None = None
    consent: bool | None = None
    feedback: Feedback | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)

    @property
    def ok(self) -> bool:
        """True when the run finished without errors."""
        return not self.errors


class FeedbackEvent(BaseModel):
    """A user's verdict on a finished run, logged when it arrives."""

    trajectory_id: str
    feedback: Feedback
    created_at: datetime = Field(default_factory=utc_now)


class TrajectoryLog:
    """Append-only, crash-safe log of trajectories in a directory.

    ``path`` is a directory (created on first write) holding
    ``trajectories.jsonl`` and ``feedback.jsonl``; a path ending in
    ``.jsonl`` names the trajectories file itself.
    """

    FILE = "trajectories.jsonl"
    FEEDBACK_FILE = "feedback.jsonl"

    def __init__(self, path: str | os.PathLike[str]) -> None:
        path = Path(path).expanduser()
        if path.suffix == ".jsonl":
            self.dir, file = path.parent, path
        else:
            if path.exists() and not path.is_dir():
                raise TrajectoryPathError(
                    f"TrajectoryLog path {path} is a file; pass a directory or a .jsonl file")
            self.dir, file = path, path / self.FILE
        self._log: JsonlLog[Trajectory] = JsonlLog(file, Trajectory)
        self._feedback: JsonlLog[FeedbackEvent] = JsonlLog(self.dir / self.FEEDBACK_FILE,
                                                           FeedbackEvent)

    @property
    def path(self) -> Path:
        """The trajectories file."""
        return self._log.path

    def append(self, trajectory: Trajectory) -> None:
        """Store one trajectory durably (fsync'd before returning)."""
        self._log.append(trajectory)

    def record_feedback(self, trajectory_id: str, feedback: Feedback) -> None:
        """Attach a user's thumbs up/down to a logged run."""
        if feedback not in ("up", "down"):
            raise ConfigError(f"feedback={feedback!r}: pass 'up' or 'down'")
        self._feedback.append(FeedbackEvent(trajectory_id=trajectory_id, feedback=feedback))

    def read(self) -> list[Trajectory]:
        """Every valid trajectory, oldest first, with the latest feedback merged in.

        Corrupt lines are skipped with a warning naming ``file:line``.
        """
        latest: dict[str, Feedback] = {e.trajectory_id: e.feedback
                                       for e in self._feedback.read_all()}
        out = []
        for t in self._log.read_all():
            if t.id in latest:
                t = t.model_copy(update={"feedback": latest[t.id]})
            out.append(t)
        return out

    def __iter__(self) -> Iterator[Trajectory]:
        return iter(self.read())

    def __len__(self) -> int:
        return len(self._log.read_all())

    def __repr__(self) -> str:
        return f"TrajectoryLog({str(self.dir)!r})"
