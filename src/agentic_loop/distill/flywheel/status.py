"""What the flywheel service is doing now, as one value the status page and ``/status.json`` share.

Why: the service loop, the HTTP server and the HTML page live in different
modules (and the page is tested in a browser without a service behind it),
so they meet on plain data. :class:`FlywheelStatus` is that data: a snapshot
the service builds whenever asked, with the numbers a person needs to trust
(or stop) the ramp: the current version and what it replaced, the canary
stage with each arm's numbers and intervals, the rounds so far, the monitors
with their thresholds, and the last audit entries. It is pydantic so the JSON
form (``model_dump(mode="json")``) and its validation come for free, and the
browser's refresh script reads exactly what the server rendered from.

Example:
    >>> from datetime import datetime, timezone
    >>> status = FlywheelStatus(
    ...     registry="/srv/reg", updated_at=datetime(2026, 1, 1, tzinfo=timezone.utc),
    ...     phase="canary", current="v3", lineage=["v3", "v2"], candidate="v4",
    ...     stage=0, fraction=0.05, stages=[0.05, 0.25, 0.5, 1.0],
    ...     arms=[ArmNumbers(version="v3", role="current", runs=40, pass_rate=0.8,
    ...                      pass_ci95=(0.65, 0.9))])
    >>> data = status.model_dump(mode="json")
    >>> data["arms"][0]["pass_ci95"], data["updated_at"]
    ([0.65, 0.9], '2026-01-01T00:00:00Z')
    >>> FlywheelStatus.model_validate(data) == status
    True
"""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel

__all__ = ["ArmNumbers", "AuditLine", "FlywheelStatus", "MonitorLine", "RoundPoint"]


class ArmNumbers(BaseModel):
    """One arm of the canary (the current version or the candidate) over the stage so far.

    Rates are fractions in [0, 1]; ``*_ci95`` are 95% intervals of them
    (None until there is a run or a request); ``p99_latency_s`` in seconds.
    """

    version: str
    role: Literal["current", "candidate"]
    runs: int = 0
    pass_rate: float | None = None
    pass_ci95: tuple[float, float] | None = None
    requests: int = 0
    error_rate: float | None = None
    error_ci95: tuple[float, float] | None = None
    p99_latency_s: float | None = None


class MonitorLine(BaseModel):
    """One monitored metric of one version: its value now, its baseline, and the rule it obeys.

    ``threshold`` is the rule as a person reads it (``"drop > 0.10"``);
    ``breached`` says it was broken (the page marks the row).
    """

    version: str
    metric: str
    value: float | None
    baseline: float | None
    threshold: str
    breached: bool


class RoundPoint(BaseModel):
    """One improvement round: the candidate it made, its golden pass rate, and the gate's say."""

    round: int
    version: str | None
    golden_pass_rate: float | None
    ci95: tuple[float, float] | None
    decision: str | None
    at: datetime | None = None


class AuditLine(BaseModel):
    """One entry of the audit log, as the page lists it (newest last)."""

    at: datetime
    action: str
    version: str | None = None
    detail: str = ""


class FlywheelStatus(BaseModel):
    """The whole service at one moment (see the module doc).

    ``lineage``: the current version first, then the versions it replaced.
    ``stage`` indexes ``stages`` (the traffic fractions of the ramp) and
    ``fraction`` is the candidate's share now; all three are None/empty
    outside a canary.
    """

    registry: str
    updated_at: datetime
    phase: Literal["starting", "idle", "round", "canary", "stopped"]
    current: str | None = None
    lineage: list[str] = []
    candidate: str | None = None
    stage: int | None = None
    fraction: float | None = None
    stages: list[float] = []
    stage_started_at: datetime | None = None
    arms: list[ArmNumbers] = []
    stage_reasons: list[str] = []
    rounds: list[RoundPoint] = []
    monitors: list[MonitorLine] = []
    audit: list[AuditLine] = []
    trigger: str = ""
    new_runs: int = 0
    last_error: str | None = None
