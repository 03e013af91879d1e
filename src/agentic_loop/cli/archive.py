"""``agentic-loop archive show|stats|search|prune``: look into and tend an archive.

Example:
    >>> from typer.testing import CliRunner
    >>> from agentic_loop.cli import app
    >>> result = CliRunner().invoke(app, ["archive", "show", "--archive", "/no/such/archive"])
    >>> result.exit_code, result.stderr.startswith("error: archive /no/such/archive does not")
    (2, True)
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.markup import escape

from agentic_loop.cli import app
from agentic_loop.cli.common import DATA_DEFAULT, console, in_data_dir
from agentic_loop.errors import ConfigError
from agentic_loop.tables import Col, FitTable

if TYPE_CHECKING:
    from agentic_loop.memory import Archive

archive_app = typer.Typer(help="Inspect and tend an archive of accepted outputs.",
                          no_args_is_help=True)
app.add_typer(archive_app, name="archive")

ArchiveDir = Annotated[Path | None, typer.Option(
    "--archive", help=f"Archive dir. Default: archive in {DATA_DEFAULT}.")]
Namespace = Annotated[str | None, typer.Option(help="Namespace inside the archive.")]


def open_archive(path: Path | None, namespace: str | None) -> Archive:
    """The archive in ``path`` (default: the data folder's); a missing folder is a one-line
    error, never a new archive."""
    from agentic_loop.memory import Archive

    path = in_data_dir(path, "archive")
    if not path.exists():
        raise ConfigError(f"archive {path} does not exist; run `agentic-loop run --arch "
                          "archive_refine` first or pass --archive DIR")
    return Archive(path, namespace=namespace, show_progress=False)


@archive_app.command("show")
def show(archive: ArchiveDir = None, namespace: Namespace = None,
         limit: Annotated[int, typer.Option(min=1)] = 20) -> None:
    """List the newest entries. Example: agentic-loop archive show --limit 5"""
    archive = in_data_dir(archive, "archive")
    store = open_archive(archive, namespace)
    table = FitTable(f"{escape(str(archive))} ({len(store)} entries)", [
        Col("id"), Col("created", wrap=True, drop=1), Col("score", justify="right"),
        Col("task", wrap=True, min_width=16), Col("output", wrap=True, min_width=16)])
    for e in sorted(store.entries(), key=lambda e: e.created_at, reverse=True)[:limit]:
        table.add_row(e.id[:8], e.created_at.strftime("%Y-%m-%d %H:%M"),
                      "-" if e.score is None else f"{e.score:.1f}", escape(e.task[:60]),
                      escape(e.output[:80]))
    console.print(table)


@archive_app.command("stats")
def stats(archive: ArchiveDir = None, namespace: Namespace = None,
          plot: Annotated[Path | None, typer.Option(help="Write archive growth as PNG.")] = None
          ) -> None:
    """Count, score distribution, growth and drift.

    Example: agentic-loop archive stats --plot growth.png
    """
    store = open_archive(archive, namespace)
    s = store.stats()
    console.print_json(s.model_dump_json())
    if plot is not None:
        from agentic_loop.plots import plot_archive_growth

        plot_archive_growth(store.entries(), plot)
        console.print(f"wrote {plot}")


@archive_app.command("search")
def search(query: str, archive: ArchiveDir = None, namespace: Namespace = None,
           k: Annotated[int, typer.Option(min=1, max=100)] = 3) -> None:
    """The entries whose tasks are most similar to QUERY.

    Example: agentic-loop archive search "museum tagline"
    """
    if not query.strip():
        raise ConfigError('QUERY is empty; pass the task text to search for, e.g. '
                          'agentic-loop archive search "museum tagline"')
    archive = in_data_dir(archive, "archive")
    store = open_archive(archive, namespace)
    if len(store) == 0:
        raise ConfigError(f"archive {archive} is empty; add outputs first or pass "
                          "another --archive")
    table = FitTable(f"top {k} for {escape(repr(query))}", [
        Col("similarity", justify="right", short="sim"), Col("score", justify="right"),
        Col("task", wrap=True, min_width=16), Col("output", wrap=True, min_width=16)])
    for hit in store.search(query, k=k):
        e = hit.entry
        table.add_row(f"{hit.similarity:.3f}", "-" if e.score is None else f"{e.score:.1f}",
                      escape(e.task[:60]), escape(e.output[:100]))
    console.print(table)


@archive_app.command("prune")
def prune(archive: ArchiveDir = None, namespace: Namespace = None,
          max_entries: Annotated[int | None, typer.Option(min=0)] = None,
          min_score: Annotated[float | None, typer.Option(min=0, max=10)] = None,
          older_than_days: Annotated[float | None, typer.Option(min=0)] = None) -> None:
    """Drop low-scoring, old or surplus entries (atomic).

    Example: agentic-loop archive prune --min-score 7
    """
    store = open_archive(archive, namespace)
    result = store.prune(max_entries=max_entries, min_score=min_score,
                         older_than=timedelta(days=older_than_days) if older_than_days else None)
    console.print(f"kept {result.kept}, removed {result.removed}")
