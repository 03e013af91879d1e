"""The registry's records and how an audit line changes the index: the log is the truth.

Why a module of its own: the same function must apply a change when it is
made, when a reader finds an audit line the index does not reflect yet (the
process that wrote it was killed before it moved the index), and when the
index is rebuilt from the audit log alone. One :func:`apply_entry`, used by
all three, is what makes "a rebuild gives the same current version and
rollback stack" true by construction rather than by care.

Every audit line carries ``seq`` (1, 2, 3 ... in the order written) and the
index records the ``seq`` of the last line it reflects, so a reader knows
which lines are still to be applied. Lines written before sequence numbers
existed have none: the index that came with them is trusted as it is.

A version's release-gate verdict (:class:`GateRecord`) is read from its
model card's ``evals`` (what :func:`~agentic_loop.distill.loop.gating.register_evaluated`
and ``agentic-loop eval --record`` append): :func:`last_gate` is the latest
of them, the record ``Registry.promote`` checks before serving a version,
and what a forced promote's audit line keeps as ``override``.

Example (a promote the index does not show yet is applied on read):
    >>> index = RegistryIndex(seq=1, versions=[ModelVersion(
    ...     version="v1", path="/m/a", name="a", registered_at="2026-01-01T00:00:00Z")])
    >>> pending = [AuditEntry(action="promote", version="v1", seq=2)]
    >>> index = catch_up(index, pending)
    >>> index.current, index.seq
    ('v1', 2)
    >>> last_gate({"evals": [{"decision": "PROMOTE", "at": "2026-01-01T00:00:00+00:00"},
    ...                      {"decision": "MANUAL_REVIEW", "reasons": ["within noise"],
    ...                       "at": "2026-01-02T00:00:00+00:00"}]}).decision
    <Decision.MANUAL_REVIEW: 'MANUAL_REVIEW'>
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from agentic_loop.clock import utc_stamp
from agentic_loop.distill.eval.gate import Decision, GateDecision
from agentic_loop.distill.train.model_card import CARD_FILE, ModelCard, ModelCardError, read_card
from agentic_loop.errors import ReleaseError

__all__ = ["AuditEntry", "GateRecord", "ModelVersion", "RegistryError", "RegistryIndex",
           "RoundRef", "apply_entry", "backup_versions", "catch_up", "gate_override", "last_gate",
           "replay_audit", "version_gate"]

INDEX_FILE = "index.json"
AUDIT_FILE = "audit.jsonl"


class RegistryError(ReleaseError):
    """A registry operation cannot be done; the message names the registry and what to do."""


class ModelVersion(BaseModel):
    """One registered model."""

    version: str
    path: str
    name: str
    registered_at: str
    adapter: bool = False
    base_model: str | None = None
    #: a copy of the model's card when it was registered; index and audit files written when
    #: it was kept as a plain dict load into it (every card the registry copied was read
    #: through :func:`~agentic_loop.distill.train.model_card.read_card`, so it validates)
    card: ModelCard | None = None
    notes: str | None = None
    #: the model's content digest (:mod:`~agentic_loop.distill.release.model_digest`);
    #: None for versions registered before digests were kept
    content_sha256: str | None = None


class RoundRef(BaseModel):
    """The improve round that asked for a promote: its number, work folder and summary line.

    A reference, not a copy: the round's whole report is ``round-NNN/report.json``
    under ``work_dir`` (and in the model card's evaluation). Audit lines written
    before this record carried the report's parts too; they still load.
    """

    round: int
    work_dir: str | None = None
    summary: str | None = None


class GateRecord(BaseModel):
    """The release gate's word on a version: its decision, why, when, and the numbers behind it.

    The one gate record of the release side: what a gate that just decided
    hands :meth:`~agentic_loop.distill.release.registry.Registry.promote`
    (the promote line's ``gate``), what :func:`last_gate` reads from a model
    card, and what a forced promote keeps as ``override``. ``single_shot`` and
    ``architecture`` are the gate's per-mode
    :class:`~agentic_loop.distill.eval.gate.GateDecision` (means, p-value, task
    count); a record read back from a card carries only the decision, its
    reasons and time. Keys it does not know are kept (``extra="allow"``), so an
    audit line written when the gate was a plain dict reads back whole.

    >>> record = GateRecord(decision="PROMOTE", reasons=["better"], improve=RoundRef(round=2))
    >>> GateRecord.model_validate_json(record.model_dump_json()) == record
    True
    >>> GateRecord.model_validate({"decision": "PROMOTE", "p_value": 0.01}).model_extra
    {'p_value': 0.01}
    """

    model_config = ConfigDict(extra="allow")

    decision: Decision
    reasons: list[str] = Field(default_factory=list)
    #: when the evaluation was recorded (the card entry's ``at``); None when it says not
    at: str | None = None
    #: the gate's decision on single-shot answers (None when not recorded)
    single_shot: GateDecision | None = None
    #: the gate's decision inside the evaluation architecture (None when not run)
    architecture: GateDecision | None = None
    #: the improve round whose candidate this is (the one-shot pipeline is round 1; None: by hand)
    improve: RoundRef | None = None

    def describe(self) -> str:
        """``MANUAL_REVIEW (evaluated 2026-01-02T00:00:00+00:00: within noise)``."""
        when = f"evaluated {self.at}" if self.at else "evaluated"
        why = "; ".join(self.reasons) or "no reason recorded"
        return f"{self.decision.value} ({when}: {why})"


def last_gate(*cards: ModelCard | Mapping[str, Any] | None) -> GateRecord | None:
    """The latest release-gate decision in the ``evals`` of ``cards`` (model cards, or dicts).

    Entries without a decision the gate can give are skipped; the latest
    ``at`` wins, and among equal times the one listed last. None: no card
    holds a gate decision (a version registered by hand).
    """
    found: list[tuple[str, int, GateRecord]] = []
    for card in cards:
        evals = card.evals if isinstance(card, ModelCard) else (card or {}).get("evals")
        for i, item in enumerate(evals if isinstance(evals, list) else []):
            if not isinstance(item, Mapping):
                continue
            decision = item.get("decision")
            if not isinstance(decision, str) or decision not in {d.value for d in Decision}:
                continue
            reasons = item.get("reasons")
            record = GateRecord(decision=Decision(decision),
                                reasons=[str(r) for r in reasons]
                                if isinstance(reasons, list) else [],
                                at=str(item["at"]) if item.get("at") else None)
            found.append((record.at or "", i, record))
    return max(found, key=lambda f: (f[0], f[1]))[2] if found else None


def version_gate(entry: ModelVersion, gate: GateRecord | None = None) -> GateRecord | None:
    """The last gate decision on ``entry``: ``gate`` when a gate just decided (stamped now
    when it has no time), else the latest in the card the registry copied at registration
    and in the card in the model folder now (an ``agentic-loop eval --record`` after
    registering)."""
    if gate is not None:
        return gate if gate.at else gate.model_copy(update={"at": utc_stamp()})
    folder_card: ModelCard | None = None
    if (Path(entry.path) / CARD_FILE).is_file():
        try:
            folder_card = read_card(entry.path)
        except (ModelCardError, OSError):
            folder_card = None  # unreadable now: the copy taken at registration decides
    return last_gate(entry.card, folder_card)


def gate_override(entry: ModelVersion, gate: GateRecord | None, *, force: bool,
                  root: Path) -> GateRecord | None:
    """The gate decision a promote of ``entry`` (in the registry at ``root``) overrides, or None.

    A last decision of ROLLBACK or MANUAL_REVIEW refuses the promote unless
    ``force``: the error names the version, the decision, its reasons and
    how to force it.
    """
    verdict = version_gate(entry, gate)
    if verdict is None or verdict.decision == Decision.PROMOTE:
        return None
    if not force:
        raise RegistryError(
            f"refusing to promote {entry.version} in {root}: its last gate decision was "
            f"{verdict.describe()}; review it, then promote it anyway with force=True "
            f"(`agentic-loop registry promote {entry.version} --force`), which records the "
            "override in the audit log")
    return verdict


class AuditEntry(BaseModel):
    """One line of ``audit.jsonl``."""

    at: str = Field(default_factory=utc_stamp)
    action: Literal["register", "promote", "rollback", "data_removed"]
    version: str
    previous: str | None = None
    reason: str | None = None
    user: str | None = None
    #: the gate that just decided, on a promote the loop made (None: by hand)
    gate: GateRecord | None = None
    #: the registered version itself (register lines), so the index can be rebuilt from the log
    model: ModelVersion | None = None
    #: a promote forced past the gate: the decision it overrode (who and when: ``user``, ``at``)
    override: GateRecord | None = None
    #: the line's place in the log (1, 2, ...); None on lines written before it was kept
    seq: int | None = None

    @field_validator("gate", mode="before")
    @classmethod
    def _old_gate(cls, value: Any) -> Any:
        """An old line's gate dict with no decision the gate gives reads as None, so the line
        (a promote the index replays) still loads; the file keeps what it said."""
        if isinstance(value, Mapping) and value.get("decision") not in {d.value for d in Decision}:
            return None
        return value


class RegistryIndex(BaseModel):
    """``index.json``: the versions, the current one, the rollback stack, the last line applied."""

    schema_version: int = 1
    versions: list[ModelVersion] = Field(default_factory=list)
    current: str | None = None
    previous: list[str] = Field(default_factory=list)
    #: ``seq`` of the last audit line this index reflects (None: an index from before seqs)
    seq: int | None = None
    #: the size of ``audit.jsonl`` when this index was written: equal means nothing is pending
    audit_size: int | None = None


def apply_entry(index: RegistryIndex, entry: AuditEntry,
                known: dict[str, ModelVersion] | None = None,
                root: Path | None = None) -> None:
    """Change ``index`` as ``entry`` says (in place); ``known`` fills in old register lines.

    Promote pushes the replaced version on the rollback stack, rollback pops
    it; data-removal notes change nothing but the sequence number.
    """
    if entry.action == "register":
        model = entry.model or (known or {}).get(entry.version)
        if model is None:
            where = root or Path(".")
            raise RegistryError(
                f"the registry index {where / INDEX_FILE} is missing and cannot be rebuilt: "
                f"{where / AUDIT_FILE} records register {entry.version} without its details "
                f"(an older agentic-loop wrote it) and {where / (INDEX_FILE + '.bak')} does not "
                "hold it; restore index.json from a backup (or `cp index.json.bak "
                "index.json`, then register the missing versions again)")
        if all(v.version != model.version for v in index.versions):
            index.versions.append(model)
    elif entry.action == "promote":
        if index.current is not None:
            index.previous.append(index.current)
        index.current = entry.version
    elif entry.action == "rollback":
        if index.previous:
            index.previous.pop()
        index.current = entry.version
    if entry.seq is not None:
        index.seq = entry.seq


def catch_up(index: RegistryIndex, entries: Iterable[AuditEntry]) -> RegistryIndex:
    """``index`` with the lines of ``entries`` it does not reflect yet applied (a copy)."""
    if index.seq is None:
        return index
    done = index.seq
    out = index.model_copy(deep=True)
    for entry in entries:
        if entry.seq is not None and entry.seq > done:
            apply_entry(out, entry)
    return out


def replay_audit(entries: list[AuditEntry], known: dict[str, ModelVersion],
                 root: Path) -> RegistryIndex:
    """The index that ``entries`` (oldest first) describe; ``known`` fills in old register lines.

    Promote and rollback replay exactly what they did to the index (the
    rollback stack included); data-removal notes change nothing.
    """
    index = RegistryIndex()
    for entry in entries:
        apply_entry(index, entry, known, root)
    if index.seq is None and entries:
        index.seq = len(entries)  # an old log: the next line continues its count
    return index


def backup_versions(backup: Path) -> dict[str, ModelVersion]:
    """The versions ``index.json.bak`` describes (none when it is missing or unreadable)."""
    try:
        return {v.version: v for v in RegistryIndex.model_validate_json(backup.read_bytes())
                .versions}
    except (OSError, ValidationError, ValueError):
        return {}
