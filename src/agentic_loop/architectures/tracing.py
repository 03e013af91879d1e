"""LangSmith-readable traces: every node a named run with tags and metadata.

LangGraph names each node's run after the node and records the metadata
given to ``add_node`` (``architecture``, ``node``). What a node learns while
running (iteration, score, features, error) and its tags (``agentic-loop``,
``arch:<name>``, ``node:<name>``) are written into its run before the run
ends, so the trace shows them when the run is sent. With tracing off there
are no tracers and this costs nothing.

Example:
    >>> node_tags("reflection", "critique")
    ['agentic-loop', 'arch:reflection', 'node:critique']
"""

from __future__ import annotations

from typing import Any

from langchain_core.callbacks import BaseCallbackManager
from langchain_core.runnables import RunnableConfig

__all__ = ["annotate_run", "node_tags"]


def node_tags(architecture: str, node: str) -> list[str]:
    """The tags of one node's run."""
    return ["agentic-loop", f"arch:{architecture}", f"node:{node}"]


def annotate_run(config: RunnableConfig | None, metadata: dict[str, Any],
                 tags: list[str] | None = None) -> None:
    """Merge ``metadata`` and ``tags`` into the run that owns ``config`` (every tracer)."""
    callbacks = (config or {}).get("callbacks")
    if not isinstance(callbacks, BaseCallbackManager) or callbacks.parent_run_id is None:
        return
    run_id = str(callbacks.parent_run_id)
    for handler in callbacks.handlers:
        run_map = getattr(handler, "run_map", None)
        run = run_map.get(run_id) if isinstance(run_map, dict) else None
        if run is not None:
            run.extra.setdefault("metadata", {}).update(metadata)
            run.tags = [*(run.tags or []), *(t for t in tags or [] if t not in (run.tags or []))]
