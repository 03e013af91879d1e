"""Architectures: compiled LangGraph loops that users import into their agent apps.

| class | loop | memory across runs |
|---|---|---|
| :class:`Reflection` | generate -> critique -> refine | none |
| :class:`ArchiveRefine` | retrieve similar accepted outputs -> generate -> critique -> refine -> archive | accepted outputs |
| :class:`Reflexion` | attempt -> evaluate -> reflect -> retry | verbal reflections on failures |

Each has ``build()``, ``run``, ``arun``, ``batch``, ``stream``, ``diagram()``
and a ``create_<name>_graph`` factory.

Example:
    >>> from agentic_loop.testing import ScriptedChatModel
    >>> print(Reflection(ScriptedChatModel()).diagram().splitlines()[0])
    ---
"""

from agentic_loop.architectures.archive_refine import (
    ArchiveRefine,
    RLHFSelfImprovement,
    create_archive_refine_graph,
)
from agentic_loop.architectures.base import Architecture, RunResult, TaskError, task_rubric
from agentic_loop.architectures.by_name import ARCHITECTURES, create_architecture
from agentic_loop.architectures.reflection import Reflection, create_reflection_graph
from agentic_loop.architectures.reflexion import ReflectionNote, Reflexion, create_reflexion_graph

__all__ = [
    "ARCHITECTURES",
    "Architecture",
    "ArchiveRefine",
    "RLHFSelfImprovement",
    "ReflectionNote",
    "Reflection",
    "Reflexion",
    "RunResult",
    "TaskError",
    "create_architecture",
    "create_archive_refine_graph",
    "create_reflection_graph",
    "create_reflexion_graph",
    "task_rubric",
]
