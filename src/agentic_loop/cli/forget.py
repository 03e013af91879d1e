"""``agentic-loop forget``: erase a user's data (or everything past a retention age) everywhere.

A thin shell around :func:`agentic_loop.distill.forget_user`,
:func:`~agentic_loop.distill.enforce_retention` and
:func:`~agentic_loop.distill.withdraw_consent`: it checks the flags, runs
the erasure, and prints what was removed from each kind of store, from
which place (each log, collection, store and dataset folder), which
registered models were trained on the erased rows, and a warning (on
stderr, and under ``warnings`` with ``--json``) for every place known to
hold user text that it could not reach. When nothing at all was found
it says so, where it looked and what to check (``nothing_found`` with
``--json``); the exit code stays 0. Nothing is printed that the erasure
removed (no ids, no texts).

Examples::

    agentic-loop forget --user alice@example.com
    agentic-loop forget --older-than 90d                  # retention, for everyone
    agentic-loop forget --user alice --dry-run --json     # what would go, as JSON
    agentic-loop forget --user alice --consent-only       # keep runs, never train on them
    agentic-loop forget --user alice --store postgresql://app@db/agents   # and a Postgres store
    agentic-loop forget --user alice -t postgresql://app@db/agents  # runs logged in Postgres

Example:
    >>> from typer.testing import CliRunner
    >>> from agentic_loop.cli import app
    >>> result = CliRunner().invoke(app, ["forget"])
    >>> result.exit_code, result.stderr.startswith("error: pass --user")
    (2, True)
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Optional

import typer
from rich.markup import escape

from agentic_loop.cli import app
from agentic_loop.cli.common import console, err_console
from agentic_loop.errors import ConfigError
from agentic_loop.tables import Col, FitTable

if TYPE_CHECKING:
    from agentic_loop.distill.forget import ForgetReport

__all__ = ["forget_command", "nothing_found"]

_Paths = Optional[list[Path]]  # noqa: UP045 - typer needs Optional here


@app.command("forget")
def forget_command(
    user: Annotated[Optional[str], typer.Option(  # noqa: UP045
        "--user", help="The user id the runs were made with (hashed as the logs hash it).")] = None,
    older_than: Annotated[Optional[str], typer.Option(  # noqa: UP045
        "--older-than",
        help="Retention: erase what is older than this age (90d, 12h, 2w); "
             "with --user, only that user's older data.")] = None,
    data: Annotated[Optional[Path], typer.Option(  # noqa: UP045
        "--data", help="The data folder: the defaults below are in it, and its places.jsonl "
                       "names where writers put user text. Default: $AGENTIC_LOOP_DATA and "
                       "data.")] = None,
    trajectories: Annotated[Optional[list[str]], typer.Option(  # noqa: UP045
        "--trajectories", "-t",
        help="TrajectoryLog folder or .jsonl file, or the postgresql:// URL of a Postgres "
             "trajectory log (add ?table=NAME for a log not in the default table); repeat. "
             "Default: DATA/trajectories.")] = None,
    memory: Annotated[_Paths, typer.Option(
        "--memory", help="Archive or Reflexion memory root; repeat. "
                         "Default: DATA/archive, DATA/reflections.")] = None,
    exports: Annotated[_Paths, typer.Option(
        "--exports", help="Folder searched for dataset exports; repeat. Default: runs, DATA "
                          "(and every recorded export and registered model's dataset).")] = None,
    registry: Annotated[_Paths, typer.Option(
        "--registry", help="Model registry whose versions trained on erased rows are marked; "
                           "repeat. Default: runs/registry.")] = None,
    store: Annotated[Optional[list[str]], typer.Option(  # noqa: UP045
        "--store", help="Postgres connection string of a LangGraph store holding memory; "
                        "repeat. Stores the package wrote to are recorded and reached anyway "
                        "(with credentials from PGPASSWORD or ~/.pgpass).")] = None,
    audit_log: Annotated[Optional[Path], typer.Option(  # noqa: UP045
        "--audit-log", help="JSONL audit log (who, when, counts; never the data). "
                            "Default: DATA/audit/erasures.jsonl.")] = None,
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
    from agentic_loop.distill.forget import (
        DEFAULT_AUDIT_LOG,
        enforce_retention,
        forget_user,
        withdraw_consent,
    )

    if user is None and older_than is None:
        raise ConfigError("pass --user ID to forget a user, --older-than AGE (e.g. 90d) to "
                          "enforce retention, or both")
    audit = DEFAULT_AUDIT_LOG if audit_log is None else audit_log
    if consent_only:
        if user is None or older_than is not None or dry_run:
            raise ConfigError("--consent-only takes --user alone (no --older-than, no --dry-run)")
        logs = withdraw_consent(user, data=data, trajectories=trajectories, audit_log=audit)
        console.print(f"consent withdrawn in {logs} trajectory log folder(s); later exports "
                      "leave this user's runs out")
        return
    if user is not None:
        report = forget_user(user, older_than=older_than, data=data, trajectories=trajectories,
                             memory=memory, exports=exports, registries=registry, stores=store,
                             audit_log=audit, dry_run=dry_run)
    else:
        report = enforce_retention(older_than or "", data=data, trajectories=trajectories,
                                   memory=memory, exports=exports, registries=registry,
                                   stores=store, audit_log=audit, dry_run=dry_run)
    if as_json:
        typer.echo(report.model_dump_json(indent=2))
    else:
        _print(report)
        if report.nothing_found:
            console.print(nothing_found(report, user, older_than), highlight=False,
                          soft_wrap=True, markup=False)
    for line in [f"warning: {w}" for w in report.warnings] + (
            [f"{len(report.warnings)} place(s) known to hold user text were not reached: the "
             "erasure is incomplete there"] if report.warnings else []):
        err_console.print(line, style="yellow", markup=False, highlight=False, soft_wrap=True)


def nothing_found(report: ForgetReport, user: str | None, older_than: str | None) -> str:
    """The line that says an erasure found nothing, where it looked, and what to check.

    >>> from agentic_loop.distill.forget import ForgetReport
    >>> report = ForgetReport(kind="user", dry_run=False,
    ...                       stores={"trajectories": ["t.jsonl"], "memory": []})
    >>> nothing_found(report, "alice", None)  # doctest: +ELLIPSIS
    'nothing found for this user: no run, ... (searched 1 trajectory log, 0 memory ...'
    """
    kinds = (("trajectories", "trajectory log"), ("memory", "memory collection"),
             ("exports", "dataset export"), ("logs", "recorded log"), ("stores", "memory store"))
    searched = ", ".join(f"{len(report.stores.get(key, []))} {what}"
                         f"{'' if len(report.stores.get(key, [])) == 1 else 's'}"
                         for key, what in kinds)
    whom = "this user" if user is not None else "anyone"
    age = f" older than {older_than}" if older_than is not None else ""
    check = ("check the id (the one their runs were made with; $AGENTIC_LOOP_USER_SALT changes "
             "its hash) and --data/--trajectories" if user is not None else
             "check --older-than and --data/--trajectories")
    return (f"nothing found for {whom}{age}: no run, memory record, dataset row, log line or "
            f"model holds it (searched {searched}); nothing was changed. If you expected some, "
            f"{check}")


def _print(report: ForgetReport) -> None:
    title = f"{'would erase' if report.dry_run else 'erased'} ({report.kind})"
    table = FitTable(title, [Col("store", wrap=True), Col("records", justify="right")])
    for name, count in report.counts().items():
        table.add_row(name.replace("_", " "), str(count))
    console.print(table)
    erased = report.erased()
    if erased:
        places = FitTable("places", [  # texts replaced: other users' lines kept
            Col("kind", wrap=True), Col("place", wrap=True, min_width=16),
            Col("removed", justify="right"),
            Col("texts replaced", justify="right", wrap=True, short="replaced")])
        for place in erased:
            places.add_row(place.what, escape(place.path), str(place.removed),
                           str(place.scrubbed or ""))
        console.print(places)
    for model in report.models:
        console.print(f"model {model.version} ({model.name}) in {model.registry}: {model.reason}")
    if report.models and not report.dry_run:
        console.print("[yellow]these models learned from erased data: retrain or retire them"
                      "[/yellow]")
    if report.audit_path is not None:
        console.print(f"audit: {report.audit_path}")
