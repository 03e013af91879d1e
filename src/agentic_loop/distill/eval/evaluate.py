"""``evaluate_models``: baseline vs candidate on the golden set, and the promotion decision.

Both models answer every golden task under the *same* rubric, first
single-shot (one answer, scored), then, with ``arch=``, inside an
architecture (generate, critique, refine), which is how they will serve.
Per-task scores are paired and go through
:func:`~agentic_loop.distill.eval.gate.gate`.

The overall decision is conservative: ROLLBACK if any mode says so,
PROMOTE only if every mode says so, MANUAL_REVIEW otherwise; and a
candidate whose outputs collapsed into one answer (see
:mod:`~agentic_loop.distill.eval.diversity`) is never promoted automatically.
Alongside the scores the report holds the KL drift of the candidate from
the baseline (when both are local weights), the diversity of both models'
outputs, and a PNG of the before/after score distributions.

Scoring: a task's rubric of checks needs no model. A rubric with judged
features (the task rubric, for golden rows that state no constraints) is
judged by one fixed ``judge`` model for both sides (the baseline by
default), so neither model grades itself in single-shot mode.

Example (scripted models; real ones are specs such as ``"local"``):
    >>> from agentic_loop.testing import ScriptedChatModel
    >>> from agentic_loop.tasks.spec import TaskSpec
    >>> golden = [TaskSpec(task=f"Say hi in 2 words ({i}).", constraints={"exact_words": 2})
    ...           for i in range(4)]
    >>> old = ScriptedChatModel(responses=["hi"] * 4)
    >>> new = ScriptedChatModel(responses=["hi there"] * 4)
    >>> report = evaluate_models(old, new, golden, kl=False, diversity_check=False,
    ...                          progress=False, min_tasks=4)
    >>> report.decision, [t.candidate for t in report.tasks]
    (<Decision.PROMOTE: 'PROMOTE'>, [10.0, 10.0, 10.0, 10.0])
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from langchain_core.language_models import BaseChatModel

from agentic_loop.distill.eval.diversity import DiversityReport, diversity
from agentic_loop.distill.eval.drift import DriftReport, kl_drift
from agentic_loop.distill.eval.gate import Decision, GateDecision, gate
from agentic_loop.distill.eval.golden import load_golden
from agentic_loop.errors import ConfigError
from agentic_loop.models.model_dirs import ModelDirError, resolve_model_dir
from agentic_loop.tasks.spec import TaskSpec

__all__ = ["EvalReport", "TaskScores", "combine_decisions", "evaluate_models"]


@dataclass
class TaskScores:
    """One golden task's scores and outputs for both models (``*_arch``: in the architecture)."""

    id: str
    task: str
    baseline: float
    candidate: float
    baseline_output: str
    candidate_output: str
    baseline_arch: float | None = None
    candidate_arch: float | None = None
    errors: list[str] = field(default_factory=list)


@dataclass
class EvalReport:
    """Everything one evaluation found; ``decision`` is what to do with the candidate."""

    baseline: str
    candidate: str
    arch: str | None
    tasks: list[TaskScores]
    single: GateDecision
    arch_gate: GateDecision | None
    decision: Decision
    reasons: list[str]
    kl: DriftReport | None = None
    kl_note: str | None = None
    diversity: dict[str, DiversityReport] = field(default_factory=dict)
    plot: Path | None = None

    @property
    def mode_collapse(self) -> bool:
        """True when the candidate's outputs collapsed (and the baseline's did not)."""
        cand, base = self.diversity.get("candidate"), self.diversity.get("baseline")
        return bool(cand and cand.collapsed and not (base and base.collapsed))

    def to_dict(self) -> dict[str, Any]:
        """Plain data (JSON report, model card)."""
        return {
            "baseline": self.baseline, "candidate": self.candidate, "arch": self.arch,
            "decision": self.decision.value, "reasons": self.reasons,
            "single_shot": self.single.to_dict(),
            "architecture": self.arch_gate.to_dict() if self.arch_gate else None,
            "kl_drift": self.kl.to_dict() if self.kl else None, "kl_note": self.kl_note,
            "diversity": {k: v.to_dict() for k, v in self.diversity.items()},
            "mode_collapse": self.mode_collapse,
            "plot": str(self.plot) if self.plot else None,
            "tasks": [vars(t) for t in self.tasks],
        }

    def card_entry(self, *, golden: str | None = None) -> dict[str, Any]:
        """The evaluation as a model-card entry: decisions, measures, task scores; no outputs."""
        data = self.to_dict()
        data["tasks"] = [{"id": t.id, "baseline": t.baseline, "candidate": t.candidate,
                          "baseline_arch": t.baseline_arch, "candidate_arch": t.candidate_arch}
                         for t in self.tasks]
        if golden is not None:
            data["golden"] = golden
        return data


def combine_decisions(decisions: Sequence[Decision], *, collapsed: bool = False) -> Decision:
    """ROLLBACK if any says so; PROMOTE only if all do and outputs did not collapse.

    >>> combine_decisions([Decision.PROMOTE, Decision.MANUAL_REVIEW])
    <Decision.MANUAL_REVIEW: 'MANUAL_REVIEW'>
    >>> combine_decisions([Decision.PROMOTE], collapsed=True)
    <Decision.MANUAL_REVIEW: 'MANUAL_REVIEW'>
    """
    if Decision.ROLLBACK in decisions:
        return Decision.ROLLBACK
    if decisions and all(d == Decision.PROMOTE for d in decisions) and not collapsed:
        return Decision.PROMOTE
    return Decision.MANUAL_REVIEW


def _name(spec: str | BaseChatModel) -> str:
    if isinstance(spec, str):
        return spec
    from agentic_loop.models import model_id_of

    return model_id_of(spec)


@contextlib.contextmanager
def _progress(enabled: bool) -> Iterator[Any]:
    from agentic_loop.progress import progress_bar

    with progress_bar(disable=not enabled) as bar:
        yield bar


def _architecture(arch: str, llm: BaseChatModel, task: TaskSpec, workdir: Path,
                  max_iterations: int, arch_kwargs: dict[str, Any]) -> Any:
    from agentic_loop.architectures import create_architecture

    kwargs = {"max_iterations": max_iterations, **arch_kwargs}
    kwargs.setdefault("archive", str(workdir / "archive"))
    kwargs.setdefault("reflections", kwargs.pop("memory", str(workdir / "reflections")))
    return create_architecture(arch, llm, rubric=task.rubric(), **kwargs)


def _single_shot(llm: BaseChatModel, judge: BaseChatModel, golden: Sequence[TaskSpec],
                 bar: Any, label: str) -> tuple[list[float], list[str], list[str]]:
    from agentic_loop.architectures import task_rubric
    from agentic_loop.judges import Critic
    from agentic_loop.models.structured_output import message_text

    job = bar.add_task(f"{label}: single-shot", total=len(golden))
    scores, outputs, errors = [], [], []
    for item in golden:
        error = ""
        try:
            output = message_text(llm.invoke(item.task)).strip()
            rubric = item.rubric() or task_rubric(item.task)
            critic = Critic(judge, rubric, critique_text=False)
            score = float(critic.critique(item.task, output).score)
        except Exception as exc:  # noqa: BLE001 - a failed answer scores 0; the report says why
            output, score, error = "", 0.0, f"{label} single-shot on {item.id!r}: {exc}"
        scores.append(score)
        outputs.append(output)
        errors.append(error)
        bar.advance(job)
    return scores, outputs, errors


def _in_architecture(arch: str, llm: BaseChatModel, golden: Sequence[TaskSpec], bar: Any,
                     label: str, max_iterations: int, arch_kwargs: dict[str, Any]
                     ) -> tuple[list[float], list[str]]:
    job = bar.add_task(f"{label}: {arch}", total=len(golden))
    scores, errors = [], []
    with tempfile.TemporaryDirectory(prefix=f"eval-{label}-") as tmp:
        for item in golden:
            try:
                result = _architecture(arch, llm, item, Path(tmp), max_iterations,
                                       arch_kwargs).run(item.task)
                scores.append(float(result.score or 0.0))
                errors.append("; ".join(result.errors))
            except Exception as exc:  # noqa: BLE001 - a failed run scores 0; the report says why
                scores.append(0.0)
                errors.append(f"{label} {arch} on {item.id!r}: {exc}")
            bar.advance(job)
    return scores, errors


def _drift(baseline: str | BaseChatModel, candidate: str | BaseChatModel,
           prompts: list[str]) -> tuple[DriftReport | None, str | None]:
    if not (isinstance(baseline, str) and isinstance(candidate, str)):
        return None, "KL drift needs both models as local specs (weights on this machine)"
    try:
        base_dir, cand_dir = resolve_model_dir(baseline), resolve_model_dir(candidate)
    except ModelDirError as exc:
        return None, f"KL drift skipped: {exc}"
    return kl_drift(base_dir, cand_dir, prompts), None


def evaluate_models(
    baseline: str | BaseChatModel,
    candidate: str | BaseChatModel,
    golden_tasks: str | os.PathLike[str] | Sequence[TaskSpec],
    *,
    arch: str | None = None,
    max_iterations: int = 2,
    judge: str | BaseChatModel | None = None,
    max_tokens: int = 128,
    temperature: float = 0.0,
    alpha: float = 0.05,
    rollback_ratio: float = 0.95,
    min_tasks: int = 20,
    min_effect: float = 0.1,
    max_kl: float = 0.5,
    kl: bool = True,
    diversity_check: bool = True,
    embedder: Any = None,
    plot_path: str | os.PathLike[str] | None = None,
    arch_kwargs: dict[str, Any] | None = None,
    progress: bool = True,
) -> EvalReport:
    """Score ``baseline`` and ``candidate`` on the golden set and decide (see the module doc).

    Args:
        baseline / candidate: model specs (``"local"``, ``"local:<dir>"``,
            ``"openai:<url>"``) or ready chat models.
        golden_tasks: a golden-set JSONL path or tasks (:class:`~agentic_loop.tasks.spec.TaskSpec`;
            those without an ``id`` are numbered from 1).
        arch: also run both inside ``"reflection"``, ``"archive_refine"`` or ``"reflexion"``
            (each model with its own fresh archive/memory unless ``arch_kwargs`` names one).
        max_iterations: the architecture's round limit.
        judge: judges rubric features that are not checks (default: the baseline).
        max_tokens / temperature: generation settings for both models (greedy by default).
        alpha / rollback_ratio / min_tasks / min_effect / max_kl: the gate's evidence rules
            (see :func:`~agentic_loop.distill.eval.gate.gate`); the measured KL drift
            goes into the decision, so drift above ``max_kl`` rolls back.
        kl: measure KL drift when both models are local weights.
        diversity_check: measure output diversity (loads the embedder).
        plot_path: where to write the before/after PNG (``None``: no plot).
    """
    from agentic_loop.architectures import architecture_class
    from agentic_loop.models import load_chat_model

    if arch is not None:
        architecture_class(arch)  # the one name check, before any model loads

    golden = _numbered(load_golden(golden_tasks) if isinstance(golden_tasks, (str, os.PathLike))
                       else golden_tasks)
    if not golden:
        raise ConfigError("the golden set is empty; evaluation needs at least one task")
    settings = {"max_tokens": max_tokens, "temperature": temperature}

    def model(spec: str | BaseChatModel) -> BaseChatModel:
        return spec if isinstance(spec, BaseChatModel) else load_chat_model(spec, **settings)

    base_llm, cand_llm = model(baseline), model(candidate)
    judge_llm = base_llm if judge is None else load_chat_model(judge, temperature=0.0)

    prompts = [g.task for g in golden]
    drift, note = _drift(baseline, candidate, prompts) if kl else (None, "not requested")
    rules: dict[str, Any] = {"alpha": alpha, "rollback_ratio": rollback_ratio,
                             "min_tasks": min_tasks, "min_effect": min_effect, "max_kl": max_kl,
                             "kl_drift": drift.mean_kl if drift else None}
    with _progress(progress) as bar:
        b_scores, b_out, b_err = _single_shot(base_llm, judge_llm, golden, bar, "baseline")
        c_scores, c_out, c_err = _single_shot(cand_llm, judge_llm, golden, bar, "candidate")
        rows = [TaskScores(str(g.id), g.task, b, c, bo, co, errors=[e for e in (be, ce) if e])
                for g, b, c, bo, co, be, ce in zip(golden, b_scores, c_scores, b_out, c_out,
                                                   b_err, c_err, strict=True)]
        single = gate(b_scores, c_scores, **rules)
        arch_gate = None
        if arch is not None:
            ba, ba_err = _in_architecture(arch, base_llm, golden, bar, "baseline", max_iterations,
                                          dict(arch_kwargs or {}))
            ca, ca_err = _in_architecture(arch, cand_llm, golden, bar, "candidate", max_iterations,
                                          dict(arch_kwargs or {}))
            for row, b, c, be, ce in zip(rows, ba, ca, ba_err, ca_err, strict=True):
                row.baseline_arch, row.candidate_arch = b, c
                row.errors += [e for e in (be, ce) if e]
            arch_gate = gate(ba, ca, **rules)

    spread: dict[str, DiversityReport] = {}
    if diversity_check:
        spread = {"baseline": diversity(b_out, embedder),
                  "candidate": diversity(c_out, embedder)}
    report = EvalReport(_name(baseline), _name(candidate), arch, rows, single, arch_gate,
                        Decision.MANUAL_REVIEW, [], drift, note, spread)
    decisions = [single.decision] + ([arch_gate.decision] if arch_gate else [])
    report.decision = combine_decisions(decisions, collapsed=report.mode_collapse)
    report.reasons = [f"single-shot: {single}"]
    if arch_gate is not None:
        report.reasons.append(f"{arch}: {arch_gate}")
    if report.mode_collapse:
        report.reasons.append("the candidate's outputs collapsed into near-copies "
                              f"(mean distance {spread['candidate'].mean_distance:.3f}); "
                              "not promoted")
    if plot_path is not None:
        report.plot = _plot(report, Path(plot_path))
    return report


def _numbered(tasks: Sequence[TaskSpec]) -> list[TaskSpec]:
    """The tasks, each with an id (its 1-based position when it has none): ids pair the scores."""
    return [t if t.id is not None else t.model_copy(update={"id": str(i)})
            for i, t in enumerate(tasks, start=1)]


def _plot(report: EvalReport, path: Path) -> Path:
    from agentic_loop.plots import plot_eval_scores

    def note(g: GateDecision) -> str:
        return f"{g.decision.value}, p={'n/a' if g.p_value is None else f'{g.p_value:.3g}'}"

    panels = {"single-shot": ([t.baseline for t in report.tasks],
                              [t.candidate for t in report.tasks], note(report.single))}
    if report.arch_gate is not None:
        panels[f"inside {report.arch}"] = ([t.baseline_arch or 0.0 for t in report.tasks],
                                           [t.candidate_arch or 0.0 for t in report.tasks],
                                           note(report.arch_gate))
    plot_eval_scores(panels, path)
    return path
