"""The improve loop's task pool: tasks to sample, each with its locked rubric, kept apart from gold.

Why a module: what a round samples decides what it learns, so the pool is
built one way whichever its source is (a task file, or the tasks seen in
new trajectories since the last round) and checked before any model runs:

* every task is scored by its **locked** rubric, as GRPO's reward is: its
  saved rubric or constraints (else the constraints it states) reduced to
  its Python checks (:func:`~agentic_loop.distill.train.prompt_set.lock_rubric`),
  so a model never grades its own samples; a task with no check cannot be
  scored and is left out (counted), unless the round's reward is the group's
  majority vote (``ttrl``, ``grpo`` with ``judged_reward="vote"``, ``unchecked=True``):
  then it is kept as a label-free task (no rubric, no constraints), which the
  grow stage does not sample (nothing could score it) and the trainer rewards
  by the vote (:mod:`~agentic_loop.distill.loop.methods.ttrl`);
* a user's own check saved by reference (``"check": "mypkg.checks:valid_invoice"``,
  :mod:`agentic_loop.judges.check_refs`) is kept: the pool file each round writes and
  reads back names it, and a reference that does not resolve stops the round with its name;
* the pool is **held apart from the golden set**: a task file that shares a
  task with the golden set is refused (it would train on the exam); tasks of
  trajectory logs that match a golden task are dropped and counted, since a
  served model meets golden-like tasks in real traffic.
* an agent's task keeps its tools: a logged run whose episode was offered
  only ready tools (:data:`~agentic_loop.tools.READY_TOOLS`) becomes a task
  naming them (``metadata["tools"]``), so the round runs the agent on it
  (:mod:`~agentic_loop.distill.loop.tool_use`).

A round can also be given its data instead of growing it (:class:`GivenRuns`:
runs already logged, the one-shot ``distill_loop``): it then samples nothing,
and the given runs' accepted share stands where the pool's pass rate would.

Example:
    >>> from agentic_loop.tasks.spec import TaskSpec
    >>> pool = [TaskSpec(task="Say hi in 2 words.", constraints={"exact_words": 2}),
    ...         TaskSpec(task="Name a color.")]
    >>> specs, skipped = lock_pool(pool)
    >>> [(s.id, s.rubric().names) for s in specs], skipped
    ([('p1', ('exact_words',))], 1)
    >>> voted, _ = lock_pool(pool, unchecked=True)        # a vote rewards the second
    >>> [(s.id, s.rubric() and s.rubric().names) for s in voted]
    [('p1', ('exact_words',)), ('p2', None)]
    >>> check_held_apart(specs, [TaskSpec(task="say hi in 2 words.")], source="pool.jsonl")
    Traceback (most recent call last):
    ...
    agentic_loop.errors.ConfigError: the pool pool.jsonl shares 1 task with the golden set ...
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agentic_loop.atomic import atomic_write_bytes
from agentic_loop.distill.data.samples import task_key
from agentic_loop.distill.data.sources import read_runs
from agentic_loop.distill.loop.state import Watermark
from agentic_loop.distill.train.prompt_set import lock_rubric
from agentic_loop.errors import AgenticLoopError, ConfigError, StorageError
from agentic_loop.judges import CheckReferenceError, Rubric, rubric_for_task
from agentic_loop.paths import make_dir
from agentic_loop.tasks.spec import TaskSpec, load_tasks
from agentic_loop.text_places import data_root, record_place
from agentic_loop.trajectories import Trajectory
from agentic_loop.trajectory_stores import PostgresTrajectoryLog, is_database_url

__all__ = ["GivenRuns", "TrajectoryPool", "check_held_apart", "checked", "given_runs",
           "lock_pool", "locked_rubric", "read_pool", "trajectory_pool", "write_pool"]


def locked_rubric(spec: TaskSpec) -> Rubric | None:
    """The checks-only rubric a task is scored by (None when it has no check)."""
    rubric = rubric_for_task(spec, checks_only=True)
    if rubric is None:
        return None
    locked, _ = lock_rubric(rubric, "checks")
    return locked


def lock_pool(specs: Sequence[TaskSpec], *, unchecked: bool = False
              ) -> tuple[list[TaskSpec], int]:
    """The distinct tasks that have a check, each with its locked rubric and an id; and how many
    were left out for having no check (``unchecked``: none are, they are kept label-free, with
    no rubric and no constraints, for a vote to reward)."""
    out: list[TaskSpec] = []
    seen: set[str] = set()
    skipped = 0
    for spec in specs:
        rubric = locked_rubric(spec)
        if rubric is None and not unchecked:
            skipped += 1
            continue
        if task_key(spec.task) in seen:
            continue
        seen.add(task_key(spec.task))
        out.append(spec.model_copy(update={
            "saved_rubric": rubric, "constraints": {},
            "id": spec.id if spec.id is not None else f"p{len(out) + 1}"}))
    return out, skipped


def checked(pool: Sequence[TaskSpec]) -> list[TaskSpec]:
    """The pool's tasks that have a check (a vote-rewarded pool also holds tasks without one).

    >>> [s.task for s in checked([TaskSpec(task="a", constraints={"exact_words": 2}),
    ...                           TaskSpec(task="b")])]
    ['a']
    """
    return [spec for spec in pool if spec.rubric() is not None]


def check_held_apart(pool: Sequence[TaskSpec], golden: Sequence[TaskSpec], *, source: str) -> None:
    """Refuse a pool that shares a task with the golden set (it would train on the exam)."""
    exam = {task_key(g.task) for g in golden}
    shared = [p.task for p in pool if task_key(p.task) in exam]
    if shared:
        plural = "task" if len(shared) == 1 else "tasks"
        raise ConfigError(
            f"the pool {source} shares {len(shared)} {plural} with the golden set (first: "
            f"{shared[0][:80]!r}); the gate must score tasks the model never trained on: "
            "remove them from the pool, or hold out other golden tasks")


def read_pool(tasks: str | os.PathLike[str] | Sequence[TaskSpec],
              golden: Sequence[TaskSpec], *, unchecked: bool = False
              ) -> tuple[list[TaskSpec], int]:
    """A pool from a task file (or task specs): locked, numbered, checked against the golden set.

    Returns the tasks and how many had no check (left out; ``unchecked``: kept for a vote).
    """
    source = os.fspath(tasks) if isinstance(tasks, (str, os.PathLike)) else "given"
    specs = load_tasks(tasks) if isinstance(tasks, (str, os.PathLike)) else list(tasks)
    pool, skipped = lock_pool(specs, unchecked=unchecked)
    if not pool and unchecked:
        raise ConfigError(f"the pool {source} holds no task; give it tasks (JSONL, one "
                          '{"task": ...} a line)')
    if not pool:
        raise ConfigError(f"no task of the pool {source} has a check to score it ({skipped} "
                          "without one); give tasks constraints (e.g. \"constraints\": "
                          '{"exact_words": 6}) or state them ("in exactly 6 words")')
    check_held_apart(pool, golden, source=source)
    return pool, skipped


class TrajectoryPool:
    """The tasks of trajectories past the watermark, and the watermark once they are taken."""

    def __init__(self, tasks: list[TaskSpec], watermark: Watermark, *, runs: int,
                 unscored: int, golden_dropped: int) -> None:
        self.tasks = tasks
        self.watermark = watermark
        self.runs = runs
        self.unscored = unscored
        self.golden_dropped = golden_dropped


def read_pool_runs(paths: Sequence[str | os.PathLike[str]]) -> list[Trajectory]:
    """Every run in ``paths`` (log folders, ``.jsonl`` files, ``postgresql://`` URLs, each read
    whole), a run found in two places once: what a trajectory-fed pool (and the flywheel's
    trigger) reads."""
    files = [p for p in paths if not is_database_url(p)]
    runs = read_runs(files)[0] if files or not paths else []
    for url in dict.fromkeys(str(p) for p in paths if is_database_url(p)):
        seen = {r.id for r in runs}
        with PostgresTrajectoryLog(url) as log:
            runs += [t for t in log.read() if t.id not in seen]
    return runs


def new_pool_runs(runs: Iterable[Trajectory], watermark: Watermark) -> list[Trajectory]:
    """The traffic runs past ``watermark``, oldest first (the loop's own grown runs,
    ``metadata["improve"]``, are not traffic)."""
    return sorted((t for t in runs if watermark.is_new(t) and "improve" not in t.metadata),
                  key=lambda t: t.created_at)


def trajectory_pool(paths: Sequence[str | os.PathLike[str]], watermark: Watermark,
                    golden: Sequence[TaskSpec], *, unchecked: bool = False) -> TrajectoryPool:
    """The distinct tasks of new trajectories (past ``watermark``) in ``paths``, locked.

    The loop's own grown runs (``metadata["improve"]``) are not tasks of the
    traffic and are skipped; tasks matching a golden task are dropped (counted);
    ``unchecked``: tasks with no check are kept for a vote (:func:`lock_pool`).
    A ``postgresql://`` URL among ``paths`` is a Postgres trajectory log, read whole.
    """
    new = new_pool_runs(read_pool_runs(paths), watermark)
    exam = {task_key(g.task) for g in golden}
    specs: list[TaskSpec] = []
    dropped = 0
    for t in new:
        if task_key(t.task) in exam:
            dropped += 1
            continue
        rubric = _logged_rubric(t.rubric, t.id) if t.rubric else None
        tools = _logged_tools(t)
        meta = {"metadata": {"tools": tools}} if tools else {}
        specs.append(TaskSpec(task=t.task, rubric=rubric, **meta) if rubric is not None
                     else TaskSpec(task=t.task, **meta))
    pool, unscored = lock_pool(specs, unchecked=unchecked)
    return TrajectoryPool(pool, watermark.after(new), runs=len(new), unscored=unscored,
                          golden_dropped=dropped)


def _logged_tools(run: Trajectory) -> list[str]:
    """The ready tools a logged agent run was offered (none: a plain run, or other tools).

    >>> from agentic_loop.episodes import Episode
    >>> from agentic_loop.trajectories import Round
    >>> spec = lambda name: {"type": "function", "function": {"name": name}}
    >>> run = lambda *names: Trajectory(architecture="a", model_id="m", task="t", rounds=[
    ...     Round(iteration=0, draft="x", episode=Episode(tools=[spec(n) for n in names]))])
    >>> _logged_tools(run("calculator", "lookup")), _logged_tools(run("calculator", "crm"))
    (['calculator', 'lookup'], [])
    """
    from agentic_loop.tools import READY_TOOLS

    offered = [r.episode.tools for r in run.rounds if r.episode is not None and r.episode.tools]
    names = list(dict.fromkeys(str((t.get("function") or {}).get("name", ""))
                               for t in (offered[0] if offered else [])))
    return names if names and all(n in READY_TOOLS for n in names) else []


def _logged_rubric(saved: dict[str, Any], run_id: str) -> Rubric | None:
    """A run's logged rubric; None when unreadable (names only: the stated checks are used).

    A user's check that is named but does not resolve is an error, never a silent switch to
    other checks.
    """
    try:
        return Rubric.from_dict(saved)
    except CheckReferenceError as exc:
        raise CheckReferenceError(f"run {run_id} of the trajectory logs: {exc}") from None
    except (AgenticLoopError, ValueError, TypeError):
        return None


def write_pool(path: Path, pool: Sequence[TaskSpec]) -> None:
    """Write the round's pool as a task file (each task with its locked rubric), atomically.

    The pool copies users' tasks, so its place is recorded first for ``forget``.
    """
    lines = [json.dumps(spec.model_dump(mode="json", by_alias=True, exclude_none=True,
                                        exclude_defaults=True), ensure_ascii=False)
             for spec in pool]
    make_dir(path.parent, what="round folder", error=StorageError)
    record_place("log", path, what="improve task pool", near=[data_root()])
    atomic_write_bytes(path, ("\n".join(lines) + "\n").encode("utf-8"))


@dataclass(frozen=True)
class GivenRuns:
    """Runs already logged that are a round's data: where they are, what they hold, a digest.

    ``counts`` are the round's ``grow`` counts (runs, accepted runs, tasks,
    tasks with an accepted run); ``digest`` identifies their content, so a
    work folder resumed with other runs is refused, not silently reused.
    """

    paths: list[str]
    counts: dict[str, int]
    digest: str


def given_runs(paths: Sequence[str | os.PathLike[str]]) -> GivenRuns:
    """Read the logs at ``paths`` (folders or ``.jsonl`` files) as one round's data.

    Raises the export's error for a path that is not a trajectory log, before any work.

    >>> import tempfile
    >>> from agentic_loop.trajectories import Trajectory, TrajectoryLog
    >>> log = TrajectoryLog(tempfile.mkdtemp())
    >>> for ok in (True, False):
    ...     log.append(Trajectory(architecture="a", model_id="m", task="t", accepted=ok))
    >>> given_runs([log.dir]).counts
    {'samples': 2, 'passed': 1, 'tasks': 1, 'tasks_solved': 1}
    """
    runs, sources, _ = read_runs(list(paths))
    solved: dict[str, bool] = {}
    for run in runs:
        key = task_key(run.task)
        solved[key] = solved.get(key, False) or run.accepted
    counts = {"samples": len(runs), "passed": sum(r.accepted for r in runs),
              "tasks": len(solved), "tasks_solved": sum(solved.values())}
    digest = hashlib.sha256("\n".join(f"{s.kind}:{s.sha256}" for s in sources).encode())
    return GivenRuns([os.fspath(p) for p in paths], counts, digest.hexdigest()[:16])
