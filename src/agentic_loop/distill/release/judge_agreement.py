"""The agreement alarm: does the judge still agree with people?

Why: the judge's score and verdict train the model (judged GRPO rewards,
self-rewarding DPO pairs) and gate runs, but nothing in the loop checks the
judge itself. People's labels (:class:`~agentic_loop.trajectories.ReviewLabel`,
from ``agentic-loop review`` or a LangSmith annotation queue) are that check:
per judge model and per registry version that served the runs, the judge's
score is compared with the people's 1-5 rating by Spearman's rank
correlation, and the run's verdict (``Trajectory.accepted``) with theirs
(accept/reject) by Cohen's kappa.

What is compared, and why not the run's final score: ``final_score`` mixes
the checks' points with the judge's, and a run whose checks dominate it says
nothing about the judge. So the judge's score is its own part: the rubric's
judged (LLM) features alone, as the output round recorded them
(``Round.features``), scored by the rubric itself (:meth:`Rubric.score
<agentic_loop.judges.rubric.Rubric.score>` of a rubric of those features,
0-10). A run that recorded no judged part (no saved rubric, a rubric of
names only, or missing values) falls back to ``final_score``; each row says
which it used (``score``: judged, final or mixed, with the counts).

Which labels decide: review sampling puts edge cases first (scores near the
threshold, judge and checks disagreeing, guard flags), and an edge case has
a restricted score range: Spearman on them is biased low (false alarms) and
kappa in ways nobody knows. So a label records how its run was drawn
(``ReviewLabel.drawn``), and the alarm decides on the random stratum alone:
runs the sample's hash drew (``"random"``) and runs labelled outside a queue
(``None``). Edge-case labels are reported beside it (``edge``: their own
counts, Spearman and kappa) and never raise the alarm.

The judge of a run is its output round's ``Round.judge``; a run the checks
decided alone (``None``) had no judge to check and is only counted. Each
statistic is judged only once it rests on at least ``min_labels`` random
labels (default 20; a handful of labels cannot raise the alarm), and
breaches below ``threshold`` (default 0.7, the seeds' Spearman line). While
the alarm is raised, the improve loop trains on no judged reward
(:func:`judged_rewards_allowed`); checks-only rewards still train.

Which version served a run: as the monitor attributes runs
(:mod:`~agentic_loop.distill.release.monitor_stats`); without a registry, or
for a run of no registry version, the version is ``None``.

Example:
    >>> from agentic_loop.trajectories import ReviewLabel, Round, Trajectory
    >>> def run(score, rating, verdict, drawn=None):
    ...     return Trajectory(architecture="a", model_id="m", task="t", final_score=score,
    ...                       accepted=score >= 5, rounds=[Round(iteration=0, draft="d",
    ...                                                          judge="judge-m")],
    ...                       review=ReviewLabel(trajectory_id="x", rating=rating,
    ...                                          verdict=verdict, drawn=drawn))
    >>> ratings = [1, 2, 3, 4, 5] * 4
    >>> agreeing = [run(2.0 * r, r, "accept" if r >= 3 else "reject") for r in ratings]
    >>> report = judge_agreement(agreeing, min_labels=20)
    >>> row = report.rows[0]
    >>> (row.judge, row.labels, row.spearman, row.kappa, row.status, row.score, report.raised)
    ('judge-m', 20, 1.0, 1.0, 'agrees', 'final', False)
    >>> flipped = [run(10.0 - 2.0 * r, r, "accept" if r >= 3 else "reject") for r in ratings]
    >>> judged_rewards_allowed(flipped)[0]
    False
    >>> edge = [run(10.0 - 2.0 * r, r, "reject", drawn="edge") for r in ratings]
    >>> row = judge_agreement(agreeing + edge).rows[0]    # edge cases never alarm alone
    >>> (row.labels, row.edge.labels, row.edge.spearman, row.breached)
    (20, 20, -1.0, False)

    The judge's own part, when the run recorded it (a check worth 3, a judged feature 1):

    >>> rubric = {"features": [{"name": "short", "constraint": "max_words", "value": 9,
    ...                         "weight": 3.0}, {"name": "kind", "description": "Kind?"}]}
    >>> t = Trajectory(architecture="a", model_id="m", task="t", rubric=rubric, final_output="d",
    ...                final_score=7.5, rounds=[Round(iteration=0, draft="d", judge="j",
    ...                                               features={"short": True, "kind": False})])
    >>> judged_score(t), t.final_score
    (0.0, 7.5)
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from functools import lru_cache
from typing import TYPE_CHECKING, Literal

from pydantic import BaseModel, ConfigDict, Field

from agentic_loop.trajectories import Trajectory

if TYPE_CHECKING:
    from agentic_loop.distill.release.registry import Registry
    from agentic_loop.judges import Rubric

__all__ = ["AgreementReport", "JudgeAgreement", "Stratum", "cohen_kappa", "judge_agreement",
           "judge_of", "judged_rewards_allowed", "judged_score", "spearman"]

#: ``undefined``: enough labels, but no statistic is defined (one side gave one value throughout)
Status = Literal["breach", "agrees", "too few labels", "undefined"]
#: which score a row compared with people's ratings: the judge's own part, the run's final
#: score (no judged part recorded), or some runs of each
ScoreUsed = Literal["judged", "final", "mixed"]


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


class Stratum(BaseModel):
    """The agreement on one stratum of labels (the random draw, or the edge cases).

    ``labels``: runs carrying a person's verdict or rating; ``ratings`` and
    ``verdicts``: how many of them Spearman and kappa rest on.
    """

    model_config = ConfigDict(frozen=True)

    labels: int = 0
    ratings: int = 0
    verdicts: int = 0
    spearman: float | None = None
    kappa: float | None = None


class JudgeAgreement(BaseModel):
    """One judge on the runs of one version, against people's labels.

    ``labels``, ``ratings``, ``verdicts``, ``spearman`` and ``kappa`` are the
    random stratum's, the one the alarm decides on (``unqueued`` of its labels
    were given outside a queue); ``edge`` holds the edge cases' own numbers,
    reported but never alarming. ``score`` says which score met the ratings
    (``judged_scores`` runs by the judge's own part, ``final_scores`` by the
    final score), over both strata.
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
    unqueued: int = 0
    edge: Stratum = Field(default_factory=Stratum)
    score: ScoreUsed = "final"
    judged_scores: int = 0
    final_scores: int = 0


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


@lru_cache(maxsize=64)
def _judged_rubric(saved_json: str) -> Rubric | None:
    """The rubric of a saved rubric's judged features alone (no check, no constraint), or
    None when it saved none (or names only: a rubric with unsaveable custom checks)."""
    from agentic_loop.judges import Feature, Rubric
    from agentic_loop.judges.rubric import saved_llm_features

    judged = saved_llm_features(json.loads(saved_json))
    if not judged:
        return None
    try:
        return Rubric([Feature.from_dict(f) for f in judged], name="judged part")
    except (TypeError, ValueError):  # ConfigError is a ValueError: a malformed saved rubric
        return None


def judged_score(trajectory: Trajectory) -> float | None:
    """The judge's own part of the run's score: its judged (LLM) features on the output
    round, scored 0-10 by the rubric of those features alone; None when the run recorded
    no judged part (see the module docstring for the fallback)."""
    output = trajectory.output_round()
    if output is None or output.judge is None:
        return None
    try:  # one judged-part rubric per saved rubric, however many runs share it
        rubric = _judged_rubric(json.dumps(trajectory.rubric, sort_keys=True))
    except (TypeError, ValueError):  # metadata JSON cannot hold: no saved rubric to read
        return None
    if rubric is None or any(f.name not in output.features for f in rubric.features):
        return None
    try:
        return rubric.score({f.name: f.validate_value(output.features[f.name])
                             for f in rubric.features})
    except (TypeError, ValueError):  # a recorded value of the wrong kind: not a judged part
        return None


def _stratum(runs: Sequence[tuple[Trajectory, float | None]]) -> Stratum:
    rated = [(score, t.review.rating) for t, score in runs
             if t.review is not None and t.review.rating is not None and score is not None]
    voted = [(t.accepted, t.review.verdict == "accept") for t, _ in runs
             if t.review is not None and t.review.verdict is not None]
    return Stratum(labels=len(runs), ratings=len(rated), verdicts=len(voted),
                   spearman=spearman([s for s, _ in rated], [float(r) for _, r in rated]),
                   kappa=cohen_kappa([j for j, _ in voted], [p for _, p in voted]))


def _fmt(value: float | None) -> str:
    return "undefined" if value is None else format(value, ".2f")


def _row(judge: str, version: str | None, runs: Sequence[Trajectory], threshold: float,
         min_labels: int) -> JudgeAgreement:
    scored = [(t, judged_score(t)) for t in runs]
    n_judged = sum(1 for _, s in scored if s is not None)
    scored = [(t, t.final_score if s is None else s) for t, s in scored]
    edge_runs = [(t, s) for t, s in scored if t.review is not None and t.review.drawn == "edge"]
    rnd = _stratum([(t, s) for t, s in scored  # the random draw, and labels of no queue
                    if t.review is None or t.review.drawn != "edge"])
    edge = _stratum(edge_runs)
    who = f"judge {judge}{_on(version)}"
    counted = [(name, value, n) for name, value, n in (
        ("spearman", rnd.spearman, rnd.ratings), ("kappa", rnd.kappa, rnd.verdicts))
        if n >= min_labels]
    low = [f"{name} {value:.2f} on {n} labels < {threshold:g}" for name, value, n in counted
           if value is not None and value < threshold]
    status: Status = "breach" if low else "agrees"
    if low:
        reason = (f"{who} disagrees with people: {'; '.join(low)}; judged rewards are off "
                  "until it agrees again (relabel, or change the judge or its rubric)")
    elif counted:
        shown = [f"{name} {_fmt(value)} on {n} labels" for name, value, n in counted]
        if all(value is None for _, value, _ in counted):
            status = "undefined"
            reason = (f"no agreement measurable: {', '.join(shown)} (one side gave one value "
                      "throughout)")
        else:
            reason = f"agrees with people: {', '.join(shown)} (alarm below {threshold:g})"
    else:
        status = "too few labels"
        most = max(rnd.ratings, rnd.verdicts)
        reason = (f"too few labels: {rnd.ratings} ratings and {rnd.verdicts} verdicts of "
                  f"the random draw; {min_labels - most} more needed (at least {min_labels} "
                  "for either)")
    if edge.labels:
        reason += (f"; {edge.labels} edge-case labels (not a random draw, they never raise the "
                   f"alarm): spearman {_fmt(edge.spearman)}, kappa {_fmt(edge.kappa)}")
    n_final = len(scored) - n_judged
    used: ScoreUsed = "final" if not n_judged else "judged" if not n_final else "mixed"
    if used != "judged":
        reason += (f"; {n_final} of {len(scored)} runs recorded no judged part: their final "
                   "score stood in for the judge's")
    return JudgeAgreement(
        judge=judge, version=version, labels=rnd.labels, ratings=rnd.ratings,
        verdicts=rnd.verdicts, spearman=rnd.spearman, kappa=rnd.kappa,
        breached=bool(low), reason=reason, status=status,
        unqueued=sum(1 for t in runs if t.review is not None and t.review.drawn is None),
        edge=edge, score=used, judged_scores=n_judged, final_scores=n_final)


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
