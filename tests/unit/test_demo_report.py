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
    assert "v2 *" in text and "round 2: nothing to train on" in text
    assert "25% [" in text and "50% [15-85%]" in text


def test_fmt_rate_without_numbers() -> None:
    assert fmt_rate(None) == "-" and fmt_rate({"pass_rate": None}) == "-"
    assert fmt_rate({"pass_rate": 1.0, "interval": [0.5, 1.0]}) == "100% [50-100%]"


def test_run_demo_wires_both_loops_and_the_improve_rounds_with_scripted_models(
        tmp_path: Path) -> None:
    from test_improve import FakeModels

    from agentic_loop.demo.run import DemoOptions, run_demo
    from agentic_loop.memory import HashingEmbedder

    models = FakeModels(base="weak", trained=["good", "good"])
    models.kinds["scripted"] = "weak"
    opts = DemoOptions(n_tasks=6, held_out=0.34, model="scripted", max_iterations=1,
                       concurrency=2, train_steps=3, rounds=2, samples=1, thresholds=(0.0, 0.0))
    console = Console(record=True, width=240)
    result = run_demo(tmp_path / "demo", opts, console, backend=models.backend(),
                      embedder=HashingEmbedder())

    assert [r["round"] for r in result["improve"]["rounds"]] == [1, 2], result["improve"]
    assert result["improve"]["stopped"] == "rounds"
    assert [c["max_steps"] for c in models.train_calls] == [3, 3]
    assert [c["lora"] for c in models.train_calls] == [True, True]
    for r in result["improve"]["rounds"]:
        assert r["pool"]["n"] == 4 and r["golden_after"]["n"] == 2 and r["version"]
    saved = json.loads((tmp_path / "demo" / "report.json").read_text())
    assert saved["improve"]["rounds"] == json.loads(json.dumps(result["improve"]["rounds"]))
    assert saved["options"]["rounds"] == 2 and len(saved["phases"]) == 4
    assert Path(saved["improve"]["plot"]).stat().st_size > 1000
    text = console.export_text()
    assert "training-time loop: improve rounds" in text and "held-out after" in text
