"""``agentic-loop train``: distill an exported dataset into a model's weights with TRL.

The command line of :func:`agentic_loop.distill.train.train`, one flag per
:class:`~agentic_loop.distill.train.TrainSettings` field, named as TRL's
config names it (``--lr-scheduler-type``, ``--gradient-accumulation-steps``,
``--lora-r``, ``--report-to``...): SFT, DPO or SFT then DPO on an export;
GRPO on a task file, each task's locked rubric as the reward. ``--dry-run``
prints the trainer's arguments and the (``accelerate launch``) command it
would run on this machine, and trains nothing. ``--parallel`` picks how a run
spreads over GPUs: DDP, FSDP or DeepSpeed ZeRO-3, each a shipped accelerate
configuration (:mod:`agentic_loop.distill.train.parallel`).

Flags are checked before any model loads; a bad one is a one-line error
with exit code 2. (``agentic-loop distill --data`` ran this before; it still
does for one release, with a deprecation line.) Training shows one ``train
steps`` bar; ``--verbose`` shows TRL's and transformers' own logs, bars and
warnings instead.

Example:
    >>> from typer.testing import CliRunner
    >>> from agentic_loop.cli import app
    >>> result = CliRunner().invoke(app, ["train", "--data", "d", "--out", "o",
    ...                                   "--warmup-steps", "1.5"])
    >>> result.exit_code, result.stderr.split(" must")[0]
    (2, 'error: warmup_steps (--warmup-steps)')
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.markup import escape

from agentic_loop.cli import app
from agentic_loop.cli.common import console
from agentic_loop.cli.quiet import VerboseFlag, third_party_quiet
from agentic_loop.errors import ConfigError
from agentic_loop.tables import Col, FitTable

if TYPE_CHECKING:
    from agentic_loop.distill.train import TrainResult, TrainSettings

__all__ = ["cli_args", "grpo_options", "print_dry_run", "print_training", "run_training",
           "train_command"]


# The flags `train` shares with `distill` (whose --data is train's deprecated spelling and whose
# --from-trajectories trains with the same knobs), declared once.
MethodFlag = Annotated[str, typer.Option("--method", help="sft, dpo, sft+dpo or grpo.")]
BaseFlag = Annotated[str, typer.Option(
    "--base", help="Base model: local, local:<dir> or an HF dir.")]
LoraFlag = Annotated[bool, typer.Option(
    "--lora", help="Train a LoRA adapter (PEFT) instead of every weight.")]
NoMergeFlag = Annotated[bool, typer.Option(
    "--no-merge",
    help="Keep the LoRA adapter unmerged (vLLM serves it by name and swaps it live; "
         "in-process it loads merged onto its base).")]
MaxStepsFlag = Annotated[int | None, typer.Option(
    "--max-steps", help="Stop after N optimizer steps (overrides --epochs).")]
EpochsFlag = Annotated[float, typer.Option("--epochs", help="Passes over the data.")]
LearningRateFlag = Annotated[float | None, typer.Option(
    "--learning-rate",
    help="Default: 2e-5 SFT, 5e-6 DPO, 1e-6 GRPO (x10 with --lora).")]
BatchSizeFlag = Annotated[int, typer.Option(
    "--batch-size", help="Per-device batch size (grpo: completions, a multiple of "
                         "--num-generations).")]
MaxLengthFlag = Annotated[int, typer.Option(
    "--max-length", help="Truncate sequences to N tokens.")]
BetaFlag = Annotated[float | None, typer.Option(
    "--beta", help="KL strength: DPO (default 0.1), GRPO (default 0.04, 0: no "
                   "reference model).")]
SeedFlag = Annotated[int, typer.Option("--seed", help="Seeds LoRA init, data order, dropout.")]
ResumeFlag = Annotated[bool, typer.Option(
    "--resume/--no-resume",
    help="Continue an interrupted run from its last checkpoint.")]
NumGenerationsFlag = Annotated[int, typer.Option(
    "--num-generations", help="grpo: completions sampled per prompt.")]
MaxCompletionLengthFlag = Annotated[int, typer.Option(
    "--max-completion-length", help="grpo: tokens per sampled completion.")]
TemperatureFlag = Annotated[float, typer.Option(
    "--temperature", help="grpo: sampling temperature.")]
UseVllmFlag = Annotated[bool | None, typer.Option(
    "--use-vllm/--no-vllm",
    help="grpo: generate with vLLM (default: on a GPU with vllm installed).")]
VllmModeFlag = Annotated[str, typer.Option(
    "--vllm-mode", help="grpo: colocate (in the training process) or server.")]
VllmServerUrlFlag = Annotated[str | None, typer.Option(
    "--vllm-server-url",
    help="grpo --vllm-mode server: the `trl vllm-serve` server's URL, e.g. "
         "http://gpu-box:8000 (default: TRL's 0.0.0.0:8000).")]
RewardWorkersFlag = Annotated[int, typer.Option(
    "--reward-workers",
    help="grpo: score rewards in N processes (for expensive checks: code tests).")]
CheckRewardWeightFlag = Annotated[float, typer.Option(
    "--check-reward-weight",
    help="grpo: weight of each per-check reward (0: logged, not trained on).")]
FormatPenaltyFlag = Annotated[float, typer.Option(
    "--format-penalty",
    help="grpo: weight of -1 for empty or cut-off completions (0: off).")]
LlmFeaturesFlag = Annotated[str, typer.Option(
    "--llm-features",
    help="grpo: a rubric's LLM-judged features: checks (score its checks only) or "
         "refuse.")]
ToolMaxTurnsFlag = Annotated[int, typer.Option(
    "--tool-max-turns", help="grpo on tasks with tools: model turns an episode may take.")]
FreeFirstTurnFlag = Annotated[bool, typer.Option(
    "--free-first-turn", help="grpo on tasks with tools: let the policy choose its first turn "
                              "(by default it is a tool call).")]
JudgeFlag = Annotated[str | None, typer.Option(
    "--judge", help="grpo --judged-reward rank: the judge's chat model spec (default: the "
                    "base model, frozen); distill --from-trajectories: also the gate's judge.")]
JudgedRewardFlag = Annotated[str, typer.Option(
    "--judged-reward", help="grpo: the reward's judged part: none (checks only), rank (a judge "
                            "ranks each group) or vote (majority short answer, TTRL).")]
JudgedRewardWeightFlag = Annotated[float, typer.Option(
    "--judged-reward-weight", help="grpo: the judged part's weight (the checks' part: 1).")]
ParallelFlag = Annotated[str, typer.Option(
    "--parallel", help="How training spreads over GPUs: auto (DDP on 2+ GPUs), ddp, fsdp or "
                       "zero3 (shard a full fine-tune that does not fit one GPU); --dry-run "
                       "prints the accelerate launch line.")]
DryRunFlag = Annotated[bool, typer.Option(
    "--dry-run", help="Print the trainer arguments and launch command; train nothing.")
    ]


@app.command("train")
def train_command(
    data: Annotated[Path, typer.Option(
        "--data", help="A dataset folder written by `agentic-loop export` (grpo: or a task "
                       "file).")],
    out: Annotated[Path, typer.Option("--out", "-o", help="Where the model and its card go.")],
    method: MethodFlag = "sft",
    base: BaseFlag = "local",
    lora: LoraFlag = False,
    lora_r: Annotated[int, typer.Option("--lora-r", help="LoRA rank.")] = 16,
    lora_alpha: Annotated[int, typer.Option("--lora-alpha", help="LoRA scaling alpha.")] = 32,
    lora_dropout: Annotated[float, typer.Option("--lora-dropout", help="LoRA dropout.")] = 0.05,
    lora_target_modules: Annotated[str, typer.Option(
        "--lora-target-modules",
        help="Modules LoRA adapts: all-linear, or names joined by commas (q_proj,v_proj).")
    ] = "all-linear",
    no_merge: NoMergeFlag = False,
    max_steps: MaxStepsFlag = None,
    epochs: EpochsFlag = 1.0,
    learning_rate: LearningRateFlag = None,
    lr_scheduler_type: Annotated[str, typer.Option(
        "--lr-scheduler-type", help="linear, cosine, constant, constant_with_warmup, ... "
                                    "(transformers' SchedulerType).")] = "linear",
    warmup_steps: Annotated[float, typer.Option(
        "--warmup-steps", help="Linear warmup: N steps, or below 1 a fraction of the run.")
    ] = 0.0,
    batch_size: BatchSizeFlag = 4,
    gradient_accumulation_steps: Annotated[int, typer.Option(
        "--gradient-accumulation-steps", help="Batches summed per optimizer step.")] = 1,
    gradient_checkpointing: Annotated[bool, typer.Option(
        "--gradient-checkpointing", help="Recompute activations: less memory, slower.")] = False,
    max_length: MaxLengthFlag = 512,
    validation_split: Annotated[float, typer.Option(
        "--validation-split",
        help="Hold out this share of the rows (sft, dpo) and report its eval_loss.")] = 0.0,
    report_to: Annotated[str, typer.Option(
        "--report-to", help="Where the training curves go: none, tensorboard, wandb, ... "
                            "(comma-separated; TensorBoard's go to OUT/logs).")] = "none",
    save_steps: Annotated[int, typer.Option(
        "--save-steps", help="Checkpoint (and score the held-out share) every N steps.")] = 50,
    tool_format: Annotated[str, typer.Option(
        "--tool-format", help="How tool-calling rows are shown: engine (the in-process "
                              "engine's format), chat_template (the model's own), or auto.")
    ] = "auto",
    beta: BetaFlag = None,
    seed: SeedFlag = 0,
    resume: ResumeFlag = True,
    num_generations: NumGenerationsFlag = 4,
    max_completion_length: MaxCompletionLengthFlag = 128,
    temperature: TemperatureFlag = 1.0,
    use_vllm: UseVllmFlag = None,
    vllm_mode: VllmModeFlag = "colocate",
    vllm_server_url: VllmServerUrlFlag = None,
    reward_workers: RewardWorkersFlag = 0,
    check_reward_weight: CheckRewardWeightFlag = 0.0,
    format_penalty: FormatPenaltyFlag = 0.0,
    llm_features: LlmFeaturesFlag = "checks",
    tool_max_turns: ToolMaxTurnsFlag = 4,
    free_first_turn: FreeFirstTurnFlag = False,
    judge: JudgeFlag = None,
    judged_reward: JudgedRewardFlag = "none",
    judged_reward_weight: JudgedRewardWeightFlag = 1.0,
    parallel: ParallelFlag = "auto",
    dry_run: DryRunFlag = False,
    verbose: VerboseFlag = False,
) -> None:
    """Train a model on an exported dataset with TRL: SFT, DPO, SFT then DPO, or GRPO on tasks.

    Examples:

        agentic-loop train --data data/distill --method sft+dpo --lora --out runs/m1

        agentic-loop train --data data/distill --lora --lora-r 8 --learning-rate 1e-4
        --lr-scheduler-type cosine --warmup-steps 0.1 --validation-split 0.1
        --report-to tensorboard --out runs/m2

        agentic-loop train --data tasks.jsonl --method grpo --lora --out runs/g1

        agentic-loop train --data tasks.jsonl --method grpo --judged-reward rank
        --judge openai:gpt-4o-mini --out runs/g2
    """
    targets: str | tuple[str, ...] = lora_target_modules.strip()
    if targets != "all-linear":
        targets = tuple(t.strip() for t in lora_target_modules.split(",") if t.strip())
        if not targets:
            raise ConfigError("--lora-target-modules is empty; pass all-linear or module names "
                              "joined by commas, e.g. q_proj,v_proj")
    options: dict[str, Any] = {
        "lora": lora, "lora_r": lora_r, "lora_alpha": lora_alpha, "lora_dropout": lora_dropout,
        "lora_target_modules": targets, "max_steps": max_steps, "epochs": epochs, "beta": beta,
        "learning_rate": learning_rate, "lr_scheduler_type": lr_scheduler_type,
        "warmup_steps": warmup_steps, "batch_size": batch_size,
        "gradient_accumulation_steps": gradient_accumulation_steps,
        "gradient_checkpointing": gradient_checkpointing, "max_length": max_length,
        "validation_split": validation_split, "report_to": report_to, "save_steps": save_steps,
        "tool_format": tool_format, "seed": seed, "resume": resume, "parallel": parallel}
    options.update(grpo_options(method, {
        "num_generations": num_generations, "max_completion_length": max_completion_length,
        "temperature": temperature, "use_vllm": use_vllm, "vllm_mode": vllm_mode,
        "vllm_server_base_url": vllm_server_url, "reward_workers": reward_workers,
        "check_reward_weight": check_reward_weight, "format_penalty": format_penalty,
        "llm_features": llm_features,
        "tool_max_turns": tool_max_turns, "free_first_turn": free_first_turn, "judge": judge,
        "judged_reward": judged_reward, "judged_reward_weight": judged_reward_weight}))
    run_training(data, out, method=method, base=base, merge_lora=not no_merge, options=options,
                 dry_run=dry_run, verbose=verbose)


def run_training(data: Path, out: Path, *, method: str, base: str, merge_lora: bool,
                 options: dict[str, Any], dry_run: bool, verbose: bool = False) -> None:
    """Check the settings, then print a dry run or train and print the result.

    The libraries' own output (TRL's dict logs, tqdm bars, warnings) shows only
    with ``verbose``; otherwise one ``train steps`` bar does (:mod:`.quiet`).
    """
    from agentic_loop.distill.train import TrainSettings

    settings = TrainSettings(method=method, merge_lora=merge_lora,
                             **{k: v for k, v in options.items() if k != "resume"})
    if dry_run:
        print_dry_run(settings, data, out, base, options.get("resume", True))
        return
    from agentic_loop.distill.train import Device, accelerate_command, train
    from agentic_loop.distill.train.parallel import check_launch

    device = Device.detect()
    check_launch(settings.parallel, device, accelerate_command(
        cli_args(settings, data, out, base, options.get("resume", True)), device,
        parallel=settings.parallel))

    with third_party_quiet(verbose, training=True):
        result = train(data, out, method=method, base=base, merge_lora=merge_lora, **options)
    print_training(result)


#: The options whose flag is not their field's name.
_FLAGS = {"vllm_server_base_url": "--vllm-server-url"}


def grpo_options(method: str, given: dict[str, Any]) -> dict[str, Any]:
    """GRPO's options for a grpo run; an error when one is set for another method."""
    if method == "grpo":
        return given
    from agentic_loop.distill.train import TrainSettings

    defaults = TrainSettings()
    changed = [k for k, v in given.items() if v != getattr(defaults, k)]
    if changed:
        flags = ", ".join(_FLAGS.get(k, "--" + k.replace("_", "-")) for k in changed)
        raise ConfigError(f"{flags} apply to --method grpo only; drop them or pass --method grpo")
    return {}


def cli_args(settings: TrainSettings, data: Path, out: Path, base: str,
             resume: bool) -> list[str]:
    """The ``train`` arguments that reproduce ``settings`` (non-default values only).

    >>> from agentic_loop.distill.train import TrainSettings
    >>> s = TrainSettings(lora=True, lora_target_modules=("q_proj", "v_proj"), merge_lora=False)
    >>> cli_args(s, Path("d"), Path("o"), "local", resume=False)[9:]
    ['--lora', '--no-merge', '--lora-target-modules', 'q_proj,v_proj', '--no-resume']
    """
    from agentic_loop.distill.train.parallel import train_args

    return train_args(settings, data, out, base, resume)


def print_dry_run(settings: TrainSettings, data: Path, out: Path, base: str,
                  resume: bool) -> None:
    """What a run would do on this machine: device, each stage's trainer arguments, the command.

    The trainer arguments are the keyword arguments of TRL's ``SFTConfig``,
    ``DPOConfig`` or ``GRPOConfig`` for each stage, as the run would pass them.
    """
    import json
    import shlex

    from agentic_loop.distill.train import Device, accelerate_command, grpo_config_kwargs
    from agentic_loop.distill.train.stages import trainer_kwargs

    device = Device.detect()
    console.print(f"device: {device.gpus} GPU(s), precision {device.precision}, vLLM "
                  f"{'installed' if device.vllm else 'not installed'}", highlight=False)
    if settings.lora:
        targets = settings.lora_target_modules
        console.print(f"LoRA: r={settings.lora_r}, alpha={settings.lora_alpha}, dropout="
                      f"{settings.lora_dropout:g}, target modules "
                      f"{targets if isinstance(targets, str) else ','.join(targets)}, "
                      f"{'merged' if settings.merge_lora else 'kept as an adapter'}",
                      highlight=False, soft_wrap=True)
    for stage in (s for s in settings.stages if s != "grpo"):
        kwargs = trainer_kwargs(stage, settings, device.precision, out / "checkpoints" / stage)
        console.print(f"{stage.upper()}Config: " + escape(json.dumps(kwargs, default=str)),
                      highlight=False, soft_wrap=True)
    if settings.method == "grpo":
        from agentic_loop.distill.train import RubricRewards, load_prompt_set

        prompts = load_prompt_set(data, llm_features=settings.llm_features,
                                  judged_reward=settings.judged_reward)
        rewards = RubricRewards(prompts.tasks, check_weight=settings.check_reward_weight,
                                format_penalty=settings.format_penalty,
                                max_completion_length=settings.max_completion_length)
        kwargs = grpo_config_kwargs(settings, device, out / "checkpoints" / "grpo",
                                    reward_weights=rewards.weights)
        console.print(f"prompts: {len(prompts.tasks)} tasks ({prompts.skipped} without a check "
                      "left out)", highlight=False)
        for note in prompts.notes:
            console.print(f"  note: {escape(note)}", highlight=False, soft_wrap=True)
        from agentic_loop.distill.train.judged_reward import check_judged

        check_judged(settings.judged_reward, prompts.tasks)
        judged = _judged_line(settings, base)
        console.print("reward functions: " + ", ".join(
            [f"{f.__name__} (x{f.weight:g})" for f in rewards.functions] + judged),
            highlight=False, soft_wrap=True)
        console.print("GRPOConfig: " + escape(json.dumps(kwargs, default=str)), highlight=False,
                      soft_wrap=True)
    args = cli_args(settings, data, out, base, resume)
    command = accelerate_command(args, device, parallel=settings.parallel)
    console.print("command: " + escape(shlex.join(command)), highlight=False, soft_wrap=True)
    from agentic_loop.distill.train.parallel import launch_notes

    program = command[command.index(args[0]) - 1]  # the agentic-loop it would launch
    for line in launch_notes(settings.parallel, device, args, program=program):
        console.print(escape(line), highlight=False, soft_wrap=True)


def _judged_line(settings: TrainSettings, base: str) -> list[str]:
    """The judged part as the dry run lists it (no judge model is loaded for a dry run).

    >>> from agentic_loop.distill.train import TrainSettings
    >>> _judged_line(TrainSettings(method="grpo", judged_reward="rank"), "local")
    ['judge_rank (x1, judge: the base model local)']
    >>> _judged_line(TrainSettings(method="grpo"), "local")
    []
    """
    from agentic_loop.distill.train.judged_reward import RANK, VOTE

    weight = f"x{settings.judged_reward_weight:g}"
    if settings.judged_reward == "rank":
        judge = settings.judge or f"the base model {base}"
        return [f"{RANK} ({weight}, judge: {escape(judge)})"]
    if settings.judged_reward == "vote":
        return [f"{VOTE} ({weight}, majority vote on tasks without a check)"]
    return []


def print_training(result: TrainResult) -> None:
    """The stages' table, where the model is, and how to load it."""
    title = f"Trained {escape(str(result.model_dir))}"
    if result.skipped:
        title += " (already finished: reused)"
    table = FitTable(title, [Col("stage"), Col("steps", justify="right"),
                             Col("loss", justify="right"), Col("tokens/s", justify="right"),
                             Col("resumed from", wrap=True, min_width=12)],
                     title_justify="left")
    for stage in result.stages:
        rate = stage.tokens_per_s
        table.add_row(stage.method, str(stage.steps),
                      "-" if stage.train_loss is None else f"{stage.train_loss:.4f}",
                      "-" if rate is None else f"{rate:.1f}", stage.resumed_from or "-")
    console.print(table)
    kind = ("LoRA adapter (in-process it loads merged onto its base; vLLM serves it by name: "
            "`agentic-loop serve --model DIR`)" if result.adapter else "model")
    console.print(f"{kind}: {escape(str(result.model_dir))}; card: "
                  f"{escape(str(result.model_dir / 'model_card.yaml'))}", highlight=False,
                  soft_wrap=True)
    console.print(f"use it: load_chat_model({result.spec!r})", highlight=False, soft_wrap=True)
