"""The GRPO stage: online RL with TRL's ``GRPOTrainer``, each task's locked rubric as the reward.

For every prompt of the prompt set (:mod:`.prompt_set`) the policy samples
``num_generations`` completions; the reward functions (:mod:`.rewards`)
score them with the task's checks; GRPO pushes the policy towards the
completions that scored above their group's mean, with a KL term
(``beta``) that keeps it near the starting model. No answers are needed,
only tasks whose success Python can check.

**Tasks with tools** (``metadata["tools"]``, e.g. the tool tasks of
:mod:`agentic_loop.tasks.tool_tasks`) are rolled out as episodes: the policy
calls the tools and reads their results, and the rubric scores the whole
episode (:mod:`.tool_rollout`, TRL's ``rollout_func``). The trainer then logs
``tools/tool_use_rate``, ``tools/tool_call_validity`` and
``tools/turns_per_episode`` each step, and the card keeps them (stage metrics,
``reward["tools"]``, the per-step curve). Those rollouts generate in-process on
every device, so ``use_vllm`` is turned off for them.

**A judged part** (``judged_reward="rank"`` or ``"vote"``,
:mod:`.judged_reward`) joins the checks' part as its own reward function
(``rewards/judge_rank/mean`` or ``rewards/judge_vote/mean`` beside
``rewards/rubric/mean``). With ``"rank"`` the judge model (``judge``, default
the base model the policy starts from, as ``local:<dir>``) is loaded once
before training and never trained; the card's ``reward["judged"]`` names it,
with its groups, failed groups and mean consistency.

**On a CPU** (the embedded model) generation is ``model.generate`` in the
training process, in fp32, with ``torch`` threads set as for inference.

**On GPUs** the same call (and ``agentic-loop distill --method grpo``) changes
only what :class:`Device` detects, and :func:`grpo_config_kwargs` turns into
``GRPOConfig`` arguments:

* bf16 (fp16 on GPUs without bf16) instead of fp32;
* ``use_vllm=True`` when vLLM is installed (``pip install vllm``): TRL then
  generates with vLLM. ``vllm_mode="colocate"`` (default) runs vLLM inside
  each training process on its own GPU; ``"server"`` talks to a server you
  start first (``trl vllm-serve --model <base>`` on GPUs kept apart from
  training with ``CUDA_VISIBLE_DEVICES``), at ``vllm_server_base_url``
  (``--vllm-server-url``, default TRL's 0.0.0.0:8000). ``use_vllm=False`` forces
  ``model.generate``; ``True`` without a GPU or vLLM is an error;
* several GPUs: run under ``accelerate launch``. :func:`accelerate_command`
  builds the command line (``agentic-loop distill ... --dry-run`` prints it),
  e.g. ``accelerate launch --num_processes 4 --mixed_precision bf16
  $(which agentic-loop) distill --method grpo --data tasks.jsonl --out m``.
  ``--parallel fsdp`` or ``zero3`` (:mod:`.parallel`) shards the model for
  full fine-tunes that do not fit one GPU, with a shipped ``--config_file``.
  Each process generates for its share of the prompts; every step scores
  whole groups, so ``batch_size x gradient_accumulation_steps x processes``
  must be a multiple of ``num_generations`` (checked before loading).

Example (the arguments a 4-GPU machine with vLLM would get; no GPU needed):
    >>> from agentic_loop.distill.train.settings import TrainSettings
    >>> gpus = Device(gpus=4, bf16=True, vllm=True)
    >>> kw = grpo_config_kwargs(TrainSettings(method="grpo"), gpus, "ckpt", reward_weights=[1.0])
    >>> kw["bf16"], kw["use_cpu"], kw["use_vllm"], kw["vllm_mode"], kw["num_generations"]
    (True, False, True, 'colocate', 4)
    >>> accelerate_command(["distill", "--method", "grpo"], gpus, program="agentic-loop")
    ... # doctest: +NORMALIZE_WHITESPACE
    ['accelerate', 'launch', '--num_processes', '4', '--mixed_precision', 'bf16',
     'agentic-loop', 'distill', '--method', 'grpo']
    >>> grpo_config_kwargs(TrainSettings(method="grpo"), Device(), "ckpt")["use_vllm"]
    False
"""

from __future__ import annotations

import json
import os
import shutil
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from agentic_loop.distill.train.judged_reward import (
    JudgedReward,
    judged_reward,
    merge_summaries,
)
from agentic_loop.distill.train.parallel import Device
from agentic_loop.distill.train.prompt_set import PromptSet, load_prompt_set
from agentic_loop.distill.train.rewards import RubricRewards, merge_stats
from agentic_loop.distill.train.settings import TrainSettings
from agentic_loop.distill.train.stages import (
    StageResult,
    common_args,
    load_policy,
    lora_config,
    no_final_checkpoint,
    save_model,
)
from agentic_loop.distill.train.tool_rollout import (
    ToolRollouts,
    summarize,
)
from agentic_loop.errors import ConfigError, TrainError

__all__ = ["JUDGED_METRICS", "REWARD_CURVE_FILE", "TOOL_METRICS", "Device",
           "accelerate_command", "grpo_config_kwargs", "judge_spec", "judged_part",
           "run_grpo_stage", "tool_rollouts"]

REWARD_CURVE_FILE = "reward_curve.png"
_STATS_FILE = "reward_stats.rank{rank}.json"
_TOOL_STATS_FILE = "tool_stats.rank{rank}.json"
#: What tool rollouts log each step (``tools/<name>`` in the trainer's logs) and the card keeps.
TOOL_METRICS = ("tool_use_rate", "tool_call_validity", "turns_per_episode")
#: What the judged part logs each step (the per-step curve keeps them with ``/`` as ``_``).
JUDGED_METRICS = ("judge/consistency", "judge/failed_groups", "vote/agreement")


def _use_vllm(config: TrainSettings, device: Device) -> bool:
    if config.use_vllm is None:
        return device.gpus > 0 and device.vllm
    if config.use_vllm and not (device.gpus and device.vllm):
        missing = "a CUDA GPU" if not device.gpus else "the vllm package (pip install vllm)"
        raise ConfigError(f"use_vllm (--use-vllm) needs {missing}; drop it to generate with "
                          "the model itself (the CPU path)")
    return config.use_vllm


def grpo_config_kwargs(config: TrainSettings, device: Device,
                       checkpoint_dir: str | os.PathLike[str], *, progress: bool = True,
                       reward_weights: Sequence[float] | None = None) -> dict[str, Any]:
    """The ``trl.GRPOConfig`` arguments of a run on ``device`` (see the module doc)."""
    kwargs = common_args("grpo", config, device.precision, Path(checkpoint_dir), progress)
    use_vllm = _use_vllm(config, device)
    kwargs.update(num_generations=config.num_generations,
                  max_completion_length=config.max_completion_length,
                  temperature=config.temperature, beta=config.beta_for("grpo"),
                  reward_weights=list(reward_weights) if reward_weights is not None else None,
                  remove_unused_columns=False, log_completions=False, use_vllm=use_vllm)
    if use_vllm:
        kwargs["vllm_mode"] = config.vllm_mode
        if config.vllm_mode == "server" and config.vllm_server_base_url is not None:
            kwargs["vllm_server_base_url"] = config.vllm_server_base_url
    return kwargs


def accelerate_command(cli_args: Sequence[str], device: Device, *,
                       program: str | None = None, parallel: str | None = None) -> list[str]:
    """The command that runs ``agentic-loop <cli_args>`` on every GPU of ``device``.

    One GPU or none: the command itself. Several: under ``accelerate launch``,
    one process per GPU, in the device's mixed precision. ``parallel``
    (``TrainSettings.parallel``) adds the shipped ``--config_file`` of its
    strategy (:mod:`.parallel`: DDP, FSDP or DeepSpeed ZeRO-3).
    """
    program = program or shutil.which("agentic-loop") or "agentic-loop"
    if parallel is not None:
        from agentic_loop.distill.train.parallel import launch_command

        return launch_command(cli_args, device, parallel, program=program)
    if device.gpus <= 1:
        return [program, *cli_args]
    return ["accelerate", "launch", "--num_processes", str(device.gpus), "--mixed_precision",
            device.precision, program, *cli_args]


def _stats_callback(rewards: RubricRewards, rank: int, rollouts: ToolRollouts | None) -> Any:
    from transformers import TrainerCallback

    class SaveRewardStats(TrainerCallback):
        """Keep each process's reward counts in every checkpoint, so a resumed run adds them up."""

        def on_save(self, args: Any, state: Any, control: Any, **kwargs: Any) -> Any:
            folder = Path(args.output_dir) / f"checkpoint-{state.global_step}"
            if folder.is_dir():
                (folder / _STATS_FILE.format(rank=rank)).write_text(json.dumps(rewards.stats()))
                if rollouts is not None:
                    (folder / _TOOL_STATS_FILE.format(rank=rank)).write_text(
                        json.dumps(rollouts.stats()))
            return control

    return SaveRewardStats()


def _restore_stats(rewards: RubricRewards, checkpoint: str | None, rank: int) -> None:
    """On resume, the first process starts from the counts every process had saved."""
    if checkpoint is None or rank != 0:
        return
    saved = [json.loads(p.read_text()) for p in Path(checkpoint).glob("reward_stats.rank*.json")]
    rewards.restore(merge_stats(saved))


def _per_step(history: Sequence[Mapping[str, Any]], names: Sequence[str]) -> list[dict[str, Any]]:
    rows = []
    for entry in history:
        if "reward" not in entry:
            continue
        row: dict[str, Any] = {"step": int(entry["step"]), "reward": round(entry["reward"], 4),
                               "reward_std": round(entry.get("reward_std", 0.0), 4)}
        for name in names:
            value = entry.get(f"rewards/{name}/mean")
            if value is not None and value == value:  # NaN: no task in the batch has the check
                row[name] = round(value, 4)
        for key in TOOL_METRICS:
            if entry.get(f"tools/{key}") is not None:
                row[key] = round(float(entry[f"tools/{key}"]), 4)
        for key in JUDGED_METRICS:
            value = entry.get(key)
            if value is not None and value == value:
                row[key.replace("/", "_")] = round(float(value), 4)
        rows.append(row)
    return rows


def _metrics(history: Sequence[Mapping[str, Any]], per_step: Sequence[Mapping[str, Any]],
             output: Any) -> dict[str, Any]:
    metrics = {k: (round(v, 6) if isinstance(v, float) else v) for k, v in output.metrics.items()}
    if per_step:
        rewards = [row["reward"] for row in per_step]
        metrics.update(first_reward=rewards[0], last_reward=rewards[-1],
                       mean_reward=round(sum(rewards) / len(rewards), 4))
    steps = [h for h in history if "reward" in h]
    if steps:
        for key in ("kl", "completions/mean_length", "completions/clipped_ratio"):
            if key in steps[-1]:
                metrics[key] = round(float(steps[-1][key]), 6)
    return metrics


def tool_rollouts(prompts: PromptSet, config: TrainSettings) -> ToolRollouts | None:
    """The multi-turn rollouts of a prompt set whose tasks carry tools (None: single-turn).

    ``tool_max_turns`` bounds an episode's model turns; its first turn is a tool call
    unless ``free_first_turn`` (then the policy chooses).
    """
    if not prompts.has_tools:
        return None
    return ToolRollouts(prompts.tasks,
                        max_turns=config.tool_max_turns,
                        force_first=not config.free_first_turn,
                        max_completion_length=config.max_completion_length,
                        temperature=config.temperature, top_p=getattr(config, "top_p", 1.0))


def judge_spec(config: TrainSettings, model_dir: Path | str) -> Any:
    """The judged reward's judge: ``judge`` (a spec, or a chat model), else the base model.

    >>> judge_spec(TrainSettings(method="grpo", judged_reward="rank"), "/m/base")
    'local:/m/base'
    >>> judge_spec(TrainSettings(method="grpo", judged_reward="rank", judge="local"), "/m")
    'local'
    """
    return config.judge or f"local:{model_dir}"


def judged_part(prompts: PromptSet, config: TrainSettings, model_dir: Path | str, *,
                judge: Any = None) -> tuple[PromptSet, JudgedReward | None]:
    """The prompt set with the tasks the judged part rewards, and that part (None: "none").

    ``judge``: the judge's chat model, if already loaded (else loaded here from
    :func:`judge_spec`, once).
    """
    if config.judged_reward == "none":
        return prompts, None
    prompts = load_prompt_set(prompts.path, llm_features=config.llm_features,
                              judged_reward=config.judged_reward)
    if config.judged_reward == "rank" and judge is None:
        from agentic_loop.models import load_chat_model

        judge = load_chat_model(judge_spec(config, model_dir))
    part = judged_reward(config.judged_reward, prompts.tasks, judge=judge,
                         weight=config.judged_reward_weight, group_size=config.num_generations,
                         seed=config.seed)
    return prompts, part


def run_grpo_stage(model_dir: Path, stage_out: Path, prompts: PromptSet, config: TrainSettings,
                   device: Device, checkpoint_dir: Path, resume: bool, progress: bool,
                   callbacks: Sequence[Any], state: Any, *,
                   merge: bool) -> tuple[StageResult, dict[str, Any]]:
    """Train ``model_dir`` with GRPO on ``prompts``; save to ``stage_out``; the stage and its
    reward report (functions, weights, error counts, rubrics, per-step curve) for the card."""
    from accelerate.utils import gather_object
    from datasets import Dataset
    from transformers.trainer_utils import get_last_checkpoint
    from trl import GRPOConfig, GRPOTrainer

    per_step = config.batch_size * config.gradient_accumulation_steps * state.num_processes
    if per_step % config.num_generations:
        raise TrainError(
            f"batch_size x gradient_accumulation_steps x processes = {per_step} is not a "
            f"multiple of num_generations ({config.num_generations}); each step scores whole "
            "groups; change --batch-size or --num-generations")
    local = config.batch_size * config.gradient_accumulation_steps
    if config.judged_reward != "none" and local % config.num_generations:
        # TRL scores each process's own completions before gathering them: a judged part
        # compares a group's members, so each process must hold whole groups
        raise TrainError(
            f"--judged-reward {config.judged_reward} ranks or votes within a prompt's whole "
            f"group on one process, but batch_size x gradient_accumulation_steps = {local} is "
            f"not a multiple of num_generations ({config.num_generations}); change "
            "--batch-size or --num-generations")
    prompts, judged = judged_part(prompts, config, model_dir)
    model, tokenizer = load_policy(model_dir, config, device.precision)
    rollouts = tool_rollouts(prompts, config)
    rewards = RubricRewards(prompts.tasks, check_weight=config.check_reward_weight,
                            format_penalty=config.format_penalty,
                            max_completion_length=config.max_completion_length,
                            workers=config.reward_workers,
                            extra=[judged] if judged is not None else ())
    last = get_last_checkpoint(str(checkpoint_dir)) if resume and checkpoint_dir.is_dir() else None
    _restore_stats(rewards, last, state.process_index)
    if rollouts is not None and last is not None and state.process_index == 0:
        rollouts.restore([json.loads(p.read_text())
                          for p in Path(last).glob(_TOOL_STATS_FILE.format(rank="*"))])
    try:
        kwargs = grpo_config_kwargs(config, device, checkpoint_dir, progress=progress,
                                    reward_weights=rewards.weights)
        notes = list(prompts.notes)
        if rollouts is not None and kwargs["use_vllm"]:
            kwargs.update(use_vllm=False)  # see tool_rollout: tool episodes decode in-process
            kwargs.pop("vllm_mode", None)
            kwargs.pop("vllm_server_base_url", None)
            notes.append("use_vllm was turned off: tool rollouts generate with the policy "
                         "in-process (TRL's vLLM generation is single-turn, without our grammar)")
        trainer = GRPOTrainer(model=model, reward_funcs=list(rewards.functions),
                              args=GRPOConfig(**kwargs),
                              train_dataset=Dataset.from_list(prompts.rows()),
                              processing_class=tokenizer,
                              peft_config=lora_config(config) if config.lora else None,
                              callbacks=list(callbacks),
                              rollout_func=rollouts)  # type: ignore[arg-type]
        trainer.add_callback(no_final_checkpoint())
        trainer.add_callback(_stats_callback(rewards, state.process_index, rollouts))
        begun = time.perf_counter()
        output = trainer.train(resume_from_checkpoint=last)
        runtime = time.perf_counter() - begun
    finally:
        rewards.close()
    save_model(trainer, tokenizer, stage_out, lora=config.lora, merge=merge, state=state)
    names = [f.__name__ for f in rewards.functions]
    history = trainer.state.log_history
    curve = _per_step(history, names)
    stats = merge_stats(gather_object([rewards.stats()]))
    report = {"functions": rewards.describe(), "errors": stats, "prompts": len(prompts.tasks),
              "skipped_tasks": prompts.skipped, "source": prompts.kind,
              "rubrics": prompts.rubrics(), "notes": notes, "per_step": curve,
              "curve": REWARD_CURVE_FILE if curve else None}
    metrics = _metrics(history, curve, output)
    if judged is not None:
        report["judged"] = judged.describe(merge_summaries(gather_object([judged.summary()])))
    if rollouts is not None:
        tools = summarize(gather_object([rollouts.stats()]))
        report["tools"] = {**rollouts.describe(), **tools}
        metrics.update({k: v for k, v in tools.items() if k != "episodes"})
    if curve and state.is_main_process:
        from agentic_loop.plots import plot_reward_curve

        series = {name: [(row["step"], row[name]) for row in curve if name in row]
                  for name in ["reward", *names, *TOOL_METRICS[:2]]  # the rates, on [0, 1]
                  if name in ("reward", *names) or any(name in row for row in curve)}
        plot_reward_curve(series, stage_out / REWARD_CURVE_FILE,
                          title=f"GRPO reward per step ({stage_out.name})")
    steps = [h for h in history if "num_tokens" in h]
    tokens = int(steps[-1]["num_tokens"]) if steps else None
    result = StageResult("grpo", int(output.global_step), float(output.training_loss), runtime,
                         tokens, Path(last).name if last else None, metrics)
    return result, report
