"""The loop: improvement rounds over the other stages; with eval, the only place that drives graphs.

One round grows data with the current model over a task pool (samples,
hint retries), exports it through the data gate (the round's score
threshold and the PII gate), trains, puts the candidate through the
release gate on a held-apart golden set, and registers (and promotes) it.
:func:`improve` is the entry point for improvement rounds: it runs rounds
until a stop rule fires, resumable from each round's ``state.json``;
:func:`distill_loop` is the one-shot pipeline over logs that already exist
(export, train, gate, register).

Names: an *improve round* is one pass of those stages; its report is an
:class:`ImproveRound` (not :class:`agentic_loop.trajectories.Round`, a
critique round inside one run). ``RoundState`` is an improve round's folder
and ``state.json``, ``RoundRunner`` runs its stages. The run's result is an
:class:`ImproveResult`. All are pydantic records (``state.json`` excepted:
plain JSON checked on open, so older files keep resuming).

Modules: ``improve`` (the rounds and stop rules), ``round`` (one round's
stages), ``records`` (the typed reports), ``report`` (rates, intervals,
curve), ``state`` (state.json, the watermark), ``settings``, ``grow``,
``pool``, ``pipeline`` (the one-shot pipeline).

Example:
    >>> from agentic_loop.distill.loop import ImproveSettings
    >>> ImproveSettings(rounds=2).rounds
    2
"""

from agentic_loop.distill.loop.improve import ImproveResult, ImproveSettings, improve
from agentic_loop.distill.loop.pipeline import LoopResult, distill_loop
from agentic_loop.distill.loop.records import ImproveRound, StopCode

__all__ = ["ImproveResult", "ImproveRound", "ImproveSettings", "LoopResult", "StopCode",
           "distill_loop", "improve"]
