"""The promotion gate: does a candidate model beat the baseline on the golden set?

A new model is scored on the same golden tasks as the current one, task by
task, so the scores are *paired*. The gate decides with a paired t-test
(scipy) on the per-task differences, and asks for evidence before it lets a
model through, because a promoted model is what every later run uses:

* **ROLLBACK** when the candidate drifted too far from its base (KL
  divergence above ``max_kl``, 0.5 nats per token by default: a model that
  far from its base has likely collapsed or been reward-hacked, whatever its
  scores), or when its mean is below ``rollback_ratio`` (95%) of the
  baseline's: a regression big enough to act on without a person.
* **PROMOTE** only with evidence: at least ``min_tasks`` golden tasks (20 by
  default: two tasks that each gained 0.01 prove nothing), a mean gain of
  at least ``min_effect`` score points (0.1 on the 0-10 scale by default:
  a significant but negligible gain is not worth a new model), and a
  one-sided p-value (H1: candidate > baseline) below ``alpha``. One-sided,
  because only an improvement earns a promotion; the "worse" side is the
  rollback rule's job.
* **MANUAL_REVIEW** otherwise, with the reason (too few tasks, too small an
  effect, no significance): a person decides.

Degenerate inputs get defined answers rather than NaNs: identical per-task
differences (zero variance) give p = 0 when every task improved by the same
amount and p = 1 otherwise (the task-count and effect rules still apply);
fewer than two pairs cannot be tested (p is ``None``). Unequal lengths,
empty or non-finite scores are errors that say which list is wrong.

Example:
    >>> gate([5, 6, 5, 6, 5, 6] * 4, [8, 9, 8, 9, 8, 8] * 4).decision
    <Decision.PROMOTE: 'PROMOTE'>
    >>> d = gate([5, 6, 5, 6, 5, 6], [8, 9, 8, 9, 8, 8])   # the same gain on 6 tasks
    >>> d.decision, d.reason
    (<Decision.MANUAL_REVIEW: 'MANUAL_REVIEW'>, 'only 6 golden tasks; promotion needs at least 20')
    >>> gate([8, 9, 8, 9], [4, 5, 4, 5]).decision
    <Decision.ROLLBACK: 'ROLLBACK'>
    >>> gate([5, 6] * 10, [8, 9] * 10, kl_drift=0.9).reason
    'KL drift from the base is 0.9 > 0.5: the candidate moved too far from its base model'
    >>> d = gate([7, 8, 6, 7], [8, 7, 7, 6])
    >>> d.decision, round(d.p_value, 3)
    (<Decision.MANUAL_REVIEW: 'MANUAL_REVIEW'>, 0.5)
    >>> gate([1, 2], [1])
    Traceback (most recent call last):
    ...
    agentic_loop.errors.ConfigError: gate needs one candidate score per baseline score ...
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from enum import StrEnum

from pydantic import BaseModel, ConfigDict, computed_field

from agentic_loop.errors import ConfigError

__all__ = ["Decision", "GateDecision", "gate", "release_gate"]


class Decision(StrEnum):
    """What to do with a candidate model."""

    PROMOTE = "PROMOTE"
    ROLLBACK = "ROLLBACK"
    MANUAL_REVIEW = "MANUAL_REVIEW"


class GateDecision(BaseModel):
    """The release gate's decision and the numbers behind it (a record: ``model_dump`` is its JSON).

    >>> d = gate([5, 6] * 10, [8, 9] * 10)
    >>> GateDecision.model_validate(d.model_dump(mode="json")) == d
    True
    """

    model_config = ConfigDict(frozen=True)

    decision: Decision
    baseline_mean: float
    candidate_mean: float
    p_value: float | None
    n: int
    alpha: float
    rollback_ratio: float
    reason: str
    min_tasks: int = 20
    min_effect: float = 0.1
    kl_drift: float | None = None
    max_kl: float = 0.5

    @computed_field  # type: ignore[prop-decorator]
    @property
    def mean_diff(self) -> float:
        """Candidate mean minus baseline mean (positive: the candidate scores higher)."""
        return self.candidate_mean - self.baseline_mean

    def to_dict(self) -> dict[str, object]:
        """Plain data, as JSON has it: kept for one release; use ``model_dump(mode="json")``."""
        return self.model_dump(mode="json")

    def __str__(self) -> str:
        p = "n/a" if self.p_value is None else f"{self.p_value:.4g}"
        return (f"{self.decision.value}: candidate {self.candidate_mean:.3f} vs baseline "
                f"{self.baseline_mean:.3f} over {self.n} tasks (p={p}); {self.reason}")


def _scores(values: Sequence[float], which: str) -> list[float]:
    out = []
    for i, value in enumerate(values):
        number = isinstance(value, (int, float)) and not isinstance(value, bool)
        if not number or not math.isfinite(value):
            raise ConfigError(f"{which} score #{i} is {value!r}; every score must be a finite "
                              "number (score a failed run as 0 rather than leaving it out)")
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
         alpha: float = 0.05, rollback_ratio: float = 0.95, min_tasks: int = 20,
         min_effect: float = 0.1, kl_drift: float | None = None,
         max_kl: float = 0.5) -> GateDecision:
    """Decide PROMOTE / ROLLBACK / MANUAL_REVIEW from paired per-task scores (see module doc).

    ``kl_drift`` is the candidate's measured KL divergence from its base
    (nats per token, :func:`~agentic_loop.distill.eval.drift.kl_drift`);
    ``None`` when it was not measured.
    """
    if not 0.0 < alpha < 1.0:
        raise ConfigError(f"alpha is a significance level in (0, 1), got {alpha}")
    if not 0.0 < rollback_ratio <= 1.0:
        raise ConfigError("rollback_ratio is a fraction of the baseline mean in (0, 1], "
                          f"got {rollback_ratio}")
    if isinstance(min_tasks, bool) or not isinstance(min_tasks, int) or min_tasks < 2:
        raise ConfigError(f"min_tasks is a number of golden tasks >= 2, got {min_tasks!r}")
    if not (math.isfinite(min_effect) and min_effect >= 0):
        raise ConfigError(f"min_effect is a score gain >= 0, got {min_effect!r}")
    if not (math.isfinite(max_kl) and max_kl > 0):
        raise ConfigError(f"max_kl is a KL divergence > 0 (nats per token), got {max_kl!r}")
    if kl_drift is not None and not math.isfinite(kl_drift):
        raise ConfigError(f"kl_drift must be a finite number or None, got {kl_drift!r}")
    baseline = _scores(baseline_scores, "baseline")
    candidate = _scores(candidate_scores, "candidate")
    if len(baseline) != len(candidate):
        raise ConfigError(
            "gate needs one candidate score per baseline score (paired by task), got "
            f"{len(baseline)} baseline and {len(candidate)} candidate scores")
    if not baseline:
        raise ConfigError("gate needs at least one pair of scores; the golden set produced none")
    n = len(baseline)
    base_mean, cand_mean = sum(baseline) / n, sum(candidate) / n
    # "below 95% of the baseline", written so a negative baseline mean still means "worse".
    floor = base_mean - (1.0 - rollback_ratio) * abs(base_mean)
    p_value = _one_sided_p(baseline, candidate) if n >= 2 else None
    gain = cand_mean - base_mean
    if kl_drift is not None and kl_drift > max_kl:
        decision = Decision.ROLLBACK
        reason = (f"KL drift from the base is {kl_drift:.3g} > {max_kl:g}: the candidate moved "
                  "too far from its base model")
    elif cand_mean < floor:
        decision = Decision.ROLLBACK
        reason = (f"the candidate's mean is below {rollback_ratio:.0%} of the baseline's "
                  f"({cand_mean:.3f} < {floor:.3f})")
    elif p_value is None:
        decision = Decision.MANUAL_REVIEW
        reason = "a single pair of scores cannot be tested; score more golden tasks"
    elif n < min_tasks:
        decision = Decision.MANUAL_REVIEW
        reason = f"only {n} golden tasks; promotion needs at least {min_tasks}"
    elif gain < min_effect:
        decision = Decision.MANUAL_REVIEW
        reason = (f"the mean gain {gain:+.3f} is below the minimum effect {min_effect:g}; "
                  "too small to be worth a new model")
    elif p_value < alpha:
        decision = Decision.PROMOTE
        reason = (f"significantly better (one-sided paired t-test, p < {alpha:g}) by "
                  f"{gain:+.3f} over {n} tasks")
    else:
        decision = Decision.MANUAL_REVIEW
        reason = (f"no significant improvement (p >= {alpha:g}) and no regression beyond "
                  f"{1 - rollback_ratio:.0%}; a person should decide")
    return GateDecision(decision=decision, baseline_mean=base_mean, candidate_mean=cand_mean,
                        p_value=p_value, n=n, alpha=alpha, rollback_ratio=rollback_ratio,
                        reason=reason, min_tasks=min_tasks, min_effect=min_effect,
                        kl_drift=kl_drift, max_kl=max_kl)


#: The release gate's name where "gate" alone is ambiguous: the *data gate* is the export's
#: filters (the score threshold, the PII gate); this one decides a candidate model's release.
release_gate = gate
