"""A round's report carries how its hints went (rationalized, restated) and what its data gate
dropped, and the improve command shows them within 80 columns."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from rich.console import Console

from agentic_loop.distill.eval.gate import Decision
from agentic_loop.distill.loop.records import (
    DataCounts,
    GoldenStats,
    HintCounts,
    ImproveResult,
    ImproveRound,
    Registration,
)
from agentic_loop.distill.loop.round import round_report
from agentic_loop.distill.loop.settings import ImproveSettings
from agentic_loop.distill.loop.state import RoundState

DROPPED = {"sft": {"failed_check": 7, "guard:recital": 2, "guard:restated_answer": 1},
           "pairs": {"chosen_failed_check": 3}}


def _state(tmp_path: Path) -> RoundState:
    state = RoundState.open(tmp_path, 1)
    state.start(model="local", threshold=7.0)
    state.finish("grow", {"passed": 2, "samples": 12, "tasks": 6, "tasks_solved": 2,
                          "temperatures": [0.7, 1.0]}, seconds=1.0)
    state.finish("hint", {"retried": 4, "accepted": 2, "rationalized": 3, "restated": 1},
                 seconds=1.0)
    state.finish("data", {"sft_rows": 4, "pairs": 1, "dir": str(tmp_path / "data"),
                          "dropped": DROPPED}, seconds=1.0)
    return state


def test_the_round_report_holds_the_hint_and_drop_counts(tmp_path: Path) -> None:
    report = round_report(_state(tmp_path), ImproveSettings())
    assert report.hint == HintCounts(retried=4, accepted=2, rationalized=3, restated=1)
    assert report.data is not None and report.data.dropped == DROPPED
    assert report.data.dropped_samples == 10
    again = ImproveRound.model_validate_json(report.model_dump_json())
    assert again == report  # report.json reads back whole
    dumped = report.model_dump(mode="json")
    assert dumped["hint"]["rationalized"] == 3 and dumped["data"]["dropped"] == DROPPED
    assert report.details() == (
        "hint: 4 retried (3 given the answer, 1 only restated it), 2 accepted; not trained "
        "on: SFT rows: 7 failed a check, 2 flagged recital, 1 flagged restated_answer; "
        "pairs: 3 chosen failed a check")


def test_an_old_report_without_the_counts_loads_and_writes_back_the_same() -> None:
    old = {"round": 1, "hint": {"retried": 3, "accepted": 1},
           "data": {"accepted": 0, "hinted": 1, "sft_rows": 1, "pairs": 0, "prompts": None}}
    report = ImproveRound.model_validate(old)
    assert report.hint is not None and report.hint.rationalized is None
    assert report.data is not None and report.data.dropped == {}
    dumped = report.model_dump(mode="json")
    assert dumped["hint"] == old["hint"] and dumped["data"] == old["data"]
    assert report.details() == "hint: 3 retried, 1 accepted"


@pytest.mark.parametrize("width", [80, 120])
def test_the_improve_command_shows_the_counts_within_the_width(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, width: int) -> None:
    from agentic_loop.cli import improve

    console = Console(width=width, file=io.StringIO(), record=True, color_system=None)
    monkeypatch.setattr(improve, "console", console)
    report = round_report(_state(tmp_path), ImproveSettings()).model_copy(update={
        "golden": GoldenStats.of(baseline=(34, 200), candidate=(62, 200)),
        "decision": Decision.MANUAL_REVIEW,
        "registration": Registration(version="v2", promoted=False)})
    result = ImproveResult(work_dir=tmp_path / "work", reports=[report], stopped="rounds",
                           reason="the round budget (1) is spent", current="v1")
    improve.print_rounds(result)
    text = console.export_text()
    table = text.split("round 1: hint")[0]
    assert all(len(line) <= width for line in table.splitlines())
    said = " ".join(text.split())
    assert "round 1: hint: 4 retried (3 given the answer, 1 only restated it), 2 accepted" in said
    assert "not trained on: SFT rows: 7 failed a check, 2 flagged recital" in said
    detail = text[text.index("round 1: hint"):text.index("stopped:")]
    assert all(len(line) <= width for line in detail.splitlines())  # wrapped, not cut
    assert "MANUAL_REVIEW" in text or "MANUAL_REV" in text


def test_a_round_without_hints_or_drops_adds_no_line() -> None:
    assert ImproveRound(round=2, data=DataCounts(sft_rows=3)).details() == ""
    assert json.loads(ImproveRound(round=2).model_dump_json())["hint"] is None
