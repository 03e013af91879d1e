"""Benchmark agents on the embedded model: prefix reuse on scripted episodes, and tool tasks.

(a) Engine (``--part engine``): the same scripted 5-step episodes go through the
embedded model as a tool agent sees them (``bind_tools``: the system prompt with
the tool descriptions, the question, then four times the model's turn, a
scripted tool call and its result, then the final turn), once with the engine's
prefix reuse on and once off (``load_chat_model("local", prefix_cache=False)``:
an engine of its own that computes every prompt token). The conversation is
scripted, not the model's, so both sides get exactly the same prompts; the
replies are greedy and compared. Episodes run one after another (each step a
lone request) and all at once (concurrent episodes share their system prompt
and tools). Reported: prompt tokens sent and computed, LLM-seconds (the
engine's busy time; ``prefill_s`` is its prefill part), episodes per
LLM-second and the ratio on / off, measured in this run, passes alternating
so both see the same machine load; and the process's CPU-seconds per pass
with the same ratio (CPU time, unlike busy time, does not grow when other
processes share the cores). The memory is cleared before each pass. Nothing
here asserts on time.

(b) Tasks (``--part tasks``): see :mod:`agents_tasks`.

(c) Serving (``--part serve``): the same episodes through ``agentic-loop serve``
(vLLM with prefix caching) when the vLLM venv exists, else recorded as skipped.

    python bench/agents.py --part engine          # writes bench/results/agents.json + .png
    python bench/agents.py --part tasks --tasks 200 --deadline-utc 07:45
    python bench/agents.py --quick --out /tmp/agents.json   # a smoke run of every part
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.tools import tool

RESULTS = Path(__file__).parent / "results" / "agents.json"
VLLM_PYTHON = Path(__file__).resolve().parents[1] / ".venv-vllm" / "bin" / "python"
SYSTEM = ("You are the order assistant of a hardware store. Use the tools for every price, "
          "every unit conversion and every sum: never compute in your head. Answer with the "
          "final amount in dollars and one short sentence.")
ITEMS = [("hex bolts", 4.35, 1.2), ("wood screws", 2.9, 0.8), ("wall plugs", 1.75, 0.5),
         ("hinges", 6.4, 2.1), ("cable ties", 3.2, 0.4), ("washers", 1.15, 0.9),
         ("nails", 2.45, 1.6), ("brackets", 5.8, 2.6), ("rivets", 3.65, 1.1),
         ("anchors", 4.95, 1.4), ("clamps", 7.25, 3.2), ("staples", 1.95, 0.7)]


@tool
def lookup_price(item: str) -> str:
    """Price in dollars of one box of an item, and its weight in pounds."""
    return "unknown item"


@tool
def calculator(expression: str) -> str:
    """Evaluate an arithmetic expression such as 12*4.35 + 7."""
    return "0"


@tool
def convert_units(value: float, from_unit: str, to_unit: str) -> str:
    """Convert a value between units such as lb and kg."""
    return "0"


TOOLS = [lookup_price, calculator, convert_units]


def episode_script(i: int) -> tuple[str, list[tuple[str, dict[str, Any], str]]]:
    """Episode ``i``'s question and its four scripted tool calls with their results."""
    item, price, pounds = ITEMS[i % len(ITEMS)]
    boxes = 7 + 5 * i
    cost = round(boxes * price, 2)
    kilos = round(boxes * pounds * 0.4536, 2)
    total = round(cost + 0.9 * kilos, 2)
    question = (f"A customer orders {boxes} boxes of {item}, shipped at 0.90 dollars per "
                "kilogram. What is the total to pay?")
    calls = [("lookup_price", {"item": item}, f"{item}: {price} dollars a box, {pounds} lb a box"),
             ("calculator", {"expression": f"{boxes}*{price}"}, f"{cost}"),
             ("convert_units", {"value": round(boxes * pounds, 2), "from_unit": "lb",
                                "to_unit": "kg"}, f"{kilos} kg"),
             ("calculator", {"expression": f"{cost} + 0.9*{kilos}"}, f"{total}")]
    return question, calls


def run_episode(bound: Any, i: int) -> list[dict[str, Any]]:
    """One scripted episode: five model turns, each sent the whole conversation so far."""
    question, calls = episode_script(i)
    messages: list[BaseMessage] = [SystemMessage(SYSTEM), HumanMessage(question)]
    replies = []
    for step in range(len(calls) + 1):
        reply = bound.invoke(messages)
        usage = reply.usage_metadata or {}
        replies.append({"prompt_tokens": usage.get("input_tokens", 0),
                        "completion_tokens": usage.get("output_tokens", 0),
                        "reply": reply.content or json.dumps(
                            [[c["name"], c["args"]] for c in reply.tool_calls])})
        if step == len(calls):
            break
        name, args, result = calls[step]
        call_id = f"call_{i}_{step}"
        messages += [AIMessage(content="", tool_calls=[{"name": name, "args": args,
                                                        "id": call_id}]),
                     ToolMessage(content=result, tool_call_id=call_id, name=name)]
    return replies


def one_pass(llm: Any, episodes: int, concurrent: bool) -> dict[str, Any]:
    """All episodes once, on a cleared prefix memory; the engine's counters over the pass."""
    engine = llm.engine
    engine.prefix_memory.clear()
    bound = llm.bind_tools(TOOLS)
    before, busy, prefill = dict(engine.stats), engine.busy_s, engine.prefill_s
    started, cpu = time.perf_counter(), time.process_time()
    if concurrent:
        with ThreadPoolExecutor(max_workers=episodes) as pool:
            replies = list(pool.map(lambda i: run_episode(bound, i), range(episodes)))
    else:
        replies = [run_episode(bound, i) for i in range(episodes)]
    wall, cpu_s = time.perf_counter() - started, time.process_time() - cpu
    llm_s = engine.busy_s - busy
    delta = {k: engine.stats[k] - before[k] for k in
             ("prompt_tokens_sent", "prompt_tokens_computed", "reused_prefix_tokens")}
    return {"wall_s": round(wall, 2), "llm_s": round(llm_s, 2),
            "prefill_s": round(engine.prefill_s - prefill, 2), "cpu_s": round(cpu_s, 2),
            "episodes_per_cpu_s": round(episodes / cpu_s, 4),
            "episodes_per_llm_s": round(episodes / llm_s, 4),
            "episodes_per_wall_s": round(episodes / wall, 4),
            **delta, "completion_tokens": sum(r["completion_tokens"] for e in replies for r in e),
            "replies": [[r["reply"] for r in e] for e in replies]}


def median_pass(passes: list[dict[str, Any]]) -> dict[str, Any]:
    ranked = sorted(passes, key=lambda p: p["episodes_per_llm_s"])
    chosen = dict(ranked[len(ranked) // 2])
    chosen["episodes_per_llm_s_each_pass"] = [p["episodes_per_llm_s"] for p in passes]
    return chosen


def engine_part(episodes: int, repeats: int, max_tokens: int) -> dict[str, Any]:
    from agentic_loop.models import load_chat_model

    settings = {"temperature": 0.0, "max_tokens": max_tokens}
    models = {"off": load_chat_model("local", prefix_cache=False, **settings),
              "on": load_chat_model("local", **settings)}
    for llm in models.values():
        llm.bind_tools(TOOLS).invoke([HumanMessage("warm up")], max_tokens=2)
    out: dict[str, Any] = {}
    for mode, concurrent in (("sequential", False), ("concurrent", True)):
        passes: dict[str, list[dict[str, Any]]] = {"off": [], "on": []}
        for rep in range(repeats):
            for reuse in (("off", "on") if rep % 2 == 0 else ("on", "off")):
                print(f"  {mode} pass {rep + 1}/{repeats}, reuse {reuse}...", flush=True)
                passes[reuse].append(one_pass(models[reuse], episodes, concurrent))
        off, on = median_pass(passes["off"]), median_pass(passes["on"])
        same = sum(a == b for x, y in zip(off["replies"], on["replies"], strict=True)
                   for a, b in zip(x, y, strict=True))
        total = sum(len(x) for x in off["replies"])
        out[mode] = {
            "episodes": episodes, "off": _public(off), "on": _public(on),
            "ratio_episodes_per_llm_s": round(on["episodes_per_llm_s"] / off["episodes_per_llm_s"],
                                              3),
            "ratio_episodes_per_cpu_s": round(on["episodes_per_cpu_s"] / off["episodes_per_cpu_s"],
                                              3),
            "ratio_prefill_s_off_over_on": round(off["prefill_s"] / on["prefill_s"], 3),
            "ratio_episodes_per_wall_s": round(
                on["episodes_per_wall_s"] / off["episodes_per_wall_s"], 3),
            "computed_over_sent_on": round(on["prompt_tokens_computed"]
                                           / on["prompt_tokens_sent"], 4),
            "identical_replies": f"{same}/{total}",
            "example_replies_on": on["replies"][0]}
    return out


def _public(p: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in p.items() if k != "replies"}


def serve_part(episodes: int, max_tokens: int) -> dict[str, Any]:
    """The same episodes through ``agentic-loop serve`` (vLLM, prefix caching), if present."""
    if not VLLM_PYTHON.is_file():
        return {"skipped": "no vLLM venv (.venv-vllm/bin/python is missing: `make vllm`)"}
    from agentic_loop.distill.release.serve import serve

    settings = {"temperature": 0.0, "max_tokens": max_tokens}
    with serve("local", name="smollm2", python=VLLM_PYTHON, timeout=600) as server:
        llm = server.chat_model(**settings)
        bound = llm.bind_tools(TOOLS)
        out = {}
        for mode, concurrent in (("sequential", False), ("concurrent", True)):
            started = time.perf_counter()
            if concurrent:
                with ThreadPoolExecutor(max_workers=episodes) as pool:
                    list(pool.map(lambda i: run_episode(bound, i), range(episodes)))
            else:
                for i in range(episodes):
                    run_episode(bound, i)
            wall = time.perf_counter() - started
            out[mode] = {"wall_s": round(wall, 2),
                         "episodes_per_wall_s": round(episodes / wall, 4)}
    return out


def machine() -> dict[str, Any]:
    from agentic_loop.models.local import default_num_threads

    return {"cpus": os.cpu_count(), "platform": platform.platform(),
            "python": platform.python_version(), "torch_threads": default_num_threads(),
            "load_avg_1m": round(os.getloadavg()[0], 2)}


def plot(report: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    engine = report["engine"]
    modes = [m for m in ("sequential", "concurrent") if m in engine]
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4))
    width = 0.2
    for k, (reuse, field, label) in enumerate([
            ("off", "prompt_tokens_sent", "sent"), ("off", "prompt_tokens_computed",
                                                    "computed, reuse off"),
            ("on", "prompt_tokens_computed", "computed, reuse on")]):
        left.bar([i + (k - 1) * width for i in range(len(modes))],
                 [engine[m][reuse][field] for m in modes], width, label=label)
    left.set_xticks(range(len(modes)), modes)
    left.set_ylabel("prompt tokens")
    left.set_title(f"{engine[modes[0]]['episodes']} scripted 5-step episodes")
    left.legend()
    for k, reuse in enumerate(("off", "on")):
        right.bar([i + (k - 0.5) * width for i in range(len(modes))],
                  [engine[m][reuse]["episodes_per_llm_s"] for m in modes], width,
                  label=f"reuse {reuse}")
    for i, m in enumerate(modes):
        right.annotate(f"{engine[m]['ratio_episodes_per_llm_s']}x", (i + width / 2, engine[m]["on"][
            "episodes_per_llm_s"]), ha="center", va="bottom")
    right.set_xticks(range(len(modes)), modes)
    right.set_ylabel("episodes per LLM-second")
    right.set_title("embedded SmolLM2-135M, CPU")
    right.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def table(rows: Sequence[Sequence[Any]]) -> str:
    widths = [max(len(str(r[i])) for r in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(str(c).ljust(w) for c, w in zip(r, widths, strict=True))
                     for r in rows)


def print_engine(engine: dict[str, Any]) -> None:
    rows: list[list[Any]] = [["mode", "reuse", "sent", "computed", "prefill-s", "LLM-s",
                              "episodes/LLM-s", "ratio", "CPU-s", "ratio (CPU)"]]
    for mode, part in engine.items():
        for reuse in ("off", "on"):
            p = part[reuse]
            rows.append([mode, reuse, p["prompt_tokens_sent"], p["prompt_tokens_computed"],
                         p["prefill_s"], p["llm_s"], p["episodes_per_llm_s"],
                         part["ratio_episodes_per_llm_s"] if reuse == "on" else "", p["cpu_s"],
                         part["ratio_episodes_per_cpu_s"] if reuse == "on" else ""])
    print(table(rows))


def update(path: Path, fields: dict[str, Any]) -> dict[str, Any]:
    """Merge ``fields`` into the report at ``path`` (parts run separately keep each other)."""
    report = json.loads(path.read_text()) if path.is_file() else {}
    report.update(fields)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(report, indent=2) + "\n")
    return report


def deadline_of(hhmm: str | None) -> float | None:
    """Today's ``HH:MM`` UTC as a Unix time (None: no deadline)."""
    if hhmm is None:
        return None
    hour, minute = (int(x) for x in hhmm.split(":"))
    return datetime.now(UTC).replace(hour=hour, minute=minute, second=0).timestamp()


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--part", choices=["engine", "tasks", "serve", "all"], default="all")
    parser.add_argument("--episodes", type=int, default=8, help="scripted episodes per pass")
    parser.add_argument("--repeats", type=int, default=3, help="passes per side; median kept")
    parser.add_argument("--max-tokens", type=int, default=48)
    parser.add_argument("--tasks", type=int, default=200, help="held-out tool tasks (part b)")
    parser.add_argument("--concurrency", type=int, default=32, help="tasks run at once (part b)")
    parser.add_argument("--deadline-utc", default=None,
                        help="HH:MM (UTC): part (b) skips a row likely to end after it")
    parser.add_argument("--rows", nargs="+", default=None,
                        help="part (b): run only these rows and add them to the report's")
    parser.add_argument("--episode-timeout-s", type=float, default=300.0,
                        help="part (b): an episode's wall-clock limit (raise it on a busy machine)")
    parser.add_argument("--quick", action="store_true", help="a smoke run: few of everything")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    if args.quick:
        args.episodes, args.repeats, args.tasks = 2, 1, 6
    run = {"when": datetime.now(UTC).isoformat(timespec="seconds"),
           "command": " ".join(["python", "bench/agents.py", *(argv or sys.argv[1:])]),
           "machine": machine()}
    header = {"bench": "agents",
              "note": "A shared machine: compare ratios within one run. LLM-seconds are the "
                      "engine's busy time (prefills and decode steps).",
              **{f"run_{part}": run for part in ("engine", "serve", "tasks")
                 if args.part in (part, "all")}}
    fields: dict[str, Any] = {}
    if args.part in ("engine", "all"):
        print(f"engine: {args.episodes} scripted 5-step episodes, reuse on vs off", flush=True)
        fields["engine"] = engine_part(args.episodes, args.repeats, args.max_tokens)
        fields["engine_setup"] = {
            "model": "embedded SmolLM2-135M-Instruct, fp32, in-process engine",
            "episodes": args.episodes, "steps": 5, "repeats": args.repeats,
            "max_tokens": args.max_tokens, "temperature": 0.0,
            "reuse_off": "load_chat_model('local', prefix_cache=False): every prompt token "
                         "computed",
            "reuse_on": "PrefixMemory LRU (default byte budget), cleared before each pass"}
        print_engine(fields["engine"])
    if args.part in ("serve", "all"):
        fields["serve"] = serve_part(args.episodes, args.max_tokens)
        print("serve:", json.dumps(fields["serve"]), flush=True)
    if args.part in ("tasks", "all"):
        from agents_tasks import print_rows, tasks_part  # type: ignore[import-not-found]

        previous = None
        if args.rows and args.out.is_file():
            previous = json.loads(args.out.read_text()).get("tasks")
            header.pop("run_tasks")  # the first run's settings stay; this one is noted apart
            header["run_tasks_rows"] = run
        fields["tasks"] = tasks_part(
            args.tasks, quick=args.quick, concurrency=args.concurrency,
            deadline=deadline_of(args.deadline_utc), only=args.rows, previous=previous,
            episode_timeout_s=args.episode_timeout_s,
            save=lambda part: update(args.out, {**header, **fields, "tasks": part}))
        if "rows" in fields["tasks"]:
            print_rows(fields["tasks"]["rows"])
    report = update(args.out, {**header, **fields})
    if "engine" in report:
        plot(report, args.out.with_suffix(".png"))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
