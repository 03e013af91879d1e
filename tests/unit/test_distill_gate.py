"""The promotion gate: decisions on synthetic score sets, and every degenerate input."""

from __future__ import annotations

import math

import numpy as np
import pytest

from agentic_loop.distill.eval.gate import Decision, gate
from agentic_loop.errors import ConfigError


def _scores(seed: int, n: int = 30) -> np.ndarray:
    return np.clip(np.random.default_rng(seed).normal(6.0, 1.0, n), 0, 10)


def test_clearly_better_candidate_is_promoted() -> None:
    base = _scores(1)
    cand = np.clip(base + 1.5 + np.random.default_rng(2).normal(0, 0.5, len(base)), 0, 10)
    d = gate(base.tolist(), cand.tolist())
    assert d.decision is Decision.PROMOTE
    assert d.p_value is not None and d.p_value < 1e-6
    assert d.mean_diff == pytest.approx(cand.mean() - base.mean())
    assert d.n == 30


def test_clearly_worse_candidate_is_rolled_back() -> None:
    base = _scores(3)
    d = gate(base.tolist(), (base * 0.7).tolist())
    assert d.decision is Decision.ROLLBACK
    assert "below 95%" in d.reason


def test_noise_needs_manual_review() -> None:
    base = _scores(4)
    cand = np.clip(base + np.random.default_rng(5).normal(0, 1.0, len(base)), 0, 10)
    d = gate(base.tolist(), cand.tolist())
    assert d.decision is Decision.MANUAL_REVIEW
    assert d.p_value is not None and d.p_value >= 0.05


def test_small_regression_within_five_percent_is_not_a_rollback() -> None:
    base = [8.0, 8.0, 9.0, 9.0]
    d = gate(base, [7.8, 7.9, 8.8, 8.7])  # mean 8.3 vs 8.5: 97.6%
    assert d.decision is Decision.MANUAL_REVIEW


def test_promote_needs_significance_not_just_a_higher_mean() -> None:
    d = gate([5.0, 6.0, 7.0], [9.0, 4.0, 7.5])
    assert d.candidate_mean > d.baseline_mean
    assert d.decision is Decision.MANUAL_REVIEW


def test_alpha_controls_promotion() -> None:
    base, cand = [5, 6, 5, 7, 6, 5], [6, 6, 6, 7, 7, 5]
    loose = gate(base, cand, alpha=0.2, min_tasks=6)
    strict = gate(base, cand, alpha=0.01, min_tasks=6)
    assert loose.p_value == strict.p_value
    assert (loose.decision, strict.decision) == (Decision.PROMOTE, Decision.MANUAL_REVIEW)


def test_identical_scores_have_p_one_and_need_review() -> None:
    d = gate([7.0] * 5, [7.0] * 5)
    assert (d.decision, d.p_value) == (Decision.MANUAL_REVIEW, 1.0)


def test_constant_improvement_is_significant_without_a_nan() -> None:
    d = gate([5.0, 6.0, 7.0], [6.0, 7.0, 8.0], min_tasks=3)  # zero variance of the differences
    assert d.p_value == 0.0
    assert d.decision is Decision.PROMOTE


def test_constant_regression_rolls_back() -> None:
    d = gate([8.0, 9.0, 10.0], [5.0, 6.0, 7.0])
    assert d.decision is Decision.ROLLBACK
    assert d.p_value == 1.0


def test_a_single_pair_cannot_promote() -> None:
    d = gate([5.0], [9.0])
    assert d.p_value is None
    assert d.decision is Decision.MANUAL_REVIEW
    assert "single pair" in d.reason
    assert gate([9.0], [2.0]).decision is Decision.ROLLBACK


def test_zero_baseline_never_rolls_back_on_the_ratio() -> None:
    assert gate([0.0, 0.0, 0.0], [0.0, 0.0, 0.0]).decision is Decision.MANUAL_REVIEW


def test_negative_baseline_mean_still_means_worse() -> None:
    d = gate([-1.0, -1.0, -1.0], [-2.0, -2.5, -2.0])
    assert d.decision is Decision.ROLLBACK


@pytest.mark.parametrize(("base", "cand", "message"), [
    ([1.0, 2.0], [1.0], "2 baseline and 1 candidate"),
    ([], [], "at least one pair"),
    ([1.0, math.nan], [1.0, 2.0], "baseline score #1 is nan"),
    ([1.0, 2.0], [1.0, None], "candidate score #1 is None"),
    ([1.0, True], [1.0, 2.0], "baseline score #1 is True"),
    ([1.0, math.inf], [1.0, 2.0], "finite"),
])
def test_bad_inputs_are_clear_errors(base: list, cand: list, message: str) -> None:
    with pytest.raises(ValueError, match=message.replace("(", r"\(")):
        gate(base, cand)


@pytest.mark.parametrize(("kw", "message"), [({"alpha": 0.0}, "alpha"), ({"alpha": 1.5}, "alpha"),
                                             ({"rollback_ratio": 0.0}, "rollback_ratio"),
                                             ({"rollback_ratio": 1.2}, "rollback_ratio")])
def test_bad_thresholds_are_rejected(kw: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        gate([1.0, 2.0], [1.0, 2.0], **kw)


def test_decision_serializes_and_prints() -> None:
    d = gate([5, 6, 5, 6, 5, 6], [8, 9, 8, 9, 8, 8], min_tasks=6)
    data = d.model_dump(mode="json")
    assert data["decision"] == "PROMOTE" and data["n"] == 6
    assert str(d).startswith("PROMOTE: candidate 8.333 vs baseline 5.500 over 6 tasks")


# -- evidence rules: a promotion needs enough tasks, a real effect and a base it stayed near --

@pytest.mark.parametrize("baseline, candidate", [
    ([5.0, 6.0], [5.01, 6.01]),              # two tasks, +0.01 each, zero variance: p = 0
    ([5.0, 6.0, 7.0], [5.001, 6.001, 7.001]),  # three tasks, +0.001
])
def test_a_tiny_golden_set_never_promotes(baseline: list[float], candidate: list[float]) -> None:
    d = gate(baseline, candidate)
    assert d.p_value == 0.0  # "significant", and still not evidence
    assert d.decision is Decision.MANUAL_REVIEW
    assert f"only {len(baseline)} golden tasks" in d.reason and "at least 20" in d.reason


def test_a_negligible_gain_needs_review_however_many_tasks() -> None:
    base = [float(i % 7) for i in range(40)]
    d = gate(base, [b + 0.001 for b in base])
    assert d.p_value == 0.0 and d.decision is Decision.MANUAL_REVIEW
    assert "below the minimum effect" in d.reason
    assert gate(base, [b + 0.5 for b in base]).decision is Decision.PROMOTE


def test_kl_drift_above_the_limit_rolls_back_even_a_better_candidate() -> None:
    base = [float(i % 7) for i in range(30)]
    better = [b + 2 for b in base]
    assert gate(base, better, kl_drift=0.2).decision is Decision.PROMOTE
    d = gate(base, better, kl_drift=0.7)
    assert d.decision is Decision.ROLLBACK and "KL drift" in d.reason
    assert gate(base, better, kl_drift=0.7, max_kl=1.0).decision is Decision.PROMOTE
    assert d.model_dump(mode="json")["kl_drift"] == 0.7 and d.model_dump()["max_kl"] == 0.5


@pytest.mark.parametrize("kwargs", [{"min_tasks": 1}, {"min_tasks": True}, {"min_effect": -1.0},
                                    {"max_kl": 0.0}, {"kl_drift": float("nan")}])
def test_bad_evidence_settings_are_refused(kwargs: dict) -> None:
    with pytest.raises(ConfigError):
        gate([1.0, 2.0], [2.0, 3.0], **kwargs)
