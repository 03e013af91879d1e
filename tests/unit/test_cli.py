"""The CLI's contract: every command has --help with an example; bad input is one line, exit 2."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from agentic_loop.cli import app

runner = CliRunner()


def commands() -> list[list[str]]:
    import typer.main

    group = typer.main.get_command(app)
    out: list[list[str]] = []
    for name, cmd in group.commands.items():
        sub = getattr(cmd, "commands", None)
        if sub:
            out += [[name, s] for s in sub]
        else:
            out.append([name])
    return out


def test_the_documented_commands_exist():
    names = {c[0] for c in commands()}
    assert {"run", "archive"} <= names
    assert {("archive", s) for s in ("show", "stats", "search", "prune")} <= \
        {tuple(c) for c in commands() if len(c) == 2}


@pytest.mark.parametrize("command", commands(), ids=" ".join)
def test_every_command_has_help_with_an_example(command):
    result = runner.invoke(app, [*command, "--help"])
    assert result.exit_code == 0, result.output
    assert "Example" in result.output or "example" in result.output


@pytest.mark.parametrize("command", commands(), ids=" ".join)
def test_unknown_flags_fail_cleanly(command):
    result = runner.invoke(app, [*command, "--no-such-flag"])
    assert result.exit_code == 2
    assert "Traceback" not in result.output


def test_run_without_tasks_is_a_one_line_error():
    result = runner.invoke(app, ["run"])
    assert result.exit_code == 2 and "no task given" in result.output


def test_run_with_a_missing_task_file_names_it(tmp_path):
    missing = tmp_path / "tasks.jsonl"
    result = runner.invoke(app, ["run", "--tasks", str(missing)])
    assert result.exit_code == 2 and str(missing) in result.output.replace("\n", "")


def test_run_with_a_bad_task_line_names_file_and_line(tmp_path):
    path = tmp_path / "tasks.jsonl"
    path.write_text(json.dumps({"task": "ok"}) + "\n" +
                    json.dumps({"task": "x", "constraints": {"word_cnt": 3}}) + "\n")
    result = runner.invoke(app, ["run", "--tasks", str(path)])
    assert result.exit_code == 2 and f"{path}:2" in result.output.replace("\n", "")


def test_run_with_an_unknown_architecture():
    result = runner.invoke(app, ["run", "hello", "--arch", "magic", "--model", "local:/nope"])
    assert result.exit_code == 2 and "unknown architecture" in result.output


def test_run_with_an_unknown_refine_mode_fails_before_loading_a_model():
    result = runner.invoke(app, ["run", "hello", "--refine", "rewrite", "--model", "local:/nope"])
    assert result.exit_code == 2 and "unknown --refine 'rewrite'" in result.output
    assert "feedback, resample" in result.output


def test_run_with_a_missing_model_dir(tmp_path):
    result = runner.invoke(app, ["run", "hello", "--arch", "reflection",
                                 "--model", f"local:{tmp_path / 'none'}"])
    assert result.exit_code == 2 and "does not exist" in result.output


def test_archive_commands_on_a_missing_archive(tmp_path):
    for sub in (["show"], ["stats"], ["search", "q"], ["prune"]):
        result = runner.invoke(app, ["archive", *sub, "--archive", str(tmp_path / "none")])
        assert result.exit_code == 2 and "does not exist" in result.output
