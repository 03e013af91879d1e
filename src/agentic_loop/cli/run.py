"""``agentic-loop run``: run an architecture over one task or a task file.

Example:
    >>> from typer.testing import CliRunner
    >>> from agentic_loop.cli import app
    >>> result = CliRunner().invoke(app, ["run"])
    >>> result.exit_code, result.stderr
    (2, 'error: no task given: pass task text or --tasks FILE\\n')
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from agentic_loop.cli import app
from agentic_loop.cli.common import DATA_DEFAULT, console, in_data_dir
from agentic_loop.errors import ConfigError


def build_architecture(arch: str, model: str, *, archive: Path, reflections: Path,
                       trajectories: Path | None, target_score: float, max_iterations: int,
                       max_tokens: int, refine: str = "feedback"):
    """The architecture named ``arch`` on ``model``.

    Everything a user can get wrong is checked before the model loads (which
    takes seconds): the names, the model spec, and the stores the run will
    use (a file where a folder belongs, a corrupt ``meta.json``, a folder of
    another kind), so a typo costs no wait.
    """
    from agentic_loop.architectures import (
        ArchiveRefine,
        Reflexion,
        architecture_class,
        create_architecture,
    )
    from agentic_loop.architectures.base import REFINE_MODES
    from agentic_loop.memory import Archive, ReflexionMemory
    from agentic_loop.models import load_chat_model
    from agentic_loop.models.spec import resolve_spec
    from agentic_loop.trajectories import TrajectoryLog

    cls = architecture_class(arch)  # the one check of a name
    if refine not in REFINE_MODES:
        raise ConfigError(f"unknown --refine {refine!r}; choose one of {', '.join(REFINE_MODES)}")
    resolve_spec(model)
    log = TrajectoryLog(trajectories) if trajectories else None
    store = Archive(archive) if cls is ArchiveRefine else None
    memory = ReflexionMemory(reflections) if cls is Reflexion else None
    llm = load_chat_model(model, max_tokens=max_tokens)
    return create_architecture(
        arch, llm, archive=store, reflections=memory, refine=refine,
        target_score=target_score, max_iterations=max_iterations, trajectories=log)


@app.command()
def run(
    task: Annotated[list[str] | None, typer.Argument(help="Task text(s) to run.")] = None,
    tasks: Annotated[Path | None, typer.Option("--tasks", help="JSONL task file: "
                     '{"task": ..., "constraints": {...}} per line, or plain lines.')] = None,
    arch: Annotated[str, typer.Option(
        help="reflection | archive_refine | reflexion")] = "archive_refine",
    model: Annotated[str, typer.Option(
        help='Model spec: "local", "local:DIR", "openai:URL".')] = "local",
    archive: Annotated[Path | None, typer.Option(
        help=f"Archive dir (archive_refine). Default: archive in {DATA_DEFAULT}.")] = None,
    reflections: Annotated[Path | None, typer.Option(
        help=f"Reflexion memory dir. Default: reflections in {DATA_DEFAULT}.")] = None,
    trajectories: Annotated[Path | None, typer.Option(
        help=f"Trajectory log dir. Default: trajectories in {DATA_DEFAULT}.")] = None,
    target_score: Annotated[float, typer.Option(min=0, max=10)] = 8.0,
    max_iterations: Annotated[int, typer.Option(min=1, max=20)] = 3,
    refine: Annotated[str, typer.Option(help="feedback (show the draft and what failed) | "
                      "resample (ask again; better for very small models)")] = "feedback",
    max_tokens: Annotated[int, typer.Option(min=1, max=8192)] = 96,
    concurrency: Annotated[int, typer.Option(min=1, max=64)] = 4,
    as_json: Annotated[bool, typer.Option("--json", help="Print results as JSON lines.")] = False,
) -> None:
    """Run an architecture and print each task's best output and score.

    Example: agentic-loop run "Write a tagline in exactly 12 words." --arch reflection
    """
    from agentic_loop.tasks.spec import TaskSpec, load_tasks

    specs = load_tasks(tasks) if tasks is not None else []
    specs += [TaskSpec(task=t) for t in task or [] if t.strip()]
    if not specs:
        raise ConfigError("no task given: pass task text or --tasks FILE")
    architecture = build_architecture(arch, model, archive=in_data_dir(archive, "archive"),
                                      reflections=in_data_dir(reflections, "reflections"),
                                      trajectories=in_data_dir(trajectories, "trajectories"),
                                      target_score=target_score,
                                      max_iterations=max_iterations, max_tokens=max_tokens,
                                      refine=refine)
    from agentic_loop.architectures import run_specs, summary_table

    results = run_specs(architecture, specs, max_concurrency=concurrency,
                        progress=None if as_json else "running", console=console)
    if as_json:
        for r in results:
            typer.echo(json.dumps(r.model_dump(mode="json", exclude={"trace"})))
    else:
        console.print(summary_table(results, f"{arch} on {model}"))
    if all(not r.ok for r in results):
        raise typer.Exit(1)
