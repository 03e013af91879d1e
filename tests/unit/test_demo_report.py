"""The demo's improve numbers and table, and its wiring with scripted models (no model loads).

The round reports are shaped as ``improve`` writes them; the wiring test
drives :func:`~agentic_loop.demo.run.run_demo` with the scripted models and fake
trainer of ``test_improve`` and the hashing embedder, so everything but the
models (batch runner, export, gate, registry, plots, report) is real.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from rich.console import Console

from agentic_loop.demo.improve import fmt_rate, round_row, rounds_table


def _report(number: int, *, promoted: bool = False, ended: str | None = None) -> dict[str, Any]:
    rate = {"n": 4, "passed": 2, "pass_rate": 0.5, "interval": [0.15, 0.85]}
    if ended:
        return {"round": number, "model": "local", "threshold": 8.0, "pool": rate,
                "hint": {"retried": 2, "accepted": 0}, "data": {"sft_rows": 0, "pairs": 0},
                "train": None, "golden": None, "decision": None, "register": None,
                "seconds": {"grow": 3.0}, "ended": ended}
    return {"round": number, "model": "local", "from_version": "v1", "threshold": 7.0,
            "pool": rate, "hint": {"retried": 1, "accepted": 1},
            "data": {"sft_rows": 3, "pairs": 1}, "train": {"steps": 2, "loss": 1.2},
            "golden": {"tasks": 4, "baseline": {**rate, "passed": 1, "pass_rate": 0.25},
                       "candidate": rate},
            "decision": "PROMOTE" if promoted else "MANUAL_REVIEW", "reasons": ["few tasks"],
            "register": {"version": f"v{number + 1}", "promoted": promoted},
            "seconds": {"grow": 4.0, "train": 6.5}}


def test_round_row_keeps_rates_counts_and_decision() -> None:
    row = round_row(_report(1, promoted=True))
    assert row["golden_before"]["pass_rate"] == 0.25 and row["golden_after"]["passed"] == 2
    assert (row["sft_rows"], row["pairs"], row["hinted"], row["train_steps"]) == (3, 1, 1, 2)
    assert (row["decision"], row["version"], row["promoted"], row["seconds"]) == (
        "PROMOTE", "v2", True, 10.5)


def test_a_round_with_nothing_to_train_on_reads_as_ended() -> None:
    row = round_row(_report(2, ended="round 2: nothing to train on"))
    assert row["golden_after"] is None and row["version"] is None and row["train_steps"] is None
    console = Console(record=True, width=240)
    console.print(rounds_table([round_row(_report(1, promoted=True)), row]))
    text = console.export_text()
    assert "PROMOTE v2 *" in text and "round 2: nothing to train on" in text
    assert "50% [15-85%]" in text


def test_fmt_rate_without_numbers() -> None:
    assert fmt_rate(None) == "-" and fmt_rate({"pass_rate": None}) == "-"
    assert fmt_rate({"pass_rate": 1.0, "interval": [0.5, 1.0]}) == "100% [50-100%]"


def _held_out_tasks(prefix: str, n: int) -> list[Any]:
    from agentic_loop.tasks.spec import TaskSpec

    return [TaskSpec(task=f"{prefix} {i}: answer in exactly 2 words.",
                     constraints={"exact_words": 2}, id=str(i), split="held_out",
                     metadata={"suite": "words"}) for i in range(n)]


def test_run_demo_measures_each_round_against_the_base_model_and_ends_on_one_line(
        tmp_path: Path, monkeypatch: Any) -> None:
    """Scripted models (the base fails every task, each trained model passes them all) drive
    the real rounds, export, default gate (24 held-out tasks >= its 20), registry and report."""
    from test_improve import FakeModels

    import agentic_loop.tasks.dev_set as dev_set_module
    from agentic_loop.demo.run import DemoOptions, run_demo
    from agentic_loop.memory import HashingEmbedder

    monkeypatch.setattr(dev_set_module, "dev_set", lambda held, train, seed=0: (
        _held_out_tasks("train task", train), _held_out_tasks("held-out task", held)))
    models = FakeModels(base="weak", trained=["good", "good"])
    models.kinds["scripted"] = "weak"
    opts = DemoOptions(held_out_tasks=24, train_tasks=4, model="scripted", concurrency=2,
                       train_steps=3, rounds=2, samples=1, thresholds=(0.0, 0.0),
                       gate_options=(("diversity_check", False),))
    console = Console(record=True, width=80)
    out = tmp_path / "demo"
    result = run_demo(out, opts, console, backend=models.backend(), embedder=HashingEmbedder())

    assert [r["round"] for r in result["improve"]["rounds"]] == [1, 2], result["improve"]
    assert [c["max_steps"] for c in models.train_calls] == [3, 3]
    held = result["held_out"]
    assert held["tasks"] == 24 and held["base"]["passed"] == 0
    first, second = held["rounds"]
    assert (first["passed"], first["decision"], first["promoted"]) == (24, "PROMOTE", True)
    assert first["p_value"] < 1e-6 and first["wins"] == 24 and first["losses"] == 0
    # round 2's candidate is no better than round 1's (the gate's baseline), yet far above base
    assert second["decision"] == "MANUAL_REVIEW" and not second["promoted"]
    assert result["closing"] == ("round 1 passes 100% of 24 held-out tasks against the base "
                                 "model's 0% (+100 points, p < 0.001): promoted, now v1")
    saved = json.loads((out / "report.json").read_text())
    assert saved["closing"] == result["closing"] and saved["held_out"]["rounds"][0]["p_value"]
    assert (out / "plots" / "rounds.png").stat().st_size > 1000
    text = console.export_text()
    lines = text.splitlines()
    assert max(len(line) for line in lines) <= 80, text
    assert " ".join(text.split()).endswith(" ".join(result["closing"].split()))
    assert "p = McNemar p" in text and "vs v1:" in text
    assert "PROMOTE *" in text and "base model" in text

    # a second run starts fresh and says so; --resume says what it reused
    console = Console(record=True, width=80)
    models2 = FakeModels(base="weak", trained=["good"])
    models2.kinds["scripted"] = "weak"
    run_demo(out, DemoOptions(**{**opts.__dict__, "rounds": 1}), console,
             backend=models2.backend(), embedder=HashingEmbedder())
    assert "cleared, starting fresh" in console.export_text()
    assert len(list((out / "improve").glob("round-*"))) == 1
    console = Console(record=True, width=80)
    again = run_demo(out, DemoOptions(**{**opts.__dict__, "rounds": 1}), console,
                     backend=models2.backend(), embedder=HashingEmbedder(), resume=True)
    assert "reused: finished rounds: round-001" in " ".join(console.export_text().split())
    assert again["reused"][0] == "finished rounds: round-001"


def test_the_demo_refuses_to_clear_a_folder_that_is_not_a_demo(tmp_path: Path) -> None:
    import pytest

    from agentic_loop.demo.run import prepare_out
    from agentic_loop.errors import ConfigError

    (tmp_path / "mine.txt").write_text("keep me")
    with pytest.raises(ConfigError, match="holds files but no demo run"):
        prepare_out(tmp_path, resume=False, console=Console(record=True))
    assert (tmp_path / "mine.txt").read_text() == "keep me"


def test_the_comparison_table_fits_80_columns_from_a_canned_report() -> None:
    from agentic_loop.demo.heldout import closing_line, comparison_table

    base = {"model": "base model", "n": 200, "passed": 34, "pass_rate": 0.17,
            "interval": [0.124, 0.228]}
    rounds = [{"model": f"round {k}", "round": k, "n": 200, "passed": p, "pass_rate": p / 200,
               "interval": [p / 200 - 0.06, p / 200 + 0.07], "diff": (p - 34) / 200,
               "diff_ci95": [(p - 44) / 200, (p - 24) / 200], "p_value": pv, "wins": 30,
               "losses": 6, "decision": d, "promoted": d == "PROMOTE", "version": f"v{k + 1}",
               "reason": "significantly better (one-sided paired t-test, p < 0.05) by 1.2"}
              for k, p, pv, d in ((1, 52, 0.0021, "PROMOTE"), (2, 62, 3e-6, "MANUAL_REVIEW"))]
    comparison = {"tasks": 200, "base": base, "rounds": rounds}
    for width in (80, 120):
        console = Console(record=True, width=width)
        console.print(comparison_table(comparison))
        console.print(rounds_table([round_row(_report(1, promoted=True)),
                                    round_row(_report(2))]))
        text = console.export_text()
        assert max(len(line) for line in text.splitlines()) <= width, text
        for needle in ("base model", "17% [12-23%]", "round 2", "31% [25-38%]", "+14 [+9, +19]",
                       "0.0021", "< 0.001", "PROMOTE *", "MANUAL_REVIEW", "round 1", "SFT"):
            assert needle in text, (needle, text)
    assert closing_line(comparison).startswith("round 1 passes 26% of 200 held-out tasks against "
                                               "the base model's 17% (+9 points, p = 0.0021)")
