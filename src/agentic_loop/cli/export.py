"""``agentic-loop export``: trajectories to SFT and DPO datasets, through the PII gate and curation.

A thin shell around :func:`agentic_loop.distill.data.export_datasets`: it checks
the flags (one-line errors, exit code 2), shows a progress bar on stderr
while the gate and the embedder work, and prints a summary table of every
filter's counts and the redactions per entity type.

Example:
    >>> from typer.testing import CliRunner
    >>> from agentic_loop.cli import app
    >>> result = CliRunner().invoke(app, ["export", "--help"])
    >>> result.exit_code, "--trajectories" in result.output
    (0, True)
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Optional

import typer
from rich.markup import escape

from agentic_loop.cli import app
from agentic_loop.cli.common import console, err_console, progress_bar
from agentic_loop.errors import ConfigError
from agentic_loop.tables import Col, FitTable

if TYPE_CHECKING:
    from rich.progress import Progress, TaskID

    from agentic_loop.distill.data import ExportReport

__all__ = ["export_command"]

_PII_MODES = ("spacy", "regex", "off")
_REWARDS = ("rubric", "composite")


class _RichProgress:
    """Shows each export stage as a line of a rich progress display."""

    def __init__(self, progress: Progress) -> None:
        self._progress = progress
        self._task: TaskID | None = None

    def start(self, stage: str, total: int | None = None) -> None:
        self._finish()
        # the one stage with a size is the PII gate, which reads each distinct text once
        self._task = self._progress.add_task(stage, total=total,
                                             unit="texts" if total is not None else "")

    def advance(self, n: int = 1) -> None:
        if self._task is not None:
            self._progress.advance(self._task, n)

    def _finish(self) -> None:
        if self._task is not None:
            total = next(t.total for t in self._progress.tasks if t.id == self._task) or 1
            self._progress.update(self._task, total=total, completed=total)

    def close(self) -> None:
        self._finish()


@app.command("export")
def export_command(
    trajectories: Annotated[list[Path], typer.Option(
        "--trajectories", "-t",
        help="A TrajectoryLog folder or its .jsonl file; repeat for several.")],
    out: Annotated[Path, typer.Option(
        "--out", "-o", help="Folder for sft.jsonl, pairs.jsonl, manifest.json.")],
    min_score: Annotated[float, typer.Option(
        "--min-score",
        help="Reward an SFT row or a chosen answer needs, in [0, 1] (rubric score / 10).")] = 0.8,
    pii: Annotated[str, typer.Option(
        "--pii", help="PII gate: spacy (names too), regex (patterns only) or off.")] = "spacy",
    min_gap: Annotated[float, typer.Option(
        "--min-gap", help="Smallest chosen-minus-rejected reward of a DPO pair.")] = 0.2,
    archive: Annotated[Optional[Path], typer.Option(  # noqa: UP045 - typer needs Optional here
        "--archive",
        help="An Archive folder whose accepted outputs become extra SFT rows.")] = None,
    k_anonymity: Annotated[Optional[int], typer.Option(  # noqa: UP045
        "--k-anonymity",
        help="Drop tasks whose anonymized pattern fewer than K users share.")] = None,
    max_per_task: Annotated[Optional[int], typer.Option(  # noqa: UP045
        "--max-per-task", help="At most N SFT rows and N pairs per task.")] = None,
    require_consent: Annotated[Optional[bool], typer.Option(  # noqa: UP045
        "--require-consent/--no-require-consent",
        help="Keep only runs with consent=True. Default: on when any run records consent.")] = None,
    reward: Annotated[str, typer.Option(
        "--reward", help="rubric (score / 10) or composite (adds feedback, latency).")] = "rubric",
    latency_z: Annotated[float, typer.Option(
        "--latency-z", help="Drop runs slower than this modified z-score; 0: off.")] = 3.5,
    dedup_threshold: Annotated[float, typer.Option(
        "--dedup-threshold",
        help="Cosine at which two SFT rows are near duplicates; 0: exact only.")] = 0.95,
    with_exemplars: Annotated[bool, typer.Option(
        "--with-exemplars",
        help="Keep the exemplars and lessons in each row's prompt, as the run sent them. "
             "Default: system message, task and requirements only.")] = False,
) -> None:
    """Export trajectories as SFT and DPO datasets (TRL conversational format) through a PII gate.

    Example:

        agentic-loop export --trajectories data/trajectories --out data/distill --pii regex
    """
    if pii not in _PII_MODES:
        raise ConfigError(f"--pii must be one of {', '.join(_PII_MODES)}, got {pii!r}")
    if reward not in _REWARDS:
        raise ConfigError(f"--reward must be one of {', '.join(_REWARDS)}, got {reward!r}")

    from agentic_loop.distill.data import export_datasets

    with progress_bar(on=err_console, transient=True) as bar:
        sink = _RichProgress(bar)
        report = export_datasets(
            trajectories, out, min_score=min_score, pii=pii,  # type: ignore[arg-type]
            min_gap=min_gap, archive=archive, reward=reward,  # type: ignore[arg-type]
            require_consent=require_consent, latency_z=latency_z or None,
            k_anonymity=k_anonymity, max_per_task=max_per_task,
            dedup_threshold=dedup_threshold or None, progress=sink,
            include_exemplars=with_exemplars)
        sink.close()
    _print_summary(report)


def _print_summary(report: ExportReport) -> None:
    from agentic_loop.distill.data.manifest import describe_drops

    steps = FitTable("Curation", [Col("step", wrap=True), Col("unit"),
                                  *(Col(n, justify="right") for n in ("in", "out", "removed")),
                                  Col("detail", wrap=True, min_width=20)], title_justify="left")
    for s in report.steps:
        steps.add_row(s.name, s.unit, str(s.before), str(s.after), str(s.removed), escape(s.detail))
    console.print(steps)
    dropped = describe_drops(report.dropped)
    if dropped:  # what the training rules kept out: failing, flagged, below the threshold
        console.print(escape(dropped), highlight=False)
    if report.pii.redactions:
        pii = FitTable(f"PII redactions ({report.pii.mode})",
                       [Col("entity", wrap=True), Col("count", justify="right")],
                       title_justify="left")
        for entity, count in sorted(report.pii.redactions.items()):
            pii.add_row(entity, str(count))
        console.print(pii)
    for problem in report.problems[:10]:
        err_console.print(f"[yellow]warning:[/] {escape(problem)}", highlight=False, soft_wrap=True)
    if len(report.problems) > 10:
        err_console.print(f"[yellow]warning:[/] {len(report.problems) - 10} more problems: see "
                          f"{escape(str(report.manifest_path))}", highlight=False, soft_wrap=True)
    agents = report.manifest.get("episodes", {}).get("sft", {})
    if agents.get("rows"):  # agent episodes: how much tool use the SFT rows teach
        used = ", ".join(f"{name} {n}" for name, n in agents.get("tools", {}).items())
        console.print(f"{agents['rows']} SFT rows are agent episodes: {agents['tool_calls']} "
                      f"tool calls ({escape(used)})", highlight=False, soft_wrap=True)
    console.print(f"wrote {report.sft_rows} SFT rows ({_where(report.sft_path)}), "
                  f"{report.pairs} DPO pairs ({_where(report.pairs_path)}), "
                  f"manifest {escape(str(report.manifest_path))}", highlight=False, soft_wrap=True)


def _where(path: Path | None) -> str:
    return escape(str(path)) if path is not None else "no file written"
