"""``agentic-loop run``: run an architecture over one task or a task file."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from agentic_loop.cli import app
from agentic_loop.cli.common import console, fail


def build_architecture(arch: str, model: str, *, archive: Path, reflections: Path,
                       trajectories: Path | None, target_score: float, max_iterations: int,
                       max_tokens: int, refine: str = "feedback"):
    """The architecture named ``arch`` on ``model``, or a clean CLI error."""
    from agentic_loop.architectures import ARCHITECTURES, create_architecture
    from agentic_loop.architectures.base import REFINE_MODES
    from agentic_loop.models import ModelError, load_chat_model
    from agentic_loop.trajectories import TrajectoryLog

    if arch not in ARCHITECTURES:
        fail(f"unknown architecture {arch!r}; choose one of {', '.join(ARCHITECTURES)}")
    if refine not in REFINE_MODES:
        fail(f"unknown --refine {refine!r}; choose one of {', '.join(REFINE_MODES)}")
    try:
        llm = load_chat_model(model, max_tokens=max_tokens)
    except ModelError as exc:
        fail(str(exc))
    try:
        return create_architecture(
            arch, llm, archive=str(archive), reflections=str(reflections), refine=refine,
            target_score=target_score, max_iterations=max_iterations,
            trajectories=TrajectoryLog(trajectories) if trajectories else None)
    except ValueError as exc:
        fail(str(exc))


@app.command()
def run(
    task: Annotated[list[str] | None, typer.Argument(help="Task text(s) to run.")] = None,
    tasks: Annotated[Path | None, typer.Option("--tasks", help="JSONL task file: "
                     '{"task": ..., "constraints": {...}} per line, or plain lines.')] = None,
    arch: Annotated[str, typer.Option(help="reflection | archive_refine | reflexion")] = "archive_refine",
    model: Annotated[str, typer.Option(help='Model spec: "local", "local:DIR", "openai:URL".')] = "local",
    archive: Annotated[Path, typer.Option(help="Archive dir (archive_refine).")] = Path("data/archive"),
    reflections: Annotated[Path, typer.Option(help="Reflexion memory dir.")] = Path("data/reflections"),
    trajectories: Annotated[Path | None, typer.Option(help="Trajectory log dir.")] = Path("data/trajectories"),
    target_score: Annotated[float, typer.Option(min=0, max=10)] = 8.0,
    max_iterations: Annotated[int, typer.Option(min=1, max=20)] = 3,
    refine: Annotated[str, typer.Option(help="feedback (show the draft and what failed) | "
                      "resample (ask again; better for very small models)")] = "feedback",
    max_tokens: Annotated[int, typer.Option(min=1, max=8192)] = 96,
    concurrency: Annotated[int, typer.Option(min=1, max=64)] = 4,
    as_json: Annotated[bool, typer.Option("--json", help="Print results as JSON lines.")] = False,
) -> None:
    """Run an architecture and print each task's best output and score.

    Example: agentic-loop run "Write a tagline for a bookstore in exactly 12 words." --arch reflection
    """
    from agentic_loop.tasks import TaskFileError, load_tasks

    specs = []
    if tasks is not None:
        try:
            specs = load_tasks(tasks)
        except TaskFileError as exc:
            fail(str(exc))
    from agentic_loop.tasks import TaskSpec

    specs += [TaskSpec(task=t) for t in task or [] if t.strip()]
    if not specs:
        fail("no task given: pass task text or --tasks FILE")
    architecture = build_architecture(arch, model, archive=archive, reflections=reflections,
                                      trajectories=trajectories, target_score=target_score,
                                      max_iterations=max_iterations, max_tokens=max_tokens,
                                      refine=refine)
    results = run_specs(architecture, specs, concurrency=concurrency, quiet=as_json)
    if as_json:
        for r in results:
            typer.echo(json.dumps(r.model_dump(mode="json", exclude={"trace"})))
    else:
        console.print(summary_table(results, f"{arch} on {model}"))
    if all(not r.ok for r in results):
        raise typer.Exit(1)


def run_specs(architecture, specs, *, concurrency: int, quiet: bool = False, label: str = "running"):
    """Run task specs concurrently with a progress bar; results in input order."""
    from concurrent.futures import ThreadPoolExecutor, as_completed

    from agentic_loop.architectures import RunResult

    def one(spec):
        try:
            return architecture.run(spec.task, rubric=spec.rubric())
        except Exception as exc:
            return RunResult(task=spec.task, errors=[f"{type(exc).__name__}: {exc}"])

    results: list = [None] * len(specs)
    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                  TimeElapsedColumn(), console=console, disable=quiet, transient=False) as bar:
        job = bar.add_task(label, total=len(specs))
        with ThreadPoolExecutor(max_workers=concurrency) as pool:
            futures = {pool.submit(one, s): i for i, s in enumerate(specs)}
            for future in as_completed(futures):
                results[futures[future]] = future.result()
                bar.advance(job)
    return results


def summary_table(results, title: str) -> Table:
    table = Table(title=title, show_lines=False)
    for column in ("task", "output", "score", "passed", "rounds", "archived", "s"):
        table.add_column(column, overflow="fold")
    for r in results:
        output = r.output if r.ok else f"[red]{'; '.join(r.errors)[:120]}[/]"
        table.add_row(r.task[:60], (output or "")[:120],
                      "-" if r.score is None else f"{r.score:.1f}", "yes" if r.passed else "no",
                      str(r.iterations), "yes" if r.archived else "", f"{r.latency_s or 0:.1f}")
    scored = [r.score for r in results if r.score is not None]
    if scored:
        table.caption = (f"pass rate {sum(r.passed for r in results) / len(results):.0%} | "
                         f"mean score {sum(scored) / len(scored):.2f} | "
                         f"archived {sum(r.archived for r in results)}")
    return table
