"""An improve round's train stage through the shipped accelerate configurations (``--parallel``).

Three kinds of check:

* the command a round would run on an 8-GPU machine under FSDP (and 4 GPUs under DDP for
  GRPO on a vLLM server). The GPU count is a mocked ``Device.detect``: that is the only way
  to test an 8-GPU command on a CPU machine. accelerate's own parser and ``agentic-loop train
  --dry-run`` (on the same mocked machine) both read the line, so a flag either does not know
  fails here;
* a REAL launched round on CPU: ``accelerate launch --config_file ddp.yaml --num_processes 1
  --cpu agentic-loop train`` on a tiny SFT set with the embedded model (1 step); the round
  reads the model and card back, and its state names the command (slow);
* the refusals, each a ``ConfigError`` naming the flag, before anything trains.
"""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from accelerate.commands.launch import _validate_launch_command, launch_command_parser
from typer.testing import CliRunner

from agentic_loop.cli import app
from agentic_loop.distill.loop.launch import launched_train, plan_launch, preflight
from agentic_loop.distill.loop.round import RoundRunner, round_report
from agentic_loop.distill.loop.settings import ImproveSettings
from agentic_loop.distill.loop.state import RoundState
from agentic_loop.distill.train import parallel as parallel_module
from agentic_loop.distill.train.parallel import Device, config_file
from agentic_loop.errors import ConfigError, TrainError

runner = CliRunner()
FULL = {"lora": False, "max_steps": 2, "batch_size": 2}


def _mock_gpus(monkeypatch: pytest.MonkeyPatch, gpus: int) -> None:
    """This machine as one with ``gpus`` CUDA GPUs (bf16): the only way to see their command."""
    monkeypatch.setattr(Device, "detect", classmethod(lambda cls: Device(gpus=gpus, bf16=True)))


def _accelerate_reads(command: list[str]) -> Any:
    """What ``accelerate launch`` makes of the launch part of ``command``."""
    program = command.index("train") - 1
    parsed = launch_command_parser().parse_args([*command[2:program], "agentic-loop", "train"])
    return _validate_launch_command(parsed)[0]


def _dry_run_command(train_args: list[str]) -> list[str]:
    """The command ``agentic-loop train ... --dry-run`` prints for the same arguments."""
    result = runner.invoke(app, [*train_args, "--dry-run"], terminal_width=400)
    assert result.exit_code == 0, result.output
    line = next(r for r in result.output.splitlines() if r.startswith("command: "))
    return shlex.split(line.removeprefix("command: "))


# -- the command -------------------------------------------------------------------------------


def test_an_8_gpu_fsdp_round_launches_the_shipped_config_on_every_gpu(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    _mock_gpus(monkeypatch, 8)
    settings = ImproveSettings(parallel="fsdp", train_options=FULL)
    plan = plan_launch(settings, tmp_path / "data", tmp_path / "model", method="sft",
                       base="local", options=settings.train_kwargs("sft"))
    assert plan.command is not None and plan.note == "launched: fsdp on 8 GPU(s)"
    command = list(plan.command)
    assert command[:4] == ["accelerate", "launch", "--config_file", str(config_file("fsdp"))]
    args = _accelerate_reads(command)
    assert (args.num_processes, args.mixed_precision, args.use_fsdp) == (8, "bf16", True)
    train = command.index("train")
    assert command[train:] == ["train", "--data", str(tmp_path / "data"), "--out",
                               str(tmp_path / "model"), "--method", "sft", "--base", "local",
                               "--max-steps", "2", "--batch-size", "2", "--parallel", "fsdp"]
    # the train CLI accepts the arguments, and on this machine would launch the same line
    dry = _dry_run_command(command[train:])  # (its program: the agentic-loop on PATH)
    assert dry[:train - 1] + dry[train:] == command[:train - 1] + command[train:]
    assert Path(command[train - 1]).name == Path(dry[train - 1]).name == "agentic-loop"
    assert plan.record()["command"] == shlex.join(command)


def test_a_grpo_round_puts_its_vllm_settings_on_the_launched_command(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    _mock_gpus(monkeypatch, 4)
    settings = ImproveSettings(method="grpo", parallel="auto", use_vllm=True,
                               vllm_mode="server", train_options={"batch_size": 4})
    options = settings.train_kwargs("grpo")
    assert (options["use_vllm"], options["vllm_mode"]) == (True, "server")
    command = list(plan_launch(settings, tmp_path / "pool.jsonl", tmp_path / "m",
                               method="grpo", base="local", options=options).command or [])
    assert _accelerate_reads(command).num_processes == 4
    assert Path(command[3]) == config_file("ddp")
    tail = command[command.index("train"):]
    assert tail[tail.index("--use-vllm"):] == ["--use-vllm", "--vllm-mode", "server"]
    # (auto is train's own default: each process gets it without a flag)
    assert "--lora" in tail  # improve's default: a merged LoRA, fine under DDP
    # an in-process round passes the same settings to the trainer; other methods get none
    assert ImproveSettings(use_vllm=None).train_kwargs("grpo") == {"lora": True}
    assert "use_vllm" not in ImproveSettings(method="grpo", use_vllm=False).train_kwargs("sft")


@pytest.mark.parametrize(("parallel", "gpus", "processes", "note"), [
    ("none", 8, None, "in-process (--parallel none)"),
    ("auto", 0, None, "in-process: no CUDA GPU on this machine (--parallel auto"),
    ("ddp", 0, None, "in-process: no CUDA GPU on this machine (--parallel ddp"),
    ("auto", 1, None, "in-process: 1 GPU, nothing to share it with (--parallel auto)"),
    ("ddp", 8, 1, "in-process: 1 GPU, nothing to share it with (--parallel ddp)"),
    ("ddp", 8, 2, "launched: ddp on 2 GPU(s)"),
    ("fsdp", 1, None, "launched: fsdp on 1 GPU(s)"),
])
def test_where_nothing_is_shared_the_round_trains_in_process_and_says_so(
        monkeypatch: pytest.MonkeyPatch, parallel: str, gpus: int, processes: int | None,
        note: str) -> None:
    _mock_gpus(monkeypatch, gpus)
    plan = preflight(ImproveSettings(parallel=parallel,  # type: ignore[arg-type]
                                     num_processes=processes, train_options=FULL))
    assert plan.note.startswith(note)
    assert (plan.command is None) is note.startswith("in-process")


def test_an_in_process_round_records_why_and_trains_with_the_trainer_here(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """``auto`` on this CPU box: the round's own trainer runs; the state says why not launched."""
    _mock_gpus(monkeypatch, 0)
    calls: list[dict[str, Any]] = []

    def trainer(data: Path, out: Path, **kwargs: Any) -> Any:  # the stage's in-process trainer
        calls.append({"data": data, "out": out, **kwargs})
        return SimpleNamespace(model_dir=out, spec=f"local:{out}", stages=[], skipped=False,
                               card=SimpleNamespace(metrics={"final_train_loss": 1.5}))

    settings = ImproveSettings(parallel="auto", train_options={"max_steps": 1})
    state = _data_done(tmp_path, rows=1)
    round_runner = RoundRunner(settings, SimpleNamespace(train=trainer), None, [], tmp_path)
    result = round_runner._train(state, [])
    assert [c["max_steps"] for c in calls] == [1] and "parallel" not in calls[0]
    assert result["launch"] == {"parallel": "auto", "command": None, "note": (
        "in-process: no CUDA GPU on this machine (--parallel auto; --parallel ddp "
        "--num-processes N launches N CPU processes)")}


# -- a real launch -------------------------------------------------------------------------------


def _data_done(work: Path, rows: int) -> RoundState:
    """A round whose data stage finished: ``rows`` SFT rows in ``round-001/data``."""
    state = RoundState.open(work, 1)
    state.start(model="local", threshold=7.0)
    data = state.dir / "data"
    data.mkdir(parents=True)
    qa = [("Say hello in French.", "Bonjour!"), ("Name a yellow fruit.", "Banana.")]
    with (data / "sft.jsonl").open("w") as fh:
        for question, answer in (qa * rows)[:rows]:
            fh.write(json.dumps({"messages": [{"role": "user", "content": question},
                                              {"role": "assistant", "content": answer}]}) + "\n")
    (data / "manifest.json").write_text(json.dumps({"schema_version": 1,
                                                   "format": "trl-conversational"}))
    state.finish("grow", {"passed": rows, "samples": rows, "tasks": rows, "tasks_solved": rows,
                          "temperatures": [0.7]}, seconds=0.0)
    state.finish("hint", {"skipped": True, "retried": 0, "accepted": 0}, seconds=0.0)
    state.finish("data", {"sft_rows": rows, "pairs": 0, "dir": str(data)}, seconds=0.0)
    return state


@pytest.mark.slow
def test_a_round_launched_on_cpu_trains_through_accelerate_and_reads_the_model_back(
        tmp_path: Path) -> None:
    from agentic_loop.distill.loop.improve import ImproveBackend
    from agentic_loop.distill.train.model_card import read_card

    settings = ImproveSettings(parallel="ddp", num_processes=1, train_options={
        "max_steps": 1, "batch_size": 2, "max_length": 48, "lora_r": 4, "progress": False})
    state = _data_done(tmp_path, rows=2)
    read_back: list[Any] = []

    def trainer(data: Path, out: Path, **kwargs: Any) -> Any:  # the real one, its result kept
        read_back.append(ImproveBackend().train(data, out, **kwargs))
        return read_back[-1]

    round_runner = RoundRunner(settings, SimpleNamespace(train=trainer), None, [], tmp_path)
    result = round_runner._train(state, [])
    assert [r.skipped for r in read_back] == [True]  # trained there, only read back here
    state.finish("train", result, seconds=0.0)

    command = shlex.split(result["launch"]["command"])
    assert command[:4] == ["accelerate", "launch", "--config_file", str(config_file("ddp"))]
    assert command[4:9] == ["--num_processes", "1", "--mixed_precision", "no", "--cpu"]
    assert result["launch"]["note"] == "launched: ddp on 1 CPU process(es), no CUDA GPU here"
    log = (state.dir / "train.log").read_text()
    assert log.startswith(f"$ {result['launch']['command']}\n")
    model = state.dir / "model"
    card = read_card(model)  # written by the launched process, read back by the round
    assert result["model_dir"] == str(model) and result["spec"] == f"local:{model}"
    assert result["steps"] == 1 and card.stages[0]["steps"] == 1
    assert result["loss"] == card.metrics.get("final_train_loss")
    assert result["reused"] is False and (model / "config.json").is_file()
    saved = json.loads(state.path.read_text())["stages"]["train"]["result"]["launch"]
    assert saved == result["launch"]  # the state a person reads names the exact command
    report = round_report(state, settings)
    assert report.train is not None and report.train.steps == 1
    if "launch" in type(report.train).model_fields:  # once TrainSummary carries it
        assert result["launch"]["command"] in str(report.train.launch)  # type: ignore[attr-defined]


@pytest.mark.slow
def test_a_launch_that_fails_quotes_its_command_and_log(tmp_path: Path) -> None:
    from agentic_loop.distill.loop.improve import ImproveBackend

    settings = ImproveSettings(parallel="ddp", num_processes=1)
    state = _data_done(tmp_path, rows=1)
    with pytest.raises(TrainError, match=r"launched train stage failed \(exit \d+\): "
                                         r"accelerate launch .*train\.log") as error:
        launched_train(ImproveBackend().train, settings, state.dir / "data",
                       state.dir / "model", method="sft", base=f"local:{tmp_path / 'nope'}",
                       options=settings.train_kwargs("sft"), log=state.dir / "train.log")
    assert "nope" in str(error.value).split("train.log")[-1]  # the child's own reason
    assert not (state.dir / "model" / "model_card.yaml").exists()


# -- the refusals ----------------------------------------------------------------------------


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"parallel": "fsdp"}, "parallel (--parallel) fsdp with a LoRA adapter cannot work in "
                           "improve"),
    ({"parallel": "zero3"}, "pass --full"),
    ({"parallel": "tp"}, "parallel (--parallel) must be one of none, auto, ddp, fsdp, zero3"),
    ({"num_processes": 2}, "num_processes (--num-processes) 2 sizes a launched train stage"),
    ({"parallel": "ddp", "num_processes": 0}, "num_processes (--num-processes) must be at "
                                              "least 1"),
    ({"use_vllm": True}, "use_vllm and vllm_mode (--use-vllm, --vllm-mode) set GRPO's"),
    ({"method": "grpo", "vllm_mode": "remote"}, "vllm_mode (--vllm-mode) must be 'colocate' "
                                                "or 'server'"),
])
def test_settings_that_cannot_launch_are_refused_when_built(kwargs: dict[str, Any],
                                                            message: str) -> None:
    with pytest.raises(ConfigError) as error:
        ImproveSettings(**kwargs)
    assert message in str(error.value)


@pytest.mark.parametrize(("parallel", "gpus", "processes", "message"), [
    ("fsdp", 0, None, "parallel (--parallel) fsdp shards the model across CUDA GPUs, and this "
                      "machine has none"),
    ("ddp", 2, 4, "num_processes (--num-processes) 4 is more than the 2 GPU(s) this machine "
                  "has"),
    ("ddp", 0, 4096, "num_processes (--num-processes) 4096 is more than the"),
])
def test_what_this_machine_cannot_run_is_refused_before_a_round_samples(
        monkeypatch: pytest.MonkeyPatch, parallel: str, gpus: int, processes: int | None,
        message: str) -> None:
    _mock_gpus(monkeypatch, gpus)
    with pytest.raises(ConfigError) as error:
        preflight(ImproveSettings(parallel=parallel,  # type: ignore[arg-type]
                                  num_processes=processes, train_options=FULL))
    assert message in str(error.value)


def test_zero3_without_deepspeed_and_options_that_cannot_cross_are_refused(
        monkeypatch: pytest.MonkeyPatch) -> None:
    _mock_gpus(monkeypatch, 8)
    monkeypatch.setattr(parallel_module, "_deepspeed_installed", lambda: False)
    with pytest.raises(ConfigError, match="zero3 runs on DeepSpeed, which is not installed"):
        preflight(ImproveSettings(parallel="zero3", train_options=FULL))
    with pytest.raises(ConfigError, match=r"train options \['callbacks'\] cannot be passed"):
        preflight(ImproveSettings(parallel="ddp", train_options={"callbacks": [object()]}))


@pytest.mark.parametrize("command", [["improve", "--golden", "g.jsonl", "--tasks", "p.jsonl"],
                                     ["flywheel", "run", "--trajectories", "t", "--golden",
                                      "g.jsonl"]])
def test_the_clis_refuse_a_sharded_lora_round_in_one_line(tmp_path: Path,
                                                          command: list[str]) -> None:
    result = runner.invoke(app, [*command, "--registry", str(tmp_path / "reg"), "--parallel",
                                 "fsdp"])
    assert result.exit_code == 2, result.output
    assert "parallel (--parallel) fsdp with a LoRA adapter" in " ".join(result.stderr.split())
    assert "Traceback" not in result.output
    assert not (tmp_path / "reg").exists()


def test_the_clis_print_how_each_round_trains(monkeypatch: pytest.MonkeyPatch,
                                              tmp_path: Path) -> None:
    """``--help`` lists the flags; a bad ``--num-processes`` is refused naming it."""
    for command in (["improve", "--help"], ["flywheel", "run", "--help"]):
        help_text = runner.invoke(app, command, terminal_width=200).output
        assert all(flag in help_text for flag in ("--parallel", "--num-processes",
                                                  "--use-vllm", "--vllm-mode")), command
    result = runner.invoke(app, ["improve", "--golden", "g.jsonl", "--tasks", "p.jsonl",
                                 "--num-processes", "2"])
    assert result.exit_code == 2 and "--num-processes" in result.stderr
