"""A canary stage's evidence: each arm's runs and requests since the stage began.

Why a module of its own: the ramp's judge (:func:`~agentic_loop.distill.flywheel.ramp.judge_stage`)
is pure; what it is given decides everything. Two sources, each the best at
what it measures:

* **pass rate** from the trajectories (a run's ``accepted``: its checks'
  verdict), logged since the stage started, each run attributed to the
  registry version that answered it by the monitor's rules
  (:class:`~agentic_loop.distill.release.monitor_stats.VersionMap`);
* **errors and latencies** from the serving front, when a serve process
  runs for the registry (``serving.json``, checked by token,
  :func:`~agentic_loop.distill.release.live.checked_server`): ``GET
  <front>/agentic-loop/arms?since=<unix>`` counts every request routed to
  each version, including the ones that never became a trajectory; with no
  live server, from the same trajectories (``errors``, ``latency_s``).

A latency that is not finite seconds >= 0 (a clock that stepped back, a
NaN from a broken logger) is left out of the sample, not allowed to fail
every tick of the stage.

:func:`arm_numbers` turns a sample into the status page's
:class:`~agentic_loop.distill.flywheel.status.ArmNumbers` (rates with 95%
Wilson intervals, p99).

Example:
    >>> from agentic_loop.trajectories import Trajectory
    >>> runs = [Trajectory(architecture="a", model_id=v, task="t", accepted=ok, latency_s=1.0)
    ...         for v, ok in [("v1", True), ("v1", False), ("v2", True)]]
    >>> vmap = VersionMap({"v1": "v1", "v2": "v2"}, [])
    >>> cur, cand = samples_from_runs(runs, vmap, "v1", "v2")
    >>> cur.passed, cand.passed, cur.errors
    ([True, False], [True], [False, False])
    >>> bad = [Trajectory(architecture="a", model_id="v1", task="t", latency_s=x)
    ...        for x in (-1.0, float("nan"), 2.0)]
    >>> samples_from_runs(bad, vmap, "v1", "v2")[0].latencies_s
    [2.0]
    >>> arm_numbers(cur, "current").pass_rate
    0.5
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from datetime import datetime
from typing import Any, Literal

from agentic_loop.distill.eval.stats import wilson
from agentic_loop.distill.flywheel.ramp_stats import ArmSample
from agentic_loop.distill.flywheel.status import ArmNumbers
from agentic_loop.distill.release.front import ARMS_PATH
from agentic_loop.distill.release.monitor_stats import VersionMap, group_by_version, percentile
from agentic_loop.distill.release.registry import Registry
from agentic_loop.trajectories import Trajectory

__all__ = ["arm_numbers", "front_arms", "samples_from_runs", "seconds", "stage_evidence",
           "stage_samples"]


def seconds(values: Iterable[float | None]) -> list[float]:
    """The values that are latencies: finite and >= 0 (the others are left out)."""
    return [x for x in values if x is not None and math.isfinite(x) and x >= 0]


def samples_from_runs(runs: Iterable[Trajectory], vmap: VersionMap, current: str,
                      candidate: str) -> tuple[ArmSample, ArmSample]:
    """Both arms from trajectories alone: pass, error and latency per run."""
    grouped, _, _ = group_by_version(runs, vmap)

    def sample(version: str) -> ArmSample:
        mine = grouped.get(version, [])
        return ArmSample(version=version, passed=[t.accepted for t in mine],
                         errors=[bool(t.errors) for t in mine],
                         latencies_s=seconds(t.latency_s for t in mine))

    return sample(current), sample(candidate)


def front_arms(registry: Registry, since: datetime, timeout: float = 5.0
               ) -> dict[str, dict[str, Any]] | None:
    """The live front's per-version requests since ``since``; None when no server answers."""
    try:
        import httpx

        from agentic_loop.distill.release.live import checked_server
    except ImportError:  # an install without serving: the trajectories say it all
        return None
    check = checked_server(registry, timeout)
    if check is None or check.verdict != "ok":
        return None
    base = check.state.url.rstrip("/").removesuffix("/v1")
    try:
        answer = httpx.get(base + ARMS_PATH, params={"since": since.timestamp()},
                           timeout=timeout)
        data = answer.json() if answer.status_code == 200 else None
    except (httpx.HTTPError, ValueError):
        return None
    arms = data.get("arms") if isinstance(data, dict) else None
    return arms if isinstance(arms, dict) else None


def _with_front(sample: ArmSample, arm: dict[str, Any] | None) -> ArmSample:
    """``sample`` with its errors and latencies taken from the front's numbers for its arm."""
    arm = arm or {}
    requests = int(arm.get("requests") or 0)
    errors, ordered = arm.get("errors") or 0, arm.get("error_flags")
    # in the order the requests ended (the ramp's planned looks read the first ones); a front
    # that sends only a count gets its errors first, which can only make "not worse" harder
    flags = ([bool(e) for e in ordered] if isinstance(ordered, list)
             else [bool(e) for e in errors] if isinstance(errors, list)
             else [True] * int(errors) + [False] * max(0, requests - int(errors)))
    latencies = seconds(float(x) for x in arm.get("latencies_s") or []
                        if isinstance(x, (int, float)))
    return sample.model_copy(update={"errors": flags, "latencies_s": latencies})


def stage_samples(runs: Iterable[Trajectory], registry: Registry, current: str,
                  candidate: str, since: datetime, *, timeout: float = 5.0
                  ) -> tuple[ArmSample, ArmSample, str]:
    """Both arms since ``since`` (see the module doc) and where errors and latencies came from
    (``"front"`` or ``"trajectories"``)."""
    recent = [t for t in runs if t.created_at >= since]
    cur, cand = samples_from_runs(recent, VersionMap.from_registry(registry), current,
                                  candidate)
    arms = front_arms(registry, since, timeout)
    if arms is None:
        return cur, cand, "trajectories"
    return _with_front(cur, arms.get(current)), _with_front(cand, arms.get(candidate)), "front"


def stage_evidence(runs: list[Trajectory], registry: Registry, current: str, candidate: str,
                   started: datetime, previous: datetime | None, *, last: bool,
                   timeout: float = 5.0) -> tuple[ArmSample, ArmSample, str]:
    """A stage's arms (:func:`stage_samples`) since it ``started``; at a stage that sends all
    traffic to the candidate (``last``), the current arm serves no one: its runs since the
    stage before started (``previous``)."""
    since = (previous or started) if last else started
    cur, cand, source = stage_samples(runs, registry, current, candidate, since,
                                      timeout=timeout)
    if last:
        cand = stage_samples(runs, registry, current, candidate, started, timeout=timeout)[1]
    return cur, cand, source


def arm_numbers(sample: ArmSample, role: Literal["current", "candidate"]) -> ArmNumbers:
    """The status page's numbers of one arm."""
    runs, passed = len(sample.passed), sum(sample.passed)
    requests, errors = len(sample.errors), sum(sample.errors)
    return ArmNumbers(
        version=sample.version, role=role, runs=runs,
        pass_rate=passed / runs if runs else None,
        pass_ci95=wilson(passed, runs) if runs else None, requests=requests,
        error_rate=errors / requests if requests else None,
        error_ci95=wilson(errors, requests) if requests else None,
        p99_latency_s=percentile(sample.latencies_s, 99))
