"""Part (b) of ``bench/agents.py``: the embedded model as a tool agent on held-out tool tasks.

Every row answers the SAME held-out tool tasks (``agentic_loop.tasks.tool_tasks``,
``split="held_out"``: wordings no train task uses), scored by each task's own
Python check (the last number of the answer; no judge model in the
measurement). Rows: the embedded model single-shot without tools, single-shot
with tools (one episode: the calculator and the reference lookup), and
Reflection, ArchiveRefine (cold archive) and Reflexion (empty memory) with the
same tools. The agent rows run the package's tool loop
(``agentic_loop.agents.tool_agent``) with the episode's first call forced
(``first_tool_choice="any"``); "single-shot + tools (model's choice)" leaves
the first call to the model. Per row: pass rate with its Wilson 95% interval, paired exact
McNemar against single-shot with tools (Holm over the rows), tool-use rate
(tasks whose answer's episode called a tool), model steps and tool calls per
task, LLM-seconds (the engine's busy time) per task. Nothing asserts on time.
"""

from __future__ import annotations

import statistics
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from quality_report import summarize  # type: ignore[import-not-found]

from agentic_loop.distill.eval.stats import compare, holm, verdict

BASELINE = "single-shot + tools"
DELTA = 0.10


def available() -> str | None:
    """Why the task part cannot run in this checkout, or None when it can."""
    import inspect

    try:
        from agentic_loop.architectures import Architecture
        from agentic_loop.tasks import tool_tasks  # noqa: F401
    except ImportError as exc:
        return f"not available in this checkout: {exc}"
    if "tools" not in inspect.signature(Architecture.__init__).parameters:
        return "the architectures take no tools= keyword in this checkout"
    return None


def episode_counts(result: Any) -> tuple[int, int, bool]:
    """(model steps, tool calls) over every episode of a run; whether its answer used a tool."""
    steps = calls = 0
    for round_ in result.trajectory.rounds:
        episode = getattr(round_, "episode", None)
        if episode is None:
            continue
        for step in episode.steps:
            if step.kind == "model":
                steps += 1
            else:
                calls += 1
    final = result.final_round
    episode = getattr(final, "episode", None) if final is not None else None
    used = bool(episode is not None and any(s.kind == "tool" for s in episode.steps))
    return steps, calls, used


class TaskBench:
    """The rows of part (b) over one list of held-out tool tasks."""

    def __init__(self, n: int, *, concurrency: int, max_iterations: int, max_steps: int,
                 max_tokens: int, work: Path, episode_timeout_s: float = 300.0) -> None:
        from agentic_loop.agents import tool_agent
        from agentic_loop.models import load_chat_model
        from agentic_loop.tasks.tool_tasks import default_task_tools, tool_tasks

        self.tasks = tool_tasks(n, split="held_out", seed=0)
        self.tools = list(default_task_tools())
        self.llm = load_chat_model("local", temperature=0.0, max_tokens=max_tokens,
                                   max_batch_size=max(32, concurrency))
        self.llm.invoke("Hi")  # loaded and warm before the first row's timing
        self.concurrency, self.work = concurrency, work
        self.common = {"max_iterations": max_iterations}
        # The 135M model rarely opens with a call when free to answer (0 of 16 tasks in a
        # smoke run): the agent rows force the episode's first call, then it answers freely.
        # A shared machine can slow an episode past a wall-clock limit that measures the
        # machine, not the agent: the limit is a setting of the run (kept in the report).
        limits = {"max_steps": max_steps, "episode_timeout_s": episode_timeout_s}
        self.auto = {"tools": self.tools, **limits}
        self.agent = {"llm": tool_agent(self.llm, self.tools, first_tool_choice="any"),
                      "judge": self.llm, **limits}
        self.rows: list[dict[str, Any]] = []
        self.per_task: dict[str, dict[str, list[Any]]] = {}

    def run_row(self, name: str, make: Callable[[], Any]) -> dict[str, Any]:
        from agentic_loop.architectures import run_specs

        arch, engine = make(), self.llm.engine
        busy, started, stats = engine.busy_s, time.perf_counter(), dict(engine.stats)
        results = run_specs(arch, self.tasks, max_concurrency=self.concurrency)
        llm_s, wall = engine.busy_s - busy, time.perf_counter() - started
        sent, computed = (engine.stats[k] - stats[k]
                          for k in ("prompt_tokens_sent", "prompt_tokens_computed"))
        usage = {"llm_calls": sum(r.usage.llm_calls for r in results),
                 "input_tokens": sum(r.usage.input_tokens for r in results),
                 "output_tokens": sum(r.usage.output_tokens for r in results)}
        passed = [bool(r.passed) for r in results]
        scores = [float(r.score or 0.0) for r in results]
        row = summarize(name, "embedded", passed, scores, usage, llm_s=llm_s, wall_s=wall,
                        errors=sum(not r.ok for r in results))
        counts = [episode_counts(r) for r in results]
        n = len(results)
        row.update({
            "tool_use_rate": round(sum(c[2] for c in counts) / n, 4),
            "model_steps_per_task": round(sum(c[0] for c in counts) / n, 3),
            "tool_calls_per_task": round(sum(c[1] for c in counts) / n, 3),
            "prompt_tokens_sent": sent, "prompt_tokens_computed": computed,
            "rounds_per_task": round(statistics.fmean(len(r.trajectory.rounds)
                                                      for r in results), 3),
            "example": {"task": self.tasks[0].task, "output": results[0].output}})
        self.rows.append(row)
        self.per_task[name] = {"passed": passed, "scores": scores}
        print(f"  {name}: pass {row['pass_rate']:.1%} {row['pass_rate_ci95']}, tools "
              f"{row['tool_use_rate']:.0%}, {row['llm_s_per_task']} LLM-s/task, "
              f"{wall:.0f} s wall", flush=True)
        return row

    def rows_all(self, deadline: float | None, save: Callable[[dict[str, str]], None],
                 only: Sequence[str] | None = None) -> dict[str, str]:
        """Every row in order of importance; a row that would likely end past ``deadline``
        (Unix time) is skipped and named."""
        from agentic_loop.architectures import ArchiveRefine, Reflection, Reflexion
        from agentic_loop.memory import Archive, ReflexionMemory

        archive = Archive(self.work / "archive", show_progress=False)
        plans: list[tuple[str, Callable[[], Any]]] = [
            ("single-shot, no tools", lambda: Reflection(self.llm, max_iterations=1)),
            (BASELINE, lambda: Reflection(max_iterations=1, **self.agent)),
            ("Reflection + tools", lambda: Reflection(**self.common, **self.agent)),
            ("ArchiveRefine + tools (cold)", lambda: ArchiveRefine(
                archive=archive, **self.common, **self.agent)),
            ("Reflexion + tools", lambda: Reflexion(
                memory=ReflexionMemory(self.work / "reflections", embedder=archive.embedder,
                                       show_progress=False),
                **self.common, **self.agent)),
            ("single-shot + tools (model's choice)",
             lambda: Reflection(self.llm, max_iterations=1, **self.auto)),
        ]
        skipped: dict[str, str] = {}
        longest = 0.0
        for name, make in plans:
            if only is not None and name not in only:
                continue
            # a loop row costs up to about twice the longest row so far
            if deadline is not None and time.time() + 2 * longest > deadline:
                skipped[name] = "skipped: it would not have ended before the run's deadline"
                continue
            started = time.perf_counter()
            self.run_row(name, make)
            longest = max(longest, time.perf_counter() - started)
            self.comparisons()
            save(skipped)  # a run stopped later keeps the rows done so far
        return skipped

    def comparisons(self) -> None:
        base = self.per_task.get(BASELINE)
        if base is None:
            return
        compared = [r for r in self.rows if r["name"] != BASELINE]
        raw = [compare(base["passed"], self.per_task[r["name"]]["passed"], base["scores"],
                       self.per_task[r["name"]]["scores"], delta=DELTA, resamples=10_000)
               for r in compared]
        adjusted = holm([c.mcnemar_p for c in raw])
        for row, c, p_holm in zip(compared, raw, adjusted, strict=True):
            row["vs_single_shot_tools"] = {
                **c.to_dict(), "mcnemar_p_holm": p_holm, "holm_family": len(compared),
                "verdict": verdict(c.pass_rate_diff, p_holm, c.tasks_needed, delta=DELTA,
                                   label="Holm p")}


def tasks_part(n: int, *, quick: bool = False, concurrency: int = 32, max_iterations: int = 2,
               max_steps: int = 4, max_tokens: int = 96, deadline: float | None = None,
               save: Callable[[dict[str, Any]], None] | None = None,
               only: Sequence[str] | None = None,
               previous: dict[str, Any] | None = None,
               episode_timeout_s: float = 300.0) -> dict[str, Any]:
    """Part (b)'s report (``save`` gets it after every row), or why it was skipped.

    ``only``: run just these rows; with ``previous`` (an earlier report on the same
    tasks) they join its rows (see :func:`merge_rows`).
    """
    why = available()
    if why is not None:
        return {"skipped": why}
    settings = {"concurrency": concurrency, "max_iterations": max_iterations,
                "max_steps": max_steps, "max_tokens": max_tokens, "temperature": 0.0,
                "episode_timeout_s": episode_timeout_s, "quick": quick}
    with tempfile.TemporaryDirectory(prefix="agents-bench-") as tmp:
        bench = TaskBench(n, concurrency=concurrency, max_iterations=max_iterations,
                          max_steps=max_steps, max_tokens=max_tokens, work=Path(tmp),
                          episode_timeout_s=episode_timeout_s)
        print(f"tasks: {len(bench.tasks)} held-out tool tasks", flush=True)

        def report(skipped: dict[str, str]) -> dict[str, Any]:
            families: dict[str, int] = {}
            for task in bench.tasks:
                family = task.metadata.get("family", "?")
                families[family] = families.get(family, 0) + 1
            return {"tasks": len(bench.tasks), "split": "held_out", "families": families,
                    "settings": {**settings, "tools": [t.name for t in bench.tools]},
                    "baseline": BASELINE, "rows": bench.rows, "skipped_rows": skipped,
                    "per_task_passed": {k: v["passed"] for k, v in bench.per_task.items()},
                    "per_task_scores": {k: v["scores"] for k, v in bench.per_task.items()}}

        def merged(skipped: dict[str, str]) -> dict[str, Any]:
            return report(skipped) if previous is None else merge_rows(previous,
                                                                       report(skipped))

        skipped = bench.rows_all(deadline, lambda s: save(merged(s)) if save else None, only)
        return merged(skipped)


def merge_rows(previous: dict[str, Any], new: dict[str, Any]) -> dict[str, Any]:
    """``new``'s rows (run apart, on the same tasks) added to ``previous``'s, compared with
    its baseline row on pass/fail (and on scores where both runs saved them), Holm
    adjusted again over every compared row."""
    if previous.get("tasks") != new["tasks"]:
        raise SystemExit(f"cannot merge rows on {new['tasks']} tasks into a report on "
                         f"{previous.get('tasks')}: pass --tasks {previous.get('tasks')}")
    names = {r["name"] for r in new["rows"]}
    rows = [r for r in previous["rows"] if r["name"] not in names] + new["rows"]
    passed = {**previous.get("per_task_passed", {}), **new["per_task_passed"]}
    scores = {**previous.get("per_task_scores", {}), **new["per_task_scores"]}
    base = passed[BASELINE]
    for row in rows:
        name = row["name"]
        if name == BASELINE or (name not in names and "vs_single_shot_tools" in row):
            continue
        both = BASELINE in scores and name in scores
        row["vs_single_shot_tools"] = compare(
            base, passed[name], scores.get(BASELINE) if both else None,
            scores.get(name) if both else None, delta=DELTA, resamples=10_000).to_dict()
        if not both:
            row["vs_single_shot_tools"]["note"] = (
                "pass/fail only: this row ran apart from the baseline, whose per-task "
                "scores were not saved")
    compared = [r for r in rows if r["name"] != BASELINE]
    adjusted = holm([r["vs_single_shot_tools"]["mcnemar_p"] for r in compared])
    for row, p_holm in zip(compared, adjusted, strict=True):
        vs = row["vs_single_shot_tools"]
        vs.update({"mcnemar_p_holm": p_holm, "holm_family": len(compared),
                   "verdict": verdict(vs["pass_rate_diff"], p_holm, vs["tasks_needed"],
                                      delta=DELTA, label="Holm p")})
    skipped = {k: v for k, v in previous.get("skipped_rows", {}).items() if k not in names}
    skipped.update(new["skipped_rows"])
    return {**previous, "rows": rows, "skipped_rows": skipped, "per_task_passed": passed,
            "per_task_scores": scores,
            "merged_runs": [*previous.get("merged_runs", []), sorted(names)]}


def print_rows(rows: Sequence[dict[str, Any]]) -> None:
    header = ["row", "pass", "95% CI", "McNemar p", "tools", "steps", "LLM-s/task"]
    lines = [header]
    for r in rows:
        vs = r.get("vs_single_shot_tools", {})
        lines.append([r["name"], f"{r['pass_rate']:.3f}", str(r["pass_rate_ci95"]),
                      f"{vs['mcnemar_p']:.3g}" if vs else "-", f"{r['tool_use_rate']:.2f}",
                      str(r["model_steps_per_task"]), str(r["llm_s_per_task"])])
    widths = [max(len(line[i]) for line in lines) for i in range(len(header))]
    for line in lines:
        print("  ".join(c.ljust(w) for c, w in zip(line, widths, strict=True)))
