"""GRPO on the real embedded model, on CPU: a few steps with the rubric as the reward.

Two optimizer steps, two generations per prompt, eight completion tokens:
the smallest run that goes through generation, the reward functions, a
checkpoint, a resume, saving and the model card. The trained folder must
load with ``load_chat_model("local:<dir>")`` and answer.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from transformers import TrainerCallback

from agentic_loop.distill.train import train
from agentic_loop.distill.train.model_card import read_card
from agentic_loop.models import load_chat_model

pytestmark = pytest.mark.slow

TASKS = [
    {"task": "Name one color.", "constraints": {"exact_words": 1}},
    {"task": "Say hello in lowercase letters.", "constraints": {"lowercase": True}},
    "Write a motto in exactly 3 words.",  # no rubric: rewarded on the constraint it states
]


class _Interrupt(Exception):
    pass


class _StopAfterFirstSave(TrainerCallback):
    def on_save(self, args, state, control, **kwargs):
        raise _Interrupt(f"simulated crash after saving step {state.global_step}")


def test_grpo_steps_write_a_loadable_model_whose_card_lists_the_rewards(tmp_path: Path) -> None:
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text("\n".join(json.dumps(t) if isinstance(t, dict) else t for t in TASKS) + "\n")
    out = tmp_path / "grpo"
    kw = dict(method="grpo", max_steps=2, num_generations=2, batch_size=2,
              max_completion_length=8, save_steps=1, learning_rate=1e-5, progress=False)
    with pytest.raises(_Interrupt):
        train(tasks, out, callbacks=[_StopAfterFirstSave()], **kw)
    assert (out / "checkpoints" / "grpo" / "checkpoint-1").is_dir()
    result = train(tasks, out, **kw)
    stage = result.stages[0]
    assert (stage.method, stage.steps, stage.resumed_from) == ("grpo", 2, "checkpoint-1")
    assert not (out / "checkpoints").exists()

    card = read_card(out)
    assert card.method == "grpo" and card.data.prompts == 3
    assert card.prompt_format["parts"] == ["task", "requirements"]
    functions = {f["name"]: f["weight"] for f in card.reward["functions"]}
    assert functions == {"rubric": 1.0, "exact_words": 0.0, "lowercase": 0.0}
    assert card.reward["errors"]["rubric"]["errors"] == 0
    assert card.reward["errors"]["rubric"]["calls"] >= 2
    assert [row["step"] for row in card.reward["per_step"]] == [1, 2]
    assert all(0.0 <= row["rubric"] <= 1.0 for row in card.reward["per_step"])
    assert any("states" in note for note in card.reward["notes"])
    assert card.hyperparameters["num_generations"] == 2 and card.hyperparameters["beta"] == 0.04
    assert (out / card.reward["curve"]).stat().st_size > 1000

    text = load_chat_model(f"local:{out}", temperature=0.0, max_tokens=8).invoke(
        "Name one color.").content
    assert isinstance(text, str) and text.strip()
