"""A user's mistake is one line, ``error: ...``, naming the input and the fix; exit code 2.

Each case here printed a traceback (or a wrong reason) once. Inputs are
checked before a model loads: the ``no_model_load`` fixture fails a test
whose command reaches ``load_chat_model``, so a regression in that order
shows here instead of costing every user a model load per typo.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import typer
from distill_helpers import corpus, write_log
from typer.testing import CliRunner

import agentic_loop.models
from agentic_loop.cli import app
from agentic_loop.cli.common import AgenticLoopGroup
from agentic_loop.memory import Archive, HashingEmbedder

runner = CliRunner()


@pytest.fixture(autouse=True)
def no_model_load(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Fail the test if the command loads a model; run in a scratch folder."""
    def refuse(*args: object, **kwargs: object) -> None:
        pytest.fail("the command loaded a model before reporting the input error")

    monkeypatch.setattr(agentic_loop.models, "load_chat_model", refuse)
    monkeypatch.chdir(tmp_path)


def one_line_error(args: list[str], *must_name: str) -> str:
    """Run the CLI; check exit 2, one ``error:`` line naming ``must_name``, no traceback."""
    result = runner.invoke(app, args)
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    for text in must_name:
        assert text in lines[0], (text, lines[0])
    return lines[0]


@pytest.fixture
def corrupt_meta(tmp_path: Path) -> Path:
    folder = tmp_path / "corrupt"
    folder.mkdir()
    (folder / "meta.json").write_text("{not json")
    return folder


@pytest.fixture
def archive_dir(tmp_path: Path) -> Path:
    archive = Archive(tmp_path / "archive", embedder=HashingEmbedder(), show_progress=False)
    archive.add("Write a tagline for a bookstore.", "Books that open doors.", score=9.0)
    return archive.dir


def test_a_task_file_with_bytes_that_are_not_utf8(tmp_path: Path) -> None:
    path = tmp_path / "tasks.txt"
    path.write_bytes(b"Name a color.\n\xff\xfe caf\xe9\n")
    one_line_error(["run", "--tasks", str(path)], f"{path}:2", "not UTF-8", "save the task file "
                   "as UTF-8")


def test_a_task_file_that_is_a_directory_is_called_one(tmp_path: Path) -> None:
    message = one_line_error(["run", "--tasks", str(tmp_path)], str(tmp_path), "is a directory",
                             "pass a JSONL file")
    assert "does not exist" not in message


def test_an_archive_that_is_a_file(tmp_path: Path) -> None:
    path = tmp_path / "afile"
    path.write_text("x")
    one_line_error(["run", "hello", "--archive", str(path)], str(path), "a file is in the way",
                   "pass the path of a folder")


def test_trajectories_that_are_a_file(tmp_path: Path) -> None:
    path = tmp_path / "afile"
    path.write_text("x")
    one_line_error(["run", "hello", "--trajectories", str(path)], str(path), "is a file",
                   "pass a directory")


def test_reflections_that_are_an_archive(archive_dir: Path) -> None:
    one_line_error(["run", "hello", "--arch", "reflexion", "--reflections", str(archive_dir)],
                   str(archive_dir), "'archive' collection", "use another folder")


def test_run_on_an_archive_with_a_corrupt_meta_json(corrupt_meta: Path) -> None:
    one_line_error(["run", "hello", "--archive", str(corrupt_meta)],
                   f"{corrupt_meta / 'meta.json'} is corrupted", "to recover, delete")


@pytest.mark.parametrize("query", ["", "   "])
def test_archive_search_for_nothing(archive_dir: Path, query: str) -> None:
    one_line_error(["archive", "search", query, "--archive", str(archive_dir)],
                   "QUERY is empty", "pass the task text")


def test_export_with_an_archive_with_a_corrupt_meta_json(tmp_path: Path,
                                                         corrupt_meta: Path) -> None:
    logs = write_log(tmp_path / "logs", corpus())
    one_line_error(["export", "-t", str(logs), "-o", str(tmp_path / "out"), "--pii", "off",
                    "--archive", str(corrupt_meta)],
                   f"{corrupt_meta / 'meta.json'} is corrupted", "to recover, delete")
    assert not (tmp_path / "out").exists()


def test_export_of_a_file_that_holds_no_trajectories_lists_its_problems(tmp_path: Path) -> None:
    path = tmp_path / "notes.jsonl"
    path.write_text('{"a": 1}\n{"b": 2}\nfoo\nbar\n')
    message = one_line_error(["export", "-t", str(path), "-o", str(tmp_path / "out"),
                              "--pii", "off"], "4 input problems, the first 3:",
                             f"{path}:1: architecture: Field required", f"{path}:3: record: "
                             "Invalid JSON")
    assert f"{path}:4" not in message


def test_a_file_the_system_refuses_is_one_line_naming_it() -> None:
    demo = typer.Typer(cls=AgenticLoopGroup)

    @demo.command()
    def save(path: str) -> None:
        raise PermissionError(13, "Permission denied", path)

    @demo.command()
    def other() -> None: ...

    result = runner.invoke(demo, ["save", "/srv/out.jsonl"])
    assert result.exit_code == 2
    assert result.stderr == ("error: cannot use /srv/out.jsonl: permission denied; check that it "
                             "exists, is the kind the option asks for (file or folder), and its "
                             "permissions\n")
