"""``forget_user``, ``enforce_retention``, ``withdraw_consent``: erasure across every store.

Why one entry point: a user's data is copied as it flows (run → trajectory
→ archive entry or reflection → other runs' prompts → dataset rows →
weights). Forgetting it means following those links in order, each store
with its own safe rewrite:

1. trajectory logs, with their feedback and consent records (:mod:`.logs`);
2. archive entries and reflections made from those runs, or the user's own
   (:mod:`.memories`), then their copies in the prompts of other runs;
3. dataset rows built from any of them, in every export folder found under
   the given roots and every folder a registered model was trained on
   (:mod:`.exports`);
4. the registered models trained on those rows, marked in their registry's
   audit log (:mod:`.models`): erasing data does not unlearn it.

Everything is found first, read-only (a dry run stops there); then the
stores are erased downstream first (dataset rows, copies in other runs,
memory records, and the runs last), so if a step fails, the records that
lead to what is left are still there and running the erasure again finds
it. Runs a user logs while it works are followed too.

Deleted means compacted: files are rewritten without the records (no
tombstone keeps them), indexes are rebuilt, and quarantine files, backups
and orphan temporaries are scrubbed. One line goes to an audit log: who,
when, what kind of erasure, how many records of each kind, which models;
never an id, a text or the user's hash (only a digest of it that matches
nothing stored, so a person holding the id can check it was handled).

Example:
    >>> import tempfile, pathlib
    >>> from agentic_loop.trajectories import Trajectory, TrajectoryLog, hash_user_id
    >>> root = pathlib.Path(tempfile.mkdtemp())
    >>> log = TrajectoryLog(root / "trajectories")
    >>> log.append(Trajectory(architecture="a", model_id="m", task="Ann's secret plan",
    ...                       user_id_hash=hash_user_id("ann")))
    >>> report = forget_user("ann", trajectories=[root / "trajectories"], memory=[], exports=[],
    ...                      registries=[], audit_log=root / "audit.jsonl")
    >>> report.counts()["trajectories"], len(log)
    (1, 0)
    >>> b"secret" in (root / "audit.jsonl").read_bytes()
    False
"""

from __future__ import annotations

import getpass
import hashlib
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field

from agentic_loop.clock import utc_now, utc_stamp
from agentic_loop.distill.data.forget.exports import ExportErasure, erase_rows, export_dirs
from agentic_loop.distill.data.forget.files import parse_age
from agentic_loop.distill.data.forget.logs import (
    RunErasure,
    erase_runs,
    scrub_runs,
    trajectory_files,
)
from agentic_loop.distill.data.forget.memories import MemoryErasure, erase_memory
from agentic_loop.distill.data.forget.models import AffectedModel, card_data_dirs, mark_models
from agentic_loop.distill.data.forget.selection import Selection
from agentic_loop.errors import ConfigError
from agentic_loop.jsonl_log import JsonlLog
from agentic_loop.memory import TextEmbedder, read_collections
from agentic_loop.trajectories import TrajectoryLog, hash_user_id

__all__ = [
    "DEFAULT_AUDIT_LOG",
    "ErasureAudit",
    "ForgetReport",
    "enforce_retention",
    "forget_user",
    "withdraw_consent",
]

PathArg = str | os.PathLike[str]
Paths = Sequence[PathArg] | None
DEFAULT_TRAJECTORIES = ("data/trajectories",)
DEFAULT_MEMORY = ("data/archive", "data/reflections")
DEFAULT_EXPORTS = ("runs", "data")
DEFAULT_REGISTRIES = ("runs/registry",)
DEFAULT_AUDIT_LOG = "data/audit/erasures.jsonl"


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


@dataclass
class ForgetReport:
    """What an erasure removed (or, with ``dry_run``, would remove), store by store."""

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

    def counts(self) -> dict[str, int]:
        """Records removed per kind (``runs_scrubbed``: other runs rewritten to drop copies)."""
        return {**self.runs.counts(), **{k: v for k, v in self.memory.counts().items()
                                         if k != "leftover_lines"},
                "runs_scrubbed": self.runs_scrubbed,
                "export_rows": sum(e.rows_removed for e in self.exports),
                "export_rows_untraced": sum(e.rows_untraced for e in self.exports),
                "leftover_lines": self.runs.leftover_lines + self.memory.leftover_lines
                + sum(e.leftover_lines for e in self.exports),
                "models_marked": len(self.models)}

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready form (paths and counts; never an id or a text)."""
        return {"kind": self.kind, "dry_run": self.dry_run,
                "before": utc_stamp(self.before) if self.before else None,
                "counts": self.counts(), "exports": [e.to_dict() for e in self.exports],
                "models": [m.to_dict() for m in self.models],
                "audit_log": str(self.audit_path) if self.audit_path else None,
                "stores": self.stores}


def _paths(given: Paths, default: Sequence[str], what: str) -> list[Path]:
    """Given paths must exist; defaults that do not exist are skipped."""
    if given is None:
        return [Path(p) for p in default if Path(p).exists()]
    if isinstance(given, (str, os.PathLike)):
        given = [given]
    paths = [Path(p).expanduser() for p in given]
    missing = [str(p) for p in paths if not p.exists()]
    if missing:
        raise ConfigError(f"{what} path {', '.join(missing)} does not exist; pass existing "
                          f"folders, or leave {what} out to use the defaults")
    return paths


def _cutoff(older_than: timedelta | datetime | str | None) -> datetime | None:
    if older_than is None:
        return None
    if isinstance(older_than, str):
        older_than = parse_age(older_than)
    if isinstance(older_than, timedelta):
        if older_than <= timedelta(0):
            raise ConfigError(f"older_than={older_than}: pass a positive age such as 90d")
        return utc_now() - older_than
    if isinstance(older_than, datetime):
        return older_than if older_than.tzinfo else older_than.replace(tzinfo=UTC)
    raise ConfigError(f"older_than is a {type(older_than).__name__}; pass an age such as '90d', "
                      "a timedelta or a datetime")


def _actor(actor: str | None) -> str | None:
    if actor is not None:
        return actor
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return None


def subject_digest(user_hash: str) -> str:
    """The audit's stand-in for a user: a digest of their hash that matches nothing stored."""
    return hashlib.sha256(f"agentic-loop-erasure:{user_hash}".encode()).hexdigest()


def _entry_ids(erased: dict[str, tuple[str, ...]]) -> set[str]:
    """Erased memory record ids as dataset rows name them (bare, and ``archive:<id>``)."""
    return set(erased) | {f"archive:{rid}" for rid in erased}


def _archive_ids(roots: Sequence[Path]) -> set[str]:
    return {f"archive:{r.id}" for root in roots if root.is_dir()
            for snap in read_collections(root, kind="archive") for r in snap.records}


def _erase(selection: Selection, *, trajectories: Paths, memory: Paths, exports: Paths,
           registries: Paths, audit_log: PathArg | None, actor: str | None,
           embedder: TextEmbedder | None, dry_run: bool) -> ForgetReport:
    traj = _paths(trajectories, DEFAULT_TRAJECTORIES, "trajectories")
    mem_roots = _paths(memory, DEFAULT_MEMORY, "memory")
    export_roots = _paths(exports, DEFAULT_EXPORTS, "exports")
    regs = _paths(registries, DEFAULT_REGISTRIES, "registries")
    # 1. the plan, read-only: everything that can refuse (an embedder) refuses before any erasure
    runs = erase_runs(traj, selection, dry_run=True)
    mem = erase_memory(mem_roots, selection, run_ids=runs.ids, embedder=embedder, dry_run=True)
    known = runs.known | _archive_ids(mem_roots) | _entry_ids(mem.erased)
    folders = list(dict.fromkeys(export_dirs([*export_roots, *card_data_dirs(regs)])))
    whole_before = selection.before if selection.user_hash is None else None

    def rows(run_ids: set[str], erased: dict[str, tuple[str, ...]], *,
             dry: bool) -> list[ExportErasure]:
        return erase_rows(folders, run_ids | _entry_ids(erased), erased=erased,
                          reason=selection.kind, before=whole_before, known_ids=known,
                          dry_run=dry)

    erasures = rows(runs.ids, mem.erased, dry=True)
    models = mark_models(regs, erasures, earliest=runs.earliest,
                         reason=f"erasure ({selection.kind})", dry_run=dry_run)
    scrubbed = scrub_runs(runs.files, mem.erased, dry_run=True)
    if not dry_run:
        # 2. downstream first: if a step fails, the sources that lead to what is left remain,
        # so running the erasure again finds it
        erasures = rows(runs.ids, mem.erased, dry=False)
        scrubbed = scrub_runs(runs.files, mem.erased)
        planned = runs.ids
        mem = erase_memory(mem_roots, selection, run_ids=planned, embedder=embedder)
        runs = erase_runs(traj, selection)
        if runs.ids - planned:  # runs of the user logged since the plan: follow them too
            more = erase_memory(mem_roots, selection, run_ids=runs.ids, embedder=embedder)
            mem.merge(more)
            scrubbed += scrub_runs(runs.files, more.erased)
            erasures += rows(runs.ids - planned, more.erased, dry=False)
    stores = {"trajectories": [str(p) for p in runs.files],
              "memory": [str(p) for p in mem.collections],
              "exports": [str(p) for p in folders], "registries": [str(p) for p in regs]}
    report = ForgetReport(selection.kind, dry_run, selection.before, runs, mem, scrubbed,
                          erasures, models, stores=stores)
    if not dry_run and audit_log is not None:
        action: Literal["forget_user", "retention"] = (
            "forget_user" if selection.user_hash else "retention")
        _audit(Path(audit_log), ErasureAudit(
            action=action, actor=_actor(actor),
            subject=subject_digest(selection.user_hash) if selection.user_hash else None,
            before=utc_stamp(selection.before) if selection.before else None,
            counts=report.counts(), models=[m.to_dict() for m in models], stores=stores))
        report.audit_path = Path(audit_log)
    return report


def _audit(path: Path, entry: ErasureAudit) -> None:
    log: JsonlLog[ErasureAudit] = JsonlLog(path.expanduser(), ErasureAudit)
    log.append(entry)


def forget_user(user_id: str, *, older_than: timedelta | datetime | str | None = None,
                trajectories: Paths = None, memory: Paths = None, exports: Paths = None,
                registries: Paths = None, audit_log: PathArg | None = DEFAULT_AUDIT_LOG,
                salt: str | None = None, actor: str | None = None,
                embedder: TextEmbedder | None = None, dry_run: bool = False) -> ForgetReport:
    """Erase everything of one user from every store (see the module docstring).

    Args:
        user_id: the id the runs were made with (hashed as trajectories hash it, ``salt``
            or ``$AGENTIC_LOOP_USER_SALT``).
        older_than: only that user's data older than this (``"90d"``, a timedelta, a datetime).
        trajectories: TrajectoryLog folders or ``.jsonl`` files (default ``data/trajectories``).
        memory: archive and Reflexion memory roots (default ``data/archive``,
            ``data/reflections``).
        exports: folders searched for exports (default ``runs``, ``data``); the dataset
            folders registered models name are searched too.
        registries: model registries whose trained-on-it versions are marked
            (default ``runs/registry``).
        audit_log: the JSONL audit log (``None``: none written).
        actor: who asked (default: the OS user).
        embedder: the embedder of a memory collection built with a custom one.
        dry_run: count only; change nothing.
    """
    if not isinstance(user_id, str) or not user_id.strip():
        raise ConfigError(f"user_id={user_id!r}: pass the id the user's runs were made with")
    selection = Selection(user_hash=hash_user_id(user_id, salt), before=_cutoff(older_than))
    return _erase(selection, trajectories=trajectories, memory=memory, exports=exports,
                  registries=registries, audit_log=audit_log, actor=actor, embedder=embedder,
                  dry_run=dry_run)


def enforce_retention(older_than: timedelta | datetime | str, *, trajectories: Paths = None,
                      memory: Paths = None, exports: Paths = None, registries: Paths = None,
                      audit_log: PathArg | None = DEFAULT_AUDIT_LOG, actor: str | None = None,
                      embedder: TextEmbedder | None = None,
                      dry_run: bool = False) -> ForgetReport:
    """Erase everything older than ``older_than`` (``"90d"``, a timedelta, or a datetime
    cutoff) from every store, exactly as :func:`forget_user` erases a user's data."""
    before = _cutoff(older_than)
    if before is None:
        raise ConfigError("older_than=None: pass the retention age, e.g. '90d'")
    return _erase(Selection(before=before), trajectories=trajectories, memory=memory,
                  exports=exports, registries=registries, audit_log=audit_log, actor=actor,
                  embedder=embedder, dry_run=dry_run)


def withdraw_consent(user_id: str, *, trajectories: Paths = None, salt: str | None = None,
                     audit_log: PathArg | None = DEFAULT_AUDIT_LOG,
                     actor: str | None = None) -> int:
    """Record that a user withdrew consent beside every trajectory log; return how many logs.

    Their runs stay (the service may still need them) but every later export
    leaves them out (the logs apply the latest consent to all of a user's
    runs; the export drops refused runs whatever its consent option).
    """
    if not isinstance(user_id, str) or not user_id.strip():
        raise ConfigError(f"user_id={user_id!r}: pass the id the user's runs were made with")
    files = trajectory_files(_paths(trajectories, DEFAULT_TRAJECTORIES, "trajectories"))
    for folder in dict.fromkeys(f.parent for f in files):  # one consent log per folder
        TrajectoryLog(folder).record_consent(user_id, False, salt=salt)
    if audit_log is not None and files:
        _audit(Path(audit_log), ErasureAudit(
            action="withdraw_consent", actor=_actor(actor),
            subject=subject_digest(hash_user_id(user_id, salt)), counts={"logs": len(files)},
            stores={"trajectories": [str(f) for f in files]}))
    return len(files)
