"""``agentic-loop review sample|list|label|pull|export``: people label a sample of runs.

``sample`` picks a fraction of the logged runs (default 2%, edge cases
first) and queues them: to a LangSmith annotation queue when LangSmith is
configured and the run recorded its LangSmith run id, else to the local
queue beside the log. ``list`` shows what waits, ``label`` records a
verdict, a 1-5 rating and a comment, ``pull`` reads LangSmith reviewers'
feedback back, and ``export`` writes every run's latest label as JSONL. The
next ``agentic-loop export`` uses the labels: a rejected run never trains.

Example:
    >>> from typer.testing import CliRunner
    >>> from agentic_loop.cli import app
    >>> result = CliRunner().invoke(app, ["review", "--help"])
    >>> result.exit_code, all(c in result.output for c in ("sample", "list", "label", "export"))
    (0, True)
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich import box
from rich.markup import escape

from agentic_loop.cli import app
from agentic_loop.cli.common import console
from agentic_loop.errors import AgenticLoopError, ConfigError
from agentic_loop.tables import Col, FitTable

if TYPE_CHECKING:
    from agentic_loop.distill.forget.rejected import Unarchived
    from agentic_loop.distill.review import ReviewQueue

__all__ = ["review_app"]

review_app = typer.Typer(help="Review a sample of runs: queue, list, label, export labels.",
                         no_args_is_help=True)
app.add_typer(review_app, name="review")

Trajectories = Annotated[Path, typer.Option(
    "--trajectories", help="Trajectory log folder (holding trajectories.jsonl) or .jsonl file.")]


def _queue(trajectories: Path) -> ReviewQueue:
    """The review queue of an existing log; a missing log is a one-line error."""
    from agentic_loop.distill.review import ReviewQueue

    queue = ReviewQueue(trajectories)
    if not queue.log.path.is_file():
        raise ConfigError(f"no trajectory log at {queue.log.path}; pass the folder the runs "
                          "are logged to (--trajectories)")
    return queue


@review_app.command("sample")
def sample_command(
    trajectories: Trajectories,
    fraction: Annotated[float, typer.Option(
        "--fraction", help="Share of runs to review, edge cases first.")] = 0.02,
    threshold: Annotated[float, typer.Option(
        "--threshold", help="Acceptance score (0-10); runs near it are edge cases.")] = 8.0,
    margin: Annotated[float, typer.Option(
        "--margin", help="How near the threshold counts as an edge case.")] = 0.5,
    local: Annotated[bool, typer.Option(
        "--local", help="Queue locally even when LangSmith is configured.")] = False,
    queue_name: Annotated[str, typer.Option(
        "--queue-name", help="LangSmith annotation queue.")] = "agentic-loop review",
) -> None:
    """Pick runs for review and queue them; print the picks by reason.

    Example: agentic-loop review sample --trajectories runs/traj --fraction 0.02
    """
    from agentic_loop.distill.review import (
        langsmith_client,
        langsmith_configured,
        push_picks,
        sample_for_review,
    )

    queue = _queue(trajectories)
    runs = queue.runs()
    drawn = sample_for_review(runs.values(), fraction=fraction, threshold=threshold,
                              margin=margin)
    if langsmith_configured() and not local:
        pushed = push_picks(langsmith_client(), queue, drawn.picks, runs, queue_name=queue_name)
        sent, kept, already = pushed.sent, pushed.local, pushed.already
    else:
        sent, kept = [], queue.add(drawn.picks)
        already = len(drawn.picks) - len(kept)
    table = FitTable("Picks by reason", [Col("reason"), Col("runs", justify="right")],
                     title_justify="left", box=box.SIMPLE_HEAD)
    for reason, n in drawn.reasons().items():
        table.add_row(reason, str(n))
    console.print(table)
    console.print(f"picked {len(drawn.picks)} of {drawn.eligible} runs ({drawn.fraction:.1%} "
                  "asked, edge cases first)", highlight=False)
    console.print(f"queued: {len(kept)} local, {len(sent)} to LangSmith ({escape(queue_name)}); "
                  f"{already} already queued", highlight=False)
    notes = {i.note for i in kept if i.note}
    for note in sorted(notes):
        count = sum(i.note == note for i in kept)
        console.print(f"[yellow]local[/] ({count}): {escape(note)}", highlight=False,
                      soft_wrap=True)
    if drawn.note:
        console.print(f"[yellow]note[/]: {escape(drawn.note)}", highlight=False, soft_wrap=True)


@review_app.command("list")
def list_command(
    trajectories: Trajectories,
    all_items: Annotated[bool, typer.Option(
        "--all", help="Show labelled runs too.")] = False,
) -> None:
    """Show the runs waiting for review. Example: agentic-loop review list --trajectories runs/traj
    """
    queue = _queue(trajectories)
    items = queue.items() if all_items else queue.pending()
    runs = queue.runs()
    table = FitTable(f"{'Queued' if all_items else 'Pending'} reviews: {len(items)}", [
        Col("id"), Col("task", wrap=True, min_width=16), Col("score", justify="right"),
        Col("reasons", wrap=True, min_width=14), Col("where", drop=1),
        Col("label", drop=2)], title_justify="left", box=box.SIMPLE_HEAD)
    for item in items:
        run = runs.get(item.trajectory_id)
        task = " ".join(run.task.split())[:60] if run is not None else "(run no longer logged)"
        label = run.review if run is not None else None
        said = "-" if label is None else " ".join(
            str(v) for v in (label.verdict, label.rating and f"{label.rating}/5") if v)
        table.add_row(item.trajectory_id[:12], escape(task),
                      "-" if item.score is None else f"{item.score:.1f}",
                      ", ".join(item.reasons), item.destination, said or "comment")
    console.print(table)
    if not items:
        console.print("nothing waits: `agentic-loop review sample` queues runs", highlight=False)


@review_app.command("label")
def label_command(
    trajectories: Trajectories,
    run_id: Annotated[str, typer.Argument(
        metavar="ID", help="The run's id (a unique prefix of 6+ characters will do).")],
    verdict: Annotated[bool | None, typer.Option(
        "--accept/--reject", help="May the run train the model?")] = None,
    rating: Annotated[int | None, typer.Option(
        "--rating", help="1 (bad) to 5 (excellent).")] = None,
    comment: Annotated[str | None, typer.Option("--comment", help="What is wrong or right.")
                       ] = None,
    reviewer: Annotated[str | None, typer.Option("--reviewer", help="Who labels.")] = None,
) -> None:
    """Label a run. Example: agentic-loop review label --trajectories runs/traj 3f2a9c --reject
    --rating 2 --comment "wrong total"
    """
    queue = _queue(trajectories)
    label = queue.label(run_id, verdict=None if verdict is None else (
        "accept" if verdict else "reject"), rating=rating, comment=comment, reviewer=reviewer)
    said = ", ".join(s for s in (label.verdict, label.rating and f"rating {label.rating}",
                                 label.comment and "a comment") if s)
    console.print(f"labelled {label.trajectory_id}: {escape(said)}", highlight=False)
    if label.verdict == "reject":  # its archived output stops being a few-shot exemplar
        from agentic_loop.distill.forget.rejected import unarchive_runs

        _withdraw(lambda: unarchive_runs([label.trajectory_id], near=[queue.log.dir]))


@review_app.command("pull")
def pull_command(trajectories: Trajectories) -> None:
    """Read LangSmith reviewers' feedback back as labels.

    Example: agentic-loop review pull --trajectories runs/traj
    """
    from agentic_loop.distill.review import langsmith_client, langsmith_configured, pull_labels

    if not langsmith_configured():
        raise ConfigError("no LangSmith API key is set: set LANGSMITH_API_KEY (and "
                          "LANGSMITH_ENDPOINT for a self-hosted one) to pull its labels")
    queue = _queue(trajectories)
    labels = pull_labels(langsmith_client(), queue)
    console.print(f"pulled {len(labels)} new labels from LangSmith", highlight=False)
    from agentic_loop.distill.forget.rejected import unarchive_rejected

    _withdraw(lambda: unarchive_rejected(queue.log))


def _withdraw(unarchive: Callable[[], Unarchived]) -> None:
    """Withdraw rejected runs from the archives; the labels are stored whatever happens here,
    so a failure is a warning that says how to finish, not an error that hides them."""
    try:
        console.print(unarchive().line(), highlight=False)
    except AgenticLoopError as exc:
        console.print(f"[yellow]the label is stored, but its run's archive entry was not "
                      f"withdrawn[/]: {escape(str(exc))}. Finish it in Python: agentic_loop."
                      "distill.forget.rejected.unarchive_rejected(LOG, embedder=...)",
                      highlight=False, soft_wrap=True)


@review_app.command("export")
def export_command(
    trajectories: Trajectories,
    out: Annotated[Path, typer.Option("--out", help="Labels file to write (JSONL).")],
) -> None:
    """Write each labelled run's latest label, with the run's score and judge, as JSONL.

    Example: agentic-loop review export --trajectories runs/traj --out labels.jsonl
    """
    from agentic_loop.atomic import atomic_write_bytes
    from agentic_loop.text_places import data_root, record_place

    if out.is_dir():
        raise ConfigError(f"--out {out} is a folder; name the labels file, e.g. labels.jsonl")
    queue = _queue(trajectories)
    runs = queue.runs()
    rows = []
    for run in runs.values():
        if run.review is None:
            continue
        judges = [r.judge for r in run.rounds if r.judge]
        rows.append({**run.review.model_dump(mode="json"), "architecture": run.architecture,
                     "model_id": run.model_id, "final_score": run.final_score,
                     "accepted": run.accepted, "judge": judges[-1] if judges else None})
    # a comment may hold personal data: `forget` must find this file
    record_place("log", out, what="review labels export", near=[data_root(), queue.log.dir])
    text = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows)
    atomic_write_bytes(out, text.encode())
    console.print(f"wrote {len(rows)} labels to {escape(str(out))}", highlight=False)
