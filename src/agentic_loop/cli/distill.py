"""``agentic-loop distill``: train a model on an exported dataset, or run the whole loop.

Two forms:

* ``--data DIR``: train on a dataset ``agentic-loop export`` wrote (TRL SFT,
  DPO or SFT then DPO; LoRA or full) and write the model and its card to ``--out``.
  ``--method grpo`` trains online on tasks instead (``--data`` a task file or
  an export folder), each task's locked rubric as the reward; ``--dry-run``
  prints the TRL arguments and the (``accelerate launch``) command it would
  run on this machine, and trains nothing.
* ``--from-trajectories PATH``: the training loop in one command: export,
  train, evaluate against the registry's current model on ``--golden``,
  register, and promote when the gate passes.

Flags are checked before any model loads; a bad one is a one-line error
with exit code 2. The trainer shows its own progress bar.

Example:
    >>> from typer.testing import CliRunner
    >>> from agentic_loop.cli import app
    >>> result = CliRunner().invoke(app, ["distill", "--help"])
    >>> result.exit_code, "--from-trajectories" in result.output
    (0, True)
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Optional

import typer
from rich.markup import escape
from rich.table import Table

from agentic_loop.cli import app
from agentic_loop.cli.common import console
from agentic_loop.errors import ConfigError

if TYPE_CHECKING:
    from agentic_loop.distill.train import TrainResult

__all__ = ["distill_command"]


@app.command("distill")
def distill_command(
    out: Annotated[Path, typer.Option(
        "--out", "-o",
        help="Model folder (--data), or the loop's work folder (data/, model/, eval.*).")],
    data: Annotated[Optional[Path], typer.Option(  # noqa: UP045 - typer needs Optional here
        "--data", help="A dataset folder written by `agentic-loop export` (grpo: or a task "
                       "file).")] = None,
    from_trajectories: Annotated[Optional[list[Path]], typer.Option(  # noqa: UP045
        "--from-trajectories",
        help="Run the whole loop from TrajectoryLog folders or .jsonl files (repeat for "
             "several).")] = None,
    method: Annotated[str, typer.Option("--method", help="sft, dpo, sft+dpo or grpo.")] = "sft",
    base: Annotated[str, typer.Option(
        "--base", help="Base model: local, local:<dir> or an HF dir.")] = "local",
    lora: Annotated[bool, typer.Option(
        "--lora", help="Train a LoRA adapter (PEFT) instead of every weight.")] = False,
    no_merge: Annotated[bool, typer.Option(
        "--no-merge",
        help="Keep the LoRA adapter unmerged (vLLM serves it by name and swaps it live; "
             "in-process it loads merged onto its base).")] = False,
    max_steps: Annotated[Optional[int], typer.Option(  # noqa: UP045
        "--max-steps", help="Stop after N optimizer steps (overrides --epochs).")] = None,
    epochs: Annotated[float, typer.Option("--epochs", help="Passes over the data.")] = 1.0,
    beta: Annotated[Optional[float], typer.Option(  # noqa: UP045
        "--beta", help="KL strength: DPO (default 0.1), GRPO (default 0.04, 0: no "
                       "reference model).")] = None,
    learning_rate: Annotated[Optional[float], typer.Option(  # noqa: UP045
        "--learning-rate",
        help="Default: 2e-5 SFT, 5e-6 DPO, 1e-6 GRPO (x10 with --lora).")] = None,
    batch_size: Annotated[int, typer.Option(
        "--batch-size", help="Per-device batch size (grpo: completions, a multiple of "
                             "--num-generations).")] = 4,
    max_length: Annotated[int, typer.Option(
        "--max-length", help="Truncate sequences to N tokens.")] = 512,
    seed: Annotated[int, typer.Option("--seed", help="Seeds LoRA init, data order, dropout.")] = 0,
    resume: Annotated[bool, typer.Option(
        "--resume/--no-resume",
        help="Continue an interrupted run from its last checkpoint.")] = True,
    golden: Annotated[Optional[Path], typer.Option(  # noqa: UP045
        "--golden",
        help="Golden-set JSONL for the loop's gate (needed with --from-trajectories).")] = None,
    registry: Annotated[Path, typer.Option(
        "--registry", help="Model registry folder (loop).")] = Path("runs/registry"),
    arch: Annotated[Optional[str], typer.Option(  # noqa: UP045
        "--arch", help="Also gate inside reflection, archive_refine or reflexion (loop).")] = None,
    pii: Annotated[str, typer.Option(
        "--pii", help="The loop's export PII gate: spacy, regex or off.")] = "spacy",
    min_score: Annotated[float, typer.Option(
        "--min-score", help="The loop's export reward threshold, in [0, 1].")] = 0.8,
    num_generations: Annotated[int, typer.Option(
        "--num-generations", help="grpo: completions sampled per prompt.")] = 4,
    max_completion_length: Annotated[int, typer.Option(
        "--max-completion-length", help="grpo: tokens per sampled completion.")] = 128,
    temperature: Annotated[float, typer.Option(
        "--temperature", help="grpo: sampling temperature.")] = 1.0,
    use_vllm: Annotated[Optional[bool], typer.Option(  # noqa: UP045
        "--use-vllm/--no-vllm",
        help="grpo: generate with vLLM (default: on a GPU with vllm installed).")] = None,
    vllm_mode: Annotated[str, typer.Option(
        "--vllm-mode", help="grpo: colocate (in the training process) or server.")] = "colocate",
    reward_workers: Annotated[int, typer.Option(
        "--reward-workers",
        help="grpo: score rewards in N processes (for expensive checks: code tests).")] = 0,
    check_reward_weight: Annotated[float, typer.Option(
        "--check-reward-weight",
        help="grpo: weight of each per-check reward (0: logged, not trained on).")] = 0.0,
    format_penalty: Annotated[float, typer.Option(
        "--format-penalty",
        help="grpo: weight of -1 for empty or cut-off completions (0: off).")] = 0.0,
    llm_features: Annotated[str, typer.Option(
        "--llm-features",
        help="grpo: a rubric's LLM-judged features: checks (score its checks only) or "
             "refuse.")] = "checks",
    dry_run: Annotated[bool, typer.Option(
        "--dry-run", help="Print the trainer arguments and launch command; train nothing.")
    ] = False,
) -> None:
    """Distill data into a model's weights with TRL; or run export -> train -> eval -> promote.

    Examples:

        agentic-loop distill --data data/distill --method sft+dpo --lora --out runs/m1

        agentic-loop distill --from-trajectories data/trajectories --golden g.jsonl --out runs/l1

        agentic-loop distill --data tasks.jsonl --method grpo --lora --out runs/g1
    """
    if (data is None) == (not from_trajectories):
        raise ConfigError("pass exactly one of --data DIR (train on an export) and "
                          "--from-trajectories PATH (run the whole loop)")
    if from_trajectories and golden is None:
        raise ConfigError("--from-trajectories needs --golden FILE: the loop promotes only a "
                          "model that beats the current one on a golden set")
    options: dict[str, Any] = {"lora": lora, "max_steps": max_steps, "epochs": epochs,
                               "beta": beta, "learning_rate": learning_rate,
                               "batch_size": batch_size, "max_length": max_length, "seed": seed,
                               "resume": resume}
    options.update(_grpo_options(method, {
        "num_generations": num_generations, "max_completion_length": max_completion_length,
        "temperature": temperature, "use_vllm": use_vllm, "vllm_mode": vllm_mode,
        "reward_workers": reward_workers, "check_reward_weight": check_reward_weight,
        "format_penalty": format_penalty, "llm_features": llm_features}))
    from agentic_loop.distill.train import TrainSettings

    settings = TrainSettings(method=method, merge_lora=not no_merge,
                             **{k: v for k, v in options.items() if k != "resume"})
    if dry_run:
        if data is None:
            raise ConfigError("--dry-run applies to --data (one training run); drop it with "
                              "--from-trajectories")
        _print_dry_run(settings, data, out, base, resume)
        return
    if data is not None:
        from agentic_loop.distill.train import train

        result = train(data, out, method=method, base=base, merge_lora=not no_merge, **options)
        _print_training(result)
        return
    from agentic_loop.distill.loop import distill_loop

    assert golden is not None and from_trajectories
    if no_merge:
        raise ConfigError("--no-merge does not apply to --from-trajectories: the loop evaluates "
                          "a merged model; drop --no-merge")
    loop = distill_loop(from_trajectories, out, golden=golden, registry=registry, base=base,
                        method=method, arch=arch,
                        export_options={"pii": pii, "min_score": min_score},
                        train_options=options)
    _print_training(loop.train)
    promoted = (" and promoted it" if loop.promoted else " (not promoted: review it, then "
                f"`agentic-loop promote {loop.version.version}`)")
    console.print(f"gate: {escape(str(loop.evaluation.decision.value))} vs "
                  f"{escape(loop.baseline)}; registered {loop.version.version}{promoted}",
                  highlight=False)
    for reason in loop.evaluation.reasons:
        console.print(f"  {escape(reason)}", highlight=False, soft_wrap=True)


def _grpo_options(method: str, given: dict[str, Any]) -> dict[str, Any]:
    """GRPO's options for a grpo run; an error when one is set for another method."""
    if method == "grpo":
        return given
    from agentic_loop.distill.train import TrainSettings

    defaults = TrainSettings()
    changed = [k for k, v in given.items() if v != getattr(defaults, k)]
    if changed:
        flags = ", ".join("--" + k.replace("_", "-") for k in changed)
        raise ConfigError(f"{flags} apply to --method grpo only; drop them or pass --method grpo")
    return {}


def _cli_args(settings: Any, data: Path, out: Path, base: str, resume: bool) -> list[str]:
    """The ``distill`` arguments that reproduce ``settings`` (non-default values only)."""
    from dataclasses import fields

    from agentic_loop.distill.train import TrainSettings

    defaults = TrainSettings(method=settings.method)
    args = ["distill", "--data", str(data), "--out", str(out), "--method", settings.method,
            "--base", base]
    flags = {"merge_lora": ("", "--no-merge"), "use_vllm": ("--use-vllm", "--no-vllm")}
    for field in fields(settings):
        value = getattr(settings, field.name)
        if field.name == "method" or value == getattr(defaults, field.name):
            continue
        if isinstance(value, bool):
            on, off = flags.get(field.name, ("--" + field.name.replace("_", "-"), ""))
            args += [flag for flag in ((on if value else off),) if flag]
        else:
            args += ["--" + field.name.replace("_", "-"), str(value)]
    return args if resume else [*args, "--no-resume"]


def _print_dry_run(settings: Any, data: Path, out: Path, base: str, resume: bool) -> None:
    import json
    import shlex

    from agentic_loop.distill.train import Device, accelerate_command, grpo_config_kwargs

    device = Device.detect()
    console.print(f"device: {device.gpus} GPU(s), precision {device.precision}, vLLM "
                  f"{'installed' if device.vllm else 'not installed'}", highlight=False)
    if settings.method == "grpo":
        from agentic_loop.distill.train import RubricRewards, load_prompt_set

        prompts = load_prompt_set(data, llm_features=settings.llm_features)
        rewards = RubricRewards(prompts.tasks, check_weight=settings.check_reward_weight,
                                format_penalty=settings.format_penalty,
                                max_completion_length=settings.max_completion_length)
        kwargs = grpo_config_kwargs(settings, device, out / "checkpoints" / "grpo",
                                    reward_weights=rewards.weights)
        console.print(f"prompts: {len(prompts.tasks)} tasks ({prompts.skipped} without a check "
                      "left out)", highlight=False)
        for note in prompts.notes:
            console.print(f"  note: {escape(note)}", highlight=False, soft_wrap=True)
        console.print("reward functions: " + ", ".join(
            f"{f.__name__} (x{f.weight:g})" for f in rewards.functions), highlight=False,
            soft_wrap=True)
        console.print("GRPOConfig: " + escape(json.dumps(kwargs, default=str)), highlight=False,
                      soft_wrap=True)
    command = accelerate_command(_cli_args(settings, data, out, base, resume), device)
    console.print("command: " + escape(shlex.join(command)), highlight=False, soft_wrap=True)


def _print_training(result: TrainResult) -> None:
    title = f"Trained {escape(str(result.model_dir))}"
    if result.skipped:
        title += " (already finished: reused)"
    table = Table(title=title, title_justify="left")
    for column in ("stage", "steps", "loss", "tokens/s", "resumed from"):
        table.add_column(column, justify="left" if column in ("stage", "resumed from") else "right")
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
