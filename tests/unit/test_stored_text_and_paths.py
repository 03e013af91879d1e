"""Stored text carries no terminal escape sequence; a path the machine refuses is a clear error.

Reviewers' attacks: an output with ``ESC [2J`` (clear screen), an OSC title
or hyperlink, or ``\\r`` overwrites stayed in archived text and reached
whoever printed it; ``Archive('/proc/1/xx')`` raised a raw
``FileNotFoundError``. The raw trajectory keeps the original text, escaped
by JSON, for audit.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from agentic_loop.clean_text import clean_text
from agentic_loop.distill.release.registry import Registry
from agentic_loop.errors import AgenticLoopError
from agentic_loop.memory import Archive, ReflexionMemory
from agentic_loop.memory.embeddings import HashingEmbedder
from agentic_loop.trajectories import Trajectory, TrajectoryLog

ATTACKS = [
    "\x1b[2J\x1b[H",                      # clear screen, cursor home
    "\x1b]0;pwned\x07",                   # window title (OSC, BEL-terminated)
    "\x1b]8;;http://evil.example\x1b\\",  # hyperlink (OSC 8, ST-terminated)
    "\x1bP+q544e\x1b\\",                  # DCS query
    "\x9b31m",                            # 8-bit CSI
    "\x1b[?1049h",                        # alternate screen
    "\x1b(0",                             # charset switch (ESC + intermediate + final)
    "\x07\x08\x00\x7f\x0b\x0c",           # bell, backspace, NUL, DEL, VT, FF
    "\u202e",                             # right-to-left override
]
CONTROL_BYTES = [b"\x1b", b"\x07", b"\x00", b"\x08", b"\x7f", b"\r", "\u202e".encode()]


@pytest.mark.parametrize("attack", ATTACKS)
def test_every_escape_form_is_removed_and_text_kept(attack: str) -> None:
    cleaned = clean_text(f"before {attack}after\r\nnext")
    assert cleaned.startswith("before ") and cleaned.endswith("after\nnext")
    assert not any(ch in cleaned for ch in "\x1b\x07\x00\x08\x7f\r\x9b\u202e")
    assert clean_text(cleaned) == cleaned  # idempotent


def test_benign_text_is_unchanged() -> None:
    text = ("Ünïcode, 中文, العربية, emoji 👍🏽 (ZWJ 👩\u200d💻), tabs\tand\nnewlines, "
            "5 < 6 > 4 [x] ]")
    assert clean_text(text) == text


def _no_control_bytes(folder: Path) -> None:
    for path in folder.rglob("*.jsonl"):
        data = path.read_bytes()
        for bad in CONTROL_BYTES:
            assert bad not in data, (path, bad)


def test_archive_and_reflections_store_clean_text(tmp_path: Path) -> None:
    poison = "".join(ATTACKS)
    archive = Archive(tmp_path / "archive", "t", embedder=HashingEmbedder())
    added = archive.add(f"Tagline {poison}for a bookstore", f"Stories{poison} wait.", score=9)
    assert added.entry.task == "Tagline for a bookstore"
    assert added.entry.output == "Stories wait."
    memory = ReflexionMemory(tmp_path / "reflexion", "t", embedder=HashingEmbedder())
    lesson = memory.add("Tagline for a bookstore", f"Name the{poison} shop.",
                        failure_summary=f"too{poison} long")
    assert (lesson.entry.reflection, lesson.entry.failure_summary) == ("Name the shop.", "too long")
    _no_control_bytes(tmp_path)
    reopened = Archive(tmp_path / "archive", "t", embedder=HashingEmbedder())
    assert [e.output for e in reopened.entries()] == ["Stories wait."]


def test_raw_trajectory_keeps_the_original_escaped(tmp_path: Path) -> None:
    output = "done\x1b[2J\x1b]0;t\x07"
    log = TrajectoryLog(tmp_path)
    log.append(Trajectory(architecture="reflection", model_id="m", task="t", final_output=output))
    raw = log.path.read_bytes()
    assert b"\x1b" not in raw and b"\x07" not in raw and b"\\u001b" in raw
    assert log.read()[0].final_output == output  # exact, for audit


@pytest.mark.parametrize("where", ["/proc/1/xx", "/sys/kernel/xx", "{file}/sub", "a" * 300])
def test_store_paths_the_machine_refuses_are_clear_errors(tmp_path: Path, where: str) -> None:
    (tmp_path / "file").write_text("x")
    path = where.format(file=tmp_path / "file")
    with pytest.raises(AgenticLoopError, match="cannot create the archive folder"):
        Archive(path, embedder=HashingEmbedder())
    with pytest.raises(AgenticLoopError, match="cannot create the folder of the log"):
        TrajectoryLog(path).append(Trajectory(architecture="a", model_id="m", task="t"))
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text("{}")
    with pytest.raises(AgenticLoopError, match="cannot create the registry folder"):
        Registry(path).register(model)


def test_cli_names_the_refused_path_in_one_line(tmp_path: Path) -> None:
    from agentic_loop.cli import app

    result = CliRunner().invoke(app, ["archive", "stats", "--archive", "/proc/1/archive"])
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    assert "/proc/1/archive" in result.stderr and result.stderr.count("\n") == 1


def test_a_refused_path_loses_nothing_already_stored(tmp_path: Path) -> None:
    log = TrajectoryLog(tmp_path / "runs")
    log.append(Trajectory(architecture="a", model_id="m", task="kept"))
    with pytest.raises(AgenticLoopError):
        TrajectoryLog(tmp_path / "runs" / "trajectories.jsonl" / "x").append(
            Trajectory(architecture="a", model_id="m", task="t"))
    assert [t.task for t in log.read()] == ["kept"]
    assert json.loads(log.path.read_text().splitlines()[0])["task"] == "kept"
