"""Reflection (Self-Refine): generate -> critique -> refine, no memory across runs.

The baseline loop: the critic's failed checks and weak features become the
refine prompt, until a draft reaches ``target_score``, ``max_iterations``
drafts were judged, or the score plateaus. The best draft wins, not the last.

Example:
    >>> from agentic_loop.testing import ScriptedChatModel
    >>> from agentic_loop.judges import Rubric
    >>> llm = ScriptedChatModel(responses=["We sell books", "Stories on every shelf"])
    >>> arch = Reflection(llm, rubric=Rubric.for_constraints(exclude_words=["we"]))
    >>> arch.run("Tagline for a bookstore without the word 'we'.").output
    'Stories on every shelf'
"""

from __future__ import annotations

from typing import Any

from langchain_core.language_models import BaseChatModel
from langgraph.graph.state import CompiledStateGraph

from agentic_loop.architectures.base import Architecture

__all__ = ["Reflection", "create_reflection_graph"]


class Reflection(Architecture):
    """Self-Refine with a deterministic multi-feature critic. See :class:`Architecture`."""

    name = "reflection"


def create_reflection_graph(llm: BaseChatModel | str, *, checkpointer: Any = None,
                            store: Any = None, name: str | None = None,
                            **kwargs: Any) -> CompiledStateGraph:
    """A compiled Reflection graph for apps that compose graphs (input: ``{"task": ...}``)."""
    return Reflection(llm, checkpointer=checkpointer, store=store, graph_name=name,
                      **kwargs).build()
