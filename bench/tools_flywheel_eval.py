"""``bench/tools_flywheel.py``'s measurement: one model as a tool agent on the held-out tasks.

Why its own module: every row of the bench (the base model, each improve
round's candidate, the plain-SFT control) is measured the same way, and the
numbers people read are computed here from per-task lists alone. A row runs
the package's tool loop as ``bench/agents_tasks.py``'s "single-shot + tools"
row does: ``Reflection(max_iterations=1)`` over
``tool_agent(model, tools, first_tool_choice="any")`` (the episode's first
call forced, then the model answers freely; built by
``agentic_loop.agents.agent_options``, the rule ``improve``'s grow stage
uses), greedy, each task scored by its own Python check (no judge model in
the measurement).

Per row: pass rate (Wilson 95%), mean score (t interval), tool-use rate
(tasks whose answer's episode ran a tool; Wilson 95%), tool-call validity
(calls the model asked for that ran without an error, over all it asked
for; Wilson 95%), model steps and tool calls per task, LLM-seconds per task.
With the first call forced, every answer rests on a tool call, so the
tool-use rate is about 1 by construction; the same model therefore also runs
with the first call left to it (``row["free"]``): its tool-use rate is the
*adoption* rate that training on tool episodes should raise.
Against the base, on the same tasks: exact McNemar on pass/fail (Holm over
every comparison the bench makes), a paired bootstrap on scores, and exact
McNemar on tool use (forced and free); the last round also against the control.

Example (the numbers of a row from per-task records; no model):
    >>> recs = [TaskRecord(True, 10.0, True, 2, 1, 1), TaskRecord(False, 0.0, True, 3, 2, 1),
    ...         TaskRecord(False, 0.0, False, 1, 0, 0), TaskRecord(True, 10.0, True, 2, 1, 1)]
    >>> row = tool_figures(recs)
    >>> row["tool_use_rate"], row["tool_call_validity"], row["model_steps_per_task"]
    (0.75, 0.75, 2.0)
    >>> rows = [{"name": "base"}, {"name": "round 1"}]
    >>> per_task = {"base": vectors(recs), "round 1": vectors([TaskRecord(True, 10.0, True,
    ...             2, 1, 1)] * 4)}
    >>> add_comparisons(rows, per_task, base="base", control=None, resamples=200)
    >>> rows[1]["vs_base"]["wins"], rows[1]["vs_base"]["holm_family"]
    (2, 1)
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from quality_report import summarize  # type: ignore[import-not-found]

from agentic_loop.distill.eval.stats import compare, holm, mcnemar_exact, verdict, wilson

DELTA = 0.10  # the pass-rate difference the power note is about
#: What a row keeps of its free-choice pass (the first call left to the model).
FREE_KEYS = ("tasks", "passed", "pass_rate", "pass_rate_ci95", "mean_score", "mean_score_ci95",
             "tool_use_rate", "tool_use_rate_ci95", "tool_call_validity",
             "tool_call_validity_ci95", "model_steps_per_task", "tool_calls_per_task",
             "llm_s_per_task", "wall_s")


@dataclass(frozen=True)
class TaskRecord:
    """One task's outcome: pass, score, and what the answer's episode did."""

    passed: bool
    score: float
    tool_used: bool
    model_steps: int
    calls_asked: int
    calls_ok: int


def record_of(result: Any) -> TaskRecord:
    """A run result's record, from the episode of its answer as improve's round report reads
    it (``agentic_loop.distill.loop.tool_use.answer_episode``): a call the model asked for
    that never ran (cut by the step limit) counts as not valid, as there."""
    from agentic_loop.distill.loop.tool_use import answer_episode

    episode = answer_episode(result.trajectory)
    if episode is None:
        return TaskRecord(bool(result.passed), float(result.score or 0.0), False, 0, 0, 0)
    asked = max(sum(len(s.tool_calls) for s in episode.model_steps), len(episode.tool_steps))
    return TaskRecord(bool(result.passed), float(result.score or 0.0), bool(episode.tool_steps),
                      episode.model_calls, asked,
                      len(episode.tool_steps) - len(episode.tool_errors))


def rate(k: int, n: int) -> tuple[float | None, list[float]]:
    """``k / n`` rounded, with its Wilson 95% interval (None for no trials)."""
    return (round(k / n, 4) if n else None), [round(x, 4) for x in wilson(k, n)]


def tool_figures(records: Sequence[TaskRecord]) -> dict[str, Any]:
    """The tool-use figures of a row: rates with Wilson intervals, steps and calls per task."""
    n = len(records)
    used = sum(r.tool_used for r in records)
    asked = sum(r.calls_asked for r in records)
    ok = sum(r.calls_ok for r in records)
    use_rate, use_ci = rate(used, n)
    valid, valid_ci = rate(ok, asked)
    return {"tool_use_rate": use_rate, "tool_use_rate_ci95": use_ci,
            "tool_calls_asked": asked, "tool_calls_ok": ok,
            "tool_call_validity": valid, "tool_call_validity_ci95": valid_ci,
            "model_steps_per_task": round(statistics.fmean(r.model_steps for r in records), 3)
            if n else None,
            "tool_calls_per_task": round(asked / n, 3) if n else None}


def vectors(records: Sequence[TaskRecord]) -> dict[str, list[Any]]:
    """The per-task lists the JSON keeps and the comparisons pair."""
    return {"passed": [r.passed for r in records], "scores": [r.score for r in records],
            "tool_used": [r.tool_used for r in records]}


def _run(name: str, spec: str, llm: Any, arch: Any, tasks: Sequence[Any], concurrency: int
         ) -> tuple[dict[str, Any], list[TaskRecord]]:
    """One pass of ``arch`` over ``tasks``: the row's figures and the per-task records."""
    from agentic_loop.architectures import run_specs

    engine = llm.engine
    busy, started = engine.busy_s, time.perf_counter()
    results = run_specs(arch, list(tasks), max_concurrency=concurrency)
    llm_s, wall = engine.busy_s - busy, time.perf_counter() - started
    records = [record_of(r) for r in results]
    usage = {"llm_calls": sum(r.usage.llm_calls for r in results),
             "input_tokens": sum(r.usage.input_tokens for r in results),
             "output_tokens": sum(r.usage.output_tokens for r in results)}
    row = summarize(name, spec, [r.passed for r in records], [r.score for r in records], usage,
                    llm_s=llm_s, wall_s=wall, errors=sum(not r.ok for r in results))
    row.update(tool_figures(records))
    row["example"] = {"task": results[0].task, "output": results[0].output} if results else None
    return row, records


def measure(name: str, spec: str, tasks: Sequence[Any], tools: Sequence[Any], *,
            max_steps: int, max_tokens: int, concurrency: int, free: bool = True
            ) -> tuple[dict[str, Any], dict[str, list[Any]]]:
    """Run ``spec`` (``"local"`` or ``"local:<dir>"``) as a tool agent on ``tasks``.

    The row's figures come from episodes whose first call is forced (every
    answer then rests on a tool result, so the tool-use rate is about 1 by
    construction); with ``free``, the same model also runs with the first call
    left to it (``row["free"]``, the lists ``free_*``): its tool-use rate is the
    *adoption* rate, what training on tool episodes should raise. Returns the
    row and its per-task lists. A trained model's shared engine is released
    after the row, so the bench holds one set of weights at a time.
    """
    from agentic_loop.agents import agent_options
    from agentic_loop.architectures import Reflection
    from agentic_loop.models import load_chat_model
    from agentic_loop.models.local import release_engine

    llm = load_chat_model(spec, temperature=0.0, max_tokens=max_tokens,
                          max_batch_size=max(32, concurrency))

    def agent(first_tool_call: bool) -> Any:  # the rule improve's grow stage and gate use
        return Reflection(max_iterations=1, **agent_options(
            llm, list(tools), first_tool_call=first_tool_call, max_steps=max_steps))

    try:
        row, records = _run(name, spec, llm, agent(True), tasks, concurrency)
        lists = vectors(records)
        if free:
            free_row, free_records = _run(name, spec, llm, agent(False), tasks, concurrency)
            row["free"] = {k: free_row[k] for k in FREE_KEYS}
            lists.update({f"free_{k}": v for k, v in vectors(free_records).items()})
    finally:
        if spec.startswith("local:"):
            release_engine(spec.split(":", 1)[1])
    return row, lists


def paired_change(base: Sequence[bool], other: Sequence[bool]) -> dict[str, Any]:
    """The change in a rate over the same tasks, with the exact McNemar p on the paired lists.

    >>> paired_change([False, False, True, False], [True, True, True, False])
    {'diff': 0.5, 'gained': 2, 'lost': 0, 'mcnemar_p': 0.5}
    """
    gained = sum(not b and o for b, o in zip(base, other, strict=True))
    lost = sum(b and not o for b, o in zip(base, other, strict=True))
    return {"diff": round((gained - lost) / len(base), 4) if base else None,
            "gained": gained, "lost": lost, "mcnemar_p": mcnemar_exact(gained, lost)}


def add_comparisons(rows: list[dict[str, Any]], per_task: Mapping[str, Mapping[str, list[Any]]],
                    *, base: str, control: str | None, last_round: str | None = None,
                    resamples: int = 10_000) -> None:
    """Each measured row against ``base`` (``vs_base``), and ``last_round`` against ``control``
    (``vs_control``); Holm's adjustment over every pass-rate comparison made here (the
    verdicts); the tool-use changes (forced, and free-choice where measured) beside them."""
    if base not in per_task:
        return
    pairs: list[tuple[dict[str, Any], str, Mapping[str, list[Any]]]] = [
        (row, "vs_base", per_task[base]) for row in rows
        if row["name"] != base and row["name"] in per_task]
    if control in per_task and last_round in per_task:
        row = next(r for r in rows if r["name"] == last_round)
        pairs.append((row, "vs_control", per_task[str(control)]))
    found = [compare(ref["passed"], per_task[row["name"]]["passed"], ref["scores"],
                     per_task[row["name"]]["scores"], delta=DELTA, resamples=resamples)
             for row, _, ref in pairs]
    adjusted = holm([c.mcnemar_p for c in found])
    for (row, key, ref), c, p_holm in zip(pairs, found, adjusted, strict=True):
        mine = per_task[row["name"]]
        row[key] = {**c.model_dump(mode="json"), "mcnemar_p_holm": p_holm,
                    "holm_family": len(pairs),
                    "verdict": verdict(c.pass_rate_diff, p_holm, c.tasks_needed, delta=DELTA,
                                       label="Holm p"),
                    "tool_use": paired_change(ref["tool_used"], mine["tool_used"])}
        if "free_passed" in ref and "free_passed" in mine:
            row[key]["free"] = {"pass": paired_change(ref["free_passed"], mine["free_passed"]),
                                "tool_use": paired_change(ref["free_tool_used"],
                                                          mine["free_tool_used"])}


def _figures(row: Mapping[str, Any], panel: str) -> tuple[float, list[float]] | None:
    """A row's value and interval on a panel: ``pass`` (first call forced) or ``adoption`` (the
    free-choice tool-use rate, else the forced one)."""
    source = row.get("free") if panel == "adoption" and row.get("free") else row
    key = "pass_rate" if panel == "pass" else "tool_use_rate"
    value = (source or {}).get(key)
    return None if value is None or source is None else (value, source[f"{key}_ci95"])


def plot_curve(report: Mapping[str, Any], path: Any) -> None:
    """Pass rate and tool-use rate per round (Wilson 95% error bars), the base at round 0,
    the base and the control as reference lines with their intervals shaded."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    rows = [r for r in report["rows"] if r.get("pass_rate") is not None]
    refs = [(next((r for r in rows if r["kind"] == kind), None), style, color)
            for kind, style, color in (("base", "--", "#616161"), ("control", ":", "#d32f2f"))]
    curve = [r for r in rows if r["kind"] in ("base", "round")]
    free = bool(rows and rows[0].get("free"))
    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    titles = {"pass": "pass rate (first call forced)",
              "adoption": "tool-use rate, first call left to the model" if free
              else "tool-use rate (first call forced)"}
    for ax, panel in zip(axes, ("pass", "adoption"), strict=True):
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        points = [(r.get("round", 0), f, r) for r in curve if (f := _figures(r, panel))]
        if points:
            xs, ys = [x for x, _, _ in points], [f[0] for _, f, _ in points]
            errors = [[max(0.0, f[0] - f[1][0]) for _, f, _ in points],
                      [max(0.0, f[1][1] - f[0]) for _, f, _ in points]]
            ax.errorbar(xs, ys, yerr=errors, marker="o", capsize=4, linewidth=1.5,
                        label="improve rounds (0: base)")
            for x, f, r in points:
                if r["kind"] == "round":
                    ax.annotate(r.get("method", ""), (x, f[0]), textcoords="offset points",
                                xytext=(6, 6), fontsize=8)
        for ref, style, color in refs:
            found = _figures(ref, panel) if ref is not None else None
            if ref is None or found is None:
                continue
            name = ("base" if ref["kind"] == "base"
                    else f"plain SFT, {ref.get('train_steps')} steps")
            ax.axhline(found[0], linestyle=style, color=color, linewidth=1.2, label=name)
            ax.axhspan(*found[1], color=color, alpha=0.08)
        ax.set_ylim(-0.02, 1.02)
        ax.set_xlabel("improve round")
        ax.set_ylabel(f"rate on {report['tasks']['held_out']} held-out tool tasks")
        ax.legend(fontsize=8)
        ax.set_title(f"{titles[panel]}, 95% Wilson", fontsize=10)
    fig.suptitle("tools flywheel: the embedded model as a tool agent, per improve round")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def print_table(rows: Sequence[dict[str, Any]]) -> None:
    """The rows as people read them: figures with intervals, the verdict against the base."""
    header = ["row", "steps", "pass [95% CI]", "score", "valid calls", "model steps",
              "vs base (Holm)", "free: pass", "free: tools used", "LLM-s/task"]
    lines = [header]
    for r in rows:
        if r.get("pass_rate") is None:
            lines.append([r["name"], "-", r.get("skipped", "not measured")]
                         + [""] * (len(header) - 3))
            continue
        vs, free = r.get("vs_base") or {}, r.get("free") or {}
        lines.append([
            r["name"], str(r.get("train_steps", "-")),
            f"{r['pass_rate']:.3f} {r['pass_rate_ci95']}", str(r.get("mean_score")),
            f"{r['tool_call_validity'] or 0:.2f}", str(r["model_steps_per_task"]),
            vs.get("verdict", "-"),
            f"{free['pass_rate']:.3f}" if free else "-",
            f"{free['tool_use_rate']:.2f} {free['tool_use_rate_ci95']}" if free else "-",
            str(r["llm_s_per_task"])])
    widths = [max(len(line[i]) for line in lines) for i in range(len(header))]
    for line in lines:
        print("  ".join(c.ljust(w) for c, w in zip(line, widths, strict=True)))
