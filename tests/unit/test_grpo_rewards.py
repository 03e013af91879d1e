"""GRPO's reward functions, prompt set and GPU arguments, without a model.

The reward functions must say exactly what the rubric says (``score / 10``),
never crash training on a broken check (0, counted), keep LLM judgement out
of the reward, and score in worker processes the same as in-process.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agentic_loop.distill.train import (
    Device,
    PromptTask,
    RubricRewards,
    TrainSettings,
    accelerate_command,
    grpo_config_kwargs,
    load_prompt_set,
)
from agentic_loop.distill.train.rewards import merge_stats
from agentic_loop.distill.train.training_data import TrainingDataError
from agentic_loop.errors import ConfigError
from agentic_loop.judges import Feature, Rubric

TASK = "Write a tagline for a bakery in exactly 4 words, all lowercase."
OUTPUTS = ["fresh bread every morning", "Fresh Bread Every Morning", "bread", "",
           "warm loaves daily here today", 'Here is a tagline: "fresh bread every day"']


def _done(texts: list[str]) -> list[list[dict[str, str]]]:
    return [[{"role": "assistant", "content": t}] for t in texts]


def _call(function, texts: list[str], index: int = 0) -> list[float | None]:
    return function(prompts=[None] * len(texts), completions=_done(texts),
                    task_index=[index] * len(texts))


def test_the_composite_reward_equals_the_rubric_score_over_ten() -> None:
    rubric = Rubric.for_constraints(exact_words=4, lowercase=True, exclude_words=["best"])
    rewards = RubricRewards([PromptTask(TASK, rubric)])
    got = _call(rewards.functions[0], OUTPUTS)
    expected = [rubric.evaluate(TASK, o).score / 10 for o in OUTPUTS]
    assert got == expected
    assert got[0] == 1.0 and got[3] == 0.0 and 0.0 < got[1] < 1.0  # the spread is real
    # each check is its own function, named after it, with that check's credit
    by_name = {f.__name__: f for f in rewards.functions}
    assert list(by_name) == ["rubric", "exact_words", "lowercase", "exclude_words"]
    assert _call(by_name["lowercase"], OUTPUTS[:2]) == [1.0, 0.0]
    assert _call(by_name["exact_words"], ["one two three four", "one two"]) == [1.0, 0.5]
    assert rewards.stats()["rubric"] == {"calls": len(OUTPUTS), "errors": 0, "first_error": None}


def test_a_raising_check_scores_zero_is_counted_and_never_raises() -> None:
    def broken(task: str, output: str) -> bool:
        if "boom" in output:
            raise ZeroDivisionError("division by zero")
        return True

    rubric = Rubric([Feature("short", "At most 5 words.", check=lambda t, o: len(o.split()) <= 5),
                     Feature("fragile", "Passes a check that can break.", check=broken)])
    rewards = RubricRewards([PromptTask("Say something.", rubric)])
    rubric_fn, short, fragile = rewards.functions
    texts = ["all fine", "boom goes it", "fine again"]
    assert _call(rubric_fn, texts) == [1.0, 0.0, 1.0]
    assert _call(fragile, texts) == [1.0, 0.0, 1.0]
    assert _call(short, texts) == [1.0, 1.0, 1.0]  # the other check still counts
    stats = rewards.stats()
    assert stats["rubric"]["errors"] == 1 and stats["fragile"]["errors"] == 1
    assert stats["short"]["errors"] == 0
    assert "ZeroDivisionError" in stats["fragile"]["first_error"]
    logged: dict[str, float] = {}
    fragile(prompts=[None], completions=_done(["boom"]), task_index=[0],
            log_metric=lambda name, value: logged.__setitem__(name, value))
    assert logged == {"reward_errors/fragile": 1.0}
    assert merge_stats([stats, stats])["fragile"]["errors"] == 2


def test_checks_missing_from_a_task_give_no_value_and_the_penalty_is_optional() -> None:
    tasks = [PromptTask("Whisper.", Rubric.for_constraints(lowercase=True)),
             PromptTask("Count.", Rubric.for_constraints(exact_words=2))]
    rewards = RubricRewards(tasks, check_weight=0.5, format_penalty=0.2,
                            max_completion_length=4)
    by_name = {f.__name__: f for f in rewards.functions}
    assert rewards.weights == [1.0, 0.5, 0.5, 0.2]
    out = by_name["lowercase"](prompts=[None, None], completions=_done(["hi", "hi"]),
                               task_index=[0, 1])
    assert out == [1.0, None]  # TRL skips None in its means
    penalty = by_name["format_penalty"](prompts=[None] * 3, completions=_done(["hi", "", "ok"]),
                                        task_index=[0, 0, 0],
                                        completion_ids=[[1], [2], [1, 2, 3, 4]])
    assert penalty == [0.0, -1.0, -1.0]  # empty, and cut at max_completion_length
    assert "format_penalty" not in [f.__name__ for f in RubricRewards(tasks).functions]


def test_worker_processes_score_like_the_training_process() -> None:
    rubric = Rubric.for_constraints(exact_words=4, lowercase=True)
    inline = RubricRewards([PromptTask(TASK, rubric)])
    pooled = RubricRewards([PromptTask(TASK, rubric)], workers=1)
    try:
        assert _call(pooled.functions[0], OUTPUTS) == _call(inline.functions[0], OUTPUTS)
    finally:
        pooled.close()
    custom = Rubric([Feature("x", "Has x.", check=lambda t, o: "x" in o)])
    with pytest.raises(ConfigError, match="reward_workers"):
        RubricRewards([PromptTask("t", custom)], workers=2)


def _task_file(tmp_path: Path, rows: list) -> Path:
    path = tmp_path / "tasks.jsonl"
    path.write_text("\n".join(json.dumps(r) if isinstance(r, dict) else r for r in rows) + "\n")
    return path


def test_the_prompt_set_locks_checks_only_and_uses_the_architectures_prompt(
        tmp_path: Path) -> None:
    from agentic_loop.trajectories import SYSTEM

    judged = Rubric.for_constraints(lowercase=True,
                                    features=[Feature("vivid", "Vivid imagery.", 1.0)])
    path = _task_file(tmp_path, [{"task": "Whisper a line.", "rubric": judged.to_dict()},
                                 "Name a color.", {"task": "Whisper a line.",
                                                   "rubric": judged.to_dict()}])
    prompts = load_prompt_set(path)
    assert len(prompts.tasks) == 1 and prompts.skipped == 1  # duplicate merged; no check: out
    locked = prompts.tasks[0]
    assert locked.rubric.names == ("lowercase",) and locked.dropped == ("vivid",)
    row = prompts.rows()[0]
    assert row["task_index"] == 0 and row["prompt"][0] == {"role": "system", "content": SYSTEM}
    assert "Whisper a line." in row["prompt"][1]["content"]
    assert "Vivid" not in row["prompt"][1]["content"]  # requirements list the checks only
    assert any("checks only" in note for note in prompts.notes)
    with pytest.raises(ConfigError, match="LLM-judged features"):
        load_prompt_set(path, llm_features="refuse")
    with pytest.raises(TrainingDataError, match="no task"):
        load_prompt_set(_task_file(tmp_path, ["Name a color.", "Tell a joke."]))


def test_an_export_folder_gives_its_distinct_user_prompts(tmp_path: Path) -> None:
    rows = [{"messages": [{"role": "user", "content": t},
                          {"role": "assistant", "content": "x"}]}
            for t in ("Write a motto in exactly 3 words.", "write a motto in  exactly 3 words.",
                      "Describe rain in all lowercase.")]
    (tmp_path / "sft.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    prompts = load_prompt_set(tmp_path)
    assert prompts.kind == "export" and len(prompts.tasks) == 2
    assert [t.rubric.names for t in prompts.tasks] == [("exact_words",), ("lowercase",)]
    assert any("states" in note for note in prompts.notes)
    with pytest.raises(TrainingDataError, match="task file"):
        load_prompt_set(tmp_path / "missing")


def test_grpo_settings_are_checked_and_fingerprinted_apart() -> None:
    with pytest.raises(ConfigError, match="multiple of num_generations"):
        TrainSettings(method="grpo", num_generations=3, batch_size=4)
    with pytest.raises(ConfigError, match="at least 2"):
        TrainSettings(method="grpo", num_generations=1, batch_size=4)
    assert TrainSettings(method="grpo", beta=0.0).beta_for("grpo") == 0.0
    with pytest.raises(ConfigError, match="beta"):
        TrainSettings(method="dpo", beta=0.0)
    sft = TrainSettings().hyperparameters()
    assert "num_generations" not in sft and "beta" not in sft
    assert TrainSettings(method="dpo").hyperparameters()["beta"] == 0.1
    grpo = TrainSettings(method="grpo").hyperparameters()
    assert grpo["num_generations"] == 4 and "max_length" not in grpo
    assert TrainSettings(method="grpo").fingerprint("d") != TrainSettings(
        method="grpo", num_generations=2).fingerprint("d")


def test_the_gpu_path_arguments_without_a_gpu() -> None:
    settings = TrainSettings(method="grpo", num_generations=8, batch_size=8)
    cpu = grpo_config_kwargs(settings, Device(), "ck", reward_weights=[1.0, 0.0])
    assert (cpu["use_cpu"], cpu["bf16"], cpu["use_vllm"]) == (True, False, False)
    assert cpu["reward_weights"] == [1.0, 0.0] and cpu["beta"] == 0.04
    assert cpu["num_generations"] == 8 and cpu["per_device_train_batch_size"] == 8
    assert "vllm_mode" not in cpu
    one = grpo_config_kwargs(settings, Device(gpus=1, bf16=True, vllm=True), "ck")
    assert (one["use_cpu"], one["bf16"], one["fp16"], one["use_vllm"], one["vllm_mode"]) == (
        False, True, False, True, "colocate")
    old = grpo_config_kwargs(settings, Device(gpus=1, bf16=False, vllm=False), "ck")
    assert (old["fp16"], old["bf16"], old["use_vllm"]) == (True, False, False)
    server = TrainSettings(method="grpo", vllm_mode="server", use_vllm=True, batch_size=4)
    assert grpo_config_kwargs(server, Device(gpus=2, bf16=True, vllm=True), "ck")[
        "vllm_mode"] == "server"
    with pytest.raises(ConfigError, match="vllm"):
        grpo_config_kwargs(server, Device(gpus=2, bf16=True, vllm=False), "ck")
    args = ["distill", "--method", "grpo", "--data", "t.jsonl", "--out", "m"]
    assert accelerate_command(args, Device(gpus=1, bf16=True), program="al") == ["al", *args]
    assert accelerate_command(args, Device(gpus=8, bf16=True), program="al") == [
        "accelerate", "launch", "--num_processes", "8", "--mixed_precision", "bf16", "al", *args]


def test_the_cli_dry_run_prints_the_arguments_and_the_command(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from agentic_loop.cli import app

    path = _task_file(tmp_path, [{"task": "Name one color.", "constraints": {"exact_words": 1}}])
    args = ["distill", "--data", str(path), "--out", str(tmp_path / "m"), "--method", "grpo",
            "--num-generations", "2", "--batch-size", "2", "--beta", "0", "--dry-run"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    assert '"num_generations": 2' in result.output and '"beta": 0.0' in result.output
    assert "reward functions: rubric (x1), exact_words (x0)" in result.output
    assert "--method grpo --base local --beta 0.0 --batch-size 2 --num-generations 2" in " ".join(
        result.output.split())
    assert not (tmp_path / "m").exists()  # nothing trained
    wrong = CliRunner().invoke(app, ["distill", "--data", str(path), "--out", "m",
                                     "--num-generations", "2"])
    assert wrong.exit_code == 2 and "--method grpo" in wrong.output


def test_export_prompts_use_the_bare_task_not_the_rendered_requirements(tmp_path) -> None:
    import json as _json

    from agentic_loop.distill.train.prompt_set import _export_specs

    row = {"messages": [{"role": "system", "content": "You write."},
                        {"role": "user", "content": "Say hi in 2 words.\n\nRequirements:\n- x"},
                        {"role": "assistant", "content": "hi there"}],
           "metadata": {"task": "Say hi in 2 words."}}
    old = {"messages": [{"role": "user", "content": "Name a color."},
                        {"role": "assistant", "content": "red"}], "metadata": {}}
    (tmp_path / "sft.jsonl").write_text("".join(_json.dumps(r) + "\n" for r in (row, old)))
    assert [s.task for s in _export_specs(tmp_path)] == ["Say hi in 2 words.", "Name a color."]
