"""The quality bench's numbers: one row per system, paired comparisons, the report, the plot.

Why its own module: the run (``quality.py``) only produces per-task pass/fail
and scores with their cost; everything a reader looks at is computed here,
from those lists alone, with :mod:`agentic_loop.distill.eval.stats`.

Per row: pass rate with its Wilson 95% interval, mean score with a t
interval, LLM calls and tokens, *LLM-seconds* (seconds the decoding engine
spent on the row's requests; ``wall_s`` beside it adds graph, memory and
embedder time) and passes per LLM-second / per LLM-minute (equal to the pass
rate divided by the LLM-seconds per task: quality per unit of compute).
Against single-shot, on the same tasks: exact McNemar on pass/fail,
paired bootstrap on the pass-rate and score differences (95% intervals,
p-values), Holm's adjustment over all rows, the tasks a 10-point difference
would need at the observed discordance, and a verdict.

Example:
    >>> row = summarize("single-shot", "base", [True, False, True, False], [10, 2, 9, 3],
    ...                 {"llm_calls": 4, "input_tokens": 400, "output_tokens": 80},
    ...                 llm_s=2.0, wall_s=2.5)
    >>> row["pass_rate"], row["passes_per_llm_minute"], row["pass_rate_ci95"][0] > 0
    (0.5, 60.0, True)
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from rich.markup import escape

from agentic_loop.distill.eval.stats import compare, holm, t_interval, verdict, wilson

BASELINE = "single-shot"
DELTA = 0.10  # the pass-rate difference the power note is about
NOT_COMPARED = {"none"}  # the fixed reply is a floor, not a hypothesis


def score_interval(values: Sequence[float], lo: float = 0.0,
                   hi: float = 10.0) -> list[float] | None:
    """Student-t 95% interval of a mean score, clipped to ``[lo, hi]``; None below two values."""
    interval = t_interval(values)
    if interval is None:
        return None
    return [round(max(lo, interval[0]), 3), round(min(hi, interval[1]), 3)]


def per(total: float, count: float) -> float | None:
    """``total / count`` rounded, or None when there is nothing to divide by."""
    return round(total / count, 4) if count else None


def summarize(name: str, model: str, passed: Sequence[bool], scores: Sequence[float],
              usage: Mapping[str, int], *, llm_s: float, wall_s: float,
              errors: int = 0, groups: Mapping[str, Sequence[int]] | None = None
              ) -> dict[str, Any]:
    """One row: quality with intervals, cost, and quality per LLM-second."""
    n, k = len(passed), sum(passed)
    calls, out_tokens = usage.get("llm_calls", 0), usage.get("output_tokens", 0)
    tokens = usage.get("input_tokens", 0) + out_tokens
    row: dict[str, Any] = {
        "name": name, "model": model, "tasks": n, "passed": k,
        "pass_rate": round(k / n, 4) if n else None,
        "pass_rate_ci95": [round(x, 4) for x in wilson(k, n)],
        "mean_score": round(statistics.fmean(scores), 3) if scores else None,
        "mean_score_ci95": score_interval(scores), "errors": errors,
        "llm_calls": calls, "tokens": tokens, "output_tokens": out_tokens,
        "llm_s": round(llm_s, 2), "wall_s": round(wall_s, 2),
        "llm_calls_per_task": per(calls, n), "tokens_per_task": per(tokens, n),
        "llm_s_per_task": per(llm_s, n), "output_tokens_per_llm_s": per(out_tokens, llm_s),
        "passes_per_llm_s": per(k, llm_s), "passes_per_llm_minute": per(60 * k, llm_s),
        "llm_s_per_pass": per(llm_s, k),
    }
    if groups:
        row["by_suite"] = {g: {"tasks": len(ix), "pass_rate": per(sum(passed[i] for i in ix),
                                                                   len(ix))}
                           for g, ix in groups.items()}
    return row


def add_comparisons(rows: list[dict[str, Any]], per_task: Mapping[str, Mapping[str, list[Any]]],
                    *, resamples: int = 10_000, baseline: str = BASELINE) -> None:
    """Attach ``vs_single_shot`` to every compared row (Holm over all of them) in place.

    ``baseline`` names the single-shot row (``"single-shot [float32]"`` in a dtype run).
    """
    base = per_task.get(baseline)
    if base is None:
        return
    compared = [r for r in rows if r["name"] != baseline and r["model"] not in NOT_COMPARED]
    raw = [compare(base["passed"], per_task[r["name"]]["passed"], base["scores"],
                   per_task[r["name"]]["scores"], delta=DELTA, resamples=resamples)
           for r in compared]
    adjusted = holm([c.mcnemar_p for c in raw])
    for row, c, p_holm in zip(compared, raw, adjusted):
        row["vs_single_shot"] = {
            **c.to_dict(), "mcnemar_p_holm": p_holm, "holm_family": len(compared),
            "verdict": verdict(c.pass_rate_diff, p_holm, c.tasks_needed, delta=DELTA,
                               label="Holm p")}


NOTES = [
    ("Every row answers the same held-out tasks; pass = every check of the task holds, "
     "score = the task rubric's 0-10. Intervals: Wilson (pass rate), Student t (mean "
     "score), paired bootstrap over tasks (changes vs single-shot)."),
    ("vs_single_shot: exact McNemar p on pass/fail (wins = tasks only the row passed, "
     "losses = only single-shot passed), Holm-adjusted over every compared row; the "
     "verdict uses the Holm p at 0.05. tasks_needed: tasks a McNemar test needs for a "
     "10-point difference at alpha 0.05, power 0.8, at this row's discordance (Connor "
     "1987)."),
    ("llm_s is the decoding engine's busy time for the row (concurrent requests share "
     "batches); wall_s adds graph, memory and embedder time. passes_per_llm_minute = "
     "passes / LLM-minutes = pass rate / LLM-minutes per task."),
    ("ArchiveRefine (cold) and Reflexion start empty and fill during the held-out run; "
     "the warm row starts from a copy of the archive the train pass (best-of-n in "
     "each round) filled. The "
     "distill round trains only on the train pass's trajectories; GRPO only on train "
     "tasks, for the SFT round's trainer seconds."),
    ("predicted_s extrapolates this run's per-task wall seconds to each mode's task "
     "counts (one-off costs: loading, training); it is how quick mode was sized."),
]


def headline(row: Mapping[str, Any]) -> str:
    """One console line per row."""
    ci = row["pass_rate_ci95"]
    vs = row.get("vs_single_shot", {})
    return (f"[bold]{escape(row['name'])}[/]: pass {row['pass_rate']:.1%} "
            f"[{ci[0]:.1%}, {ci[1]:.1%}], "
            f"score {row['mean_score']}, {row['llm_calls_per_task']} calls/task, "
            f"{row['llm_s']:.0f} LLM-s ({row['passes_per_llm_minute']} passes/LLM-min)"
            + (f"; vs single-shot {100 * vs['pass_rate_diff']:+.1f} pts: {vs['verdict']}"
               if vs else ""))


def predict(rows: Sequence[Mapping[str, Any]], one_off: Mapping[str, float],
            sizes: Mapping[str, tuple[int, int]]) -> dict[str, Any]:
    """Extrapolate a slice run: each row's wall seconds per task times a mode's task count.

    ``one_off`` holds costs that do not grow with held-out tasks (loading,
    training); the train pass grows with the train tasks. ``sizes`` maps a
    mode to ``(held_out_tasks, train_tasks)``.
    """
    out: dict[str, Any] = {}
    for mode, (held, train) in sizes.items():
        rows_s = {r["name"]: round((r["wall_s"] / r["tasks"]) * held, 1) for r in rows
                  if r["tasks"]}
        fixed = {k: round(v * (train if k == "train_pass_per_task" else 1), 1)
                 for k, v in one_off.items()}
        out[mode] = {"held_out_tasks": held, "train_tasks": train, "rows_s": rows_s,
                     "one_off_s": fixed,
                     "total_s": round(sum(rows_s.values()) + sum(fixed.values()), 1)}
    return out


def plot(report: Mapping[str, Any], path: Path) -> None:
    """Pass rate (Wilson CI), change vs single-shot (bootstrap CI), passes per LLM-minute."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = list(report["phases"])[::-1]
    names = [r["name"] for r in rows]
    first = (report.get("dtypes") or {}).get("baseline_dtype")
    colors = ["#9e9e9e" if r["model"] == "none"
              else "#64b5f6" if first and r.get("dtype") not in (None, first)  # later dtype
              else "#1976d2" if r["model"] == "base"
              else "#388e3c" if r["model"] == "distilled" else "#8e24aa" for r in rows]
    fig, axes = plt.subplots(1, 3, figsize=(16, 0.45 * len(rows) + 2.2), sharey=True)
    rates = [100 * (r["pass_rate"] or 0.0) for r in rows]
    err = [[v - 100 * r["pass_rate_ci95"][0] for v, r in zip(rates, rows)],
           [100 * r["pass_rate_ci95"][1] - v for v, r in zip(rates, rows)]]
    axes[0].barh(names, rates, xerr=err, color=colors, capsize=3)
    baseline = report.get("baseline", BASELINE)
    base = next((100 * r["pass_rate"] for r in rows if r["name"] == baseline), None)
    if base is not None:
        axes[0].axvline(base, color="#d32f2f", linestyle="--", linewidth=1)
    axes[0].set_title("pass rate, % (Wilson 95% CI)", fontsize=10)
    diffs = [100 * r["vs_single_shot"]["pass_rate_diff"] if "vs_single_shot" in r else 0.0
             for r in rows]
    lo = [d - 100 * r["vs_single_shot"]["pass_rate_diff_ci95"][0] if "vs_single_shot" in r
          else 0.0 for d, r in zip(diffs, rows)]
    hi = [100 * r["vs_single_shot"]["pass_rate_diff_ci95"][1] - d if "vs_single_shot" in r
          else 0.0 for d, r in zip(diffs, rows)]
    axes[1].barh(names, diffs, xerr=[lo, hi], color=colors, capsize=3)
    axes[1].axvline(0, color="#d32f2f", linewidth=1)
    for y, r in enumerate(rows):
        vs = r.get("vs_single_shot")
        if vs:
            axes[1].annotate(f"Holm p={vs['mcnemar_p_holm']:.2g}", (0, y), fontsize=7,
                             xytext=(3, 6), textcoords="offset points")
        same = r.get("vs_first_dtype")
        if same:
            axes[1].annotate(f"vs {same['baseline']}: {100 * same['pass_rate_diff']:+.1f} pts, "
                             f"Holm p={same['mcnemar_p_holm']:.2g}", (0, y), fontsize=7,
                             xytext=(3, -10), textcoords="offset points")
    axes[1].set_title(f"pass-rate change vs {baseline}, points\n(paired bootstrap 95% CI)",
                      fontsize=10)
    speed = [r["passes_per_llm_minute"] or 0.0 for r in rows]
    bars = axes[2].barh(names, speed, color="#f57c00")
    axes[2].bar_label(bars, labels=[
        f"{s:.1f} ({r.get('output_tokens_per_llm_s') or 0:.0f} tok/LLM-s)" if r["llm_s"]
        else "no LLM" for s, r in zip(speed, rows)], fontsize=8)
    axes[2].set_title("passes per LLM-minute (output tokens per LLM-second)", fontsize=10)
    ds = report["dev_set"]
    light = f", light blue: dtypes after {first}" if first else ""
    fig.suptitle(f"Held-out quality: {ds['held_out']} tasks, same for every row "
                 f"({report['mode']} mode, {report['model']}); blue base, green distilled, "
                 f"purple GRPO{light}", fontsize=11)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
