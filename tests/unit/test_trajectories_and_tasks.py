"""TrajectoryLog durability and feedback; task files and generated task families."""

from __future__ import annotations

import json
import warnings

import pytest

from agentic_loop.errors import ConfigError, StorageError
from agentic_loop.tasks.sets import arithmetic_tasks, constrained_tasks, demo_tasks, split_tasks
from agentic_loop.tasks.spec import TaskFileError, TaskSpec, load_tasks
from agentic_loop.trajectories import Round, Trajectory, TrajectoryLog, hash_user_id


def make(task: str = "Say hi.", score: float = 9.0) -> Trajectory:
    return Trajectory(architecture="reflection", model_id="m", task=task,
                      rounds=[Round(iteration=0, draft="hi", score=score, passed=True)],
                      final_output="hi", final_score=score, accepted=score >= 8)


def test_log_in_a_dir_or_a_jsonl_file(tmp_path):
    by_dir = TrajectoryLog(tmp_path / "logs")
    by_dir.append(make())
    assert by_dir.path == tmp_path / "logs" / "trajectories.jsonl" and len(by_dir) == 1
    by_file = TrajectoryLog(tmp_path / "logs" / "trajectories.jsonl")
    assert [t.task for t in by_file.read()] == ["Say hi."]
    (tmp_path / "plain").write_text("x")
    with pytest.raises(NotADirectoryError, match="plain"):
        TrajectoryLog(tmp_path / "plain")


def test_corrupt_and_torn_lines_are_skipped_and_named(tmp_path):
    log = TrajectoryLog(tmp_path)
    log.append(make("first"))
    with log.path.open("a") as fh:
        fh.write("{not json}\n")
    log.append(make("second"))
    with log.path.open("a") as fh:
        fh.write('{"architecture": "refl')  # a writer died mid-line
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert [t.task for t in log.read()] == ["first", "second"]
    messages = " ".join(str(w.message) for w in caught)
    assert "trajectories.jsonl:2" in messages
    log.append(make("third"))  # the torn tail is repaired, nothing earlier lost
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert [t.task for t in log.read()] == ["first", "second", "third"]


def test_feedback_is_merged_latest_wins(tmp_path):
    log = TrajectoryLog(tmp_path)
    a, b = make("a"), make("b")
    log.append(a)
    log.append(b)
    log.record_feedback(a.id, "down")
    log.record_feedback(a.id, "up")
    assert {t.task: t.feedback for t in log.read()} == {"a": "up", "b": None}
    with pytest.raises(ValueError, match="'up' or 'down'"):
        log.record_feedback(a.id, "meh")  # type: ignore[arg-type]


#: A line as the trajectory log wrote it before RunResult became its view (schema 1).
OLD_LINE = (
    '{"schema_version": 1, "id": "0f3a", "created_at": "2026-01-02T03:04:05.123456Z", '
    '"architecture": "reflection", "model_id": "local", "task": "Say hi in one word.", '
    '"rubric": {"name": "constraints", "version": "1", "features": ["exact_words"]}, '
    '"exemplar_ids": [], "reflection_ids": [], "rounds": [{"iteration": 0, "draft": '
    '"hello there", "score": 4.0, "passed": false, "features": {"exact_words": 2}, '
    '"critique": null, "overall_score": null, "feedback": "Use exactly 1 words.", '
    '"latency_s": 0.001}, {"iteration": 1, "draft": "hi", "score": 10.0, "passed": true, '
    '"features": {"exact_words": 1}, "critique": null, "overall_score": null, "feedback": "", '
    '"latency_s": 0.001}], "final_output": "hi", "final_score": 10.0, "accepted": true, '
    '"archived": false, "stop_reason": "target", "latency_s": 0.2, "usage": {"input_tokens": 50, '
    '"output_tokens": 3, "total_tokens": 53, "llm_calls": 2}, "errors": [], "user_id_hash": null, '
    '"consent": null, "feedback": null, "metadata": {}}\n')


def test_old_trajectory_files_still_load_and_show_as_results(tmp_path):
    from agentic_loop.architectures import RunResult

    log = TrajectoryLog(tmp_path)
    log.path.parent.mkdir(parents=True, exist_ok=True)
    log.path.write_text(OLD_LINE)
    (t,) = log.read()
    assert t.id == "0f3a" and t.created_at.tzinfo is not None and len(t.rounds) == 2
    result = RunResult(trajectory=t)
    assert (result.output, result.score, result.features, result.passed, result.iterations,
            result.trajectory_id) == ("hi", 10.0, {"exact_words": 1}, True, 2, "0f3a")
    rounds = json.loads(t.model_dump_json())["rounds"]
    assert [r.pop("guards") for r in rounds] == [{}, {}]  # a field added since; empty when absent
    # added in schema 2: the prompt a draft came from, and the length it was cut from
    assert [(r.pop("prompt"), r.pop("cut_from")) for r in rounds] == [(None, None)] * 2
    # added in schema 3: the model that answered, and a best-of-n round's other samples
    assert [(r.pop("model"), r.pop("alternatives")) for r in rounds] == [(None, [])] * 2
    # added in schema 4: the agent's episode behind a draft (none for a plain model)
    assert [r.pop("episode") for r in rounds] == [None] * 2
    # added with judge models of their own (issue 34): the model that judged (none recorded)
    assert [r.pop("judge") for r in rounds] == [None] * 2
    assert rounds == json.loads(OLD_LINE)["rounds"]


def test_log_errors_are_the_package_errors(tmp_path):
    (tmp_path / "plain").write_text("x")
    with pytest.raises(StorageError, match="pass a directory or a .jsonl file"):
        TrajectoryLog(tmp_path / "plain")
    with pytest.raises(ConfigError, match="feedback='meh'"):
        TrajectoryLog(tmp_path / "log").record_feedback("id", "meh")  # type: ignore[arg-type]


def test_user_ids_are_salted_hashes():
    assert hash_user_id("alice", salt="x") != hash_user_id("alice", salt="y")
    assert hash_user_id("alice", salt="x") != hash_user_id("bob", salt="x")


def test_task_files_accept_json_and_plain_lines(tmp_path):
    path = tmp_path / "tasks.jsonl"
    path.write_text("# comment\n\n" + json.dumps({"task": "Say hi.", "constraints":
                                                  {"exact_words": 2}}) + "\nName a color.\n")
    specs = load_tasks(path)
    assert [s.task for s in specs] == ["Say hi.", "Name a color."]
    assert specs[0].rubric().names == ("exact_words",) and specs[1].rubric() is None


@pytest.mark.parametrize(("content", "fragment"), [
    ("", "holds no task"),
    ('{"task": ""}\n', ":1: not a task"),
    ('{"task": "x", "constraints": {"exact_words": -1}}\n', ":1: not a task"),
    ('{"task": "x"\n', ":1: not a task"),
])
def test_bad_task_files_name_the_line(tmp_path, content, fragment):
    path = tmp_path / "t.jsonl"
    path.write_text(content)
    with pytest.raises(TaskFileError, match=fragment):
        load_tasks(path)


def test_generated_families_are_reproducible_distinct_and_verifiable():
    tasks = constrained_tasks(60, seed=3)
    assert tasks == constrained_tasks(60, seed=3) and tasks != constrained_tasks(60, seed=4)
    assert len({t.task for t in tasks}) == 60
    families = {t.metadata["family"] for t in tasks}
    assert {"exact_words", "lowercase", "bullets", "json", "exclude_words"} <= families
    for spec in tasks:
        assert spec.rubric() is not None
    math = arithmetic_tasks(40, seed=1)
    for spec in math:
        rubric = spec.rubric()
        answer = spec.constraints["answer"]
        assert rubric.evaluate(spec.task, f"The answer is {answer}.").passed
        assert not rubric.evaluate(spec.task, f"The answer is {answer + 1}.").passed


def test_split_has_no_overlap():
    train, held = split_tasks(demo_tasks(30), held_out=0.3, seed=0)
    assert len(held) == 9 and len(train) == 21
    assert not {t.task for t in train} & {t.task for t in held}
    assert {t.split for t in train} == {"train"} and {t.split for t in held} == {"held_out"}
    with pytest.raises(ValueError):
        split_tasks(demo_tasks(30), held_out=1.5)
    assert isinstance(train[0], TaskSpec)
