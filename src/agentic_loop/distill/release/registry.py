"""The model registry: numbered versions, a ``current`` pointer, promote, rollback, history.

Serving follows ``current``; training only ever *adds* versions. Promoting
moves the pointer and remembers the version it replaced, so ``rollback``
goes back to exactly the model that served before, however many promotions
ago (a stack, not "version minus one").

On disk, under ``root``:

``audit.jsonl``
    the source of truth: one durable line (:class:`~agentic_loop.jsonl_log.JsonlLog`)
    per register, promote, rollback and data removal: when, who, from what, to
    what, why, the gate's numbers when a gate decided, a sequence number, and
    (register lines) the whole version.
``index.json``
    every version (its path, name, kind, content digest, a copy of its model
    card), the ``current`` pointer, the stack of earlier current versions and
    the sequence number of the last audit line it reflects. Replaced
    atomically (:func:`~agentic_loop.atomic.atomic_write`) under a file lock;
    the index before each update is kept as ``index.json.bak``.
``models/vN/``
    a copy of the model, only when registered with ``copy=True``.

Every change is **write-ahead**: its audit line is on disk (fsync'd) before
the index moves. A process killed between the two leaves an index one line
behind the log; every read applies the lines the index lacks
(:mod:`~agentic_loop.distill.release.registry_audit`, the same function that
made the change) and the next change writes the result back. So at any kill
point the audit log explains the registry, and a deleted ``index.json`` is
rebuilt from it with the same current version and rollback stack (in memory
on a read, on disk at the next change), never read as an empty registry
that would hand out ``v1`` again.

A version the release gate did not pass (its card's last evaluation says
ROLLBACK or MANUAL_REVIEW) is not promoted unless ``force=True``, and the
forced promote's audit line keeps the decision it overrode.

A model registered twice (the same weights and config, by content digest,
:mod:`~agentic_loop.distill.release.model_digest`) is refused with the
version that holds it, unless ``force=True``. A corrupt index is reported
with its path and how to recover; nothing is written over it. An audit log
too old to carry versions' details is rebuilt with ``index.json.bak``'s, or
refused with a message naming both.

Example:
    >>> import tempfile, pathlib
    >>> tmp = pathlib.Path(tempfile.mkdtemp())
    >>> for n in ("a", "b"):
    ...     (tmp / n).mkdir(); _ = (tmp / n / "config.json").write_text(f'{{"name": "{n}"}}')
    >>> reg = Registry(tmp / "registry")
    >>> v1, v2 = reg.register(tmp / "a"), reg.register(tmp / "b")
    >>> reg.promote("v1").version, reg.promote("v2").version, reg.current.version
    ('v1', 'v2', 'v2')
    >>> reg.rollback(reason="regression").version
    'v1'
    >>> [f"{e.action} {e.version}" for e in reg.history()]
    ['register v1', 'register v2', 'promote v1', 'promote v2', 'rollback v1']
    >>> reg.register(tmp / "a")                       # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    agentic_loop...RegistryError: the model in ... is already registered in ... as v1 ...
    >>> reg.index_path.unlink()                       # index.json lost: rebuilt from the audit
    >>> import warnings; warnings.simplefilter("ignore", IndexRebuiltWarning)
    >>> [v.version for v in reg.versions()], reg.current.version, reg.previous
    (['v1', 'v2'], 'v1', [])
    >>> reg.register(tmp / "a", force=True).version  # asked for: a new version of the same model
    'v3'
"""

from __future__ import annotations

import getpass
import json
import os
import shutil
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from filelock import FileLock, Timeout
from pydantic import ValidationError

from agentic_loop.atomic import atomic_write_bytes
from agentic_loop.clock import utc_stamp
from agentic_loop.distill.release.model_digest import (
    DigestCache,
    model_digest,
    model_shape,
)
from agentic_loop.distill.release.registry_audit import (
    AUDIT_FILE,
    INDEX_FILE,
    AuditEntry,
    GateRecord,
    ModelVersion,
    RegistryError,
    RegistryIndex,
    apply_entry,
    backup_versions,
    catch_up,
    gate_override,
    replay_audit,
)
from agentic_loop.distill.train.model_card import CARD_FILE, ModelCardError, read_card
from agentic_loop.jsonl_log import JsonlLog
from agentic_loop.models.model_dirs import adapter_base, is_adapter_dir
from agentic_loop.paths import make_dir

__all__ = ["AuditEntry", "IndexRebuiltWarning", "ModelVersion", "Registry", "RegistryError",
           "replay_audit"]

DIGEST_CACHE = ".digests.json"
_COPY_IGNORE = shutil.ignore_patterns("checkpoints", "stages", "run.json", ".*")


class IndexRebuiltWarning(UserWarning):
    """``index.json`` was missing and the registry was rebuilt from ``audit.jsonl``."""


def _user() -> str | None:
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return None


class Registry:
    """A model registry in the folder ``root`` (created on first write)."""

    def __init__(self, root: str | os.PathLike[str], *, lock_timeout: float = 60.0) -> None:
        self.root = Path(root).expanduser()
        if os.path.exists(self.root) and not os.path.isdir(self.root):  # these never raise
            raise RegistryError(f"registry path {self.root} is a file; pass a folder")
        self._lock = FileLock(str(self.root / ".lock"), timeout=lock_timeout)
        self._lock_timeout = lock_timeout
        self._audit: JsonlLog[AuditEntry] = JsonlLog(self.root / AUDIT_FILE, AuditEntry)

    def __repr__(self) -> str:
        return f"Registry({str(self.root)!r})"

    @property
    def index_path(self) -> Path:
        """The ``index.json`` file."""
        return self.root / INDEX_FILE

    # -- reading ------------------------------------------------------------

    def _read(self) -> RegistryIndex:
        """The index as the audit log explains it: ``index.json`` plus any line it lacks."""
        if not self.index_path.is_file():
            return self._rebuild()
        try:
            index = RegistryIndex.model_validate_json(self.index_path.read_bytes())
        except (ValidationError, ValueError) as exc:
            backup = self.index_path.with_name(INDEX_FILE + ".bak")
            hint = (f"restore the previous index with `cp {backup} {self.index_path}`"
                    if backup.is_file() else "restore it from a backup")
            raise RegistryError(
                f"the registry index {self.index_path} is corrupt ({str(exc).splitlines()[0]}); "
                f"nothing was changed; {hint}, or move it aside to rebuild it from "
                f"{self.root / AUDIT_FILE}, which records every register, promote and "
                "rollback") from None
        if index.seq is None or self._audit_size() == index.audit_size:
            return index  # nothing written after it (one stat), or an index from before seqs
        return catch_up(index, self.history())

    def versions(self) -> list[ModelVersion]:
        """Every registered version, oldest first."""
        return list(self._read().versions)

    @property
    def current(self) -> ModelVersion | None:
        """The version being served, or ``None`` before the first promote."""
        index = self._read()
        return self._find(index, index.current) if index.current else None

    @property
    def previous(self) -> list[str]:
        """The rollback stack: earlier current versions, the one ``rollback`` restores last."""
        return list(self._read().previous)

    def get(self, version: str | int) -> ModelVersion:
        """A version by id (``"v3"``, ``"3"``, ``3``) or ``"current"``."""
        index = self._read()
        if str(version) == "current":
            if index.current is None:
                raise RegistryError(f"registry {self.root} has no current version yet; "
                                    "promote one first (`agentic-loop registry promote "
                                    "VERSION`)")
            return self._find(index, index.current)
        return self._find(index, self._normalize(version))

    def history(self) -> list[AuditEntry]:
        """Every register, promote and rollback, oldest first."""
        if not self._audit.path.is_file():
            return []
        return self._audit.read_all()

    def registered(self, model_dir: str | os.PathLike[str]) -> ModelVersion | None:
        """The version that already holds the model in ``model_dir`` (same content), or None.

        Versions registered before digests were kept match by folder, or by
        content when their files have the same names and sizes.
        """
        source = Path(model_dir).expanduser().resolve()
        if not source.is_dir():
            return None
        cache = DigestCache(self.root / DIGEST_CACHE)
        try:
            return self._same_model(self._read(), source, model_digest(source, cache), cache)
        finally:
            cache.save()

    # -- writing ------------------------------------------------------------

    def register(self, model_dir: str | os.PathLike[str], *, name: str | None = None,
                 notes: str | None = None, copy: bool = False,
                 force: bool = False) -> ModelVersion:
        """Add a model directory as the next version (not served until promoted).

        The directory must hold a Hugging Face model (``config.json``) or a
        LoRA adapter (``adapter_config.json``). Its ``model_card.yaml``, when
        there is one, is copied into the index. ``copy=True`` also copies the
        weights under ``root/models/`` so the version survives the training
        folder being deleted. A model already registered (the same weights and
        config, by content digest) is refused, naming its version, unless
        ``force=True``.
        """
        source = Path(model_dir).expanduser().resolve()
        adapter = is_adapter_dir(source)
        if not source.is_dir() or not ((source / "config.json").is_file() or adapter):
            raise RegistryError(f"{source} is not a model directory (no config.json or "
                                "adapter_config.json); pass the folder `agentic-loop distill` "
                                "wrote")
        card = None
        if (source / CARD_FILE).is_file():
            try:
                card = read_card(source)
            except ModelCardError as exc:
                raise RegistryError(f"cannot register {source}: {exc}") from None
        base = adapter_base(source) if adapter else None
        cache = DigestCache(self.root / DIGEST_CACHE)
        digest = model_digest(source, cache)  # outside the lock: it reads every weight
        with self._locked(create=True):
            index = self._read()
            same = None if force else self._same_model(index, source, digest, cache)
            if same is not None:
                raise RegistryError(
                    f"the model in {source} is already registered in {self.root} as "
                    f"{same.version} ({same.path}; same weights and config, sha256 "
                    f"{digest[:12]}); promote {same.version} to serve it (`agentic-loop "
                    f"registry promote {same.version}`, with --force if its last gate did not "
                    "say PROMOTE), or pass force=True (`agentic-loop registry register "
                    "--force`) to add it again as a new version")
            version = f"v{self._next_number(index)}"
            path = self._copy_in(source, version) if copy else source
            entry = ModelVersion(version=version, path=str(path), name=name or source.name,
                                 registered_at=utc_stamp(), adapter=adapter, base_model=base,
                                 card=card, notes=notes, content_sha256=digest)
            self._commit(index, AuditEntry(action="register", version=version, reason=notes,
                                           user=_user(), model=entry))
        cache.save()
        return entry

    def promote(self, version: str | int, *, reason: str | None = None,
                gate: GateRecord | None = None, force: bool = False) -> ModelVersion:
        """Make ``version`` current; the version it replaces becomes the rollback target.

        A version whose last release-gate decision
        (:func:`~.registry_audit.version_gate`) was ROLLBACK or MANUAL_REVIEW
        is refused unless ``force``; a forced promote keeps the decision it
        overrode in its audit line (``override``; who and when: ``user``,
        ``at``). ``gate`` is the record of a gate that just decided
        (:class:`~.registry_audit.GateRecord`: its ``decision`` is the last one
        then, and the audit line keeps it). A version with no gate record
        (registered by hand) promotes as before. Promoting the version that is
        already current changes nothing (and logs nothing).
        """
        with self._locked():
            index = self._read()
            entry = self._find(index, self._normalize(version))
            if index.current == entry.version:
                return entry
            override = gate_override(entry, gate, force=force, root=self.root)
            reason = reason or (f"forced past the gate's {override.decision}" if override else None)
            self._check_present(entry)
            self._commit(index, AuditEntry(action="promote", version=entry.version,
                                           previous=index.current, reason=reason, user=_user(),
                                           gate=gate, override=override))
        return entry

    def rollback(self, *, reason: str | None = None) -> ModelVersion:
        """Make the version that was current before the last promote current again."""
        with self._locked():
            index = self._read()
            if index.current is None:
                raise RegistryError(f"registry {self.root} has no current version; nothing to "
                                    "roll back; promote a version first")
            if not index.previous:
                raise RegistryError(
                    f"nothing to roll back to: {index.current} is the first version promoted in "
                    f"{self.root}; promote another version instead")
            target = self._find(index, index.previous[-1])
            self._check_present(target)
            self._commit(index, AuditEntry(action="rollback", version=target.version,
                                           previous=index.current, reason=reason, user=_user()))
        return target

    def record_data_removal(self, version: str | int, *, reason: str) -> AuditEntry:
        """Log that data ``version`` was trained on has been erased (a user forgotten, retention).

        The weights still hold what they learned from it, so the version is
        marked in the audit log for a person to decide (retrain, retire); the
        versions and the current pointer are not changed.
        """
        with self._locked():
            index = self._read()
            entry = self._find(index, self._normalize(version))
            audit = AuditEntry(action="data_removed", version=entry.version, reason=reason,
                               user=_user())
            self._commit(index, audit)
        return audit

    # -- helpers ------------------------------------------------------------

    def _commit(self, index: RegistryIndex, entry: AuditEntry) -> None:
        """Write-ahead: the audit line is on disk before the index that applies it moves.

        A kill between the two leaves an index one line behind the log, which
        every read applies (:func:`~.registry_audit.catch_up`) and the next
        change writes back; a kill inside the append leaves a torn last line,
        which readers skip and the next append removes: the change never happened.
        """
        entry.seq = (index.seq if index.seq is not None else len(self.history())) + 1
        self._audit.append(entry)
        apply_entry(index, entry)
        index.audit_size = self._audit_size()
        self._write(index)

    def _audit_size(self) -> int | None:
        try:
            return self._audit.path.stat().st_size
        except OSError:
            return None

    def _copy_in(self, source: Path, version: str) -> Path:
        """Copy ``source`` to ``models/<version>`` (a copy a killed register left is replaced)."""
        path = self.root / "models" / version
        staging = path.with_name(f".{version}.tmp")
        shutil.rmtree(staging, ignore_errors=True)
        shutil.copytree(source, staging, ignore=_COPY_IGNORE)
        if path.exists():  # no index line names it: a register killed before its audit line
            shutil.rmtree(path)
        os.replace(staging, path)
        return path

    def _same_model(self, index: RegistryIndex, source: Path, digest: str,
                    cache: DigestCache) -> ModelVersion | None:
        shape: tuple[tuple[str, int], ...] | None = None
        for entry in index.versions:
            if entry.content_sha256 is not None:
                if entry.content_sha256 == digest:
                    return entry
                continue
            folder = Path(entry.path)  # registered before digests: compare what is there
            if folder == source:
                return entry
            if not folder.is_dir():
                continue
            shape = model_shape(source) if shape is None else shape
            try:
                if model_shape(folder) == shape and model_digest(folder, cache) == digest:
                    return entry
            except OSError:
                continue
        return None

    def _rebuild(self) -> RegistryIndex:
        """The index replayed from ``audit.jsonl`` when ``index.json`` is gone; empty when new.

        Reads write nothing: the rebuilt index reaches the disk with the next change.
        """
        entries = self.history()
        backup = self.index_path.with_name(INDEX_FILE + ".bak")
        if not any(e.action in ("register", "promote", "rollback") for e in entries):
            if backup.is_file():
                raise RegistryError(
                    f"the registry index {self.index_path} is missing and {self.root / AUDIT_FILE} "
                    f"records nothing to rebuild it from; restore it with `cp {backup} "
                    f"{self.index_path}`")
            return RegistryIndex(seq=len(entries))
        index = replay_audit(entries, backup_versions(backup), self.root)
        warnings.warn(
            f"the registry index {self.index_path} is missing; rebuilt from "
            f"{self.root / AUDIT_FILE} ({len(index.versions)} versions, current "
            f"{index.current or 'none'}); it is written back at the next change",
            IndexRebuiltWarning, stacklevel=3)
        return index

    @contextmanager
    def _locked(self, *, create: bool = False) -> Iterator[None]:
        if create:
            make_dir(self.root, what="registry folder", error=RegistryError)
        elif not self.root.is_dir():
            raise RegistryError(f"there is no registry at {self.root}; register a model first "
                                "(`agentic-loop registry register MODEL_DIR --registry ...`)")
        try:
            self._lock.acquire()
        except Timeout:
            raise RegistryError(
                f"timed out after {self._lock_timeout:g}s waiting for the registry lock "
                f"{self._lock.lock_file}: another process is updating {self.root}; try again "
                "when it has finished") from None
        try:
            yield
        finally:
            self._lock.release()

    def _write(self, index: RegistryIndex) -> None:
        if self.index_path.is_file():
            atomic_write_bytes(self.index_path.with_name(INDEX_FILE + ".bak"),
                               self.index_path.read_bytes())
        payload = json.dumps(index.model_dump(mode="json"), indent=2, ensure_ascii=False) + "\n"
        atomic_write_bytes(self.index_path, payload.encode("utf-8"))

    @staticmethod
    def _normalize(version: str | int) -> str:
        text = str(version).strip()
        return f"v{text}" if text.isdigit() else text

    def _find(self, index: RegistryIndex, version: str) -> ModelVersion:
        for entry in index.versions:
            if entry.version == version:
                return entry
        known = ", ".join(e.version for e in index.versions) or "none yet"
        raise RegistryError(f"registry {self.root} has no version {version!r} "
                            f"(registered: {known}); pass one of those")

    @staticmethod
    def _next_number(index: RegistryIndex) -> int:
        numbers = [int(e.version[1:]) for e in index.versions if e.version[1:].isdigit()]
        return max(numbers, default=0) + 1

    def _check_present(self, entry: ModelVersion) -> None:
        if not Path(entry.path).is_dir():
            raise RegistryError(
                f"version {entry.version}'s model directory {entry.path} no longer exists; it "
                "cannot be served; restore the folder, or register the model again with "
                "copy=True")
