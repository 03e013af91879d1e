"""The demo end to end on the real embedded model, shrunk, then the README's training block on it.

A small demo (20 held-out tasks, the gate's minimum; 12 train tasks, best-of-4,
2 LoRA steps, one round) runs through the CLI in a scratch folder, as ``make
demo`` does from the repository root; then every command of the README's
training-loop block runs there as written, parsed from README.md so this test
fails when the README drifts. Two substitutions keep it short, and are the
only ones: ``--max-steps 30`` becomes ``--max-steps 2``, and ``serve`` (it needs
the vLLM venv, ``make vllm``) is left out. ``registry promote`` may refuse a
version whose gate said MANUAL_REVIEW or ROLLBACK (it must then say ``--force``).
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
CLI = str(Path(sys.executable).parent / "agentic-loop")


def training_block(readme: Path = ROOT / "README.md") -> list[str]:
    """The commands of the first bash block under '## The training loop' (comments dropped)."""
    text = readme.read_text(encoding="utf-8")
    section = text.split("\n## The training loop", 1)[1].split("\n## ", 1)[0]
    block = re.search(r"```bash\n(.*?)```", section, re.S)
    assert block, "README's training-loop section has no ```bash block"
    joined = block.group(1).replace("\\\n", " ")
    lines = [line.split(" #", 1)[0].strip() for line in joined.splitlines()]
    return [line for line in lines if line and not line.startswith("#")]


def _run(args: list[str], cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, timeout=900)


def test_the_readme_block_is_found_and_names_the_demos_outputs() -> None:
    commands = training_block()
    assert any(c.startswith("agentic-loop export --trajectories runs/demo/") for c in commands)
    assert any("--max-steps 30" in c for c in commands)


def test_a_small_demo_then_the_readmes_training_block_as_written(tmp_path: Path) -> None:
    env = {**os.environ, "AGENTIC_LOOP_DATA": str(tmp_path / "data"), "COLUMNS": "80"}
    shutil.copytree(ROOT / "examples", tmp_path / "examples")
    demo = _run([CLI, "demo", "--held-out", "20", "--train-tasks", "12", "--samples", "4",
                 "--train-steps", "2", "--rounds", "1", "--concurrency", "8"], tmp_path, env)
    assert demo.returncode == 0, demo.stdout + demo.stderr
    lines = [line for line in demo.stdout.splitlines() if line.strip()]
    assert "held-out tasks against the base model's" in " ".join(lines[-3:]), demo.stdout
    assert max(len(line) for line in lines) <= 80, demo.stdout
    report = json.loads((tmp_path / "runs" / "demo" / "report.json").read_text())
    assert report["held_out"]["tasks"] == 20 and report["closing"]

    for command in training_block():
        args = shlex.split(command.replace("--max-steps 30", "--max-steps 2"))
        if args[1] == "serve":
            continue
        result = _run([CLI, *args[1:]], tmp_path, env)
        said = result.stdout + result.stderr
        if args[1:3] == ["registry", "promote"] and result.returncode != 0:
            assert "--force" in said, (command, said)
            continue
        assert result.returncode == 0, (command, said)
    assert (tmp_path / "runs" / "v1" / "model_card.yaml").is_file()
