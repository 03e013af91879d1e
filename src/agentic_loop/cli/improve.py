"""``agentic-loop improve``: rounds of grow, hint retry, train, gate, register, promote.

The flywheel in one command (:func:`agentic_loop.distill.loop.improve`):
the current model samples a task pool, its passing answers (and hinted
retries) become training data through the export's PII gate and curation,
a LoRA is trained from the model the gate last kept, and the candidate is
gated on a golden set held apart from the pool; PROMOTE promotes it and
swaps the served model. A killed run continues where it stopped when run
again with the same ``--work``. Each stage shows a progress bar; the end is
a table of the rounds, with ``improve.json`` and ``improve.png`` in ``--work``.

Example:
    >>> from typer.testing import CliRunner
    >>> from agentic_loop.cli import app
    >>> result = CliRunner().invoke(app, ["improve", "--help"])
    >>> result.exit_code, "--thresholds" in result.output
    (0, True)
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Optional

import typer
from rich.markup import escape

from agentic_loop.cli import app
from agentic_loop.cli.common import console, progress_bar
from agentic_loop.cli.quiet import VerboseFlag, third_party_quiet
from agentic_loop.cli.train import UseVllmFlag, VllmModeFlag, VllmServerUrlFlag
from agentic_loop.errors import ConfigError
from agentic_loop.tables import Col, FitTable, percent

if TYPE_CHECKING:
    from agentic_loop.distill.loop.records import ImproveResult, Rate

__all__ = ["NumProcessesFlag", "RoundParallelFlag", "StageDisplay", "improve_command",
           "judged_line", "parse_numbers", "print_rounds", "train_stage_line"]

#: How each round's train stage runs (shared with `flywheel run`).
RoundParallelFlag = Annotated[str, typer.Option(
    "--parallel", help="Train stage: none (in this process), or auto, ddp, fsdp, zero3: "
                       "accelerate launch through the shipped configuration (auto: DDP on "
                       "2+ GPUs, in-process otherwise).")]
NumProcessesFlag = Annotated[Optional[int], typer.Option(  # noqa: UP045 - typer needs Optional
    "--num-processes", help="Train stage: launched processes (default: one per GPU; with no "
                            "GPU, --parallel ddp launches N CPU processes).")]


def parse_numbers(text: str, flag: str) -> tuple[float, ...]:
    """``"7,8,9"`` as numbers; an error naming ``flag`` otherwise.

    >>> parse_numbers("7, 8,9", "--thresholds")
    (7.0, 8.0, 9.0)
    """
    try:
        values = tuple(float(part) for part in text.split(",") if part.strip())
    except ValueError:
        raise ConfigError(f"{flag} takes numbers separated by commas (e.g. 7,8,9), "
                          f"got {text!r}") from None
    if not values:
        raise ConfigError(f"{flag} needs at least one number, got {text!r}")
    return values


#: What a round's sized stages count (the grow stage: one sample per task and temperature);
#: matched on "round N: <stage>", so the export's own steps ("PII gate") count no tasks.
_COUNTED = ((": grow", "samples"), (": hint", "tasks"), (": gate", "held-out tasks"))


class StageDisplay:
    """The improve progress protocol on a rich progress bar: one line per stage."""

    def __init__(self, bar: Any) -> None:
        self.bar = bar
        self.job: Any = None

    def start(self, stage: str, total: int | None = None) -> None:
        if self.job is not None:
            task = self.bar.tasks[-1]
            self.bar.update(self.job, total=task.total or task.completed or 1,
                            completed=task.total or task.completed or 1)
        unit = next((u for key, u in _COUNTED if key in stage), "") if total is not None else ""
        self.job = self.bar.add_task(escape(stage), total=total, unit=unit)

    def advance(self, n: int = 1) -> None:
        if self.job is not None:
            self.bar.advance(self.job, n)


@app.command("improve")
def improve_command(
    golden: Annotated[Path, typer.Option(
        "--golden", help="Golden-set JSONL the gate scores on (no task shared with the pool).")],
    tasks: Annotated[Optional[Path], typer.Option(  # noqa: UP045 - typer needs Optional here
        "--tasks", help="Task pool JSONL (as the golden set): what each round samples.")] = None,
    from_trajectories: Annotated[Optional[list[str]], typer.Option(  # noqa: UP045
        "--from-trajectories",
        help="Instead of --tasks: logs (folders, .jsonl files or postgresql:// URLs) whose "
             "new runs give each round its tasks.")] = None,
    registry: Annotated[Path, typer.Option(
        "--registry", help="Model registry folder.")] = Path("runs/registry"),
    work: Annotated[Path, typer.Option(
        "--work", help="Work folder: round-NNN/, improve.json, improve.png (resumable).")
    ] = Path("runs/improve"),
    rounds: Annotated[int, typer.Option("--rounds", help="Round budget.")] = 3,
    samples: Annotated[int, typer.Option("--samples", help="Samples per task per round.")] = 4,
    method: Annotated[str, typer.Option(
        "--method", help="sft, dpo, sft+dpo or grpo (on the pool's prompts); resting on a "
        "judge: self-rewarding, spin, ttrl, constitutional.")] = "sft",
    arch: Annotated[str, typer.Option(
        "--arch", help="Architecture that samples: reflection, archive_refine, reflexion.")
    ] = "reflection",
    max_iterations: Annotated[int, typer.Option(
        "--max-iterations", help="The architecture's rounds per sample (1: single-shot).")] = 1,
    thresholds: Annotated[str, typer.Option(
        "--thresholds", help="Score each round's training data must reach (0-10), rising.")
    ] = "7,8,9",
    temperatures: Annotated[str, typer.Option(
        "--temperatures", help="Sampling temperatures, cycled over the samples.")] = "0.7,1.0",
    temperature_step: Annotated[float, typer.Option(
        "--temperature-step", help="Added to every temperature each round after the first.")
    ] = 0.0,
    hint: Annotated[bool, typer.Option(
        "--hint/--no-hint", help="Retry failed tasks once with the verifier's hint.")] = True,
    base: Annotated[str, typer.Option(
        "--base", help="Model before the registry has a current one: local, local:<dir>.")
    ] = "local",
    lora: Annotated[bool, typer.Option("--lora/--full", help="Train LoRA or every weight.")
                    ] = True,
    train_steps: Annotated[Optional[int], typer.Option(  # noqa: UP045
        "--train-steps", help="Optimizer steps per round (default: one epoch).")] = None,
    learning_rate: Annotated[Optional[float], typer.Option(  # noqa: UP045
        "--learning-rate", help="Default: the method's (see `distill --help`).")] = None,
    batch_size: Annotated[int, typer.Option("--batch-size", help="Per-device batch size.")] = 4,
    max_tokens: Annotated[int, typer.Option(
        "--max-tokens", help="Generation limit of samples and gate.")] = 128,
    min_gain: Annotated[float, typer.Option(
        "--min-gain", help="Golden pass-rate gain that counts as progress.")] = 0.01,
    patience: Annotated[int, typer.Option(
        "--patience", help="Rounds without progress before stopping.")] = 2,
    pii: Annotated[str, typer.Option("--pii", help="Export PII gate: spacy, regex or off.")
                   ] = "spacy",
    min_tasks: Annotated[int, typer.Option(
        "--min-tasks", help="Golden tasks the gate needs before it may promote.")] = 20,
    eval_arch: Annotated[Optional[str], typer.Option(  # noqa: UP045
        "--eval-arch", help="Also gate inside this architecture.")] = None,
    max_steps: Annotated[int, typer.Option(
        "--max-steps", help="Tool tasks: model calls per agent episode, at most.")] = 4,
    first_tool_call: Annotated[bool, typer.Option(
        "--first-tool-call", help="Tool tasks: each grown episode's first model call is a "
        "tool call (small models seldom open with one); the gate never forces it.")] = False,
    judge: Annotated[Optional[str], typer.Option(  # noqa: UP045
        "--judge", help="The judge model's spec: judges the gate's judged features and the "
        "data of self-rewarding, constitutional, judged grpo (default: the current model).")
    ] = None,
    judged_reward: Annotated[str, typer.Option(
        "--judged-reward", help="grpo: the reward's judged part: none (checks only), rank "
        "(the judge ranks each group) or vote (majority vote, TTRL's).")] = "none",
    principles: Annotated[Optional[Path], typer.Option(  # noqa: UP045
        "--principles", help="constitutional: a file of principles, one a line "
        "(default: a short built-in list).")] = None,
    min_rank_gap: Annotated[float, typer.Option(
        "--min-rank-gap", help="self-rewarding: smallest judge-score gap (0-10) of a pair.")
    ] = 2.0,
    review_logs: Annotated[Optional[list[Path]], typer.Option(  # noqa: UP045
        "--review-logs", help="Logs whose people's labels the agreement alarm checks the "
        "judge against (besides the round's own runs).")] = None,
    agreement_threshold: Annotated[float, typer.Option(
        "--agreement-threshold", help="Judged data trains only while judge-vs-people "
        "agreement (Spearman, kappa) is at least this.")] = 0.7,
    min_labels: Annotated[int, typer.Option(
        "--min-labels", help="Labels the agreement alarm needs before it can refuse.")] = 20,
    parallel: RoundParallelFlag = "none",
    num_processes: NumProcessesFlag = None,
    use_vllm: UseVllmFlag = None,
    vllm_mode: VllmModeFlag = "colocate",
    vllm_server_url: VllmServerUrlFlag = None,
    verbose: VerboseFlag = False,
) -> None:
    """Improve the model in rounds: sample the pool, train on what passed, gate, promote.

    Examples:

        agentic-loop improve --tasks pool.jsonl --golden golden.jsonl --rounds 2 --samples 4

        agentic-loop improve --from-trajectories runs/trajectories --golden g.jsonl --method grpo

    Methods resting on a judge (the agreement alarm gates their judged data; the notes
    say which judge made each round's data and what the alarm said):

        agentic-loop improve --tasks pool.jsonl --golden g.jsonl --method self-rewarding \\
            --judge local --review-logs runs/trajectories

    Tool tasks (a task naming its tools, ``"metadata": {"tools": ["calculator"]}``) are run
    by the agent: grow, hint and gate; the table's notes give each round's tool use:

        agentic-loop improve --tasks tool_pool.jsonl --golden tool_golden.jsonl --first-tool-call

    Each round's training on 8 GPUs, a full fine-tune sharded by FSDP (the exact launch line
    goes into each round's state.json):

        agentic-loop improve --tasks pool.jsonl --golden g.jsonl --full --parallel fsdp
    """
    from agentic_loop.distill.loop.improve import ImproveSettings, improve

    train_options: dict[str, Any] = {"lora": lora, "max_steps": train_steps,
                                     "learning_rate": learning_rate, "batch_size": batch_size}
    if judged_reward != "none":  # the trainer checks the name; the alarm gates it each round
        train_options["judged_reward"] = judged_reward
    settings = ImproveSettings(
        rounds=rounds, samples=samples, arch=arch, max_iterations=max_iterations,
        temperatures=parse_numbers(temperatures, "--temperatures"),
        temperature_step=temperature_step,
        thresholds=parse_numbers(thresholds, "--thresholds"), method=method, hint_retry=hint,
        base=base, max_tokens=max_tokens, min_gain=min_gain, patience=patience,
        eval_arch=eval_arch, max_steps=max_steps, first_tool_call=first_tool_call,
        judge=judge, principles=str(principles) if principles is not None else None,
        min_rank_gap=min_rank_gap, review_logs=tuple(str(p) for p in review_logs or ()),
        agreement_threshold=agreement_threshold, min_labels=min_labels,
        parallel=parallel, num_processes=num_processes,  # type: ignore[arg-type]
        use_vllm=use_vllm, vllm_mode=vllm_mode, vllm_server_base_url=vllm_server_url,
        train_options=train_options, export_options={"pii": pii},
        eval_options={"min_tasks": min_tasks})
    console.print(train_stage_line(settings), highlight=False, soft_wrap=True)
    with progress_bar() as bar, third_party_quiet(verbose, training=True, bar=bar):
        result = improve(tasks, golden=golden, registry=registry, work_dir=work,
                         trajectories=from_trajectories, settings=settings,
                         progress=StageDisplay(bar))
    print_rounds(result)


def train_stage_line(settings: Any) -> str:
    """How every round will train here (refusing, before any sampling, what cannot run).

    >>> from agentic_loop.distill.loop.settings import ImproveSettings
    >>> train_stage_line(ImproveSettings())
    'train stage: in-process (--parallel none)'
    """
    from agentic_loop.distill.loop.launch import preflight

    return "train stage: " + escape(preflight(settings).line())


def judged_line(judged: Any) -> str:
    """One line on who made a judged round's data and what the alarm said ("" for none).

    >>> print(judged_line({"method": "self-rewarding", "judge": "m", "allowed": False,
    ...                    "reason": "kappa 0.2 < 0.7", "train_method": "dpo"}))
    self-rewarding (trains dpo), judge m: judged data REFUSED by the agreement alarm: kappa 0.2 \
< 0.7; trained on the checks' data only
    >>> judged_line({"method": "spin", "train_method": "dpo", "counts": {"pairs": 3}})
    'spin (trains dpo): pairs 3'
    """
    if hasattr(judged, "model_dump"):
        judged = judged.model_dump(mode="json")
    if not isinstance(judged, dict) or not judged.get("method"):
        return ""
    head = f"{judged['method']} (trains {judged.get('train_method') or '?'})"
    if judged.get("judge"):
        head += f", judge {judged['judge']}"
    if judged.get("allowed") is False:
        return (f"{head}: judged data REFUSED by the agreement alarm: {judged.get('reason')}; "
                "trained on the checks' data only")
    counts = judged.get("counts") or {}
    shown = ", ".join(f"{k} {v}" for k, v in counts.items()
                      if isinstance(v, (int, float)) and not isinstance(v, bool))
    return head + (f": {shown}" if shown else "")


def _rate(stats: Rate | None) -> str:
    """A pass rate over its 95% interval (two lines keep the column narrow)."""
    if stats is None or stats.pass_rate is None:
        return "-"
    return percent(stats.pass_rate, stats.interval).replace(" ", "\n", 1)


#: The rounds table: at 80 columns headers shorten (legend in the caption) and the columns
#: with a ``drop`` go, highest first; round, pass rates, gate and version always show.
ROUND_COLUMNS = (
    Col("round", justify="right", short="#"), Col("from", wrap=True, min_width=10, drop=3),
    Col("threshold", justify="right", short="thr", drop=5),
    Col("pool pass", justify="right", short="pool"),
    Col("hinted", justify="right", short="hint", drop=4),
    Col("sft rows", justify="right", short="sft", drop=2),
    Col("pairs", justify="right", short="dpo", drop=2),
    Col("dropped", justify="right", short="drop", drop=2),
    Col("golden before", justify="right", short="gold<"),
    Col("golden after", justify="right", short="gold>"),
    Col("gate"), Col("version", short="ver"),
    Col("seconds", justify="right", short="s", drop=6))


def print_rounds(result: ImproveResult) -> None:
    """The rounds table, the details it has no room for, why the run stopped, what serves."""
    table = FitTable(f"improve: {escape(str(result.work_dir))}", ROUND_COLUMNS,
                     title_justify="left", caption_justify="left",
                     caption="pass rates with 95% intervals; * = promoted",
                     hidden_hint="all in improve.json")
    for r in result.reports:
        golden, data, registered = r.golden, r.data, r.registration
        version = ((registered.version if registered else "-")
                   + (" *" if registered and registered.promoted else ""))
        table.add_row(str(r.round), escape(str(r.from_version or r.model)),
                      f"{r.threshold:g}" if r.threshold is not None else "-", _rate(r.pool),
                      str(r.hint.accepted if r.hint else 0),
                      str(data.sft_rows if data else 0), str(data.pairs if data else 0),
                      str(data.dropped_samples if data else 0),
                      _rate(golden.baseline if golden else None),
                      _rate(golden.candidate if golden else None),
                      escape(r.decision.value if r.decision else "-"), version,
                      f"{sum(r.seconds.values()):.0f}")
    console.print(table)
    for r in result.reports:  # what the table has no room for: how hints went, what was dropped
        if r.details():
            console.print(f"round {r.round}: {escape(r.details())}", highlight=False)
        launch = getattr(getattr(r, "train", None), "launch", None)
        if launch:
            console.print(f"round {r.round}: train {escape(launch)}", highlight=False,
                          soft_wrap=True)
        judged = judged_line(getattr(r, "judged", None))
        if judged:
            console.print(f"round {r.round}: {escape(judged)}", highlight=False, soft_wrap=True)
    console.print(f"stopped: {escape(result.stopped)}: {escape(result.reason)}", highlight=False,
                  soft_wrap=True)
    for r in result.reports:
        live = r.registration.live if r.registration else None
        if live:
            console.print(f"round {r.round} promoted; served model: {escape(live)}",
                          highlight=False, soft_wrap=True)
    current = result.current or "none (nothing promoted yet)"
    console.print(f"current version: {escape(current)} (* = promoted); report: "
                  f"{escape(str(result.work_dir / 'improve.json'))}"
                  + (f", curve: {escape(str(result.plot))}" if result.plot else ""),
                  highlight=False, soft_wrap=True)
