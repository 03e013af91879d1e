"""The loop: improvement rounds over the other stages; with eval, the only place that drives graphs.

One round grows data with the current model over a task pool (samples,
hint retries), exports it through the PII gate, trains, gates the
candidate on a held-apart golden set, and registers (and promotes) it.
:func:`improve` runs rounds until a stop rule fires, resumable from each
round's ``state.json``; :func:`distill_loop` is the one-shot pipeline over
logs that already exist (export, train, gate, register).

Example:
    >>> from agentic_loop.distill.loop import ImproveSettings
    >>> ImproveSettings(rounds=2).rounds
    2
"""

from agentic_loop.distill.loop.improve import ImproveResult, ImproveSettings, improve
from agentic_loop.distill.loop.pipeline import LoopResult, distill_loop

__all__ = ["ImproveResult", "ImproveSettings", "LoopResult", "distill_loop", "improve"]
