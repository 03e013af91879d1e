"""``agentic-loop forget``: erase a user's data (or everything past a retention age) everywhere.

A thin shell around :func:`agentic_loop.distill.forget_user`,
:func:`~agentic_loop.distill.enforce_retention` and
:func:`~agentic_loop.distill.withdraw_consent`: it checks the flags, runs
the erasure, and prints what was removed from each kind of store and which
registered models were trained on the erased rows. Nothing is printed that
the erasure removed (no ids, no texts).

Examples::

    agentic-loop forget --user alice@example.com
    agentic-loop forget --older-than 90d                  # retention, for everyone
    agentic-loop forget --user alice --dry-run --json     # what would go, as JSON
    agentic-loop forget --user alice --consent-only       # keep runs, never train on them

Example:
    >>> from typer.testing import CliRunner
    >>> from agentic_loop.cli import app
    >>> result = CliRunner().invoke(app, ["forget"])
    >>> result.exit_code, result.stderr.startswith("error: pass --user")
    (2, True)
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Optional

import typer
from rich.table import Table

from agentic_loop.cli import app
from agentic_loop.cli.common import console
from agentic_loop.errors import ConfigError

if TYPE_CHECKING:
    from agentic_loop.distill.data.forget import ForgetReport

__all__ = ["forget_command"]

_Paths = Optional[list[Path]]  # noqa: UP045 - typer needs Optional here


@app.command("forget")
def forget_command(
    user: Annotated[Optional[str], typer.Option(  # noqa: UP045
        "--user", help="The user id the runs were made with (hashed as the logs hash it).")] = None,
    older_than: Annotated[Optional[str], typer.Option(  # noqa: UP045
        "--older-than",
        help="Retention: erase what is older than this age (90d, 12h, 2w); "
             "with --user, only that user's older data.")] = None,
    trajectories: Annotated[_Paths, typer.Option(
        "--trajectories", "-t",
        help="TrajectoryLog folder or .jsonl file; repeat. Default: data/trajectories.")] = None,
    memory: Annotated[_Paths, typer.Option(
        "--memory", help="Archive or Reflexion memory root; repeat. "
                         "Default: data/archive, data/reflections.")] = None,
    exports: Annotated[_Paths, typer.Option(
        "--exports", help="Folder searched for dataset exports; repeat. "
                          "Default: runs, data (and every registered model's dataset).")] = None,
    registry: Annotated[_Paths, typer.Option(
        "--registry", help="Model registry whose versions trained on erased rows are marked; "
                           "repeat. Default: runs/registry.")] = None,
    audit_log: Annotated[Path, typer.Option(
        "--audit-log", help="JSONL audit log (who, when, counts; never the data).")
    ] = Path("data/audit/erasures.jsonl"),
    consent_only: Annotated[bool, typer.Option(
        "--consent-only",
        help="Keep the user's runs but record withdrawn consent: no later export uses them.")
    ] = False,
    dry_run: Annotated[bool, typer.Option(
        "--dry-run", help="Count what would be erased; change nothing.")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the report as JSON.")] = False,
) -> None:
    """Erase a user's trajectories, feedback, memory records and dataset rows; mark models.

    Example: agentic-loop forget --user alice@example.com
    """
    from agentic_loop.distill.data.forget import (
        enforce_retention,
        forget_user,
        withdraw_consent,
    )

    if user is None and older_than is None:
        raise ConfigError("pass --user ID to forget a user, --older-than AGE (e.g. 90d) to "
                          "enforce retention, or both")
    if consent_only:
        if user is None or older_than is not None or dry_run:
            raise ConfigError("--consent-only takes --user alone (no --older-than, no --dry-run)")
        logs = withdraw_consent(user, trajectories=trajectories, audit_log=audit_log)
        console.print(f"consent withdrawn in {logs} trajectory log folder(s); later exports "
                      "leave this user's runs out")
        return
    if user is not None:
        report = forget_user(user, older_than=older_than, trajectories=trajectories,
                             memory=memory, exports=exports, registries=registry,
                             audit_log=audit_log, dry_run=dry_run)
    else:
        report = enforce_retention(older_than or "", trajectories=trajectories, memory=memory,
                                   exports=exports, registries=registry, audit_log=audit_log,
                                   dry_run=dry_run)
    if as_json:
        typer.echo(json.dumps(report.to_dict(), indent=2))
        return
    _print(report)


def _print(report: ForgetReport) -> None:
    title = f"{'would erase' if report.dry_run else 'erased'} ({report.kind})"
    table = Table(title=title)
    table.add_column("store")
    table.add_column("records", justify="right")
    for name, count in report.counts().items():
        table.add_row(name.replace("_", " "), str(count))
    console.print(table)
    for model in report.models:
        console.print(f"model {model.version} ({model.name}) in {model.registry}: {model.reason}")
    if report.models and not report.dry_run:
        console.print("[yellow]these models learned from erased data: retrain or retire them"
                      "[/yellow]")
    if report.audit_path is not None:
        console.print(f"audit: {report.audit_path}")
