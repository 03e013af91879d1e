"""Erasing dataset rows built from erased runs, and noting it in each export's manifest.

Why rows can be found: every row an export writes names the runs it came
from in its metadata (``trajectory_id``; ``chosen_trajectory_id`` and
``rejected_trajectory_id`` for a pair; ``archive:<entry id>`` for a row
from an archive entry). A row goes when any JSON string in it is one of
those ids, so a new metadata field or a sidecar file that names runs is
covered without this module knowing it; a row that holds a long text of an
erased memory record verbatim (a retrieved exemplar kept in a prompt) goes
too. In retention, an export made before the cutoff holds nothing newer,
so all its rows go.

Every ``*.jsonl`` in an export folder is rewritten atomically (deleted when
no row is left, as the export itself does: an empty file cannot be loaded),
then ``manifest.json`` gets the new row counts and hashes and an
``erasures`` entry (when, why, how many rows; never an id or a text). The
manifest's hash *before* the rewrite is kept in the result: a model card
naming it was trained on the erased rows.

Example:
    >>> import json, tempfile, pathlib
    >>> out = pathlib.Path(tempfile.mkdtemp())
    >>> rows = [{"messages": [], "metadata": {"trajectory_id": t}} for t in ("r1", "r2")]
    >>> _ = (out / "sft.jsonl").write_text("".join(json.dumps(r) + "\\n" for r in rows))
    >>> _ = (out / "manifest.json").write_text(json.dumps(
    ...     {"format": "trl-conversational", "outputs": {"sft.jsonl": {"rows": 2}}}))
    >>> [found] = erase_rows([out], {"r1"}, erased={}, reason="user")
    >>> found.rows_removed, found.rows_kept, found.manifest_sha256_before is not None
    (1, 1, True)
    >>> json.loads((out / "manifest.json").read_text())["outputs"]["sft.jsonl"]["rows"]
    1
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from agentic_loop.atomic import atomic_write_bytes
from agentic_loop.clock import utc_stamp
from agentic_loop.distill.forget.files import (
    leftover_files,
    parse_time,
    scrub_lines,
    strings_in,
)
from agentic_loop.distill.forget.references import names_long_text

__all__ = ["ExportErasure", "erase_rows", "export_dirs"]

MANIFEST = "manifest.json"
_DATA_FILES = ("sft.jsonl", "pairs.jsonl")


class ExportErasure(BaseModel):
    """One export folder: rows removed and kept, and its manifest's hash before the rewrite.

    A record whose JSON is paths and counts only (the manifest's hash and
    the export's time serve :mod:`.models` and are left out of it).
    """

    dir: Path
    rows_removed: int = 0
    rows_kept: int = 0
    rows_untraced: int = 0
    leftover_lines: int = 0
    per_file: dict[str, int] = Field(default_factory=dict)
    manifest_sha256_before: str | None = Field(default=None, exclude=True)
    created_at: datetime | None = Field(default=None, exclude=True)


def _is_export(folder: Path) -> bool:
    if any((folder / name).is_file() for name in _DATA_FILES):
        return True
    manifest = _read_manifest(folder)
    return manifest is not None and manifest.get("format") == "trl-conversational"


def _read_manifest(folder: Path) -> dict[str, Any] | None:
    try:
        data = json.loads((folder / MANIFEST).read_bytes())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def export_dirs(roots: Sequence[str | os.PathLike[str]]) -> list[Path]:
    """Export folders under ``roots`` (a folder with ``sft.jsonl``/``pairs.jsonl`` or an export
    manifest), at any depth."""
    found: list[Path] = []
    for raw in roots:
        root = Path(raw).expanduser()
        if not root.is_dir():
            continue
        candidates = {root} | {p.parent for name in (*_DATA_FILES, MANIFEST)
                               for p in root.rglob(name)}
        found += sorted(c for c in candidates if _is_export(c))
    return list(dict.fromkeys(p.resolve() for p in found))


def _sha256(path: Path) -> str | None:
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except FileNotFoundError:
        return None


def erase_rows(folders: Sequence[Path], source_ids: set[str], *,
               erased: Mapping[str, tuple[str, ...]], reason: str,
               before: datetime | None = None, known_ids: set[str] | None = None,
               dry_run: bool = False) -> list[ExportErasure]:
    """Erase, in each export folder, the rows naming ``source_ids`` or holding a long text of
    an ``erased`` record (all rows of an export made before ``before``); return one result per
    folder that held any. ``known_ids`` (every run id the logs held) lets rows naming none of
    them be counted as untraced."""
    results = []
    for folder in folders:
        manifest = _read_manifest(folder) or {}
        created = parse_time(manifest.get("created_at"))
        whole = before is not None and created is not None and created < before
        result = ExportErasure(dir=folder, manifest_sha256_before=_sha256(folder / MANIFEST),
                               created_at=created)

        def drop(raw: bytes, *, whole: bool = whole) -> bool:
            if whole:
                return True
            strings = strings_in(raw)
            return not source_ids.isdisjoint(strings) or names_long_text(strings, erased)

        for path in sorted(folder.glob("*.jsonl")):
            _erase_file(path, drop, result, known_ids, dry_run=dry_run)
        for path in [*sorted(folder.glob("*.jsonl")), folder / MANIFEST]:
            for extra in leftover_files(path):
                lines = extra.read_bytes().splitlines()
                result.leftover_lines += (sum(drop(line) for line in lines) if dry_run
                                          else scrub_lines(extra, drop))
        if result.rows_removed or result.leftover_lines:
            if not dry_run and result.rows_removed:
                _update_manifest(folder, manifest, result, reason)
            results.append(result)
    return results


def _erase_file(path: Path, drop: Any, result: ExportErasure, known_ids: set[str] | None, *,
                dry_run: bool) -> None:
    lines = [line for line in path.read_bytes().splitlines() if line.strip()]
    kept = [line for line in lines if not drop(line)]
    removed = len(lines) - len(kept)
    result.rows_kept += len(kept)
    if known_ids is not None and path.name in _DATA_FILES:
        result.rows_untraced += sum(known_ids.isdisjoint(strings_in(line)) for line in kept)
    if not removed:
        return
    result.rows_removed += removed
    result.per_file[path.name] = removed
    if dry_run:
        return
    if kept:
        atomic_write_bytes(path, b"".join(line + b"\n" for line in kept))
    else:
        path.unlink()


def _update_manifest(folder: Path, manifest: dict[str, Any], result: ExportErasure,
                     reason: str) -> None:
    if not (folder / MANIFEST).is_file():
        return
    outputs = manifest.get("outputs")
    if isinstance(outputs, dict):
        for name in list(outputs):
            path = folder / name
            if path.is_file():
                rows = sum(1 for line in path.read_bytes().splitlines() if line.strip())
                outputs[name] = {**outputs[name], "rows": rows, "written": True,
                                 "sha256": _sha256(path)}
            elif name in result.per_file:
                outputs[name] = {**outputs[name], "rows": 0, "written": False, "sha256": None}
    if "episodes" in manifest:  # the agent rows' counts follow the rows that are left
        manifest["episodes"] = _episode_counts(folder)
    erasures = manifest.setdefault("erasures", [])
    if isinstance(erasures, list):
        erasures.append({"at": utc_stamp(), "reason": reason, "rows_removed": result.rows_removed,
                         "per_file": dict(result.per_file)})
    payload = json.dumps(manifest, indent=2, ensure_ascii=False) + "\n"
    atomic_write_bytes(folder / MANIFEST, payload.encode())


def _episode_counts(folder: Path) -> dict[str, Any] | None:
    """The manifest's ``episodes`` counts of the rows an export folder holds now (None: rows this
    version cannot read, so no count is guessed)."""
    from agentic_loop.distill.data.datasets import PairRow, SftRow
    from agentic_loop.distill.data.manifest import episode_counts

    def rows(name: str) -> list[bytes]:
        path = folder / name
        return ([line for line in path.read_bytes().splitlines() if line.strip()]
                if path.is_file() else [])

    try:
        return episode_counts([SftRow.model_validate_json(r) for r in rows(_DATA_FILES[0])],
                              [PairRow.model_validate_json(r) for r in rows(_DATA_FILES[1])])
    except ValueError:
        return None
