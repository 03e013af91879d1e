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
                       max_tokens: int, refine: str = "feedback", tools: str | None = None,
                       max_steps: int | None = None, first_tool_call: bool = False):
    """The architecture named ``arch`` on ``model``.

    Everything a user can get wrong is checked before the model loads (which
    takes seconds): the names, the model spec, and the stores the run will
    use (a file where a folder belongs, a corrupt ``meta.json``, a folder of
    another kind), so a typo costs no wait. ``tools`` (ready tools by name, see
    :func:`~agentic_loop.tools.ready_tools`) makes the model an agent; with
    ``first_tool_call`` each episode's first model call is a tool call (small models
    seldom open with one by themselves).
    """
    from agentic_loop.agents import agent_options
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
    from agentic_loop.tools import ready_tools
    from agentic_loop.trajectories import TrajectoryLog

    cls = architecture_class(arch)  # the one check of a name
    if refine not in REFINE_MODES:
        raise ConfigError(f"unknown --refine {refine!r}; choose one of {', '.join(REFINE_MODES)}")
    resolve_spec(model)
    chosen = ready_tools(tools) if tools else []
    if first_tool_call and not chosen:
        raise ConfigError("--first-tool-call needs --tools (the tools the first call may use)")
    log = TrajectoryLog(trajectories) if trajectories else None
    store = Archive(archive) if cls is ArchiveRefine else None
    memory = ReflexionMemory(reflections) if cls is Reflexion else None
    llm = load_chat_model(model, max_tokens=max_tokens)
    agent = agent_options(llm, chosen, first_tool_call=first_tool_call, max_steps=max_steps)
    return create_architecture(
        arch, agent.pop("llm", llm), archive=store, reflections=memory, refine=refine,
        target_score=target_score, max_iterations=max_iterations, trajectories=log, **agent)


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
    tools: Annotated[str | None, typer.Option(
        help="Ready tools the model may call, comma-separated: calculator, python "
             "(sandboxed), lookup. Each draft is then a recorded episode.")] = None,
    max_steps: Annotated[int | None, typer.Option(
        min=1, max=100, help="Model calls per episode (with --tools). Default: 8.")] = None,
    first_tool_call: Annotated[bool, typer.Option(
        "--first-tool-call", help="Make each episode's first model call a tool call "
        "(small models seldom open with one).")] = False,
    concurrency: Annotated[int, typer.Option(min=1, max=64)] = 4,
    as_json: Annotated[bool, typer.Option("--json", help="Print results as JSON lines.")] = False,
) -> None:
    """Run an architecture and print each task's best output and score.

    Example: agentic-loop run "Write a tagline in exactly 12 words." --arch reflection

    With tools: agentic-loop run "Use the calculator: what is 53 * 47?" --tools calculator
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
                                      refine=refine, tools=tools, max_steps=max_steps,
                                      first_tool_call=first_tool_call)
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
