"""SPIN: a task's reference answer against the policy's own answer, as DPO pairs.

Why (Chen et al., 2024, "Self-Play Fine-Tuning"): where a task carries a
reference answer, the policy learns to tell its own answers from the
reference's, round after round, with no judge at all. A task's reference is

* ``metadata["reference"]``: a written reference answer (any text), or
* the value its exact ``answer`` check expects
  (:func:`~agentic_loop.distill.loop.grow.known_answer`): a bare answer.

The rejected side is each distinct grown answer that differs from the
reference (words compared, case and punctuation ignored); against a bare
answer, only one that *fails* the task's checks: a correct answer with its
working is better than the bare number, and is never pushed away. Tasks with
no reference are skipped and counted; the reference passes the PII gate
like every other text.

Example:
    >>> from agentic_loop.tasks.spec import TaskSpec
    >>> reference_of(TaskSpec(task="2+2?", constraints={"answer": 4}))
    ('4', True)
    >>> reference_of(TaskSpec(task="Greet.", metadata={"reference": "Hello there!"}))
    ('Hello there!', False)
    >>> reference_of(TaskSpec(task="Greet.")) is None
    True
    >>> same_text("Hello, there!", "hello there")
    True
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from agentic_loop.distill.loop.grow import known_answer
from agentic_loop.distill.loop.methods.common import Answer, MethodRows, gate_texts, pair_row
from agentic_loop.tasks.spec import TaskSpec

__all__ = ["reference_of", "same_text", "spin_rows"]

_WORDS = re.compile(r"\w+")


def reference_of(spec: TaskSpec) -> tuple[str, bool] | None:
    """The task's reference answer and whether it is a bare answer (None: it has none)."""
    written = spec.metadata.get("reference")
    if isinstance(written, str) and written.strip():
        return written.strip(), False
    answer = known_answer(spec)
    return (answer, True) if answer is not None else None


def same_text(a: str, b: str) -> bool:
    """Whether two answers say the same words (case and punctuation ignored)."""
    return _WORDS.findall(a.casefold()) == _WORDS.findall(b.casefold())


def spin_rows(groups: Sequence[tuple[TaskSpec, list[Answer]]], gate: Any) -> MethodRows:
    """Reference-against-own pairs over the round's grown answers (see the module doc)."""
    found = [(spec, answers, reference_of(spec)) for spec, answers in groups]
    with_reference = [(spec, answers, ref) for spec, answers, ref in found if ref is not None]
    gated = gate_texts([ref[0] for _, _, ref in with_reference], gate)
    rows = MethodRows()
    counts = {"tasks": len(groups), "with_reference": len(with_reference),
              "skipped_no_reference": len(groups) - len(with_reference),
              "same_as_reference": 0, "correct_kept": 0, "unsafe_reference": 0, "pairs": 0}
    for (spec, answers, ref), reference in zip(with_reference, gated, strict=True):
        if reference is None:
            counts["unsafe_reference"] += 1
            continue
        bare = ref[1]
        for answer in answers:
            if same_text(answer.text, reference):
                counts["same_as_reference"] += 1
            elif bare and answer.trainable:
                counts["correct_kept"] += 1
            else:
                rows.pairs.append(pair_row(
                    answer.messages, reference, answer.text, source="spin", task=spec.task,
                    bare_reference=bare, rejected_trajectory_id=answer.trajectory_id))
    counts["pairs"] = len(rows.pairs)
    rows.counts = counts
    return rows
