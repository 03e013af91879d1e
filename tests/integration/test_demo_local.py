"""The demo end to end on the real embedded model, shrunk: both loops, two improve rounds.

Six tasks (four train, two held-out), 16 new tokens, one refine round, one
sample per task and one LoRA step per round, and a score bar of 0 so every
round has something to train on: what ``make demo`` runs, in a few minutes.
The checks are on what a user reads: the per-round table in the console,
the improve curve in the output folder, and the rounds in ``report.json``.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from rich.console import Console

from agentic_loop.demo.run import DemoOptions, run_demo
from agentic_loop.distill.release import Registry

pytestmark = pytest.mark.slow


def test_demo_runs_both_loops_then_two_improve_rounds(tmp_path: Path) -> None:
    opts = DemoOptions(n_tasks=6, held_out=0.34, max_tokens=16, max_iterations=1, concurrency=4,
                       train_steps=1, rounds=2, samples=1, thresholds=(0.0, 0.0))
    console = Console(record=True, width=220)
    result = run_demo(tmp_path / "demo", opts, console=console)

    assert [p["name"] for p in result["phases"]] == [
        "single-shot", "Reflection", "ArchiveRefine (cold)", "ArchiveRefine (warm)"]
    rounds = result["improve"]["rounds"]
    assert [r["round"] for r in rounds] == [1, 2], result["improve"]["reason"]
    assert result["improve"]["stopped"] == "rounds"
    for r in rounds:
        assert r["sft_rows"] >= 1 and r["train_steps"] == 1
        assert r["pool"]["n"] == 4 and r["golden_after"]["n"] == 2
        low, high = r["golden_after"]["interval"]
        assert 0.0 <= low <= r["golden_after"]["pass_rate"] <= high <= 1.0
        assert r["decision"] in ("PROMOTE", "MANUAL_REVIEW", "ROLLBACK")
    registry = Registry(tmp_path / "demo" / "registry")
    assert [v.version for v in registry.versions()] == ["v1", "v2", "v3"]
    assert [r["version"] for r in rounds] == ["v2", "v3"]

    curve = Path(result["improve"]["plot"])
    assert curve == tmp_path / "demo" / "improve" / "improve.png" and curve.stat().st_size > 1000
    on_disk = json.loads((tmp_path / "demo" / "report.json").read_text())
    assert on_disk["improve"]["rounds"] == json.loads(json.dumps(rounds))
    text = console.export_text()
    assert "training-time loop: improve rounds" in text and "held-out after" in text
