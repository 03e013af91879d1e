"""The flywheel service's settings: its trigger, tick, ramp, monitor, and the rounds it runs.

Why one object, checked when built: the service runs for weeks; a trigger
that can never fire, or an improve setting that promotes straight to all
traffic (skipping the canary), must be refused at start, with the flag to
fix, not found after the first round. So :class:`FlywheelSettings` forces
the round's ``ImproveSettings`` to what the service needs (one round per
trigger, ``promote=False``: the ramp, not the gate, promotes) and refuses a
service with no trigger at all. :func:`parse_duration` reads the CLI's
``6h``/``30s``/``1d``.

Example:
    >>> s = FlywheelSettings(min_new_runs=None, every_s=parse_duration("6h"))
    >>> s.every_s, s.improve.rounds, s.improve.promote
    (21600.0, 1, False)
    >>> FlywheelSettings(min_new_runs=None, every_s=None)
    Traceback (most recent call last):
    ...
    agentic_loop.errors.ConfigError: FlywheelSettings: ...the flywheel has no trigger: pass \
min_new_runs (--min-new-runs) or every_s (--every), or both
"""

from __future__ import annotations

import re
from dataclasses import replace
from typing import Any

from pydantic import ConfigDict, Field, field_validator, model_validator

from agentic_loop.distill.flywheel.ramp import RampSettings
from agentic_loop.distill.flywheel.ramp_stats import StrictModel
from agentic_loop.distill.loop.settings import ImproveSettings
from agentic_loop.distill.release.monitor import MonitorSettings
from agentic_loop.errors import ConfigError

__all__ = ["FlywheelSettings", "parse_duration"]

_UNITS = {"s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}


def parse_duration(text: str | float) -> float:
    """Seconds in ``30s``, ``5m``, ``6h``, ``1d`` or a plain number of seconds.

    >>> parse_duration("90"), parse_duration("1.5m"), parse_duration(2)
    (90.0, 90.0, 2.0)
    """
    if isinstance(text, (int, float)):
        return float(text)
    found = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([smhd]?)\s*", str(text).lower())
    if found is None or float(found.group(1)) <= 0:
        raise ConfigError(f"duration {text!r} is not a positive time; write e.g. 30s, 5m, 6h "
                          "or 1d (a plain number is seconds)")
    return float(found.group(1)) * _UNITS[found.group(2) or "s"]


class FlywheelSettings(StrictModel):
    """What the service does (see the module doc).

    Args:
        min_new_runs: start a round at this many new accepted runs (None: off).
        every_s: start a round this long after the last one, given one new run (None: off).
        tick_s: seconds between ticks (each tick: trigger, canary stage, monitor).
        ramp: the canary's stages and their statistics.
        monitor: the current version's monitor (window, thresholds).
        improve: the round's settings; ``rounds`` and ``promote`` are forced to 1 and False.
        status_host / status_port: where the status page listens (port None: no page).
        arms_timeout_s: how long to wait for the serving front's per-arm numbers.
        round_backoff_s: after a failed round, how long before the trigger may start another.
    """

    model_config = ConfigDict(extra="forbid", frozen=True, arbitrary_types_allowed=True)

    min_new_runs: int | None = Field(default=50, ge=1)
    every_s: float | None = Field(default=None, gt=0)
    tick_s: float = Field(default=30.0, gt=0)
    ramp: RampSettings = Field(default_factory=RampSettings)
    monitor: MonitorSettings = Field(default_factory=MonitorSettings)
    improve: ImproveSettings = Field(default_factory=ImproveSettings)
    status_host: str = "127.0.0.1"
    status_port: int | None = Field(default=None, ge=0, le=65535)
    arms_timeout_s: float = Field(default=5.0, gt=0)
    round_backoff_s: float = Field(default=600.0, ge=0)

    @field_validator("improve", mode="before")
    @classmethod
    def _one_round_no_promote(cls, value: Any) -> Any:
        if isinstance(value, ImproveSettings):
            return replace(value, rounds=1, promote=False)
        if isinstance(value, dict):
            return ImproveSettings(**{**value, "rounds": 1, "promote": False})
        return value

    @model_validator(mode="after")
    def _has_trigger(self) -> FlywheelSettings:
        if self.min_new_runs is None and self.every_s is None:
            raise ConfigError("the flywheel has no trigger: pass min_new_runs (--min-new-runs) "
                              "or every_s (--every), or both")
        return self

    def model_post_init(self, context: Any, /) -> None:
        """The default ``improve`` is forced too (a default skips the validator)."""
        if self.improve.rounds != 1 or self.improve.promote:
            object.__setattr__(self, "improve", replace(self.improve, rounds=1, promote=False))
