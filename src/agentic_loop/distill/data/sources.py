"""Reading the export's inputs: trajectory logs and archives, with hashes and every bad line named.

Each input file is hashed (SHA-256) before it is read, so a manifest can
prove which data a model was trained on. Corrupt or torn lines do not stop
the export: the log readers skip them and this module collects their
``file:line`` messages for the report. Archives are read with memory's own
read-only reader (:func:`~agentic_loop.memory.read_collections`: no
embedder, no locks, deletions applied as the archive applies them). Archive
entries become one-output
:class:`~agentic_loop.trajectories.Trajectory` records (architecture
``"archive"``), so every later step treats both inputs the same way.

Example:
    >>> import tempfile
    >>> from agentic_loop.trajectories import Trajectory, TrajectoryLog
    >>> folder = tempfile.mkdtemp()
    >>> TrajectoryLog(folder).append(Trajectory(architecture="a", model_id="m", task="t"))
    >>> runs, files, problems = read_runs([folder])
    >>> len(runs), [f.kind for f in files], problems
    (1, ['trajectories'], [])
    >>> read_runs([folder + "/missing"])  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    agentic_loop.distill.data.errors.ExportError: trajectories path .../missing does not exist; ...
    >>> read_archive(folder)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    agentic_loop.distill.data.errors.ExportError: archive path ... holds no archive: ...
"""

from __future__ import annotations

import hashlib
import os
import warnings
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal, TypeVar

from agentic_loop.distill.data.errors import ExportError
from agentic_loop.jsonl_log import LogCorruptionWarning
from agentic_loop.memory import ArchiveEntry, read_collections
from agentic_loop.trajectories import Trajectory, TrajectoryLog

__all__ = ["SourceFile", "inherit_consent", "read_archive", "read_runs", "sha256_file"]

R = TypeVar("R")
SourceKind = Literal["trajectories", "feedback", "reviews", "archive"]


@dataclass(frozen=True)
class SourceFile:
    """One input file as it was read: its kind, size, SHA-256 and how many records it gave."""

    path: str
    kind: SourceKind
    sha256: str
    bytes: int
    records: int

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready form for manifests."""
        return asdict(self)


def sha256_file(path: str | os.PathLike[str]) -> str:
    """The SHA-256 of a file's bytes, read in 1 MiB chunks."""
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def _source(path: Path, kind: SourceKind, records: int) -> SourceFile:
    return SourceFile(str(path), kind, sha256_file(path), path.stat().st_size, records)


def _collecting(read: Callable[[], R]) -> tuple[R, list[str]]:
    """Run a log read, returning what it read and the corrupt-line warnings it raised."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", LogCorruptionWarning)
        result = read()
    problems = []
    for w in caught:
        if issubclass(w.category, LogCorruptionWarning):
            problems.append(str(w.message))
        else:
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
    return result, problems


def _trajectory_file(path: Path) -> Path:
    if not path.exists():
        raise ExportError(
            f"trajectories path {path} does not exist; pass a TrajectoryLog folder "
            f"(holding {TrajectoryLog.FILE}) or a .jsonl file")
    if path.is_dir():
        file = path / TrajectoryLog.FILE
        if not file.is_file():
            raise ExportError(
                f"trajectories folder {path} has no {TrajectoryLog.FILE}; pass the folder a "
                "TrajectoryLog writes to, or the .jsonl file itself")
        return file
    if path.suffix != ".jsonl":
        raise ExportError(f"trajectories file {path} is not a .jsonl file; pass a "
                          "TrajectoryLog folder or its trajectories .jsonl file")
    return path


_Read = tuple[list[Trajectory], list[SourceFile], list[str]]


def read_runs(paths: Sequence[str | os.PathLike[str]]) -> _Read:
    """Every trajectory in ``paths`` (folders or .jsonl files), their sources, and read problems.

    A trajectory id seen twice (the same log passed twice) is kept once.
    """
    if not paths:
        raise ExportError("no trajectories given; pass at least one TrajectoryLog folder "
                          "or .jsonl file")
    runs: dict[str, Trajectory] = {}
    sources: list[SourceFile] = []
    problems: list[str] = []
    repeated = 0
    for raw in paths:
        file = _trajectory_file(Path(raw).expanduser())
        log = TrajectoryLog(file)
        read, found = _collecting(log.read)
        problems += found
        sources.append(_source(file, "trajectories", len(read)))
        feedback = log.dir / TrajectoryLog.FEEDBACK_FILE  # TrajectoryLog.read merges it in
        if feedback.is_file():
            given = sum(t.feedback is not None for t in read)
            sources.append(_source(feedback, "feedback", given))
        reviews = log.dir / TrajectoryLog.REVIEW_FILE  # people's labels, merged in the same way
        if reviews.is_file():
            sources.append(_source(reviews, "reviews", sum(t.review is not None for t in read)))
        for t in read:
            repeated += t.id in runs
            if t.id not in runs or (runs[t.id].review is None and t.review is not None):
                runs[t.id] = t  # the copy a person labelled wins over an unlabelled one
    if repeated:
        problems.append(f"{repeated} trajectories appeared in more than one input (same id); "
                        "each was read once.")
    return list(runs.values()), sources, problems


def read_archive(root: str | os.PathLike[str]) -> _Read:
    """The current entries of every archive namespace under ``root``, as one-output trajectories.

    Superseded versions and deleted entries are left out, as the archive
    itself does; other memory kinds (Reflexion reflections) are skipped.
    Nothing is loaded or written: memory's read-only reader does the reading.
    """
    root_dir = Path(root).expanduser()
    if not root_dir.is_dir():
        raise ExportError(f"archive path {root_dir} is not a folder; pass the folder an Archive "
                          "was created with (it holds meta.json and entries.jsonl, or namespace "
                          "folders)")
    runs: list[Trajectory] = []
    sources: list[SourceFile] = []
    problems: list[str] = []
    for snap in read_collections(root_dir, kind="archive"):
        entries: list[ArchiveEntry] = snap.records
        namespace = "/".join(snap.namespace)
        runs += [_entry_run(e, namespace) for e in entries]
        sources.append(_source(snap.entries_path, "archive", len(entries)))
        problems += snap.problems
    if not sources:
        raise ExportError(f"archive path {root_dir} holds no archive: no meta.json of kind "
                          "'archive' was found under it; pass the folder an Archive was created "
                          "with")
    return runs, sources, problems


def _entry_run(entry: ArchiveEntry, namespace: str) -> Trajectory:
    consent = entry.metadata.get("consent")
    return Trajectory(
        id=f"archive:{entry.id}",
        created_at=entry.created_at,
        architecture="archive",
        model_id=entry.model_id or "unknown",
        task=entry.task,
        final_output=entry.output,
        final_score=entry.score,
        accepted=True,
        archived=True,
        consent=consent if isinstance(consent, bool) else None,
        metadata={"archive_entry_id": entry.id, "namespace": namespace,
                  "trajectory_id": entry.trajectory_id},
    )


def inherit_consent(entries: Sequence[Trajectory], runs: Sequence[Trajectory]) -> list[Trajectory]:
    """Archive entries carrying the consent of the run that produced them, when that run was read.

    An entry's own ``metadata["consent"]`` is kept when its run is unknown.
    """
    consent = {t.id: t.consent for t in runs}
    out = []
    for e in entries:
        origin = e.metadata.get("trajectory_id")
        if origin in consent and consent[origin] is not None:
            e = e.model_copy(update={"consent": consent[origin]})
        out.append(e)
    return out
