"""Architectures: compiled LangGraph loops that users import into their agent apps.

- :class:`Reflection`: generate -> critique -> refine; no memory across runs.
- :class:`ArchiveRefine`: retrieve similar accepted outputs -> generate ->
  critique -> refine -> archive; remembers accepted outputs.
- :class:`Reflexion`: attempt -> evaluate -> reflect -> retry; remembers
  verbal reflections on failures.

Each has ``build()``, ``run``, ``arun``, ``batch``, ``stream``, ``diagram()``
and a ``create_<name>_graph`` factory. :func:`run_specs` runs many tasks (or
task specs with their own constraints) on one architecture; a run returns a
:class:`RunResult`, the view of the trajectory it logged.

A run's settings (rubric, target, budgets, sampling, run metadata) come
from the architecture's defaults, ``run(...)``'s keywords and the run's
LangGraph context (what a LangGraph server sends; ``run(max_iterations=2)``
sends the same); the run's first node resolves them once into the state, and
every node reads them there.

Modules: :mod:`.base` (the class and its graph), :mod:`.nodes` (shared nodes,
stop rule, finalize), :mod:`.settings` (a run's settings, resolved once),
:mod:`.schemas` (input, output, context), :mod:`.state` (the graph state),
:mod:`.runner` (run, batch, stream, resume), :mod:`.results` (RunResult),
:mod:`.by_name` (architectures by name), one module per architecture.

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
from agentic_loop.architectures.by_name import (
    ARCHITECTURES,
    architecture_class,
    create_architecture,
)
from agentic_loop.architectures.reflection import Reflection, create_reflection_graph
from agentic_loop.architectures.reflexion import ReflectionNote, Reflexion, create_reflexion_graph
from agentic_loop.architectures.results import summary_table
from agentic_loop.architectures.runner import TaskLike, run_specs

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
    "TaskLike",
    "architecture_class",
    "create_architecture",
    "create_archive_refine_graph",
    "create_reflection_graph",
    "create_reflexion_graph",
    "run_specs",
    "summary_table",
    "task_rubric",
]
