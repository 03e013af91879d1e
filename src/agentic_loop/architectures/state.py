"""The state the architectures' graphs pass between nodes.

A ``TypedDict`` with reducers, as LangGraph expects, so the graphs work as
subgraphs of a user's graph and under a checkpointer: ``rounds`` and
``errors`` accumulate, ``usage`` sums, everything else is last-write-wins.

Rounds are :class:`~agentic_loop.trajectories.Round` models, the same objects
the trajectory stores and ``RunResult.trace`` shows; ``finalize`` leaves the
run's :class:`~agentic_loop.trajectories.Trajectory` in ``trajectory``.
LangGraph's checkpoint serializer round-trips pydantic models; a strict
serializer (``allowed_msgpack_modules``, ``LANGGRAPH_STRICT_MSGPACK=true``)
gets these models allow-listed by :func:`allow_state_types` when the graph is
compiled. (A default, permissive serializer logs a one-time notice per type
the first time it reads one back.)

Example:
    >>> add_usage({"llm_calls": 1, "input_tokens": 5}, {"llm_calls": 2})
    {'llm_calls': 3, 'input_tokens': 5}
    >>> sorted(name for _, name in STATE_MODELS)
    ['Round', 'TokenUsage', 'Trajectory']
"""

from __future__ import annotations

import operator
from typing import Annotated, Any

from langgraph.checkpoint.base import BaseCheckpointSaver
from typing_extensions import TypedDict

from agentic_loop.trajectories import Round, TokenUsage, Trajectory

__all__ = ["STATE_MODELS", "LoopState", "add_usage", "allow_state_types"]

#: The pydantic models a checkpoint of the state holds, as (module, name).
STATE_MODELS: frozenset[tuple[str, str]] = frozenset(
    (model.__module__, model.__name__) for model in (Round, Trajectory, TokenUsage))


def allow_state_types(checkpointer: Any) -> Any:
    """``checkpointer`` able to read back the state's models under a strict serializer.

    A permissive serializer (LangGraph's default) is returned as is; anything
    that is not a checkpoint saver (None, True, False) too.
    """
    allow = getattr(checkpointer, "with_allowlist", None)  # langgraph-checkpoint >= 3
    if isinstance(checkpointer, BaseCheckpointSaver) and allow is not None:
        return allow(STATE_MODELS)
    return checkpointer


def add_usage(left: dict[str, int] | None, right: dict[str, int] | None) -> dict[str, int]:
    """Sum two usage dicts key by key."""
    out = dict(left or {})
    for key, value in (right or {}).items():
        out[key] = out.get(key, 0) + int(value)
    return out


class LoopState(TypedDict, total=False):
    """Input: ``task``. Output: ``final`` (best round), ``trajectory`` and the whole history."""

    task: str
    run_id: str
    started_at: float
    exemplars: list[dict[str, Any]]
    reflections: list[dict[str, Any]]
    draft: str
    iteration: int
    rounds: Annotated[list[Round], operator.add]
    usage: Annotated[dict[str, int], add_usage]
    errors: Annotated[list[str], operator.add]
    stop_reason: str
    final: Round | None
    archived: bool
    trajectory_id: str
    trajectory: Trajectory
