"""The one progress bar: description, bar, ``done/total`` and what is counted, elapsed time.

Why one helper: the CLI, ``Architecture.batch(progress=...)`` and the eval
gate all show long work the same way, so a user reads every bar alike and a
change of columns happens in one place. A bar says what it counts: give its
task a ``unit`` (``bar.add_task("baseline", total=200, unit="held-out tasks")``)
and the count reads ``12/200 held-out tasks``, not a bare ``12/200``. rich is
imported when a bar is made, so importing the library stays light.

Example:
    >>> import io
    >>> from rich.console import Console
    >>> screen = Console(file=io.StringIO(), width=80)
    >>> with progress_bar(console=screen) as bar:
    ...     job = bar.add_task("gate", total=200, unit="held-out tasks")
    ...     bar.advance(job, 12)
    >>> "12/200 held-out tasks" in screen.file.getvalue()
    True
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rich.console import Console
    from rich.progress import Progress

__all__ = ["COUNT_FIELD", "progress_bar"]

#: The task field that names what a bar counts ("train steps", "held-out tasks").
COUNT_FIELD = "unit"


def progress_bar(*, console: Console | None = None, transient: bool = False,
                 disable: bool = False) -> Progress:
    """A rich ``Progress`` with the package's columns (``console=None``: rich's default)."""
    from rich.progress import BarColumn, Progress, ProgressColumn, TextColumn, TimeElapsedColumn
    from rich.text import Text

    class Counted(ProgressColumn):
        """``done/total unit`` (``done unit`` while the total is unknown)."""

        def render(self, task: Any) -> Text:
            unit = task.fields.get(COUNT_FIELD, "")
            done = f"{int(task.completed)}" + (f"/{int(task.total)}" if task.total else "")
            return Text(f"{done} {unit}".rstrip(), style="progress.download")

    return Progress(TextColumn("{task.description}"), BarColumn(), Counted(),
                    TimeElapsedColumn(), console=console, transient=transient, disable=disable)
