"""No command writes loose files into the working directory (a checkout's root) unless told to.

Every default output path of every command is in a folder (``data/``: the data folder,
``$AGENTIC_LOOP_DATA``; or ``runs/``), never a bare file name such as ``monitor.png``;
outputs with no path given go to the data folder, wherever ``$AGENTIC_LOOP_DATA`` points.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import typer

from agentic_loop.cli import app
from agentic_loop.cli.common import in_data_dir


def _commands(command: Any, prefix: str = "") -> list[tuple[str, Any]]:
    found = [(prefix.strip(), command)]
    for name, sub in getattr(command, "commands", {}).items():
        found += _commands(sub, f"{prefix} {name}")
    return found


def test_no_default_path_is_a_loose_file_in_the_working_directory() -> None:
    loose = []
    for name, command in _commands(typer.main.get_command(app)):
        for param in getattr(command, "params", ()):
            default = param.default
            for value in default if isinstance(default, (list, tuple)) else [default]:
                if isinstance(value, Path) and not value.is_absolute() and len(value.parts) < 2:
                    loose.append(f"{name} {param.opts[0]}={value}")
    assert not loose, loose


@pytest.mark.parametrize("name", ["monitor.png", "eval.png", "archive", "trajectories"])
def test_an_output_with_no_path_goes_to_the_data_folder(tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch,
                                                       name: str) -> None:
    monkeypatch.setenv("AGENTIC_LOOP_DATA", str(tmp_path / "data"))
    assert in_data_dir(None, name) == tmp_path / "data" / name
    assert in_data_dir(tmp_path / "mine.png", name) == tmp_path / "mine.png"


def test_help_names_the_data_folder_default() -> None:
    from typer.testing import CliRunner

    output = CliRunner().invoke(app, ["monitor", "--help"]).output
    text = " ".join(output.replace("│", " ").split())
    assert "monitor.png in $AGENTIC_LOOP_DATA, else ./data" in text
