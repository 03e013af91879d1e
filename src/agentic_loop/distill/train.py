"""``train``: distill an exported dataset into a model's weights with TRL (SFT, DPO or both).

This is the training loop's weight update. ``sft`` is rejection-sampling
SFT on the accepted outputs (``sft.jsonl``); ``dpo`` learns from preference
pairs (``pairs.jsonl``: a high-scoring answer against a low-scoring one for
the same prompt); ``sft+dpo`` runs SFT, then DPO from the SFT model.

What it takes care of, so a caller does not have to:

* **Precision and device.** fp32 on CPU (``use_cpu=True``: TRL's bf16
  default fails there), bf16 on GPUs that support it, fp16 on older ones.
* **LoRA or full.** LoRA through PEFT (``lora=True``); the adapter is merged
  into the base on save by default, so ``load_chat_model("local:<out>")``
  and vLLM serve the result as a plain model. ``merge_lora=False`` keeps the
  adapter (vLLM serves it by name with ``--lora-modules``).
* **Resumable.** Checkpoints go to ``out_dir/checkpoints/<stage>``; a run
  interrupted (Ctrl-C, a crash, a preempted GPU) and started again with the
  same settings continues from the last checkpoint. A finished run started
  again returns at once. Checkpoints are removed once the model is written,
  unless ``keep_checkpoints=True``.
* **Multi-GPU.** The same call runs under ``accelerate launch``: the
  trainers handle data parallelism, and only the main process writes the
  model, the card and cleans up (the others wait for it).
* **A record.** ``model_card.yaml`` names the base model, the dataset
  (manifest hash and counts), the method and every hyperparameter, the
  metrics of each stage, the precision, library versions and timestamps.
  It is written last: a directory with a card holds a complete model.

Example (settings are checked before any model is loaded):
    >>> train("no-such-dir", "out", method="sft", max_steps=0)
    Traceback (most recent call last):
    ...
    ValueError: max_steps (--max-steps) must be at least 1, got 0.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agentic_loop.distill.model_card import (
    CARD_FILE,
    DataRef,
    ModelCard,
    ModelCardError,
    read_card,
    utc_now,
    write_card,
)
from agentic_loop.distill.model_dirs import is_adapter_dir, resolve_model_dir
from agentic_loop.distill.train_data import TrainingData, load_training_data
from agentic_loop.distill.train_settings import TrainSettings

__all__ = ["StageResult", "TrainError", "TrainResult", "train", "training_precision"]

CHECKPOINTS = "checkpoints"
STAGES = "stages"
_STAGE_DONE = "stage_done.json"
_RUN_FILE = "run.json"


class TrainError(RuntimeError):
    """Training cannot start or finish as asked; the message says why and what to do."""


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


@dataclass(frozen=True)
class TrainResult:
    """A finished run: where the model is, how it was trained, and its card.

    ``skipped`` is true when ``out_dir`` already held this exact run, finished.
    """

    model_dir: Path
    settings: TrainSettings
    stages: list[StageResult]
    card: ModelCard
    skipped: bool = False

    @property
    def adapter(self) -> bool:
        """True when ``model_dir`` holds a LoRA adapter rather than a full model."""
        return self.card.adapter

    @property
    def spec(self) -> str:
        """The :func:`~agentic_loop.models.load_chat_model` spec of the trained model."""
        return f"local:{self.model_dir}"


def training_precision() -> str:
    """``"bf16"`` on GPUs that support it, ``"fp16"`` on older GPUs, ``"fp32"`` on CPU.

    >>> training_precision() in ("bf16", "fp16", "fp32")
    True
    """
    import torch

    if torch.cuda.is_available():
        return "bf16" if torch.cuda.is_bf16_supported() else "fp16"
    return "fp32"


def train(
    data_dir: str | os.PathLike[str],
    out_dir: str | os.PathLike[str],
    method: str = "sft",
    base: str | os.PathLike[str] = "local",
    *,
    lora: bool = False,
    max_steps: int | None = None,
    epochs: float = 1.0,
    beta: float = 0.1,
    seed: int = 0,
    learning_rate: float | None = None,
    batch_size: int = 4,
    gradient_accumulation_steps: int = 1,
    max_length: int = 512,
    merge_lora: bool = True,
    resume: bool = True,
    save_steps: int = 50,
    keep_checkpoints: bool = False,
    progress: bool = True,
    name: str | None = None,
    callbacks: Sequence[Any] = (),
    **settings: Any,
) -> TrainResult:
    """Train ``base`` on the dataset in ``data_dir`` and write the model to ``out_dir``.

    Args:
        data_dir: a folder written by ``export_datasets`` (``sft.jsonl``,
            ``pairs.jsonl``, ``manifest.json``).
        out_dir: where the model, its tokenizer and ``model_card.yaml`` go.
        method: ``"sft"``, ``"dpo"`` or ``"sft+dpo"``.
        base: ``"local"`` (the embedded model), ``"local:<dir>"`` or an HF directory.
        lora: train a LoRA adapter (PEFT) instead of every weight.
        max_steps: stop after this many optimizer steps (overrides ``epochs``).
        epochs: passes over the data when ``max_steps`` is not set.
        beta: DPO's KL strength (higher keeps the model closer to the reference).
        seed: seeds weights init (LoRA), data order and dropout.
        learning_rate: ``None`` for the per-method default (see ``TrainSettings``).
        batch_size / gradient_accumulation_steps: per-device batch and accumulation.
        max_length: sequences are truncated to this many tokens.
        merge_lora: merge the adapter into the base before saving.
        resume: continue from the last checkpoint of an interrupted run with the
            same settings (``False`` discards checkpoints and starts over).
        save_steps: checkpoint every this many steps.
        keep_checkpoints: keep ``out_dir/checkpoints`` after success.
        progress: show the trainer's progress bar.
        name: the model's name on its card (default: ``out_dir``'s name).
        callbacks: extra ``transformers.TrainerCallback`` objects for the trainers.
        **settings: more :class:`TrainSettings` fields (``lora_r``, ``lora_alpha``,
            ``lora_dropout``, ``lora_target_modules``, ``gradient_checkpointing``).
    """
    config = TrainSettings(method=method, lora=lora, max_steps=max_steps, epochs=epochs, beta=beta,
                           seed=seed, learning_rate=learning_rate, batch_size=batch_size,
                           gradient_accumulation_steps=gradient_accumulation_steps,
                           max_length=max_length, merge_lora=merge_lora, save_steps=save_steps,
                           **settings)
    out = Path(out_dir).expanduser()
    if out.exists() and not out.is_dir():
        raise TrainError(f"output path {out} is a file; pass a folder for the model (created if missing).")
    data = load_training_data(data_dir, need_sft="sft" in config.stages,
                              need_pairs="dpo" in config.stages)
    base_dir = resolve_model_dir(base)
    if is_adapter_dir(base_dir):
        raise TrainError(f"base {base_dir} is a LoRA adapter; train on a full model (merge the "
                         "adapter first: train with merge_lora=True, the default).")
    fingerprint = config.fingerprint(data.manifest_sha256, str(base_dir.resolve()))
    finished = _finished_run(out, fingerprint)
    if finished is not None and resume:
        return TrainResult(out, config, [StageResult.from_dict(s) for s in finished.stages],
                           finished, skipped=True)
    _claim(out, fingerprint, resume)

    from accelerate import PartialState

    state = PartialState()
    precision = training_precision()
    started = utc_now()
    results: list[StageResult] = []
    model_dir = base_dir
    for index, stage in enumerate(config.stages):
        last = index == len(config.stages) - 1
        stage_out = out if last else out / STAGES / stage
        done = _stage_done(stage_out, fingerprint) if not last else None
        if done is None:
            done = _run_stage(stage, model_dir, stage_out, data, config, precision,
                              out / CHECKPOINTS / stage, resume, progress, callbacks, state,
                              merge=config.merge_lora or not last)
            if not last and state.is_main_process:
                _mark_stage_done(stage_out, fingerprint, done)
            state.wait_for_everyone()
        results.append(done)
        model_dir = stage_out

    card = ModelCard(
        name=name or out.name, base_model=os.fspath(base), base_model_path=str(base_dir.resolve()),
        method=config.method, adapter=config.adapter_output,
        lora=({"r": config.lora_r, "alpha": config.lora_alpha, "dropout": config.lora_dropout,
               "target_modules": config.hyperparameters()["lora_target_modules"],
               "merged": config.merge_lora} if config.lora else None),
        data=DataRef(dir=str(data.data_dir.resolve()), manifest_sha256=data.manifest_sha256,
                     **data.counts()),
        hyperparameters=config.hyperparameters(), precision=precision,
        stages=[r.to_dict() for r in results], metrics=_summary(results),
        started_at=started, finished_at=utc_now(), config_fingerprint=fingerprint,
        versions=_library_versions(), world_size=state.num_processes,
    )
    if state.is_main_process:
        write_card(out, card)
        if not keep_checkpoints:
            shutil.rmtree(out / CHECKPOINTS, ignore_errors=True)
            shutil.rmtree(out / STAGES, ignore_errors=True)
        (out / _RUN_FILE).unlink(missing_ok=True)
    state.wait_for_everyone()
    return TrainResult(out, config, results, card)


# -- run bookkeeping ------------------------------------------------------------------


def _finished_run(out: Path, fingerprint: str) -> ModelCard | None:
    """The card of a finished run in ``out``; an error if it is a *different* run."""
    if not (out / CARD_FILE).is_file():
        return None
    try:
        card = read_card(out)
    except ModelCardError as exc:
        raise TrainError(f"{out} holds an unreadable model card ({exc}); choose another output "
                         "folder or delete this one.") from None
    if card.config_fingerprint != fingerprint:
        raise TrainError(
            f"{out} already holds a model trained with other settings or data (card fingerprint "
            f"{card.config_fingerprint}, this run {fingerprint}). Choose another --out, or delete "
            "that folder to replace it.")
    return card


def _claim(out: Path, fingerprint: str, resume: bool) -> None:
    """Record which run owns ``out``'s checkpoints; refuse to resume someone else's."""
    from accelerate import PartialState

    run_file = out / _RUN_FILE
    previous = None
    if run_file.is_file():
        try:
            previous = json.loads(run_file.read_text()).get("fingerprint")
        except json.JSONDecodeError:
            previous = None
    # Every process checks (and raises) alike, so none is left waiting for the others.
    if resume and previous not in (None, fingerprint) and (out / CHECKPOINTS).exists():
        raise TrainError(
            f"{out / CHECKPOINTS} holds checkpoints of a run with other settings or data "
            f"(fingerprint {previous}, this run {fingerprint}); resuming them would mix two "
            "runs. Pass resume=False (--no-resume) to discard them, or choose another --out.")
    if PartialState().is_main_process:
        if not resume or previous != fingerprint:
            shutil.rmtree(out / CHECKPOINTS, ignore_errors=True)
            shutil.rmtree(out / STAGES, ignore_errors=True)
        out.mkdir(parents=True, exist_ok=True)
        run_file.write_text(json.dumps({"fingerprint": fingerprint, "started_at": utc_now()}))
    PartialState().wait_for_everyone()


def _stage_done(stage_out: Path, fingerprint: str) -> StageResult | None:
    marker = stage_out / _STAGE_DONE
    if not marker.is_file():
        return None
    data = json.loads(marker.read_text())
    if data.get("fingerprint") != fingerprint:
        return None
    return StageResult.from_dict(data["result"])


def _mark_stage_done(stage_out: Path, fingerprint: str, result: StageResult) -> None:
    from agentic_loop.atomic import atomic_write_bytes

    payload = {"fingerprint": fingerprint, "result": result.to_dict()}
    atomic_write_bytes(stage_out / _STAGE_DONE, json.dumps(payload).encode())


def _summary(results: list[StageResult]) -> dict[str, Any]:
    tokens = sum(r.tokens or 0 for r in results)
    runtime = sum(r.runtime_s for r in results)
    return {"steps": sum(r.steps for r in results), "runtime_s": round(runtime, 3),
            "tokens": tokens or None, "final_train_loss": results[-1].train_loss,
            "tokens_per_s": round(tokens / runtime, 2) if tokens and runtime > 0 else None}


def _library_versions() -> dict[str, str]:
    from importlib.metadata import PackageNotFoundError, version

    out = {}
    for package in ("agentic-loop", "torch", "transformers", "trl", "peft", "accelerate"):
        try:
            out[package] = version(package)
        except PackageNotFoundError:
            continue
    return out


# -- one trainer stage ------------------------------------------------------------------


def _run_stage(stage: str, model_dir: Path, stage_out: Path, data: TrainingData,
               config: TrainSettings, precision: str, checkpoint_dir: Path, resume: bool,
               progress: bool, callbacks: Sequence[Any], state: Any, *, merge: bool) -> StageResult:
    """Train one stage from ``model_dir`` and save the result to ``stage_out``."""
    import torch
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer, set_seed
    from transformers.trainer_utils import get_last_checkpoint

    if precision == "fp32":
        from agentic_loop.models.local import default_num_threads

        torch.set_num_threads(default_num_threads())
    set_seed(config.seed)
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
    args = _trainer_args(stage, config, precision, checkpoint_dir, progress)
    peft_config = _lora_config(config) if config.lora else None
    rows = data.sft if stage == "sft" else data.pairs
    dataset = Dataset.from_list(rows)
    if stage == "sft":
        from trl import SFTTrainer

        trainer = SFTTrainer(model=model, args=args, train_dataset=dataset,
                             processing_class=tokenizer, peft_config=peft_config,
                             callbacks=list(callbacks))
    else:
        from trl import DPOTrainer

        # With LoRA the reference is the base with the adapter switched off (no copy);
        # without it TRL keeps a frozen copy of the starting model as the reference.
        trainer = DPOTrainer(model=model, args=args, train_dataset=dataset,
                             processing_class=tokenizer, peft_config=peft_config,
                             callbacks=list(callbacks))
    trainer.add_callback(_no_final_checkpoint())
    last = get_last_checkpoint(str(checkpoint_dir)) if resume and checkpoint_dir.is_dir() else None
    begun = time.perf_counter()
    output = trainer.train(resume_from_checkpoint=last)
    runtime = time.perf_counter() - begun
    _save(trainer, tokenizer, stage_out, lora=config.lora, merge=merge, state=state)
    metrics = {k: (round(v, 6) if isinstance(v, float) else v) for k, v in output.metrics.items()}
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


def _no_final_checkpoint() -> Any:
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


def _trainer_args(stage: str, config: TrainSettings, precision: str, checkpoint_dir: Path,
                  progress: bool) -> Any:
    common: dict[str, Any] = {
        "output_dir": str(checkpoint_dir),
        "per_device_train_batch_size": config.batch_size,
        "gradient_accumulation_steps": config.gradient_accumulation_steps,
        "learning_rate": config.learning_rate_for(stage),
        "num_train_epochs": config.epochs,
        "max_steps": config.max_steps if config.max_steps is not None else -1,
        "max_length": config.max_length,
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
        "report_to": "none",
        "disable_tqdm": not progress,
        "include_num_input_tokens_seen": "non_padding",
        "dataloader_num_workers": 0,
        # Every trainable weight is used in each forward pass (checked under torchrun with
        # LoRA and full models); the default True costs an extra autograd traversal per step.
        "ddp_find_unused_parameters": False,
    }
    if stage == "sft":
        from trl import SFTConfig

        return SFTConfig(**common)
    from trl import DPOConfig

    return DPOConfig(**common, beta=config.beta)


def _lora_config(config: TrainSettings) -> Any:
    from peft import LoraConfig

    targets = config.lora_target_modules
    return LoraConfig(r=config.lora_r, lora_alpha=config.lora_alpha, lora_dropout=config.lora_dropout,
                      target_modules=targets if isinstance(targets, str) else list(targets),
                      task_type="CAUSAL_LM")


def _save(trainer: Any, tokenizer: Any, out: Path, *, lora: bool, merge: bool, state: Any) -> None:
    """Write the trained model (merged, adapter or full) and its tokenizer to ``out``."""
    state.wait_for_everyone()
    if state.is_main_process:
        out.mkdir(parents=True, exist_ok=True)
        model = trainer.accelerator.unwrap_model(trainer.model)
        if lora and merge:
            model = model.merge_and_unload()
        model.save_pretrained(out)
        tokenizer.save_pretrained(out)
    state.wait_for_everyone()
