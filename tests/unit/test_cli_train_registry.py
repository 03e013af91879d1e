"""The surface tells the whole story: `train` and its TRL knobs, the `registry` group, the old
spellings (deprecated, still running), help without `<bool>`, the package's training verbs."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import fields
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import typer.main
from typer.testing import CliRunner

import agentic_loop
from agentic_loop.cli import app
from agentic_loop.cli.train import cli_args
from agentic_loop.distill.train import TrainSettings
from agentic_loop.distill.train.settings import GRPO_FIELDS, split_validation
from agentic_loop.errors import ConfigError, TrainError

runner = CliRunner()


def _data(tmp_path: Path) -> Path:
    d = tmp_path / "data"
    d.mkdir()
    row = {"messages": [{"role": "user", "content": "Hi?"},
                        {"role": "assistant", "content": "Hello."}]}
    (d / "sft.jsonl").write_text(json.dumps(row) + "\n")
    return d


def _one_line_error(args: list[str], *must_name: str) -> str:
    result = runner.invoke(app, args)
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    errors = [line for line in result.stderr.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1, result.stderr
    for text in must_name:
        assert text in errors[0], (text, errors[0])
    return errors[0]


# -- train ------------------------------------------------------------------------------------


def test_train_passes_every_knob_to_the_trainer(tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    train_package = sys.modules["agentic_loop.distill.train"]  # the attribute is train()
    seen: dict[str, Any] = {}

    def fake_train(data: Path, out: Path, **kwargs: Any) -> Any:
        seen.update(kwargs, data=data, out=out)
        return SimpleNamespace(model_dir=out, skipped=False, stages=[], adapter=False,
                               spec=f"local:{out}")

    monkeypatch.setattr(train_package, "train", fake_train)
    data = _data(tmp_path)
    result = runner.invoke(app, [
        "train", "--data", str(data), "--out", str(tmp_path / "m"), "--lora", "--lora-r", "8",
        "--lora-alpha", "16", "--lora-target-modules", "q_proj, v_proj", "--learning-rate", "1e-4",
        "--lr-scheduler-type", "cosine", "--warmup-steps", "0.1",
        "--gradient-accumulation-steps", "4", "--validation-split", "0.2",
        "--report-to", "tensorboard", "--max-steps", "3"])
    assert result.exit_code == 0, result.output
    assert "deprecated" not in result.stderr
    assert {k: seen[k] for k in ("lora", "lora_r", "lora_alpha", "lora_target_modules",
                                 "learning_rate", "lr_scheduler_type", "warmup_steps",
                                 "gradient_accumulation_steps", "validation_split", "report_to",
                                 "max_steps", "method", "merge_lora")} == {
        "lora": True, "lora_r": 8, "lora_alpha": 16, "lora_target_modules": ("q_proj", "v_proj"),
        "learning_rate": 1e-4, "lr_scheduler_type": "cosine", "warmup_steps": 0.1,
        "gradient_accumulation_steps": 4, "validation_split": 0.2, "report_to": "tensorboard",
        "max_steps": 3, "method": "sft", "merge_lora": True}
    assert f"load_chat_model('local:{tmp_path / 'm'}')" in " ".join(result.output.split())


def test_train_dry_run_prints_a_train_command_and_trains_nothing(tmp_path: Path) -> None:
    data = _data(tmp_path)
    result = runner.invoke(app, ["train", "--data", str(data), "--out", str(tmp_path / "m"),
                                 "--lr-scheduler-type", "cosine", "--report-to", "wandb",
                                 "--dry-run"])
    assert result.exit_code == 0, result.output
    text = " ".join(result.output.split())
    assert f"train --data {data} --out {tmp_path / 'm'} --method sft --base local" in text
    assert "--lr-scheduler-type cosine --report-to wandb" in text
    assert not (tmp_path / "m").exists()


@pytest.mark.parametrize(("args", "message"), [
    (["--lr-scheduler-type", "sawtooth"], "lr_scheduler_type (--lr-scheduler-type) must be one of"),
    (["--warmup-steps", "2.5"], "warmup_steps (--warmup-steps) must be a whole number"),
    (["--validation-split", "1"], "validation_split (--validation-split) must be in [0, 1)"),
    (["--method", "grpo", "--validation-split", "0.1"], "applies to sft and dpo"),
    (["--report-to", "tensorboard,carrier-pigeon"], "report_to (--report-to) must be none, all"),
    (["--lora-target-modules", " , "], "--lora-target-modules is empty"),
    (["--num-generations", "2"], "apply to --method grpo only"),
    (["--epochs", "0"], "epochs (--epochs) must be positive"),
])
def test_train_bad_input_is_one_line_and_exit_2(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                args: list[str], message: str) -> None:
    monkeypatch.chdir(tmp_path)
    _one_line_error(["train", "--data", str(_data(tmp_path)), "--out", "o", *args], message)
    assert not (tmp_path / "o").exists()


def test_train_with_a_tracker_that_is_not_installed_fails_before_loading(tmp_path: Path) -> None:
    import importlib.util

    if importlib.util.find_spec("wandb") is not None:
        pytest.skip("this interpreter has wandb")
    from agentic_loop.distill.train import train

    with pytest.raises(TrainError, match="'wandb' needs the wandb package; pip install wandb"):
        train(_data(tmp_path), tmp_path / "m", report_to="wandb")
    assert not (tmp_path / "m").exists()


def test_every_training_setting_has_a_train_flag() -> None:
    """`--dry-run` prints a `train` command that reproduces the settings: every flag must exist."""
    command = typer.main.get_command(app).commands["train"]  # type: ignore[attr-defined]
    options = {o for p in command.params for o in (*p.opts, *p.secondary_opts)}
    sft = TrainSettings(method="sft+dpo", lora=True, max_steps=3, epochs=2.0, beta=0.2, seed=1,
                        learning_rate=1e-4, batch_size=8, gradient_accumulation_steps=2,
                        max_length=256, lora_r=8, lora_alpha=16, lora_dropout=0.1,
                        lora_target_modules=("q", "v"), gradient_checkpointing=True,
                        save_steps=5, lr_scheduler_type="cosine", warmup_steps=0.1,
                        validation_split=0.1, report_to="wandb", tool_format="engine",
                        parallel="ddp")
    sft_fields = {"method", "lora", "max_steps", "epochs", "beta", "seed", "learning_rate",
                  "batch_size", "gradient_accumulation_steps", "max_length", "merge_lora",
                  "lora_r", "lora_alpha", "lora_dropout", "lora_target_modules",
                  "gradient_checkpointing", "save_steps", "lr_scheduler_type", "warmup_steps",
                  "validation_split", "report_to", "tool_format", "parallel"}
    assert {f.name for f in fields(TrainSettings)} == sft_fields | set(GRPO_FIELDS)
    grpo = TrainSettings(method="grpo", use_vllm=False, num_generations=2, temperature=0.7,
                         max_completion_length=64, vllm_mode="server", reward_workers=2,
                         check_reward_weight=0.5, format_penalty=0.5, llm_features="refuse")
    for settings in (sft, grpo):
        args = cli_args(settings, Path("d"), Path("o"), "local", resume=False)
        flags = [a for a in args if a.startswith("--")]
        assert set(flags) <= options, set(flags) - options
    no_merge = TrainSettings(lora=True, merge_lora=False)
    assert "--no-merge" in cli_args(no_merge, Path("d"), Path("o"), "local", True)


# -- the knobs reach TRL's config ---------------------------------------------------------------


def test_the_knobs_reach_sft_and_dpo_configs(tmp_path: Path) -> None:
    from agentic_loop.distill.train.stages import _trainer_args, lora_config

    settings = TrainSettings(method="sft+dpo", lora=True, lora_r=8, lora_alpha=16,
                             lora_target_modules=("q_proj", "v_proj"), learning_rate=1e-4,
                             lr_scheduler_type="cosine", warmup_steps=0.1,
                             gradient_accumulation_steps=4, validation_split=0.2,
                             report_to="tensorboard,wandb", save_steps=10)
    for stage, kind in (("sft", "SFTConfig"), ("dpo", "DPOConfig")):
        config = _trainer_args(stage, settings, "fp32", tmp_path / stage, False)
        assert type(config).__name__ == kind
        assert (str(config.lr_scheduler_type.value), config.warmup_steps, config.learning_rate,
                config.gradient_accumulation_steps, config.report_to) == (
            "cosine", 0.1, 1e-4, 4, ["tensorboard", "wandb"])
        assert (str(config.eval_strategy.value), config.eval_steps,
                config.per_device_eval_batch_size) == ("steps", 10, 4)
    lora = lora_config(settings)
    assert (lora.r, lora.lora_alpha, set(lora.target_modules)) == (8, 16, {"q_proj", "v_proj"})


def test_the_defaults_report_nowhere_and_hold_nothing_out(tmp_path: Path) -> None:
    from agentic_loop.distill.train import Device, grpo_config_kwargs
    from agentic_loop.distill.train.stages import _trainer_args

    config = _trainer_args("sft", TrainSettings(), "fp32", tmp_path, False)
    assert config.report_to in ("none", [], ["none"])
    assert str(config.eval_strategy.value) == "no"
    assert (str(config.lr_scheduler_type.value), config.warmup_steps) == ("linear", 0)
    grpo = grpo_config_kwargs(TrainSettings(method="grpo", report_to="wandb",
                                            lr_scheduler_type="constant"), Device(), "ck")
    assert (grpo["report_to"], grpo["lr_scheduler_type"]) == (["wandb"], "constant")
    assert "eval_strategy" not in grpo


def test_new_knobs_at_their_defaults_keep_old_fingerprints() -> None:
    """A run started before the knobs existed resumes: same fingerprint (computed at 6d8c0dd)."""
    assert TrainSettings().fingerprint("data", "base") == "68cea7172ca84d63"
    assert TrainSettings(method="sft+dpo", lora=True).fingerprint("data", "base") == \
        "4847f27d281eebc3"
    assert TrainSettings(report_to="wandb").fingerprint("d") == TrainSettings().fingerprint("d")
    assert TrainSettings(lr_scheduler_type="cosine").fingerprint("d") != \
        TrainSettings().fingerprint("d")
    assert TrainSettings(validation_split=0.1).hyperparameters()["validation_split"] == 0.1


def test_the_validation_split_is_seeded_and_leaves_rows_to_train_on() -> None:
    rows = list(range(20))
    train, held = split_validation(rows, 0.25, seed=3)
    assert len(held) == 5 and sorted(train + held) == rows
    assert split_validation(rows, 0.25, seed=3) == (train, held)
    assert split_validation(rows, 0.0, seed=3) == (rows, [])
    assert len(split_validation(rows[:3], 0.01, seed=0)[1]) == 1  # at least one held out
    with pytest.raises(ConfigError, match="leaves nothing to train on"):
        split_validation(rows[:1], 0.5, seed=0)


def test_tensorboard_logs_outlive_the_checkpoints(tmp_path: Path) -> None:
    from agentic_loop.distill.train.trainer import keep_logs

    events = tmp_path / "checkpoints" / "sft" / "runs" / "x" / "events.out"
    events.parent.mkdir(parents=True)
    events.write_text("e")
    keep_logs(tmp_path)
    assert (tmp_path / "logs" / "sft" / "x" / "events.out").read_text() == "e"
    keep_logs(tmp_path)  # nothing left to move: a no-op


# -- the registry group -------------------------------------------------------------------------


def _models(tmp_path: Path) -> list[Path]:
    out = []
    for name in ("a", "b"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "config.json").write_text(f'{{"name": "{name}"}}')
        out.append(tmp_path / name)
    return out


def test_the_registry_group_registers_promotes_shows_and_rolls_back(tmp_path: Path) -> None:
    reg = ["--registry", str(tmp_path / "reg")]
    empty = runner.invoke(app, ["registry", "list", *reg])
    assert empty.exit_code == 0 and "no versions" in empty.output
    for model in _models(tmp_path):
        registered = runner.invoke(app, ["registry", "register", str(model), *reg])
        assert registered.exit_code == 0, registered.output
        assert "agentic-loop registry promote" in " ".join(registered.output.split())
    assert "current: v1 (was none)" in runner.invoke(
        app, ["registry", "promote", "v1", *reg]).output
    assert "current: v2 (was v1)" in runner.invoke(app, ["registry", "promote", "2", *reg]).output
    shown = runner.invoke(app, ["registry", "show", *reg])
    assert shown.exit_code == 0 and json.loads(shown.output)["version"] == "v2"
    assert json.loads(runner.invoke(app, ["registry", "show", "v1", *reg]).output)["name"] == "a"
    back = runner.invoke(app, ["registry", "rollback", *reg, "--reason", "worse"])
    assert back.exit_code == 0 and "current: v1 (rolled back from v2)" in back.output
    listing = runner.invoke(app, ["registry", "list", *reg]).output
    assert "v1" in listing and "v2" in listing and "*" in listing
    history = runner.invoke(app, ["registry", "history", *reg]).output
    assert history.count("│ promote") == 2 and "│ rollback" in history and "worse" in history
    # the group's --registry (old position) reaches the command
    assert "v2" in runner.invoke(app, ["registry", *reg, "list"]).output
    assert not any(r.stderr for r in (empty, shown, back))


@pytest.mark.parametrize(("args", "message"), [
    (["registry", "show", "v9"], "has no version 'v9'"),
    (["registry", "show"], "no version is current"),
    (["registry", "promote", "v1"], "there is no registry"),
    (["registry", "rollback"], "there is no registry"),
    (["registry", "register", "nowhere"], "not a model directory"),
    (["registry", "--history", "list"], "--history is a command now"),
])
def test_registry_bad_input_is_one_line_and_exit_2(tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch,
                                                   args: list[str], message: str) -> None:
    monkeypatch.chdir(tmp_path)
    _one_line_error(args, message)


# -- old spellings ------------------------------------------------------------------------------


def test_old_registry_spellings_still_run_with_a_deprecation_line(tmp_path: Path) -> None:
    reg = ["--registry", str(tmp_path / "reg")]
    a, _ = _models(tmp_path)
    old = runner.invoke(app, ["register", str(a), *reg])
    assert old.exit_code == 0 and "registered v1" in old.output
    assert old.stderr.startswith("deprecated: use `agentic-loop registry register`")
    promoted = runner.invoke(app, ["promote", "v1", *reg])
    assert "current: v1" in promoted.output
    assert "deprecated: use `agentic-loop registry promote`" in promoted.stderr
    listing = runner.invoke(app, ["registry", *reg])
    assert listing.exit_code == 0 and "v1" in listing.output
    assert "deprecated: use `agentic-loop registry list`" in listing.stderr
    history = runner.invoke(app, ["registry", *reg, "--history"])
    assert "│ promote" in history.output
    assert "deprecated: use `agentic-loop registry history`" in history.stderr
    help_text = runner.invoke(app, ["register", "--help"]).output
    assert "Deprecated: use `agentic-loop registry register`" in " ".join(help_text.split())


def test_distill_data_still_trains_with_a_deprecation_line(tmp_path: Path) -> None:
    data = _data(tmp_path)
    result = runner.invoke(app, ["distill", "--data", str(data), "--out", str(tmp_path / "m"),
                                 "--dry-run"])
    assert result.exit_code == 0, result.output
    assert result.stderr.startswith("deprecated: use `agentic-loop train`")
    assert f"train --data {data}" in " ".join(result.output.split())


def test_the_old_commands_are_off_the_main_help() -> None:
    listing = runner.invoke(app, ["--help"]).output
    assert "train " in listing and "registry " in listing
    assert "│ register " not in listing and "│ promote " not in listing


# -- help ---------------------------------------------------------------------------------------


def _all_commands() -> list[list[str]]:
    group = typer.main.get_command(app)
    out: list[list[str]] = [[]]
    for name, cmd in group.commands.items():  # type: ignore[attr-defined]
        out.append([name])
        out += [[name, sub] for sub in getattr(cmd, "commands", {})]
    return out


@pytest.mark.parametrize("command", _all_commands(), ids=lambda c: " ".join(c) or "agentic-loop")
def test_help_shows_no_bool_type_beside_flags(command: list[str]) -> None:
    result = runner.invoke(app, [*command, "--help"])
    assert result.exit_code == 0, result.output
    assert "<bool>" not in result.output


def test_help_still_shows_the_type_of_options_that_take_a_value() -> None:
    text = runner.invoke(app, ["train", "--help"], terminal_width=200).output
    rows = [line for line in text.splitlines() if line.startswith("│")]
    lora_r = next(line for line in rows if "--lora-r " in line)
    assert "<int>" in lora_r
    lora = next(line for line in rows if "--lora " in line)
    assert "<" not in lora


# -- the package's verbs -------------------------------------------------------------------------


def test_the_package_exports_the_training_verbs() -> None:
    for name in ("train", "TrainSettings", "evaluate_models", "gate", "release_gate", "Registry",
                 "improve", "export_datasets"):
        assert name in agentic_loop.__all__ and getattr(agentic_loop, name) is not None, name
    assert agentic_loop.Registry.__name__ == "Registry"


def test_importing_the_package_loads_no_training_library() -> None:
    code = ("import sys, agentic_loop; heavy = {'torch', 'trl', 'transformers', 'peft'}; "
            "print(sorted(heavy & set(sys.modules)))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
