"""The agreement alarm: does the judge still agree with people?

Why: the judge's score and verdict train the model (judged GRPO rewards,
self-rewarding DPO pairs) and gate runs, but nothing in the loop checks the
judge itself. People's labels (:class:`~agentic_loop.trajectories.ReviewLabel`,
from ``agentic-loop review`` or a LangSmith annotation queue) are that check:
per judge model and per registry version that served the runs, the judge's
score (``Trajectory.final_score``, 0-10) is compared with the people's 1-5
rating by Spearman's rank correlation, and the judge's verdict
(``Trajectory.accepted``) with theirs (accept/reject) by Cohen's kappa.

The judge of a run is its last round's ``Round.judge``; a run the checks
decided alone (``None``) had no judge to check and is only counted. Each
statistic is judged only once it rests on at least ``min_labels`` labels
(default 20; a handful of labels cannot raise the alarm), and breaches
below ``threshold`` (default 0.7, the seeds' Spearman line). While the alarm
is raised, the improve loop trains on no judged reward
(:func:`judged_rewards_allowed`); checks-only rewards still train.

Which version served a run: as the monitor attributes runs
(:mod:`~agentic_loop.distill.release.monitor_stats`); without a registry, or
for a run of no registry version, the version is ``None``.

Example:
    >>> from agentic_loop.trajectories import ReviewLabel, Round, Trajectory
    >>> def run(score, rating, verdict):
    ...     return Trajectory(architecture="a", model_id="m", task="t", final_score=score,
    ...                       accepted=score >= 5, rounds=[Round(iteration=0, draft="d",
    ...                                                          judge="judge-m")],
    ...                       review=ReviewLabel(trajectory_id="x", rating=rating,
    ...                                          verdict=verdict))
    >>> ratings = [1, 2, 3, 4, 5] * 4
    >>> agreeing = [run(2.0 * r, r, "accept" if r >= 3 else "reject") for r in ratings]
    >>> report = judge_agreement(agreeing, min_labels=20)
    >>> row = report.rows[0]
    >>> (row.judge, row.labels, row.spearman, row.kappa, row.status, report.raised)
    ('judge-m', 20, 1.0, 1.0, 'agrees', False)
    >>> flipped = [run(10.0 - 2.0 * r, r, "accept" if r >= 3 else "reject") for r in ratings]
    >>> judged_rewards_allowed(flipped)[0]
    False
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Literal

from pydantic import BaseModel, ConfigDict, Field

from agentic_loop.trajectories import Trajectory

if TYPE_CHECKING:
    from agentic_loop.distill.release.registry import Registry

__all__ = ["AgreementReport", "JudgeAgreement", "cohen_kappa", "judge_agreement", "judge_of",
           "judged_rewards_allowed", "spearman"]

#: ``undefined``: enough labels, but no statistic is defined (one side gave one value throughout)
Status = Literal["breach", "agrees", "too few labels", "undefined"]


def spearman(xs: Sequence[float], ys: Sequence[float]) -> float | None:
    """Spearman's rank correlation of paired values; None under 3 pairs or with a constant side.

    >>> spearman([1, 2, 3, 4], [10, 20, 30, 45]), spearman([1, 2, 3], [3, 2, 1])
    (1.0, -1.0)
    >>> spearman([1, 2], [1, 2]), spearman([1, 2, 3], [4, 4, 4])
    (None, None)
    """
    if len(xs) != len(ys) or len(xs) < 3 or len(set(xs)) < 2 or len(set(ys)) < 2:
        return None
    from scipy.stats import spearmanr

    rho = float(spearmanr(xs, ys).statistic)
    return None if math.isnan(rho) else rho


def cohen_kappa(a: Sequence[bool], b: Sequence[bool]) -> float | None:
    """Cohen's kappa of two raters' yes/no on the same items; None with no items, or when
    chance agreement is already certain (both said the same one thing throughout).

    >>> cohen_kappa([True, False, True, False], [True, False, True, False])
    1.0
    >>> cohen_kappa([True, True, False, False], [True, False, True, False])
    0.0
    >>> cohen_kappa([True, True], [True, True]) is None
    True
    """
    n = len(a)
    if n == 0 or n != len(b):
        return None
    observed = sum(x == y for x, y in zip(a, b, strict=True)) / n
    pa, pb = sum(a) / n, sum(b) / n
    chance = pa * pb + (1 - pa) * (1 - pb)
    if chance >= 1.0:
        return None
    return (observed - chance) / (1 - chance)


class JudgeAgreement(BaseModel):
    """One judge on the runs of one version, against people's labels.

    ``labels``: its runs carrying a person's verdict or rating; ``ratings``
    and ``verdicts``: how many of them Spearman and kappa rest on.
    """

    model_config = ConfigDict(frozen=True)

    judge: str
    version: str | None
    labels: int
    ratings: int
    verdicts: int = 0
    spearman: float | None
    kappa: float | None
    breached: bool
    reason: str
    status: Status = "agrees"


class AgreementReport(BaseModel):
    """Every (judge, version) row, the thresholds, and the labelled runs no judge decided."""

    model_config = ConfigDict(frozen=True)

    rows: list[JudgeAgreement] = Field(default_factory=list)
    threshold: float
    min_labels: int
    #: labelled runs the checks decided alone (no judge to compare with the people)
    unjudged: int = 0

    @property
    def raised(self) -> bool:
        """True while any judge disagrees with people past the threshold."""
        return any(r.breached for r in self.rows)

    def describe(self) -> str:
        """One line: the breaching rows' reasons, or why nothing is raised."""
        breached = [r for r in self.rows if r.breached]
        if breached:
            return "; ".join(r.reason for r in breached)
        if not self.rows:
            return ("no labelled run with a judge: nothing to check the judge against "
                    f"({self.unjudged} labelled runs were decided by the checks alone)"
                    if self.unjudged else "no labelled run with a judge: nothing to check "
                    "the judge against")
        return "; ".join(f"{r.judge}{_on(r.version)}: {r.reason}" for r in self.rows)


def _on(version: str | None) -> str:
    return f" on {version}" if version else ""


def judge_of(trajectory: Trajectory) -> str | None:
    """The model that judged the run's output round (None: the checks decided it alone)."""
    output = trajectory.output_round()
    return output.judge if output is not None else None


def _row(judge: str, version: str | None, runs: Sequence[Trajectory], threshold: float,
         min_labels: int) -> JudgeAgreement:
    rated = [(t.final_score, t.review.rating) for t in runs
             if t.review is not None and t.review.rating is not None and t.final_score is not None]
    voted = [(t.accepted, t.review.verdict == "accept") for t in runs
             if t.review is not None and t.review.verdict is not None]
    rho = spearman([s for s, _ in rated], [float(r) for _, r in rated])
    kappa = cohen_kappa([j for j, _ in voted], [p for _, p in voted])
    who = f"judge {judge}{_on(version)}"
    counted = [(name, value, n) for name, value, n in (("spearman", rho, len(rated)),
                                                       ("kappa", kappa, len(voted)))
               if n >= min_labels]
    low = [f"{name} {value:.2f} on {n} labels < {threshold:g}" for name, value, n in counted
           if value is not None and value < threshold]
    status: Status = "breach" if low else "agrees"
    if low:
        reason = (f"{who} disagrees with people: {'; '.join(low)}; judged rewards are off "
                  "until it agrees again (relabel, or change the judge or its rubric)")
    elif counted:
        shown = [f"{name} {'undefined' if value is None else format(value, '.2f')} on {n} "
                 "labels" for name, value, n in counted]
        if all(value is None for _, value, _ in counted):
            status = "undefined"
            reason = (f"no agreement measurable: {', '.join(shown)} (one side gave one value "
                      "throughout)")
        else:
            reason = f"agrees with people: {', '.join(shown)} (alarm below {threshold:g})"
    else:
        status = "too few labels"
        most = max(len(rated), len(voted))
        reason = (f"too few labels: {len(rated)} ratings and {len(voted)} verdicts; "
                  f"{min_labels - most} more needed (at least {min_labels} for either)")
    return JudgeAgreement(judge=judge, version=version, labels=sum(
        1 for t in runs if t.review is not None and (t.review.rating is not None or
                                                     t.review.verdict is not None)),
        ratings=len(rated), verdicts=len(voted), spearman=rho, kappa=kappa,
        breached=bool(low), reason=reason, status=status)


def judge_agreement(trajectories: Sequence[Trajectory], *, threshold: float = 0.7,
                    min_labels: int = 20, registry: Registry | None = None,
                    served_names: Sequence[str] | None = None) -> AgreementReport:
    """Agreement of each judge with people, per judge model and version (see the module doc).

    ``registry`` attributes each run to the version that served it, as the
    monitor does (``served_names`` as in :func:`~.monitor.monitor`); without
    it every row's version is None. A run given twice (same id) counts once.
    """
    from agentic_loop.errors import ConfigError

    if min_labels < 1 or not -1.0 <= threshold <= 1.0:
        raise ConfigError(f"min_labels must be at least 1 (got {min_labels}) and threshold "
                          f"between -1 and 1 (got {threshold}); the default is 20 and 0.7")
    vmap, order = None, []
    if registry is not None:
        from agentic_loop.distill.release.monitor_stats import VersionMap, answered_by

        vmap = VersionMap.from_registry(registry, served_names)
        order = [v.version for v in registry.versions()]
    latest: dict[str, Trajectory] = {}
    for t in trajectories:  # a run read twice (two sources) counts once, with its label
        if t.review is not None or t.id not in latest:
            latest[t.id] = t
    groups: dict[tuple[str, str | None], list[Trajectory]] = {}
    unjudged = 0
    for t in latest.values():
        label = t.review
        if label is None or (label.rating is None and label.verdict is None):
            continue
        judge = judge_of(t)
        if judge is None:
            unjudged += 1
            continue
        version = vmap.version_of(answered_by(t), t.created_at) if vmap is not None else None
        groups.setdefault((judge, version), []).append(t)

    def key(k: tuple[str, str | None]) -> tuple[str, int, str]:
        v = k[1]
        return (k[0], order.index(v) if v in order else len(order), v or "")

    rows = [_row(j, v, groups[(j, v)], threshold, min_labels) for j, v in sorted(groups, key=key)]
    return AgreementReport(rows=rows, threshold=threshold, min_labels=min_labels,
                           unjudged=unjudged)


def judged_rewards_allowed(trajectories: Sequence[Trajectory], *, threshold: float = 0.7,
                           min_labels: int = 20, judge: str | None = None) -> tuple[bool, str]:
    """Whether the improve loop may train on judged rewards now, and why.

    False while any judge's alarm is raised (only ``judge``'s, when given: a
    model id as ``Round.judge`` records it), pooling every version's runs.
    Checks-only rewards are never refused here.

    >>> judged_rewards_allowed([])
    (True, 'no labelled run with a judge: nothing to check the judge against')
    """
    report = judge_agreement(trajectories, threshold=threshold, min_labels=min_labels)
    if judge is not None:
        own = [r for r in report.rows if r.judge == judge]
        if report.raised and sum(r.labels for r in own) < min_labels:
            # fail closed: a judge people have not checked yet (a new round's model id)
            # is no better known than the one they found disagreeing
            return False, (f"judge {judge} has fewer than {min_labels} labels of its own and "
                           f"another judge's alarm is raised: {report.describe()}")
        report = report.model_copy(update={"rows": own})
    if report.raised:
        return False, f"agreement alarm raised: {report.describe()}"
    return True, report.describe()
