"""Erasing archive entries and reflections: those of erased runs, a user's, or old ones.

Why through the collections' own API: an archive or a Reflexion memory is a
log plus derived vector indexes, shared by running agents under a lock.
:meth:`~agentic_loop.memory.Archive.delete` then
:meth:`~agentic_loop.memory.Archive.prune` (with no limits it only compacts)
remove the records, rewrite the log without them or their earlier versions
and tombstones, and rebuild the indexes from the kept vectors, exactly as
the collection does for itself; afterwards its quarantine file is scrubbed
(:mod:`.files`). The folders to open are found with the read-only reader
(:func:`~agentic_loop.memory.read_collections`), and only those holding
something to erase are opened (opening needs the embedder that built them).

A record goes when it came from an erased run (``trajectory_id``, or
``run_id``/``trajectory_id`` in its metadata), or when the selection takes
it by its own ``metadata["user_id_hash"]`` and ``created_at``. An entry
that stays but was made by a run shown an erased record (as a few-shot
episode) gets a new version whose episode has lost the erased texts
(:func:`scrub_entries`): its agent may have called a tool with them.

Example:
    >>> import tempfile
    >>> from agentic_loop.memory import Archive, HashingEmbedder
    >>> root = tempfile.mkdtemp()
    >>> with Archive(root, embedder=HashingEmbedder()) as archive:
    ...     _ = archive.add("Tagline for Ann's cafe", "Ann pours joy", trajectory_id="run1")
    ...     _ = archive.add("Tagline for a shop", "Shop small, smile big", trajectory_id="run2")
    >>> found = erase_memory([root], Selection(user_hash="h"), run_ids={"run1"})
    >>> found.archive_entries, sorted(found.erased.values())
    (1, [("Tagline for Ann's cafe", 'Ann pours joy')])
    >>> with Archive(root, embedder=HashingEmbedder()) as archive:
    ...     [e.output for e in archive.entries()]
    ['Shop small, smile big']
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from agentic_loop.distill.forget.files import leftover_files, scrub_lines
from agentic_loop.distill.forget.references import episode_copies, scrub_episode
from agentic_loop.distill.forget.selection import Selection
from agentic_loop.episodes import Episode
from agentic_loop.errors import ConfigError
from agentic_loop.jsonl_log import JsonlLog
from agentic_loop.memory import (
    Archive,
    ArchiveEntry,
    Embedder,
    HashingEmbedder,
    ReflexionMemory,
    TextEmbedder,
    read_collections,
)
from agentic_loop.memory.collection.layout import META, namespace_dir
from agentic_loop.memory.collection.meta import read_meta
from agentic_loop.memory.embeddings import DEFAULT_MODEL_NAME
from agentic_loop.memory.records import MemoryRecord

__all__ = ["MemoryErasure", "erase_memory", "scrub_entries"]

_HASHING = re.compile(r"hashing-v1-(\d+)")
_KINDS: dict[str, type[Archive] | type[ReflexionMemory]] = {
    "archive": Archive, "reflexion": ReflexionMemory}


@dataclass
class MemoryErasure:
    """What was (or would be) erased from memory collections.

    ``erased`` maps each erased record's id to its texts (task, output and
    its episode's texts, or reflection): other runs that were shown the record are scrubbed of them,
    and dataset rows holding them are dropped. Never written anywhere.
    ``per_collection``: records and leftover lines removed per collection folder;
    ``scrubbed``: other archive entries per folder whose episodes lost an erased text.
    """

    collections: list[Path] = field(default_factory=list)
    per_collection: dict[str, int] = field(default_factory=dict)
    archive_entries: int = 0
    reflections: int = 0
    leftover_lines: int = 0
    erased: dict[str, tuple[str, ...]] = field(default_factory=dict)
    scrubbed: dict[str, int] = field(default_factory=dict)

    def merge(self, other: MemoryErasure) -> None:
        """Add what a later pass erased."""
        self.collections += [c for c in other.collections if c not in self.collections]
        for folder, count in other.scrubbed.items():
            self.scrubbed[folder] = self.scrubbed.get(folder, 0) + count
        self.archive_entries += other.archive_entries
        self.reflections += other.reflections
        self.leftover_lines += other.leftover_lines
        self.erased.update(other.erased)
        for folder, count in other.per_collection.items():
            self.per_collection[folder] = self.per_collection.get(folder, 0) + count

    def counts(self) -> dict[str, int]:
        """Counts per kind, for the report and the audit."""
        return {"archive_entries": self.archive_entries, "reflections": self.reflections,
                "leftover_lines": self.leftover_lines}


def _origins(record: MemoryRecord) -> set[str]:
    found = {getattr(record, "trajectory_id", None), record.metadata.get("run_id"),
             record.metadata.get("trajectory_id")}
    return {str(v) for v in found if v}


def _texts(record: MemoryRecord) -> tuple[str, ...]:
    """An erased record's texts: task and output (with its agent episode's texts, as few-shot
    episodes and transcripts copy them), or task and reflection."""
    if isinstance(record, ArchiveEntry):
        return (record.task, record.output, *episode_copies(record.episode))
    return (str(getattr(record, "task")), str(getattr(record, "reflection")))


def embedder_for(folder: Path, given: TextEmbedder | None) -> TextEmbedder:
    """The embedder that built the collection in ``folder`` (the one ``given`` when its name
    matches); bundled and hashing embedders are recreated by name."""
    meta = read_meta(folder / META)
    name = meta.embedder if meta is not None else DEFAULT_MODEL_NAME
    if given is not None and given.name == name:
        return given
    match = _HASHING.fullmatch(name)
    if match:
        return HashingEmbedder(dim=int(match.group(1)))
    if name == DEFAULT_MODEL_NAME:
        return Embedder()
    raise ConfigError(f"the memory collection at {folder} was built with the embedder {name!r}; "
                      "pass that embedder (embedder=...) so its records can be erased")


def _mtime(path: Path) -> datetime | None:
    return datetime.fromtimestamp(path.stat().st_mtime, UTC) if path.is_file() else None


def erase_memory(roots: Sequence[str | os.PathLike[str]], selection: Selection, *,
                 run_ids: set[str], embedder: TextEmbedder | None = None,
                 dry_run: bool = False, kinds: Sequence[str] = tuple(_KINDS)) -> MemoryErasure:
    """Erase the records of ``run_ids`` and the records ``selection`` takes from every archive
    and Reflexion memory under ``roots`` (``kinds``: of those kinds only); return what went."""
    unknown = sorted(set(kinds) - set(_KINDS))
    if unknown:
        raise ConfigError(f"kinds={unknown}: memory collections are of kinds "
                          f"{', '.join(_KINDS)}")
    result = MemoryErasure()
    for raw in roots:
        root = Path(raw).expanduser()
        if not root.is_dir():
            continue
        for kind, cls in ((k, c) for k, c in _KINDS.items() if k in kinds):
            for snap in read_collections(root, kind=kind):
                _erase_collection(root, snap.namespace, snap.records, cls, selection, run_ids,
                                  embedder, result, dry_run=dry_run)
    return result


def _erase_collection(root: Path, namespace: tuple[str, ...], records: list[Any],
                      cls: type[Archive] | type[ReflexionMemory], selection: Selection,
                      run_ids: set[str], embedder: TextEmbedder | None, result: MemoryErasure,
                      *, dry_run: bool) -> None:
    folder = namespace_dir(root, namespace)
    entries = folder / "entries.jsonl"
    taken = [r for r in records if not run_ids.isdisjoint(_origins(r))
             or selection.takes(r.metadata.get("user_id_hash"), r.created_at)]
    ids = run_ids | {r.id for r in taken}
    fallback = _mtime(entries.with_name(entries.name + ".corrupt"))
    # superseded versions, tombstoned records and unreadable lines can hold them too
    stale = any(line.strip() and selection.takes_line(line, ids)
                for line in entries.read_bytes().splitlines())
    if not taken and not stale:
        leftovers = [p for p in leftover_files(entries)
                     if any(selection.takes_line(line, ids, fallback)
                            for line in p.read_bytes().splitlines())]
        if not leftovers:
            return
    result.collections.append(folder)
    count = len(taken)
    if cls is Archive:
        result.archive_entries += count
    else:
        result.reflections += count
    result.erased.update({r.id: _texts(r) for r in taken})
    result.per_collection[str(folder)] = result.per_collection.get(str(folder), 0) + count
    # resolved before anything is erased, so a missing embedder stops a dry run (the plan) too
    opener = embedder_for(folder, embedder) if taken or stale else None
    if dry_run:
        return
    if opener is not None:
        with cls(root, namespace=namespace or None, embedder=opener,
                 show_progress=False) as collection:
            collection.delete(*(r.id for r in taken))
            collection.prune()
    log: JsonlLog[dict[str, Any]] = JsonlLog(entries, dict[str, Any])
    with log.locked():
        for extra in leftover_files(entries):
            lines = scrub_lines(extra, lambda line: selection.takes_line(line, ids, fallback))
            result.leftover_lines += lines
            result.per_collection[str(folder)] += lines


def _scrubbed_episode(entry: ArchiveEntry, texts: set[str]) -> Episode | None:
    """``entry``'s episode without the erased ``texts``, or ``None`` when it holds none."""
    if entry.episode is None:
        return None
    before = entry.episode.model_dump(mode="json")
    after = scrub_episode(before, texts)
    return None if after == before else Episode.model_validate(after)


def scrub_entries(roots: Sequence[str | os.PathLike[str]],
                  erased: dict[str, tuple[str, ...]], *, runs: set[str],
                  embedder: TextEmbedder | None = None, dry_run: bool = False) -> MemoryErasure:
    """Erase the texts of erased records from the episodes of the archive entries that runs
    shown them (``runs``) made: an agent shown a few-shot episode may have called a tool with
    its arguments, and its own entry would show them to every later run. Each such entry gets
    a new version without them (same id and time), and the log is compacted."""
    result = MemoryErasure()
    texts = {t for group in erased.values() for t in group if t}
    if not texts or not runs:
        return result
    for raw in roots:
        root = Path(raw).expanduser()
        if not root.is_dir():
            continue
        for snap in read_collections(root, kind="archive"):
            edits = [(r, ep) for r in snap.records if not runs.isdisjoint(_origins(r))
                     and (ep := _scrubbed_episode(r, texts)) is not None]
            if not edits:
                continue
            folder = namespace_dir(root, snap.namespace)
            result.scrubbed[str(folder)] = len(edits)
            opener = embedder_for(folder, embedder)  # refuses in the plan (a dry run) too
            if dry_run:
                continue
            with Archive(root, namespace=snap.namespace or None, embedder=opener,
                         show_progress=False) as archive:
                for r, episode in edits:
                    archive.add(r.task, r.output, score=r.score, features=r.features,
                                iterations=r.iterations, model_id=r.model_id,
                                trajectory_id=r.trajectory_id, metadata=r.metadata, id=r.id,
                                dedup=False, episode=episode)
                archive.prune()  # the earlier versions go with their copies
    return result
