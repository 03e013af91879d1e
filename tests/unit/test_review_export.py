"""People's labels in the next export and in an erasure: a rejected run leaves sft.jsonl and
becomes a DPO negative; forgetting a user erases their labels and queue entries."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agentic_loop.distill.data import export_datasets
from agentic_loop.distill.forget import forget_user
from agentic_loop.distill.review import ReviewPick, ReviewQueue
from agentic_loop.memory import HashingEmbedder
from agentic_loop.trajectories import (
    ReviewLabel,
    Round,
    Trajectory,
    TrajectoryLog,
    hash_user_id,
)

TASK = "Write a tagline for a bookstore."


@pytest.fixture(autouse=True)
def own_data_folder(monkeypatch, tmp_path):
    """Exports record their place in the data folder: a temporary one, not the repo's."""
    monkeypatch.setenv("AGENTIC_LOOP_DATA", str(tmp_path / "data"))
RUBRIC = {"name": "tagline", "version": "1", "features": [
    {"name": "short", "weight": 1.0, "constraint": "max_words", "value": 8}]}


def run(run_id: str, answer: str, score: float, *, task: str = TASK, passed: bool = True,
        user: str | None = None) -> Trajectory:
    return Trajectory(id=run_id, architecture="reflection", model_id="m", task=task,
                      rubric=RUBRIC, final_output=answer, final_score=score, accepted=passed,
                      user_id_hash=hash_user_id(user) if user else None,
                      rounds=[Round(iteration=0, draft=answer, score=score, passed=passed)])


def export(logs: Path, out: Path) -> tuple[list[dict], list[dict], dict]:
    report = export_datasets([logs], out, pii="off", embedder=HashingEmbedder(),
                             latency_z=None)
    sft = [json.loads(line) for line in (out / "sft.jsonl").read_text().splitlines()]
    pairs_file = out / "pairs.jsonl"
    pairs = ([json.loads(line) for line in pairs_file.read_text().splitlines()]
             if pairs_file.is_file() else [])
    return sft, pairs, report.manifest


def test_a_rejected_run_leaves_sft_and_becomes_a_dpo_negative(tmp_path):
    log = TrajectoryLog(tmp_path / "traj")
    for t in (run("good", "Stories wait on every shelf.", 9.0),
              run("bad", "Books, books and more books here!", 9.5),
              run("other", "Fresh loaves at dawn.", 9.0, task="Write a slogan for a bakery."),
              run("lonely", "Bread you can trust.", 9.2, task="Write a slogan for a bakery.")):
        log.append(t)
    sft, pairs, manifest = export(tmp_path / "traj", tmp_path / "before")
    assert {r["metadata"]["trajectory_id"] for r in sft} == {"good", "bad", "other", "lonely"}

    log.record_review(ReviewLabel(trajectory_id="bad", verdict="reject", rating=1,
                                  comment="a slogan about nothing"))
    log.record_review(ReviewLabel(trajectory_id="lonely", verdict="reject"))
    log.record_review(ReviewLabel(trajectory_id="good", verdict="accept", rating=5))
    sft, pairs, manifest = export(tmp_path / "traj", tmp_path / "after")
    assert {r["metadata"]["trajectory_id"] for r in sft} == {"good", "other"}
    review = [p for p in pairs if p["metadata"]["source"] == "review"]
    sides = {(p["metadata"]["chosen_trajectory_id"], p["metadata"]["rejected_trajectory_id"])
             for p in review}
    assert sides == {("good", "bad"), ("other", "lonely")}
    bad_pair = next(p for p in review if p["metadata"]["rejected_trajectory_id"] == "bad")
    assert bad_pair["rejected"][-1]["content"] == "Books, books and more books here!"
    assert bad_pair["metadata"]["gap"] < 0      # the person's verdict, not the score, decides
    assert not any(p["metadata"]["chosen_trajectory_id"] in ("bad", "lonely") for p in pairs)
    counts = manifest["review"]
    assert counts["labelled_runs"] == 3 and counts["rejected"] == 2 and counts["accepted"] == 1
    assert counts["rejected_by_review"]["sft"] == 2 and counts["review_pairs"] == 2
    assert counts["rejected_not_paired"] == 0 and counts["mean_rating"] == 3.0
    assert manifest["dropped"]["sft"]["rejected_by_review"] == 2


def test_an_accepted_label_rescues_nothing_the_checks_failed(tmp_path):
    log = TrajectoryLog(tmp_path / "traj")
    log.append(run("ok", "Stories wait on every shelf.", 9.0))
    log.append(run("failed", "A very long tagline that breaks the word limit for sure.", 8.5,
                   passed=False))
    log.record_review(ReviewLabel(trajectory_id="failed", verdict="accept", rating=4))
    sft, _, manifest = export(tmp_path / "traj", tmp_path / "out")
    assert [r["metadata"]["trajectory_id"] for r in sft] == ["ok"]
    assert manifest["review"]["accepted_not_rescued"] == 1


def test_an_unlabelled_export_has_no_review_step(tmp_path):
    TrajectoryLog(tmp_path / "traj").append(run("ok", "Stories wait on every shelf.", 9.0))
    export_report = export_datasets([tmp_path / "traj"], tmp_path / "out", pii="off",
                                    embedder=HashingEmbedder())
    assert "review rejected" not in [s.name for s in export_report.steps]
    assert export_report.manifest["review"]["labelled_runs"] == 0


def test_forgetting_a_user_erases_their_labels_and_queue_entries(tmp_path):
    data = tmp_path / "data"
    log = TrajectoryLog(data / "trajectories")
    log.append(run("ann1", "Ann's tagline", 9.0, user="ann"))
    log.append(run("bob1", "Bob's tagline", 9.0, user="bob"))
    queue = ReviewQueue(log)
    queue.add([ReviewPick(trajectory_id="ann1", reasons=["sampled"]),
               ReviewPick(trajectory_id="bob1", reasons=["sampled"])])
    queue.label("ann1", verdict="reject", comment="Ann Smith's phone is in it")
    queue.label("bob1", verdict="accept")
    report = forget_user("ann", data=data, memory=[], exports=[], registries=[],
                         audit_log=None)
    counts = report.counts()
    assert counts["trajectories"] == 1 and counts["reviews"] == 1
    assert counts["review_queue"] == 1
    assert [i.trajectory_id for i in queue.items()] == ["bob1"]
    assert [label.trajectory_id for label in log.reviews()] == ["bob1"]
    assert b"Ann Smith" not in (data / "trajectories" / "reviews.jsonl").read_bytes()
    erased = {Path(p.path).name: p.removed for p in report.erased()}
    assert erased["reviews.jsonl"] == 1 and erased["review_queue.jsonl"] == 1
    assert json.loads(report.model_dump_json())["counts"]["reviews"] == 1
