"""The paired statistics the quality bench (and anyone comparing two models) relies on."""

from __future__ import annotations

import math
import random

import pytest

from agentic_loop.distill.eval.stats import (
    compare,
    discordant,
    holm,
    mcnemar_exact,
    mcnemar_power,
    mcnemar_tasks_needed,
    paired_bootstrap,
    verdict,
    wilson,
)
from agentic_loop.errors import AgenticLoopError


def test_mcnemar_exact_matches_the_binomial_tail() -> None:
    # b=10, c=2: 2 * P(X <= 2), X ~ Bin(12, 1/2) = 2 * 79 / 4096
    assert mcnemar_exact(10, 2) == pytest.approx(2 * 79 / 4096)
    assert mcnemar_exact(10, 2) == pytest.approx(0.0386, abs=5e-5)
    assert mcnemar_exact(2, 10) == mcnemar_exact(10, 2)  # two-sided: symmetric
    assert mcnemar_exact(5, 5) == 1.0 and mcnemar_exact(0, 0) == 1.0
    assert mcnemar_exact(0, 5) == pytest.approx(2 / 32)
    from scipy.stats import binomtest  # the reference implementation

    for b, c in [(7, 1), (12, 30), (0, 9), (40, 55), (3, 4)]:
        assert mcnemar_exact(b, c) == pytest.approx(binomtest(b, b + c, 0.5).pvalue)


def test_discordant_counts_wins_and_losses() -> None:
    assert discordant([True, True, False, False], [True, False, True, False]) == (1, 1)
    with pytest.raises(AgenticLoopError, match="same tasks"):
        discordant([True], [True, False])


def test_wilson_is_sane_at_the_edges_and_matches_a_known_value() -> None:
    lo, hi = wilson(8, 10)
    assert (round(lo, 3), round(hi, 3)) == (0.49, 0.943)  # Newcombe (1998), table I
    assert wilson(0, 10)[0] == 0.0 and wilson(10, 10)[1] == 1.0
    assert wilson(0, 0) == (0.0, 1.0)
    with pytest.raises(AgenticLoopError, match="passed"):
        wilson(11, 10)


def test_bootstrap_interval_covers_the_true_difference() -> None:
    rng = random.Random(1)
    covered = 0
    trials = 40
    for t in range(trials):
        base = [rng.uniform(0, 10) for _ in range(200)]
        cand = [b + 0.5 + rng.gauss(0, 2) for b in base]  # true mean difference 0.5
        r = paired_bootstrap(base, cand, resamples=2000, seed=t)
        covered += r.ci95[0] <= 0.5 <= r.ci95[1]
        assert r.ci95[0] < r.mean_diff < r.ci95[1]
    assert covered >= 0.85 * trials  # nominal 95%; allow sampling noise over 40 trials


def test_bootstrap_p_value_separates_a_real_difference_from_none() -> None:
    rng = random.Random(2)
    base = [rng.uniform(0, 10) for _ in range(300)]
    same = [b + rng.gauss(0, 1) for b in base]
    assert paired_bootstrap(base, same, resamples=2000).p_value > 0.01
    better = [b + 1.0 + rng.gauss(0, 1) for b in base]
    assert paired_bootstrap(base, better, resamples=2000).p_value < 0.001
    flat = paired_bootstrap([1.0, 2.0], [1.0, 2.0])
    assert flat.ci95 == (0.0, 0.0) and flat.p_value == 1.0
    with pytest.raises(AgenticLoopError, match="same tasks"):
        paired_bootstrap([1.0], [1.0, 2.0])


def test_tasks_needed_matches_connors_formula_and_is_monotone() -> None:
    # by hand: (1.95996 * sqrt(.3) + 0.84162 * sqrt(.29))^2 / .01 = 233.09 -> 234
    assert mcnemar_tasks_needed(0.3, 0.1) == 234
    # Chow, Shao & Wang, Sample Size Calculations in Clinical Research, sec. 4.5 (after
    # Connor 1987): p01 = 0.45, p10 = 0.05, two-sided alpha 0.05, power 0.8 -> 23 pairs
    assert mcnemar_tasks_needed(0.45 + 0.05, 0.45 - 0.05) == 23
    expected = (1.959964 * math.sqrt(0.2) + 0.841621 * math.sqrt(0.19)) ** 2 / 0.01
    assert mcnemar_tasks_needed(0.2, 0.1) == math.ceil(expected) == 155
    needs = [mcnemar_tasks_needed(psi, 0.1) for psi in (0.1, 0.2, 0.3, 0.5, 0.8)]
    assert needs == sorted(needs)  # more discordance, more noise, more tasks
    assert mcnemar_tasks_needed(0.3, 0.2) < mcnemar_tasks_needed(0.3, 0.1)  # bigger effect
    assert mcnemar_tasks_needed(0.3, 0.1, power=0.9) > mcnemar_tasks_needed(0.3, 0.1)
    assert mcnemar_power(234, 0.3, 0.1) == pytest.approx(0.8, abs=0.01)


def test_tasks_needed_gives_about_the_promised_power_with_the_exact_test() -> None:
    """Exact power of the exact McNemar test at the formula's n is close to 0.8."""
    psi, delta = 0.3, 0.1
    n = mcnemar_tasks_needed(psi, delta)
    p_win = (psi + delta) / 2 / psi  # share of discordant tasks the candidate wins
    power = 0.0
    for d in range(n + 1):
        p_d = math.comb(n, d) * psi**d * (1 - psi) ** (n - d)
        if p_d < 1e-12:
            continue
        power += p_d * sum(math.comb(d, b) * p_win**b * (1 - p_win) ** (d - b)
                           for b in range(d + 1) if mcnemar_exact(b, d - b) < 0.05)
    assert 0.72 < power < 0.85  # the exact test is a little conservative


def test_holm_adjusts_in_input_order() -> None:
    assert holm([0.01, 0.04, 0.03]) == [0.03, 0.06, 0.06]
    assert holm([0.5]) == [0.5] and holm([]) == []


def test_compare_and_verdict() -> None:
    base = [True] * 30 + [False] * 70
    cand = [True] * 30 + [True] * 15 + [False] * 55
    c = compare(base, cand, [10.0 if p else 3.0 for p in base],
                [10.0 if p else 3.0 for p in cand], resamples=2000)
    assert (c.wins, c.losses, c.tasks) == (15, 0, 100)
    assert c.pass_rate_diff == pytest.approx(0.15)
    assert c.pass_rate_diff_ci95[0] > 0 and c.score_diff_ci95 is not None
    assert c.verdict.startswith("better, p<0.001")
    same = compare(base, list(base))
    assert same.verdict == "no detectable difference (p=1)" and same.tasks_needed is None
    noisy = compare([True, False] * 50, [False, True] * 50)
    assert noisy.verdict.startswith("no detectable difference (p=1); needs ~")
    assert noisy.tasks_needed is not None and noisy.tasks_needed > 100
    assert verdict(-0.2, 0.001, None) == "worse, p=0.001"
    assert compare(base, cand, p_for_verdict=0.2).verdict.startswith("no detectable")
    assert compare(base, cand).to_dict()["pass_rate_diff_ci95"][0] > 0
