"""composite_reward: range, renormalisation of missing parts, weights, latency, validation."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from agentic_loop.distill.data.reward import RewardWeights, composite_reward


def test_rubric_alone_is_the_scaled_score() -> None:
    assert composite_reward(0.0) == 0.0
    assert composite_reward(7.5) == 0.75
    assert composite_reward(10.0) == 1.0


def test_missing_components_are_renormalised() -> None:
    # rubric 0.6 and verifier 0.25 only: (0.6 * 0.5 + 0.25 * 1.0) / 0.85
    assert composite_reward(5.0, verifier_pass_rate=1.0) == pytest.approx(0.55 / 0.85, abs=1e-6)


def test_all_components_with_defaults() -> None:
    reward = composite_reward(8.0, verifier_pass_rate=0.5, feedback="up", latency_s=5.0)
    assert reward == pytest.approx(0.6 * 0.8 + 0.25 * 0.5 + 0.1 * 1.0 + 0.05 * 1.0)


def test_feedback_moves_the_reward() -> None:
    up = composite_reward(6.0, feedback="up")
    down = composite_reward(6.0, feedback="down")
    none = composite_reward(6.0)
    assert down < none < up


def test_latency_penalty_halves_per_doubling_past_the_budget() -> None:
    w = RewardWeights(rubric=0.0, latency=1.0, latency_budget_s=10.0)
    assert composite_reward(5.0, latency_s=0.0, weights=w) == 1.0
    assert composite_reward(5.0, latency_s=10.0, weights=w) == 1.0
    assert composite_reward(5.0, latency_s=20.0, weights=w) == 0.5
    assert composite_reward(5.0, latency_s=40.0, weights=w) == 0.25
    assert composite_reward(9.0, latency_s=1.0) > composite_reward(9.0, latency_s=100.0)


def test_reward_is_always_in_unit_interval() -> None:
    for score in (0.0, 3.3, 10.0):
        for rate in (None, 0.0, 1.0):
            for fb in (None, "up", "down"):
                for lat in (None, 0.1, 1e6):
                    assert 0.0 <= composite_reward(score, rate, fb, lat) <= 1.0  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"rubric_score": 11.0}, r"rubric_score must be a number in \[0, 10\]"),
        ({"rubric_score": -0.1}, "rubric_score must be"),
        ({"rubric_score": float("nan")}, "rubric_score must be"),
        ({"rubric_score": 5.0, "verifier_pass_rate": 1.5}, "verifier_pass_rate must be"),
        ({"rubric_score": 5.0, "feedback": "thumbs"}, "feedback must be 'up', 'down' or None"),
        ({"rubric_score": 5.0, "latency_s": -1.0}, "latency_s must be"),
        ({"rubric_score": 5.0, "weights": RewardWeights(rubric=0.0)},
         "every component given has weight 0"),
    ],
)
def test_invalid_inputs_raise(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        composite_reward(**kwargs)  # type: ignore[arg-type]


def test_weights_are_validated() -> None:
    with pytest.raises(ValidationError):
        RewardWeights(rubric=-1)
    with pytest.raises(ValidationError):
        RewardWeights(latency_budget_s=0)
    with pytest.raises(ValidationError):
        RewardWeights(verifier=float("inf"))
    with pytest.raises(ValidationError):
        RewardWeights(rubrik=1)  # type: ignore[call-arg]


def test_absent_feedback_is_neutral_neither_penalty_nor_bonus() -> None:
    for score in (2.0, 6.0, 9.0):
        for rate in (None, 0.0, 1.0):
            absent = composite_reward(score, rate, None, 5.0)
            assert composite_reward(score, rate, "down", 5.0) < absent
            assert absent < composite_reward(score, rate, "up", 5.0)
            assert absent == composite_reward(score, rate, latency_s=5.0)  # just left out
