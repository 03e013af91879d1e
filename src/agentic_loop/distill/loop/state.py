"""The improve loop's bookkeeping: one folder per round, the stages it finished, the watermark.

Why on disk, stage by stage: a round is minutes to hours of sampling and
training, and a killed process must not redo (or, worse, half-redo) what it
finished. Each round is ``work_dir/round-NNN/`` with a ``state.json`` that
records every finished stage (``grow``, ``hint``, ``data``, ``train``,
``gate``, ``register``) with what it produced and how long it took; a re-run
skips the finished stages and redoes the first unfinished one from scratch
(training resumes from its own checkpoints). The file is replaced atomically
after each stage, so it always describes finished work only.

A ``state.json`` of the wrong shape (a stage that is not a mapping, a
result without what the next stage reads back, a round number that is not
this folder's) is refused on open with an :class:`ImproveStateError` naming
the file, the first problem and the fix, before any stage trusts it.

The watermark is what a pool read from trajectory logs has used: the
creation time of the newest trajectory taken, and the ids taken at exactly
that time. A round takes only trajectories past it, so no round re-reads
what an earlier one used.

Example:
    >>> import tempfile, pathlib
    >>> work = pathlib.Path(tempfile.mkdtemp())
    >>> state = RoundState.open(work, 1)
    >>> state.dir.name, state.done("grow")
    ('round-001', False)
    >>> state.finish("grow", {"samples": 8}, seconds=1.5)
    >>> again = RoundState.open(work, 1)
    >>> again.done("grow"), again.result("grow")["samples"], again.seconds()
    (True, 8, {'grow': 1.5})
    >>> _ = state.path.write_text('{"round": 1, "stages": {"grow": 8}}')
    >>> RoundState.open(work, 1)                          # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    agentic_loop...ImproveStateError: the round state .../state.json does not have the shape ...
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError, field_serializer

from agentic_loop.atomic import atomic_write_bytes
from agentic_loop.errors import ConfigError, StorageError
from agentic_loop.paths import make_dir
from agentic_loop.trajectories import Trajectory

__all__ = ["STAGES", "ImproveStateError", "RoundState", "Watermark", "write_json"]

#: The stages of one round, in order.
STAGES: tuple[str, ...] = ("grow", "hint", "data", "train", "gate", "register")
STATE_FILE = "state.json"


class ImproveStateError(StorageError):
    """A round's ``state.json`` or the watermark cannot be read; the message names the file."""


def write_json(path: Path, data: Any) -> None:
    """Write ``data`` as indented JSON, atomically (a reader never sees half a file)."""
    make_dir(path.parent, what="round folder", error=StorageError)
    text = json.dumps(data, indent=2, ensure_ascii=False, default=str) + "\n"
    atomic_write_bytes(path, text.encode("utf-8"))


def _read_json(path: Path, what: str) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ImproveStateError(
            f"the {what} {path} is unreadable ({exc}); delete it to redo that work, or pass "
            "another work folder") from None
    if not isinstance(data, dict):
        raise ImproveStateError(f"the {what} {path} is not a JSON object; delete it to redo "
                                "that work, or pass another work folder")
    return data


class _StageRecord(BaseModel):
    model_config = ConfigDict(extra="forbid")

    result: dict[str, Any]
    seconds: float


class _RoundFile(BaseModel):
    """The fields of ``state.json`` the round reads (others, e.g. ``pool_tasks``, pass)."""

    model_config = ConfigDict(extra="allow")

    round: int
    stages: dict[str, _StageRecord]
    model: str | None = None
    threshold: float | None = None
    version: str | None = None
    ended: str | None = None
    watermark: dict[str, Any] | None = None


def _shape_problem(data: dict[str, Any], number: int,
                   required: Mapping[str, Sequence[str]]) -> str | None:
    """The first way ``data`` differs from what improve writes for round ``number``, or None."""
    try:
        parsed = _RoundFile.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "the file"
        return f"{where}: {first['msg']}"
    if parsed.round != number:
        return f"round: it says {parsed.round}, but it is round {number}'s folder"
    for stage, record in parsed.stages.items():
        if stage not in STAGES:
            return f"stages.{stage}: not a stage (the stages are {', '.join(STAGES)})"
        missing = [k for k in required.get(stage, ()) if k not in record.result]
        if missing:
            return f"stages.{stage}.result: {', '.join(missing)} missing"
    return None


@dataclass
class RoundState:
    """One round's folder and its ``state.json``: what it started from and what it finished."""

    dir: Path
    number: int
    data: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def open(cls, work_dir: str | os.PathLike[str], number: int, *,
             required: Mapping[str, Sequence[str]] | None = None) -> RoundState:
        """The round's state (empty for a round not started yet); the folder is made on write.

        ``required``: the keys each finished stage's result must hold (what the
        caller reads back); a file without them is refused like a malformed one.
        """
        if number < 1:
            raise ConfigError(f"round numbers start at 1, got {number}")
        folder = Path(work_dir).expanduser() / f"round-{number:03d}"
        path = folder / STATE_FILE
        data = _read_json(path, "round state") if path.is_file() else {}
        data.setdefault("round", number)
        data.setdefault("stages", {})
        problem = _shape_problem(data, number, required or {})
        if problem is not None:
            raise ImproveStateError(
                f"the round state {path} does not have the shape improve writes ({problem}); "
                f"delete it to redo round {number} from its first stage (a model the round "
                "registered is recognised by its weights and not registered again), or restore "
                "it from a backup")
        return cls(folder, number, data)

    @property
    def path(self) -> Path:
        """The ``state.json`` file."""
        return self.dir / STATE_FILE

    @property
    def started(self) -> bool:
        """True once the round recorded what it starts from (:meth:`start`)."""
        return "model" in self.data

    def start(self, **fields: Any) -> None:
        """Record what the round starts from (model, threshold, pool); kept on a resume."""
        self.data.update(fields)
        self.save()

    def done(self, stage: str) -> bool:
        """True when ``stage`` finished in this round (a re-run skips it)."""
        return stage in self.data["stages"]

    def result(self, stage: str) -> dict[str, Any]:
        """What a finished ``stage`` recorded."""
        if not self.done(stage):
            raise ImproveStateError(f"stage {stage!r} of round {self.number} has not finished "
                                    f"({self.path}); run improve again to finish it")
        return dict(self.data["stages"][stage]["result"])

    def finish(self, stage: str, result: dict[str, Any], *, seconds: float) -> None:
        """Mark ``stage`` finished with its result and duration, atomically on disk."""
        if stage not in STAGES:
            raise ConfigError(f"unknown stage {stage!r}; the stages are {', '.join(STAGES)}")
        self.data["stages"][stage] = {"result": result, "seconds": round(seconds, 3)}
        self.save()

    def seconds(self) -> dict[str, float]:
        """Seconds each finished stage took, in stage order."""
        stages = self.data["stages"]
        return {s: float(stages[s]["seconds"]) for s in STAGES if s in stages}

    @property
    def complete(self) -> bool:
        """True when every stage finished (or the round ended early and said so)."""
        return all(self.done(s) for s in STAGES) or bool(self.data.get("ended"))

    def save(self) -> None:
        """Write ``state.json`` atomically."""
        write_json(self.path, self.data)


class Watermark(BaseModel):
    """How far a trajectory-fed pool has read: the newest creation time taken, and its ids.

    A pydantic record; its JSON (``model_dump(mode="json")``, the ids sorted) is
    the watermark file.
    """

    model_config = ConfigDict(frozen=True)

    at: datetime | None = None
    ids: frozenset[str] = frozenset()

    @field_serializer("ids")
    def _sorted_ids(self, ids: frozenset[str]) -> list[str]:
        return sorted(ids)

    @field_serializer("at")
    def _iso_time(self, at: datetime | None) -> str | None:
        return at.isoformat() if at else None

    @classmethod
    def load(cls, path: Path) -> Watermark:
        """The watermark saved at ``path`` (none yet: everything is new)."""
        if not path.is_file():
            return cls()
        data = _read_json(path, "watermark")
        try:
            at = datetime.fromisoformat(data["at"]) if data.get("at") else None
        except (TypeError, ValueError):
            raise ImproveStateError(f"the watermark {path} holds no valid time ({data.get('at')!r}"
                                    "); delete it to read every trajectory again") from None
        ids = data.get("ids", [])
        if not isinstance(ids, list):
            raise ImproveStateError(f"the watermark {path} holds ids that are not a list "
                                    f"({type(ids).__name__}); delete it to read every trajectory "
                                    "again")
        return cls(at=at, ids=frozenset(str(i) for i in ids))

    def save(self, path: Path) -> None:
        """Write the watermark atomically."""
        write_json(path, self.model_dump(mode="json"))

    def is_new(self, trajectory: Trajectory) -> bool:
        """True when ``trajectory`` is past the watermark (not read by an earlier round).

        >>> from datetime import timedelta
        >>> t = Trajectory(architecture="a", model_id="m", task="t")
        >>> Watermark().is_new(t), Watermark(at=t.created_at, ids={t.id}).is_new(t)
        (True, False)
        >>> Watermark(at=t.created_at - timedelta(seconds=1)).is_new(t)
        True
        """
        if self.at is None:
            return True
        return trajectory.created_at > self.at or (trajectory.created_at == self.at
                                                   and trajectory.id not in self.ids)

    def after(self, taken: Iterable[Trajectory]) -> Watermark:
        """The watermark once ``taken`` have been read too."""
        runs: Sequence[Trajectory] = list(taken)
        if not runs:
            return self
        newest = max(t.created_at for t in runs)
        if self.at is not None and newest < self.at:
            return self
        at_newest = {t.id for t in runs if t.created_at == newest}
        ids = at_newest | (set(self.ids) if newest == self.at else set())
        return Watermark(at=newest, ids=frozenset(ids))
