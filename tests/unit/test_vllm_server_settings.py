"""GRPO on a vLLM server: ``--vllm-server-url`` reaches TRL's ``GRPOConfig`` from every entry.

The URL goes train settings -> ``grpo_config_kwargs`` -> a real ``trl.GRPOConfig``; the launched
``train`` command line and ``train --dry-run`` carry it; improve (and the flywheel's round)
pass it to the trainer. Refused, naming the flag: a URL without ``--vllm-mode server``, with
``--no-vllm``, for a method other than GRPO, or one that is not http(s). The GPU count is a
mocked ``Device.detect`` (the only way to see a 4-GPU command on a CPU machine).
"""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from agentic_loop.cli import app
from agentic_loop.distill.loop.launch import plan_launch
from agentic_loop.distill.loop.settings import ImproveSettings
from agentic_loop.distill.train import Device, TrainSettings, grpo_config_kwargs
from agentic_loop.errors import ConfigError

runner = CliRunner()
URL = "http://gpu-box:8000"
SERVER = {"method": "grpo", "use_vllm": True, "vllm_mode": "server"}


def _mock_gpus(monkeypatch: pytest.MonkeyPatch, gpus: int) -> None:
    monkeypatch.setattr(Device, "detect", classmethod(
        lambda cls: Device(gpus=gpus, bf16=True, vllm=True)))


def test_the_url_reaches_a_real_grpo_config(tmp_path: Path) -> None:
    from trl import GRPOConfig

    settings = TrainSettings(**SERVER, vllm_server_base_url=URL)
    kwargs = grpo_config_kwargs(settings, Device(gpus=1, bf16=True, vllm=True), tmp_path)
    assert (kwargs["vllm_mode"], kwargs["vllm_server_base_url"]) == ("server", URL)
    kwargs.update(bf16=False, use_cpu=True)  # this CPU machine cannot build a bf16 config
    config = GRPOConfig(**kwargs)
    assert (config.use_vllm, config.vllm_mode, config.vllm_server_base_url) == (
        True, "server", URL)
    # no URL: TRL's host and port; colocate: no server keys at all
    plain = grpo_config_kwargs(TrainSettings(**SERVER), Device(gpus=1, vllm=True), tmp_path)
    assert "vllm_server_base_url" not in plain
    # where generation runs does not change the model: same fingerprint, the card keeps it
    assert settings.fingerprint("d") == TrainSettings(**SERVER).fingerprint("d")
    assert settings.hyperparameters()["vllm_server_base_url"] == URL
    assert "vllm_server_base_url" not in TrainSettings(**SERVER).hyperparameters()


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"method": "grpo", "vllm_mode": "colocate"},
     "vllm_server_base_url (--vllm-server-url) names the server of --vllm-mode server, got "
     "vllm_mode='colocate'"),
    ({**SERVER, "use_vllm": False}, "--no-vllm turns vLLM off"),
])
def test_a_url_without_a_server_to_reach_is_refused(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError) as error:
        TrainSettings(**kwargs, vllm_server_base_url=URL)
    assert message in str(error.value)
    with pytest.raises(ConfigError) as error:
        ImproveSettings(**kwargs, vllm_server_base_url=URL)
    assert message in str(error.value)


@pytest.mark.parametrize("url", ["gpu-box:8000", "ftp://gpu-box", "http://", ""])
def test_a_url_that_is_not_http_is_refused(url: str) -> None:
    with pytest.raises(ConfigError, match=r"must be an http\(s\) URL"):
        TrainSettings(**SERVER, vllm_server_base_url=url)


def test_train_dry_run_and_its_launch_line_carry_the_url(monkeypatch: pytest.MonkeyPatch,
                                                         tmp_path: Path) -> None:
    _mock_gpus(monkeypatch, 4)
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text(json.dumps({"task": "Name one color.", "constraints": {"exact_words": 1}})
                     + "\n")
    args = ["train", "--data", str(tasks), "--out", str(tmp_path / "m"), "--method", "grpo",
            "--use-vllm", "--vllm-mode", "server", "--vllm-server-url", URL]
    result = runner.invoke(app, [*args, "--dry-run"], terminal_width=400)
    assert result.exit_code == 0, result.output
    assert f'"vllm_server_base_url": "{URL}"' in result.output
    line = next(r for r in result.output.splitlines() if r.startswith("command: "))
    command = shlex.split(line.removeprefix("command: "))
    assert command[:2] == ["accelerate", "launch"]
    train = command[command.index("train"):]
    assert train[train.index("--vllm-mode"):] == ["--vllm-mode", "server",
                                                   "--vllm-server-url", URL]
    # each launched process reads the same settings back (the same dry run, the same line)
    again = runner.invoke(app, [*train, "--dry-run"], terminal_width=400)
    assert again.exit_code == 0 and line in again.output.splitlines()
    assert not (tmp_path / "m").exists()


@pytest.mark.parametrize(("args", "message"), [
    (["--vllm-server-url", URL], "--vllm-server-url apply to --method grpo only"),
    (["--method", "grpo", "--vllm-server-url", URL], "names the server of --vllm-mode server"),
])
def test_train_refuses_a_url_it_cannot_use_in_one_line(args: list[str], message: str) -> None:
    result = runner.invoke(app, ["train", "--data", "d", "--out", "o", *args])
    assert result.exit_code == 2, result.output
    assert message in " ".join(result.stderr.split())


def test_improve_passes_the_url_to_the_trainer_and_the_launch(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    _mock_gpus(monkeypatch, 4)
    settings = ImproveSettings(**SERVER, vllm_server_base_url=URL, parallel="ddp",
                               train_options={"batch_size": 4})
    options = settings.train_kwargs("grpo")
    assert options["vllm_server_base_url"] == URL
    assert "vllm_server_base_url" not in settings.train_kwargs("sft")
    command = plan_launch(settings, tmp_path / "pool.jsonl", tmp_path / "m", method="grpo",
                          base="local", options=options).command or ()
    assert list(command[-4:-2]) == ["--vllm-server-url", URL]
    # a resume may point at a moved server
    moved = ImproveSettings(**SERVER, vllm_server_base_url="https://other:9000",
                            parallel="ddp", train_options={"batch_size": 4})
    assert moved.fingerprint("s") == settings.fingerprint("s")
    with pytest.raises(ConfigError, match=r"vllm_server_base_url \(--vllm-server-url\) is "
                                          "GRPO's vLLM server; method 'sft'"):
        ImproveSettings(vllm_server_base_url=URL)
    # the improve CLI passes the flag: its launch line, printed before any round, carries it
    result = runner.invoke(app, ["improve", "--golden", str(tmp_path / "g.jsonl"), "--tasks",
                                 str(tmp_path / "p.jsonl"), "--registry", str(tmp_path / "r"),
                                 "--work", str(tmp_path / "w"), "--method", "grpo",
                                 "--use-vllm", "--vllm-mode", "server", "--vllm-server-url",
                                 URL, "--parallel", "ddp"], terminal_width=400)
    assert f"--vllm-server-url {URL} --parallel ddp" in result.output


@pytest.mark.parametrize("command", [["improve", "--golden", "g.jsonl", "--tasks", "p.jsonl"],
                                     ["flywheel", "run", "--trajectories", "t", "--golden",
                                      "g.jsonl"]])
def test_improve_and_the_flywheel_refuse_a_url_without_server_mode(
        tmp_path: Path, command: list[str]) -> None:
    result = runner.invoke(app, [*command, "--registry", str(tmp_path / "reg"), "--method",
                                 "grpo", "--vllm-server-url", URL])
    assert result.exit_code == 2, result.output
    assert "--vllm-server-url) names the server of --vllm-mode server" in " ".join(
        result.stderr.split())
    assert not (tmp_path / "reg").exists()
