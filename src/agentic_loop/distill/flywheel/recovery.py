"""What a restarted flywheel repairs before its first tick, each repair with an audit line.

Why a module of its own: a service killed at any instant (``kill -9`` in a
round, in a ramp stage, inside a promote) leaves the registry, its
``canary.json`` and the flywheel's ``state.json`` out of step, and the rule
"never serve a version the registry does not name as current or gated
candidate" must hold before anything else runs. The repairs:

* a ``canary.json`` that is unreadable, or names a version that is not
  registered, whose last gate is not PROMOTE, or that is already current (a
  promote finished, its cleanup did not) is removed;
* a state in ``canary`` with no ``canary.json`` left goes back to idle; a
  ``canary.json`` the state does not match (killed between the file and the
  state) is adopted, since the serving front already follows it;
* a canary that names no candidate, or whose stage is not one of the ramp's
  stages (``--stages`` changed between two runs), is ended: ``canary.json``
  removed, back to idle (no tick could judge it; it would keep its traffic);
* a canary in step resumes its stage (its start time kept); a state in
  ``round`` runs the round again (improve resumes from its own ``state.json``).

Each tick asks :func:`lost_canary` whether the canary in progress can go on:
not when its file is gone or names another version, when the registry has
no current version, or when the current version is no longer the
``baseline`` it started against (a person promoted or rolled back
meanwhile: the candidate was gated and ramped against another version).

Example:
    >>> import tempfile
    >>> from agentic_loop.distill.flywheel.journal import FlywheelState, Journal
    >>> registry = Registry(tempfile.mkdtemp())
    >>> journal = Journal(registry.root)
    >>> update = recovered_state(FlywheelState(phase="canary", candidate="v2", stage=1), None,
    ...                          journal, registry, stages=4)
    >>> update["phase"], update["candidate"]
    ('idle', None)
    >>> journal.tail(1)[0].detail
    'state says canary but canary.json is missing; back to idle'
    >>> lost_canary(FlywheelState(phase="canary", candidate="v3", stage=0, baseline="v1"),
    ...             CanaryState(candidate="v3", fraction=0.05), "v2", stages=4)
    ('canary ended', 'current moved from v1 to v2 during the canary; canary of v3 ended')
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from agentic_loop.distill.eval.gate import Decision
from agentic_loop.distill.flywheel.journal import FlywheelState, Journal
from agentic_loop.distill.release.canary.state import CanaryState, read_canary, write_canary
from agentic_loop.distill.release.registry import Registry
from agentic_loop.distill.release.registry_audit import RegistryError, version_gate
from agentic_loop.errors import StorageError, short_error

__all__ = ["IDLE", "canary_now", "canary_problem", "checked_canary", "gated", "lost_canary",
           "overdue", "recovered_state"]

#: the state fields of "no canary"
IDLE: dict[str, Any] = {"phase": "idle", "candidate": None, "stage": None,
                        "stage_started_at": None, "previous_stage_started_at": None,
                        "canary_started_at": None, "baseline": None}


def gated(registry: Registry, version: str) -> bool:
    """True when ``version`` is registered and its last release-gate decision is PROMOTE."""
    try:
        gate = version_gate(registry.get(version))
    except RegistryError:
        return False
    return gate is not None and gate.decision == Decision.PROMOTE


def checked_canary(registry: Registry, journal: Journal) -> CanaryState | None:
    """The registry's ``canary.json`` when it may stay; else it is removed (audited), None."""
    try:
        canary = read_canary(registry)
    except StorageError as exc:
        journal.log("recover", detail=f"removed an unreadable canary.json: {exc}")
        write_canary(registry, None)
        return None
    if canary is None:
        return None
    current = registry.current
    known = {v.version for v in registry.versions()}
    why = ("is not registered" if canary.candidate not in known
           else "is not gated PROMOTE" if not gated(registry, canary.candidate)
           else "is already current" if current and current.version == canary.candidate
           else None)
    if why is None:
        return canary
    journal.log("recover", version=canary.candidate,
                detail=f"removed canary.json: {canary.candidate} {why}")
    write_canary(registry, None)
    return None


def canary_problem(state: FlywheelState, stages: int) -> str | None:
    """Why a canary state cannot be judged: no candidate, or a stage that is not one of the
    ramp's ``stages`` (their count); None when it can."""
    if state.candidate is None:
        return "the flywheel state names no candidate"
    if state.stage is None or not 0 <= state.stage < stages:
        return (f"its stage {state.stage} is not one of the ramp's {stages} stages "
                f"(0..{stages - 1}; were the stages changed?)")
    return None


def lost_canary(state: FlywheelState, canary: CanaryState | None, current: str | None, *,
                stages: int) -> tuple[str, str] | None:
    """Why the canary in progress ends now, as ``(audit action, detail)``; None: it goes on.

    ``current``: the registry's current version now; ``stages``: the ramp's stage count.
    """
    if canary is None:
        return "canary lost", "canary.json is gone; back to idle"
    if canary.candidate != state.candidate:
        return "canary lost", f"canary.json names {canary.candidate}; back to idle"
    if current is None:
        return "canary lost", "the registry has no current version; back to idle"
    if state.baseline is not None and current != state.baseline:
        return "canary ended", (f"current moved from {state.baseline} to {current} during the "
                                f"canary; canary of {state.candidate} ended")
    problem = canary_problem(state, stages)
    return None if problem is None else ("canary lost", f"{problem}; back to idle")


def canary_now(registry: Registry, state: FlywheelState, *, stages: int
               ) -> tuple[CanaryState | None, tuple[str, str] | None]:
    """The registry's ``canary.json`` and, when the canary in progress ends now, why
    (:func:`lost_canary`); an unreadable file ends it (the caller removes it)."""
    try:
        canary = read_canary(registry)
    except StorageError as exc:
        return None, ("canary lost", f"canary.json is unreadable ({short_error(exc)}); "
                      "removed it; back to idle")
    current = registry.current.version if registry.current is not None else None
    return canary, lost_canary(state, canary, current, stages=stages)


def overdue(state: FlywheelState, now: datetime, max_stage_s: float) -> float | None:
    """The seconds the canary's stage has run when that is past ``max_stage_s``; else None
    (no canary, or in time)."""
    if state.phase != "canary" or state.stage_started_at is None:
        return None
    ran = (now - state.stage_started_at).total_seconds()
    return ran if ran > max_stage_s else None


def recovered_state(state: FlywheelState, canary: CanaryState | None, journal: Journal,
                    registry: Registry, *, stages: int) -> dict[str, Any] | None:
    """The state fields to change after a restart (None: resume as saved), audited.

    ``canary``: what :func:`checked_canary` kept; ``stages``: the ramp's stage count. A canary
    that cannot be judged (:func:`canary_problem`) is removed from ``registry``.
    """
    if state.phase == "canary" and canary is None:
        journal.log("recover", version=state.candidate,
                    detail="state says canary but canary.json is missing; back to idle")
        return dict(IDLE)
    if canary is None:
        if state.phase == "round":
            journal.log("recover", detail=(
                f"round {state.rounds + 1} was interrupted; running it again (improve "
                "resumes from its state.json)"), round=state.rounds + 1)
        return None
    current = registry.current.version if registry.current is not None else None
    update: dict[str, Any] = {}
    if state.phase != "canary" or canary.candidate != state.candidate or (
            canary.stage != state.stage):
        update = {"phase": "canary", "candidate": canary.candidate, "stage": canary.stage,
                  "stage_started_at": canary.started_at, "baseline": current}
        detail = (f"adopted canary.json: {canary.candidate} at stage {canary.stage} (state said "
                  f"{state.phase} {state.candidate} stage {state.stage})")
    else:
        detail = (f"resumed canary stage {canary.stage} ({canary.fraction:.0%}) started "
                  f"{state.stage_started_at}")
        if state.baseline is None:  # a state saved before baselines were kept
            update["baseline"] = current
        if state.stage_started_at is None:  # else the stage's deadline could never pass
            update["stage_started_at"] = canary.started_at
    problem = canary_problem(state.model_copy(update=update), stages)
    if problem is not None:
        journal.log("recover", version=canary.candidate,
                    detail=f"removed canary.json of {canary.candidate}: {problem}; back to idle")
        write_canary(registry, None)
        return dict(IDLE)
    journal.log("recover", version=canary.candidate, detail=detail, stage=canary.stage)
    return update or None
