"""What every CLI command shares: the one error handler, the consoles, the progress bar,
help that shows a value's type only where a value is taken, and the deprecation notice.

Errors: a command never catches the package's errors itself. Anything it
raises that derives from :class:`~agentic_loop.errors.AgenticLoopError`
(a bad flag, a missing file, a model that will not load) is caught once, by
:class:`AgenticLoopGroup`, the click group behind ``app``: it prints
``error: <message>`` on stderr and exits with code 2. So does an
:class:`OSError` (a path the user named is missing, a folder, unreadable,
on a read-only or full disk): the machine is in the way, not the code, and
the line names the path. Anything else is a bug and keeps its traceback.

Example:
    >>> import typer
    >>> from typer.testing import CliRunner
    >>> from agentic_loop.errors import ConfigError
    >>> demo = typer.Typer(cls=AgenticLoopGroup)
    >>> @demo.command()
    ... def hello(n: int = 1) -> None:
    ...     if n < 1:
    ...         raise ConfigError(f"--n must be at least 1, got {n}")
    >>> @demo.command()
    ... def other() -> None: ...
    >>> result = CliRunner().invoke(demo, ["hello", "--n", "0"])
    >>> result.exit_code, result.stderr
    (2, 'error: --n must be at least 1, got 0\\n')
    >>> describe_os_error(PermissionError(13, "Permission denied", "/data/x"))  # doctest: +ELLIPSIS
    'cannot use /data/x: permission denied; check that it exists, is ... and its permissions'

Help: an on/off flag (``--lora``, ``--resume/--no-resume``) takes no value,
so its help row shows no ``<bool>`` type beside it (:func:`hide_flag_types`).
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import typer
from rich.console import Console
from rich.progress import Progress
from typer.core import TyperGroup

from agentic_loop.errors import AgenticLoopError
from agentic_loop.progress import progress_bar as package_progress_bar

__all__ = ["DATA_DEFAULT", "AgenticLoopGroup", "console", "deprecated", "deprecated_alias",
           "describe_os_error", "err_console", "hide_flag_types", "in_data_dir", "progress_bar"]

#: How help texts name the data folder an output goes to when no path is given.
DATA_DEFAULT = "$AGENTIC_LOOP_DATA, else ./data"

console = Console()
err_console = Console(stderr=True)

#: The exit code of every error a user can fix (click uses it for usage errors too).
USER_ERROR_EXIT = 2


class AgenticLoopGroup(TyperGroup):
    """The command group that turns the package's errors into one line and exit code 2.

    Every command and sub-group runs inside :meth:`invoke` of the root group,
    so this is the one place the CLI catches errors, for the console script
    and for ``CliRunner().invoke(app, ...)`` alike.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        hide_flag_types([self])

    def invoke(self, ctx: Any) -> Any:  # typer's own (vendored) click.Context
        try:
            return super().invoke(ctx)
        except AgenticLoopError as exc:
            typer.echo(f"error: {exc}", err=True)
            raise typer.Exit(USER_ERROR_EXIT) from None
        except BrokenPipeError:
            raise  # the reader of our output went away (``| head``): click handles it
        except OSError as exc:
            typer.echo(f"error: {describe_os_error(exc)}", err=True)
            raise typer.Exit(USER_ERROR_EXIT) from None


def hide_flag_types(commands: Iterable[Any]) -> None:
    """Show no ``<bool>`` beside on/off flags in help, in ``commands`` and their sub-commands.

    Typer's help prints every option's type; a flag takes no value, and
    ``--lora <bool>`` reads as if it needed one. An empty metavar hides it
    (a flag never parses a value, so nothing else reads it).
    """
    for command in commands:
        for param in getattr(command, "params", ()):
            if getattr(param, "is_flag", False) and param.metavar is None:
                param.metavar = ""
        command.get_help_option = _flag_help_option(command.get_help_option)
        hide_flag_types(getattr(command, "commands", {}).values())


def _flag_help_option(get_help_option: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """``--help`` is made on demand (click's ``get_help_option``): hide its type there."""

    def wrapped(ctx: Any) -> Any:
        option = get_help_option(ctx)
        if option is not None and option.metavar is None:
            option.metavar = ""
        return option

    return wrapped


def deprecated(new: str) -> None:
    """Say on stderr that an old spelling runs for one more release, and what replaces it."""
    typer.echo(f"deprecated: use `agentic-loop {new}`; this spelling goes in the next release",
               err=True)


def deprecated_alias(command: Callable[..., None], new: str) -> Callable[..., None]:
    """``command`` under its old name: same options, a :func:`deprecated` line first."""

    @functools.wraps(command)
    def alias(*args: Any, **kwargs: Any) -> None:
        deprecated(new)
        command(*args, **kwargs)

    alias.__doc__ = (f"Deprecated: use `agentic-loop {new}` (this spelling goes in the next "
                     f"release).\n\n{inspect.cleandoc(command.__doc__ or '')}")
    return alias


def describe_os_error(exc: OSError) -> str:
    """One line for a failed file operation: the path, what the system said, what to check."""
    said = exc.strerror or str(exc) or type(exc).__name__
    said = said[:1].lower() + said[1:]
    where = f" {exc.filename}" if exc.filename else ""
    return (f"cannot use{where}: {said}; check that it exists, is the kind the option asks "
            "for (file or folder), and its permissions")


def in_data_dir(path: Path | None, name: str) -> Path:
    """``path``, or ``name`` in the data folder (``$AGENTIC_LOOP_DATA``, else ``./data``).

    Why: a command writes where the user says, or in the data folder; never
    loose files in the working directory (a checkout's root, often).

    >>> in_data_dir(Path("/tmp/x.png"), "monitor.png")
    PosixPath('/tmp/x.png')
    >>> from agentic_loop.text_places import data_root
    >>> in_data_dir(None, "monitor.png") == data_root() / "monitor.png"
    True
    """
    from agentic_loop.text_places import data_root

    return path if path is not None else data_root() / name


def progress_bar(*, on: Console | None = None, transient: bool = False,
                 disable: bool = False) -> Progress:
    """The package's progress bar (:mod:`agentic_loop.progress`), on stderr by default.

    >>> with progress_bar(disable=True) as bar:
    ...     job = bar.add_task("exporting", total=2)
    ...     bar.advance(job, 2)
    >>> bar.tasks[0].completed == 2
    True
    """
    return package_progress_bar(console=on or err_console, transient=transient, disable=disable)
