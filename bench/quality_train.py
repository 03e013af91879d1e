"""The quality bench's two training rounds: one SFT distill round and GRPO at the same budget.

Why here and not in ``quality.py``: the rows only need "a trained model, and
what training cost"; how the data is exported and how GRPO is stopped on a
wall-clock budget are details of their own.

* SFT: the train pass's trajectories -> PII gate, curation -> ``sft.jsonl``
  -> LoRA SFT for ``steps`` optimizer steps, merged (``distill.train.train``).
* GRPO: the train tasks themselves, each task's own checks as the reward,
  LoRA GRPO stopped at the first step that ends past the SFT round's
  ``trainer.train()`` seconds (the same budget; its step count without one).

Nothing here sees a held-out task.

Example:
    >>> budget_note(None, 20)
    '20 steps (no SFT round to match)'
    >>> budget_note(61.4, 20)
    "61s budget (the SFT round's)"
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rich.console import Console

from agentic_loop.tasks.spec import TaskSpec


@dataclass
class Trained:
    """A trained model folder (None when skipped) and what its round did."""

    spec: str | None
    info: dict[str, Any] = field(default_factory=dict)


def budget_note(budget: float | None, steps: int) -> str:
    """How the GRPO round is bounded, for the console and the report."""
    return f"{budget:.0f}s budget (the SFT round's)" if budget else \
        f"{steps} steps (no SFT round to match)"


def sft_round(trajectories: Path, work: Path, *, steps: int, lora: bool, pii: str,
              embedder: Any, console: Console) -> Trained:
    """Export the train trajectories and run one SFT round; the reason when there is no data."""
    from agentic_loop.distill import export_datasets
    from agentic_loop.distill.data.errors import EmptyExportError
    from agentic_loop.distill.train import train

    info: dict[str, Any] = {"method": "sft", "lora": lora, "steps": steps, "sft_rows": 0,
                            "pairs": 0}
    t0 = time.perf_counter()
    try:
        with console.status("exporting train trajectories (PII gate, curation, SFT + DPO)"):
            report = export_datasets([trajectories], work / "data", pii=pii, min_score=0.8,
                                     embedder=embedder)
    except EmptyExportError as exc:
        info["skipped"] = str(exc)
        return Trained(None, info)
    info.update(sft_rows=report.sft_rows, pairs=report.pairs)
    if not report.sft_rows:
        info["skipped"] = "no SFT rows (nothing accepted on the train pass)"
        return Trained(None, info)
    console.print(f"distilling: {report.sft_rows} SFT rows, {steps} steps")
    trained = train(work / "data", work / "model-sft", method="sft", base="local", lora=lora,
                    max_steps=steps, max_length=256, progress=True)
    stage = trained.stages[0]
    info.update(train_s=round(time.perf_counter() - t0, 1),
                train_loop_s=round(stage.runtime_s, 1),
                first_loss=stage.metrics.get("first_loss"),
                last_loss=stage.metrics.get("last_loss"))
    return Trained(str(trained.spec), info)


def grpo_round(tasks: Sequence[TaskSpec], work: Path, *, budget_s: float | None, steps: int,
               generations: int, completion_tokens: int, lora: bool,
               console: Console) -> Trained:
    """LoRA GRPO on ``tasks`` (their checks as the reward) for ``budget_s`` seconds."""
    from transformers import TrainerCallback

    from agentic_loop.distill.train import train

    class WallClock(TrainerCallback):  # type: ignore[misc]
        """Stop at the first step end past the budget (the SFT round's trainer.train time)."""

        def on_train_begin(self, args: Any, state: Any, control: Any, **kw: Any) -> Any:
            self.t0 = time.perf_counter()

        def on_step_end(self, args: Any, state: Any, control: Any, **kw: Any) -> Any:
            if budget_s is not None and time.perf_counter() - self.t0 >= budget_s:
                control.should_training_stop = True
            return control

    path = work / "grpo-tasks.jsonl"
    path.write_text("".join(s.model_dump_json(by_alias=True) + "\n" for s in tasks))
    console.print(f"GRPO: {len(tasks)} train tasks, {generations} generations per prompt, "
                  + budget_note(budget_s, steps))
    t0 = time.perf_counter()
    trained = train(path, work / "model-grpo", method="grpo", base="local", lora=lora,
                    max_steps=10_000 if budget_s else steps, num_generations=generations,
                    batch_size=2 * generations, max_completion_length=completion_tokens,
                    progress=True, callbacks=[WallClock()])
    stage, reward = trained.stages[0], trained.card.reward or {}
    info = {"method": "grpo", "lora": lora, "num_generations": generations,
            "prompts_per_step": 2, "budget_s": budget_s,
            "train_s": round(time.perf_counter() - t0, 1),
            "train_loop_s": round(stage.runtime_s, 1), "steps": stage.steps,
            "learning_rate": trained.card.hyperparameters.get("learning_rates", {}).get("grpo"),
            "reward_per_step": [row["reward"] for row in reward.get("per_step", [])],
            "reward_errors": sum(f["errors"] for f in reward.get("errors", {}).values())}
    return Trained(str(trained.spec), info)
