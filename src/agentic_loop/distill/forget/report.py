"""What an erasure did, place by place, and the one audit line it leaves.

Why apart from the erasure: the report is what a person reads to answer
"is this user gone?", so it lists every place something was erased from
(each trajectory log, memory collection, dataset folder, recorded log and
store, with how many records or lines) and, as warnings, every place the
erasure knows of but could not reach; and it says so plainly when it found
nothing at all (``nothing_found``: a mistyped user id looks the same as a
user already forgotten). Neither the report nor the audit line ever holds
an id, a text or the user's hash.

Both are pydantic records: ``ForgetReport.model_dump(mode="json")`` is
``agentic-loop forget --json``'s output (the shape it always had: ``counts``,
``exports``, ``models``, ``audit_log``, ``stores``, ``erased``, ``warnings``),
and ``model_validate`` reads such a file back, an older one included.

Example:
    >>> from agentic_loop.distill.forget.recorded import PlaceResult
    >>> report = ForgetReport.of("user", False, None, RunErasure(), MemoryErasure(), 0, [], [],
    ...                          places=[PlaceResult(kind="log", path="/srv/shadow.jsonl",
    ...                                              what="shadow log",
    ...                                              problem="no longer exists")])
    >>> report.complete, report.warnings
    (False, ['could not reach the shadow log /srv/shadow.jsonl: no longer exists'])
    >>> report.nothing_found, ForgetReport.model_validate(report.model_dump(mode="json")) == report
    (True, True)
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any, Literal

from pydantic import (
    AliasChoices,
    BaseModel,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    computed_field,
    field_serializer,
    model_serializer,
)

from agentic_loop.clock import utc_stamp
from agentic_loop.distill.forget.exports import ExportErasure
from agentic_loop.distill.forget.logs import RunErasure
from agentic_loop.distill.forget.memories import MemoryErasure
from agentic_loop.distill.forget.models import AffectedModel
from agentic_loop.distill.forget.recorded import PlaceResult
from agentic_loop.distill.forget.stores import StoreErasure

__all__ = ["ErasureAudit", "ForgetCounts", "ForgetReport"]


class ForgetCounts(BaseModel):
    """Records removed per kind (``runs_scrubbed``: other runs rewritten to drop copies;
    ``log_lines``: lines removed from recorded logs such as a shadow router's;
    ``log_lines_scrubbed``: other users' lines there that had an erased text replaced;
    ``leftover_lines``: lines of quarantine files, backups and orphan temporaries;
    ``reviews``, ``review_queue``: people's labels and review queue entries of erased runs,
    left out of the JSON when 0, so a report keeps the shape it had before reviews)."""

    trajectories: int = 0
    feedback: int = 0
    consent: int = 0
    reviews: int = 0
    review_queue: int = 0
    leftover_lines: int = 0
    archive_entries: int = 0
    reflections: int = 0
    store_records: int = 0
    runs_scrubbed: int = 0
    export_rows: int = 0
    export_rows_untraced: int = 0
    log_lines: int = 0
    log_lines_scrubbed: int = 0
    models_marked: int = 0

    @model_serializer(mode="wrap")
    def _shape(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        data: dict[str, Any] = handler(self)
        return {k: v for k, v in data.items() if v or k not in _LATER_COUNTS}


#: Counts added after reports were first written: in the JSON only when not 0.
_LATER_COUNTS = frozenset({"reviews", "review_queue"})


class ErasureAudit(BaseModel):
    """One line of the erasure audit log: who, when, what kind, how many; never the data."""

    at: str = Field(default_factory=utc_stamp)
    action: Literal["forget_user", "retention", "withdraw_consent"]
    actor: str | None = None
    subject: str | None = None
    before: str | None = None
    counts: dict[str, int] = Field(default_factory=dict)
    models: list[AffectedModel] = Field(default_factory=list)
    stores: dict[str, list[str]] = Field(default_factory=dict)
    #: places known to hold user text that the erasure could not reach
    unreached: list[str] = Field(default_factory=list)


def _alias(name: str, old: str, default: Callable[[], Any]) -> Any:
    """A field stored as ``old`` in the JSON (the name the report always used), read by either."""
    return Field(default_factory=default, validation_alias=AliasChoices(name, old),
                 serialization_alias=old)


class ForgetReport(BaseModel):
    """What an erasure removed (or, with ``dry_run``, would remove), store by store.

    ``erased_from`` holds every place something was (or would be) erased
    from, with how much; ``warnings`` one line per known place that could
    not be reached. Build one from an erasure's parts with :meth:`of`.
    """

    model_config = ConfigDict(populate_by_name=True, serialize_by_alias=True)

    kind: str
    dry_run: bool
    before: datetime | None = None
    totals: ForgetCounts = _alias("totals", "counts", ForgetCounts)
    exports: list[ExportErasure] = Field(default_factory=list)
    models: list[AffectedModel] = Field(default_factory=list)
    audit_path: Path | None = _alias("audit_path", "audit_log", lambda: None)
    stores: dict[str, list[str]] = Field(default_factory=dict)
    erased_from: list[PlaceResult] = _alias("erased_from", "erased", list)
    warnings: list[str] = Field(default_factory=list)

    @field_serializer("before")
    def _stamp(self, before: datetime | None) -> str | None:
        return utc_stamp(before) if before is not None else None

    @computed_field  # type: ignore[prop-decorator]
    @property
    def nothing_found(self) -> bool:
        """True when nothing of the selection was found anywhere: no record, row, line or
        model (a user id that matches no run, or one already forgotten)."""
        return not any(self.counts().values()) and not self.erased_from and not self.models

    def counts(self) -> dict[str, int]:
        """Records removed per kind (see :class:`ForgetCounts`)."""
        return self.totals.model_dump()

    def erased(self) -> list[PlaceResult]:
        """Every place something was (or would be) erased from, with how much: trajectory and
        side logs, memory collections, stores, dataset folders and recorded logs."""
        return list(self.erased_from)

    @property
    def complete(self) -> bool:
        """Whether every place known to hold user text was reached."""
        return not self.warnings

    @classmethod
    def of(cls, kind: str, dry_run: bool, before: datetime | None, runs: RunErasure,
           memory: MemoryErasure, runs_scrubbed: int, exports: Sequence[ExportErasure],
           models: Sequence[AffectedModel], *, stores: dict[str, list[str]] | None = None,
           places: Sequence[PlaceResult] = (),
           store_erasure: StoreErasure | None = None) -> ForgetReport:
        """The report of an erasure's parts: ``places`` holds the recorded logs and stores
        reached (with what went from each) and every known place that could not be reached
        (with its ``problem``)."""
        held = store_erasure or StoreErasure()
        logs = [p for p in places if p.kind == "log"]
        counts = ForgetCounts(
            **runs.counts(), archive_entries=memory.archive_entries,
            reflections=memory.reflections, store_records=held.records,
            runs_scrubbed=runs_scrubbed, export_rows=sum(e.rows_removed for e in exports),
            export_rows_untraced=sum(e.rows_untraced for e in exports),
            log_lines=sum(p.removed for p in logs),
            log_lines_scrubbed=sum(p.scrubbed for p in logs), models_marked=len(models))
        counts.leftover_lines = (runs.leftover_lines + memory.leftover_lines
                                 + sum(e.leftover_lines for e in exports))
        found = [PlaceResult(kind="trajectories", path=f, what="trajectory log", removed=n)
                 for f, n in runs.per_file.items() if n]
        found += [PlaceResult(kind="memory", path=f, what="memory collection",
                              removed=memory.per_collection.get(f, 0),
                              scrubbed=memory.scrubbed.get(f, 0))
                  for f in dict.fromkeys([*memory.per_collection, *memory.scrubbed])
                  if memory.per_collection.get(f) or memory.scrubbed.get(f)]
        found += [PlaceResult(kind="store", path=s, what="memory store",
                              removed=held.per_store.get(s, 0), scrubbed=held.scrubbed.get(s, 0))
                  for s in dict.fromkeys([*held.per_store, *held.scrubbed])]
        found += [PlaceResult(kind="export", path=str(e.dir), what="dataset export",
                              removed=e.rows_removed + e.leftover_lines) for e in exports]
        found += [p for p in places if (p.removed or p.scrubbed) and not p.problem]
        return cls(kind=kind, dry_run=dry_run, before=before, totals=counts,
                   exports=list(exports), models=list(models), stores=dict(stores or {}),
                   erased_from=found, warnings=[p.warning() for p in places if p.problem])
