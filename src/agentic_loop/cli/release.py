"""``agentic-loop eval``: gate a candidate model against a baseline on a golden set.

* ``eval`` scores a baseline and a candidate on a golden set (single-shot and
  inside an architecture), prints per-task scores, the KL drift and output
  diversity, the gate's decision, and writes a before/after PNG.
* Versioning models is ``agentic-loop registry ...``
  (:mod:`agentic_loop.cli.registry`); the old ``register``, ``promote`` and
  ``rollback`` commands still run here for one release, hidden, each with a
  ``deprecated: use agentic-loop registry ...`` line on stderr.

Serving a version is ``agentic-loop serve`` (:mod:`agentic_loop.cli.serve`).

Example:
    >>> from typer.testing import CliRunner
    >>> from agentic_loop.cli import app
    >>> result = CliRunner().invoke(app, ["eval", "--help"])
    >>> result.exit_code, "--golden" in result.output
    (0, True)
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Optional

import typer
from rich.markup import escape

from agentic_loop.cli import app
from agentic_loop.cli.common import (
    DATA_DEFAULT,
    console,
    deprecated_alias,
    err_console,
    in_data_dir,
)
from agentic_loop.cli.quiet import VerboseFlag, third_party_quiet
from agentic_loop.cli.registry import (
    DEFAULT_REGISTRY,
    REGISTRY_HELP,
    open_registry,
    promote_command,
    register_command,
    rollback_command,
)
from agentic_loop.errors import ConfigError
from agentic_loop.tables import Col, FitTable

if TYPE_CHECKING:
    from agentic_loop.distill.eval import EvalReport

__all__ = ["DEFAULT_REGISTRY", "REGISTRY_HELP", "eval_command", "open_registry"]


def _fmt(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


@app.command("eval")
def eval_command(
    baseline: Annotated[str, typer.Option(
        "--baseline", help="Model spec: local, local:<dir>, openai:<url>.")],
    candidate: Annotated[str, typer.Option("--candidate", help="Model spec of the model to gate.")],
    golden: Annotated[Path, typer.Option(
        "--golden", help='Golden-set JSONL: {"task": ..., "constraints": {...}} rows.')],
    arch: Annotated[Optional[str], typer.Option(  # noqa: UP045 - typer needs Optional here
        "--arch", help="Also run both inside reflection, archive_refine or reflexion.")] = None,
    max_iterations: Annotated[int, typer.Option(
        "--max-iterations", help="Architecture rounds per task.")] = 2,
    max_tokens: Annotated[int, typer.Option(
        "--max-tokens", help="Longest answer, in tokens.")] = 128,
    judge: Annotated[Optional[str], typer.Option(  # noqa: UP045 - typer needs Optional here
        "--judge", help="Model spec that judges rubric features Python cannot check, for "
                        "both sides (default: the baseline).")] = None,
    plot: Annotated[Optional[Path], typer.Option(  # noqa: UP045 - typer needs Optional here
        "--plot", help=f"Where to write the before/after PNG. Default: eval.png in "
                       f"{DATA_DEFAULT}.")] = None,
    json_out: Annotated[Optional[Path], typer.Option(  # noqa: UP045
        "--json", help="Also write the full report (outputs included) as JSON.")] = None,
    kl: Annotated[bool, typer.Option(
        "--kl/--no-kl", help="Measure KL drift (both models local).")] = True,
    record: Annotated[bool, typer.Option(
        "--record/--no-record",
        help="Append the result to the candidate's model_card.yaml, if it has one.")] = True,
    verbose: VerboseFlag = False,
) -> None:
    """Gate a candidate model against a baseline on a golden set: PROMOTE, ROLLBACK, MANUAL_REVIEW.

    Example:

        agentic-loop eval --baseline local --candidate local:m1 --golden g.jsonl --arch reflection
    """
    from agentic_loop.architectures import ARCHITECTURES
    from agentic_loop.distill.eval import architecture_runner, evaluate_models

    if arch is not None and arch not in ARCHITECTURES:
        raise ConfigError(f"--arch must be one of {', '.join(ARCHITECTURES)}, got {arch!r}")
    if max_iterations < 1 or max_tokens < 1:
        raise ConfigError("--max-iterations and --max-tokens must be at least 1")
    runners = (architecture_runner(arch, max_iterations=max_iterations,
                                   arch_kwargs={"judge": judge} if judge else None)
               if arch is not None else None)
    with third_party_quiet(verbose):
        report = evaluate_models(baseline, candidate, golden, runners=runners,
                                 max_tokens=max_tokens, kl=kl, judge=judge,
                                 plot_path=in_data_dir(plot, "eval.png"))
    _print_report(report)
    if json_out is not None:
        from agentic_loop.atomic import atomic_write_bytes

        text = json.dumps(report.to_dict(), indent=2, default=str) + "\n"
        atomic_write_bytes(json_out, text.encode())
    if record:
        _record(candidate, report, golden)


def _record(candidate: str, report: EvalReport, golden: Path) -> None:
    from agentic_loop.distill.train.model_card import CARD_FILE, add_eval
    from agentic_loop.models.model_dirs import ModelDirError, resolve_model_dir

    try:
        model_dir = resolve_model_dir(candidate)
    except ModelDirError:
        return
    if (model_dir / CARD_FILE).is_file():
        add_eval(model_dir, report.card_entry(golden=str(golden)))
        console.print(f"recorded in {escape(str(model_dir / CARD_FILE))}", highlight=False)


def _print_report(report: EvalReport) -> None:
    columns = [Col("task", wrap=True, min_width=20), Col("baseline", justify="right"),
               Col("candidate", justify="right")]
    if report.arch:
        columns += [Col("baseline (arch)", justify="right", wrap=True, short="base+arch"),
                    Col("candidate (arch)", justify="right", wrap=True, short="cand+arch")]
    table = FitTable("Golden set", columns, title_justify="left", caption_justify="left",
                     caption="scores out of 10")
    for t in report.tasks:
        cells = [escape(t.task[:60]), _fmt(t.baseline), _fmt(t.candidate)]
        if report.arch:
            cells += [_fmt(t.baseline_arch), _fmt(t.candidate_arch)]
        table.add_row(*cells)
    console.print(table)
    for reason in report.reasons:
        console.print(escape(reason), highlight=False, soft_wrap=True)
    if report.kl is not None:
        console.print(f"KL drift (candidate || baseline): {report.kl.mean_kl:.4f} nats/token "
                      f"(worst prompt {report.kl.max_prompt_kl:.4f})", highlight=False)
    elif report.kl_note:
        console.print(escape(report.kl_note), highlight=False)
    for side, d in report.diversity.items():
        flag = " [bold red]collapsed[/]" if d.collapsed else ""
        console.print(f"diversity {side}: mean pairwise distance {d.mean_distance:.3f}{flag}",
                      highlight=False)
    for t in report.tasks:
        for error in t.errors:
            err_console.print(f"[yellow]warning:[/] {escape(error)}", highlight=False,
                              soft_wrap=True)
    color = {"PROMOTE": "green", "ROLLBACK": "red"}.get(report.decision.value, "yellow")
    console.print(f"decision: [bold {color}]{report.decision.value}[/]"
                  + (f"; plot {escape(str(report.plot))}" if report.plot else ""), highlight=False)


# The old spellings, for one release: each prints a `deprecated: use ...` line and runs.
for _old, _command in (("register", register_command), ("promote", promote_command),
                       ("rollback", rollback_command)):
    app.command(_old, hidden=True)(deprecated_alias(_command, f"registry {_old}"))
