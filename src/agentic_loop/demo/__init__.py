"""The demo: the whole loop on the embedded model, from a cold start to a gated, trained model.

``agentic-loop demo`` (or :func:`run_demo`) runs single-shot, Reflection and
ArchiveRefine on held-out tasks, then improvement rounds (:mod:`.improve`),
and writes a report and plots. :mod:`.options` holds its knobs
(:class:`DemoOptions`), :mod:`.run` the phases and the report.

Example:
    >>> from agentic_loop.demo import DemoOptions
    >>> DemoOptions().n_tasks
    30
"""

from agentic_loop.demo.options import DemoOptions
from agentic_loop.demo.run import run_demo

__all__ = ["DemoOptions", "run_demo"]
