"""The one progress bar: description, bar, ``done/total``, elapsed time.

Why one helper: the CLI, ``Architecture.batch(progress=...)`` and the eval
gate all show long work the same way, so a user reads every bar alike and a
change of columns happens in one place. rich is imported when a bar is made,
so importing the library stays light.

Example:
    >>> with progress_bar(disable=True) as bar:
    ...     job = bar.add_task("exporting", total=2)
    ...     bar.advance(job, 2)
    >>> bar.tasks[0].completed == 2
    True
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rich.console import Console
    from rich.progress import Progress

__all__ = ["progress_bar"]


def progress_bar(*, console: Console | None = None, transient: bool = False,
                 disable: bool = False) -> Progress:
    """A rich ``Progress`` with the package's columns (``console=None``: rich's default)."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    return Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                    TimeElapsedColumn(), console=console, transient=transient, disable=disable)
