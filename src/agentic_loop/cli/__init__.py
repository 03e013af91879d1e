"""``agentic-loop``: the command line.

One module per command group, named for its commands; each registers itself
on :data:`app`. Errors a user can fix (every
:class:`~agentic_loop.errors.AgenticLoopError`) are caught in one place,
:class:`~agentic_loop.cli.common.AgenticLoopGroup`, and printed as one line
(``error: ...``) with exit code 2, never a traceback.

Example:
    >>> from typer.testing import CliRunner
    >>> result = CliRunner().invoke(app, ["--help"])
    >>> result.exit_code
    0
"""

from __future__ import annotations

import importlib

import typer

from agentic_loop.cli.common import AgenticLoopGroup

app = typer.Typer(
    cls=AgenticLoopGroup,
    name="agentic-loop",
    help="Agents that improve with use: run critique-refine loops, grow an archive, "
         "export trajectories, distill, gate and serve.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

#: Command modules, imported so they register their commands on ``app``.
COMMAND_MODULES = ("run", "archive", "export", "train", "distill", "registry", "release", "serve",
                   "demo", "forget", "improve", "monitor", "review")

for _name in COMMAND_MODULES:
    importlib.import_module(f"agentic_loop.cli.{_name}")


def main() -> None:
    """Console-script entry point (errors are handled by the group, see above)."""
    app()
