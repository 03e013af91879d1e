"""The demo: improve rounds on the embedded model, measured on held-out tasks it never saw.

``agentic-loop demo`` (or :func:`run_demo`) draws a dev set (train tasks and
200 held-out ones), runs improve rounds on the train tasks (:mod:`.improve`),
and compares the base model with each round's candidate on the held-out
tasks (:mod:`.heldout`: McNemar p-values, 95% intervals, the gate's
decision, one closing line). :mod:`.options` holds its knobs
(:class:`DemoOptions`), :mod:`.run` the steps, the rerun rules and the report.

Example:
    >>> from agentic_loop.demo import DemoOptions
    >>> DemoOptions().held_out_tasks
    200
"""

from agentic_loop.demo.options import DemoOptions
from agentic_loop.demo.run import run_demo

__all__ = ["DemoOptions", "run_demo"]
