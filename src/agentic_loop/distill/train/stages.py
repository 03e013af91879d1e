"""One trainer stage (SFT or DPO): load the model, train with TRL, save, and report.

GRPO is a stage too (:mod:`agentic_loop.distill.train.grpo`); it shares the
loading, arguments and saving defined here.

Why a module of its own: :func:`~agentic_loop.distill.train.trainer.train`
decides *what* runs (stages, resume, the model card); this module is *how*
one stage runs on TRL, PEFT and transformers, all imported inside the
functions so that importing the package never loads torch.

Example (the record one stage leaves, as the model card keeps it):
    >>> r = StageResult("sft", steps=10, train_loss=1.5, runtime_s=2.0, tokens=400,
    ...                 resumed_from=None, metrics={})
    >>> r.tokens_per_s, StageResult.from_dict(r.to_dict()) == r
    (200.0, True)
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agentic_loop.distill.train.settings import TrainSettings, split_validation
from agentic_loop.distill.train.tool_format import training_rows
from agentic_loop.distill.train.training_data import TrainingData, TrainingDataError

__all__ = ["StageResult", "common_args", "load_policy", "load_tokenizer", "lora_config",
           "no_final_checkpoint", "run_stage", "save_model", "trainer_kwargs"]


@dataclass(frozen=True)
class StageResult:
    """What one trainer stage did."""

    method: str
    steps: int
    train_loss: float | None
    runtime_s: float
    tokens: int | None
    resumed_from: str | None
    metrics: dict[str, Any]

    @property
    def tokens_per_s(self) -> float | None:
        """Training throughput in input tokens per second (None when not counted)."""
        if not self.tokens or self.runtime_s <= 0:
            return None
        return self.tokens / self.runtime_s

    def to_dict(self) -> dict[str, Any]:
        """Plain data for the model card."""
        return {"method": self.method, "steps": self.steps, "train_loss": self.train_loss,
                "runtime_s": round(self.runtime_s, 3), "tokens": self.tokens,
                "tokens_per_s": None if self.tokens_per_s is None else round(self.tokens_per_s, 2),
                "resumed_from": self.resumed_from, "metrics": self.metrics}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> StageResult:
        """Rebuild from :meth:`to_dict` (a finished stage read back when resuming)."""
        return cls(data["method"], data["steps"], data.get("train_loss"), data["runtime_s"],
                   data.get("tokens"), data.get("resumed_from"), data.get("metrics", {}))



def run_stage(stage: str, model_dir: Path, stage_out: Path, data: TrainingData,
               config: TrainSettings, precision: str, checkpoint_dir: Path, resume: bool,
               progress: bool, callbacks: Sequence[Any], state: Any, *, merge: bool) -> StageResult:
    """Train one stage from ``model_dir`` and save the result to ``stage_out``."""
    from datasets import Dataset
    from transformers.trainer_utils import get_last_checkpoint

    # Tool rows are rendered for this tokenizer's template before the weights load: a row the
    # chosen format cannot show fails in seconds. Split first: an episode's turns stay together.
    tokenizer = load_tokenizer(model_dir)
    rows, held_out = split_validation(data.sft if stage == "sft" else data.pairs,
                                      config.validation_split, seed=config.seed)
    train_rows = training_rows(stage, rows, config.tool_format, tokenizer.chat_template)
    eval_rows = training_rows(stage, held_out, config.tool_format, tokenizer.chat_template)
    _some_row_fits(stage, train_rows.rows, tokenizer, config.max_length)
    model, tokenizer = load_policy(model_dir, config, precision, tokenizer)
    args = _trainer_args(stage, config, precision, checkpoint_dir, progress)
    peft_config = lora_config(config) if config.lora else None
    dataset = Dataset.from_list(train_rows.rows)
    eval_dataset = Dataset.from_list(eval_rows.rows) if eval_rows.rows else None
    trainer: Any
    if stage == "sft":
        from trl import SFTTrainer

        trainer = SFTTrainer(model=model, args=args, train_dataset=dataset,
                             eval_dataset=eval_dataset, processing_class=tokenizer,
                             peft_config=peft_config, callbacks=list(callbacks))
    else:
        from trl import DPOTrainer

        # With LoRA the reference is the base with the adapter switched off (no copy);
        # without it TRL keeps a frozen copy of the starting model as the reference.
        trainer = DPOTrainer(model=model, args=args, train_dataset=dataset,
                             eval_dataset=eval_dataset, processing_class=tokenizer,
                             peft_config=peft_config, callbacks=list(callbacks))
    trainer.add_callback(no_final_checkpoint())
    last = get_last_checkpoint(str(checkpoint_dir)) if resume and checkpoint_dir.is_dir() else None
    begun = time.perf_counter()
    output = trainer.train(resume_from_checkpoint=last)
    runtime = time.perf_counter() - begun
    held_out_metrics = trainer.evaluate() if eval_dataset is not None else {}
    save_model(trainer, tokenizer, stage_out, lora=config.lora, merge=merge, state=state)
    metrics = {k: (round(v, 6) if isinstance(v, float) else v)
               for k, v in {**output.metrics, **held_out_metrics}.items()}
    metrics.update(train_rows.metrics())  # the card says how tool rows were shown
    history = [h for h in trainer.state.log_history if "loss" in h]
    if history:
        metrics["first_loss"] = round(float(history[0]["loss"]), 6)
        metrics["last_loss"] = round(float(history[-1]["loss"]), 6)
        for key in ("rewards/accuracies", "rewards/margins", "mean_token_accuracy"):
            if key in history[-1]:
                metrics[key] = round(float(history[-1][key]), 6)
    tokens = int(trainer.state.num_input_tokens_seen or 0) or None
    return StageResult(stage, int(output.global_step), float(output.training_loss), runtime, tokens,
                       Path(last).name if last else None, metrics)


def load_tokenizer(model_dir: Path) -> Any:
    """The tokenizer of ``model_dir``, with a pad token (its EOS when it has none)."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    return tokenizer


def _some_row_fits(stage: str, rows: Sequence[dict[str, Any]], tokenizer: Any,
                   max_length: int | None) -> None:
    """Refuse, before the weights load, a stage none of whose prompts fits in ``max_length``
    tokens: TRL would drop every row and fail deep inside with an empty sampler.

    >>> class Chars:  # one token per character
    ...     def apply_chat_template(self, messages, **kwargs):
    ...         return list("".join(m["content"] for m in messages))
    >>> _some_row_fits("sft", [{"prompt": [{"role": "user", "content": "x" * 9}]}], Chars(), 4)
    ... # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    agentic_loop.distill.train.training_data.TrainingDataError: every sft row's prompt ... above 9
    """
    if max_length is None or not rows:
        return
    import json

    def prompt_tokens(row: dict[str, Any]) -> int:
        tools = row.get("tools")
        ids = tokenizer.apply_chat_template(
            row["prompt"], tokenize=True, add_generation_prompt=True,
            tools=json.loads(tools) if isinstance(tools, str) else tools)
        return len(ids["input_ids"] if isinstance(ids, Mapping) else ids)

    shortest = min(prompt_tokens(row) for row in rows)
    if shortest >= max_length:
        raise TrainingDataError(
            f"every {stage} row's prompt is longer than max_length={max_length} tokens (the "
            f"shortest has {shortest}); raise --max-length above {shortest}")


def load_policy(model_dir: Path, config: TrainSettings, precision: str,
                tokenizer: Any = None) -> tuple[Any, Any]:
    """The model to train and its tokenizer (fp32 weights; mixed precision is the trainer's)."""
    import torch
    from transformers import AutoModelForCausalLM, set_seed

    if precision == "fp32":
        from agentic_loop.models.local import default_num_threads

        torch.set_num_threads(default_num_threads())
    set_seed(config.seed)
    tokenizer = tokenizer if tokenizer is not None else load_tokenizer(model_dir)
    return AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32), tokenizer


def no_final_checkpoint() -> Any:
    from transformers import TrainerCallback

    class NoFinalCheckpoint(TrainerCallback):
        """Skip the checkpoint the trainer writes when training ends off a save step.

        The finished model is saved right after, and its checkpoint (weights plus
        optimizer state: ~3x the model's size for full fine-tuning) would be
        deleted a moment later.
        """

        def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> Any:
            if state.global_step >= state.max_steps and state.global_step % args.save_steps:
                control.should_save = False
            return control

    return NoFinalCheckpoint()


def common_args(stage: str, config: TrainSettings, precision: str, checkpoint_dir: Path,
                progress: bool) -> dict[str, Any]:
    """The ``TrainingArguments`` every stage shares (SFT, DPO and GRPO configs take them all)."""
    return {
        "output_dir": str(checkpoint_dir),
        "per_device_train_batch_size": config.batch_size,
        "gradient_accumulation_steps": config.gradient_accumulation_steps,
        "learning_rate": config.learning_rate_for(stage),
        "num_train_epochs": config.epochs,
        "max_steps": config.max_steps if config.max_steps is not None else -1,
        "seed": config.seed,
        "data_seed": config.seed,
        "use_cpu": precision == "fp32",
        "bf16": precision == "bf16",
        "fp16": precision == "fp16",
        "gradient_checkpointing": config.gradient_checkpointing,
        "logging_steps": 1,
        "save_strategy": "steps",
        "save_steps": config.save_steps,
        "save_total_limit": 2,
        "lr_scheduler_type": config.lr_scheduler_type,
        "warmup_steps": config.warmup_steps,
        "report_to": config.reporters or "none",
        # a held-out share (sft, dpo) is scored every save and at the end (see run_stage)
        **({"eval_strategy": "steps", "eval_steps": config.save_steps,
            "per_device_eval_batch_size": config.batch_size}
           if config.validation_split and stage != "grpo" else {}),
        "disable_tqdm": not progress,
        "dataloader_num_workers": 0,
        # Every trainable weight is used in each forward pass (checked under torchrun with
        # LoRA and full models); the default True costs an extra autograd traversal per step.
        "ddp_find_unused_parameters": False,
    }


def trainer_kwargs(stage: str, config: TrainSettings, precision: str, checkpoint_dir: Path,
                   progress: bool = True) -> dict[str, Any]:
    """The keyword arguments of the SFT or DPO stage's TRL config (``--dry-run`` prints them)."""
    return {**common_args(stage, config, precision, checkpoint_dir, progress),
            "max_length": config.max_length, "include_num_input_tokens_seen": "non_padding",
            **({"beta": config.beta_for("dpo")} if stage == "dpo" else {})}


def _trainer_args(stage: str, config: TrainSettings, precision: str, checkpoint_dir: Path,
                  progress: bool) -> Any:
    kwargs = trainer_kwargs(stage, config, precision, checkpoint_dir, progress)
    if stage == "sft":
        from trl import SFTConfig

        return SFTConfig(**kwargs)
    from trl import DPOConfig

    return DPOConfig(**kwargs)


def lora_config(config: TrainSettings) -> Any:
    from peft import LoraConfig

    targets = config.lora_target_modules
    return LoraConfig(r=config.lora_r, lora_alpha=config.lora_alpha,
                      lora_dropout=config.lora_dropout,
                      target_modules=targets if isinstance(targets, str) else list(targets),
                      task_type="CAUSAL_LM")


def save_model(trainer: Any, tokenizer: Any, out: Path, *, lora: bool, merge: bool,
               state: Any) -> None:
    """Write the trained model (merged, adapter or full) and its tokenizer to ``out``.

    Under FSDP or ZeRO-3 (``train --parallel``) each process holds a shard, so every
    process takes part in the trainer's save, which gathers the full weights.
    """
    state.wait_for_everyone()
    if getattr(trainer, "is_fsdp_enabled", False) or getattr(trainer, "is_deepspeed_enabled",
                                                             False):
        trainer.save_model(str(out))  # collective: all processes gather the full weights
        if state.is_main_process:
            tokenizer.save_pretrained(out)
        state.wait_for_everyone()
        return
    if state.is_main_process:
        out.mkdir(parents=True, exist_ok=True)
        model = trainer.accelerator.unwrap_model(trainer.model)
        if lora and merge:
            model = model.merge_and_unload()
        model.save_pretrained(out)
        tokenizer.save_pretrained(out)
    state.wait_for_everyone()
