"""Erasing runs from trajectory logs, with their feedback and consent records, by compaction.

Why compaction: a trajectory log is append-only, and a tombstone would leave
the run's text in the file forever. Each log is read whole and rewritten
without the selected records (:meth:`~agentic_loop.jsonl_log.JsonlLog.rewrite`:
atomic, under the log's cross-process lock, so appends by running agents
wait and are never lost). Records are handled as plain JSON objects, so a
field this version of the package does not know survives the rewrite. Lines
no parser accepts are moved to ``<log>.corrupt`` by the rewrite; that file,
backups and orphan temporaries are then scrubbed of the selected lines
(:mod:`.files`).

Beside ``trajectories.jsonl`` (or another ``.jsonl`` log) live
``feedback.jsonl`` (thumbs on runs: erased with their runs; in retention,
also events older than the cutoff whose run is gone) and ``consent.jsonl``
(a user's consent given or withdrawn later: a forgotten user's events go;
retention keeps them, as they hold no content), ``reviews.jsonl`` (people's labels:
a comment may quote the run or its user) and ``review_queue.jsonl`` (runs waiting for
review): both erased with their runs, and, in retention, like feedback.

Example:
    >>> import tempfile
    >>> from agentic_loop.trajectories import ReviewLabel, Trajectory, TrajectoryLog, hash_user_id
    >>> folder = tempfile.mkdtemp()
    >>> log = TrajectoryLog(folder)
    >>> ann = Trajectory(architecture="a", model_id="m", task="Ann's task",
    ...                  user_id_hash=hash_user_id("ann"))
    >>> log.append(ann); log.append(Trajectory(architecture="a", model_id="m", task="other"))
    >>> log.record_feedback(ann.id, "up")
    >>> log.record_review(ReviewLabel(trajectory_id=ann.id, verdict="reject", comment="Ann..."))
    >>> found = erase_runs([folder], Selection(user_hash=hash_user_id("ann")))
    >>> found.ids == {ann.id}, found.counts()  # doctest: +NORMALIZE_WHITESPACE
    (True, {'trajectories': 1, 'feedback': 1, 'consent': 0, 'reviews': 1, 'review_queue': 0,
            'leftover_lines': 0})
    >>> [t.task for t in log.read()]
    ['other']
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from agentic_loop.distill.forget.files import leftover_files, parse_time, scrub_lines
from agentic_loop.distill.forget.references import (
    episode_copies,
    referenced_ids,
    scrub_references,
)
from agentic_loop.distill.forget.selection import Selection
from agentic_loop.distill.review.queue import QUEUE_FILE
from agentic_loop.jsonl_log import JsonlLog, LogCorruptionWarning
from agentic_loop.trajectories import TrajectoryLog, trajectory_files

__all__ = ["RunErasure", "erase_lines", "erase_runs", "scrub_runs", "trajectory_files"]

Record = dict[str, Any]


@dataclass
class RunErasure:
    """What was (or, in a dry run, would be) erased from the trajectory logs.

    ``ids`` are the erased runs (the stores derived from them follow);
    ``texts`` their task, final output and episode texts (copies that name no run, such
    as a task pool, are found by them; never written anywhere); ``known``
    every run id the logs held before; ``earliest`` the time of the oldest
    erased run (a model trained before it cannot hold them); ``per_file``
    the records and lines removed from each log file.
    """

    files: list[Path] = field(default_factory=list)
    ids: set[str] = field(default_factory=set)
    texts: dict[str, tuple[str, ...]] = field(default_factory=dict)
    per_file: dict[str, int] = field(default_factory=dict)
    known: set[str] = field(default_factory=set)
    earliest: datetime | None = None
    trajectories: int = 0
    feedback: int = 0
    consent: int = 0
    reviews: int = 0
    review_queue: int = 0
    leftover_lines: int = 0

    def counts(self) -> dict[str, int]:
        """Counts per kind of record, for the report and the audit (no ids, no data)."""
        return {"trajectories": self.trajectories, "feedback": self.feedback,
                "consent": self.consent, "reviews": self.reviews,
                "review_queue": self.review_queue, "leftover_lines": self.leftover_lines}


def _mtime(path: Path) -> datetime | None:
    try:
        return datetime.fromtimestamp(path.stat().st_mtime, UTC)
    except FileNotFoundError:
        return None


def _tail(path: Path, size: int) -> bytes:
    """The last ``size`` bytes of ``path`` (a torn last line)."""
    with path.open("rb") as fh:
        fh.seek(-size, os.SEEK_END)
        return fh.read()


def erase_lines(path: Path, drop: Callable[[Record], bool], drop_raw: Callable[[bytes], bool],
                *, dry_run: bool, edit: Callable[[Record], bool] | None = None,
                taken: set[str] | None = None) -> tuple[list[Record], list[Record], int]:
    """Rewrite one JSONL log without the records ``drop`` picks and the raw lines ``drop_raw``
    picks (``edit`` may change kept records in place, saying whether it did), then scrub its
    leftovers; return (removed, kept, leftover lines removed). The ids of removed records
    join ``taken`` before any raw line is judged, so a broken copy of one is found too."""
    if not path.is_file():
        return [], [], 0
    log: JsonlLog[Record] = JsonlLog(path, dict[str, Any])
    with log.locked(), warnings.catch_warnings():
        warnings.simplefilter("ignore", LogCorruptionWarning)  # bad lines are handled below
        read = log.read()
        removed = [r for r in read.records if drop(r)]
        kept = [r for r in read.records if not drop(r)]
        if taken is not None:
            taken |= {str(r.get("id")) for r in removed}
        edited = edit is not None and sum(edit(r) for r in kept) > 0
        bad = [p.raw for p in read.problems] + ([_tail(path, read.torn_bytes)]
                                                 if read.torn_bytes else [])
        leftovers = sum(drop_raw(raw) for raw in bad)
        if dry_run:
            for extra in leftover_files(path):
                leftovers += sum(drop_raw(line) for line in extra.read_bytes().splitlines())
            return removed, kept, leftovers
        if removed or leftovers or edited:
            log.rewrite(kept)  # moves every unreadable line to <log>.corrupt, scrubbed next
            leftovers = 0
        for extra in leftover_files(path):
            leftovers += scrub_lines(extra, drop_raw)
    return removed, kept, leftovers


def erase_runs(paths: Sequence[str | os.PathLike[str]], selection: Selection, *,
               dry_run: bool = False) -> RunErasure:
    """Erase the selected runs, and their feedback and consent records, from every log in
    ``paths`` (see :func:`trajectory_files`); return what went."""
    result = RunErasure(files=trajectory_files(paths))
    for file in result.files:
        fallback = _mtime(file.with_name(file.name + ".corrupt"))

        def take_run(r: Record) -> bool:
            return selection.takes(r.get("user_id_hash"), parse_time(r.get("created_at")))

        removed, kept, leftovers = erase_lines(
            file, take_run, lambda raw: selection.takes_line(raw, result.ids, fallback),
            dry_run=dry_run, taken=result.ids)
        result.known |= {str(r.get("id")) for r in removed + kept}
        result.texts.update({str(r.get("id")): _run_texts(r) for r in removed})
        result.trajectories += len(removed)
        result.leftover_lines += leftovers
        _count(result, file, len(removed) + leftovers)
        times = [t for r in removed if (t := parse_time(r.get("created_at"))) is not None]
        if times:
            result.earliest = min([*times, *([result.earliest] if result.earliest else [])])
    for folder in dict.fromkeys(file.parent for file in result.files):
        _erase_side_logs(folder, selection, result, dry_run=dry_run)
    return result


def _erase_side_logs(folder: Path, selection: Selection, result: RunErasure, *,
                     dry_run: bool) -> None:
    """Feedback, review labels and review queue entries of erased runs (and, in retention,
    stale ones of runs gone); a forgotten user's consent records."""
    def take_feedback(r: Record) -> bool:
        run = r.get("trajectory_id")
        if run in result.ids:
            return True
        before, when = selection.before, parse_time(r.get("created_at") or r.get("queued_at"))
        if selection.user_hash is not None or before is None or when is None:
            return False
        return run not in result.known and when < before

    # a feedback, label or queue line names its run, never its user: found by run id
    for name, kind in ((TrajectoryLog.FEEDBACK_FILE, "feedback"),
                       (TrajectoryLog.REVIEW_FILE, "reviews"), (QUEUE_FILE, "review_queue")):
        removed, _, leftovers = erase_lines(folder / name, take_feedback,
                                            lambda raw: selection.takes_line(raw, result.ids),
                                            dry_run=dry_run)
        setattr(result, kind, getattr(result, kind) + len(removed))
        result.leftover_lines += leftovers
        _count(result, folder / name, len(removed) + leftovers)
    if selection.user_hash is None or selection.before is not None:
        return  # consent records hold no content: only forgetting a user removes them
    user = selection.user_hash
    removed, _, leftovers = erase_lines(
        folder / TrajectoryLog.CONSENT_FILE, lambda r: r.get("user_id_hash") == user,
        lambda raw: selection.takes_line(raw, set()), dry_run=dry_run)
    result.consent += len(removed)
    result.leftover_lines += leftovers
    _count(result, folder / TrajectoryLog.CONSENT_FILE, len(removed) + leftovers)


def _count(result: RunErasure, file: Path, removed: int) -> None:
    if removed:
        result.per_file[str(file)] = result.per_file.get(str(file), 0) + removed


def _run_texts(run: Record) -> tuple[str, ...]:
    """An erased run's task and final output, and its agents' episode texts (tool arguments
    and results a copy elsewhere may hold)."""
    holders = [h for rnd in run.get("rounds") or [] if isinstance(rnd, dict)
               for h in [rnd, *(rnd.get("alternatives") or [])] if isinstance(h, dict)]
    return (*(t for t in (run.get("task"), run.get("final_output")) if isinstance(t, str)),
            *dict.fromkeys(t for h in holders if isinstance(h.get("episode"), dict)
                           for t in episode_copies(h["episode"])))


def scrub_runs(files: Sequence[Path], erased: Mapping[str, tuple[str, ...]], *,
               dry_run: bool = False, shown: set[str] | None = None) -> int:
    """Erase the texts of erased memory records from the runs that were shown them
    (:mod:`.references`); return how many runs were (or would be) rewritten. The ids of
    the runs shown an erased record join ``shown`` (their archive entries' episodes may
    copy it: :func:`~.memories.scrub_entries`)."""
    changed = 0

    def edit(record: Record) -> bool:
        nonlocal changed
        if shown is not None and not referenced_ids(record).isdisjoint(erased):
            shown.add(str(record.get("id")))
        hit = scrub_references(record, erased)
        changed += hit
        return hit

    for file in files:
        erase_lines(file, lambda r: False, lambda raw: False, dry_run=dry_run,
                    edit=edit if erased else None)
    return changed
