"""Is the canary candidate not worse than the current version? One test per metric, with power.

Why a module of its own: the ramp's decisions (:mod:`.ramp`) are only as good
as three comparisons of two independent samples (the runs the proxy sent to
each arm), and those comparisons must be right near 0 (error rates live
there), honest about how little a few hundred runs can show, and written
down in full for the audit log and the status page. Pure functions, no I/O.

One convention for every metric:

* ``alpha`` is two-sided: each interval is the two-sided ``1 - alpha`` one
  (95% at the default 0.05, hence ``ci95``), and each one-sided decision reads
  one of its bounds, so it runs at ``alpha / 2``: the usual non-inferiority
  rule of "the lower bound of the 95% interval stays above the margin".
* ``"not worse"``: the whole interval lies on the good side of the margin;
  ``"worse"``: the whole interval lies beyond it (worse *by more than the
  margin*); ``"undecided"`` otherwise, or with no data on an arm.
* ``p_worse``: the one-sided p-value of "worse by more than the margin",
  found by inverting the interval (the level at which its bound meets the
  margin), so ``p_worse < alpha / 2`` exactly when the verdict is "worse".
* ``power``: the normal-approximation chance of showing "not worse" at these
  ``n`` when the arms are truly equal (the same number as the power of a
  one-sided ``alpha / 2`` test to detect a drop of ``margin``).
  :func:`runs_needed` inverts it for equal arms at rate ``p``:
  ``n = (z_{1-alpha/2} + z_{power})^2 * 2 p (1 - p) / margin^2`` per arm.

Pass rate and error rate: the difference ``candidate - current`` with
Newcombe's hybrid score interval (Newcombe 1998, Stat Med 17:873, method
10), built from each arm's Wilson interval (:func:`~agentic_loop.distill.eval.stats.wilson`),
sound at 0/n where a Wald interval claims certainty. Power uses the pooled
rate with one pass and one failure added, so 0/n does not read as power 1.

p99 latency: the ratio ``candidate / current`` of the arms' 99th
percentiles, by a two-sample bootstrap (each arm resampled on its own) and
its percentile interval; power from the bootstrap's spread of the log ratio
(an approximation: extreme percentiles of a few hundred runs are noisy).

Example:
    >>> runs_needed(0.9, 0.05, 0.05, 0.8)       # per arm, 90% pass rate, 5-point margin
    566
    >>> cur = ArmSample(version="v1", passed=[True] * 90 + [False] * 10)
    >>> bad = ArmSample(version="v2", passed=[True] * 60 + [False] * 40)
    >>> r = compare_pass(cur, bad, margin=0.05, alpha=0.05)
    >>> r.verdict, r.current, r.candidate, r.p_worse < 0.025, r.n
    ('worse', 0.9, 0.6, True, (100, 100))
    >>> compare_pass(cur, cur, margin=0.05, alpha=0.05).verdict   # 100 runs cannot show it yet
    'undecided'
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from statistics import NormalDist
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, ValidationError

from agentic_loop.distill.eval.stats import wilson
from agentic_loop.distill.release.monitor_stats import percentile
from agentic_loop.errors import ConfigError
from agentic_loop.jsonl_log.scan import first_error

__all__ = ["ArmSample", "Metric", "StrictModel", "TestResult", "compare_errors", "compare_p99",
           "compare_pass", "power_not_worse", "runs_needed"]

Metric = Literal["pass_rate", "error_rate", "p99_latency_s"]
Verdict = Literal["worse", "not worse", "undecided"]

_Z_MAX = 40.0  # beyond it a normal tail is 0 in floating point
_NORMAL = NormalDist()


class StrictModel(BaseModel):
    """A record whose bad input raises :class:`ConfigError` naming the field (not pydantic's).

    The message is the first problem, ``field: what is wrong``, and how many
    more (:func:`~agentic_loop.jsonl_log.scan.first_error`).
    """

    model_config = ConfigDict(extra="forbid")

    def __init__(self, **data: Any) -> None:
        try:
            super().__init__(**data)
        except ValidationError as exc:
            raise ConfigError(f"{type(self).__name__}: {first_error(exc)}") from None


class ArmSample(StrictModel):
    """One arm's observations in the stage: per-run verdicts, per-request errors and latencies.

    ``passed``: each run's check verdict (``Trajectory.accepted``); ``errors``:
    per request or run, True when it failed (HTTP >= 500, or a run that
    raised); ``latencies_s``: per request or run, in seconds (finite, >= 0).
    """

    version: str
    passed: list[bool] = []
    errors: list[bool] = []
    latencies_s: list[float] = []

    def model_post_init(self, context: Any, /) -> None:
        bad = [x for x in self.latencies_s if not (math.isfinite(x) and x >= 0)]
        if bad:
            raise ConfigError(f"latencies_s of {self.version!r} has {len(bad)} value(s) that are "
                              f"not finite seconds >= 0 (first {bad[0]!r}); drop or fix them")


class TestResult(BaseModel):
    """One metric's comparison, kept for the audit log and the status page.

    ``ci95`` is the interval of ``candidate - current`` (of the ratio for
    latency) at ``1 - alpha``; ``margin`` the non-inferiority margin (the
    ratio for latency); ``n`` the sample sizes ``(current, candidate)``.
    """

    __test__: ClassVar[bool] = False  # not a pytest class, despite its name
    model_config = ConfigDict(frozen=True)

    metric: Metric
    current: float | None
    candidate: float | None
    ci95: tuple[float, float] | None
    p_worse: float | None
    verdict: Verdict
    power: float | None
    margin: float
    n: tuple[int, int]


def _z(q: float) -> float:
    return _NORMAL.inv_cdf(q)


def _check_level(name: str, value: float) -> None:
    if not 0 < value < 1:
        raise ConfigError(f"{name}={value!r}: pass a number strictly between 0 and 1")


def runs_needed(p: float, margin: float, alpha: float, power: float) -> int:
    """Runs per arm for a two-proportion non-inferiority test to show "not worse" with ``power``.

    ``p`` is the rate both arms share (the current version's pass rate);
    ``alpha`` two-sided, as everywhere here. At least 1.

    >>> runs_needed(0.9, 0.05, 0.05, 0.8) < runs_needed(0.9, 0.03, 0.05, 0.8)
    True
    """
    if not 0 <= p <= 1:
        raise ConfigError(f"p={p!r}: pass the shared rate, a number in [0, 1]")
    _check_level("margin", margin)
    _check_level("alpha", alpha)
    _check_level("power", power)
    root = _z(1 - alpha / 2) + _z(power)
    return max(1, math.ceil(root * root * 2 * p * (1 - p) / (margin * margin) - 1e-9))


def power_not_worse(p: float, margin: float, n_current: int, n_candidate: int,
                    alpha: float) -> float:
    """The chance of showing "not worse" by ``margin`` when both arms truly have rate ``p``.

    >>> round(power_not_worse(0.9, 0.05, 566, 566, 0.05), 2)
    0.8
    >>> power_not_worse(0.9, 0.05, 0, 10, 0.05)
    0.0
    """
    _check_level("margin", margin)
    _check_level("alpha", alpha)
    if n_current < 1 or n_candidate < 1:
        return 0.0
    spread = math.sqrt(p * (1 - p) * (1 / n_current + 1 / n_candidate))
    if spread == 0:
        return 1.0
    return _NORMAL.cdf(margin / spread - _z(1 - alpha / 2))


def _newcombe(bad_cur: int, n_cur: int, bad_cand: int, n_cand: int, z: float
              ) -> tuple[float, float]:
    """Newcombe's hybrid score interval of ``rate_cand - rate_cur`` at normal quantile ``z``."""
    p1, p2 = bad_cur / n_cur, bad_cand / n_cand
    l1, u1 = wilson(bad_cur, n_cur, z)
    l2, u2 = wilson(bad_cand, n_cand, z)
    d = p2 - p1
    return (d - math.sqrt((p2 - l2) ** 2 + (u1 - p1) ** 2),
            d + math.sqrt((u2 - p2) ** 2 + (p1 - l1) ** 2))


def _solve_z(f: Callable[[float], float], target: float, increasing: bool) -> float:
    """The ``z`` in [0, _Z_MAX] where the monotone ``f(z)`` meets ``target`` (an end if never)."""
    lo, hi = 0.0, _Z_MAX
    for _ in range(60):
        mid = (lo + hi) / 2
        if (f(mid) < target) == increasing:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


def _p_worse_rates(bad_cur: int, n_cur: int, bad_cand: int, n_cand: int,
                   margin: float) -> float:
    """One-sided p of "the candidate's bad rate exceeds the current's by more than ``margin``"."""
    def lower(z: float) -> float:
        return _newcombe(bad_cur, n_cur, bad_cand, n_cand, z)[0]

    def upper(z: float) -> float:
        return _newcombe(bad_cur, n_cur, bad_cand, n_cand, z)[1]

    if bad_cand / n_cand - bad_cur / n_cur > margin:  # the lower bound falls to the margin
        return _NORMAL.cdf(-_solve_z(lower, margin, increasing=False))
    return _NORMAL.cdf(_solve_z(upper, margin, increasing=True))


def _compare_rates(metric: Metric, bad_cur: Sequence[bool], bad_cand: Sequence[bool], *,
                   margin: float, alpha: float, flip: bool) -> TestResult:
    """Compare bad-event rates (failures or errors); ``flip`` reports pass rates instead."""
    _check_level("margin", margin)
    _check_level("alpha", alpha)
    n_cur, n_cand = len(bad_cur), len(bad_cand)
    if n_cur == 0 or n_cand == 0:
        def shown(bad: Sequence[bool]) -> float | None:
            return None if not bad else (1 - sum(bad) / len(bad) if flip else sum(bad) / len(bad))

        return TestResult(metric=metric, current=shown(bad_cur), candidate=shown(bad_cand),
                          ci95=None, p_worse=None, verdict="undecided", power=None,
                          margin=margin, n=(n_cur, n_cand))
    x_cur, x_cand = sum(bad_cur), sum(bad_cand)
    lo, hi = _newcombe(x_cur, n_cur, x_cand, n_cand, _z(1 - alpha / 2))
    verdict: Verdict = "worse" if lo > margin else "not worse" if hi < margin else "undecided"
    pooled = (x_cur + x_cand + 1) / (n_cur + n_cand + 2)
    r_cur, r_cand = x_cur / n_cur, x_cand / n_cand
    return TestResult(
        metric=metric, current=1 - r_cur if flip else r_cur,
        candidate=1 - r_cand if flip else r_cand, ci95=(-hi, -lo) if flip else (lo, hi),
        p_worse=_p_worse_rates(x_cur, n_cur, x_cand, n_cand, margin), verdict=verdict,
        power=power_not_worse(pooled, margin, n_cur, n_cand, alpha), margin=margin,
        n=(n_cur, n_cand))


def compare_pass(current: ArmSample, candidate: ArmSample, *, margin: float,
                 alpha: float) -> TestResult:
    """Pass rates: "not worse" when the candidate's is at most ``margin`` (absolute) lower."""
    return _compare_rates("pass_rate", [not x for x in current.passed],
                          [not x for x in candidate.passed], margin=margin, alpha=alpha,
                          flip=True)


def compare_errors(current: ArmSample, candidate: ArmSample, *, margin: float,
                   alpha: float) -> TestResult:
    """Error rates: "not worse" when the candidate's is at most ``margin`` (absolute) higher.

    >>> ok = ArmSample(version="v1", errors=[False] * 300)
    >>> compare_errors(ok, ok.model_copy(update={"version": "v2"}), margin=0.02,
    ...                alpha=0.05).verdict
    'not worse'
    """
    return _compare_rates("error_rate", current.errors, candidate.errors, margin=margin,
                          alpha=alpha, flip=False)


def _boot_p99(values: Any, resamples: int, rng: Any) -> Any:
    """The p99 of ``resamples`` resamples (with replacement) of ``values``, in bounded memory."""
    import numpy as np

    out = np.empty(resamples)
    chunk = max(1, 2_000_000 // len(values))
    for start in range(0, resamples, chunk):
        stop = min(resamples, start + chunk)
        idx = rng.integers(0, len(values), size=(stop - start, len(values)))
        out[start:stop] = np.percentile(values[idx], 99, axis=1)
    return out


def compare_p99(current: ArmSample, candidate: ArmSample, *, ratio: float, alpha: float,
                seed: int = 0, resamples: int = 2000) -> TestResult:
    """p99 latency: "not worse" when the candidate's is at most ``ratio`` times the current's.

    Needs two latencies on each arm (else "undecided"); ``seed`` makes it repeatable.

    >>> fast = ArmSample(version="v1", latencies_s=[1.0 + i / 100 for i in range(100)])
    >>> slow = ArmSample(version="v2", latencies_s=[3.0 * x for x in fast.latencies_s])
    >>> r = compare_p99(fast, slow, ratio=1.5, alpha=0.05)
    >>> r.verdict, round(r.candidate / r.current, 2), r.ci95[0] > 1.5
    ('worse', 3.0, True)
    """
    import numpy as np

    if not ratio > 0 or not math.isfinite(ratio):
        raise ConfigError(f"ratio={ratio!r}: pass how many times the current p99 the "
                          "candidate's may be, a finite number > 0 (e.g. 1.5)")
    _check_level("alpha", alpha)
    if resamples < 100:
        raise ConfigError(f"resamples={resamples}: use at least 100 (2000 is the default)")
    a, b = current.latencies_s, candidate.latencies_s
    n = (len(a), len(b))
    if min(n) < 2:
        return TestResult(metric="p99_latency_s", current=percentile(a, 99),
                          candidate=percentile(b, 99), ci95=None, p_worse=None,
                          verdict="undecided", power=None, margin=ratio, n=n)
    rng = np.random.default_rng(seed)
    q_cur = _boot_p99(np.asarray(a, dtype=float), resamples, rng)
    q_cand = _boot_p99(np.asarray(b, dtype=float), resamples, rng)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratios = np.where(q_cur > 0, q_cand / np.where(q_cur > 0, q_cur, 1.0),
                          np.where(q_cand > 0, np.inf, 1.0))
    lo, hi = (float(x) for x in np.quantile(ratios, [alpha / 2, 1 - alpha / 2],
                                            method="inverted_cdf"))
    verdict: Verdict = "worse" if lo > ratio else "not worse" if hi < ratio else "undecided"
    logs = np.log(ratios[np.isfinite(ratios) & (ratios > 0)])
    spread = float(logs.std()) if len(logs) > 1 else 0.0
    power = (_NORMAL.cdf(math.log(ratio) / spread - _z(1 - alpha / 2)) if spread > 0
             else 1.0 if ratio > 1 else 0.0)
    return TestResult(
        metric="p99_latency_s", current=percentile(a, 99), candidate=percentile(b, 99),
        ci95=(lo, hi), p_worse=(1 + int(np.sum(ratios <= ratio))) / (1 + resamples),
        verdict=verdict, power=power, margin=ratio, n=n)
