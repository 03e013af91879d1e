"""A run people rejected stops being an exemplar: its archived output is withdrawn.

Real components throughout: ArchiveRefine with a scripted model archives
its accepted runs (on disk, and in a LangGraph store), the runs are logged,
a person rejects one through the review queue, and the withdrawal finds the
archive the way ``forget`` does (the data folder's recorded places).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from langgraph.store.memory import InMemoryStore

from agentic_loop.architectures import ArchiveRefine
from agentic_loop.distill.forget.rejected import rejected_runs, unarchive_rejected, unarchive_runs
from agentic_loop.distill.review.queue import ReviewQueue
from agentic_loop.judges import Rubric
from agentic_loop.memory import Archive, HashingEmbedder, ReflexionMemory
from agentic_loop.testing import ScriptedChatModel
from agentic_loop.trajectories import TrajectoryLog

THREE_WORDS = Rubric.for_constraints(exact_words=3)
BAKERY = "Write a tagline for a bakery in three words."
FLORIST = "Write a tagline for a florist in three words."
ASKED = "Write a tagline for a bakery and florist in three words."


def _archived_runs(archive: Archive, log: TrajectoryLog) -> dict[str, str]:
    """Two accepted runs, archived and logged: task -> run id."""
    ids = {}
    for task, answer in ((BAKERY, "Warm loaves waiting"), (FLORIST, "Petals for everyone")):
        llm = ScriptedChatModel(default=answer)
        result = ArchiveRefine(llm, rubric=THREE_WORDS, archive=archive,
                               min_similarity=0.0).run(task)
        assert result.passed and result.trajectory.archived
        log.append(result.trajectory)
        ids[task] = result.trajectory.id
    return ids


def _shown(archive: Archive) -> list[str]:
    """The outputs the next run on a task like both is shown as exemplars."""
    never = ScriptedChatModel(default="no")  # fails: archives nothing
    result = ArchiveRefine(never, rubric=THREE_WORDS, archive=archive, min_similarity=0.0,
                           mmr=None, k=5).run(ASKED)
    return sorted(archive.get(i).output for i in result.exemplar_ids)  # type: ignore[union-attr]


def test_a_rejected_run_is_no_longer_shown_and_other_runs_stay(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    data = tmp_path / "data"
    data.mkdir()
    monkeypatch.setenv("AGENTIC_LOOP_DATA", str(data))
    archive = Archive(tmp_path / "elsewhere" / "archive", embedder=HashingEmbedder())
    reflections = ReflexionMemory(tmp_path / "elsewhere" / "reflections",
                                  embedder=HashingEmbedder())
    log = TrajectoryLog(tmp_path / "traj")
    ids = _archived_runs(archive, log)
    reflections.add(BAKERY, "Name the bread.", metadata={"run_id": ids[BAKERY]})
    assert _shown(archive) == ["Petals for everyone", "Warm loaves waiting"]
    assert {e.trajectory_id for e in archive.entries()} == set(ids.values())

    ReviewQueue(log).label(ids[BAKERY], verdict="reject", rating=1)
    ReviewQueue(log).label(ids[FLORIST], verdict="accept")
    assert rejected_runs(log) == [ids[BAKERY]]
    # found through the data folder's recorded places: the archive is not named
    done = unarchive_rejected(log, data=data)
    assert (done.entries, done.runs, done.warnings) == (1, [ids[BAKERY]], [])
    assert _shown(archive) == ["Petals for everyone"]  # the open archive sees it gone too
    fresh = Archive(tmp_path / "elsewhere" / "archive", embedder=HashingEmbedder())
    assert [e.trajectory_id for e in fresh.entries()] == [ids[FLORIST]]
    assert len(reflections) == 1 and len(log) == 2  # reflections and runs are kept
    assert log.read()[0].review.verdict == "reject"  # type: ignore[union-attr]
    again = unarchive_rejected(log, data=data)  # safe to repeat: nothing more goes
    assert again.entries == 0 and len(fresh) == 1


def test_a_dry_run_changes_nothing_and_no_run_is_a_no_op(tmp_path: Path) -> None:
    archive = Archive(tmp_path / "archive", embedder=HashingEmbedder())
    log = TrajectoryLog(tmp_path / "traj")
    ids = _archived_runs(archive, log)
    planned = unarchive_runs([ids[BAKERY]], data=tmp_path, memory=[tmp_path / "archive"],
                             dry_run=True)
    assert planned.entries == 1 and len(archive) == 2
    assert unarchive_runs([], data=tmp_path).entries == 0
    assert unarchive_rejected(log, data=tmp_path, memory=[tmp_path / "archive"]).runs == []
    assert len(archive) == 2


def test_archive_items_in_a_graph_store_are_withdrawn_too(tmp_path: Path) -> None:
    store = InMemoryStore()
    store.put(("archive", "x"), "e1", {"task": BAKERY, "output": "Warm loaves waiting",
                                       "trajectory_id": "run1"})
    store.put(("archive", "x"), "e2", {"task": FLORIST, "output": "Petals for everyone",
                                       "trajectory_id": "run2"})
    store.put(("reflexion", "x"), "r1", {"task": BAKERY, "reflection": "Name the bread.",
                                         "trajectory_id": "run1"})
    done = unarchive_runs(["run1"], data=tmp_path, stores=[store])
    assert done.store_items == 1
    assert sorted(i.key for i in store.search(("archive",))) == ["e2"]
    assert [i.key for i in store.search(("reflexion",))] == ["r1"]
    assert "withdrew 1 archived output of 1 rejected run" in done.line()


def test_review_label_reject_on_the_cli_withdraws_the_exemplar(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from typer.testing import CliRunner

    from agentic_loop.cli import app

    data = tmp_path / "data"
    data.mkdir()
    monkeypatch.setenv("AGENTIC_LOOP_DATA", str(data))
    archive = Archive(tmp_path / "elsewhere" / "archive", embedder=HashingEmbedder())
    log = TrajectoryLog(tmp_path / "traj")
    ids = _archived_runs(archive, log)
    runner = CliRunner()
    accepted = runner.invoke(app, ["review", "label", "--trajectories", str(log.dir),
                                   ids[FLORIST], "--accept"])
    assert accepted.exit_code == 0, accepted.output
    assert _shown(archive) == ["Petals for everyone", "Warm loaves waiting"]  # accept: kept
    rejected = runner.invoke(app, ["review", "label", "--trajectories", str(log.dir),
                                   ids[BAKERY], "--reject"])
    assert rejected.exit_code == 0, rejected.output
    assert _shown(archive) == ["Petals for everyone"]


def test_a_withdrawal_that_fails_keeps_the_label_and_says_how_to_finish(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from typer.testing import CliRunner

    from agentic_loop.cli import app
    from agentic_loop.distill.forget import rejected
    from agentic_loop.errors import ConfigError

    def refuse(*_: object, **__: object) -> None:
        raise ConfigError("archive built with a custom embedder: pass embedder=")

    data = tmp_path / "data"
    data.mkdir()
    monkeypatch.setenv("AGENTIC_LOOP_DATA", str(data))
    log = TrajectoryLog(tmp_path / "traj")
    ids = _archived_runs(Archive(tmp_path / "archive", embedder=HashingEmbedder()), log)
    monkeypatch.setattr(rejected, "unarchive_runs", refuse)
    result = CliRunner().invoke(app, ["review", "label", "--trajectories", str(log.dir),
                                      ids[BAKERY], "--reject"])
    assert result.exit_code == 0, result.output
    assert "label is stored" in result.output and "custom embedder" in result.output
    assert rejected_runs(log) == [ids[BAKERY]]
