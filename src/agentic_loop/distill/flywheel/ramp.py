"""The canary ramp's stage machine: wait, advance, promote or roll back, with the numbers.

Why: a canary that moves on a timer, or on "the numbers look fine", promotes
a worse model as soon as traffic is thin. Here each stage of the ramp
(default 5% -> 25% -> 50% -> 100% of users on the candidate) moves on only
when the candidate is *shown* not worse than the current version on pass
rate, error rate and p99 latency (:mod:`.ramp_stats`: non-inferiority tests,
each with its power), and the ramp stops at the first clear breach.
:func:`judge_stage` is pure: the service calls it on every tick with the
runs each arm served since the stage began and acts on the verdict.

Repeated looks. The service judges every tick, and a test repeated on
growing data finds a chance "not worse" far more often than its level says
(a candidate exactly at the margin, a look every 10 runs from 200 to 2000
per arm: "not worse" in about 15% of stages at a nominal 2.5%). So:

* **"not worse" is decided only at planned looks**: ``looks`` (default
  ``(1, 2, 4)``) times ``min_runs`` runs per arm. Each metric is tested on
  the *first* ``look * min_runs`` entries of its lists (the largest look
  both arms have reached), so every tick between two looks reads the same
  runs and reaches the same verdict: a stage gets at most ``len(looks)``
  distinct chances. Each runs at ``alpha / len(looks)`` (Bonferroni), so the
  chance of a false "not worse" for a candidate at the margin stays at most
  ``alpha / 2`` per metric and stage, however often the service ticks.
  This needs each list in the order observed, oldest first (as the
  service builds them); a list of error *counts* expanded errors-first
  only makes "not worse" harder, never easier.
* **harm ("worse") stays continuous**, on all runs, at the same split
  ``alpha / len(looks)``: a clear breach must stop the canary at once. The
  split keeps false rollbacks rare; repeated looks still raise their rate
  above ``alpha / (2 * len(looks))`` for a candidate *at* the margin. That
  error is the safe one (a candidate that is worse by the margin loses its
  traffic; a retry costs a canary), and for a candidate as good as the
  current version it stays negligible (the interval must clear the margin).

The rules, in the order they are checked:

1. **rollback** at the first breach: a metric whose test says the candidate
   is worse *by more than its margin* (``p_worse < alpha / (2 * len(looks))``),
   checked on every call, before ``min_runs`` too (a clear breach needs no
   more runs), once both arms of that metric have ``min_breach_runs``
   (default 20), so one unlucky failure cannot roll back; p99 latency needs
   :data:`P99_BREACH_RUNS` (100, or ``min_runs`` if lower): the p99 of fewer
   values is their maximum, and a bootstrap of a maximum sees breaches in
   heavy-tailed latencies that are not there;
2. **advance** (**promote** at the last stage) when each metric has reached
   a planned look on both arms and every metric is "not worse" there (the
   interval of the difference stays inside the margin), even if the stage
   is over time: evidence is evidence;
3. **rollback** when ``now - stage_started_at > max_stage_s`` without that
   evidence: never promote on missing evidence (a metric with no data on an
   arm is never "not worse", so the service must fill all three lists);
4. **wait** otherwise, saying what is missing, the next planned look and,
   when the power to detect a drop of ``pass_margin`` (or a rise of
   ``error_margin``) at these runs is below ``power``, how many runs per
   arm would give it. After the last look without evidence the stage waits
   for rule 3: more runs are not tested again.

At a stage that sends all traffic to the candidate (the last, 100%), the
current version serves no one: pass as ``current`` its runs from the stage
before (or its latest window) so the candidate is judged against them.

Example:
    >>> cur = ArmSample(version="v1", passed=[True] * 9 + [False], errors=[False] * 10,
    ...                 latencies_s=[1.0] * 10)
    >>> healthy = cur.model_copy(update={"version": "v2"})
    >>> settings = RampSettings(min_runs=100)
    >>> judge_stage(settings, 0, stage_started_at=0.0, now=60.0, current=cur,
    ...             candidate=healthy).action
    'wait'
    >>> v = judge_stage(settings, 0, stage_started_at=0.0, now=90000.0, current=cur,
    ...                 candidate=healthy)
    >>> v.action, v.reasons[0]
    ('rollback', 'stage 0 ran out of time without evidence the candidate is not worse')
    >>> sick = ArmSample(version="v2", passed=[False] * 30, errors=[False] * 30,
    ...                  latencies_s=[1.0] * 30)
    >>> v = judge_stage(settings, 0, stage_started_at=0.0, now=60.0,
    ...                 current=cur.model_copy(update={"passed": [True] * 30}), candidate=sick)
    >>> v.action, v.reasons[0].split(":")[0]
    ('rollback', 'pass rate is worse beyond its margin')
    >>> [planned_look(settings, n) for n in (99, 100, 250, 400, 5000)]   # 1, 2, 4 x min_runs
    [None, 100, 200, 400, 400]
    >>> look_alpha(settings)                   # Bonferroni over the 3 looks
    0.016666666666666666
"""

from __future__ import annotations

import math
from typing import Literal

from pydantic import ConfigDict, Field, field_validator, model_validator

from agentic_loop.distill.flywheel.ramp_stats import (
    ArmSample,
    Metric,
    StrictModel,
    TestResult,
    compare_errors,
    compare_p99,
    compare_pass,
    runs_needed,
)
from agentic_loop.errors import ConfigError

__all__ = ["P99_BREACH_RUNS", "ArmSample", "RampSettings", "StageVerdict", "TestResult",
           "judge_stage", "look_alpha", "planned_look", "planned_tests"]

Action = Literal["wait", "advance", "promote", "rollback"]

#: latencies per arm before a p99 breach counts (capped at ``min_runs``)
P99_BREACH_RUNS = 100

_LABELS = {"pass_rate": "pass rate", "error_rate": "error rate",
           "p99_latency_s": "p99 latency"}
#: each metric's list in an :class:`ArmSample`
_FIELDS: dict[Metric, str] = {"pass_rate": "passed", "error_rate": "errors",
                              "p99_latency_s": "latencies_s"}


class RampSettings(StrictModel):
    """The ramp's stages, their limits and the tests' margins; bad values raise ConfigError.

    ``stages``: the candidate's traffic share per stage, increasing, in
    (0, 1], ending at 1.0. ``min_runs``: per arm and metric before a stage
    can advance (times ``looks[0]``); ``min_breach_runs``: per arm before a breach can roll back.
    ``alpha`` is two-sided (intervals at ``1 - alpha``); ``power`` the power
    the reasons ask for. Margins: ``pass_margin`` and ``error_margin`` are
    absolute rate differences; ``latency_ratio`` the candidate's p99 over
    the current's. ``looks``: the planned looks, increasing multiples of
    ``min_runs`` per arm, where "not worse" is decided, each at ``alpha /
    len(looks)`` (module doc); harm is checked at that level on every call.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    stages: tuple[float, ...] = (0.05, 0.25, 0.5, 1.0)
    min_runs: int = Field(default=200, ge=1)
    min_breach_runs: int = Field(default=20, ge=1)
    max_stage_s: float = Field(default=24 * 3600, gt=0, allow_inf_nan=False)
    alpha: float = Field(default=0.05, gt=0, lt=1)
    power: float = Field(default=0.8, gt=0, lt=1)
    pass_margin: float = Field(default=0.05, gt=0, lt=1)
    error_margin: float = Field(default=0.02, gt=0, lt=1)
    latency_ratio: float = Field(default=1.5, gt=1, allow_inf_nan=False)
    looks: tuple[int, ...] = (1, 2, 4)

    @field_validator("looks")
    @classmethod
    def _looks_increase(cls, looks: tuple[int, ...]) -> tuple[int, ...]:
        if not looks or looks[0] < 1 or any(b <= a for a, b in zip(looks, looks[1:])):
            raise ConfigError(f"looks must be increasing multiples of min_runs, the first >= 1, "
                              f"got {list(looks)}; e.g. (1, 2, 4)")
        return looks

    @field_validator("stages")
    @classmethod
    def _stages_ramp_up(cls, stages: tuple[float, ...]) -> tuple[float, ...]:
        if not stages:
            raise ConfigError("give at least one stage, the last being 1.0 (all traffic)")
        if any(not (0 < s <= 1) or math.isnan(s) for s in stages):
            raise ConfigError(f"each stage is a traffic share in (0, 1], got {list(stages)}")
        if any(b <= a for a, b in zip(stages, stages[1:])):
            raise ConfigError(f"stages must increase, got {list(stages)}; e.g. (0.05, 0.25, "
                              "0.5, 1.0)")
        if stages[-1] != 1.0:
            raise ConfigError(f"the last stage must be 1.0 (all traffic), got {stages[-1]}; "
                              "append 1.0")
        return stages

    @model_validator(mode="after")
    def _floor_below_minimum(self) -> RampSettings:
        if self.min_breach_runs > self.min_runs:
            raise ConfigError(f"min_breach_runs={self.min_breach_runs} exceeds min_runs="
                              f"{self.min_runs}; lower min_breach_runs (default 20)")
        return self


class StageVerdict(StrictModel):
    """What to do with the candidate after judging ``stage``, why, and the tests behind it."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    action: Action
    stage: int
    fraction: float
    next_fraction: float | None
    reasons: list[str]
    tests: list[TestResult]


def look_alpha(settings: RampSettings) -> float:
    """The two-sided level of each test the ramp acts on: ``alpha`` split over the looks."""
    return settings.alpha / len(settings.looks)


def planned_look(settings: RampSettings, n: int) -> int | None:
    """Runs per arm of the largest planned look ``n`` runs reached (None before the first)."""
    sizes = [k * settings.min_runs for k in settings.looks if k * settings.min_runs <= n]
    return sizes[-1] if sizes else None


def _compare(metric: Metric, settings: RampSettings, current: ArmSample,
             candidate: ArmSample) -> TestResult:
    alpha = look_alpha(settings)
    if metric == "pass_rate":
        return compare_pass(current, candidate, margin=settings.pass_margin, alpha=alpha)
    if metric == "error_rate":
        return compare_errors(current, candidate, margin=settings.error_margin, alpha=alpha)
    return compare_p99(current, candidate, ratio=settings.latency_ratio, alpha=alpha)


def _head(sample: ArmSample, field: str, n: int) -> ArmSample:
    return sample.model_copy(update={field: getattr(sample, field)[:n]})


def planned_tests(settings: RampSettings, current: ArmSample, candidate: ArmSample
                  ) -> list[TestResult]:
    """Each metric's test at its latest planned look, on the first ``look`` entries per arm.

    A metric short of the first look is tested on all its entries (for the
    reasons only: :func:`judge_stage` never advances on it). Between two
    looks the answer does not change as runs arrive.
    """
    tests = []
    for metric, field in _FIELDS.items():
        n = min(len(getattr(current, field)), len(getattr(candidate, field)))
        size = planned_look(settings, n)
        if size is not None:
            current, candidate = _head(current, field, size), _head(candidate, field, size)
        tests.append(_compare(metric, settings, current, candidate))
    return tests


def _harm_tests(settings: RampSettings, current: ArmSample, candidate: ArmSample,
                planned: list[TestResult]) -> list[TestResult]:
    """Each metric's test on all entries (the planned one when it read them all)."""
    out = []
    for t, (metric, field) in zip(planned, _FIELDS.items()):
        whole = (len(getattr(current, field)), len(getattr(candidate, field)))
        out.append(t if t.n == whole else _compare(metric, settings, current, candidate))
    return out


def _value(metric: str, x: float | None) -> str:
    if x is None:
        return "-"
    return f"{x:.3g}s" if metric == "p99_latency_s" else f"{100 * x:.1f}%"


def _interval(t: TestResult) -> str:
    if t.ci95 is None:
        return "no interval yet"
    lo, hi = t.ci95
    if t.metric == "p99_latency_s":
        return f"ratio {lo:.2f}-{hi:.2f}"
    return f"difference {100 * lo:+.1f} to {100 * hi:+.1f} points"


def _margin(t: TestResult) -> str:
    if t.metric == "p99_latency_s":
        return f"at most {t.margin:g}x the current p99"
    side = "lower" if t.metric == "pass_rate" else "higher"
    return f"at most {100 * t.margin:g} points {side}"


def _numbers(t: TestResult) -> str:
    p = "" if t.p_worse is None else f", p_worse={t.p_worse:.2g}"
    return (f"candidate {_value(t.metric, t.candidate)} vs current "
            f"{_value(t.metric, t.current)} ({_interval(t)}, n={t.n[0]}/{t.n[1]}{p}; "
            f"margin {_margin(t)})")


def _power_note(t: TestResult, bad: tuple[list[bool], list[bool]],
                settings: RampSettings) -> str | None:
    """A sentence when a rate test's power is below ``settings.power``, with the runs it needs.

    ``bad`` holds each arm's bad events (failed runs, or errors) behind ``t``.
    """
    if t.power is None or t.power >= settings.power:
        return None
    rate = (sum(bad[0]) + sum(bad[1]) + 1) / (len(bad[0]) + len(bad[1]) + 2)
    need = runs_needed(rate, t.margin, look_alpha(settings), settings.power)
    what = "drop" if t.metric == "pass_rate" else "rise"
    return (f"{_LABELS[t.metric]}: power to detect a {100 * t.margin:g}-point {what} at "
            f"n={t.n[0]}/{t.n[1]} is {100 * t.power:.0f}% (< {100 * settings.power:.0f}%); "
            f"about {need} runs per arm give {100 * settings.power:.0f}%")


def judge_stage(settings: RampSettings, stage: int, *, stage_started_at: float, now: float,
                current: ArmSample, candidate: ArmSample) -> StageVerdict:
    """Judge ``stage`` on each arm's observations since ``stage_started_at`` (seconds, as ``now``).

    See the module doc for the rules; ``reasons`` are sentences with the numbers.
    """
    if not 0 <= stage < len(settings.stages):
        raise ConfigError(f"stage={stage}: the ramp has stages 0..{len(settings.stages) - 1} "
                          f"({list(settings.stages)}); pass the index of the running stage")
    tests = planned_tests(settings, current, candidate)
    harm = _harm_tests(settings, current, candidate, tests)
    fraction = settings.stages[stage]
    last = stage == len(settings.stages) - 1

    def verdict(action: Action, reasons: list[str],
                shown: list[TestResult] = tests) -> StageVerdict:
        return StageVerdict(action=action, stage=stage, fraction=fraction,
                            next_fraction=settings.stages[stage + 1] if action == "advance"
                            else None, reasons=reasons, tests=shown)

    floors = {"p99_latency_s": min(settings.min_runs,
                                   max(settings.min_breach_runs, P99_BREACH_RUNS))}
    breaches = [t for t in harm if t.verdict == "worse"
                and min(t.n) >= floors.get(t.metric, settings.min_breach_runs)]
    if breaches:
        return verdict("rollback", [f"{_LABELS[t.metric]} is worse beyond its margin: "
                                    f"{_numbers(t)}" for t in breaches], harm)
    first = settings.looks[0] * settings.min_runs
    short = [t for t in tests if min(t.n) < first]
    open_ = [t for t in tests if t.verdict != "not worse"]
    failed = ([not x for x in current.passed], [not x for x in candidate.passed])
    notes = [n for n in (_power_note(tests[0], failed, settings),
                         _power_note(tests[1], (current.errors, candidate.errors), settings)) if n]
    level = (f"at alpha {look_alpha(settings):.3g} per look, {len(settings.looks)} planned "
             f"looks")
    if not short and not open_:
        shown = [f"{_LABELS[t.metric]} is not worse: {_numbers(t)}" for t in tests]
        head = (f"stage {stage} ({100 * fraction:g}% of traffic) shows the candidate not worse "
                f"({level})")
        if last:
            return verdict("promote", [f"{head}; promote it", *shown])
        return verdict("advance", [
            f"{head}; advance to {100 * settings.stages[stage + 1]:g}%", *shown])
    missing = [f"{_LABELS[t.metric]} has n={t.n[0]}/{t.n[1]} of the {first} per "
               "arm a stage needs" for t in short]
    missing += [f"{_LABELS[t.metric]} is {t.verdict}: {_numbers(t)}" for t in open_]
    missing.append(_next_look(settings, tests))
    if now - stage_started_at > settings.max_stage_s:
        return verdict("rollback", [
            f"stage {stage} ran out of time without evidence the candidate is not worse",
            f"it ran {now - stage_started_at:.0f}s of at most {settings.max_stage_s:g}s",
            *missing, *notes])
    return verdict("wait", [f"stage {stage} ({100 * fraction:g}% of traffic) waits for "
                            "evidence", *missing, *notes])


def _next_look(settings: RampSettings, tests: list[TestResult]) -> str:
    """When "not worse" is next decided, or that the planned looks are spent."""
    n = min(min(t.n) for t in tests)
    sizes = [k * settings.min_runs for k in settings.looks]
    later = [size for size in sizes if size > n]
    if later:
        return (f"the next planned look is at {later[0]} runs per arm (looks at "
                f"{', '.join(map(str, sizes))}); between looks the verdict does not change")
    return (f"the last planned look ({sizes[-1]} runs per arm) did not show the candidate "
            f"not worse; no later look tests again: the stage rolls back after "
            f"{settings.max_stage_s:g}s")
