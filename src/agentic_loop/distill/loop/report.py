"""What an improve round is worth, with its uncertainty: pass rates, scores, counts, a curve.

Why intervals: a pool of a dozen tasks and a golden set of twenty give
noisy rates, and "golden 0.45 -> 0.55" means little without its spread.
Rates carry a 95% Wilson interval (sound near 0 and 1 and for small n,
where the normal one is not); mean scores a 95% Student-t interval. The
round's report is ``round-NNN/report.json``; the whole run is
``improve.json`` and ``improve.png`` (each round's candidate on the golden
set, promoted or refused, against the starting model, with intervals).

Example:
    >>> [round(x, 3) for x in wilson(8, 10)]
    [0.49, 0.943]
    >>> rate_stats(3, 4).pass_rate
    0.75
    >>> m = mean_stats([7.0, 8.0, 9.0])
    >>> m.mean, [round(x, 2) for x in m.interval or []]
    (8.0, [5.52, 10.48])

The numbers are the typed records of :mod:`~agentic_loop.distill.loop.records`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from agentic_loop.distill.eval.evaluate import EvalReport
from agentic_loop.distill.eval.stats import wilson
from agentic_loop.distill.loop.pool import locked_rubric
from agentic_loop.distill.loop.records import GoldenRate, GoldenStats, ImproveRound, MeanScore, Rate
from agentic_loop.tables import percent
from agentic_loop.tasks.spec import TaskSpec
from agentic_loop.trajectories import Trajectory

__all__ = ["golden_flags", "golden_stats", "mean_stats", "plot_curve", "rate_stats",
           "runs_golden_stats", "summary_line", "wilson"]

def rate_stats(passed: int, total: int) -> Rate:
    """A pass rate with its counts and 95% Wilson interval."""
    return Rate.of(passed, total)


def mean_stats(values: Sequence[float]) -> MeanScore:
    """A mean with its 95% Student-t interval (the mean itself when n < 2)."""
    return MeanScore.of(values)


def _golden_pass(spec: TaskSpec | None, output: str, score: float, pass_score: float) -> bool:
    """Every check of the task's locked rubric holds (no check: ``score >= pass_score``)."""
    rubric = locked_rubric(spec) if spec is not None else None
    if rubric is None:
        return score >= pass_score
    return bool(output) and rubric.evaluate(spec.task if spec else "", output).passed


def golden_stats(evaluation: EvalReport | Mapping[str, Any], golden: Sequence[TaskSpec], *,
                 pass_score: float = 8.0) -> GoldenStats:
    """Pass rate and mean score of both models on the golden set, from an evaluation.

    ``evaluation`` is an :class:`EvalReport` (or its JSON, ``eval.json``).
    Single-shot outputs are what the gate compared; a task passes when every
    check of its locked rubric holds on the output (see :func:`_golden_pass`).
    """
    report = (evaluation if isinstance(evaluation, EvalReport)
              else EvalReport.model_validate(evaluation))
    sides = {}
    for side in ("baseline", "candidate"):
        scores = [float(getattr(t, side)) for t in report.tasks]
        flags = golden_flags(report, golden, side, pass_score=pass_score)
        sides[side] = GoldenRate.of_scores(sum(flags), len(flags), scores)
    return GoldenStats(tasks=len(report.tasks), **sides)


def runs_golden_stats(baseline: Mapping[str, Trajectory], candidate: Mapping[str, Trajectory],
                      golden: Sequence[TaskSpec], *, pass_score: float = 8.0) -> GoldenStats:
    """Pass rate and mean score of both sides' runs (by golden task id) on the golden set.

    What an agent gate compared: each side's run of each golden task, its
    final answer judged as :func:`golden_stats` judges a single-shot one; a
    task a side has no run of (its run raised) fails with score 0.

    >>> spec = TaskSpec(task="Say hi in 2 words.", constraints={"exact_words": 2}, id="g1")
    >>> run = lambda out: Trajectory(architecture="a", model_id="m", task=spec.task,
    ...                              final_output=out, final_score=10.0 if out else 0.0)
    >>> stats = runs_golden_stats({"g1": run("hi")}, {"g1": run("hi there")}, [spec])
    >>> stats.baseline.pass_rate, stats.candidate.pass_rate, stats.candidate.score.mean
    (0.0, 1.0, 10.0)
    """
    sides = {}
    for side, runs in (("baseline", baseline), ("candidate", candidate)):
        got = [runs.get(str(g.id)) for g in golden]
        scores = [float(r.final_score or 0.0) if r is not None else 0.0 for r in got]
        flags = [r is not None and _golden_pass(g, r.final_output or "", score, pass_score)
                 for g, r, score in zip(golden, got, scores, strict=True)]
        sides[side] = GoldenRate.of_scores(sum(flags), len(flags), scores)
    return GoldenStats(tasks=len(golden), **sides)


def _fmt_rate(stats: Rate | None) -> str:
    if stats is None or stats.pass_rate is None:
        return "n/a"
    return percent(stats.pass_rate, stats.interval)  # rates print one way: percent


def summary_line(report: ImproveRound) -> str:
    """One line for the audit log and the model card: what the round did and found."""
    golden, data = report.golden, report.data
    parts = [f"improve round {report.round} from {report.model}",
             f"pool pass {_fmt_rate(report.pool)}",
             f"golden pass {_fmt_rate(golden.baseline if golden else None)} -> "
             f"{_fmt_rate(golden.candidate if golden else None)}",
             f"sft rows {data.sft_rows if data else 0}, pairs {data.pairs if data else 0}, "
             f"hinted {report.hint.accepted if report.hint else 0}"]
    agent = report.agent
    if agent is not None and agent.baseline is not None and agent.candidate is not None:
        parts.append(f"agent tool use {_fmt_rate(agent.baseline.tool_use)} -> "
                     f"{_fmt_rate(agent.candidate.tool_use)}")
    if report.decision:
        parts.append(f"gate {report.decision.value}")
    return "; ".join(parts)


def golden_flags(evaluation: EvalReport | Mapping[str, Any], golden: Sequence[TaskSpec], side: str,
                 *, pass_score: float = 8.0) -> list[bool]:
    """Per golden task, in the evaluation's order: did ``side`` (``baseline``/``candidate``) pass?

    The paired pass/fail lists a McNemar test compares (see :func:`golden_stats`).
    """
    report = (evaluation if isinstance(evaluation, EvalReport)
              else EvalReport.model_validate(evaluation))
    by_id = {str(g.id): g for g in golden}
    return [_golden_pass(by_id.get(str(t.id)), getattr(t, f"{side}_output") or "",
                         float(getattr(t, side)), pass_score) for t in report.tasks]


def plot_curve(reports: Sequence[ImproveRound], path: Path, *,
               golden_label: str = "golden set") -> Path | None:
    """Each round's candidate against the model it started from, on the golden set.

    Round 0 is the starting model (its pass rate also a dashed line across),
    each round's candidate is a point with its 95% Wilson interval: filled and
    labelled ``promoted`` when the gate promoted it, hollow and labelled with
    the gate's decision when it was refused. The pool's pass rate is not drawn:
    it is the sampling model's rate on the tasks it trains on, not the
    candidate's. ``None`` when no round reached its gate.
    """
    from agentic_loop.plots import _pyplot, _save  # the package's one matplotlib set-up

    gated = [r for r in reports if r.golden is not None]
    if not gated:
        return None
    start = gated[0].golden.baseline if gated[0].golden else None
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(7, 4))
    if start is not None and start.pass_rate is not None:
        low, high = start.interval
        ax.axhspan(low, high, color="0.85", zorder=0)
        ax.axhline(start.pass_rate, color="0.4", linestyle="--", linewidth=1,
                   label=f"starting model {start.pass_rate:.0%} (band: 95% interval)")
        ax.errorbar([0], [start.pass_rate],
                    yerr=[[start.pass_rate - low], [high - start.pass_rate]], marker="s",
                    color="0.3", capsize=4)
    shown: set[str] = set()
    for r in gated:
        cand = r.golden.candidate if r.golden else None
        if cand is None or cand.pass_rate is None:
            continue
        low, high = cand.interval
        promoted = bool(r.registration and r.registration.promoted)
        decision = r.decision.value if r.decision else "no decision"
        label = "candidate, promoted" if promoted else f"candidate, refused ({decision})"
        ax.errorbar([r.round], [cand.pass_rate],
                    yerr=[[cand.pass_rate - low], [high - cand.pass_rate]], marker="o",
                    markersize=8, capsize=4, color="tab:green" if promoted else "tab:red",
                    markerfacecolor="tab:green" if promoted else "white",
                    label=None if label in shown else label)
        shown.add(label)
        ax.annotate(f"{cand.pass_rate:.0%} {'promoted' if promoted else decision}",
                    (r.round, cand.pass_rate), textcoords="offset points", xytext=(8, 4),
                    fontsize=8)
    ax.set_xticks(range(0, max(r.round for r in gated) + 1))
    ax.set_xticklabels(["start"] + [str(i) for i in range(1, max(r.round for r in gated) + 1)])
    ax.set_xlim(-0.5, max(r.round for r in gated) + 0.8)
    ax.set_ylim(-0.02, 1.02)
    ax.set_xlabel("improve round (its candidate model)")
    ax.set_ylabel(f"pass rate on the {golden_label}")
    # an agent round's golden numbers are its agents' (the gate ran both with the tools)
    how = "Agent" if any(r.agent and r.agent.candidate for r in gated) else "Single-shot"
    ax.set_title(f"{how} pass rate on the {golden_label}, 95% Wilson intervals", fontsize=10)
    ax.legend(fontsize=8, loc="upper left")
    _save(fig, path)
    return path
