"""Helpers shared by the CLI commands: one-line errors, consoles, JSON output.

Example:
    >>> fail_if(False, "never raised")
"""

from __future__ import annotations

from typing import NoReturn

import typer
from rich.console import Console

__all__ = ["CliError", "console", "err_console", "fail", "fail_if"]

console = Console()
err_console = Console(stderr=True)


class CliError(Exception):
    """A user-fixable problem: printed as ``error: <message>``, exit code 2."""


def fail(message: str) -> NoReturn:
    """Print ``error: message`` to stderr and exit 2."""
    err_console.print(f"[bold red]error:[/] {message}", highlight=False, soft_wrap=True)
    raise typer.Exit(2)


def fail_if(condition: bool, message: str) -> None:
    """:func:`fail` when ``condition`` holds."""
    if condition:
        fail(message)
