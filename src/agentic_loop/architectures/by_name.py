"""Architectures by name: the one place a name is checked, for the CLI and the eval gate.

Why one place: ``agentic-loop run --arch``, ``agentic-loop eval --arch`` and
:func:`~agentic_loop.distill.evaluate_models` all take a name; each used to
check it against the table itself, with its own message. They call
:func:`architecture_class` (or :func:`create_architecture`) instead.

Each architecture keeps its memory in a different kind of store (ArchiveRefine an
archive of accepted outputs, Reflexion a memory of lessons, Reflection none), so
the caller names both locations and each architecture takes the one it uses.

Example:
    >>> from agentic_loop.testing import ScriptedChatModel
    >>> create_architecture("reflection", ScriptedChatModel(), max_iterations=2).max_iterations
    2
    >>> architecture_class("self_refine")
    Traceback (most recent call last):
    ...
    agentic_loop.errors.ConfigError: unknown architecture 'self_refine'; choose one of \
reflection, archive_refine, reflexion
"""

from __future__ import annotations

from typing import Any

from langchain_core.language_models import BaseChatModel

from agentic_loop.architectures.archive_refine import ArchiveRefine
from agentic_loop.architectures.base import Architecture
from agentic_loop.architectures.reflection import Reflection
from agentic_loop.architectures.reflexion import Reflexion
from agentic_loop.errors import ConfigError
from agentic_loop.memory import Archive, ReflexionMemory

__all__ = ["ARCHITECTURES", "architecture_class", "create_architecture"]

ARCHITECTURES: dict[str, type[Architecture]] = {
    "reflection": Reflection,
    "archive_refine": ArchiveRefine,
    "reflexion": Reflexion,
}


def architecture_class(name: str) -> type[Architecture]:
    """The class called ``name``; :class:`ConfigError` naming the choices when there is none."""
    try:
        return ARCHITECTURES[name]
    except (KeyError, TypeError):
        raise ConfigError(f"unknown architecture {name!r}; choose one of "
                          f"{', '.join(ARCHITECTURES)}") from None


def create_architecture(name: str, llm: BaseChatModel | str, *,
                        archive: Archive | str | None = None,
                        reflections: ReflexionMemory | str | None = None,
                        **kwargs: Any) -> Architecture:
    """The architecture called ``name`` (see :data:`ARCHITECTURES`) on ``llm``.

    ``archive`` goes to ArchiveRefine and ``reflections`` to Reflexion; each is
    ignored by the others, and ``None`` keeps the architecture's default.
    ``kwargs`` are the :class:`Architecture` options (rubric, target_score, ...).
    """
    cls = architecture_class(name)
    if cls is ArchiveRefine and archive is not None:
        kwargs["archive"] = archive
    if cls is Reflexion and reflections is not None:
        kwargs["memory"] = reflections
    return cls(llm, **kwargs)
