"""What an improve round is worth, with its uncertainty: pass rates, scores, counts, a curve.

Why intervals: a pool of a dozen tasks and a golden set of twenty give
noisy rates, and "golden 0.45 -> 0.55" means little without its spread.
Rates carry a 95% Wilson interval (sound near 0 and 1 and for small n,
where the normal one is not); mean scores a 95% Student-t interval. The
round's report is ``round-NNN/report.json``; the whole run is
``improve.json`` and ``improve.png`` (golden and pool pass rate per round,
the interval as error bars, round 0 the starting model on the golden set).

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
from agentic_loop.tasks.spec import TaskSpec

__all__ = ["golden_stats", "mean_stats", "plot_curve", "rate_stats", "summary_line", "wilson"]

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
    by_id = {str(g.id): g for g in golden}
    sides = {}
    for side in ("baseline", "candidate"):
        scores = [float(getattr(t, side)) for t in report.tasks]
        flags = [_golden_pass(by_id.get(str(t.id)), getattr(t, f"{side}_output") or "",
                              float(getattr(t, side)), pass_score) for t in report.tasks]
        sides[side] = GoldenRate.of_scores(sum(flags), len(flags), scores)
    return GoldenStats(tasks=len(report.tasks), **sides)


def _fmt_rate(stats: Rate | None) -> str:
    if stats is None or stats.pass_rate is None:
        return "n/a"
    low, high = stats.interval
    return f"{stats.pass_rate:.2f} [{low:.2f}, {high:.2f}]"


def summary_line(report: ImproveRound) -> str:
    """One line for the audit log and the model card: what the round did and found."""
    golden, data = report.golden, report.data
    parts = [f"improve round {report.round} from {report.model}",
             f"pool pass {_fmt_rate(report.pool)}",
             f"golden pass {_fmt_rate(golden.baseline if golden else None)} -> "
             f"{_fmt_rate(golden.candidate if golden else None)}",
             f"sft rows {data.sft_rows if data else 0}, pairs {data.pairs if data else 0}, "
             f"hinted {report.hint.accepted if report.hint else 0}"]
    if report.decision:
        parts.append(f"gate {report.decision.value}")
    return "; ".join(parts)


def _point(x: int, stats: Rate | None) -> list[tuple[float, float, float, float]]:
    if stats is None or stats.pass_rate is None:
        return []
    low, high = stats.interval
    return [(float(x), float(stats.pass_rate), float(low), float(high))]


def plot_curve(reports: Sequence[ImproveRound], path: Path) -> Path | None:
    """The golden and pool pass rate per round, with intervals (``None`` with nothing to plot)."""
    from agentic_loop.plots import plot_rates

    golden: list[tuple[float, float, float, float]] = []
    pool: list[tuple[float, float, float, float]] = []
    for report in reports:
        stats = report.golden
        if not golden:
            golden += _point(0, stats.baseline if stats else None)  # the starting model
        golden += _point(report.round, stats.candidate if stats else None)
        pool += _point(report.round, report.pool)
    if not golden and not pool:
        return None
    plot_rates({"golden (candidate; round 0: start)": golden, "pool samples": pool}, path,
               title="improve: pass rate per round (95% Wilson intervals)")
    return path
