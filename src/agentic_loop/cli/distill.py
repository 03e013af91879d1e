"""``agentic-loop distill``: train a model on an exported dataset, or run the whole loop.

Two forms:

* ``--data DIR``: deprecated, ``agentic-loop train`` (:mod:`agentic_loop.cli.train`)
  with the same flags and more; it still runs for one release, with a
  ``deprecated: use agentic-loop train`` line on stderr.
* ``--from-trajectories PATH``: the training loop in one command: export,
  train, evaluate against the registry's current model on ``--golden``,
  register, and promote when the gate passes. It is one round of
  ``agentic-loop improve`` on the logged runs (:func:`agentic_loop.distill.loop.distill_loop`),
  shown as improve shows its rounds; ``--out`` is its work folder (``round-001/``,
  ``improve.json``), and a killed run started again continues where it stopped.
  ``--judge`` (train's flag) names the judge model: the gate judges the golden
  tasks' judged features with it (both models), and ``--method grpo
  --judged-reward rank`` ranks its groups with it (``--judged-reward vote``: TTRL's
  majority vote on tasks without a check); default: the current model.

Flags are checked before any model loads; a bad one is a one-line error
with exit code 2. Training shows one ``train steps`` bar; ``--verbose`` shows
the libraries' own logs, bars and warnings instead (:mod:`agentic_loop.cli.quiet`).

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
from agentic_loop.cli.common import console, deprecated, progress_bar
from agentic_loop.cli.quiet import VerboseFlag, third_party_quiet
from agentic_loop.cli.train import (  # the flags both commands take, declared once
    BaseFlag,
    BatchSizeFlag,
    BetaFlag,
    CheckRewardWeightFlag,
    DryRunFlag,
    EpochsFlag,
    FormatPenaltyFlag,
    JudgedRewardFlag,
    JudgedRewardWeightFlag,
    JudgeFlag,
    LearningRateFlag,
    LlmFeaturesFlag,
    LoraFlag,
    MaxCompletionLengthFlag,
    MaxLengthFlag,
    MaxStepsFlag,
    MethodFlag,
    NoMergeFlag,
    NumGenerationsFlag,
    ResumeFlag,
    RewardWorkersFlag,
    SeedFlag,
    TemperatureFlag,
    UseVllmFlag,
    VllmModeFlag,
    grpo_options,
    run_training,
)
from agentic_loop.errors import ConfigError

__all__ = ["distill_command"]

#: The judged reward's flags at their defaults (left out of a loop's train options).
_JUDGED_DEFAULTS: dict[str, Any] = {"judged_reward": "none", "judged_reward_weight": 1.0}


@app.command("distill")
def distill_command(
    out: Annotated[Path, typer.Option(
        "--out", "-o",
        help="Model folder (--data), or the loop's work folder (round-001/, improve.json).")],
    data: Annotated[Optional[Path], typer.Option(  # noqa: UP045 - typer needs Optional here
        "--data", help="Deprecated: `agentic-loop train --data` (same flags and more).")
    ] = None,
    from_trajectories: Annotated[Optional[list[Path]], typer.Option(  # noqa: UP045
        "--from-trajectories",
        help="Run the whole loop from TrajectoryLog folders or .jsonl files (repeat for "
             "several).")] = None,
    method: MethodFlag = "sft",
    base: BaseFlag = "local",
    lora: LoraFlag = False,
    no_merge: NoMergeFlag = False,
    max_steps: MaxStepsFlag = None,
    epochs: EpochsFlag = 1.0,
    beta: BetaFlag = None,
    learning_rate: LearningRateFlag = None,
    batch_size: BatchSizeFlag = 4,
    max_length: MaxLengthFlag = 512,
    seed: SeedFlag = 0,
    resume: ResumeFlag = True,
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
    num_generations: NumGenerationsFlag = 4,
    max_completion_length: MaxCompletionLengthFlag = 128,
    temperature: TemperatureFlag = 1.0,
    use_vllm: UseVllmFlag = None,
    vllm_mode: VllmModeFlag = "colocate",
    reward_workers: RewardWorkersFlag = 0,
    check_reward_weight: CheckRewardWeightFlag = 0.0,
    format_penalty: FormatPenaltyFlag = 0.0,
    llm_features: LlmFeaturesFlag = "checks",
    judge: JudgeFlag = None,
    judged_reward: JudgedRewardFlag = "none",
    judged_reward_weight: JudgedRewardWeightFlag = 1.0,
    dry_run: DryRunFlag = False,
    verbose: VerboseFlag = False,
) -> None:
    """Distill data into a model's weights with TRL; or run export -> train -> eval -> promote.

    Examples:

        agentic-loop distill --from-trajectories data/trajectories --golden g.jsonl --out runs/l1

        agentic-loop distill --from-trajectories data/trajectories --golden g.jsonl \\
            --method grpo --judged-reward rank --judge openai:gpt-4o-mini --out runs/l2

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
    grpo = {"num_generations": num_generations, "max_completion_length": max_completion_length,
            "temperature": temperature, "use_vllm": use_vllm, "vllm_mode": vllm_mode,
            "reward_workers": reward_workers, "check_reward_weight": check_reward_weight,
            "format_penalty": format_penalty, "llm_features": llm_features}
    judged = {k: v for k, v in (("judged_reward", judged_reward),
                                ("judged_reward_weight", judged_reward_weight))
              if v != _JUDGED_DEFAULTS[k]}  # at their defaults: a round's fingerprint as before
    if data is not None:  # the trainer takes the judge (train's checks: grpo, rank)
        options.update(grpo_options(method, {**grpo, **judged, "judge": judge}))
        run_training(data, out, method=method, base=base, merge_lora=not no_merge,
                     options=options, dry_run=dry_run, verbose=verbose)
        return
    from agentic_loop.distill.train import TrainSettings

    # the loop's judge also judges the gate (any method): ImproveSettings, not the trainer's
    options.update(grpo_options(method, {**grpo, **judged}))
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
    from agentic_loop.cli.improve import StageDisplay, print_rounds

    with progress_bar() as bar, third_party_quiet(verbose, training=True, bar=bar):
        loop = distill_loop(from_trajectories, out, golden=golden, registry=registry, base=base,
                            method=method, arch=arch, judge=judge,
                            export_options={"pii": pii, "min_score": min_score},
                            train_options=options, progress=StageDisplay(bar))
    print_rounds(loop)
    report = loop.reports[0]
    assert report.decision is not None and report.registration is not None
    version = report.registration.version
    promoted = (" and promoted it" if report.registration.promoted else " (not promoted: "
                f"review it, then `agentic-loop registry promote {version} --force`)")
    console.print(f"gate: {escape(report.decision.value)} vs {escape(str(report.model))}; "
                  f"registered {version}{promoted}", highlight=False)
    for reason in report.reasons:
        console.print(f"  {escape(reason)}", highlight=False, soft_wrap=True)
