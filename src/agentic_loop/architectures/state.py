"""The state the architectures' graphs pass between nodes.

A ``TypedDict`` with reducers, as LangGraph expects, so the graphs work as
subgraphs of a user's graph and under a checkpointer: ``rounds`` and
``errors`` accumulate, ``usage`` sums, everything else is last-write-wins.

Example:
    >>> add_usage({"llm_calls": 1, "input_tokens": 5}, {"llm_calls": 2})
    {'llm_calls': 3, 'input_tokens': 5}
"""

from __future__ import annotations

import operator
from typing import Annotated, Any

from typing_extensions import TypedDict

__all__ = ["LoopState", "add_usage"]


def add_usage(left: dict[str, int] | None, right: dict[str, int] | None) -> dict[str, int]:
    """Sum two usage dicts key by key."""
    out = dict(left or {})
    for key, value in (right or {}).items():
        out[key] = out.get(key, 0) + int(value)
    return out


class LoopState(TypedDict, total=False):
    """Input: ``task``. Output: ``final`` (best round) plus the whole history."""

    task: str
    run_id: str
    started_at: float
    exemplars: list[dict[str, Any]]
    reflections: list[dict[str, Any]]
    draft: str
    iteration: int
    rounds: Annotated[list[dict[str, Any]], operator.add]
    usage: Annotated[dict[str, int], add_usage]
    errors: Annotated[list[str], operator.add]
    stop_reason: str
    final: dict[str, Any]
    archived: bool
    trajectory_id: str
