"""Builders of synthetic trajectories for the distill tests (real Trajectory/Round objects)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from agentic_loop.distill.release.registry import Registry
from agentic_loop.trajectories import ReviewLabel, Round, Trajectory, TrajectoryLog


def tagline_registry(tmp_path: Path) -> Registry:
    """A registry with v1 then v2 of "tagline" promoted (v2 current, v1 its rollback target)."""
    reg = Registry(tmp_path / "registry")
    for folder in ("a", "b"):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "config.json").write_text(f'{{"name": "{folder}"}}')
        reg.register(tmp_path / folder, name="tagline")
    reg.promote("v1")
    reg.promote("v2")
    return reg


def make_run(
    task: str,
    drafts: Sequence[tuple[str, float | None]],
    *,
    final: str | None = None,
    final_score: float | None = None,
    **fields: Any,
) -> Trajectory:
    """A run with one round per ``(draft, score)``; final output: the best draft by default."""
    rounds = [Round(iteration=i, draft=d, score=s, passed=(s or 0) >= 8, critique=f"critique {i}")
              for i, (d, s) in enumerate(drafts)]
    scored = [r for r in rounds if r.score is not None]
    if final is None and scored:
        best = max(scored, key=lambda r: r.score or 0)
        final, final_score = best.draft, best.score
    fields.setdefault("latency_s", 1.0)
    fields.setdefault("rubric", {"name": "tagline", "version": "1", "features": []})
    return Trajectory(architecture="reflection", model_id="test-model", task=task, rounds=rounds,
                      final_output=final, final_score=final_score,
                      accepted=(final_score or 0) >= 8, **fields)


def corpus() -> list[Trajectory]:
    """Several tasks, several rounds and runs each: the default input of export tests."""
    return [
        # a refine run: 3/10 draft improved to 9/10
        make_run("Write a tagline for a bookstore.",
                 [("Books are here.", 3.0), ("Stories wait on every shelf.", 9.0)]),
        # the same task run again: a different accepted answer and a plateau
        make_run("Write a tagline for a bookstore.",
                 [("Find your next favourite chapter.", 8.5),
                  ("Find your next favourite chapter!", 8.5)],
                 final="Find your next favourite chapter!", final_score=8.5),
        # and a third, failing run of it
        make_run("Write a tagline for a bookstore.", [("Shop books.", 2.0)]),
        # another task with two accepted drafts
        make_run("Write a slogan for a bakery.",
                 [("Bread.", 4.0), ("Warm bread, every morning.", 8.0),
                  ("Fresh loaves at dawn.", 9.5)]),
        # an errored run: never exported
        make_run("Write a slogan for a bakery.", [("Half a slo", 9.0)], errors=["model timed out"]),
    ]


def write_log(folder: Path, runs: Sequence[Trajectory]) -> Path:
    """Append ``runs`` to a TrajectoryLog in ``folder``; return the folder."""
    log = TrajectoryLog(folder)
    for run in runs:
        log.append(run)
    return folder


def fake_trained(data: Path, out: Path, **kwargs: Any) -> Any:
    """What a fake trainer returns: a model folder with a card naming ``data`` (no weights)."""
    from agentic_loop.distill.train import TrainResult, TrainSettings
    from agentic_loop.distill.train.model_card import DataRef, ModelCard, write_card

    out.mkdir(parents=True, exist_ok=True)
    (out / "config.json").write_text("{}")
    card = ModelCard(name=out.name, base_model=kwargs["base"], method=kwargs["method"],
                     data=DataRef(dir=str(data), manifest_sha256="fake"))
    write_card(out, card)
    return TrainResult(out, TrainSettings(), [], card)


def labelled_log(folder: Path, judge: str, *, agree: bool, n: int = 6) -> Path:
    """Runs judged by ``judge`` and labelled by people: agreeing with it, or the opposite."""
    log = TrajectoryLog(folder)
    for i in range(n):
        good = i % 2 == 0
        score = 9.0 if good else 2.0
        run = Trajectory(architecture="reflection", model_id="m", task=f"served task {i}",
                         id=f"served-{i}", rounds=[Round(iteration=0, draft="x", score=score,
                                                         judge=judge)],
                         final_output="x", final_score=score, accepted=good)
        log.append(run)
        liked = good if agree else not good
        log.record_review(ReviewLabel(trajectory_id=run.id, verdict="accept" if liked
                                      else "reject", rating=5 if liked else 1))
    return folder
