"""The promotion gate: does a candidate model beat the baseline on the golden set?

A new model is scored on the same golden tasks as the current one, task by
task, so the scores are *paired*. The gate decides with a paired t-test
(scipy) on the per-task differences:

* **PROMOTE** when the candidate is significantly better: one-sided p-value
  (H1: candidate > baseline) below ``alpha``. One-sided, because only an
  improvement earns a promotion; the "worse" side is the rollback rule's job,
  and a two-sided test would spend half of ``alpha`` on it.
* **ROLLBACK** when the candidate's mean is below ``rollback_ratio`` (95%) of
  the baseline's: a regression big enough to act on without a person.
* **MANUAL_REVIEW** otherwise: no evidence either way; a person decides.

Degenerate inputs get defined answers rather than NaNs: identical per-task
differences (zero variance) give p = 0 when every task improved by the same
amount and p = 1 otherwise; fewer than two pairs cannot be tested (p is
``None``) and never promote. Unequal lengths, empty or non-finite scores are
errors that say which list is wrong.

Example:
    >>> gate([5, 6, 5, 6, 5, 6], [8, 9, 8, 9, 8, 8]).decision
    <Decision.PROMOTE: 'PROMOTE'>
    >>> gate([8, 9, 8, 9], [4, 5, 4, 5]).decision
    <Decision.ROLLBACK: 'ROLLBACK'>
    >>> d = gate([7, 8, 6, 7], [8, 7, 7, 6])
    >>> d.decision, round(d.p_value, 3)
    (<Decision.MANUAL_REVIEW: 'MANUAL_REVIEW'>, 0.5)
    >>> gate([1, 2], [1])
    Traceback (most recent call last):
    ...
    ValueError: gate needs one candidate score per baseline score (paired by task), got 2 baseline and 1 candidate scores.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

__all__ = ["Decision", "GateDecision", "gate"]


class Decision(StrEnum):
    """What to do with a candidate model."""

    PROMOTE = "PROMOTE"
    ROLLBACK = "ROLLBACK"
    MANUAL_REVIEW = "MANUAL_REVIEW"


@dataclass(frozen=True)
class GateDecision:
    """The decision and the numbers behind it."""

    decision: Decision
    baseline_mean: float
    candidate_mean: float
    p_value: float | None
    n: int
    alpha: float
    rollback_ratio: float
    reason: str

    @property
    def mean_diff(self) -> float:
        """Candidate mean minus baseline mean (positive: the candidate scores higher)."""
        return self.candidate_mean - self.baseline_mean

    def to_dict(self) -> dict[str, Any]:
        """Plain data (for JSON reports and the model card)."""
        return {"decision": self.decision.value, "baseline_mean": self.baseline_mean,
                "candidate_mean": self.candidate_mean, "mean_diff": self.mean_diff,
                "p_value": self.p_value, "n": self.n, "alpha": self.alpha,
                "rollback_ratio": self.rollback_ratio, "reason": self.reason}

    def __str__(self) -> str:
        p = "n/a" if self.p_value is None else f"{self.p_value:.4g}"
        return (f"{self.decision.value}: candidate {self.candidate_mean:.3f} vs baseline "
                f"{self.baseline_mean:.3f} over {self.n} tasks (p={p}); {self.reason}")


def _scores(values: Sequence[float], which: str) -> list[float]:
    out = []
    for i, value in enumerate(values):
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            raise ValueError(f"{which} score #{i} is {value!r}; every score must be a finite number "
                             "(score a failed run as 0 rather than leaving it out).")
        out.append(float(value))
    return out


def _one_sided_p(baseline: list[float], candidate: list[float]) -> float:
    diffs = [c - b for b, c in zip(baseline, candidate, strict=True)]
    first = diffs[0]
    if all(abs(d - first) <= 1e-12 for d in diffs):  # zero variance: the t statistic is undefined
        return 0.0 if first > 0 else 1.0
    from scipy.stats import ttest_rel

    return float(ttest_rel(candidate, baseline, alternative="greater").pvalue)


def gate(baseline_scores: Sequence[float], candidate_scores: Sequence[float], *,
         alpha: float = 0.05, rollback_ratio: float = 0.95) -> GateDecision:
    """Decide PROMOTE / ROLLBACK / MANUAL_REVIEW from paired per-task scores (see the module doc)."""
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"alpha is a significance level in (0, 1), got {alpha}.")
    if not 0.0 < rollback_ratio <= 1.0:
        raise ValueError(f"rollback_ratio is a fraction of the baseline mean in (0, 1], got {rollback_ratio}.")
    baseline = _scores(baseline_scores, "baseline")
    candidate = _scores(candidate_scores, "candidate")
    if len(baseline) != len(candidate):
        raise ValueError(
            "gate needs one candidate score per baseline score (paired by task), got "
            f"{len(baseline)} baseline and {len(candidate)} candidate scores.")
    if not baseline:
        raise ValueError("gate needs at least one pair of scores; the golden set produced none.")
    n = len(baseline)
    base_mean, cand_mean = sum(baseline) / n, sum(candidate) / n
    # "below 95% of the baseline", written so a negative baseline mean still means "worse".
    floor = base_mean - (1.0 - rollback_ratio) * abs(base_mean)
    p_value = _one_sided_p(baseline, candidate) if n >= 2 else None
    if cand_mean < floor:
        decision = Decision.ROLLBACK
        reason = (f"the candidate's mean is below {rollback_ratio:.0%} of the baseline's "
                  f"({cand_mean:.3f} < {floor:.3f})")
    elif p_value is None:
        decision = Decision.MANUAL_REVIEW
        reason = "a single pair of scores cannot be tested; score more golden tasks"
    elif p_value < alpha and cand_mean > base_mean:
        decision = Decision.PROMOTE
        reason = f"significantly better (one-sided paired t-test, p < {alpha:g})"
    else:
        decision = Decision.MANUAL_REVIEW
        reason = (f"no significant improvement (p >= {alpha:g}) and no regression beyond "
                  f"{1 - rollback_ratio:.0%}; a person should decide")
    return GateDecision(decision, base_mean, cand_mean, p_value, n, alpha, rollback_ratio, reason)
