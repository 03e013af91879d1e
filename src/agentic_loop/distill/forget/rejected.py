"""Withdrawing the archived outputs of runs people rejected, so they stop being exemplars.

Why here: a person's ``reject`` label (:class:`~agentic_loop.trajectories.ReviewLabel`)
keeps its run out of the next SFT set, but an accepted run's output was also
archived (``ArchiveRefine`` stores it with the run's id as ``trajectory_id``)
and would keep coming back as a few-shot exemplar. Removing it is the erasure
``forget`` already does for a user's runs, narrowed to the given runs and to
archive entries: the same finding of the collections (the data folder's
``archive``, the collections and graph stores its ``places.jsonl`` records,
and those recorded beside the trajectory log), the same deletion through the
collections' own API (:func:`~agentic_loop.distill.forget.memories.erase_memory`:
delete, compact, rebuild the index) and through each graph store
(:func:`~agentic_loop.distill.forget.stores.erase_stores`), with
:data:`~agentic_loop.distill.forget.selection.RUNS_ONLY` as the selection, so
nothing else is taken. Reflections are kept (a lesson drawn from a bad run can
still be right), and so is the run itself: it stays in its log with its label.

A later ``accept`` of the same run does not bring the entry back: the next
accepted run of that task is archived as usual.

Example:
    >>> import tempfile
    >>> from agentic_loop.memory import Archive, HashingEmbedder
    >>> from agentic_loop.trajectories import ReviewLabel, Trajectory, TrajectoryLog
    >>> root, logs = tempfile.mkdtemp(), tempfile.mkdtemp()
    >>> with Archive(root, embedder=HashingEmbedder()) as archive:
    ...     _ = archive.add("Tagline for a cafe", "Coffee, but louder", trajectory_id="run1")
    ...     _ = archive.add("Tagline for a shop", "Shop small, smile big", trajectory_id="run2")
    >>> log = TrajectoryLog(logs)
    >>> log.append(Trajectory(id="run1", architecture="a", model_id="m", task="t"))
    >>> log.record_review(ReviewLabel(trajectory_id="run1", verdict="reject"))
    >>> done = unarchive_rejected(log, data=logs, memory=[root])
    >>> done.entries, done.runs
    (1, ['run1'])
    >>> with Archive(root, embedder=HashingEmbedder()) as archive:
    ...     [e.output for e in archive.entries()]
    ['Shop small, smile big']
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from langgraph.store.base import BaseStore

from agentic_loop.distill.forget.api import _data, _paths
from agentic_loop.distill.forget.memories import erase_memory
from agentic_loop.distill.forget.recorded import PlaceResult, recorded_places
from agentic_loop.distill.forget.selection import RUNS_ONLY
from agentic_loop.distill.forget.stores import erase_stores, open_stores
from agentic_loop.memory import TextEmbedder
from agentic_loop.trajectories import TrajectoryLog

__all__ = ["Unarchived", "rejected_runs", "unarchive_rejected", "unarchive_runs"]

PathArg = str | os.PathLike[str]


@dataclass
class Unarchived:
    """What was (or, in a dry run, would be) withdrawn from the archives.

    ``entries``: archive entries removed from collections on disk;
    ``store_items``: archive items removed from graph stores; ``collections``: the
    folders changed; ``runs``: the runs asked about; ``warnings``: places that could
    not be reached (a store that would not open), each with why.
    """

    runs: list[str] = field(default_factory=list)
    entries: int = 0
    store_items: int = 0
    collections: list[Path] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    def line(self) -> str:
        """One line for people.

        >>> Unarchived(runs=["r1"], entries=1).line()
        'withdrew 1 archived output of 1 rejected run from the exemplars'
        """
        n = self.entries + self.store_items
        text = (f"withdrew {n} archived output{'s' if n != 1 else ''} of {len(self.runs)} "
                f"rejected run{'s' if len(self.runs) != 1 else ''} from the exemplars")
        return "; ".join([text, *self.warnings])


def unarchive_runs(run_ids: Iterable[str], *, data: PathArg | None = None,
                   memory: Sequence[PathArg] | None = None,
                   stores: Sequence[BaseStore | str] | None = None,
                   near: Sequence[PathArg] = (), embedder: TextEmbedder | None = None,
                   dry_run: bool = False) -> Unarchived:
    """Remove the archive entries made from ``run_ids`` from every archive found; nothing else.

    The archives are found as ``forget`` finds them: ``memory`` (roots that must
    exist; default: ``archive`` in the data folder, ``data=`` or ``$AGENTIC_LOOP_DATA``
    and ``data``, plus the memory roots recorded in the ``places.jsonl`` of the data
    folder and of the ``near`` folders, e.g. the trajectory log's), and the graph stores
    ``stores`` plus those recorded there. ``embedder``: the one that built a collection
    when it is neither the bundled nor a hashing one.
    """
    ids = {str(r) for r in run_ids if r}
    done = Unarchived(runs=sorted(ids))
    if not ids:
        return done
    roots = _data(data)
    known = recorded_places([*roots, *(Path(p).expanduser() for p in near)])
    mem_roots = _paths(memory, [*(r / "archive" for r in roots), *known.memories], "memory")
    problems: list[PlaceResult] = []
    with open_stores([*(stores or []), *(p.path for p in known.stores)], problems) as opened:
        held = erase_stores(opened, RUNS_ONLY, run_ids=ids, dry_run=dry_run, archive_only=True)
        mem = erase_memory(mem_roots, RUNS_ONLY, run_ids=ids, embedder=embedder,
                           dry_run=dry_run, kinds=("archive",))
    done.entries, done.store_items = mem.archive_entries, held.records
    done.collections = list(mem.collections)
    done.warnings = [f"{p.path}: {p.problem}" for p in problems if p.problem]
    return done


def rejected_runs(log: TrajectoryLog | PathArg) -> list[str]:
    """The ids of the runs in ``log`` whose latest verdict is ``reject``.

    >>> import tempfile
    >>> from agentic_loop.trajectories import ReviewLabel, Trajectory
    >>> log = TrajectoryLog(tempfile.mkdtemp())
    >>> for rid in ("a", "b"):
    ...     log.append(Trajectory(id=rid, architecture="x", model_id="m", task="t"))
    >>> log.record_review(ReviewLabel(trajectory_id="a", verdict="reject"))
    >>> log.record_review(ReviewLabel(trajectory_id="b", verdict="reject"))
    >>> log.record_review(ReviewLabel(trajectory_id="b", verdict="accept"))
    >>> rejected_runs(log)
    ['a']
    """
    opened = log if isinstance(log, TrajectoryLog) else TrajectoryLog(log)
    return [t.id for t in opened.read() if t.review is not None and t.review.verdict == "reject"]


def unarchive_rejected(log: TrajectoryLog | PathArg, *, data: PathArg | None = None,
                       memory: Sequence[PathArg] | None = None,
                       stores: Sequence[BaseStore | str] | None = None,
                       embedder: TextEmbedder | None = None,
                       dry_run: bool = False) -> Unarchived:
    """:func:`unarchive_runs` for every rejected run of ``log`` (the places recorded beside it
    are searched too); safe to call again: what is gone stays gone, nothing else is touched."""
    opened = log if isinstance(log, TrajectoryLog) else TrajectoryLog(log)
    return unarchive_runs(rejected_runs(opened), data=data, memory=memory, stores=stores,
                          near=[opened.dir], embedder=embedder, dry_run=dry_run)
