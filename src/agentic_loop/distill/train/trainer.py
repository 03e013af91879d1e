"""``train``: distill an exported dataset into a model's weights with TRL (SFT, DPO, GRPO).

This module decides what a run is (stages, resume, the card); each stage
runs in :mod:`agentic_loop.distill.train.stages`.

This is the training loop's weight update. ``sft`` is rejection-sampling
SFT on the accepted outputs (``sft.jsonl``); ``dpo`` learns from preference
pairs (``pairs.jsonl``: a high-scoring answer against a low-scoring one for
the same prompt); ``sft+dpo`` runs SFT, then DPO from the SFT model.
``grpo`` is online RL on *tasks* (a task file, or an export's prompts): the
model samples answers and each task's locked rubric rewards them
(:mod:`agentic_loop.distill.train.grpo`; the card then lists the reward
functions, their weights, error counts and the reward curve,
``reward_curve.png``).

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
    agentic_loop.errors.ConfigError: max_steps (--max-steps) must be at least 1, got 0
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agentic_loop.clock import utc_stamp
from agentic_loop.distill.train.grpo import Device, run_grpo_stage
from agentic_loop.distill.train.model_card import (
    CARD_FILE,
    DataRef,
    ModelCard,
    ModelCardError,
    read_card,
    write_card,
)
from agentic_loop.distill.train.prompt_set import PromptSet, load_prompt_set
from agentic_loop.distill.train.settings import TrainSettings
from agentic_loop.distill.train.stages import StageResult, run_stage
from agentic_loop.distill.train.training_data import TrainingData, load_training_data
from agentic_loop.errors import TrainError
from agentic_loop.models.model_dirs import is_adapter_dir, resolve_model_dir
from agentic_loop.paths import make_dir

__all__ = ["StageResult", "TrainError", "TrainResult", "train", "training_precision"]

CHECKPOINTS = "checkpoints"
STAGES = "stages"
_STAGE_DONE = "stage_done.json"
_RUN_FILE = "run.json"


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
    return Device.detect().precision


def train(
    data_dir: str | os.PathLike[str],
    out_dir: str | os.PathLike[str],
    method: str = "sft",
    base: str | os.PathLike[str] = "local",
    *,
    lora: bool = False,
    max_steps: int | None = None,
    epochs: float = 1.0,
    beta: float | None = None,
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
            ``pairs.jsonl``, ``manifest.json``); for ``grpo`` also a task file.
        out_dir: where the model, its tokenizer and ``model_card.yaml`` go.
        method: ``"sft"``, ``"dpo"``, ``"sft+dpo"`` or ``"grpo"``.
        base: ``"local"`` (the embedded model), ``"local:<dir>"`` or an HF directory.
        lora: train a LoRA adapter (PEFT) instead of every weight.
        max_steps: stop after this many optimizer steps (overrides ``epochs``).
        epochs: passes over the data when ``max_steps`` is not set.
        beta: the KL strength of DPO (default 0.1) or GRPO (default 0.04); higher keeps
            the model closer to the reference.
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
            ``lora_dropout``, ``lora_target_modules``, ``gradient_checkpointing``,
            ``lr_scheduler_type``, ``warmup_steps``, ``validation_split``, ``report_to``
            (TensorBoard's event files are kept in ``out_dir/logs/<stage>``); for GRPO
            ``num_generations``, ``max_completion_length``, ``temperature``, ``use_vllm``,
            ``vllm_mode``, ``reward_workers``, ``check_reward_weight``, ``format_penalty``,
            ``llm_features``).
    """
    config = TrainSettings(method=method, lora=lora, max_steps=max_steps, epochs=epochs, beta=beta,
                           seed=seed, learning_rate=learning_rate, batch_size=batch_size,
                           gradient_accumulation_steps=gradient_accumulation_steps,
                           max_length=max_length, merge_lora=merge_lora, save_steps=save_steps,
                           **settings)
    _check_reporters(config)
    out = Path(out_dir).expanduser()
    if out.exists() and not out.is_dir():
        raise TrainError(f"output path {out} is a file; pass a folder for the model "
                         "(created if missing)")
    data, prompts, data_ref = _inputs(data_dir, config)
    base_dir = resolve_model_dir(base)
    if is_adapter_dir(base_dir):
        raise TrainError(f"base {base_dir} is a LoRA adapter; train on a full model (merge the "
                         "adapter first: train with merge_lora=True, the default)")
    fingerprint = config.fingerprint(data_ref.manifest_sha256, str(base_dir.resolve()))
    finished = _finished_run(out, fingerprint)
    if finished is not None and resume:
        return TrainResult(out, config, [StageResult.from_dict(s) for s in finished.stages],
                           finished, skipped=True)
    _claim(out, fingerprint, resume)

    from accelerate import PartialState

    state = PartialState()
    device = Device.detect()
    precision = device.precision
    started = utc_stamp()
    reward: dict[str, Any] | None = None
    results: list[StageResult] = []
    model_dir = base_dir
    for index, stage in enumerate(config.stages):
        last = index == len(config.stages) - 1
        stage_out = out if last else out / STAGES / stage
        done = _stage_done(stage_out, fingerprint) if not last else None
        if done is None and stage == "grpo":
            assert prompts is not None
            done, reward = run_grpo_stage(model_dir, stage_out, prompts, config, device,
                                          out / CHECKPOINTS / stage, resume, progress, callbacks,
                                          state, merge=config.merge_lora)
        elif done is None:
            assert data is not None
            done = run_stage(stage, model_dir, stage_out, data, config, precision,
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
        data=data_ref, reward=reward,
        hyperparameters=config.hyperparameters(), precision=precision,
        stages=[r.to_dict() for r in results], metrics=_summary(results),
        started_at=started, finished_at=utc_stamp(), config_fingerprint=fingerprint,
        versions=_library_versions(), world_size=state.num_processes,
        prompt_format=data.prompt_format if data is not None else (
            prompts.prompt_format() if prompts is not None else None),
    )
    if state.is_main_process:
        write_card(out, card)
        keep_logs(out)
        if not keep_checkpoints:
            shutil.rmtree(out / CHECKPOINTS, ignore_errors=True)
            shutil.rmtree(out / STAGES, ignore_errors=True)
        (out / _RUN_FILE).unlink(missing_ok=True)
    state.wait_for_everyone()
    return TrainResult(out, config, results, card)


# -- run bookkeeping ------------------------------------------------------------------

#: report_to name -> the modules that provide it (any one will do).
_REPORTER_MODULES: dict[str, tuple[str, ...]] = {"tensorboard": ("tensorboard", "tensorboardX"),
                                                 "wandb": ("wandb",), "mlflow": ("mlflow",),
                                                 "comet_ml": ("comet_ml",), "trackio": ("trackio",)}


def _check_reporters(config: TrainSettings) -> None:
    """Fail before any model loads when ``report_to`` names a tracker that is not installed."""
    import importlib.util

    for name in config.reporters:
        modules = _REPORTER_MODULES.get(name, ())
        if modules and not any(importlib.util.find_spec(m) for m in modules):
            raise TrainError(f"report_to (--report-to) {name!r} needs the {modules[0]} package; "
                             f"pip install {modules[0]}, or drop {name} from --report-to")


def keep_logs(out: Path) -> None:
    """Move TensorBoard's event files (``checkpoints/<stage>/runs``) to ``out/logs/<stage>``.

    The trainer writes them under its output folder, the checkpoints, which
    are deleted once the model is written; the curves are worth keeping.
    """
    for runs in sorted((out / CHECKPOINTS).glob("*/runs")):
        target = out / "logs" / runs.parent.name
        shutil.rmtree(target, ignore_errors=True)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.move(str(runs), str(target))


def _inputs(data_dir: str | os.PathLike[str], config: TrainSettings
            ) -> tuple[TrainingData | None, PromptSet | None, DataRef]:
    """What the method trains on: an export's rows, or GRPO's prompt set; and its record."""
    if config.method == "grpo":
        prompts = load_prompt_set(data_dir, llm_features=config.llm_features,
                                  judged_reward=config.judged_reward)
        return None, prompts, DataRef(dir=str(prompts.path.resolve()),
                                      manifest_sha256=prompts.sha256, prompts=len(prompts.tasks))
    data = load_training_data(data_dir, need_sft="sft" in config.stages,
                              need_pairs="dpo" in config.stages)
    return data, None, DataRef(dir=str(data.data_dir.resolve()),
                               manifest_sha256=data.manifest_sha256, **data.counts())


def _finished_run(out: Path, fingerprint: str) -> ModelCard | None:
    """The card of a finished run in ``out``; an error if it is a *different* run."""
    if not (out / CARD_FILE).is_file():
        return None
    try:
        card = read_card(out)
    except ModelCardError as exc:
        raise TrainError(f"{out} holds an unreadable model card ({exc}); choose another output "
                         "folder or delete this one") from None
    if card.config_fingerprint != fingerprint:
        raise TrainError(
            f"{out} already holds a model trained with other settings or data (card fingerprint "
            f"{card.config_fingerprint}, this run {fingerprint}); choose another --out, or "
            "delete that folder to replace it")
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
            "runs; pass resume=False (--no-resume) to discard them, or choose another --out")
    if PartialState().is_main_process:
        if not resume or previous != fingerprint:
            shutil.rmtree(out / CHECKPOINTS, ignore_errors=True)
            shutil.rmtree(out / STAGES, ignore_errors=True)
        make_dir(out, what="training output folder", error=TrainError)
        run_file.write_text(json.dumps({"fingerprint": fingerprint, "started_at": utc_stamp()}))
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
