"""``agentic-loop demo``: does the loop improve the model on tasks it never saw? (`make demo`)

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
from agentic_loop.cli.quiet import VerboseFlag, third_party_quiet
from agentic_loop.demo.options import DemoOptions

_DEFAULTS = DemoOptions()


@app.command()
def demo(
    out: Annotated[Path, typer.Option(
        help="Where everything is written (an earlier demo there is cleared unless --resume).")
    ] = Path("runs/demo"),
    held_out: Annotated[int, typer.Option(
        min=20, max=2000, help="Held-out tasks the rounds are measured on (never trained on).")
    ] = _DEFAULTS.held_out_tasks,
    train_tasks: Annotated[int, typer.Option(
        min=4, max=2000, help="Train tasks the rounds sample from.")] = _DEFAULTS.train_tasks,
    train_steps: Annotated[int, typer.Option(
        min=1, max=1000, help="LoRA steps per improve round.")] = _DEFAULTS.train_steps,
    rounds: Annotated[int, typer.Option(min=1, max=10, help="Improve rounds.")] = _DEFAULTS.rounds,
    samples: Annotated[int, typer.Option(
        min=1, max=16, help="Samples per train task per round (best-of-n; failures get a "
        "hinted retry).")] = _DEFAULTS.samples,
    concurrency: Annotated[int, typer.Option(
        min=1, max=64, help="Answers in flight (the local engine batches them).")
    ] = _DEFAULTS.concurrency,
    seed: Annotated[int, typer.Option(help="Seed of the dev set.")] = _DEFAULTS.seed,
    pii: Annotated[str, typer.Option(help="PII gate: spacy | regex | off")] = "regex",
    model: Annotated[str, typer.Option(help="Model spec.")] = "local",
    resume: Annotated[bool, typer.Option(
        "--resume", help="Continue the demo in --out (say what is reused) instead of "
        "starting fresh.")] = False,
    verbose: VerboseFlag = False,
) -> None:
    """Improve rounds on the embedded model, measured on held-out tasks against the base model.

    The dev set (every task family the package generates) gives --train-tasks tasks to practise
    on and --held-out tasks no round trains on. Each of --rounds improve rounds samples the
    train tasks best-of---samples, trains a LoRA on what passed every check, and the release
    gate compares the candidate with the current model on the held-out tasks (PROMOTE promotes
    it). The demo ends with the base model against each round's candidate: pass rates with 95%
    intervals, McNemar p-values, the gate's decisions and one closing line. report.json, the
    registry, the rounds and plots/rounds.png go to --out.

    Example: agentic-loop demo --out runs/demo
    """
    from agentic_loop.cli.common import console
    from agentic_loop.demo.run import run_demo
    from agentic_loop.distill.data.pii.gate import PiiMode
    from agentic_loop.errors import ConfigError

    if pii not in get_args(PiiMode):
        raise ConfigError(f"--pii must be spacy, regex or off, got {pii!r}")
    gate = cast(PiiMode, pii)
    options = DemoOptions(held_out_tasks=held_out, train_tasks=train_tasks,
                          train_steps=train_steps, rounds=rounds, samples=samples,
                          concurrency=concurrency, seed=seed, pii=gate, model=model)
    with third_party_quiet(verbose, training=True):
        run_demo(out, options, console=console, resume=resume)
