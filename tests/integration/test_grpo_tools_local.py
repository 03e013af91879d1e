"""GRPO with tools on the real embedded model, on CPU, with LoRA: one step on two tool tasks.

Two tasks x two generations, each an episode where the policy's first turn is a forced
call (the calculator or the lookup, run for real), the result is appended as tokens and the
policy answers; the task's locked rubric scores the episode. The smallest run that goes
through the rollout, the reward over episodes, a LoRA step, saving and the model card.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from agentic_loop.distill.train import train
from agentic_loop.distill.train.model_card import read_card
from agentic_loop.tasks.tool_tasks import tool_tasks

pytestmark = pytest.mark.slow


def test_a_grpo_round_with_tools_writes_a_model_and_the_tool_use_rate(tmp_path: Path) -> None:
    tasks = tmp_path / "tool_tasks.jsonl"
    tasks.write_text("".join(t.model_dump_json(by_alias=True) + "\n"
                             for t in tool_tasks(2, split="train")))
    out = tmp_path / "grpo-tools"
    result = train(tasks, out, method="grpo", lora=True, max_steps=1, num_generations=2,
                   batch_size=4, max_completion_length=48, learning_rate=1e-5, progress=False)
    stage = result.stages[0]
    assert (stage.method, stage.steps) == ("grpo", 1)
    assert (out / "model.safetensors").is_file() and (out / "config.json").is_file()

    card = read_card(out)
    tools = card.reward["tools"]
    assert tools["episodes"] == 4 and tools["first_call_forced"] is True
    assert tools["tools"] == ["calculator", "lookup"]
    assert 0.0 <= tools["tool_use_rate"] <= 1.0 and tools["turns_per_episode"] >= 1.0
    metrics = card.stages[0]["metrics"]
    assert metrics["tool_use_rate"] == tools["tool_use_rate"]
    assert "tool_call_validity" in metrics and "turns_per_episode" in metrics
    assert "tool_use_rate" in card.reward["per_step"][0]
    assert card.reward["errors"]["rubric"]["errors"] == 0
    assert any("carry tools" in note for note in card.reward["notes"])
