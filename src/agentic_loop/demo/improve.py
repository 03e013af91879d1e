"""The demo's training-time loop: improve rounds on the train tasks, gated on the held-out ones.

Why a module of its own: the demo used to distill once from the logged runs;
the training-time loop is now :func:`~agentic_loop.distill.loop.improve.improve`
(grow, hint retry, train, gate, register, promote, round after round), so the
demo runs a few rounds of it. This module holds the demo's settings (the
library's default gate, answers batched), a progress display for the stages,
the per-round table, and the plain numbers that go into the demo's
``report.json``.

Example (a round's report, as ``improve`` writes it, into the demo's numbers):
    >>> r = {"round": 1, "model": "local", "from_version": "v1", "threshold": 7.0,
    ...      "pool": {"n": 4, "passed": 1, "pass_rate": 0.25, "interval": [0.05, 0.7]},
    ...      "hint": {"retried": 2, "accepted": 1},
    ...      "data": {"sft_rows": 2, "pairs": 0}, "train": {"steps": 3, "loss": 1.5},
    ...      "golden": {"tasks": 2, "baseline": {"n": 2, "passed": 0, "pass_rate": 0.0,
    ...                 "interval": [0.0, 0.66]}, "candidate": {"n": 2, "passed": 1,
    ...                 "pass_rate": 0.5, "interval": [0.09, 0.91]}},
    ...      "decision": "MANUAL_REVIEW", "register": {"version": "v2", "promoted": False},
    ...      "seconds": {"grow": 10.0, "train": 5.0}}
    >>> row = round_row(r)
    >>> row["golden_after"]["pass_rate"], row["sft_rows"], row["version"], row["seconds"]
    (0.5, 2, 'v2', 15.0)
    >>> fmt_rate(row["pool"])
    '25% [5-70%]'
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.markup import escape

from agentic_loop.tables import Col, FitTable, percent
from agentic_loop.tasks.spec import TaskSpec

if TYPE_CHECKING:
    from agentic_loop.demo.options import DemoOptions
    from agentic_loop.distill.loop.records import ImproveResult, ImproveRound

__all__ = ["StageProgress", "fmt_rate", "improve_summary", "round_row", "rounds_table",
           "run_rounds"]


#: What each stage counts, in the demo's words (``improve`` names the model by its long spec).
_STAGES = {"grow": "sampling train tasks", "hint": "hinted retries of train tasks",
           "gate": "gate: held-out tasks, both models"}
_DEMO_WORDS = re.compile(r"grow \(.*\)|hint retry|gate vs \S+")


class StageProgress:
    """``improve``'s progress protocol on one rich bar per stage (the last one is closed)."""

    def __init__(self, bar: Any) -> None:
        self.bar = bar
        self.current: Any = None

    def finish(self) -> None:
        """Mark the running stage done (the loop ended)."""
        if self.current is not None:
            done = self.bar.tasks[-1]
            size = done.total or done.completed or 1
            self.bar.update(self.current, total=size, completed=size)

    def start(self, stage: str, total: int | None = None) -> None:
        """A stage begins (``total`` steps when known)."""
        self.finish()
        stage = _DEMO_WORDS.sub(lambda m: _STAGES[m.group(0).split(" ", 1)[0]], stage)
        if len(stage) > 44:
            stage = stage[:43] + "…"
        self.current = self.bar.add_task(escape(stage), total=total)

    def advance(self, n: int = 1) -> None:
        """The stage made ``n`` steps."""
        if self.current is not None:
            self.bar.advance(self.current, n)


def run_rounds(opts: DemoOptions, pool: Sequence[TaskSpec], golden: Sequence[TaskSpec],
               registry: Any, work: Path, embedder: Any, console: Console, *,
               backend: Any = None) -> ImproveResult:
    """``opts.rounds`` improve rounds of ``pool``, gated on ``golden``, into ``work``.

    The gate is the library's default one (``opts.gate_options`` may override
    its rules); only its speed is the demo's: answers run ``opts.concurrency``
    at a time, so the local engine batches them.
    """
    from agentic_loop.distill.loop.improve import ImproveSettings, improve
    from agentic_loop.progress import progress_bar

    settings = ImproveSettings(
        rounds=opts.rounds, samples=opts.samples, max_tokens=opts.max_tokens,
        temperatures=tuple(opts.temperatures), thresholds=tuple(opts.thresholds),
        base=opts.model, max_concurrency=opts.concurrency,
        train_options={"max_steps": opts.train_steps, "lora": opts.lora, "max_length": 256,
                       "progress": False},
        export_options={"pii": opts.pii, "embedder": embedder},
        eval_options={"embedder": embedder, "max_concurrency": opts.concurrency,
                      **dict(opts.gate_options)})
    with progress_bar(console=console) as bar:
        display = StageProgress(bar)
        try:
            return improve(list(pool), golden=list(golden), registry=registry, work_dir=work,
                           settings=settings, backend=backend, progress=display)
        finally:
            display.finish()


def fmt_rate(stats: Mapping[str, Any] | None) -> str:
    """A pass rate with its 95% interval, in percent (``-`` when there is none)."""
    if not stats or stats.get("pass_rate") is None:
        return "-"
    return percent(stats["pass_rate"], stats["interval"])


def _rate(stats: Mapping[str, Any] | None) -> dict[str, Any] | None:
    if not stats:
        return None
    return {k: stats.get(k) for k in ("n", "passed", "pass_rate", "interval")}


def round_row(report: ImproveRound | Mapping[str, Any]) -> dict[str, Any]:
    """One round of ``improve`` as the demo reports it: rates, data counts, decision, version.

    ``report`` is a :class:`~agentic_loop.distill.loop.records.ImproveRound` or its
    JSON (a ``report.json`` as read); the row is the demo's ``report.json`` entry.
    """
    if not isinstance(report, Mapping):
        report = report.model_dump(mode="json")
    golden = report.get("golden") or {}
    data = report.get("data") or {}
    register = report.get("register") or {}
    train = report.get("train") or {}
    return {
        "round": report["round"], "from": report.get("from_version") or report.get("model"),
        "threshold": report.get("threshold"), "pool": _rate(report.get("pool")),
        "hinted": (report.get("hint") or {}).get("accepted", 0),
        "sft_rows": data.get("sft_rows", 0), "pairs": data.get("pairs", 0),
        "train_steps": train.get("steps"), "train_loss": train.get("loss"),
        "golden_before": _rate(golden.get("baseline")),
        "golden_after": _rate(golden.get("candidate")),
        "decision": report.get("decision"), "reasons": list(report.get("reasons") or []),
        "version": register.get("version"), "promoted": bool(register.get("promoted")),
        "ended": report.get("ended"),
        "seconds": round(sum((report.get("seconds") or {}).values()), 1),
    }


def rounds_table(rows: Sequence[Mapping[str, Any]]) -> FitTable:
    """What each round trained on, at any width (the held-out verdict is its own table)."""
    table = FitTable("improve rounds: what each round sampled and trained on", [
        Col("round", justify="right", short="#"), Col("bar", justify="right"),
        Col("train pool pass [95% CI]", justify="right", short="pool"),
        Col("hinted", justify="right", short="hint", drop=2),
        Col("SFT rows", justify="right", short="SFT"),
        Col("pairs", justify="right", drop=3), Col("steps", justify="right"),
        Col("gate", wrap=True), Col("s", justify="right", drop=1)],
        caption="bar: the score (0-10) a sample needs to train; pool: best-of-n samples of "
                "the model the round started from", title_justify="left")
    for r in rows:
        table.add_row(str(r["round"]),
                      f"{r['threshold']:g}" if r["threshold"] is not None else "-",
                      fmt_rate(r["pool"]), str(r["hinted"]), str(r["sft_rows"]),
                      str(r["pairs"]),
                      str(r["train_steps"] if r["train_steps"] is not None else "-"),
                      escape(r["decision"] or r["ended"] or "-")
                      + (f" {r['version']} *" if r["promoted"] else ""),
                      f"{r['seconds']:.0f}")
    return table


def improve_summary(result: ImproveResult) -> dict[str, Any]:
    """What ``report.json`` keeps of the improve run: the rounds, why it stopped, the curve."""
    return {"rounds": [round_row(r) for r in result.reports], "stopped": result.stopped,
            "reason": result.reason, "current": result.current,
            "work_dir": str(result.work_dir), "plot": str(result.plot) if result.plot else None}
