"""The demo's verdict: the base model against each round's candidate on the same held-out tasks.

Why a module of its own: the release gate answers "is this candidate better
than the model it would replace?" (a paired t-test on scores, round by
round); a newcomer asks "did the loop make the model better than it was?".
Both are read from the gate's own per-task results (``round-NNN/eval.json``:
greedy single-shot answers on the held-out set), so nothing is generated
twice: the base model's answers are round 1's baseline, each round's
candidate is that round's candidate. A task passes when every check of its
locked rubric holds; each candidate is compared with the base model on the
same tasks by an exact McNemar test on the discordant tasks, with a paired
bootstrap 95% interval on the difference
(:func:`~agentic_loop.distill.eval.stats.compare`), and the demo ends on one
line that says what happened.

Example (two rounds on 200 tasks, as :func:`held_out_comparison` returns them):
    >>> base = {"model": "base model", "n": 200, "passed": 34, "pass_rate": 0.17,
    ...         "interval": [0.124, 0.228]}
    >>> r2 = {"model": "round 2", "round": 2, "n": 200, "passed": 62, "pass_rate": 0.31,
    ...       "interval": [0.25, 0.377], "diff": 0.14, "diff_ci95": [0.08, 0.2],
    ...       "p_value": 2e-05, "wins": 34, "losses": 6, "decision": "PROMOTE",
    ...       "promoted": True, "version": "v3", "reason": "significantly better"}
    >>> closing_line({"base": base, "rounds": [r2], "tasks": 200})
    "round 2 passes 31% of 200 held-out tasks against the base model's 17% (+14 points, \
p < 0.001): promoted, now v3"
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from agentic_loop.tables import Col, FitTable, percent
from agentic_loop.tasks.spec import TaskSpec

__all__ = ["closing_line", "comparison_table", "fmt_p", "held_out_comparison"]


def fmt_p(p: float | None) -> str:
    """A p-value as the demo prints it (``p < 0.001``, ``p = 0.03``)."""
    if p is None:
        return "p -"
    return "p < 0.001" if p < 0.001 else f"p = {p:.2g}"


def _rate(name: str, flags: Sequence[bool]) -> dict[str, Any]:
    from agentic_loop.distill.eval.stats import wilson

    n, passed = len(flags), sum(flags)
    return {"model": name, "n": n, "passed": passed, "pass_rate": passed / n if n else None,
            "interval": list(wilson(passed, n))}


def _eval(work: Path, number: int) -> dict[str, Any] | None:
    path = work / f"round-{number:03d}" / "eval.json"
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else None


def held_out_comparison(work: Path, golden: Sequence[TaskSpec], reports: Sequence[Any], *,
                        pass_score: float = 8.0) -> dict[str, Any] | None:
    """The base model and every gated round on the held-out set (``None``: no round was gated).

    ``work`` is the improve run's folder, ``reports`` its rounds
    (:class:`~agentic_loop.distill.loop.records.ImproveRound`).
    """
    from agentic_loop.distill.eval.stats import compare
    from agentic_loop.distill.loop.report import golden_flags

    gated = [(r, e) for r in reports if (e := _eval(work, r.round)) is not None]
    if not gated:
        return None
    first = gated[0][1]
    base_flags = golden_flags(first, golden, "baseline", pass_score=pass_score)
    base_scores = [float(t["baseline"]) for t in first["tasks"]]
    rows = []
    for report, evaluation in gated:
        flags = golden_flags(evaluation, golden, "candidate", pass_score=pass_score)
        scores = [float(t["candidate"]) for t in evaluation["tasks"]]
        c = compare(base_flags, flags, base_scores, scores, resamples=2000)
        reg = report.registration
        reasons = [x for x in report.reasons if x.startswith("single-shot: ")]
        rows.append({**_rate(f"round {report.round}", flags), "round": report.round,
                     "diff": c.pass_rate_diff, "diff_ci95": list(c.pass_rate_diff_ci95),
                     "p_value": c.mcnemar_p, "wins": c.wins, "losses": c.losses,
                     "decision": report.decision.value if report.decision else None,
                     "gate_vs": report.from_version or report.model,
                     "promoted": bool(reg and reg.promoted),
                     "version": reg.version if reg else None,
                     "reason": _reason(reasons[0].removeprefix("single-shot: ") if reasons
                                       else "; ".join(report.reasons))})
    return {"tasks": len(base_flags), "base": _rate("base model", base_flags), "rounds": rows}


def _reason(text: str) -> str:
    """The gate's reason without the decision it starts with (the table shows that)."""
    head, _, rest = text.partition(": ")
    return rest if rest and head in ("PROMOTE", "ROLLBACK", "MANUAL_REVIEW") else text


def _points(diff: float) -> str:
    return f"{100 * diff:+.0f}"


def comparison_table(comparison: Mapping[str, Any]) -> FitTable:
    """Base vs each round's candidate at any width (80 columns included)."""
    n = comparison["tasks"]
    table = FitTable(
        f"held-out: {n} tasks never trained on, single-shot, greedy", [
            Col("model"), Col("pass rate [95% CI]", justify="right", short="pass"),
            Col("vs base, points [95% CI]", justify="right", short="vs base"),
            Col("McNemar p", justify="right", short="p"),
            Col("gate"), Col("version", short="ver", drop=1)],
        caption="gate: the release gate's decision against the model the round started "
                "from (promoted versions serve next)", title_justify="left")
    base = comparison["base"]
    table.add_row("base model", percent(base["pass_rate"], base["interval"]), "", "", "",
                  "")
    for r in comparison["rounds"]:
        low, high = r["diff_ci95"]
        table.add_row(r["model"], percent(r["pass_rate"], r["interval"]),
                      f"{_points(r['diff'])} [{_points(low)}, {_points(high)}]",
                      fmt_p(r["p_value"]).removeprefix("p ").removeprefix("= "),
                      (r["decision"] or "-") + (" *" if r["promoted"] else ""),
                      r["version"] or "-")
    return table


def closing_line(comparison: Mapping[str, Any] | None) -> str:
    """The demo's last line: what the loop did to the model, in one sentence."""
    if not comparison or not comparison.get("rounds"):
        return "no round reached the gate (nothing to train on): the base model is unchanged"
    base, n = comparison["base"], comparison["tasks"]
    rounds = list(comparison["rounds"])
    promoted = [r for r in rounds if r["promoted"]]
    shown = promoted[-1] if promoted else max(rounds, key=lambda r: r["pass_rate"] or 0)
    head = (f"{shown['model']} passes {percent(shown['pass_rate'])} of {n} held-out tasks "
            f"against the base model's {percent(base['pass_rate'])} "
            f"({_points(shown['diff'])} points, {fmt_p(shown['p_value'])})")
    if promoted:
        return f"{head}: promoted, now {shown['version']}"
    return (f"{head}: not promoted ({shown['decision'] or 'no decision'}); the base model "
            "still serves, the loop did not show an improvement")
