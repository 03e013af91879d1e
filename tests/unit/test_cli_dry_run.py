"""``train --dry-run`` (and ``distill --data --dry-run``) print the trainer arguments, as the
README says: each stage's TRL config keywords, LoRA's settings and the launch command.
"""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from agentic_loop.cli import app

runner = CliRunner()


def _configs(output: str) -> dict[str, dict[str, object]]:
    found = {}
    for line in output.splitlines():
        name, sep, rest = line.partition("Config: ")
        if sep and name in ("SFT", "DPO", "GRPO"):
            found[name] = json.loads(rest)
    return found


def test_train_dry_run_prints_each_stage_trainer_arguments(tmp_path: Path) -> None:
    out = tmp_path / "m"
    result = runner.invoke(app, ["train", "--data", str(tmp_path), "--out", str(out),
                                 "--method", "sft+dpo", "--lora", "--lora-r", "8",
                                 "--learning-rate", "1e-4", "--max-steps", "7", "--beta", "0.2",
                                 "--dry-run"], terminal_width=300)
    assert result.exit_code == 0, result.output
    configs = _configs(result.output)
    assert set(configs) == {"SFT", "DPO"}
    assert configs["SFT"]["learning_rate"] == 1e-4 and configs["SFT"]["max_steps"] == 7
    assert configs["SFT"]["output_dir"] == str(out / "checkpoints" / "sft")
    assert configs["DPO"]["beta"] == 0.2 and "beta" not in configs["SFT"]
    assert "LoRA: r=8, alpha=32" in result.output
    assert "command: agentic-loop train" in result.output
    assert not out.exists()


def test_distill_data_dry_run_prints_them_too(tmp_path: Path) -> None:
    result = runner.invoke(app, ["distill", "--data", str(tmp_path), "--out",
                                 str(tmp_path / "m"), "--dry-run"], terminal_width=300)
    assert result.exit_code == 0, result.output
    assert set(_configs(result.stdout)) == {"SFT"}
