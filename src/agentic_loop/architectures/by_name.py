"""Build an architecture from its name: one place for the CLI (`run`) and the eval gate.

Each architecture keeps its memory in a different kind of store (ArchiveRefine an
archive of accepted outputs, Reflexion a memory of lessons, Reflection none), so
the caller names both locations and each architecture takes the one it uses.

Example:
    >>> from agentic_loop.testing import ScriptedChatModel
    >>> create_architecture("reflection", ScriptedChatModel(), max_iterations=2).max_iterations
    2
    >>> create_architecture("self_refine", ScriptedChatModel())
    Traceback (most recent call last):
    ...
    ValueError: unknown architecture 'self_refine'; choose one of reflection, archive_refine, reflexion
"""

from __future__ import annotations

from typing import Any

from langchain_core.language_models import BaseChatModel

from agentic_loop.architectures.archive_refine import ArchiveRefine
from agentic_loop.architectures.base import Architecture
from agentic_loop.architectures.reflection import Reflection
from agentic_loop.architectures.reflexion import Reflexion
from agentic_loop.memory import Archive, ReflexionMemory

__all__ = ["ARCHITECTURES", "create_architecture"]

ARCHITECTURES: dict[str, type[Architecture]] = {
    "reflection": Reflection,
    "archive_refine": ArchiveRefine,
    "reflexion": Reflexion,
}


def create_architecture(name: str, llm: BaseChatModel | str, *,
                        archive: Archive | str | None = None,
                        reflections: ReflexionMemory | str | None = None,
                        **kwargs: Any) -> Architecture:
    """The architecture called ``name`` (see :data:`ARCHITECTURES`) on ``llm``.

    ``archive`` goes to ArchiveRefine and ``reflections`` to Reflexion; each is
    ignored by the others, and ``None`` keeps the architecture's default.
    ``kwargs`` are the :class:`Architecture` options (rubric, target_score, ...).
    """
    if name not in ARCHITECTURES:
        raise ValueError(f"unknown architecture {name!r}; choose one of {', '.join(ARCHITECTURES)}")
    if name == "archive_refine" and archive is not None:
        kwargs["archive"] = archive
    if name == "reflexion" and reflections is not None:
        kwargs["memory"] = reflections
    return ARCHITECTURES[name](llm, **kwargs)
