"""What the judged round methods share: the gated answers, the judge, the alarm, the rows.

Why one module: each method (self-rewarding, SPIN, constitutional) turns the
round's own samples into rows, and each must do it the same safe way: the
samples pass the export's PII gate before any judge or row sees them
(:func:`gated_answers`), new text (a reference, a revision) passes it too
(:func:`gate_texts`), the judge is loaded through the round's backend
(:func:`load_judge`; default the round's current model), the agreement alarm
is asked over the round's runs and the logs people labelled (:func:`alarm`),
and the rows are TRL's conversational rows the export writes
(:func:`pair_row`, :func:`sft_row`), so ``train`` reads them unchanged.

Example:
    >>> prompt = [{"role": "user", "content": "2+2?"}]
    >>> row = pair_row(prompt, "4", "5", source="spin", task="2+2?")
    >>> row["chosen"], row["metadata"]["source"]
    ([{'role': 'assistant', 'content': '4'}], 'spin')
    >>> sft_row(prompt, "4", source="constitutional", task="2+2?")["messages"][-1]["content"]
    '4'
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agentic_loop.tasks.spec import TaskSpec
from agentic_loop.trajectories import Trajectory, TrajectoryLog

__all__ = ["Answer", "Judge", "MethodRows", "alarm", "answers_by_task", "gate_texts",
           "gated_answers", "gated_samples", "load_judge", "pair_row", "pii_gate", "read_rows",
           "round_runs", "sft_row"]

Message = dict[str, str]


@dataclass(frozen=True)
class Answer:
    """One grown sample of a pool task, after the PII gate: its prompt, text and check verdict.

    ``trainable``: it passed every check of its task and raised no guard flag (what
    may be an SFT row or a chosen side); ``score``: its check score (0-10).
    """

    task_id: str
    prompt: tuple[tuple[str, str], ...]
    text: str
    trainable: bool
    score: float
    trajectory_id: str

    @property
    def messages(self) -> list[Message]:
        """The prompt as chat messages (the fresh-draft chat the export's rows have)."""
        return [{"role": role, "content": content} for role, content in self.prompt]


@dataclass
class MethodRows:
    """A method's rows and its counts."""

    sft: list[dict[str, Any]] = field(default_factory=list)
    pairs: list[dict[str, Any]] = field(default_factory=list)
    counts: dict[str, Any] = field(default_factory=dict)


def pii_gate(export_options: Any) -> Any:
    """The PII gate the round's export uses (``export_options["pii"]``: a gate or its mode)."""
    from agentic_loop.distill.data.pii.gate import PiiGate

    found = dict(export_options).get("pii", "spacy")
    return found if isinstance(found, PiiGate) else PiiGate(found)


def round_runs(folder: Path, names: Sequence[str] = ("grown", "hinted")) -> list[Trajectory]:
    """The round's runs logged under ``folder`` (its ``grown`` and ``hinted`` logs)."""
    return [run for name in names if (folder / name / TrajectoryLog.FILE).is_file()
            for run in TrajectoryLog(folder / name).read()]


def gated_samples(runs: Sequence[Trajectory], gate: Any) -> tuple[list[tuple[str, Any]], int]:
    """Each run's final answer after the PII gate, as ``(task id, Sample)``, and how many runs
    the gate dropped. A run that errored or has no final answer gives none."""
    from agentic_loop.distill.data.redact import redact_runs
    from agentic_loop.distill.data.samples import trajectory_samples

    # the gated copy keeps no metadata: the task a run answered is read from the original
    tasks = {run.id: (run.metadata.get("improve") or {}).get("task_id") for run in runs}
    redacted = redact_runs(list(runs), gate)
    out = []
    for run in redacted.kept:
        task_id = tasks.get(run.id)
        if run.errors or not run.final_output or task_id is None:
            continue
        out += [(str(task_id), s) for s in trajectory_samples(run) if s.source == "final"][:1]
    return out, len(redacted.dropped)


def gated_answers(runs: Sequence[Trajectory], gate: Any) -> tuple[list[Answer], int]:
    """:func:`gated_samples` as :class:`Answer` s; an agent's answer is left out (its episode
    would need the export's episode rows)."""
    samples, dropped = gated_samples(runs, gate)
    return [Answer(task_id, tuple((m["role"], m["content"]) for m in s.messages), s.response,
                   s.trainable, s.reward * 10, s.trajectory_id)
            for task_id, s in samples if s.episode is None], dropped


def answers_by_task(answers: Iterable[Answer], pool: Sequence[TaskSpec]
                    ) -> list[tuple[TaskSpec, list[Answer]]]:
    """The pool's tasks (in pool order) with their answers, each distinct text once."""
    by_id: dict[str, list[Answer]] = {str(s.id): [] for s in pool}
    for answer in answers:
        group = by_id.get(answer.task_id)
        if group is not None and all(a.text.strip() != answer.text.strip() for a in group):
            group.append(answer)
    return [(spec, by_id[str(spec.id)]) for spec in pool]


def gate_texts(texts: Sequence[str], gate: Any) -> list[str | None]:
    """``texts`` through the PII gate: the anonymized text, or None where it is not safe."""
    if not texts:
        return []
    done = gate.anonymize_many(list(texts))
    return [d.text if d.ok else None for d in done]


@dataclass(frozen=True)
class Judge:
    """The round's judge: the chat model, the spec it was loaded from, its model id."""

    llm: Any
    spec: str
    name: str


def load_judge(runner: Any, state: Any) -> Judge:
    """The round's judge (:class:`Judge`).

    The spec is ``ImproveSettings.judge``, or the round's current model; it is
    loaded through the round's backend at temperature 0 with room for a judgement.
    """
    from agentic_loop.models.wrappers import model_id_of

    spec = runner.settings.judge or str(state.data["model"])
    llm = runner.backend.chat(spec, 0.0, max(256, runner.settings.max_tokens))
    try:
        name = model_id_of(llm)
    except Exception:  # noqa: BLE001 - a model with no id is named by its spec
        name = spec
    return Judge(llm, spec, name or spec)


def alarm(runner: Any, state: Any, judge: str | None = None) -> tuple[bool, str]:
    """Whether people still agree with the judge enough to train on judged rewards, and why.

    Asked over the round's own runs, the given runs of a one-shot round, and the
    logs people labelled (``ImproveSettings.review_logs``): the labels there are
    what the judge is checked against. ``judge`` (a model id, as ``Round.judge``
    records it) checks that judge alone; ``None``: any judge's raised alarm refuses.
    """
    from agentic_loop.distill.data.sources import read_runs
    from agentic_loop.distill.release.judge_agreement import judged_rewards_allowed

    s = runner.settings
    runs = round_runs(state.dir)
    paths: list[str | os.PathLike[str]] = [*(runner.given.paths if runner.given else ()),
                                           *s.review_logs]
    if paths:
        runs += read_runs(paths)[0]
    allowed, reason = judged_rewards_allowed(runs, threshold=s.agreement_threshold,
                                             min_labels=s.min_labels, judge=judge)
    return bool(allowed), str(reason)


def _assistant(text: str) -> list[Message]:
    return [{"role": "assistant", "content": text}]


def pair_row(prompt: Sequence[Message], chosen: str, rejected: str, *, source: str,
             task: str, **meta: Any) -> dict[str, Any]:
    """A DPO row in the export's format (``prompt``, ``chosen``, ``rejected``, ``metadata``)."""
    return {"prompt": list(prompt), "chosen": _assistant(chosen),
            "rejected": _assistant(rejected),
            "metadata": {"task": task, "source": source, **meta}}


def sft_row(prompt: Sequence[Message], answer: str, *, source: str, task: str,
            **meta: Any) -> dict[str, Any]:
    """An SFT row in the export's format (``messages``: the prompt then the answer)."""
    return {"messages": [*prompt, *_assistant(answer)],
            "metadata": {"task": task, "source": source, **meta}}


def read_rows(path: Path) -> list[dict[str, Any]]:
    """The rows of a JSONL file the export wrote (none when it is missing)."""
    if not path.is_file():
        return []
    with path.open(encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]
