"""The model registry: numbered versions, a ``current`` pointer, promote, rollback, history.

Serving follows ``current``; training only ever *adds* versions. Promoting
moves the pointer and remembers the version it replaced, so ``rollback``
goes back to exactly the model that served before, however many promotions
ago (a stack, not "version minus one").

On disk, under ``root``:

``index.json``
    every version (its path, name, kind, and a copy of its model card), the
    ``current`` pointer and the stack of earlier current versions. Replaced
    atomically (:func:`~agentic_loop.atomic.atomic_write`) under a file lock,
    so two processes never interleave updates and a crash leaves the old or
    the new index, never half of one. The index before each update is kept as
    ``index.json.bak``.
``audit.jsonl``
    one durable line (:class:`~agentic_loop.jsonl_log.JsonlLog`) per
    register, promote and rollback: when, who, from what, to what, why, and
    the gate's numbers when a gate decided. A register line carries the whole
    version, so the audit log is the source of truth: a deleted ``index.json``
    is rebuilt from it (in memory on a read, on disk at the next change),
    never read as an empty registry that would hand out ``v1`` again.
``models/vN/``
    a copy of the model, only when registered with ``copy=True``.

A corrupt index is reported with its path and how to recover; nothing is
written over it. An audit log too old to carry versions' details is
rebuilt with ``index.json.bak``'s, or refused with a message naming both.

Example:
    >>> import tempfile, pathlib
    >>> tmp = pathlib.Path(tempfile.mkdtemp())
    >>> for n in ("a", "b"):
    ...     (tmp / n).mkdir(); _ = (tmp / n / "config.json").write_text("{}")
    >>> reg = Registry(tmp / "registry")
    >>> v1, v2 = reg.register(tmp / "a"), reg.register(tmp / "b")
    >>> reg.promote("v1").version, reg.promote("v2").version, reg.current.version
    ('v1', 'v2', 'v2')
    >>> reg.rollback(reason="regression").version
    'v1'
    >>> [f"{e.action} {e.version}" for e in reg.history()]
    ['register v1', 'register v2', 'promote v1', 'promote v2', 'rollback v1']
    >>> reg.index_path.unlink()                       # index.json lost: rebuilt from the audit
    >>> import warnings; warnings.simplefilter("ignore", IndexRebuiltWarning)
    >>> [v.version for v in reg.versions()], reg.current.version, reg.register(tmp / "a").version
    (['v1', 'v2'], 'v1', 'v3')
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
from typing import Any, Literal

from filelock import FileLock, Timeout
from pydantic import BaseModel, Field, ValidationError

from agentic_loop.atomic import atomic_write_bytes
from agentic_loop.clock import utc_stamp
from agentic_loop.distill.train.model_card import CARD_FILE, ModelCardError, read_card
from agentic_loop.errors import ReleaseError
from agentic_loop.jsonl_log import JsonlLog
from agentic_loop.models.model_dirs import adapter_base, is_adapter_dir

__all__ = ["AuditEntry", "IndexRebuiltWarning", "ModelVersion", "Registry", "RegistryError"]

INDEX_FILE = "index.json"
AUDIT_FILE = "audit.jsonl"
_COPY_IGNORE = shutil.ignore_patterns("checkpoints", "stages", "run.json", ".*")


class RegistryError(ReleaseError):
    """A registry operation cannot be done; the message names the registry and what to do."""


class IndexRebuiltWarning(UserWarning):
    """``index.json`` was missing and the registry was rebuilt from ``audit.jsonl``."""


class ModelVersion(BaseModel):
    """One registered model."""

    version: str
    path: str
    name: str
    registered_at: str
    adapter: bool = False
    base_model: str | None = None
    card: dict[str, Any] | None = None
    notes: str | None = None


class AuditEntry(BaseModel):
    """One line of ``audit.jsonl``."""

    at: str = Field(default_factory=utc_stamp)
    action: Literal["register", "promote", "rollback", "data_removed"]
    version: str
    previous: str | None = None
    reason: str | None = None
    user: str | None = None
    gate: dict[str, Any] | None = None
    #: the registered version itself (register lines), so the index can be rebuilt from the log
    model: ModelVersion | None = None


class _Index(BaseModel):
    schema_version: int = 1
    versions: list[ModelVersion] = Field(default_factory=list)
    current: str | None = None
    previous: list[str] = Field(default_factory=list)


def _user() -> str | None:
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return None


class Registry:
    """A model registry in the folder ``root`` (created on first write)."""

    def __init__(self, root: str | os.PathLike[str], *, lock_timeout: float = 60.0) -> None:
        self.root = Path(root).expanduser()
        if self.root.exists() and not self.root.is_dir():
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

    def _read(self) -> _Index:
        if not self.index_path.is_file():
            return self._rebuild()
        try:
            return _Index.model_validate_json(self.index_path.read_bytes())
        except (ValidationError, ValueError) as exc:
            backup = self.index_path.with_name(INDEX_FILE + ".bak")
            hint = (f"restore the previous index with `cp {backup} {self.index_path}`"
                    if backup.is_file() else "restore it from a backup")
            raise RegistryError(
                f"the registry index {self.index_path} is corrupt ({str(exc).splitlines()[0]}); "
                f"nothing was changed; {hint}, or move it aside to rebuild it from "
                f"{self.root / AUDIT_FILE}, which records every register, promote and "
                "rollback") from None

    def versions(self) -> list[ModelVersion]:
        """Every registered version, oldest first."""
        return list(self._read().versions)

    @property
    def current(self) -> ModelVersion | None:
        """The version being served, or ``None`` before the first promote."""
        index = self._read()
        return self._find(index, index.current) if index.current else None

    def get(self, version: str | int) -> ModelVersion:
        """A version by id (``"v3"``, ``"3"``, ``3``) or ``"current"``."""
        index = self._read()
        if str(version) == "current":
            if index.current is None:
                raise RegistryError(f"registry {self.root} has no current version yet; "
                                    "promote one first (`agentic-loop promote VERSION`)")
            return self._find(index, index.current)
        return self._find(index, self._normalize(version))

    def history(self) -> list[AuditEntry]:
        """Every register, promote and rollback, oldest first."""
        if not self._audit.path.is_file():
            return []
        return self._audit.read_all()

    # -- writing ------------------------------------------------------------

    def register(self, model_dir: str | os.PathLike[str], *, name: str | None = None,
                 notes: str | None = None, copy: bool = False) -> ModelVersion:
        """Add a model directory as the next version (not served until promoted).

        The directory must hold a Hugging Face model (``config.json``) or a
        LoRA adapter (``adapter_config.json``). Its ``model_card.yaml``, when
        there is one, is copied into the index. ``copy=True`` also copies the
        weights under ``root/models/`` so the version survives the training
        folder being deleted.
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
                card = read_card(source).model_dump(mode="json")
            except ModelCardError as exc:
                raise RegistryError(f"cannot register {source}: {exc}") from None
        base = adapter_base(source) if adapter else None
        with self._locked(create=True):
            index = self._read()
            version = f"v{self._next_number(index)}"
            path = source
            if copy:
                path = self.root / "models" / version
                staging = path.with_name(f".{version}.tmp")
                shutil.rmtree(staging, ignore_errors=True)
                shutil.copytree(source, staging, ignore=_COPY_IGNORE)
                os.replace(staging, path)
            entry = ModelVersion(version=version, path=str(path), name=name or source.name,
                                 registered_at=utc_stamp(), adapter=adapter, base_model=base,
                                 card=card, notes=notes)
            index.versions.append(entry)
            self._write(index)
            self._audit.append(AuditEntry(action="register", version=version, reason=notes,
                                          user=_user(), model=entry))
        return entry

    def promote(self, version: str | int, *, reason: str | None = None,
                gate: dict[str, Any] | None = None) -> ModelVersion:
        """Make ``version`` current; the version it replaces becomes the rollback target.

        Promoting the version that is already current changes nothing (and logs nothing).
        """
        with self._locked():
            index = self._read()
            entry = self._find(index, self._normalize(version))
            if index.current == entry.version:
                return entry
            self._check_present(entry)
            previous = index.current
            if previous is not None:
                index.previous.append(previous)
            index.current = entry.version
            self._write(index)
            self._audit.append(AuditEntry(action="promote", version=entry.version,
                                          previous=previous, reason=reason, user=_user(),
                                          gate=gate))
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
            index.previous.pop()
            replaced, index.current = index.current, target.version
            self._write(index)
            self._audit.append(AuditEntry(action="rollback", version=target.version,
                                          previous=replaced, reason=reason, user=_user()))
        return target

    def record_data_removal(self, version: str | int, *, reason: str) -> AuditEntry:
        """Log that data ``version`` was trained on has been erased (a user forgotten, retention).

        The weights still hold what they learned from it, so the version is
        marked in the audit log for a person to decide (retrain, retire); the
        index and the current pointer are not changed.
        """
        with self._locked():
            entry = self._find(self._read(), self._normalize(version))
            audit = AuditEntry(action="data_removed", version=entry.version, reason=reason,
                               user=_user())
            self._audit.append(audit)
        return audit

    # -- helpers ------------------------------------------------------------

    def _rebuild(self) -> _Index:
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
            return _Index()
        index = replay_audit(entries, _backup_versions(backup), self.root)
        warnings.warn(
            f"the registry index {self.index_path} is missing; rebuilt from "
            f"{self.root / AUDIT_FILE} ({len(index.versions)} versions, current "
            f"{index.current or 'none'}); it is written back at the next change",
            IndexRebuiltWarning, stacklevel=3)
        return index

    @contextmanager
    def _locked(self, *, create: bool = False) -> Iterator[None]:
        if create:
            self.root.mkdir(parents=True, exist_ok=True)
        elif not self.root.is_dir():
            raise RegistryError(f"there is no registry at {self.root}; register a model first "
                                "(`agentic-loop register MODEL_DIR --registry ...`)")
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

    def _write(self, index: _Index) -> None:
        if self.index_path.is_file():
            atomic_write_bytes(self.index_path.with_name(INDEX_FILE + ".bak"),
                               self.index_path.read_bytes())
        payload = json.dumps(index.model_dump(mode="json"), indent=2, ensure_ascii=False) + "\n"
        atomic_write_bytes(self.index_path, payload.encode("utf-8"))

    @staticmethod
    def _normalize(version: str | int) -> str:
        text = str(version).strip()
        return f"v{text}" if text.isdigit() else text

    def _find(self, index: _Index, version: str) -> ModelVersion:
        for entry in index.versions:
            if entry.version == version:
                return entry
        known = ", ".join(e.version for e in index.versions) or "none yet"
        raise RegistryError(f"registry {self.root} has no version {version!r} "
                            f"(registered: {known}); pass one of those")

    @staticmethod
    def _next_number(index: _Index) -> int:
        numbers = [int(e.version[1:]) for e in index.versions if e.version[1:].isdigit()]
        return max(numbers, default=0) + 1

    def _check_present(self, entry: ModelVersion) -> None:
        if not Path(entry.path).is_dir():
            raise RegistryError(
                f"version {entry.version}'s model directory {entry.path} no longer exists; it "
                "cannot be served; restore the folder, or register the model again with "
                "copy=True")


def replay_audit(entries: list[AuditEntry], known: dict[str, ModelVersion], root: Path) -> _Index:
    """The index that ``entries`` (oldest first) describe; ``known`` fills in old register lines.

    Promote and rollback replay exactly what they did to the index (the
    rollback stack included); data-removal notes change nothing.
    """
    index = _Index()
    for entry in entries:
        if entry.action == "register":
            model = entry.model or known.get(entry.version)
            if model is None:
                raise RegistryError(
                    f"the registry index {root / INDEX_FILE} is missing and cannot be rebuilt: "
                    f"{root / AUDIT_FILE} records register {entry.version} without its details "
                    f"(an older agentic-loop wrote it) and {root / (INDEX_FILE + '.bak')} does not "
                    "hold it; restore index.json from a backup (or `cp index.json.bak "
                    "index.json`, then register the missing versions again)")
            index.versions.append(model)
        elif entry.action == "promote":
            if index.current is not None:
                index.previous.append(index.current)
            index.current = entry.version
        elif entry.action == "rollback":
            if index.previous:
                index.previous.pop()
            index.current = entry.version
    return index


def _backup_versions(backup: Path) -> dict[str, ModelVersion]:
    """The versions ``index.json.bak`` describes (none when it is missing or unreadable)."""
    try:
        return {v.version: v for v in _Index.model_validate_json(backup.read_bytes()).versions}
    except (OSError, ValidationError, ValueError):
        return {}
