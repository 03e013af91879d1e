"""The flywheel on disk: where it stands (``state.json``) and what it did (``audit.jsonl``).

Why two files: the state is one small record, replaced atomically after
each phase change, that a restarted service reads to resume (the phase, the
candidate and its stage, when the stage started, the rounds done); the
audit log is append-only and durable (:class:`~agentic_loop.jsonl_log.JsonlLog`:
each line is fsynced before the append returns), so it explains every
state the service was ever in. The service writes the audit line *before*
it acts (write-ahead): a service killed between the line and the act
leaves a line the restart's recovery reads and explains (``recover ...``).

Both live under ``<registry>/flywheel/``.

Example:
    >>> import tempfile
    >>> journal = Journal(tempfile.mkdtemp())
    >>> journal.load().phase
    'idle'
    >>> journal.save(FlywheelState(phase="canary", candidate="v2", stage=1))
    >>> journal.load().stage
    1
    >>> _ = journal.log("advance", version="v2", detail="stage 1 -> 2", fraction=0.5)
    >>> [(r.action, r.data["fraction"]) for r in journal.tail(5)]
    [('advance', 0.5)]
"""

from __future__ import annotations

import os
from datetime import datetime
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from agentic_loop.atomic import atomic_write_bytes
from agentic_loop.clock import utc_now
from agentic_loop.errors import StorageError, short_error
from agentic_loop.jsonl_log import JsonlLog

__all__ = ["AuditRecord", "FlywheelState", "Journal", "Phase"]

Phase = Literal["idle", "round", "canary"]
FOLDER = "flywheel"
STATE_FILE = "state.json"
AUDIT_FILE = "audit.jsonl"


class FlywheelState(BaseModel):
    """Where the service stands; what a restart resumes from."""

    model_config = ConfigDict(extra="ignore")

    phase: Phase = "idle"
    #: the version being canaried (phase "canary")
    candidate: str | None = None
    stage: int | None = None
    stage_started_at: datetime | None = None
    #: when the stage before this one started (the current arm's runs at a 100% stage)
    previous_stage_started_at: datetime | None = None
    canary_started_at: datetime | None = None
    #: the registry's current version when the canary started: the version the candidate is
    #: ramped against (a canary whose current moved meanwhile ends, never promotes over it)
    baseline: str | None = None
    #: rounds finished; the round in progress (phase "round") is ``rounds + 1``
    rounds: int = 0
    last_round_at: datetime | None = None
    last_trigger: str | None = None
    updated_at: datetime = Field(default_factory=utc_now)


class AuditRecord(BaseModel):
    """One line of the flywheel's audit log: when, what, on which version, and the numbers."""

    at: datetime = Field(default_factory=utc_now)
    action: str
    version: str | None = None
    detail: str = ""
    data: dict[str, Any] = Field(default_factory=dict)


class Journal:
    """``<registry>/flywheel/state.json`` and ``audit.jsonl`` (see the module doc)."""

    def __init__(self, registry: str | os.PathLike[str]) -> None:
        self.dir = Path(registry).expanduser() / FOLDER
        self.state_path = self.dir / STATE_FILE
        self._audit: JsonlLog[AuditRecord] = JsonlLog(self.dir / AUDIT_FILE, AuditRecord)

    @property
    def audit_path(self) -> Path:
        """The audit log file."""
        return self._audit.path

    def load(self) -> FlywheelState:
        """The saved state (idle when none was saved yet)."""
        if not self.state_path.is_file():
            return FlywheelState()
        try:
            return FlywheelState.model_validate_json(self.state_path.read_bytes())
        except (OSError, ValidationError, ValueError) as exc:
            raise StorageError(
                f"the flywheel state {self.state_path} is unreadable ({short_error(exc)});"
                f" its history is in {self.audit_path}: move the state file aside to start idle "
                "(the registry and canary.json are checked again at start)") from None

    def save(self, state: FlywheelState) -> None:
        """Replace the state atomically (a reader sees the old one or the new one)."""
        self.dir.mkdir(parents=True, exist_ok=True)
        data = state.model_copy(update={"updated_at": utc_now()}).model_dump_json(indent=2)
        atomic_write_bytes(self.state_path, (data + "\n").encode())

    def log(self, action: str, *, version: str | None = None, detail: str = "",
            **data: Any) -> AuditRecord:
        """Append one durable audit line (fsynced before this returns) and return it."""
        record = AuditRecord(action=action, version=version, detail=detail, data=data)
        self.dir.mkdir(parents=True, exist_ok=True)
        self._audit.append(record)
        return record

    def tail(self, n: int = 20) -> list[AuditRecord]:
        """The last ``n`` audit lines, oldest first."""
        if not self._audit.path.is_file():
            return []
        return self._audit.read_all()[-n:]
