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
creation time of the newest trajectory taken (``at``), and the ids of every
run taken that was created within a lateness window (``grace_s``, an hour
by default) before it. No round re-reads what an earlier one used, and a run
that reaches a log late (a write retried through a Postgres restart, a host
whose clock lags) after a round took newer runs is still taken while it is
inside the window: up to ``grace_s`` late, exactly once; later, missed.

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
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_serializer

from agentic_loop.atomic import atomic_write_bytes
from agentic_loop.errors import ConfigError, StorageError
from agentic_loop.paths import make_dir
from agentic_loop.trajectories import Trajectory

__all__ = ["GRACE_S", "STAGES", "ImproveStateError", "RoundState", "Watermark", "write_json"]

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


#: How late (seconds after its creation time) a run may reach a log and still be taken.
GRACE_S = 3600.0


class Watermark(BaseModel):
    """How far a trajectory-fed pool has read, with a lateness window for runs that come late.

    ``at`` is the newest creation time taken; ``floor`` is ``at - grace_s``
    (it never moves back); ``ids`` holds every taken run created at or after
    ``floor``, with its creation time. A run is new when it was created after
    ``at``, or at or after ``floor`` with an id not in ``ids``.

    Guarantee: a run that reaches a log up to ``grace_s`` late (until a round
    has taken a run created more than ``grace_s`` after it) is taken exactly
    once. A run later than that is missed: never taken, and never taken
    twice. Clock skew counts as lateness, and a host whose clock runs ahead
    moves ``at`` on for everyone: keep hosts' clocks well within ``grace_s``.
    Memory is bounded: only the ids of runs created within the window are kept.

    A pydantic record; its JSON (``model_dump(mode="json")``, the ids sorted)
    is the watermark file. A file of the older shape (``at`` and a list of the
    ids taken at exactly ``at``) loads as a window that starts at ``at``:
    nothing taken before is taken again, and the window widens to
    ``grace_s`` as ``at`` moves on.

    >>> from datetime import timedelta
    >>> t = Trajectory(architecture="a", model_id="m", task="t")
    >>> late = Trajectory(architecture="a", model_id="m", task="t",
    ...                   created_at=t.created_at - timedelta(minutes=10))
    >>> mark = Watermark().after([t])
    >>> mark.is_new(t), mark.is_new(late)          # late: 10 minutes < grace_s
    (False, True)
    >>> mark.after([late]).is_new(late)
    False
    """

    model_config = ConfigDict(frozen=True)

    at: datetime | None = None
    floor: datetime | None = None
    grace_s: float = Field(default=GRACE_S, ge=0, allow_inf_nan=False)
    ids: dict[str, datetime] = Field(default_factory=dict)

    @field_serializer("ids")
    def _sorted_ids(self, ids: dict[str, datetime]) -> dict[str, str]:
        return {i: ids[i].isoformat() for i in sorted(ids)}

    @field_serializer("at", "floor")
    def _iso_time(self, at: datetime | None) -> str | None:
        return at.isoformat() if at else None

    @classmethod
    def load(cls, path: Path) -> Watermark:
        """The watermark saved at ``path`` (none yet: everything is new)."""
        if not path.is_file():
            return cls()
        data = _read_json(path, "watermark")
        if isinstance(data.get("ids"), list):  # the older shape: the ids taken at exactly `at`
            at = data.get("at")
            data = {**data, "floor": data.get("floor", at),
                    "ids": {str(i): at for i in data["ids"]} if at else {}}
        try:
            return cls.model_validate(data)
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(p) for p in first["loc"]) or "the file"
            raise ImproveStateError(
                f"the watermark {path} does not have the shape improve writes ({where}: "
                f"{first['msg']}); delete it to read every trajectory again") from None

    def save(self, path: Path) -> None:
        """Write the watermark atomically."""
        write_json(path, self.model_dump(mode="json"))

    def _floor(self) -> datetime | None:
        """Where the window starts (a watermark made without one: at ``at``)."""
        return self.floor if self.floor is not None else self.at

    def is_new(self, trajectory: Trajectory) -> bool:
        """True when ``trajectory`` was not taken before and is not too late to take.

        >>> from datetime import timedelta
        >>> t = Trajectory(architecture="a", model_id="m", task="t")
        >>> Watermark().is_new(t), Watermark(at=t.created_at, ids={t.id: t.created_at}).is_new(t)
        (True, False)
        >>> Watermark(at=t.created_at - timedelta(seconds=1)).is_new(t)
        True
        >>> Watermark(at=t.created_at + timedelta(hours=2),
        ...           floor=t.created_at + timedelta(hours=1)).is_new(t)   # over an hour late
        False
        """
        floor = self._floor()
        if self.at is None or floor is None:
            return True
        created = trajectory.created_at
        return created > self.at or (created >= floor and trajectory.id not in self.ids)

    def after(self, taken: Iterable[Trajectory]) -> Watermark:
        """The watermark once ``taken`` (runs that :meth:`is_new` accepted) have been read too."""
        runs: Sequence[Trajectory] = list(taken)
        if not runs:
            return self
        newest = max(t.created_at for t in runs)
        at = newest if self.at is None else max(self.at, newest)
        floor = at - timedelta(seconds=self.grace_s)
        before = self._floor()
        if before is not None:
            floor = max(floor, before)
        ids = {**self.ids, **{t.id: t.created_at for t in runs}}
        return Watermark(at=at, floor=floor, grace_s=self.grace_s,
                         ids={i: c for i, c in ids.items() if c >= floor})
