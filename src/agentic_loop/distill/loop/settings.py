"""The settings of an improve run: checked up front, scheduled per round, fingerprinted.

Why one frozen object: a run is many rounds over hours, resumed after
kills; a bad threshold found in round 3, or a resume with other settings
mixing two runs in one folder, wastes all of it. So every option is checked
when the object is built (messages name the ``agentic-loop improve`` flag),
the per-round schedules (the SFT score threshold that rises each round, the
sampling temperatures) are methods, and a fingerprint of everything but the
stop rules lets a resume refuse a folder another run owns.

Example:
    >>> s = ImproveSettings(thresholds=(7.0, 8.0, 9.0), temperatures=(0.7, 1.0), samples=3)
    >>> [s.threshold_for(r) for r in (1, 2, 3, 4)]
    [7.0, 8.0, 9.0, 9.0]
    >>> [s.temperature_for(1, k) for k in range(3)]
    [0.7, 1.0, 0.7]
    >>> ImproveSettings(thresholds=(9.0, 7.0))
    Traceback (most recent call last):
    ...
    agentic_loop.errors.ConfigError: thresholds (--thresholds) must not fall from one round to \
the next (the bar rises), got (9.0, 7.0)
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any

from agentic_loop.distill.train.settings import METHODS
from agentic_loop.errors import ConfigError

__all__ = ["ImproveSettings"]

#: Settings a resume may change: the stop rules and the round budget.
_RESUMABLE = ("rounds", "patience", "min_gain", "max_concurrency")
#: Settings added later, left out of the fingerprint at their defaults: a run started before
#: they existed keeps its fingerprint, so it still resumes.
_LATER = {"max_steps": 4, "first_tool_call": False}


@dataclass(frozen=True)
class ImproveSettings:
    """What an improve run does each round (see :func:`~agentic_loop.distill.loop.improve`).

    Args:
        rounds: the round budget.
        samples: samples per pool task per round (K).
        arch: the architecture that samples (``reflection``, ``archive_refine``, ``reflexion``).
        max_iterations: its rounds per sample (1: single-shot, scored).
        temperatures: sample ``k`` uses ``temperatures[k % len]``...
        temperature_step: ...plus this much per round after the first (negative: cool down).
        thresholds: round ``r`` trains on outputs scoring at least ``thresholds[r - 1]``
            (the last one from then on), on the 0-10 scale; non-decreasing.
        method: ``sft``, ``dpo``, ``sft+dpo`` or ``grpo`` (on the pool's prompt set).
        hint_retry: retry tasks with no passing sample once, with the verifier's hint.
        base: the model to start from before the registry has a current version.
        max_tokens: generation limit of the samples and the gate.
        min_gain / patience: stop when the golden pass rate has not risen by ``min_gain``
            over its best for ``patience`` rounds.
        pass_score: the golden pass score of a task whose rubric has no check.
        eval_arch: also gate inside this architecture (``None``: single-shot only).
        max_concurrency: runs in flight while sampling.
        max_steps: on tool tasks (agent rounds), an episode's model calls at most.
        first_tool_call: on tool tasks, force each grown (and hinted) episode's first model
            call to be a tool call; small models seldom open with one by themselves. The gate
            never forces it: it measures what each model does by itself.
        train_options / export_options / eval_options: more keywords for ``train``
            (LoRA on by default), ``export_datasets`` and ``evaluate_models``.
    """

    rounds: int = 3
    samples: int = 4
    arch: str = "reflection"
    max_iterations: int = 1
    temperatures: tuple[float, ...] = (0.7, 1.0)
    temperature_step: float = 0.0
    thresholds: tuple[float, ...] = (7.0, 8.0, 9.0)
    method: str = "sft"
    hint_retry: bool = True
    base: str = "local"
    max_tokens: int = 128
    min_gain: float = 0.01
    patience: int = 2
    pass_score: float = 8.0
    eval_arch: str | None = None
    max_concurrency: int = 4
    max_steps: int = 4
    first_tool_call: bool = False
    train_options: Mapping[str, Any] = field(default_factory=dict)
    export_options: Mapping[str, Any] = field(default_factory=dict)
    eval_options: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "temperatures", tuple(float(t) for t in self.temperatures))
        object.__setattr__(self, "thresholds", tuple(float(t) for t in self.thresholds))
        checks: list[tuple[bool, str]] = [
            (_count(self.rounds), f"rounds (--rounds) must be at least 1, got {self.rounds!r}"),
            (_count(self.samples),
             f"samples (--samples) must be at least 1, got {self.samples!r}"),
            (_count(self.max_iterations),
             f"max_iterations (--max-iterations) must be at least 1, got {self.max_iterations!r}"),
            (_count(self.patience),
             f"patience (--patience) must be at least 1, got {self.patience!r}"),
            (_count(self.max_tokens),
             f"max_tokens (--max-tokens) must be at least 1, got {self.max_tokens!r}"),
            (_count(self.max_concurrency),
             f"max_concurrency must be at least 1, got {self.max_concurrency!r}"),
            (_count(self.max_steps),
             f"max_steps (--max-steps) must be at least 1, got {self.max_steps!r}"),
            (bool(self.temperatures) and all(t >= 0 for t in self.temperatures),
             f"temperatures (--temperatures) must be one or more numbers >= 0, "
             f"got {self.temperatures}"),
            (bool(self.thresholds) and all(0 <= t <= 10 for t in self.thresholds),
             f"thresholds (--thresholds) are scores on the 0-10 scale, got {self.thresholds}"),
            (all(a <= b for a, b in zip(self.thresholds, self.thresholds[1:], strict=False)),
             "thresholds (--thresholds) must not fall from one round to the next (the bar "
             f"rises), got {self.thresholds}"),
            (self.method in METHODS,
             f"method (--method) must be one of {', '.join(METHODS)}, got {self.method!r}"),
            (self.min_gain >= 0, f"min_gain (--min-gain) must be 0 or more, got {self.min_gain}"),
            (0 <= self.pass_score <= 10,
             f"pass_score is a score on the 0-10 scale, got {self.pass_score}"),
            (self.train_options.get("merge_lora", True) is not False,
             "improve gates and samples the trained model in-process, which needs a merged "
             "model; leave merge_lora on"),
        ]
        for ok, message in checks:
            if not ok:
                raise ConfigError(message)
        from agentic_loop.architectures import architecture_class

        architecture_class(self.arch)
        if self.eval_arch is not None:
            architecture_class(self.eval_arch)

    def threshold_for(self, round_number: int) -> float:
        """The SFT score threshold (0-10) of round ``round_number`` (1-based)."""
        return self.thresholds[min(round_number, len(self.thresholds)) - 1]

    def temperature_for(self, round_number: int, sample: int) -> float:
        """The sampling temperature of sample ``sample`` (0-based) in round ``round_number``."""
        base = self.temperatures[sample % len(self.temperatures)]
        return round(max(0.0, base + self.temperature_step * (round_number - 1)), 6)

    def train_kwargs(self) -> dict[str, Any]:
        """The keywords ``train`` gets: LoRA unless ``train_options`` says otherwise."""
        return {"lora": True, **self.train_options}

    def eval_kwargs(self) -> dict[str, Any]:
        """The keywords ``evaluate_models`` gets (the samples' ``max_tokens``, no bar of its own,
        by default)."""
        return {"max_tokens": self.max_tokens, "progress": False, **self.eval_options}

    def to_dict(self) -> dict[str, Any]:
        """Plain data (``improve.json``)."""
        data = {f.name: getattr(self, f.name) for f in fields(self)}  # no deep copy of models
        for key in ("temperatures", "thresholds"):
            data[key] = list(data[key])
        for key in ("train_options", "export_options", "eval_options"):
            data[key] = {k: (v if isinstance(v, (str, int, float, bool, type(None)))
                             else repr(v)) for k, v in dict(data[key]).items()}
        return data

    def fingerprint(self, source: str = "") -> str:
        """A short hash of everything a resume must not change (the stop rules may change)."""
        data = {k: v for k, v in self.to_dict().items() if k not in _RESUMABLE
                and not (k in _LATER and v == _LATER[k])}
        for key in ("export_options", "eval_options", "train_options"):
            data[key] = {k: v for k, v in data[key].items() if k != "progress"
                         and not str(v).startswith("<")}
        payload = json.dumps({"settings": data, "source": source}, sort_keys=True, default=str)
        return hashlib.sha256(payload.encode()).hexdigest()[:16]


def _count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 1
