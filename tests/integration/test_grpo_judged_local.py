"""GRPO with a judged reward part on the real embedded model, on CPU: one step, tiny budget.

The judge (default: the base model, loaded once through the in-process
engine) ranks each prompt's group under the structured-output grammar; its
part is logged beside the checks' part, and the card names the judge and
both parts.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from agentic_loop.distill.train import train
from agentic_loop.distill.train.judged_reward import RANK
from agentic_loop.distill.train.model_card import read_card

pytestmark = pytest.mark.slow

TASKS = [
    "Write a motto in exactly 3 words.",  # its stated check, and the task rubric's judged features
    "Describe the sea.",  # no check: the judge alone rewards it
]


def test_a_grpo_step_with_the_judge_ranking_each_group(tmp_path: Path) -> None:
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text("".join(t + "\n" for t in TASKS))
    out = tmp_path / "grpo"
    result = train(tasks, out, method="grpo", max_steps=1, num_generations=2, batch_size=2,
                   max_completion_length=8, learning_rate=1e-5, progress=False,
                   judged_reward="rank")
    assert result.stages[0].steps == 1
    card = read_card(out)
    assert card.hyperparameters["judged_reward"] == "rank"
    reward = card.reward
    assert reward is not None
    functions = {f["name"]: f["weight"] for f in reward["functions"]}
    assert functions["rubric"] == 1.0 and functions[RANK] == 1.0
    judged = reward["judged"]
    assert judged["kind"] == "rank" and judged["judge"]
    # a ranking that failed after its retries is counted, never a crash
    assert judged["groups"] + judged["failed_groups"] == 1
    assert reward["errors"][RANK]["calls"] == 2
    assert any("go to the judge" in note for note in reward["notes"])
    row = reward["per_step"][0]
    if judged["groups"]:
        assert 0.0 <= row[RANK] <= 1.0 and judged["mean_consistency"] is not None
