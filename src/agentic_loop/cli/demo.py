"""``agentic-loop demo``: both loops end to end on the embedded model (what `make demo` runs).

Example:
    >>> from typer.testing import CliRunner
    >>> from agentic_loop.cli import app
    >>> result = CliRunner().invoke(app, ["demo", "--pii", "fancy"])
    >>> result.exit_code, result.stderr
    (2, "error: --pii must be spacy, regex or off, got 'fancy'\\n")
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, cast, get_args

import typer

from agentic_loop.cli import app


@app.command()
def demo(
    out: Annotated[Path, typer.Option(help="Where everything is written.")] = Path("runs/demo"),
    tasks: Annotated[int, typer.Option(min=6, max=200, help="Size of the task family.")] = 30,
    train_steps: Annotated[int, typer.Option(
        min=1, max=1000, help="LoRA steps per improve round.")] = 8,
    rounds: Annotated[int, typer.Option(min=1, max=10, help="Improve rounds.")] = 2,
    samples: Annotated[int, typer.Option(
        min=1, max=16, help="Samples per train task per round (failures get a hinted retry).")
    ] = 1,
    max_iterations: Annotated[int, typer.Option(min=1, max=5)] = 2,
    concurrency: Annotated[int, typer.Option(min=1, max=32)] = 8,
    pii: Annotated[str, typer.Option(help="PII gate: spacy | regex | off")] = "regex",
    model: Annotated[str, typer.Option(help="Model spec.")] = "local",
) -> None:
    """Run both loops end to end on the embedded model and print a before/after table.

    Single-shot, Reflection and ArchiveRefine (cold, then warm) run over a bundled family of
    constrained tasks; then --rounds improve rounds sample the train tasks, train on what
    passed, and gate each candidate against the current model on the held-out tasks (PROMOTE
    promotes it). A per-round table, plots, improve/improve.png and report.json go to --out.

    Example: agentic-loop demo --out runs/demo --tasks 30
    """
    from agentic_loop.cli.common import console
    from agentic_loop.demo.run import DemoOptions, run_demo
    from agentic_loop.distill.data.pii.gate import PiiMode
    from agentic_loop.errors import ConfigError

    if pii not in get_args(PiiMode):
        raise ConfigError(f"--pii must be spacy, regex or off, got {pii!r}")
    gate = cast(PiiMode, pii)
    run_demo(out, DemoOptions(n_tasks=tasks, train_steps=train_steps, rounds=rounds,
                              samples=samples,
                              max_iterations=max_iterations, concurrency=concurrency, pii=gate,
                              model=model), console=console)
