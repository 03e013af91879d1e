"""One reward in [0, 1] from every signal a run leaves behind.

Training (rejection sampling, preference pairs) needs a single number per
run. It blends up to four components, each first mapped to ``[0, 1]``:

==============  ==========================================  ==============
component       mapping                                     default weight
==============  ==========================================  ==============
rubric          ``rubric_score / 10``                       0.60
verifier        pass rate of tests / exact checks           0.25
feedback        ``"up"`` -> 1, ``"down"`` -> 0               0.10
latency         ``min(1, latency_budget_s / latency_s)``    0.05
==============  ==========================================  ==============

The latency component is 1 within the budget (default 10 s) and halves each
time the latency doubles past it: a penalty for slow runs that never goes
negative. A component that is missing (``None``) is left out and the
remaining weights are renormalised: feedback no user gave is neutral, the
reward is what the other components say (no penalty, no bonus), and it lies
between the rewards of the same run rated down and rated up.

The export feeds the verifier term wherever a task has verifier checks (an
exact answer, unit tests: their credit from the recorded check values, see
:mod:`agentic_loop.distill.data.verdicts`), for every draft as well as the
final output.

Example:
    >>> composite_reward(8.0)
    0.8
    >>> composite_reward(8.0, verifier_pass_rate=1.0, feedback="down", latency_s=20.0)
    0.755
    >>> composite_reward(10.0, feedback="up", weights=RewardWeights(rubric=1, feedback=3))
    1.0
"""

from __future__ import annotations

import math
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from agentic_loop.errors import ConfigError

__all__ = ["RewardWeights", "composite_reward"]


class RewardWeights(BaseModel):
    """Relative weights of the reward components (any scale; renormalised), latency budget."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    rubric: float = Field(default=0.60, ge=0)
    verifier: float = Field(default=0.25, ge=0)
    feedback: float = Field(default=0.10, ge=0)
    latency: float = Field(default=0.05, ge=0)
    latency_budget_s: float = Field(default=10.0, gt=0)

    @field_validator("rubric", "verifier", "feedback", "latency", "latency_budget_s")
    @classmethod
    def _finite(cls, value: float) -> float:
        if not math.isfinite(value):
            raise ConfigError(f"must be a finite number, got {value!r}")
        return value


def _in_range(name: str, value: float, lo: float, hi: float) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not lo <= value <= hi:
        raise ConfigError(f"{name} must be a number in [{lo:g}, {hi:g}], got {value!r}")
    return float(value)


def composite_reward(
    rubric_score: float,
    verifier_pass_rate: float | None = None,
    feedback: Literal["up", "down"] | None = None,
    latency_s: float | None = None,
    weights: RewardWeights | None = None,
) -> float:
    """Blend the available components into a reward in ``[0, 1]`` (see the module docstring).

    >>> composite_reward(5.0, feedback="meh")
    Traceback (most recent call last):
    ...
    agentic_loop.errors.ConfigError: feedback must be 'up', 'down' or None, got 'meh'
    """
    w = weights or RewardWeights()
    rubric = _in_range("rubric_score", rubric_score, 0, 10) / 10
    parts: list[tuple[float, float]] = [(w.rubric, rubric)]
    if verifier_pass_rate is not None:
        parts.append((w.verifier, _in_range("verifier_pass_rate", verifier_pass_rate, 0, 1)))
    if feedback is not None:
        if feedback not in ("up", "down"):
            raise ConfigError(f"feedback must be 'up', 'down' or None, got {feedback!r}")
        parts.append((w.feedback, 1.0 if feedback == "up" else 0.0))
    if latency_s is not None:
        latency = _in_range("latency_s", latency_s, 0, math.inf)
        parts.append((w.latency, min(1.0, w.latency_budget_s / latency) if latency > 0 else 1.0))
    total = sum(weight for weight, _ in parts)
    if total <= 0:
        raise ConfigError(
            "every component given has weight 0; give the rubric (or another present "
            f"component) a weight > 0 in RewardWeights, got {w!r}"
        )
    return round(sum(weight * value for weight, value in parts) / total, 6)
