"""Evaluation: the golden set, scoring both models, the combined decision, diversity, the plot."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agentic_loop.distill.eval.diversity import diversity
from agentic_loop.distill.eval.evaluate import EvalReport, architecture_runner, evaluate_models
from agentic_loop.distill.eval.gate import Decision
from agentic_loop.distill.eval.golden import GoldenError, GoldenTask, load_golden
from agentic_loop.errors import TaskError
from agentic_loop.judges import Rubric
from agentic_loop.memory import HashingEmbedder
from agentic_loop.tasks.spec import TaskFileError, TaskSpec, load_tasks
from agentic_loop.testing import ScriptedChatModel

TWO_WORDS = Rubric.for_constraints(exact_words=2)


def _golden(n: int = 5) -> list[GoldenTask]:
    return [GoldenTask(id=str(i), task=f"Greet person {i} in exactly 2 words.", rubric=TWO_WORDS)
            for i in range(n)]


def _model(answers: list[str]) -> ScriptedChatModel:
    return ScriptedChatModel(responses=answers)


def test_better_candidate_is_promoted_and_scores_are_paired_per_task(tmp_path: Path) -> None:
    base = _model(["hello", "hi there", "hey", "good morning everyone", "yo"])
    cand = _model([f"hello friend{i}" for i in range(5)])
    report = evaluate_models(base, cand, _golden(), kl=False, embedder=HashingEmbedder(),
                             plot_path=tmp_path / "eval.png", progress=False, min_tasks=5)
    assert [t.baseline for t in report.tasks] == [5.0, 10.0, 5.0, 5.0, 5.0]  # partial credit
    assert [t.candidate for t in report.tasks] == [10.0] * 5
    assert report.decision is Decision.PROMOTE
    assert report.tasks[0].candidate_output == "hello friend0"
    assert (tmp_path / "eval.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    data = report.to_dict()
    assert data["decision"] == "PROMOTE" and data["kl_drift"] is None
    json.dumps(data)  # JSON-ready
    entry = report.card_entry(golden="g.jsonl")
    assert entry["golden"] == "g.jsonl" and "candidate_output" not in entry["tasks"][0]


def test_worse_candidate_is_rolled_back() -> None:
    base = _model(["hello there"] * 5)
    cand = _model(["hello"] * 5)
    report = evaluate_models(base, cand, _golden(), kl=False, diversity_check=False, progress=False)
    assert report.decision is Decision.ROLLBACK


def test_a_failing_model_scores_zero_and_the_error_is_reported() -> None:
    base = _model(["hello there"] * 3)
    cand = _model([RuntimeError("server down")] * 3)
    report = evaluate_models(base, cand, _golden(3), kl=False, diversity_check=False,
                             progress=False)
    assert [t.candidate for t in report.tasks] == [0.0] * 3
    assert "server down" in report.tasks[0].errors[0]
    assert report.decision is Decision.ROLLBACK


def test_inside_an_architecture_both_modes_must_agree() -> None:
    # single-shot the candidate is better; inside Reflection both reach 10 on round two
    base = _model(["hi"] * 5 + ["hi", "hi there"] * 5)
    cand = _model(["hi you"] * 5 + ["hi you"] * 5)
    report = evaluate_models(base, cand, _golden(), runners=architecture_runner("reflection"),
                             kl=False, diversity_check=False, progress=False, min_tasks=5)
    assert report.single.decision is Decision.PROMOTE
    assert [t.baseline_arch for t in report.tasks] == [10.0] * 5
    assert report.arch_gate is not None and report.arch_gate.decision is Decision.MANUAL_REVIEW
    assert report.decision is Decision.MANUAL_REVIEW
    assert report.reasons[1].startswith("reflection: MANUAL_REVIEW")


def test_a_collapsed_candidate_is_never_promoted() -> None:
    words = ("hello", "goodbye", "welcome", "cheers", "greetings")
    base = _model([f"{w} there, friend" for w in words])
    cand = _model(["hi you"] * 5)
    report = evaluate_models(base, cand, _golden(), kl=False, embedder=HashingEmbedder(),
                             progress=False, min_tasks=5)
    assert report.single.decision is Decision.PROMOTE  # better scores...
    assert report.diversity["candidate"].collapsed and report.mode_collapse
    assert report.decision is Decision.MANUAL_REVIEW  # ...but one answer for everything
    assert any("collapsed" in r for r in report.reasons)


def test_diversity_of_distinct_and_identical_outputs() -> None:
    emb = HashingEmbedder()
    assert diversity(["same answer"] * 4, emb).collapsed
    spread = diversity(["a bookstore tagline", "tax law summary", "recipe for soup"], emb)
    assert not spread.collapsed and spread.mean_distance > 0.5
    assert not diversity(["only one"], emb).collapsed
    assert diversity(["", ""], emb).n == 2


def test_unknown_architecture_and_empty_golden_set() -> None:
    with pytest.raises(ValueError, match="unknown architecture 'tree-of-thought'; choose one of"):
        evaluate_models(_model([]), _model([]), _golden(),
                        runners=architecture_runner("tree-of-thought"))
    with pytest.raises(ValueError, match="unknown architecture 'tree-of-thought'; choose one of"), \
            pytest.warns(DeprecationWarning, match="runners=architecture_runner"):
        evaluate_models(_model([]), _model([]), _golden(), arch="tree-of-thought")
    with pytest.raises(ValueError, match="golden set is empty"):
        evaluate_models(_model([]), _model([]), [])


def test_kl_needs_local_weights() -> None:
    report = evaluate_models(_model(["a b"] * 2), _model(["a b"] * 2), _golden(2),
                             diversity_check=False, progress=False)
    assert report.kl is None and "local specs" in (report.kl_note or "")


def test_golden_rows_build_the_right_rubric(tmp_path: Path) -> None:
    path = tmp_path / "golden.jsonl"
    rubric = Rubric.for_constraints(lowercase=True).to_dict()
    path.write_text("\n".join(json.dumps(r) for r in [
        {"id": "a", "task": "Say hi.", "constraints": {"word_count": [1, 3]}},
        {"task": "Whisper.", "rubric": rubric},
        {"task": "Anything."},
    ]) + "\n\n")
    tasks = load_golden(path)
    assert [t.id for t in tasks] == ["a", "2", "3"]
    assert tasks[0].rubric().names == ("word_count",)
    assert tasks[0].constraints == {"word_count": [1, 3]}
    assert tasks[1].rubric().names == ("lowercase",)
    assert tasks[2].rubric() is None


def test_a_golden_file_is_a_task_file(tmp_path: Path) -> None:
    """One task type: the golden loader and the task-file loader read the same rows alike."""
    path = tmp_path / "golden.jsonl"
    path.write_text('{"task": "Say hi.", "constraints": {"exact_words": 2}}\nName a fruit.\n')
    golden, tasks = load_golden(path), load_tasks(path)
    assert GoldenTask is TaskSpec and all(isinstance(t, TaskSpec) for t in golden)
    assert [t.task for t in golden] == [t.task for t in tasks] == ["Say hi.", "Name a fruit."]
    assert [t.id for t in golden] == ["1", "2"] and [t.id for t in tasks] == [None, None]
    assert golden[0].rubric().names == tasks[0].rubric().names == ("exact_words",)
    assert issubclass(GoldenError, TaskFileError) and issubclass(TaskFileError, TaskError)


def test_tasks_without_ids_are_numbered_for_pairing() -> None:
    tasks = [TaskSpec(task=f"Greet person {i} in exactly 2 words.", rubric=TWO_WORDS)
             for i in range(3)]
    report = evaluate_models(_model(["hi there"] * 3), _model(["hi there"] * 3), tasks, kl=False,
                             diversity_check=False, progress=False)
    assert [t.id for t in report.tasks] == ["1", "2", "3"]


@pytest.mark.parametrize(("rows", "message"), [
    (["{"], "golden.jsonl:1: not a task: not valid JSON"),
    (['{"task": ""}'], 'golden.jsonl:1: not a task: each row needs a non-empty "task"'),
    (['{"task": "x", "constraints": {"bogus": 1}}'],
     "golden.jsonl:1: not a task: unknown constraint 'bogus'"),
    (['{"task": "x", "constraints": [1]}'], "'constraints' must be an object"),
    (['{"task": "x", "constraints": {"lowercase": true}, "rubric": {}}'], "not both"),
    (['{"id": 1, "task": "x"}', '{"id": 1, "task": "y"}'], "golden.jsonl:2: duplicate id '1'"),
    ([""], "holds no task"),
])
def test_bad_golden_sets_name_file_and_line(tmp_path: Path, rows: list[str], message: str) -> None:
    path = tmp_path / "golden.jsonl"
    path.write_text("\n".join(rows) + "\n")
    with pytest.raises(GoldenError, match=message):
        load_golden(path)
    with pytest.raises(GoldenError, match="does not exist"):
        load_golden(tmp_path / "missing.jsonl")


def test_the_default_gate_wants_twenty_golden_tasks() -> None:
    base = _model(["hello"] * 5)
    cand = _model([f"hello friend{i}" for i in range(5)])
    report = evaluate_models(base, cand, _golden(), kl=False, diversity_check=False,
                             progress=False)
    assert report.single.p_value is not None and report.single.p_value < 0.05
    assert report.decision is Decision.MANUAL_REVIEW
    assert "only 5 golden tasks" in report.reasons[0]


# -- the runner, as DSPy's optimizers take the program; the old arch= name for one release --

FIXTURES = Path(__file__).parent / "fixtures"


def _three() -> list[GoldenTask]:
    return _golden(3)


def _pair() -> tuple[ScriptedChatModel, ScriptedChatModel]:
    return _model(["hi"] * 3 + ["hi", "hi there"] * 3), _model(["hi you"] * 6)


def test_the_deprecated_arch_name_still_runs_and_says_what_replaces_it() -> None:
    base, cand = _pair()
    with pytest.warns(DeprecationWarning, match="deprecated"):
        old = evaluate_models(base, cand, _three(), arch="reflection", kl=False, progress=False,
                              embedder=HashingEmbedder(), min_tasks=3)
    base, cand = _pair()
    new = evaluate_models(base, cand, _three(), runners=architecture_runner("reflection"),
                          kl=False, progress=False, embedder=HashingEmbedder(), min_tasks=3)
    assert old.to_dict() == new.to_dict()
    with pytest.raises(ValueError, match="not both"):
        evaluate_models(base, cand, _three(), arch="reflection",
                        runners=architecture_runner("reflection"))


def test_a_pair_of_callable_runners_is_scored_like_an_architecture() -> None:
    from agentic_loop.trajectories import Trajectory

    def runner(score: float):  # noqa: ANN202 - a task -> trajectory callable
        def run(task: TaskSpec) -> Trajectory:
            return Trajectory(architecture="mine", model_id="m", task=task.task,
                              final_output="x", final_score=score)
        return run

    base, cand = _model(["hi"] * 5), _model(["hi you"] * 5)
    report = evaluate_models(base, cand, _golden(), runners=(runner(4.0), runner(9.0)), kl=False,
                             diversity_check=False, progress=False, min_tasks=5)
    assert [t.baseline_arch for t in report.tasks] == [4.0] * 5
    assert [t.candidate_arch for t in report.tasks] == [9.0] * 5
    assert report.arch == "run" and report.arch_gate is not None
    assert report.arch_gate.decision is Decision.PROMOTE


def test_an_eval_json_written_by_the_previous_version_loads_and_is_written_the_same() -> None:
    old = json.loads((FIXTURES / "eval_v1.json").read_text())
    report = EvalReport.model_validate(old)
    assert report.single.decision is Decision.PROMOTE and report.arch == "reflection"
    assert report.arch_gate is not None and report.arch_gate.decision is Decision.MANUAL_REVIEW
    assert report.to_dict() == old
    base, cand = _pair()
    again = evaluate_models(base, cand, _three(), runners=architecture_runner("reflection"),
                            kl=False, progress=False, embedder=HashingEmbedder(), min_tasks=3)
    assert again.to_dict() == old  # the same inputs write the same eval.json as before
