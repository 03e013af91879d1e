"""Many GPUs: the shipped accelerate configurations, the ``--parallel`` launch line, the refusals.

accelerate's own loader and launch validation read each YAML (what ``accelerate launch
--config_file`` does before it starts a process), so a key accelerate does not know, or a
strategy that comes out different from the one named, fails here. The GPU count is a
``Device`` given to ``train --dry-run``; no model loads.
"""

from __future__ import annotations

import fnmatch
import shlex
import tomllib
from pathlib import Path
from typing import Any

import pytest
from accelerate.commands.config.config_args import ClusterConfig, load_config_from_file
from accelerate.commands.launch import _validate_launch_command, launch_command_parser
from typer.testing import CliRunner

from agentic_loop.cli import app
from agentic_loop.distill.train import Device, TrainSettings, accelerate_command
from agentic_loop.distill.train import parallel as parallel_module
from agentic_loop.distill.train.parallel import (
    CONFIG_DIR,
    check_launch,
    config_file,
    launch_command,
    strategy,
)
from agentic_loop.errors import ConfigError

REPO = Path(__file__).resolve().parents[2]
runner = CliRunner()


def _launch_args(launch: list[str]) -> Any:
    """What ``accelerate launch`` makes of a launch line (config merged into the flags)."""
    parsed = launch_command_parser().parse_args([*launch, "agentic-loop", "train"])
    args, _, _ = _validate_launch_command(parsed)
    return args


# -- the shipped files -----------------------------------------------------------------------


@pytest.mark.parametrize(("name", "kind"), [("ddp", "MULTI_GPU"), ("fsdp", "FSDP"),
                                            ("zero3", "DEEPSPEED")])
def test_each_config_loads_with_accelerates_own_loader(name: str, kind: str) -> None:
    config = load_config_from_file(str(config_file(name)))
    assert isinstance(config, ClusterConfig)
    assert config.distributed_type.value == kind
    assert config.mixed_precision == "bf16" and config.num_machines == 1 and not config.use_cpu


def test_fsdp_shards_fully_by_transformer_block_and_saves_a_full_state_dict() -> None:
    args = _launch_args(["--config_file", str(config_file("fsdp")), "--num_processes", "4"])
    assert args.use_fsdp and not args.use_deepspeed and not args.multi_gpu
    assert (args.fsdp_version, args.fsdp_reshard_after_forward) == (2, True)  # FULL_SHARD
    assert args.fsdp_auto_wrap_policy == "TRANSFORMER_BASED_WRAP"
    assert args.fsdp_state_dict_type == "FULL_STATE_DICT"  # an ordinary HF checkpoint at the end
    assert args.fsdp_offload_params is False and args.mixed_precision == "bf16"


def test_zero3_offloads_nothing_and_gathers_16_bit_weights_to_save() -> None:
    args = _launch_args(["--config_file", str(config_file("zero3")), "--num_processes", "8"])
    assert args.use_deepspeed and not args.use_fsdp
    assert (args.zero_stage, args.offload_optimizer_device, args.offload_param_device) == (
        3, "none", "none")
    assert args.zero3_save_16bit_model is True and args.mixed_precision == "bf16"


def test_ddp_is_multi_gpu_and_the_launch_flags_override_the_file() -> None:
    args = _launch_args(["--config_file", str(config_file("ddp")), "--num_processes", "3",
                         "--mixed_precision", "fp16"])
    assert args.multi_gpu and not args.use_fsdp and not args.use_deepspeed
    assert (args.num_processes, args.mixed_precision) == (3, "fp16")


def test_the_configs_ship_with_the_package() -> None:
    patterns = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"][
        "package-data"]["agentic_loop"]
    shipped = sorted(CONFIG_DIR.glob("*.yaml"))
    assert [p.stem for p in shipped] == ["ddp", "fsdp", "zero3"]
    package = REPO / "src" / "agentic_loop"
    for path in shipped:
        relative = path.relative_to(package).as_posix()
        assert any(fnmatch.fnmatch(relative, p) for p in patterns), relative
    with pytest.raises(ConfigError, match="no accelerate configuration"):
        config_file("tp")


# -- choosing one: the dry run on 1, 4 and 8 GPUs ---------------------------------------------


def _dry_run(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, gpus: int, *flags: str) -> str:
    monkeypatch.setattr(Device, "detect", classmethod(lambda cls: Device(gpus=gpus, bf16=True)))
    result = runner.invoke(app, ["train", "--data", str(tmp_path / "d"), "--out",
                                 str(tmp_path / "m"), *flags, "--dry-run"], terminal_width=400)
    assert result.exit_code == 0, result.output
    assert not (tmp_path / "m").exists()
    return result.output


def _command(output: str) -> list[str]:
    line = next(row for row in output.splitlines() if row.startswith("command: "))
    return shlex.split(line.removeprefix("command: "))


@pytest.mark.parametrize(("parallel", "gpus", "config"), [
    ("auto", 1, None), ("auto", 4, "ddp"), ("auto", 8, "ddp"),
    ("ddp", 1, None), ("ddp", 4, "ddp"), ("ddp", 8, "ddp"),
    ("fsdp", 1, "fsdp"), ("fsdp", 4, "fsdp"), ("fsdp", 8, "fsdp"),
    ("zero3", 1, "zero3"), ("zero3", 4, "zero3"), ("zero3", 8, "zero3"),
])
def test_the_dry_run_prints_the_launch_line_for_the_gpus_it_sees(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path, parallel: str, gpus: int,
        config: str | None) -> None:
    output = _dry_run(monkeypatch, tmp_path, gpus, "--parallel", parallel)
    assert '"bf16": true' in output and "SFTConfig: " in output  # the trainer arguments
    command = _command(output)
    train = command.index("train")
    assert command[train:train + 5] == ["train", "--data", str(tmp_path / "d"), "--out",
                                        str(tmp_path / "m")]
    assert ("--parallel" in command) is (parallel != "auto")  # each process gets the flag
    if config is None:
        assert command[0] != "accelerate" and train == 1
        assert "single process here: one GPU" in output
        return
    assert command[:3] == ["accelerate", "launch", "--config_file"]
    assert Path(command[3]) == config_file(config)
    args = _launch_args(command[2:train - 1])  # accelerate itself accepts the line
    assert (args.num_processes, args.mixed_precision) == (gpus, "bf16")
    assert (args.use_fsdp, args.use_deepspeed) == (config == "fsdp", config == "zero3")
    assert f"parallel: {config} on {gpus} GPU(s)" in output


@pytest.mark.parametrize("parallel", ["auto", "fsdp", "zero3"])
def test_on_a_cpu_the_dry_run_says_what_a_gpu_machine_would_run(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path, parallel: str) -> None:
    raw = _dry_run(monkeypatch, tmp_path, 0, "--parallel", parallel)
    assert _command(raw)[0] != "accelerate"  # what runs here: one process
    output = " ".join(raw.split())
    shown = "ddp" if parallel == "auto" else parallel
    assert (f"accelerate launch --config_file {config_file(shown)} --num_processes N "
            "--mixed_precision bf16") in output
    if parallel == "auto":
        assert "single process here: no CUDA GPU on this machine" in output
    else:
        assert f"a real run with --parallel {parallel} is refused here" in output


def test_strategy_and_the_old_call_stay_as_they_were() -> None:
    assert [strategy(p, Device(gpus=2)) for p in ("auto", "ddp", "fsdp", "zero3")] == [
        "ddp", "ddp", "fsdp", "zero3"]
    assert strategy("auto", Device(gpus=1)) is None and strategy("zero3", Device()) == "zero3"
    assert launch_command(["train"], Device(), "fsdp", program="al") == ["al", "train"]
    assert accelerate_command(["train"], Device(gpus=4, bf16=True), program="al") == [
        "accelerate", "launch", "--num_processes", "4", "--mixed_precision", "bf16", "al",
        "train"]


# -- the refusals ------------------------------------------------------------------------------


@pytest.mark.parametrize("parallel", ["fsdp", "zero3"])
def test_a_real_sharded_run_on_a_cpu_is_refused(monkeypatch: pytest.MonkeyPatch,
                                                tmp_path: Path, parallel: str) -> None:
    monkeypatch.setattr(Device, "detect", classmethod(lambda cls: Device()))
    result = runner.invoke(app, ["train", "--data", str(tmp_path / "d"), "--out",
                                 str(tmp_path / "m"), "--parallel", parallel])
    assert result.exit_code == 2
    assert (f"parallel (--parallel) {parallel} shards the model across CUDA GPUs, and this "
            "machine has none") in " ".join(result.output.split())
    assert not (tmp_path / "m").exists()


def test_zero3_without_deepspeed_says_how_to_install_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(parallel_module, "_deepspeed_installed", lambda: False)
    with pytest.raises(ConfigError, match="pip install deepspeed"):
        check_launch("zero3", Device(gpus=4, bf16=True), ["x"],
                     env={"ACCELERATE_USE_DEEPSPEED": "true"})
    monkeypatch.setattr(parallel_module, "_deepspeed_installed", lambda: True)
    check_launch("zero3", Device(gpus=4, bf16=True), ["x"],
                 env={"ACCELERATE_USE_DEEPSPEED": "true"})


def test_a_run_started_outside_accelerate_launch_is_told_the_command() -> None:
    gpus = Device(gpus=4, bf16=True)
    command = launch_command(["train", "--parallel", "fsdp"], gpus, "fsdp", program="al")
    with pytest.raises(ConfigError, match="started alone; run: accelerate launch --config_file"):
        check_launch("fsdp", gpus, command, env={})
    with pytest.raises(ConfigError, match="started alone"):  # a DDP launch is not an FSDP one
        check_launch("fsdp", gpus, command, env={"WORLD_SIZE": "4"})
    check_launch("fsdp", gpus, command, env={"WORLD_SIZE": "4", "ACCELERATE_USE_FSDP": "true"})
    check_launch("ddp", gpus, command, env={"WORLD_SIZE": "4"})
    check_launch("auto", gpus, command, env={})  # auto: one process still allowed
    check_launch("ddp", Device(gpus=1), command, env={})


@pytest.mark.parametrize("parallel", ["fsdp", "zero3"])
def test_a_merged_lora_adapter_under_sharding_is_refused(parallel: str) -> None:
    with pytest.raises(ConfigError, match=f"{parallel} with a merged LoRA adapter cannot work"):
        TrainSettings(lora=True, parallel=parallel)
    with pytest.raises(ConfigError, match="merged LoRA adapter"):  # sft+dpo merges its SFT stage
        TrainSettings(method="sft+dpo", lora=True, parallel=parallel)
    assert TrainSettings(lora=True, merge_lora=False, parallel=parallel).adapter_output
    assert TrainSettings(lora=True, parallel="ddp").lora  # data-parallel keeps the whole model


def test_the_cli_refuses_a_bad_choice_and_a_merged_lora_before_anything_loads(
        tmp_path: Path) -> None:
    base = ["train", "--data", str(tmp_path / "d"), "--out", str(tmp_path / "m"), "--dry-run"]
    bad = runner.invoke(app, [*base, "--parallel", "tp"])
    assert bad.exit_code == 2
    assert "parallel (--parallel) must be one of auto, ddp, fsdp, zero3, got 'tp'" in " ".join(
        bad.output.split())
    lora = runner.invoke(app, [*base, "--lora", "--parallel", "fsdp"])
    assert lora.exit_code == 2 and "--no-merge" in lora.output


def test_the_strategy_stays_off_the_fingerprint_and_on_the_card() -> None:
    assert TrainSettings(parallel="fsdp").fingerprint("h") == TrainSettings().fingerprint("h")
    assert TrainSettings(parallel="zero3").hyperparameters()["parallel"] == "zero3"
    assert "parallel" not in TrainSettings().hyperparameters()
