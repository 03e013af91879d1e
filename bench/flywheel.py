"""Flywheel benchmark: do improve rounds beat one SFT round given the same training steps?

``agentic_loop.distill.loop.improve`` runs the training-time loop in
rounds: the current model samples a task pool, what passes each task's
checks (and hinted retries) becomes SFT data, a LoRA is trained, and a gate
compares it with the current model on a golden set; the next round starts
from whatever the gate kept, with a higher score bar. This bench asks what
the rounds buy over the plain alternative:

* **improve**: ``rounds`` rounds (three) of the loop on the dev pool, each
  training ``steps`` LoRA steps; the golden pass rate of every round's
  candidate, with Wilson 95% intervals (round 0: the base model);
* **plain SFT**: one LoRA SFT run from the base model on the first round's
  data (what a single distill round over one sampling pass of the pool
  would train on) for the *same total number of steps* as all the rounds
  together, gated against the base on the same golden set.

The pool is train-split tasks of ``agentic_loop.tasks.sets`` (IFEval-style
families, train phrasing, plus constrained instructions); the golden set is
held-out tasks of the same families (the other phrasing, and the other part
of the constrained split), so no golden task is ever trained on. A task
passes when every check of its locked rubric holds on the greedy output;
the gate may decide on the golden set's size, and rolls back only on a
halving of the mean score, so noise does not end the three rounds early.
Curation and the gate's diversity check use the hashing embedder (no
embedding model to load). Ratios are of golden pass rates measured in the
same run: ``final`` is the last round's candidate, ``best`` the best round's,
``kept`` what serves after the run (the last promoted candidate, else the
base), each over plain SFT or the base. Nothing here asserts on time.

    python bench/flywheel.py --quick   # 12 pool / 12 golden tasks, 4 steps a round: 11 min
    python bench/flywheel.py           # 20 pool / 20 golden tasks, 8 steps a round: ~20 min
(2 shared CPU cores; the quick time is measured, the full one estimated from it.)
Both write bench/results/flywheel.json and flywheel.png (the quick run marks ``mode``).

**Methods resting on judges** (:mod:`agentic_loop.distill.loop.methods`):
``--methods self-rewarding,spin,ttrl,constitutional`` runs each named
method as its own improve run, same rounds, steps a round and pool as the
improve arm, and gives each a row against plain SFT at the same budget
(``methods`` in the JSON: per-round golden pass rates, the final one over
plain SFT, which judge made the data and what the agreement alarm said).
``--arithmetic N`` adds N arithmetic word problems (an exact answer: the
reference SPIN needs, the short answer TTRL votes on) to the pool and as
many to the golden set, for every arm. ``--judge SPEC`` is the judge of
self-rewarding and constitutional (default: the model judges itself).

    python bench/flywheel.py --quick --arithmetic 6 \\
        --methods self-rewarding,spin,ttrl,constitutional
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import tempfile
import time
from dataclasses import asdict, dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from quality import machine  # bench/ is on the path when a bench script runs
from rich.console import Console

from agentic_loop.atomic import atomic_write_bytes
from agentic_loop.errors import short_error
from agentic_loop.tasks.spec import TaskSpec

RESULTS = Path(__file__).parent / "results" / "flywheel.json"


@dataclass(frozen=True)
class Options:
    """The bench's size; ``quick()`` is the smaller version."""

    pool_ifeval: int = 10
    pool_constrained: int = 10
    golden_ifeval: int = 10
    golden_constrained: int = 10
    rounds: int = 3
    samples: int = 2
    steps: int = 8
    max_tokens: int = 48
    thresholds: tuple[float, ...] = (7.0, 8.0, 8.0)
    batch_size: int = 4
    seed: int = 0
    arithmetic: int = 0

    @classmethod
    def quick(cls) -> Options:
        return cls(pool_ifeval=6, pool_constrained=6, golden_ifeval=6, golden_constrained=6,
                   steps=4)


def dev_tasks(o: Options) -> tuple[list[TaskSpec], list[TaskSpec]]:
    """``(pool, golden)``: train-split tasks to sample, held-out ones to gate on."""
    from agentic_loop.tasks.sets import constrained_tasks, ifeval_tasks, split_tasks

    n = o.pool_constrained + o.golden_constrained
    c_train, c_held = split_tasks(constrained_tasks(n, seed=o.seed),
                                  held_out=o.golden_constrained / n, seed=o.seed)
    pool = ifeval_tasks(o.pool_ifeval, seed=o.seed, split="train") + c_train
    golden = ifeval_tasks(o.golden_ifeval, seed=o.seed, split="held_out") + c_held
    if o.arithmetic:  # exact answers: SPIN's references, TTRL's short answers
        from agentic_loop.tasks.sets import arithmetic_tasks

        m_train, m_held = split_tasks(arithmetic_tasks(2 * o.arithmetic, seed=o.seed),
                                      held_out=0.5, seed=o.seed)
        pool, golden = pool + m_train, golden + m_held
    return pool, golden


def train_kwargs(o: Options, steps: int) -> dict[str, Any]:
    """What both arms train with: LoRA (merged), the same batch and sequence length."""
    return {"lora": True, "max_steps": steps, "batch_size": o.batch_size, "max_length": 256,
            "progress": False}


def eval_kwargs(o: Options, golden: list[TaskSpec], embedder: Any) -> dict[str, Any]:
    return {"min_tasks": len(golden), "rollback_ratio": 0.5, "embedder": embedder}


def run_improve(o: Options, pool: list[TaskSpec], golden: list[TaskSpec], work: Path,
                console: Console, method: str = "sft", judge: str | None = None) -> Any:
    from agentic_loop.demo.improve import StageProgress
    from agentic_loop.distill.loop.improve import ImproveSettings, improve
    from agentic_loop.memory import HashingEmbedder
    from agentic_loop.progress import progress_bar

    embedder = HashingEmbedder()
    settings = ImproveSettings(
        rounds=o.rounds, samples=o.samples, max_tokens=o.max_tokens, thresholds=o.thresholds,
        patience=o.rounds + 1, max_concurrency=4, train_options=train_kwargs(o, o.steps),
        method=method, judge=judge if method in ("self-rewarding", "constitutional") else None,
        export_options={"pii": "regex", "embedder": embedder},
        eval_options=eval_kwargs(o, golden, embedder))
    with progress_bar(console=console) as bar:
        display = StageProgress(bar)
        try:
            return improve(pool, golden=golden, registry=work / "registry",
                           work_dir=work / "improve", settings=settings, progress=display)
        finally:
            display.finish()


def run_sft(o: Options, golden: list[TaskSpec], data: Path, steps: int, work: Path,
            console: Console) -> dict[str, Any]:
    """One SFT run of ``steps`` on the first round's data, gated against the base."""
    from agentic_loop.distill.eval.evaluate import evaluate_models
    from agentic_loop.distill.loop.report import golden_stats
    from agentic_loop.distill.train import train
    from agentic_loop.memory import HashingEmbedder

    t0 = time.perf_counter()
    with console.status(f"plain SFT: {steps} steps on {data}"):
        trained = train(data, work / "sft" / "model", method="sft", base="local",
                        **train_kwargs(o, steps))
    train_s = time.perf_counter() - t0
    with console.status("plain SFT: gate against the base on the golden set"):
        report = evaluate_models("local", trained.spec, golden, max_tokens=o.max_tokens,
                                 progress=False, **eval_kwargs(o, golden, HashingEmbedder()))
    stats = golden_stats(report, golden).model_dump(mode="json")
    return {"steps": sum(s.steps for s in trained.stages),
            "loss": trained.card.metrics.get("final_train_loss"),
            "golden": stats, "decision": report.decision.value, "reasons": report.reasons,
            "train_s": round(train_s, 1), "seconds": round(time.perf_counter() - t0, 1)}


def ratio(a: float | None, b: float | None) -> float | None:
    return round(a / b, 3) if a is not None and b else None


def summarize(result: Any, sft: dict[str, Any]) -> dict[str, Any]:
    """Per-round golden pass rates and the ratios people read."""
    from agentic_loop.demo.improve import round_row

    rows = [round_row(r) for r in result.reports]
    rates = [(r["golden_after"] or {}).get("pass_rate") for r in rows]
    base = (rows[0]["golden_before"] or {}).get("pass_rate") if rows else None
    final = rates[-1] if rates else None
    best = max((r for r in rates if r is not None), default=None)
    plain = sft["golden"]["candidate"]["pass_rate"]
    # what serves after the run: the last promoted candidate, else the base
    kept = next(((r["golden_after"] or {}).get("pass_rate") for r in reversed(rows)
                 if r["promoted"]), base)
    return {"rounds": rows, "base_pass_rate": base, "final_pass_rate": final,
            "best_pass_rate": best, "kept_pass_rate": kept, "sft_pass_rate": plain,
            "ratios": {"final_over_sft": ratio(final, plain), "best_over_sft": ratio(best, plain),
                       "kept_over_sft": ratio(kept, plain), "final_over_base": ratio(final, base),
                       "sft_over_base": ratio(plain, base)},
            "steps": {"improve": sum(r["train_steps"] or 0 for r in rows),
                      "sft": sft["steps"]},
            "stopped": result.stopped, "reason": result.reason}


def method_row(method: str, result: Any, sft: dict[str, Any]) -> dict[str, Any]:
    """One judged method's run against plain SFT: its rounds, final rate, judge and alarm."""
    from agentic_loop.demo.improve import round_row

    rows = [round_row(r) for r in result.reports]
    rates = [(r["golden_after"] or {}).get("pass_rate") for r in rows]
    final = rates[-1] if rates else None
    plain = sft["golden"]["candidate"]["pass_rate"]
    judged = []
    for r in result.reports:  # the data stage's record: which judge and method, the alarm
        state = json.loads((result.work_dir / f"round-{r.round:03d}" / "state.json")
                            .read_text())
        data = (state["stages"].get("data") or {}).get("result") or {}
        judged.append(data.get("judged"))
    return {"method": method, "rounds": rows, "final_pass_rate": final,
            "best_pass_rate": max((r for r in rates if r is not None), default=None),
            "final_over_sft": ratio(final, plain),
            "steps": sum(r["train_steps"] or 0 for r in rows), "judged": judged,
            "stopped": result.stopped, "reason": result.reason}


def plot(summary: dict[str, Any], sft: dict[str, Any], path: Path) -> None:
    from agentic_loop.plots import plot_rates

    def point(x: float, stats: dict[str, Any] | None) -> list[tuple[float, float, float, float]]:
        if not stats or stats.get("pass_rate") is None:
            return []
        low, high = stats["interval"]
        return [(x, stats["pass_rate"], low, high)]

    rows = summary["rounds"]
    curve = point(0, rows[0]["golden_before"]) if rows else []
    for r in rows:
        curve += point(r["round"], r["golden_after"])
    last = rows[-1]["round"] if rows else 1
    plain = point(0, sft["golden"]["baseline"]) + point(last + 0.1, sft["golden"]["candidate"])
    methods = {}
    for m in summary.get("methods", []):  # each judged method from the same base
        points = point(0, rows[0]["golden_before"]) if rows else []
        for r in m["rounds"]:
            points += point(r["round"] + 0.05 * (len(methods) + 1), r["golden_after"])
        methods[f"{m['method']} rounds"] = points
    plot_rates({"improve rounds (golden; round 0: base)": curve,
                f"plain SFT, {sft['steps']} steps (same total)": plain, **methods}, path,
               title="flywheel: golden pass rate per round (95% Wilson intervals)")


def print_results(summary: dict[str, Any], sft: dict[str, Any], console: Console) -> None:
    from rich.table import Table

    from agentic_loop.demo.improve import fmt_rate, rounds_table

    console.print(rounds_table(summary["rounds"]))
    table = Table(title="golden pass rate: improve rounds vs plain SFT (same steps)",
                  title_justify="left")
    for column in ("model", "steps", "golden pass [95% CI]", "gate (vs its start)"):
        table.add_column(column, justify="left" if column == "model" else "right")
    rows = summary["rounds"]
    if rows:
        table.add_row("base", "0", fmt_rate(rows[0]["golden_before"]), "-")
    for r in rows:
        table.add_row(f"improve round {r['round']} (from {r['from']})", str(r["train_steps"]),
                      fmt_rate(r["golden_after"]), str(r["decision"]))
    table.add_row("plain SFT on round 1's data", str(sft["steps"]),
                  fmt_rate(sft["golden"]["candidate"]), sft["decision"])
    for m in summary.get("methods", []):
        last = m["rounds"][-1] if m["rounds"] else None
        table.add_row(f"{m['method']} ({len(m['rounds'])} rounds)", str(m["steps"]),
                      fmt_rate(last["golden_after"]) if last else "-",
                      str(last["decision"]) if last else m["stopped"])
    console.print(table)
    console.print("ratios (golden pass rate): " + ", ".join(
        f"{k.replace('_over_', ' / ')} {v if v is not None else '-'}"
        for k, v in summary["ratios"].items()))


def parse_methods(text: str) -> list[str]:
    """``"spin,ttrl"`` as method names, each checked against the improve methods.

    >>> parse_methods("spin, ttrl")
    ['spin', 'ttrl']
    """
    from agentic_loop.distill.loop.settings import LOOP_METHODS

    names = [m.strip() for m in text.split(",") if m.strip()]
    unknown = [m for m in names if m not in LOOP_METHODS]
    if unknown:
        raise SystemExit(f"--methods: unknown method(s) {unknown}; pick from "
                         f"{', '.join(LOOP_METHODS)}")
    return names


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="the smaller version")
    parser.add_argument("--out", type=Path, default=RESULTS, help="results JSON")
    parser.add_argument("--keep", type=Path, default=None,
                        help="keep the work folder (models, rounds) here instead of a temp dir")
    parser.add_argument("--methods", default="",
                        help="improve methods resting on judges, each a row against plain "
                             "SFT: self-rewarding,spin,ttrl,constitutional")
    parser.add_argument("--arithmetic", type=int, default=0,
                        help="arithmetic tasks added to pool and golden (SPIN, TTRL need them)")
    parser.add_argument("--rounds", type=int, default=0,
                        help="rounds of every improve arm (default 3; thresholds keep their "
                             "last value)")
    parser.add_argument("--judge", default=None,
                        help="judge model spec of self-rewarding and constitutional")
    args = parser.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    methods = parse_methods(args.methods)
    o = Options.quick() if args.quick else Options()
    if args.arithmetic:
        o = replace(o, arithmetic=args.arithmetic)
    if args.rounds < 0:
        raise SystemExit(f"--rounds {args.rounds}: give at least 1 (0: the default, 3)")
    if args.rounds:
        last = o.thresholds[-1]
        o = replace(o, rounds=args.rounds,
                    thresholds=(o.thresholds + (last,) * args.rounds)[:args.rounds])
    console = Console()
    started = time.perf_counter()
    at_start = machine()
    work = args.keep or Path(tempfile.mkdtemp(prefix="flywheel-"))
    try:
        pool, golden = dev_tasks(o)
        console.print(f"flywheel bench ({'quick' if args.quick else 'full'}): {len(pool)} pool "
                      f"tasks, {len(golden)} golden tasks, {o.rounds} rounds of {o.steps} steps")
        t0 = time.perf_counter()
        result = run_improve(o, pool, golden, work, console)
        improve_s = time.perf_counter() - t0
        first_data = result.work_dir / "round-001" / "data"
        if not (first_data / "sft.jsonl").is_file():
            raise SystemExit(f"round 1 exported no SFT data ({result.reason}); nothing for the "
                             "plain SFT arm to train on: lower Options.thresholds")
        steps = sum(r.train.steps if r.train else 0 for r in result.reports)
        sft = run_sft(o, golden, first_data, max(1, steps), work, console)
        summary = summarize(result, sft)
        summary["methods"] = []

        def save(partial: bool) -> dict[str, Any]:
            """The report so far: a run cut after any arm keeps the arms it measured."""
            report = {
                "bench": "flywheel", "date": datetime.now(UTC).isoformat(timespec="seconds"),
                "mode": "quick" if args.quick else "full", "partial": partial,
                "machine": {**machine(), "load_avg_1m_at_start": at_start["load_avg_1m"]},
                "options": asdict(o), "dev_set": {"pool": len(pool), "golden": len(golden)},
                **summary, "sft": sft, "improve_s": round(improve_s, 1),
                "seconds": round(time.perf_counter() - started, 1)}
            args.out.parent.mkdir(parents=True, exist_ok=True)
            atomic_write_bytes(args.out, (json.dumps(report, indent=2, default=str) + "\n")
                               .encode())  # a run killed mid-write keeps the last report
            return report

        save(partial=bool(methods))
        for method in methods:  # each: its own run, same rounds and steps, its own registry
            console.print(f"method {method}: {o.rounds} rounds of {o.steps} steps")
            t1 = time.perf_counter()
            try:
                run = run_improve(o, pool, golden, work / method, console, method, args.judge)
                row = method_row(method, run, sft)
            except Exception as exc:  # a method that fails is a row with its error, not a lost run
                row = {"method": method, "rounds": [], "error": short_error(exc),
                       "final_pass_rate": None, "steps": 0, "stopped": "error"}
            row["seconds"] = round(time.perf_counter() - t1, 1)
            summary["methods"].append(row)
            save(partial=method != methods[-1])
        report = save(partial=False)
        plot(summary, sft, args.out.with_suffix(".png"))
        print_results(summary, sft, console)
        console.print(f"wrote {args.out} and {args.out.with_suffix('.png')} in "
                      f"{report['seconds']:.0f}s")
    finally:
        if args.keep is None:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
