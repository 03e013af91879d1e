"""``agentic-loop monitor``: per-version health from trajectories, and rollback on a regression.

Reads the trajectory log, attributes each run to the registry version that
served it, prints one row per version (runs, error rate, latency p50/p99,
mean score, pass rate, thumbs-up ratio, output length), compares the current
version with the one a rollback would restore, and prints the verdict. With
``--rollback`` (the default) a breach of the current version rolls the
registry back (audit entry with the metric, numbers and window) and the live
server follows. Writes a PNG of the metrics.

It also checks the judge against people: per judge model and version, the
number of labelled runs and ratings, Spearman between the judge's score and
the people's 1-5 rating, Cohen's kappa between the judge's and the people's
accept/reject, and the status. Agreement below ``--agreement-threshold``
(0.7) on at least ``--min-labels`` (20) labels raises the alarm; it rolls
nothing back (the judge disagrees, not the served model) but turns judged
rewards off in the improve loop. No labels: it says so.

Exit code 1 on a breach of either kind, so a cron job or CI step notices.

Example:
    >>> from typer.testing import CliRunner
    >>> from agentic_loop.cli import app
    >>> result = CliRunner().invoke(app, ["monitor", "--help"])
    >>> result.exit_code, "--no-rollback" in result.output, "--min-labels" in result.output
    (0, True, True)
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Optional

import typer
from rich import box
from rich.markup import escape

from agentic_loop.cli import app
from agentic_loop.cli.common import DATA_DEFAULT, console, in_data_dir
from agentic_loop.cli.release import DEFAULT_REGISTRY, REGISTRY_HELP, open_registry
from agentic_loop.errors import ConfigError
from agentic_loop.tables import Col, FitTable, percent

if TYPE_CHECKING:
    from agentic_loop.distill.release.judge_agreement import AgreementReport
    from agentic_loop.distill.release.monitor import MonitorReport

__all__ = ["monitor_command"]


def _num(value: float | None, fmt: str = ".2f") -> str:
    return "-" if value is None else format(value, fmt)


@app.command("monitor")
def monitor_command(
    trajectories: Annotated[Path, typer.Option(
        "--trajectories", help="Trajectory log folder (every log under it) or .jsonl file.")],
    registry: Annotated[Path, typer.Option("--registry", help=REGISTRY_HELP)] = DEFAULT_REGISTRY,
    window: Annotated[int, typer.Option(
        "--window", help="Compare the last N runs of each version.")] = 200,
    hours: Annotated[Optional[float], typer.Option(  # noqa: UP045 - typer needs Optional here
        "--hours", help="Only runs of the last H hours count.")] = None,
    min_runs: Annotated[int, typer.Option(
        "--min-runs", help="Runs each version needs before anything is judged.")] = 30,
    version: Annotated[Optional[str], typer.Option(  # noqa: UP045
        "--version", help="Version to check (default: current).")] = None,
    baseline: Annotated[Optional[str], typer.Option(  # noqa: UP045
        "--baseline", help="Version to compare with (default: the rollback target).")] = None,
    rollback: Annotated[bool, typer.Option(
        "--rollback/--no-rollback", help="Roll back the current version on a breach.")] = True,
    plot: Annotated[Optional[Path], typer.Option(  # noqa: UP045
        "--plot", help="Where to write the per-version metrics PNG. Default: monitor.png in "
                       f"{DATA_DEFAULT}.")] = None,
    json_out: Annotated[Optional[Path], typer.Option(  # noqa: UP045
        "--json", help="Also write the report as JSON.")] = None,
    agreement_threshold: Annotated[float, typer.Option(
        "--agreement-threshold", help="Judge-vs-people alarm: Spearman on ratings or Cohen's "
                                      "kappa on accept/reject below this.")] = 0.7,
    min_labels: Annotated[int, typer.Option(
        "--min-labels", help="Labels a judge needs before its agreement is judged.")] = 20,
) -> None:
    """Compare the served version with the one before it from logged runs; roll back on a breach.

    Example:

        agentic-loop monitor --trajectories runs/traj --registry runs/registry --window 200
    """
    from agentic_loop.distill.release.monitor import MonitorSettings, monitor
    from agentic_loop.distill.release.monitor_plot import plot_monitor
    from agentic_loop.trajectories import TrajectoryLog

    if window < 1 or min_runs < 1 or min_labels < 1 or (hours is not None and hours <= 0):
        raise ConfigError("--window, --min-runs and --min-labels must be at least 1 and "
                          "--hours above 0")
    if not -1.0 <= agreement_threshold <= 1.0:
        raise ConfigError(f"--agreement-threshold must be between -1 and 1 (a correlation), "
                          f"got {agreement_threshold}; the default is 0.7")
    if not trajectories.exists():
        raise ConfigError(f"no trajectory log at {trajectories}; pass the folder the served "
                          "runs are logged to (--trajectories)")
    settings = MonitorSettings(window_runs=window, window_hours=hours, min_runs=min_runs,
                               agreement_threshold=agreement_threshold, min_labels=min_labels)
    report = monitor(TrajectoryLog(trajectories), open_registry(registry), settings=settings,
                     version=version, baseline=baseline, rollback=rollback)
    if report.verdict != "no version":
        console.print(_table(report))
    _print_verdict(report)
    if report.verdict != "no version":
        plot = in_data_dir(plot, "monitor.png")
        plot_monitor(report, plot)
        console.print(f"plot: {escape(str(plot))}", highlight=False)
    if report.agreement is not None:
        _print_agreement(report.agreement)
    if json_out is not None:
        from agentic_loop.atomic import atomic_write_bytes

        text = report.model_dump_json(indent=2) + "\n"
        atomic_write_bytes(json_out, text.encode())
    if report.verdict == "breach" or (report.agreement is not None and report.agreement.raised):
        raise typer.Exit(1)


def _table(report: MonitorReport) -> FitTable:
    roles = f"{report.version} checked against {report.baseline or 'nothing'}"
    columns = [Col("version"), Col("model", wrap=True, min_width=8),
               *(Col(name, justify="right", drop=drop) for name, drop in (
                   ("runs", 0), ("errors", 0), ("p50 s", 2), ("p99 s", 0), ("score", 0),
                   ("pass", 0), ("up", 1), ("chars", 3)))]
    table = FitTable(f"Versions: {roles} ({escape(report.window)})", columns,
                     title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False,
                     padding=(0, 0), caption="up: thumbs up / rated runs; errors, pass: "
                     "share of runs", caption_justify="left",
                     hidden_hint="all in --json FILE")
    for s in report.stats:
        table.add_row(s.version, escape(s.model), str(s.runs), percent(s.error_rate, digits=1),
                      _num(s.latency_p50), _num(s.latency_p99), _num(s.mean_score),
                      percent(s.pass_rate, digits=1),
                      f"{percent(s.feedback_ratio)}/{s.rated}" if s.rated else "-",
                      _num(s.mean_output_chars, ".0f"))
    return table


def _print_verdict(report: MonitorReport) -> None:
    if report.unattributed:
        seen = ", ".join(f"{escape(m)}: {n}" for m, n in sorted(report.unattributed.items()))
        console.print(f"[yellow]runs of no registry version[/] (skipped): {seen}",
                      highlight=False, soft_wrap=True)
    color = {"healthy": "green", "breach": "red"}.get(report.verdict, "yellow")
    console.print(f"verdict: [bold {color}]{report.verdict}[/]: {escape(report.reason)}",
                  highlight=False, soft_wrap=True)
    if report.action == "rolled back":
        console.print(f"[bold red]rolled back[/] {report.version} -> {report.rolled_back_to}",
                      highlight=False)
        if report.sync:
            console.print(f"live server: {escape(report.sync)}", highlight=False, soft_wrap=True)
    elif report.action == "hold":
        console.print(f"{report.version} is not current: nothing to roll back; do not promote "
                      "it", highlight=False)
    elif report.verdict == "breach":
        console.print("--no-rollback: the registry was not changed; roll back with "
                      "`agentic-loop registry rollback`", highlight=False)


def _print_agreement(agreement: AgreementReport) -> None:
    """The judge-vs-people table, or why there is none, and the alarm's reasons."""
    if not agreement.rows:
        console.print(f"judge vs people: {escape(agreement.describe())}; label runs with "
                      "`agentic-loop review`", highlight=False, soft_wrap=True)
        return
    columns = [Col("judge", wrap=True, min_width=8), Col("version"),
               *(Col(name, justify="right") for name in ("labels", "ratings", "spearman",
                                                         "kappa")), Col("status")]
    table = FitTable(f"Judge vs people (alarm: spearman or kappa < {agreement.threshold:g} "
                     f"on >= {agreement.min_labels} labels)", columns, title_justify="left",
                     box=box.SIMPLE_HEAD, pad_edge=False, padding=(0, 1),
                     caption="spearman: judge score vs people's 1-5 rating; kappa: judge's "
                     "vs people's accept/reject", caption_justify="left")
    colors = {"breach": "red", "agrees": "green"}
    for r in agreement.rows:
        color = colors.get(r.status, "yellow")
        table.add_row(escape(r.judge), r.version or "-", str(r.labels), str(r.ratings),
                      _num(r.spearman), _num(r.kappa), f"[{color}]{r.status}[/]")
    console.print(table)
    if agreement.unjudged:
        console.print(f"{agreement.unjudged} labelled runs were decided by the checks alone "
                      "(no judge to check)", highlight=False)
    for r in agreement.rows:
        if r.breached:
            console.print(f"[bold red]judge alarm[/]: {escape(r.reason)}", highlight=False,
                          soft_wrap=True)
        elif r.status != "agrees":
            console.print(f"{escape(r.judge)} ({r.version or 'no version'}): "
                          f"{escape(r.reason)}", highlight=False, soft_wrap=True)
