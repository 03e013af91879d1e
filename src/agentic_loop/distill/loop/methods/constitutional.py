"""Constitutional AI: written principles as judged features; critique and revision make the data.

Why (Bai et al., 2022, "Constitutional AI"): traits the checks cannot
count (honest, harmless, to the point) can still be written down. Each
principle becomes a judged yes/no feature
(:class:`~agentic_loop.judges.Feature` ``kind="bool"``), and the refine step
is the paper's critique and revision:

1. the judge (:class:`~agentic_loop.judges.critic.Critic`, one structured call
   per answer: a bool per principle and a critique) checks each task's best
   grown answer against the principles;
2. where one is not met, the policy revises its answer, shown the critique;
3. the judge checks the revision; a revision that satisfies *more* principles
   and still passes every check of its task is an SFT row (the plain prompt,
   the revision) and the chosen side of a pair against the original.

The principles are :data:`DEFAULT_PRINCIPLES`, or a file
(``ImproveSettings.principles``, ``--principles``): one a line, ``name:
description`` or just the description (``#`` comments and blank lines skipped).

Example:
    >>> [f.name for f in principle_features(None)][:2]
    ['on_task', 'honest']
    >>> import tempfile, pathlib
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "p.txt"
    >>> _ = path.write_text("# mine\\npolite: Is polite.\\nCites no made-up numbers.\\n")
    >>> [(f.name, f.kind) for f in principle_features(path)]
    [('polite', 'bool'), ('principle_2', 'bool')]
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

from agentic_loop.distill.loop.methods.common import (
    Answer,
    Judge,
    MethodRows,
    gate_texts,
    pair_row,
    sft_row,
)
from agentic_loop.distill.loop.settings import read_principles
from agentic_loop.tasks.spec import TaskSpec

__all__ = ["DEFAULT_PRINCIPLES", "constitutional_rows", "principle_features",
           "read_principles"]

#: A short constitution for a small model's answers (name, what it asks).
DEFAULT_PRINCIPLES: tuple[tuple[str, str], ...] = (
    ("on_task", "Answers exactly what the task asks, without changing or ignoring any part."),
    ("honest", "States nothing false or made up, and does not claim what it cannot know."),
    ("harmless", "Contains nothing harmful, hateful, dangerous or insulting."),
    ("concise", "Has no filler, repetition or needless preamble."),
)


def principle_features(path: str | os.PathLike[str] | None) -> list[Any]:
    """The principles (a file's, or the defaults) as judged yes/no features."""
    from agentic_loop.judges import Feature

    pairs = read_principles(path) if path is not None else DEFAULT_PRINCIPLES
    return [Feature(name, text, kind="bool") for name, text in pairs]


def _met(critique: Any, names: Sequence[str]) -> int:
    return sum(bool(critique.values.get(name)) for name in names)


def _revise_chat(answer: Answer, feedback: str) -> list[tuple[str, str]]:
    return [*answer.prompt, ("assistant", answer.text), (
        "user", "A reviewer checked your answer against these principles and found:\n"
                f"{feedback.strip()}\n\nRewrite your answer so that it keeps every requirement "
                "of the task and meets every principle. Reply with the rewritten answer only.")]


def constitutional_rows(runner: Any, state: Any, groups: Sequence[tuple[TaskSpec, list[Answer]]],
                        gate: Any, judge: Judge) -> MethodRows:
    """Critique, revise, re-judge; the revisions that satisfy more principles become rows."""
    from agentic_loop.judges.critic import Critic, CriticError
    from agentic_loop.judges.rubric import Rubric

    s = runner.settings
    features = principle_features(s.principles)
    names = [f.name for f in features]
    critic = Critic(judge.llm, Rubric(features, name="principles"))
    picked = [(spec, max(answers, key=lambda a: (a.trainable, a.score)))
              for spec, answers in groups if answers]
    rows = MethodRows()
    counts = {"tasks": len(groups), "critiqued": len(picked), "failed": 0, "already_met": 0,
              "revised": 0, "improved": 0, "failed_checks": 0, "unsafe": 0}
    runner._start(state, f"constitutional: {judge.name} critiques {len(picked)} answers")
    first = critic.batch([(spec.task, a.text) for spec, a in picked], return_exceptions=True)
    todo = []
    for (spec, answer), critique in zip(picked, first, strict=True):
        if isinstance(critique, CriticError):
            counts["failed"] += 1
        elif _met(critique, names) == len(names):
            counts["already_met"] += 1
        else:
            todo.append((spec, answer, critique))
    if not todo:
        rows.counts = {**counts, "principles": names}
        return rows
    policy = runner.backend.chat(str(state.data["model"]),
                                 s.temperature_for(state.number, 0), s.max_tokens)
    replies = policy.batch([_revise_chat(a, c.feedback) for _, a, c in todo],
                           return_exceptions=True)  # one failed call is counted, not fatal
    texts = ["" if isinstance(r, BaseException) else str(r.content).strip() for r in replies]
    counts["revised"] = len(todo)
    counts["revision_failed"] = sum(not t for t in texts)
    revised = gate_texts(texts, gate)
    kept = [(spec, a, c, text) for (spec, a, c), text in zip(todo, revised, strict=True)
            if text]
    counts["unsafe"] = len(todo) - counts["revision_failed"] - len(kept)
    second = critic.batch([(spec.task, text) for spec, _, _, text in kept],
                          return_exceptions=True)
    for (spec, answer, before, text), after in zip(kept, second, strict=True):
        if isinstance(after, CriticError):
            counts["failed"] += 1
            continue
        if _met(after, names) <= _met(before, names):
            continue
        rubric = spec.rubric()
        if rubric is not None and not rubric.evaluate(spec.task, text).passed:
            counts["failed_checks"] += 1
            continue
        counts["improved"] += 1
        meta = {"judge": judge.name, "met_before": _met(before, names),
                "met_after": _met(after, names), "trajectory_id": answer.trajectory_id}
        rows.sft.append(sft_row(answer.messages, text, source="constitutional",
                                task=spec.task, **meta))
        rows.pairs.append(pair_row(answer.messages, text, answer.text,
                                   source="constitutional", task=spec.task, **meta))
    rows.counts = {**counts, "principles": names}
    return rows
