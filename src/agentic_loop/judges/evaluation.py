"""The scored, explainable result of judging one output against a rubric.

An :class:`Evaluation` is data (pydantic), so it can be logged in a
trajectory, compared across runs and read back. It keeps every feature's
value, credit and weight, which is what makes the score explainable: the
score is exactly the sum of the per-feature ``points``.

Example:
    >>> from agentic_loop.judges.rubric import Rubric
    >>> ev = Rubric.for_constraints(word_count=(3, 5), no_commas=True).evaluate(
    ...     "task", "One, two, three, four, five, six.")
    >>> ev.score, ev.passed, ev.values
    (4.0, False, {'word_count': 6, 'no_commas': False})
    >>> [c.name for c in ev.failed_checks]
    ['word_count', 'no_commas']
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, computed_field

from agentic_loop.judges.features import FeatureValue

__all__ = ["Evaluation", "FailedCheck", "FeatureResult"]


class FeatureResult(BaseModel):
    """One feature's outcome: its value, the credit it earned and its share of the score."""

    model_config = ConfigDict(frozen=True)

    name: str
    description: str
    source: Literal["check", "llm"]
    kind: Literal["bool", "count"]
    value: FeatureValue
    credit: float
    weight: float
    points: float
    max_points: float
    target: str = ""
    detail: str = ""

    @property
    def hint(self) -> str:
        """The requirement plus what was observed, phrased for a refine prompt."""
        return f"{self.description} ({self.detail})" if self.detail else self.description


class FailedCheck(BaseModel):
    """A check feature that did not fully hold, with a hint on how to fix it."""

    model_config = ConfigDict(frozen=True)

    name: str
    hint: str


class Evaluation(BaseModel):
    """Score (0-10), per-feature values and the reasons behind them.

    ``features`` holds the full record; ``values``, ``passed`` and
    ``failed_checks`` are derived from it (and included when dumped).
    """

    model_config = ConfigDict(frozen=True)

    score: float
    features: list[FeatureResult]
    rubric: str = "rubric"
    rubric_version: str = "1"
    #: reward-hacking guards that fired: flag -> reason (see :mod:`agentic_loop.judges.guards`)
    guards: dict[str, str] = {}
    #: why no check counted (an empty output, the task handed back), or None
    void: str | None = None

    @computed_field  # type: ignore[prop-decorator]
    @property
    def values(self) -> dict[str, FeatureValue]:
        """Feature name -> value (``bool`` or ``int``), in rubric order."""
        return {f.name: f.value for f in self.features}

    @computed_field  # type: ignore[prop-decorator]
    @property
    def passed(self) -> bool:
        """True when every check feature earned full credit (LLM features do not count).

        A voided output (empty, or the task handed back) never passes, even
        under a rubric with no checks.
        """
        return self.void is None and all(
            f.credit >= 1.0 for f in self.features if f.source == "check")

    @property
    def failed_checks(self) -> list[FailedCheck]:
        """The check features short of full credit, each with a fix-it hint."""
        return [
            FailedCheck(name=f.name, hint=f.hint)
            for f in self.features
            if f.source == "check" and f.credit < 1.0
        ]

    @property
    def feedback(self) -> str:
        """Failed checks as instructions for a refine prompt ("" when all hold).

        >>> from agentic_loop.judges.rubric import Rubric
        >>> print(Rubric.for_constraints(exclude_words=["we"]).evaluate("t", "We sell.").feedback)
        Fix these requirements:
        - Do not use the words "we". (found "we")
        """
        failed = self.failed_checks
        head = f"Answer the task itself ({self.void}).\n" if self.void else ""
        if not failed:
            return head.rstrip()
        return head + "Fix these requirements:\n" + "\n".join(f"- {c.hint}" for c in failed)

    def explain(self) -> str:
        """A text table of each feature's value, credit and contribution to the score.

        >>> from agentic_loop.judges.rubric import Rubric
        >>> print(Rubric.for_constraints(exact_words=2).evaluate("t", "Hello there").explain())
        rubric 'constraints' v1: score 10.00/10, checks passed
        feature      source  value  target     credit  points
        exact_words  check   2      exactly 2    1.00  10.00/10.00  2 words
        """
        headers = ("feature", "source", "value", "target", "credit", "points")
        rows = [
            (f.name, f.source, str(f.value), f.target, f"{f.credit:.2f}",
             f"{f.points:.2f}/{f.max_points:.2f}", f.detail)
            for f in self.features
        ]
        widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(headers)]
        status = "checks passed" if self.passed else f"{len(self.failed_checks)} check(s) failed"
        lines = [f"rubric {self.rubric!r} v{self.rubric_version}: "
                 f"score {self.score:.2f}/10, {status}"]
        lines.append("  ".join(h.ljust(w) for h, w in zip(headers, widths)).rstrip())
        for row in rows:
            cells = [c.rjust(w) if i == 4 else c.ljust(w) for i, (c, w) in
                     enumerate(zip(row[:-1], widths))]
            lines.append(("  ".join(cells) + "  " + row[-1]).rstrip())
        return "\n".join(lines)
