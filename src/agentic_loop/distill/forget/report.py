"""What an erasure did, place by place, and the one audit line it leaves.

Why apart from the erasure: the report is what a person reads to answer
"is this user gone?", so it lists every place something was erased from
(each trajectory log, memory collection, dataset folder, recorded log and
store, with how many records or lines) and, as warnings, every place the
erasure knows of but could not reach. Neither the report nor the audit
line ever holds an id, a text or the user's hash.

Example:
    >>> from agentic_loop.distill.forget.recorded import PlaceResult
    >>> report = ForgetReport("user", False, None, RunErasure(), MemoryErasure(), 0, [], [],
    ...                       places=[PlaceResult("log", "/srv/shadow.jsonl", "shadow log",
    ...                                           problem="no longer exists")])
    >>> report.complete, report.warnings
    (False, ['could not reach the shadow log /srv/shadow.jsonl: no longer exists'])
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field

from agentic_loop.clock import utc_stamp
from agentic_loop.distill.forget.exports import ExportErasure
from agentic_loop.distill.forget.logs import RunErasure
from agentic_loop.distill.forget.memories import MemoryErasure
from agentic_loop.distill.forget.models import AffectedModel
from agentic_loop.distill.forget.recorded import PlaceResult
from agentic_loop.distill.forget.stores import StoreErasure

__all__ = ["ErasureAudit", "ForgetReport"]


class ErasureAudit(BaseModel):
    """One line of the erasure audit log: who, when, what kind, how many; never the data."""

    at: str = Field(default_factory=utc_stamp)
    action: Literal["forget_user", "retention", "withdraw_consent"]
    actor: str | None = None
    subject: str | None = None
    before: str | None = None
    counts: dict[str, int] = Field(default_factory=dict)
    models: list[dict[str, str]] = Field(default_factory=list)
    stores: dict[str, list[str]] = Field(default_factory=dict)
    #: places known to hold user text that the erasure could not reach
    unreached: list[str] = Field(default_factory=list)


@dataclass
class ForgetReport:
    """What an erasure removed (or, with ``dry_run``, would remove), store by store.

    ``places`` holds the recorded logs and stores reached (with what went
    from each) and every known place that could not be reached (with its
    ``problem``); :attr:`warnings` names the latter.
    """

    kind: str
    dry_run: bool
    before: datetime | None
    runs: RunErasure
    memory: MemoryErasure
    runs_scrubbed: int
    exports: list[ExportErasure]
    models: list[AffectedModel]
    audit_path: Path | None = None
    stores: dict[str, list[str]] = field(default_factory=dict)
    places: list[PlaceResult] = field(default_factory=list)
    store_erasure: StoreErasure = field(default_factory=StoreErasure)

    def counts(self) -> dict[str, int]:
        """Records removed per kind (``runs_scrubbed``: other runs rewritten to drop copies;
        ``log_lines``: lines removed from recorded logs such as a shadow router's;
        ``log_lines_scrubbed``: other users' lines there that had an erased text replaced)."""
        return {**self.runs.counts(), **{k: v for k, v in self.memory.counts().items()
                                         if k != "leftover_lines"},
                "store_records": self.store_erasure.records,
                "runs_scrubbed": self.runs_scrubbed,
                "export_rows": sum(e.rows_removed for e in self.exports),
                "export_rows_untraced": sum(e.rows_untraced for e in self.exports),
                "log_lines": sum(p.removed for p in self.places if p.kind == "log"),
                "log_lines_scrubbed": sum(p.scrubbed for p in self.places if p.kind == "log"),
                "leftover_lines": self.runs.leftover_lines + self.memory.leftover_lines
                + sum(e.leftover_lines for e in self.exports),
                "models_marked": len(self.models)}

    @property
    def warnings(self) -> list[str]:
        """One line per known place that could not be reached (empty: every copy reached)."""
        return [p.warning() for p in self.places if p.problem]

    @property
    def complete(self) -> bool:
        """Whether every place known to hold user text was reached."""
        return not self.warnings

    def erased(self) -> list[PlaceResult]:
        """Every place something was (or would be) erased from, with how much: trajectory and
        side logs, memory collections, stores, dataset folders and recorded logs."""
        found = [PlaceResult("trajectories", f, "trajectory log", n)
                 for f, n in self.runs.per_file.items() if n]
        found += [PlaceResult("memory", f, "memory collection", n)
                  for f, n in self.memory.per_collection.items() if n]
        found += [PlaceResult("store", s, "memory store", n)
                  for s, n in self.store_erasure.per_store.items()]
        found += [PlaceResult("export", str(e.dir), "dataset export",
                              e.rows_removed + e.leftover_lines) for e in self.exports]
        found += [p for p in self.places if (p.removed or p.scrubbed) and not p.problem]
        return found

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready form (paths and counts; never an id or a text)."""
        return {"kind": self.kind, "dry_run": self.dry_run,
                "before": utc_stamp(self.before) if self.before else None,
                "counts": self.counts(), "exports": [e.to_dict() for e in self.exports],
                "models": [m.to_dict() for m in self.models],
                "audit_log": str(self.audit_path) if self.audit_path else None,
                "stores": self.stores, "erased": [p.to_dict() for p in self.erased()],
                "warnings": self.warnings}
