"""``agentic-loop``: the command line.

One module per command group; each registers itself on :data:`app`. Errors a
user can fix are printed as one line (``error: ...``) with a non-zero exit,
never a traceback.

Example:
    >>> from typer.testing import CliRunner
    >>> result = CliRunner().invoke(app, ["--help"])
    >>> result.exit_code
    0
"""

from __future__ import annotations

import importlib
import sys

import typer

app = typer.Typer(
    name="agentic-loop",
    help="Agents that improve with use: run critique-refine loops, grow an archive, "
         "export trajectories, distill, gate and serve.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

#: Command modules, imported so they register their commands on ``app``.
COMMAND_MODULES = ("run", "archive", "export", "distill", "models", "demo")

for _name in COMMAND_MODULES:
    try:
        importlib.import_module(f"agentic_loop.cli.{_name}")
    except ModuleNotFoundError as exc:  # a command module not written yet
        if exc.name != f"agentic_loop.cli.{_name}":
            raise


def main() -> None:
    """Console-script entry point."""
    from agentic_loop.cli.common import CliError

    try:
        app()
    except CliError as exc:
        typer.echo(f"error: {exc}", err=True)
        sys.exit(2)
