"""``agentic-loop distill``: train a model on an exported dataset, or run the whole loop.

Two forms:

* ``--data DIR``: train on a dataset ``agentic-loop export`` wrote (TRL SFT,
  DPO or SFT then DPO; LoRA or full) and write the model and its card to ``--out``.
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
        "--data", help="A dataset folder written by `agentic-loop export`.")] = None,
    from_trajectories: Annotated[Optional[list[Path]], typer.Option(  # noqa: UP045
        "--from-trajectories",
        help="Run the whole loop from TrajectoryLog folders or .jsonl files (repeat for "
             "several).")] = None,
    method: Annotated[str, typer.Option("--method", help="sft, dpo, or sft+dpo.")] = "sft",
    base: Annotated[str, typer.Option(
        "--base", help="Base model: local, local:<dir> or an HF dir.")] = "local",
    lora: Annotated[bool, typer.Option(
        "--lora", help="Train a LoRA adapter (PEFT) instead of every weight.")] = False,
    no_merge: Annotated[bool, typer.Option(
        "--no-merge",
        help="Keep the LoRA adapter unmerged (served by name through vLLM).")] = False,
    max_steps: Annotated[Optional[int], typer.Option(  # noqa: UP045
        "--max-steps", help="Stop after N optimizer steps (overrides --epochs).")] = None,
    epochs: Annotated[float, typer.Option("--epochs", help="Passes over the data.")] = 1.0,
    beta: Annotated[float, typer.Option("--beta", help="DPO's KL strength.")] = 0.1,
    learning_rate: Annotated[Optional[float], typer.Option(  # noqa: UP045
        "--learning-rate", help="Default: 2e-5 SFT, 5e-6 DPO (x10 with --lora).")] = None,
    batch_size: Annotated[int, typer.Option("--batch-size", help="Per-device batch size.")] = 4,
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
) -> None:
    """Distill data into a model's weights with TRL; or run export -> train -> eval -> promote.

    Examples:

        agentic-loop distill --data data/distill --method sft+dpo --lora --out runs/m1

        agentic-loop distill --from-trajectories data/trajectories --golden g.jsonl --out runs/l1
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
    from agentic_loop.distill.train import TrainSettings

    TrainSettings(method=method, merge_lora=not no_merge,
                  **{k: v for k, v in options.items() if k != "resume"})
    if data is not None:
        from agentic_loop.distill.train import train

        result = train(data, out, method=method, base=base, merge_lora=not no_merge, **options)
        _print_training(result)
        return
    from agentic_loop.distill.release import distill_loop

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
    kind = ("LoRA adapter (serve it with `agentic-loop serve --model DIR`)" if result.adapter
            else "model")
    console.print(f"{kind}: {escape(str(result.model_dir))}; card: "
                  f"{escape(str(result.model_dir / 'model_card.yaml'))}", highlight=False,
                  soft_wrap=True)
    if not result.adapter:
        console.print(f"use it: load_chat_model({result.spec!r})", highlight=False, soft_wrap=True)
