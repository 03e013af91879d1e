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
   audit log (:mod:`.models`): erasing data does not unlearn it;
5. every place a writer recorded as holding user text (:mod:`agentic_loop.text_places`:
   exports written anywhere, shadow router logs, Postgres memory stores),
   read from the data folder and from beside every log, memory root and
   registry given (:mod:`.recorded`, :mod:`.stores`), and the stores passed
   as ``stores=``. A known place that cannot be reached is a warning in the
   report (:attr:`ForgetReport.warnings`), in the audit line and on the CLI.

Everything is found first, read-only (a dry run stops there); then the
stores are erased downstream first (dataset rows, copies in other runs,
memory records, and the runs last), so if a step fails, the records that
lead to what is left are still there and running the erasure again finds
it. Runs a user logs while it works are followed too.

The defaults are the data folder's layout (``$AGENTIC_LOOP_DATA`` and
``data``, where code that names no folder writes; ``data=`` names the one
folder instead): ``trajectories``, ``archive`` and ``reflections`` in it,
the trajectory logs and memory roots its ``places.jsonl`` records elsewhere,
exports anywhere under it or under ``runs``, the registry
``runs/registry``, the audit log ``audit/erasures.jsonl`` in the first.

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
    >>> report = forget_user("ann", data=root, memory=[], exports=[], registries=[])
    >>> report.counts()["trajectories"], len(log)
    (1, 0)
    >>> b"secret" in (root / "audit" / "erasures.jsonl").read_bytes(), report.warnings
    (False, [])
"""

from __future__ import annotations

import getpass
import hashlib
import os
import warnings
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Literal

from langgraph.store.base import BaseStore

from agentic_loop.clock import utc_now, utc_stamp
from agentic_loop.distill.forget.exports import ExportErasure, erase_rows, export_dirs
from agentic_loop.distill.forget.files import parse_age
from agentic_loop.distill.forget.logs import RunErasure, erase_runs, scrub_runs, trajectory_files
from agentic_loop.distill.forget.memories import erase_memory, scrub_entries
from agentic_loop.distill.forget.models import card_data_dirs, mark_models
from agentic_loop.distill.forget.recorded import PlaceResult, erase_logs, recorded_places
from agentic_loop.distill.forget.report import ErasureAudit, ForgetReport
from agentic_loop.distill.forget.selection import Selection
from agentic_loop.distill.forget.stores import erase_stores, open_stores, scrub_store_entries
from agentic_loop.distill.forget.trajectory_db import (
    erase_databases,
    split_databases,
    unique_databases,
    withdraw_in,
)
from agentic_loop.errors import ConfigError, StorageError
from agentic_loop.jsonl_log import JsonlLog
from agentic_loop.memory import TextEmbedder, read_collections
from agentic_loop.text_places import PlaceWarning, data_root
from agentic_loop.trajectories import TrajectoryLog, hash_user_id
from agentic_loop.trajectory_stores import safe_dsn

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
Stores = Sequence[BaseStore | str] | None
#: The audit log's default, in the data folder (``data=``, ``$AGENTIC_LOOP_DATA``, ``data``).
DEFAULT_AUDIT_LOG = "data/audit/erasures.jsonl"
DEFAULT_REGISTRIES = ("runs/registry",)


def _paths(given: Paths, default: Sequence[Path], what: str) -> list[Path]:
    """Given paths must exist; defaults that do not exist are skipped."""
    if given is None:
        return [p for p in default if p.exists()]
    if isinstance(given, (str, os.PathLike)):
        given = [given]
    paths = [Path(p).expanduser() for p in given]
    missing = [str(p) for p in paths if not p.exists()]
    if missing:
        raise ConfigError(f"{what} path {', '.join(missing)} does not exist; pass existing "
                          f"folders, or leave {what} out to use the defaults")
    return paths


def _data(data: PathArg | None) -> list[Path]:
    """The data folders: the one given (it must exist), else ``$AGENTIC_LOOP_DATA`` and
    ``data`` (where code that names no folder writes, whatever the variable says)."""
    if data is None:
        return list(dict.fromkeys(p.absolute() for p in (data_root(), Path("data"))))
    folder = Path(data).expanduser()
    if not folder.is_dir():
        raise ConfigError(f"data folder {folder} does not exist; pass the folder that holds "
                          "trajectories/, archive/ and places.jsonl, or leave data out for "
                          "$AGENTIC_LOOP_DATA or data")
    return [folder]


def _audit_path(audit_log: PathArg | None, data: Path) -> Path | None:
    if audit_log is None:
        return None
    if os.fspath(audit_log) == DEFAULT_AUDIT_LOG:
        return data / "audit" / "erasures.jsonl"
    return Path(audit_log).expanduser()


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


def _erase(selection: Selection, *, data: PathArg | None, trajectories: Paths, memory: Paths,
           exports: Paths, registries: Paths, stores: Stores, audit_log: PathArg | None,
           actor: str | None, embedder: TextEmbedder | None, dry_run: bool) -> ForgetReport:
    roots = _data(data)
    trajectories, databases = split_databases(trajectories)  # postgresql:// URLs apart
    known_places = recorded_places(roots)  # logs and memories written outside these folders
    traj = _paths(trajectories, [*(r / "trajectories" for r in roots),
                                 *known_places.trajectories], "trajectories")
    mem_roots = _paths(memory, [*(r / n for r in roots for n in ("archive", "reflections")),
                                *known_places.memories], "memory")
    export_roots = _paths(exports, [Path("runs"), *roots], "exports")
    regs = _paths(registries, [Path(p) for p in DEFAULT_REGISTRIES], "registries")
    files = trajectory_files(traj)
    recorded = recorded_places([*roots, *dict.fromkeys(f.parent for f in files), *mem_roots,
                                *regs], skip=files)
    problems: list[PlaceResult] = list(recorded.missing)
    databases = unique_databases([*databases, *(p.path for p in recorded.databases)])
    unreached: list[PlaceResult] = []  # trajectory databases out of reach

    def find_runs(*, dry: bool) -> RunErasure:
        found = erase_runs(traj, selection, dry_run=dry)
        unreached[:] = erase_databases(databases, selection, found, dry_run=dry)
        return found

    with open_stores([*(stores or []), *(p.path for p in recorded.stores)],
                     problems) as opened:
        # 1. the plan, read-only: everything that can refuse (an embedder) refuses before any
        # erasure
        runs = find_runs(dry=True)
        mem = erase_memory(mem_roots, selection, run_ids=runs.ids, embedder=embedder,
                           dry_run=True)
        held = erase_stores(opened, selection, run_ids=runs.ids, dry_run=True)
        mem.erased.update(held.erased)
        known = runs.known | _archive_ids(mem_roots) | _entry_ids(mem.erased)
        folders = list(dict.fromkeys(export_dirs([*export_roots, *card_data_dirs(regs),
                                                  *recorded.exports])))
        whole_before = selection.before if selection.user_hash is None else None

        def rows(run_ids: set[str], erased: dict[str, tuple[str, ...]], *,
                 dry: bool) -> list[ExportErasure]:
            return erase_rows(folders, run_ids | _entry_ids(erased), erased=erased,
                              reason=selection.kind, before=whole_before, known_ids=known,
                              dry_run=dry)

        def logs(*, dry: bool) -> list[PlaceResult]:
            return erase_logs(recorded.logs, selection, ids=runs.ids | _entry_ids(mem.erased),
                              texts={**runs.texts, **mem.erased}, dry_run=dry)

        erasures = rows(runs.ids, mem.erased, dry=True)
        models = mark_models(regs, erasures, earliest=runs.earliest,
                             reason=f"erasure ({selection.kind})", dry_run=dry_run)
        shown: set[str] = set()  # runs shown an erased record: their entries' episodes next
        scrubbed = scrub_runs(runs.files, mem.erased, dry_run=True, shown=shown)
        entries = scrub_entries(mem_roots, mem.erased, runs=shown - runs.ids, embedder=embedder,
                                dry_run=True)
        items = scrub_store_entries(opened, mem.erased, runs=shown - runs.ids, dry_run=True)
        places = logs(dry=True)
        if not dry_run:
            # 2. downstream first: if a step fails, the sources that lead to what is left
            # remain, so running the erasure again finds it
            erasures = rows(runs.ids, mem.erased, dry=False)
            places = logs(dry=False)
            scrubbed = scrub_runs(runs.files, mem.erased, shown=shown)
            planned = runs.ids
            held = erase_stores(opened, selection, run_ids=planned)
            mem = erase_memory(mem_roots, selection, run_ids=planned, embedder=embedder)
            mem.erased.update(held.erased)
            entries = scrub_entries(mem_roots, mem.erased, runs=shown - planned,
                                    embedder=embedder)
            items = scrub_store_entries(opened, mem.erased, runs=shown - planned)
            runs = find_runs(dry=False)
            if runs.ids - planned:  # runs of the user logged since the plan: follow them too
                more = erase_memory(mem_roots, selection, run_ids=runs.ids, embedder=embedder)
                more_held = erase_stores(opened, selection, run_ids=runs.ids)
                more.erased.update(more_held.erased)
                held.merge(more_held)
                mem.merge(more)
                scrubbed += scrub_runs(runs.files, more.erased, shown=shown)
                entries.merge(scrub_entries(mem_roots, more.erased, runs=shown - runs.ids,
                                            embedder=embedder))
                items.merge(scrub_store_entries(opened, more.erased, runs=shown - runs.ids))
                erasures += rows(runs.ids - planned, more.erased, dry=False)
                places = _merge(places, logs(dry=False))
        store_labels = [s.label for s in opened]
    mem.merge(entries)
    held.merge(items)
    stores_used = {"trajectories": [*(str(p) for p in runs.files),
                                    *(safe_dsn(u) for u in databases)],
                   "memory": [str(p) for p in mem.collections],
                   "exports": [str(p) for p in folders], "registries": [str(p) for p in regs],
                   "logs": [p.path for p in recorded.logs], "stores": store_labels}
    reached = [*places, *problems, *unreached]
    report = ForgetReport.of(selection.kind, dry_run, selection.before, runs, mem, scrubbed,
                             erasures, models, stores=stores_used, places=reached,
                             store_erasure=held)
    audit = _audit_path(audit_log, roots[0])
    if not dry_run and audit is not None:
        action: Literal["forget_user", "retention"] = (
            "forget_user" if selection.user_hash else "retention")
        _audit(audit, ErasureAudit(
            action=action, actor=_actor(actor),
            subject=subject_digest(selection.user_hash) if selection.user_hash else None,
            before=utc_stamp(selection.before) if selection.before else None,
            counts=report.counts(), models=list(models), stores=stores_used,
            unreached=[p.path for p in reached if p.problem]))
        report.audit_path = audit
    return report


def _merge(first: list[PlaceResult], again: list[PlaceResult]) -> list[PlaceResult]:
    """The results of two passes over the same logs, added up."""
    for a, b in zip(first, again):
        a.removed += b.removed
        a.scrubbed += b.scrubbed
        a.problem = a.problem or b.problem
    return first


def _audit(path: Path, entry: ErasureAudit) -> None:
    log: JsonlLog[ErasureAudit] = JsonlLog(path.expanduser(), ErasureAudit)
    log.append(entry)


def forget_user(user_id: str, *, older_than: timedelta | datetime | str | None = None,
                data: PathArg | None = None, trajectories: Paths = None, memory: Paths = None,
                exports: Paths = None, registries: Paths = None, stores: Stores = None,
                audit_log: PathArg | None = DEFAULT_AUDIT_LOG, salt: str | None = None,
                actor: str | None = None, embedder: TextEmbedder | None = None,
                dry_run: bool = False) -> ForgetReport:
    """Erase everything of one user from every store (see the module docstring).

    Args:
        user_id: the id the runs were made with (hashed as trajectories hash it, ``salt``
            or ``$AGENTIC_LOOP_USER_SALT``).
        older_than: only that user's data older than this (``"90d"``, a timedelta, a datetime).
        data: the data folder (default ``$AGENTIC_LOOP_DATA`` and ``data``): the defaults
            below are in it, and its ``places.jsonl`` names the places writers recorded.
        trajectories: TrajectoryLog folders or ``.jsonl`` files (default ``<data>/trajectories``),
            or ``postgresql://`` URLs of Postgres trajectory logs (their rows go in one
            transaction per database).
        memory: archive and Reflexion memory roots (default ``<data>/archive``,
            ``<data>/reflections``).
        exports: folders searched for exports (default ``runs``, ``<data>``); the dataset
            folders registered models name, and recorded exports, are searched too.
        registries: model registries whose trained-on-it versions are marked
            (default ``runs/registry``).
        stores: LangGraph stores holding memory (objects, or Postgres connection strings),
            besides the ones recorded.
        audit_log: the JSONL audit log (default ``<data>/audit/erasures.jsonl``; ``None``:
            none written).
        actor: who asked (default: the OS user).
        embedder: the embedder of a memory collection built with a custom one.
        dry_run: count only; change nothing.
    """
    if not isinstance(user_id, str) or not user_id.strip():
        raise ConfigError(f"user_id={user_id!r}: pass the id the user's runs were made with")
    selection = Selection(user_hash=hash_user_id(user_id, salt), before=_cutoff(older_than))
    return _erase(selection, data=data, trajectories=trajectories, memory=memory,
                  exports=exports, registries=registries, stores=stores, audit_log=audit_log,
                  actor=actor, embedder=embedder, dry_run=dry_run)


def enforce_retention(older_than: timedelta | datetime | str, *, data: PathArg | None = None,
                      trajectories: Paths = None, memory: Paths = None, exports: Paths = None,
                      registries: Paths = None, stores: Stores = None,
                      audit_log: PathArg | None = DEFAULT_AUDIT_LOG, actor: str | None = None,
                      embedder: TextEmbedder | None = None,
                      dry_run: bool = False) -> ForgetReport:
    """Erase everything older than ``older_than`` (``"90d"``, a timedelta, or a datetime
    cutoff) from every store, exactly as :func:`forget_user` erases a user's data."""
    before = _cutoff(older_than)
    if before is None:
        raise ConfigError("older_than=None: pass the retention age, e.g. '90d'")
    return _erase(Selection(before=before), data=data, trajectories=trajectories, memory=memory,
                  exports=exports, registries=registries, stores=stores, audit_log=audit_log,
                  actor=actor, embedder=embedder, dry_run=dry_run)


def withdraw_consent(user_id: str, *, data: PathArg | None = None, trajectories: Paths = None,
                     salt: str | None = None, audit_log: PathArg | None = DEFAULT_AUDIT_LOG,
                     actor: str | None = None) -> int:
    """Record that a user withdrew consent beside every trajectory log; return how many logs.

    The logs are those :func:`forget_user` erases: the given ones (files and
    ``postgresql://`` URLs), else the data folder's, plus every trajectory
    log and database recorded in the ``places.jsonl`` of the data folder and
    beside those logs. Their runs stay (the service may still need them) but
    every later export leaves them out (the logs apply the latest consent to
    all of a user's runs; the export drops refused runs whatever its consent
    option). A database given here and out of reach is a StorageError naming
    it and how to reach it, raised after the others recorded the withdrawal
    (and the audit line names it): run it again once it can be reached. A
    *recorded* database out of reach (a place that may be gone for good) is a
    :class:`~agentic_loop.text_places.PlaceWarning` and an audit entry, as in
    :func:`forget_user`.
    """
    if not isinstance(user_id, str) or not user_id.strip():
        raise ConfigError(f"user_id={user_id!r}: pass the id the user's runs were made with")
    roots = _data(data)
    trajectories, databases = split_databases(trajectories)
    known = recorded_places(roots)
    files = trajectory_files(_paths(trajectories, [*(r / "trajectories" for r in roots),
                                                   *known.trajectories], "trajectories"))
    recorded = recorded_places([*roots, *dict.fromkeys(f.parent for f in files)], skip=files)
    for folder in dict.fromkeys(f.parent for f in files):  # one consent log per folder
        TrajectoryLog(folder).record_consent(user_id, False, salt=salt)
    reached, unreached = withdraw_in([*databases, *(p.path for p in recorded.databases)],
                                     user_id, salt=salt)
    audit = _audit_path(audit_log, roots[0])
    if audit is not None and (files or reached or unreached):
        _audit(audit, ErasureAudit(
            action="withdraw_consent", actor=_actor(actor),
            subject=subject_digest(hash_user_id(user_id, salt)),
            counts={"logs": len(files) + len(reached)},
            stores={"trajectories": [*(str(f) for f in files), *reached]},
            unreached=[p.path for p in unreached]))
    given = {safe_dsn(url) for url in databases}
    for place in (p for p in unreached if p.path not in given):
        warnings.warn(f"consent withdrawal not recorded in {place.warning()}", PlaceWarning,
                      stacklevel=2)
    if missed := [p for p in unreached if p.path in given]:
        raise StorageError(f"consent withdrawal recorded in {len(files) + len(reached)} "
                           "log(s) but not in: " + "; ".join(p.warning() for p in missed))
    return len(files) + len(reached)
