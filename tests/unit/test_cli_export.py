"""``agentic-loop export`` through typer's CliRunner: success, summary, one-line errors, exits."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from distill_helpers import corpus, make_run, write_log
from typer.testing import CliRunner

from agentic_loop.cli import app

runner = CliRunner()


def invoke(*args: str):  # type: ignore[no-untyped-def]
    return runner.invoke(app, ["export", *args])


def test_export_writes_the_datasets_and_prints_a_summary(tmp_path: Path) -> None:
    logs = write_log(tmp_path / "logs", corpus())
    result = invoke("--trajectories", str(logs), "--out", str(tmp_path / "out"), "--pii", "off",
                    "--dedup-threshold", "0", "--max-per-task", "1")
    assert result.exit_code == 0, result.output
    assert "not trained on: SFT rows: 3 failed a check" in " ".join(result.stdout.split())
    assert "score threshold" in result.stdout and "per-task cap" in result.stdout
    assert "wrote 2 SFT rows" in result.stdout
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    options = manifest["options"]
    assert options["max_per_task"] == 1 and options["dedup_threshold"] is None


def test_several_trajectory_paths_and_a_corrupt_line_warning(tmp_path: Path) -> None:
    a = write_log(tmp_path / "a", corpus()[:2])
    b = write_log(tmp_path / "b", corpus()[3:4])
    with open(b / "trajectories.jsonl", "a") as fh:
        fh.write("{not json\n")
    result = invoke("-t", str(a), "-t", str(b / "trajectories.jsonl"), "-o", str(tmp_path / "out"),
                    "--pii", "off", "--dedup-threshold", "0")
    assert result.exit_code == 0, result.output
    assert f"warning: {b / 'trajectories.jsonl'}:2:" in result.stderr
    assert len(json.loads((tmp_path / "out" / "manifest.json").read_text())["sources"]) == 2


@pytest.mark.parametrize(("args", "message"), [
    (["--pii", "fancy"], "error: --pii must be one of spacy, regex, off, got 'fancy'"),
    (["--reward", "vibes"], "error: --reward must be one of rubric, composite, got 'vibes'"),
    (["--min-score", "8"], ("error: min_score (--min-score) is on the [0, 1] reward scale "
                            "(rubric score / 10), got 8; did you mean 0.8?")),
    (["--min-gap", "1.5"], "error: min_gap (--min-gap) is a reward difference in (0, 1], got 1.5"),
    (["--dedup-threshold", "2"],
     "error: dedup_threshold (--dedup-threshold) is a cosine in (0, 1], got 2"),
    (["--latency-z", "-1"], "error: latency_z (--latency-z) must be positive, got -1"),
])
def test_bad_flags_fail_with_one_line_and_exit_2(tmp_path: Path, args: list[str],
                                                  message: str) -> None:
    logs = write_log(tmp_path / "logs", corpus())
    result = invoke("-t", str(logs), "-o", str(tmp_path / "out"), "--pii", "off", *args)
    assert result.exit_code == 2
    assert result.stderr.strip() == message
    assert not (tmp_path / "out").exists()


def test_missing_path_fails_with_one_line(tmp_path: Path) -> None:
    result = invoke("-t", str(tmp_path / "nope"), "-o", str(tmp_path / "out"), "--pii", "off")
    assert result.exit_code == 2
    lines = result.stderr.strip().splitlines()
    expected = f"error: trajectories path {tmp_path / 'nope'} does not exist"
    assert len(lines) == 1 and lines[0].startswith(expected)


def test_an_empty_export_fails_naming_the_filter(tmp_path: Path) -> None:
    logs = write_log(tmp_path / "logs", [make_run("t", [("meh", 5.0)])])
    result = invoke("-t", str(logs), "-o", str(tmp_path / "out"), "--pii", "off",
                    "--dedup-threshold", "0")
    assert result.exit_code == 2
    # "meh" failed its checks: the first rule that trains only on what the checks accept
    assert "'failed check' removed the last 1" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def test_unknown_flag_and_missing_required_option_exit_2(tmp_path: Path) -> None:
    assert invoke("-t", str(tmp_path), "-o", str(tmp_path), "--fast").exit_code == 2
    assert invoke("-o", str(tmp_path)).exit_code == 2


def test_help_shows_an_example() -> None:
    result = invoke("--help")
    assert result.exit_code == 0
    assert "agentic-loop export --trajectories" in result.stdout
