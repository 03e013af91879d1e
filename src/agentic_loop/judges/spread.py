"""Does the score tell outputs apart? Spread of the composite vs the LLM's own grade.

A judge is only useful if its scores differ when outputs differ. For a set of
critiques of different outputs, :func:`spread_report` measures, on each
scale, the standard deviation, the number of distinct values and the range of:

* the **composite** score (0-10) the rubric computed;
* the **checks-only** score: the same formula over the check features alone,
  which shows honestly how much the LLM features add (or do not);
* the model's raw **overall_score** (1-10) each critique also returned;
* optionally a **baseline** list, e.g. :class:`~agentic_loop.judges.llm_judge.LLMJudge`
  scores of the same outputs.

It also lists each feature's distinct values: a feature that never changes
(an LLM answering ``True`` to everything) adds nothing but an offset.

Example:
    >>> from agentic_loop.judges.rubric import Rubric
    >>> r = Rubric.for_constraints(word_count=(3, 5), no_commas=True)
    >>> evs = [r.evaluate("t", o) for o in ("one two three", "one, two", "a b c d e f g h")]
    >>> report = spread_report(evs, baseline=[9, 9, 9])
    >>> report.composite.distinct, report.baseline.distinct
    (3, 1)
    >>> print(report)  # doctest: +NORMALIZE_WHITESPACE
    spread over 3 outputs
    score          scale   mean   std    min    max   distinct
    composite      0-10    6.78  2.73   3.33  10.00   3
    baseline       1-10    9.00  0.00   9.00   9.00   1
    feature        source  distinct  values
    word_count     check   3         2, 3, 8
    no_commas      check   2         False, True
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence

from pydantic import BaseModel, ConfigDict

from agentic_loop.errors import ConfigError
from agentic_loop.judges.critic import Critique
from agentic_loop.judges.evaluation import Evaluation

__all__ = ["FeatureSpread", "Spread", "SpreadReport", "spread_report"]


class Spread(BaseModel):
    """Summary of one list of scores."""

    model_config = ConfigDict(frozen=True)

    n: int
    mean: float
    std: float
    min: float
    max: float
    distinct: int

    @classmethod
    def of(cls, scores: Sequence[float]) -> Spread:
        """Population statistics of ``scores`` (which must not be empty).

        >>> Spread.of([9, 9, 8]).distinct
        2
        """
        values = [float(s) for s in scores]
        if not values:
            raise ConfigError("cannot measure the spread of an empty list of scores")
        return cls(n=len(values), mean=statistics.fmean(values), std=statistics.pstdev(values),
                   min=min(values), max=max(values), distinct=len(set(values)))

    @property
    def range(self) -> float:
        """``max - min``."""
        return self.max - self.min


class FeatureSpread(BaseModel):
    """How one feature's value varied across the outputs."""

    model_config = ConfigDict(frozen=True)

    name: str
    source: str
    distinct: int
    values: list[str]


class SpreadReport(BaseModel):
    """Spread of the composite, checks-only, LLM overall and baseline scores, per feature too."""

    model_config = ConfigDict(frozen=True)

    n: int
    composite: Spread
    checks_only: Spread | None = None
    llm_overall: Spread | None = None
    baseline: Spread | None = None
    features: list[FeatureSpread]

    def __str__(self) -> str:
        rows = [("composite", "0-10", self.composite), ("checks only", "0-10", self.checks_only),
                ("llm overall", "1-10", self.llm_overall), ("baseline", "1-10", self.baseline)]
        lines = [f"spread over {self.n} outputs",
                 f"{'score':<14} {'scale':<6} {'mean':>5} {'std':>5} {'min':>6} {'max':>6}"
                 "   distinct"]
        for label, scale, s in rows:
            if s is not None:
                lines.append(f"{label:<14} {scale:<6} {s.mean:5.2f} {s.std:5.2f} "
                             f"{s.min:6.2f} {s.max:6.2f}   {s.distinct}")
        lines.append(f"{'feature':<14} {'source':<7} {'distinct':<9} values")
        for f in self.features:
            lines.append(f"{f.name:<14} {f.source:<7} {f.distinct:<9} {', '.join(f.values)}")
        return "\n".join(lines)


def _checks_only(ev: Evaluation) -> float | None:
    checks = [f for f in ev.features if f.source == "check"]
    total = sum(f.weight for f in checks)
    if not checks or total <= 0:
        return None
    return 10.0 * sum(f.weight * f.credit for f in checks) / total


def spread_report(items: Sequence[Critique | Evaluation], *,
                  baseline: Sequence[float] | None = None) -> SpreadReport:
    """Measure how much the scores of ``items`` (critiques or evaluations) vary.

    ``baseline`` optionally gives one other score per item (same order), e.g.
    from :class:`~agentic_loop.judges.llm_judge.LLMJudge`. The checks-only
    row appears when the rubric has both check and LLM features; the LLM
    overall row when every item is a critique with an ``overall_score``.
    """
    if not items:
        raise ConfigError("spread_report needs at least one critique or evaluation")
    evaluations: list[Evaluation] = []
    for i, item in enumerate(items):
        if isinstance(item, Critique):
            evaluations.append(item.evaluation)
        elif isinstance(item, Evaluation):
            evaluations.append(item)
        else:
            raise ConfigError(
                f"item {i} is a {type(item).__name__}; expected a Critique or Evaluation")
    names = [f.name for f in evaluations[0].features]
    for i, ev in enumerate(evaluations):
        if [f.name for f in ev.features] != names:
            raise ConfigError(f"item {i} was scored with different features than item 0 "
                             f"({[f.name for f in ev.features]} vs {names}); compare one rubric")
    if baseline is not None and len(baseline) != len(items):
        raise ConfigError(f"baseline has {len(baseline)} scores for {len(items)} items; "
                         "give one per item, in the same order")
    checks_only = None
    if {f.source for f in evaluations[0].features} == {"check", "llm"}:
        partial = [_checks_only(ev) for ev in evaluations]
        if all(p is not None for p in partial):
            checks_only = Spread.of([p for p in partial if p is not None])
    overall = [item.overall_score for item in items if isinstance(item, Critique)]
    llm_overall = (Spread.of([o for o in overall if o is not None])
                   if len(overall) == len(items) and all(o is not None for o in overall) else None)
    features = []
    for j, name in enumerate(names):
        values = sorted({ev.features[j].value for ev in evaluations},
                        key=lambda v: (str(type(v)), v))
        features.append(FeatureSpread(name=name, source=evaluations[0].features[j].source,
                                      distinct=len(values), values=[str(v) for v in values]))
    return SpreadReport(
        n=len(items),
        composite=Spread.of([ev.score for ev in evaluations]),
        checks_only=checks_only,
        llm_overall=llm_overall,
        baseline=Spread.of(baseline) if baseline is not None else None,
        features=features,
    )
