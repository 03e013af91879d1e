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
* a canary in step resumes its stage (its start time kept); a state in
  ``round`` runs the round again (improve resumes from its own ``state.json``).

Example:
    >>> import tempfile
    >>> from agentic_loop.distill.flywheel.journal import FlywheelState, Journal
    >>> journal = Journal(tempfile.mkdtemp())
    >>> recovered_state(FlywheelState(phase="canary", candidate="v2", stage=1), None, journal)
    {'phase': 'idle', 'candidate': None, 'stage': None, 'stage_started_at': None}
    >>> journal.tail(1)[0].detail
    'state says canary but canary.json is missing; back to idle'
"""

from __future__ import annotations

from typing import Any

from agentic_loop.distill.eval.gate import Decision
from agentic_loop.distill.flywheel.journal import FlywheelState, Journal
from agentic_loop.distill.release.canary.state import CanaryState, read_canary, write_canary
from agentic_loop.distill.release.registry import Registry
from agentic_loop.distill.release.registry_audit import RegistryError, version_gate
from agentic_loop.errors import StorageError

__all__ = ["checked_canary", "gated", "recovered_state"]


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


def recovered_state(state: FlywheelState, canary: CanaryState | None,
                    journal: Journal) -> dict[str, Any] | None:
    """The state fields to change after a restart (None: resume as saved), audited."""
    if state.phase == "canary" and canary is None:
        journal.log("recover", version=state.candidate,
                    detail="state says canary but canary.json is missing; back to idle")
        return {"phase": "idle", "candidate": None, "stage": None, "stage_started_at": None}
    if canary is not None and (state.phase != "canary" or canary.candidate != state.candidate
                               or canary.stage != state.stage):
        journal.log("recover", version=canary.candidate, detail=(
            f"adopted canary.json: {canary.candidate} at stage {canary.stage} (state said "
            f"{state.phase} {state.candidate} stage {state.stage})"))
        return {"phase": "canary", "candidate": canary.candidate, "stage": canary.stage,
                "stage_started_at": canary.started_at}
    if canary is not None:
        journal.log("recover", version=canary.candidate, detail=(
            f"resumed canary stage {canary.stage} ({canary.fraction:.0%}) started "
            f"{state.stage_started_at}"), stage=canary.stage)
    elif state.phase == "round":
        journal.log("recover", detail=(
            f"round {state.rounds + 1} was interrupted; running it again (improve resumes "
            "from its state.json)"), round=state.rounds + 1)
    return None
