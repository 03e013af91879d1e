"""Tasks: what a loop is asked to do, with what verifies it, and the ready task sets.

:mod:`.spec` is a task (:class:`TaskSpec`: the text, constraints or a saved
rubric) and the task file format (:func:`load_tasks`); :mod:`.sets` builds
the ready sets (arithmetic, constrained writing, the IFEval-style
families of :mod:`.sets_ifeval`) and splits them; :mod:`.tool_tasks` makes tasks that need
a calculator or a lookup (:class:`ToolTask`, with train and held-out phrasings);
:mod:`.support_tasks` makes support conversations with a simulated user, answered after an
order lookup (:class:`SupportTask`).

Example:
    >>> from agentic_loop.tasks import TaskSpec
    >>> TaskSpec(task="Write a haiku.", constraints={"no_commas": True}).rubric().evaluate(
    ...     "Write a haiku.", "Autumn moon, low").passed
    False
"""

from agentic_loop.tasks.spec import TaskFileError, TaskSpec, load_tasks, read_task_file
from agentic_loop.tasks.support_tasks import SupportTask, support_tasks
from agentic_loop.tasks.tool_tasks import TOOL_TASK_FAMILIES, ToolTask, tool_tasks

__all__ = ["TOOL_TASK_FAMILIES", "SupportTask", "TaskFileError", "TaskSpec", "ToolTask",
           "load_tasks", "read_task_file", "support_tasks", "tool_tasks"]
