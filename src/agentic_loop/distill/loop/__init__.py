"""The loop: improvement rounds over the other stages; with eval, the only place that drives graphs.

One round grows data with the current model over a task pool (samples,
hint retries), exports it through the data gate (the round's score
threshold and the PII gate), trains, puts the candidate through the
release gate on a held-apart golden set, and registers (and promotes) it.
:func:`improve` is the one entry point for improvement rounds: it runs rounds
until a stop rule fires, resumable from each round's ``state.json``. Given
runs already logged (``runs=``) instead of a pool, a round takes them as its
grown data and samples nothing: :func:`distill_loop`, the one-shot pipeline
(export, train, gate, register), is that one round.

Names: an *improve round* is one pass of those stages; its report is an
:class:`ImproveRound` (not :class:`agentic_loop.trajectories.Round`, a
critique round inside one run). ``RoundState`` is an improve round's folder
and ``state.json``, ``RoundRunner`` runs its stages. The run's result is an
:class:`ImproveResult`. All are pydantic records (``state.json`` excepted:
plain JSON checked on open, so older files keep resuming).

Modules: ``improve`` (the rounds and stop rules), ``round`` (one round's
stages), ``records`` (the typed reports), ``report`` (rates, intervals,
curve), ``state`` (state.json, the watermark), ``settings``, ``grow``,
``pool`` (the round's source: a pool, or given runs), ``gating`` (the
release gate's runners and registration), ``pipeline`` (the one-shot call).

Example:
    >>> from agentic_loop.distill.loop import ImproveSettings
    >>> ImproveSettings(rounds=2).rounds
    2
"""

from agentic_loop.distill.loop.improve import ImproveResult, ImproveSettings, improve
from agentic_loop.distill.loop.pipeline import distill_loop
from agentic_loop.distill.loop.records import ImproveRound, StopCode

__all__ = ["ImproveResult", "ImproveRound", "ImproveSettings", "StopCode", "distill_loop",
           "improve"]
