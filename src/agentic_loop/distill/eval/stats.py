"""Paired statistics for "is model/loop B better than A on the same tasks?".

Why paired: when two systems answer the *same* tasks, most of the spread in
their pass rates comes from the tasks (some are easy for both, some hard for
both), not from the systems. A paired test looks only at the tasks where the
two disagree, so it needs far fewer tasks than comparing two independent
intervals: two Wilson intervals can overlap while the paired test is clear.

* :func:`wilson`: the 95% interval of one pass rate (sound at 0/n and n/n).
* :func:`mcnemar_exact`: pass/fail against pass/fail. Only discordant tasks
  count: ``b`` (B passed, A failed) and ``c`` (A passed, B failed); under
  "no difference" each discordant task is a fair coin, so the two-sided
  p-value is the exact binomial tail ``min(1, 2 P(X <= min(b, c)))``,
  ``X ~ Bin(b + c, 1/2)``.
* :func:`paired_bootstrap`: a mean per-task difference (scores, or 0/1
  passes for the pass-rate difference) with a percentile 95% interval from
  resampling tasks, and a two-sided p-value from the resamples re-centred
  on "no difference".
* :func:`mcnemar_tasks_needed`: how many tasks a McNemar test needs to see a
  pass-rate difference ``delta`` at ``alpha`` with ``power``, given the
  rate of discordant tasks ``psi`` (Connor 1987, Biometrics 43:207; it gives the
  23 pairs of the example in Chow, Shao & Wang, *Sample Size Calculations in
  Clinical Research*, for p01 = 0.45, p10 = 0.05):
  ``n = (z_{1-a/2} sqrt(psi) + z_{power} sqrt(psi - delta^2))^2 / delta^2``.
* :func:`holm`: Holm's step-down adjustment when several rows are each
  compared with one baseline (ten comparisons at 0.05 find a "winner" by
  chance 40% of the time).
* :func:`compare`: all of the above for one candidate against a baseline,
  with a verdict sentence the numbers allow.

Example:
    >>> round(mcnemar_exact(10, 2), 4)          # 12 discordant tasks, 10 of them wins
    0.0386
    >>> [round(x, 3) for x in wilson(8, 10)]
    [0.49, 0.943]
    >>> mcnemar_tasks_needed(psi=0.3, delta=0.1)
    234
    >>> c = compare([True, False] * 50, [True, True] * 50, [5.0, 2.0] * 50, [5.0, 9.0] * 50)
    >>> (c.wins, c.losses, c.verdict)
    (50, 0, 'better, p<0.001')
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from statistics import NormalDist
from typing import Any

from pydantic import BaseModel, ConfigDict

from agentic_loop.errors import ConfigError

__all__ = ["Bootstrap", "Comparison", "compare", "discordant", "holm", "mcnemar_exact",
           "mcnemar_power", "mcnemar_tasks_needed", "paired_bootstrap", "t_interval", "verdict",
           "wilson"]

Z95 = 1.959963984540054


def wilson(passed: int, total: int, z: float = Z95) -> tuple[float, float]:
    """The Wilson score interval of ``passed / total``; ``(0, 1)`` when there is no task.

    >>> wilson(0, 20)[0], round(wilson(0, 20)[1], 3)
    (0.0, 0.161)
    """
    if not 0 <= passed <= total:
        raise ConfigError(f"wilson needs 0 <= passed <= total, got passed={passed}, "
                          f"total={total}; count passes among the tasks scored")
    if total == 0:
        return 0.0, 1.0
    p = passed / total
    denom = 1 + z * z / total
    centre = (p + z * z / (2 * total)) / denom
    half = z * math.sqrt(p * (1 - p) / total + z * z / (4 * total * total)) / denom
    return (0.0 if passed == 0 else max(0.0, centre - half),
            1.0 if passed == total else min(1.0, centre + half))


def t_interval(values: Sequence[float]) -> tuple[float, float] | None:
    """The Student-t 95% interval of the mean of ``values``; ``None`` below two values.

    >>> [round(x, 3) for x in t_interval([7.0, 8.0, 9.0])]
    [5.516, 10.484]
    >>> t_interval([5.0]) is None
    True
    """
    if len(values) < 2:
        return None
    from scipy.stats import t

    n = len(values)
    mean = sum(values) / n
    sd = math.sqrt(sum((v - mean) ** 2 for v in values) / (n - 1))
    half = float(t.ppf(0.975, n - 1)) * sd / math.sqrt(n)
    return mean - half, mean + half


def _paired(a: Sequence[Any], b: Sequence[Any], what: str) -> None:
    if len(a) != len(b):
        raise ConfigError(f"paired {what} need one value per task on both sides, got "
                          f"{len(a)} and {len(b)}; score both systems on the same tasks")


def discordant(baseline: Sequence[bool], candidate: Sequence[bool]) -> tuple[int, int]:
    """``(b, c)``: tasks only the candidate passed, and tasks only the baseline passed.

    >>> discordant([True, False, False, True], [True, True, True, False])
    (2, 1)
    """
    _paired(baseline, candidate, "pass/fail lists")
    wins = sum(1 for a, b in zip(baseline, candidate) if b and not a)
    losses = sum(1 for a, b in zip(baseline, candidate) if a and not b)
    return wins, losses


def _binom_cdf_half(k: int, n: int) -> float:
    """``P(X <= k)`` for ``X ~ Bin(n, 1/2)``, exact (integer sums, then one division)."""
    return sum(math.comb(n, i) for i in range(k + 1)) / 2**n


def mcnemar_exact(b: int, c: int) -> float:
    """Two-sided exact McNemar p-value from the discordant counts ``b`` and ``c``.

    >>> mcnemar_exact(0, 0), mcnemar_exact(3, 3)
    (1.0, 1.0)
    >>> round(mcnemar_exact(0, 6), 4)                # 6 of 6 discordant tasks one way
    0.0312
    """
    if b < 0 or c < 0:
        raise ConfigError(f"discordant counts are >= 0, got b={b}, c={c}")
    n = b + c
    if n == 0:
        return 1.0
    return min(1.0, 2 * _binom_cdf_half(min(b, c), n))


class Bootstrap(BaseModel):
    """A paired mean difference (candidate - baseline), its 95% interval and p-value."""

    model_config = ConfigDict(frozen=True)

    mean_diff: float
    ci95: tuple[float, float]
    p_value: float
    resamples: int


def paired_bootstrap(baseline: Sequence[float], candidate: Sequence[float], *,
                     resamples: int = 10_000, seed: int = 0) -> Bootstrap:
    """Resample tasks with replacement: percentile 95% interval and a two-sided p-value.

    The p-value counts resampled means of the differences *re-centred on zero*
    at least as far from zero as the observed mean (``(1 + hits) / (1 + resamples)``,
    so it is never exactly 0). Identical differences on every task have no
    spread: the interval is that value and p is 1 when it is 0, else ``1/(1+resamples)``.

    >>> r = paired_bootstrap([1.0, 2.0, 3.0, 4.0] * 10, [2.0, 2.5, 3.0, 5.0] * 10)
    >>> r.mean_diff, r.ci95[0] > 0, r.p_value < 0.01
    (0.625, True, True)
    """
    import numpy as np

    _paired(baseline, candidate, "score lists")
    if not baseline:
        raise ConfigError("paired_bootstrap needs at least one task; score some tasks first")
    if resamples < 100:
        raise ConfigError(f"resamples={resamples}: use at least 100 (10000 is the default)")
    diffs = np.asarray(candidate, dtype=float) - np.asarray(baseline, dtype=float)
    if not np.all(np.isfinite(diffs)):
        raise ConfigError("paired_bootstrap got a non-finite score; score a failed run as 0")
    observed = float(diffs.mean())
    if float(diffs.std()) == 0.0:
        return Bootstrap(mean_diff=observed, ci95=(observed, observed),
                         p_value=1.0 if observed == 0 else 1 / (1 + resamples),
                         resamples=resamples)
    rng = np.random.default_rng(seed)
    means = np.empty(resamples)
    chunk = max(1, 2_000_000 // len(diffs))  # bounded memory for long task lists
    for start in range(0, resamples, chunk):
        stop = min(resamples, start + chunk)
        idx = rng.integers(0, len(diffs), size=(stop - start, len(diffs)))
        means[start:stop] = diffs[idx].mean(axis=1)
    lo, hi = np.percentile(means, [2.5, 97.5])
    hits = int(np.sum(np.abs(means - observed) >= abs(observed) - 1e-12))
    return Bootstrap(mean_diff=observed, ci95=(float(lo), float(hi)),
                     p_value=(1 + hits) / (1 + resamples), resamples=resamples)


def _z(q: float) -> float:
    return NormalDist().inv_cdf(q)


def mcnemar_tasks_needed(psi: float, delta: float = 0.1, *, alpha: float = 0.05,
                         power: float = 0.8) -> int:
    """Tasks a two-sided McNemar test needs to detect a pass-rate difference ``delta``.

    ``psi`` is the share of discordant tasks (one passes, the other fails);
    it cannot be below ``delta`` (every point of difference is a discordant
    task), so a smaller planning value is raised to ``delta``.

    >>> mcnemar_tasks_needed(0.2, 0.1) < mcnemar_tasks_needed(0.4, 0.1)
    True
    """
    if not 0 < delta < 1:
        raise ConfigError(f"delta is a pass-rate difference in (0, 1), got {delta}")
    if not 0 < alpha < 1 or not 0 < power < 1:
        raise ConfigError(f"alpha and power are in (0, 1), got alpha={alpha}, power={power}")
    if not 0 <= psi <= 1:
        raise ConfigError(f"psi is a share of discordant tasks in [0, 1], got {psi}")
    psi = max(psi, delta)
    root = _z(1 - alpha / 2) * math.sqrt(psi) + _z(power) * math.sqrt(psi - delta**2)
    return math.ceil(root**2 / delta**2)


def mcnemar_power(n: int, psi: float, delta: float, *, alpha: float = 0.05) -> float:
    """The normal-approximation power of McNemar's test on ``n`` tasks (Connor 1987).

    >>> round(mcnemar_power(234, 0.3, 0.1), 2)
    0.8
    """
    if n < 1 or not 0 < delta <= psi <= 1:
        raise ConfigError(f"mcnemar_power needs n >= 1 and 0 < delta <= psi <= 1, got n={n}, "
                          f"psi={psi}, delta={delta}")
    spread = math.sqrt(psi - delta**2)
    if spread == 0:
        return 1.0
    z = (delta * math.sqrt(n) - _z(1 - alpha / 2) * math.sqrt(psi)) / spread
    return NormalDist().cdf(z)


def holm(p_values: Sequence[float]) -> list[float]:
    """Holm step-down adjusted p-values, in the input order (family-wise error control).

    >>> holm([0.01, 0.04, 0.03])
    [0.03, 0.06, 0.06]
    """
    order = sorted(range(len(p_values)), key=lambda i: p_values[i])
    adjusted = [0.0] * len(p_values)
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (len(p_values) - rank) * p_values[i]))
        adjusted[i] = float(f"{running:.12g}")  # 12 significant digits: tiny p stays > 0
    return adjusted


def _p(p: float, label: str = "p") -> str:
    return f"{label}<0.001" if p < 0.001 else f"{label}={p:.2g}" if p < 1 else f"{label}=1"


def verdict(diff: float, p_value: float, needed: int | None, *, alpha: float = 0.05,
            delta: float = 0.1, label: str = "p") -> str:
    """The sentence a pass-rate comparison allows: better, worse, or how many tasks it needs.

    ``label`` names the p-value (e.g. ``"Holm p"`` for an adjusted one).

    >>> verdict(0.12, 0.003, 180)
    'better, p=0.003'
    >>> verdict(0.03, 0.41, 620)
    'no detectable difference (p=0.41); needs ~620 tasks for 10 points'
    """
    if p_value < alpha:
        return f"{'better' if diff > 0 else 'worse'}, {_p(p_value, label)}"
    need = f"; needs ~{needed} tasks for {100 * delta:.0f} points" if needed else ""
    return f"no detectable difference ({_p(p_value, label)}){need}"


class Comparison(BaseModel):
    """A candidate against a baseline on the same tasks (differences: candidate - baseline).

    A pydantic record: ``model_dump(mode="json")`` is its JSON (tuples as lists).
    """

    model_config = ConfigDict(frozen=True)

    tasks: int
    wins: int  # candidate passed, baseline failed
    losses: int  # baseline passed, candidate failed
    pass_rate_diff: float
    pass_rate_diff_ci95: tuple[float, float]
    mcnemar_p: float
    score_diff: float | None
    score_diff_ci95: tuple[float, float] | None
    bootstrap_p: float | None
    discordance: float
    tasks_needed: int | None  # for ``delta`` at alpha 0.05, power 0.8, this discordance
    delta: float
    verdict: str

    def to_dict(self) -> dict[str, Any]:
        """Plain data: kept for one release; use ``model_dump(mode="json")``."""
        return self.model_dump(mode="json")


def compare(baseline_passed: Sequence[bool], candidate_passed: Sequence[bool],
            baseline_scores: Sequence[float] | None = None,
            candidate_scores: Sequence[float] | None = None, *, delta: float = 0.1,
            alpha: float = 0.05, p_for_verdict: float | None = None, resamples: int = 10_000,
            seed: int = 0) -> Comparison:
    """Exact McNemar on passes, paired bootstraps on passes and scores, and a power note.

    ``p_for_verdict`` replaces the McNemar p in the verdict (e.g. a Holm-adjusted one).
    """
    _paired(baseline_passed, candidate_passed, "pass/fail lists")
    n = len(baseline_passed)
    if n == 0:
        raise ConfigError("compare needs at least one task; score some tasks first")
    wins, losses = discordant(baseline_passed, candidate_passed)
    rate = paired_bootstrap([float(x) for x in baseline_passed],
                            [float(x) for x in candidate_passed], resamples=resamples, seed=seed)
    score = (paired_bootstrap(baseline_scores, candidate_scores, resamples=resamples, seed=seed)
             if baseline_scores is not None and candidate_scores is not None else None)
    p = mcnemar_exact(wins, losses)
    psi = (wins + losses) / n
    needed = mcnemar_tasks_needed(psi, delta, alpha=alpha) if psi > 0 else None
    diff = (wins - losses) / n
    return Comparison(
        tasks=n, wins=wins, losses=losses, pass_rate_diff=diff,
        pass_rate_diff_ci95=rate.ci95, mcnemar_p=p,
        score_diff=None if score is None else score.mean_diff,
        score_diff_ci95=None if score is None else score.ci95,
        bootstrap_p=None if score is None else score.p_value, discordance=psi,
        tasks_needed=needed, delta=delta,
        verdict=verdict(diff, p if p_for_verdict is None else p_for_verdict, needed,
                        alpha=alpha, delta=delta))
