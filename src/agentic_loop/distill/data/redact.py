"""Runs through the PII gate: every text that can reach a dataset, or the whole run is dropped.

A run's task, its drafts and its final output become prompts and responses
of training rows, so each passes :class:`~agentic_loop.distill.data.pii.PiiGate`.
Texts repeat a lot (the final output is one of the drafts, a task is run
many times), so each distinct text is anonymized once. A run with any text
the gate could not anonymize safely is dropped whole: half a run would make
wrong pairs. Fields that never reach a dataset (critiques, per-round
feedback, metadata) are blanked in the returned copies, so no later step can
leak them by accident.

Example:
    >>> from agentic_loop.distill.data.pii import PiiGate
    >>> from agentic_loop.trajectories import Round, Trajectory
    >>> run = Trajectory(architecture="reflection", model_id="m", task="Greet me",
    ...                  rounds=[Round(iteration=0, draft="Hello there", score=9.0, critique="ok")],
    ...                  final_output="Hello there", final_score=9.0)
    >>> result = redact_runs([run], PiiGate("off", max_chars=10))
    >>> len(result.kept), result.dropped[0].split(": ", 1)[1]
    (0, 'rounds[0].draft: 11 characters, over max_chars=10')
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from agentic_loop.distill.data.pii import PiiGate, PiiReport
from agentic_loop.trajectories import Trajectory

__all__ = ["RedactedRuns", "redact_runs", "run_texts"]


@dataclass(frozen=True)
class RedactedRuns:
    """The runs that passed the gate (anonymized copies), why others were dropped, the report."""

    kept: list[Trajectory]
    dropped: list[str]
    report: PiiReport


def run_texts(run: Trajectory) -> list[tuple[str, str]]:
    """Every ``(field, text)`` of ``run`` that can reach a dataset: task, drafts, final output."""
    drafts = [(f"rounds[{i}].draft", r.draft) for i, r in enumerate(run.rounds)]
    texts = [("task", run.task), *drafts]
    if run.final_output is not None:
        texts.append(("final_output", run.final_output))
    return texts


def redact_runs(
    runs: Sequence[Trajectory], gate: PiiGate, *, progress: Callable[[int], None] | None = None
) -> RedactedRuns:
    """Anonymize every dataset-bound text of ``runs`` (each distinct text once).

    ``progress`` receives the number of distinct texts finished, batch by
    batch. Drop notes name the run id and the reason, never the text.
    """
    distinct = list(dict.fromkeys(text for run in runs for _, text in run_texts(run)))
    done = dict(zip(distinct, gate.anonymize_many(distinct, progress=progress), strict=True))
    kept, dropped = [], []
    for run in runs:
        fields = run_texts(run)
        failed = next(((name, done[text]) for name, text in fields if not done[text].ok), None)
        if failed is not None:
            name, redaction = failed
            dropped.append(f"run {run.id}: {name}: {redaction.error or redaction.dropped}")
            continue
        kept.append(_rebuild(run, [done[text].text or "" for _, text in fields]))
    return RedactedRuns(kept, dropped, gate.report(done.values()))


def _rebuild(run: Trajectory, texts: list[str]) -> Trajectory:
    task, drafts = texts[0], texts[1:1 + len(run.rounds)]
    rounds = [
        r.model_copy(update={"draft": d, "critique": None, "feedback": None})
        for r, d in zip(run.rounds, drafts, strict=True)
    ]
    final = texts[-1] if run.final_output is not None else None
    return run.model_copy(update={"task": task, "rounds": rounds, "final_output": final,
                                  "metadata": {}})
