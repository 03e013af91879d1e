"""``agentic-loop monitor``: per-version health from trajectories, and rollback on a regression.

Reads the trajectory log, attributes each run to the registry version that
served it, prints one row per version (runs, error rate, latency p50/p99,
mean score, pass rate, thumbs-up ratio, output length), compares the current
version with the one a rollback would restore, and prints the verdict. With
``--rollback`` (the default) a breach of the current version rolls the
registry back (audit entry with the metric, numbers and window) and the live
server follows. Writes a PNG of the metrics.

It also checks the judge against people: per judge model and version, the
number of labelled runs and ratings, Spearman between the judge's own part of
the score (its judged features) and the people's 1-5 rating, Cohen's kappa
between the run's and the people's accept/reject, and the status, for the
random draw of runs (which decides) and apart for the edge cases (shown, never
alarming: a restricted score range). Agreement below ``--agreement-threshold``
(0.7) on at least ``--min-labels`` (20) random labels raises the alarm; it rolls
nothing back (the judge disagrees, not the served model) but turns judged
rewards off in the improve loop. No labels: it says so.

Exit code 1 on a breach of either kind, so a cron job or CI step notices.

Example:
    >>> from typer.testing import CliRunner
    >>> from agentic_loop.cli import app
    >>> result = CliRunner().invoke(app, ["monitor", "--help"])
    >>> result.exit_code, "--no-rollback" in result.output, "--min-labels" in result.output
    (0, True, True)

``agentic-loop flywheel run|status`` (here beside ``monitor``, whose checks it runs every tick):
the service that turns the flywheel by itself.

``run`` holds the registry's lease and ticks until stopped (SIGTERM or
Ctrl-C): new accepted runs past the watermark (``--min-new-runs``, or a
schedule, ``--every``) start an improve round over them; a candidate its
gate says PROMOTE of is canaried at the server (``--stages``, each with
``--min-runs-per-stage`` per arm and at most ``--max-stage-time``) and
promoted or rolled back by the ramp's tests; the monitor watches the current
version every tick. One line per action; ``--status-port`` serves the
status page, ``/status.json`` and ``/metrics``.

``status`` prints where a registry's flywheel stands (its ``state.json``,
who holds the lease) and the last audit lines, without touching anything.

Example:
    >>> from typer.testing import CliRunner
    >>> from agentic_loop.cli import app
    >>> result = CliRunner().invoke(app, ["flywheel", "status", "--registry", "/no/such/reg"])
    >>> result.exit_code, "idle" in result.output
    (0, True)
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Optional

import typer
from rich import box
from rich.markup import escape

from agentic_loop.cli import app
from agentic_loop.cli.common import DATA_DEFAULT, console, in_data_dir
from agentic_loop.cli.improve import NumProcessesFlag, RoundParallelFlag, train_stage_line
from agentic_loop.cli.release import DEFAULT_REGISTRY, REGISTRY_HELP, open_registry
from agentic_loop.cli.train import UseVllmFlag, VllmModeFlag, VllmServerUrlFlag
from agentic_loop.clock import utc_stamp
from agentic_loop.errors import ConfigError
from agentic_loop.tables import Col, FitTable, percent

if TYPE_CHECKING:
    from agentic_loop.distill.release.judge_agreement import AgreementReport
    from agentic_loop.distill.release.monitor import MonitorReport

__all__ = ["flywheel_app", "monitor_command", "run_command", "status_command"]


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
    """The judge-vs-people table, or why there is none, and the alarm's reasons.

    The counts are per stratum: ``random`` (runs the review sample drew at random, or
    labelled outside a queue; the alarm decides on these alone) and ``edge`` (edge cases,
    their statistics shown but never alarming).
    """
    if not agreement.rows:
        console.print(f"judge vs people: {escape(agreement.describe())}; label runs with "
                      "`agentic-loop review`", highlight=False, soft_wrap=True)
        return
    columns = [Col("judge", wrap=True, min_width=8), Col("version"),
               *(Col(name, justify="right", short=short) for name, short in (
                   ("random", "rand"), ("ratings", "rated"), ("spearman", "rho"),
                   ("kappa", None), ("edge", None))),
               Col("edge spearman", justify="right", short="e.rho", drop=1),
               Col("edge kappa", justify="right", short="e.kappa", drop=1),
               Col("score", drop=2), Col("status")]
    table = FitTable(f"Judge vs people (alarm: spearman or kappa < {agreement.threshold:g} "
                     f"on >= {agreement.min_labels} random labels)", columns,
                     title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False, padding=(0, 1),
                     caption="random: labels of runs drawn at random or labelled outside a "
                     "queue (the alarm decides on these); edge: edge-case labels (a restricted "
                     "range: shown, never alarming); spearman: the judge's own part of the "
                     "score (its judged features; score final: no judged part recorded) vs "
                     "people's 1-5 rating; kappa: the run's vs people's accept/reject",
                     caption_justify="left")
    colors = {"breach": "red", "agrees": "green"}
    for r in agreement.rows:
        color = colors.get(r.status, "yellow")
        table.add_row(escape(r.judge), r.version or "-", str(r.labels), str(r.ratings),
                      _num(r.spearman), _num(r.kappa), str(r.edge.labels),
                      _num(r.edge.spearman), _num(r.edge.kappa), r.score,
                      f"[{color}]{r.status}[/]")
    console.print(table)
    if agreement.unjudged:
        console.print(f"{agreement.unjudged} labelled runs were decided by the checks alone "
                      "(no judge to check)", highlight=False)
    for r in agreement.rows:
        if r.breached:
            console.print(f"[bold red]judge alarm[/]: {escape(r.reason)}", highlight=False,
                          soft_wrap=True)
        elif r.status != "agrees" or r.edge.labels or r.score != "judged":
            console.print(f"{escape(r.judge)} ({r.version or 'no version'}): "
                          f"{escape(r.reason)}", highlight=False, soft_wrap=True)


# -- agentic-loop flywheel ------------------------------------------------------------------

flywheel_app = typer.Typer(
    help="The service that triggers rounds, canaries their candidates, watches and rolls back."
         "\n\nExample: agentic-loop flywheel run --trajectories runs/traj --golden g.jsonl",
    no_args_is_help=True)
app.add_typer(flywheel_app, name="flywheel")


def _stages(text: str) -> tuple[float, ...]:
    """``5,25,50,100`` (percent) or ``0.05,0.25,0.5,1`` (shares) as shares."""
    try:
        values = [float(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise ConfigError(f"--stages {text!r}: give traffic shares in percent, e.g. "
                          "5,25,50,100") from None
    return tuple(v / 100 if max(values, default=0) > 1 else v for v in values)


@flywheel_app.command("run")
def run_command(
    trajectories: Annotated[list[str], typer.Option(
        "--trajectories", help="Trajectory log folder, .jsonl file or postgresql:// URL "
                               "(repeat for more).")],
    golden: Annotated[Path, typer.Option(
        "--golden", help="Golden-set JSONL each round's gate scores on.")],
    registry: Annotated[Path, typer.Option("--registry", help=REGISTRY_HELP)] = DEFAULT_REGISTRY,
    tasks: Annotated[Optional[Path], typer.Option(  # noqa: UP045 - typer needs Optional here
        "--tasks", help="A task pool each round samples (default: the new runs' tasks).")
    ] = None,
    work_dir: Annotated[Path, typer.Option(
        "--work-dir", help="Rounds' work folders and the watermark.")] = Path("runs/flywheel"),
    min_new_runs: Annotated[Optional[int], typer.Option(  # noqa: UP045
        "--min-new-runs", help="Start a round at this many new accepted runs (0: off).")
    ] = 50,
    every: Annotated[Optional[str], typer.Option(  # noqa: UP045
        "--every", help="Also start a round this long after the last one (e.g. 6h), given "
                        "a new run.")] = None,
    tick: Annotated[str, typer.Option("--tick", help="Time between ticks.")] = "30s",
    stages: Annotated[str, typer.Option(
        "--stages", help="Canary traffic per stage, in percent.")] = "5,25,50,100",
    min_runs_per_stage: Annotated[int, typer.Option(
        "--min-runs-per-stage", help="Runs per arm a stage needs before it can advance.")
    ] = 200,
    max_stage_time: Annotated[str, typer.Option(
        "--max-stage-time", help="A stage without evidence by then rolls back.")] = "1d",
    samples: Annotated[int, typer.Option("--samples", help="Round: samples per task.")] = 4,
    method: Annotated[str, typer.Option("--method", help="Round: training method.")] = "sft",
    train_steps: Annotated[Optional[int], typer.Option(  # noqa: UP045
        "--train-steps", help="Round: optimizer steps (default: one epoch).")] = None,
    min_tasks: Annotated[int, typer.Option(
        "--min-tasks", help="Round: golden tasks the gate needs before it may say PROMOTE.")
    ] = 20,
    status_port: Annotated[Optional[int], typer.Option(  # noqa: UP045
        "--status-port", help="Serve the status page, /status.json and /metrics here.")
    ] = None,
    parallel: RoundParallelFlag = "none",
    num_processes: NumProcessesFlag = None,
    use_vllm: UseVllmFlag = None,
    vllm_mode: VllmModeFlag = "colocate",
    vllm_server_url: VllmServerUrlFlag = None,
) -> None:
    """Run the flywheel service over a registry until stopped (SIGTERM, Ctrl-C).

    Example:

        agentic-loop flywheel run --registry runs/registry --trajectories runs/traj \\
            --golden golden.jsonl --min-new-runs 50 --every 6h --status-port 8099
    """
    from agentic_loop.distill.flywheel.ramp import RampSettings
    from agentic_loop.distill.flywheel.service import Flywheel
    from agentic_loop.distill.flywheel.settings import FlywheelSettings, parse_duration
    from agentic_loop.distill.loop.settings import ImproveSettings

    improve = ImproveSettings(samples=samples, method=method,
                              parallel=parallel,  # type: ignore[arg-type]
                              num_processes=num_processes, use_vllm=use_vllm,
                              vllm_mode=vllm_mode, vllm_server_base_url=vllm_server_url,
                              train_options={"max_steps": train_steps},
                              eval_options={"min_tasks": min_tasks})
    ramp = RampSettings(stages=_stages(stages), min_runs=min_runs_per_stage,
                        min_breach_runs=min(20, min_runs_per_stage),
                        max_stage_s=parse_duration(max_stage_time))
    settings = FlywheelSettings(
        min_new_runs=min_new_runs or None, every_s=parse_duration(every) if every else None,
        tick_s=parse_duration(tick), ramp=ramp, improve=improve, status_port=status_port)

    def say(line: str) -> None:
        console.print(f"{utc_stamp()} {escape(line)}", highlight=False, soft_wrap=True)

    console.print(train_stage_line(settings.improve), highlight=False, soft_wrap=True)

    wheel = Flywheel(registry, trajectories, golden, work_dir, settings,
                     str(tasks) if tasks is not None else None, log=say)
    say(f"flywheel on {registry} (lease: {registry / 'flywheel.lock'}); stop with SIGTERM")
    wheel.run()
    say("stopped")


@flywheel_app.command("status")
def status_command(
    registry: Annotated[Path, typer.Option("--registry", help=REGISTRY_HELP)] = DEFAULT_REGISTRY,
    lines: Annotated[int, typer.Option("--lines", help="Audit lines to show.")] = 15,
) -> None:
    """Print where the registry's flywheel stands and its last audit lines.

    Example: agentic-loop flywheel status --registry runs/registry --lines 20
    """
    from agentic_loop.distill.flywheel.journal import Journal
    from agentic_loop.distill.flywheel.lease import lease_holder

    journal = Journal(registry)
    state = journal.load()
    holder = lease_holder(registry)
    held = (f"pid {holder.get('pid')} on {holder.get('host')} since {holder.get('started')}"
            if holder is not None else "no service holds it")
    console.print(f"phase: [bold]{state.phase}[/]  candidate: {state.candidate or '-'}  "
                  f"stage: {'-' if state.stage is None else state.stage}  rounds: "
                  f"{state.rounds}  lease: {escape(held)}", highlight=False, soft_wrap=True)
    if state.last_trigger:
        console.print(f"last trigger: {escape(state.last_trigger)}", highlight=False,
                      soft_wrap=True)
    records = journal.tail(lines)
    if not records:
        console.print("no audit lines yet", highlight=False)
        return
    table = FitTable(f"Last audit lines ({escape(str(journal.audit_path))})",
                     [Col("at"), Col("action"), Col("version"),
                      Col("detail", wrap=True, min_width=20)], title_justify="left",
                     box=box.SIMPLE_HEAD, pad_edge=False, padding=(0, 1))
    for r in records:
        table.add_row(r.at.isoformat(timespec="seconds"), escape(r.action), r.version or "-",
                      escape(r.detail))
    console.print(table)
