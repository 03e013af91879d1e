"""``agentic-loop distill``: train a model on an exported dataset, or run the whole loop.

Two forms:

* ``--data DIR``: deprecated, ``agentic-loop train`` (:mod:`agentic_loop.cli.train`)
  with the same flags and more; it still runs for one release, with a
  ``deprecated: use agentic-loop train`` line on stderr.
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
from typing import Annotated, Any, Optional

import typer
from rich.markup import escape

from agentic_loop.cli import app
from agentic_loop.cli.common import console, deprecated
from agentic_loop.cli.train import grpo_options, print_training, run_training
from agentic_loop.errors import ConfigError

__all__ = ["distill_command"]


@app.command("distill")
def distill_command(
    out: Annotated[Path, typer.Option(
        "--out", "-o",
        help="Model folder (--data), or the loop's work folder (data/, model/, eval.*).")],
    data: Annotated[Optional[Path], typer.Option(  # noqa: UP045 - typer needs Optional here
        "--data", help="Deprecated: `agentic-loop train --data` (same flags and more).")
    ] = None,
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

        agentic-loop distill --from-trajectories data/trajectories --golden g.jsonl --out runs/l1

        (--data is deprecated: agentic-loop train --data data/distill --out runs/m1)
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
    if data is not None:
        deprecated("train")
    options.update(grpo_options(method, {
        "num_generations": num_generations, "max_completion_length": max_completion_length,
        "temperature": temperature, "use_vllm": use_vllm, "vllm_mode": vllm_mode,
        "reward_workers": reward_workers, "check_reward_weight": check_reward_weight,
        "format_penalty": format_penalty, "llm_features": llm_features}))
    if data is not None:
        run_training(data, out, method=method, base=base, merge_lora=not no_merge,
                     options=options, dry_run=dry_run)
        return
    from agentic_loop.distill.train import TrainSettings

    TrainSettings(method=method, merge_lora=not no_merge,
                  **{k: v for k, v in options.items() if k != "resume"})
    if dry_run:
        raise ConfigError("--dry-run applies to --data (one training run); drop it with "
                          "--from-trajectories")
    from agentic_loop.distill.loop import distill_loop

    assert golden is not None and from_trajectories
    if no_merge:
        raise ConfigError("--no-merge does not apply to --from-trajectories: the loop evaluates "
                          "a merged model; drop --no-merge")
    loop = distill_loop(from_trajectories, out, golden=golden, registry=registry, base=base,
                        method=method, arch=arch,
                        export_options={"pii": pii, "min_score": min_score},
                        train_options=options)
    print_training(loop.train)
    promoted = (" and promoted it" if loop.promoted else " (not promoted: review it, then "
                f"`agentic-loop registry promote {loop.version.version}`)")
    console.print(f"gate: {escape(str(loop.evaluation.decision.value))} vs "
                  f"{escape(loop.baseline)}; registered {loop.version.version}{promoted}",
                  highlight=False)
    for reason in loop.evaluation.reasons:
        console.print(f"  {escape(reason)}", highlight=False, soft_wrap=True)
