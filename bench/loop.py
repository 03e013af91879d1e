"""Benchmark the loop machinery: framework overhead per node, and batch throughput.

1. Overhead: the same Reflection loop (generate -> critique -> refine ->
   critique -> finalize) with an instant scripted model, run through the
   LangGraph graph and as a plain Python loop doing the same calls. The
   difference per node is what the framework costs; it is also reported as a
   share of one loop on the embedded model.
2. Throughput: ``Reflection.batch`` on the embedded model at concurrency 1, 4
   and 8 (concurrent runs share decoding batches), as tasks/spec/s and as a ratio
   to concurrency 1.

    python bench/loop.py [--quick]     # writes bench/results/loop.json
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time
from datetime import UTC, datetime
from pathlib import Path

RESULTS = Path(__file__).parent / "results" / "loop.json"
TASKS = [
    "Write a tagline for a bakery in exactly 6 words.",
    "Describe the sea in at most 10 words, all lowercase.",
    "Name three fruits as 3 bullet points.",
    "Write a slogan for a bike shop in exactly 5 words.",
    "Describe a library in one sentence without commas.",
    "Write a tagline for a tea house in 4 to 8 words.",
    "Give a motto for a gym in exactly 3 words.",
    "Describe autumn in at most 12 words.",
]


def overhead(runs: int) -> dict:
    from agentic_loop.architectures import Reflection
    from agentic_loop.architectures.prompts import generate_messages, refine_messages
    from agentic_loop.judges import Rubric
    from agentic_loop.testing import ScriptedChatModel

    rubric = Rubric.for_constraints(exact_words=1)
    script = ["two words", "one"]
    arch = Reflection(ScriptedChatModel(), rubric=rubric, max_iterations=2)
    arch.build()

    def graph_loop() -> None:
        arch.llm = ScriptedChatModel(responses=list(script))  # fresh script, same graph
        result = arch.run("Say one word.")
        assert result.output == "one"

    def plain_loop() -> None:
        llm = ScriptedChatModel(responses=list(script))
        draft = llm.invoke(generate_messages("Say one word.", rubric.describe())).content
        ev = rubric.evaluate("Say one word.", draft)
        draft = llm.invoke(refine_messages("Say one word.", draft, ev.feedback)).content
        ev = rubric.evaluate("Say one word.", draft)
        assert draft == "one" and ev.score == 10.0

    for fn in (graph_loop, plain_loop):  # warm up
        fn()
    timings = {}
    for name, fn in (("graph", graph_loop), ("plain", plain_loop)):
        t0 = time.perf_counter()
        for _ in range(runs):
            fn()
        timings[name] = (time.perf_counter() - t0) / runs
    nodes = 5
    per_node_us = (timings["graph"] - timings["plain"]) / nodes * 1e6
    return {"runs": runs, "nodes_per_loop": nodes,
            "graph_loop_ms": round(timings["graph"] * 1e3, 3),
            "plain_loop_ms": round(timings["plain"] * 1e3, 3),
            "overhead_per_node_us": round(per_node_us, 1)}


def throughput(tasks: list[str]) -> dict:
    from agentic_loop.architectures import Reflection
    from agentic_loop.models import load_chat_model

    llm = load_chat_model("local", max_tokens=48)
    arch = Reflection(llm, max_iterations=2)
    arch.run(tasks[0])  # warm up
    out = {}
    for concurrency in (1, 4, 8):
        t0 = time.perf_counter()
        results = arch.batch(tasks, max_concurrency=concurrency)
        seconds = time.perf_counter() - t0
        out[str(concurrency)] = {
            "tasks_per_s": round(len(tasks) / seconds, 4), "seconds": round(seconds, 2),
            "llm_calls": sum(r.usage.llm_calls for r in results),
            "errors": sum(not r.ok for r in results)}
    single = out["1"]["tasks_per_s"]
    for value in out.values():
        value["ratio_to_concurrency_1"] = round(value["tasks_per_s"] / single, 2)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    from rich.console import Console

    console = Console()
    with console.status("framework overhead (instant model)"):
        over = overhead(50 if args.quick else 200)
    with console.status("batch throughput on the embedded model"):
        tput = throughput(TASKS[:4] if args.quick else TASKS)
    embedded_loop_s = tput["1"]["seconds"] / (4 if args.quick else len(TASKS))
    over["share_of_embedded_loop"] = round(
        over["overhead_per_node_us"] * over["nodes_per_loop"] / 1e6 / embedded_loop_s, 6)
    result = {
        "bench": "loop",
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform()},
        "quick": args.quick,
        "overhead": over,
        "batch_throughput": tput,
        "notes": "Reflection, default task rubric (stated constraints as checks + 2 judged "
                 "features), max_iterations=2, 48 max tokens per draft.",
    }
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(result, indent=2) + "\n")
    console.print_json(data=result)
    console.print(f"wrote {RESULTS}")


if __name__ == "__main__":
    main()
