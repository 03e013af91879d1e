"""``evaluate_models``: baseline vs candidate on the golden set, and the promotion decision.

Both models answer every golden task under the *same* rubric, first
single-shot (one answer, scored), then, with ``runners=``, inside a runner
(an architecture: generate, critique, refine), which is how they will serve.
As DSPy's optimizers take the program, the evaluation takes the runner: a
pair of them (an architecture instance, or any callable task -> trajectory
or run result), or :func:`architecture_runner`, which builds one for each
model. The old ``arch="reflection"`` still works for one release, with a
:class:`DeprecationWarning`.
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
default), so neither model grades itself, in single-shot mode and inside
:func:`architecture_runner`'s architectures (unless its ``arch_kwargs`` name a judge).

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

The report is a pydantic record; its JSON (``eval.json``) reads back:
    >>> EvalReport.model_validate_json(report.model_dump_json()) == report
    True
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
import warnings
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from langchain_core.language_models import BaseChatModel
from pydantic import AliasChoices, BaseModel, ConfigDict, Field, computed_field

from agentic_loop.distill.eval.diversity import DiversityReport, diversity
from agentic_loop.distill.eval.drift import DriftReport, kl_drift
from agentic_loop.distill.eval.gate import Decision, GateDecision, gate
from agentic_loop.distill.eval.golden import load_golden
from agentic_loop.errors import ConfigError
from agentic_loop.models.model_dirs import ModelDirError, resolve_model_dir
from agentic_loop.tasks.spec import TaskSpec

__all__ = ["EvalReport", "Runner", "RunnerFactory", "TaskScores", "architecture_runner",
           "combine_decisions", "evaluate_models"]

#: What answers a golden task in a runner: an architecture instance (its ``run(task_text)``)
#: or a callable ``TaskSpec -> RunResult | Trajectory`` (anything with a score and errors).
Runner = Any
#: Makes a model's runner: ``chat model -> Runner`` (see :func:`architecture_runner`).
RunnerFactory = Callable[[BaseChatModel], Runner]


def _alias(name: str, old: str) -> Any:
    """A field stored as ``old`` in ``eval.json`` (the name older reports used), read by either."""
    return Field(validation_alias=AliasChoices(name, old), serialization_alias=old)


class TaskScores(BaseModel):
    """One golden task's scores and outputs for both models (``*_arch``: in the runner)."""

    id: str
    task: str
    baseline: float
    candidate: float
    baseline_output: str
    candidate_output: str
    baseline_arch: float | None = None
    candidate_arch: float | None = None
    errors: list[str] = Field(default_factory=list)


class EvalReport(BaseModel):
    """Everything one evaluation found; ``decision`` is what to do with the candidate.

    A pydantic record: ``to_dict()`` is ``eval.json`` (the field names that file
    has always used: ``single_shot``, ``architecture``, ``kl_drift``), and
    ``model_validate`` reads such a file back, old ones included.
    """

    model_config = ConfigDict(populate_by_name=True, serialize_by_alias=True)

    baseline: str
    candidate: str
    arch: str | None
    tasks: list[TaskScores]
    single: GateDecision = _alias("single", "single_shot")
    arch_gate: GateDecision | None = _alias("arch_gate", "architecture")
    decision: Decision
    reasons: list[str]
    kl: DriftReport | None = _alias("kl", "kl_drift")
    kl_note: str | None = None
    diversity: dict[str, DiversityReport] = Field(default_factory=dict)
    plot: Path | None = None

    @computed_field  # type: ignore[prop-decorator]
    @property
    def mode_collapse(self) -> bool:
        """True when the candidate's outputs collapsed (and the baseline's did not)."""
        cand, base = self.diversity.get("candidate"), self.diversity.get("baseline")
        return bool(cand and cand.collapsed and not (base and base.collapsed))

    def to_dict(self) -> dict[str, Any]:
        """The JSON form (``eval.json``, the model card): ``model_dump(mode="json")``."""
        return self.model_dump(mode="json")

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


class _ArchitectureRunner:
    """A model's runner that builds the named architecture per task, under the task's rubric.

    Every task of one model shares one fresh folder (archive, reflections) unless
    ``arch_kwargs`` names one; :meth:`close` removes it.
    """

    def __init__(self, arch: str, llm: BaseChatModel, max_iterations: int,
                 arch_kwargs: dict[str, Any]) -> None:
        self.name = arch
        self.llm = llm
        self.max_iterations = max_iterations
        self.arch_kwargs = arch_kwargs
        self.workdir = Path(tempfile.mkdtemp(prefix=f"eval-{arch}-"))

    def __call__(self, task: TaskSpec) -> Any:
        return _architecture(self.name, self.llm, task, self.workdir, self.max_iterations,
                             dict(self.arch_kwargs)).run(task.task)

    def close(self) -> None:
        shutil.rmtree(self.workdir, ignore_errors=True)


def architecture_runner(arch: str, *, max_iterations: int = 2,
                        arch_kwargs: dict[str, Any] | None = None) -> RunnerFactory:
    """The runner factory for a named architecture: ``runners=architecture_runner("reflection")``.

    Each model gets a runner that builds ``arch`` per golden task with that
    task's rubric, in a fresh folder of its own. The name is checked here,
    before any model loads.

    >>> architecture_runner("tree-of-thought")
    Traceback (most recent call last):
    ...
    agentic_loop.errors.ConfigError: unknown architecture 'tree-of-thought'; choose one of ...
    """
    from agentic_loop.architectures import architecture_class

    architecture_class(arch)

    def make(llm: BaseChatModel) -> _ArchitectureRunner:
        return _ArchitectureRunner(arch, llm, max_iterations, dict(arch_kwargs or {}))

    make.runner_name = arch  # type: ignore[attr-defined]
    return make


def _runner_name(runner: Any) -> str:
    name = getattr(runner, "runner_name", None) or getattr(runner, "name", None)
    return str(name) if name else getattr(runner, "__name__", type(runner).__name__)


def _run_one(runner: Runner, item: TaskSpec) -> tuple[float, list[str]]:
    """A runner's score and errors on one task (an architecture's ``run``, else a call)."""
    from agentic_loop.trajectories import Trajectory

    result = runner.run(item.task) if hasattr(runner, "run") else runner(item)
    if isinstance(result, Trajectory):
        return float(result.final_score or 0.0), list(result.errors)
    return float(getattr(result, "score", None) or 0.0), list(getattr(result, "errors", []))


def _single_shot(llm: BaseChatModel, judge: BaseChatModel, golden: Sequence[TaskSpec],
                 bar: Any, label: str, max_concurrency: int = 1
                 ) -> tuple[list[float], list[str], list[str]]:
    from concurrent.futures import ThreadPoolExecutor

    from agentic_loop.judges import Critic, rubric_for_task
    from agentic_loop.models.structured_output import message_text

    job = bar.add_task(f"{label}: single-shot", total=len(golden), unit="held-out tasks")

    def one(item: TaskSpec) -> tuple[float, str, str]:
        error = ""
        try:
            output = message_text(llm.invoke(item.task)).strip()
            rubric = rubric_for_task(item)
            critic = Critic(judge, rubric, critique_text=False)
            score = float(critic.critique(item.task, output).score)
        except Exception as exc:  # noqa: BLE001 - a failed answer scores 0; the report says why
            output, score, error = "", 0.0, f"{label} single-shot on {item.id!r}: {exc}"
        bar.advance(job)
        return score, output, error

    # concurrent calls share the local engine's batches (the demo's 200 tasks in ~80 s, not ~9 min)
    with ThreadPoolExecutor(max_workers=max(1, max_concurrency)) as pool:
        done = list(pool.map(one, golden)) if max_concurrency > 1 else [one(g) for g in golden]
    return [d[0] for d in done], [d[1] for d in done], [d[2] for d in done]


def _in_runner(runner: Runner, name: str, golden: Sequence[TaskSpec], bar: Any,
               label: str) -> tuple[list[float], list[str]]:
    job = bar.add_task(f"{label}: {name}", total=len(golden), unit="held-out tasks")
    scores, errors = [], []
    try:
        for item in golden:
            try:
                score, errs = _run_one(runner, item)
                scores.append(score)
                errors.append("; ".join(errs))
            except Exception as exc:  # noqa: BLE001 - a failed run scores 0; the report says why
                scores.append(0.0)
                errors.append(f"{label} {name} on {item.id!r}: {exc}")
            bar.advance(job)
    finally:
        close = getattr(runner, "close", None)
        if callable(close):
            close()
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
    runners: tuple[Runner, Runner] | RunnerFactory | None = None,
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
    max_concurrency: int = 1,
) -> EvalReport:
    """Score ``baseline`` and ``candidate`` on the golden set and decide (see the module doc).

    Args:
        baseline / candidate: model specs (``"local"``, ``"local:<dir>"``,
            ``"openai:<url>"``) or ready chat models.
        golden_tasks: a golden-set JSONL path or tasks (:class:`~agentic_loop.tasks.spec.TaskSpec`;
            those without an ``id`` are numbered from 1).
        runners: also score both inside runners, as they will serve: a pair
            ``(baseline_runner, candidate_runner)`` (architecture instances, or callables
            task -> trajectory / run result), or a factory ``chat model -> runner`` such as
            :func:`architecture_runner` (``architecture_runner("reflection")``).
        arch: deprecated (one release): ``runners=architecture_runner(arch, max_iterations=...,
            arch_kwargs=...)``.
        max_iterations / arch_kwargs: the deprecated ``arch``'s round limit and keywords.
        judge: judges rubric features that are not checks (default: the baseline).
        max_tokens / temperature: generation settings for both models (greedy by default).
        alpha / rollback_ratio / min_tasks / min_effect / max_kl: the gate's evidence rules
            (see :func:`~agentic_loop.distill.eval.gate.gate`); the measured KL drift
            goes into the decision, so drift above ``max_kl`` rolls back.
        kl: measure KL drift when both models are local weights.
        diversity_check: measure output diversity (loads the embedder).
        plot_path: where to write the before/after PNG (``None``: no plot).
        max_concurrency: single-shot answers in flight per model (1: one at a time).
    """
    from agentic_loop.models import load_chat_model

    if arch is not None:
        if runners is not None:
            raise ConfigError("pass runners= or the deprecated arch=, not both")
        warnings.warn("evaluate_models(arch=NAME) is deprecated and goes in the next release; "
                      "pass runners=architecture_runner(NAME, max_iterations=..., "
                      "arch_kwargs=...)", DeprecationWarning, stacklevel=2)
        # the one name check, before any model loads
        runners = architecture_runner(arch, max_iterations=max_iterations,
                                      arch_kwargs=arch_kwargs)

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
        b_scores, b_out, b_err = _single_shot(base_llm, judge_llm, golden, bar, "baseline",
                                              max_concurrency)
        c_scores, c_out, c_err = _single_shot(cand_llm, judge_llm, golden, bar, "candidate",
                                              max_concurrency)
        rows = [TaskScores(id=str(g.id), task=g.task, baseline=b, candidate=c, baseline_output=bo,
                           candidate_output=co, errors=[e for e in (be, ce) if e])
                for g, b, c, bo, co, be, ce in zip(golden, b_scores, c_scores, b_out, c_out,
                                                   b_err, c_err, strict=True)]
        single = gate(b_scores, c_scores, **rules)
        arch_gate, name = None, None
        if runners is not None:
            pair = runners if isinstance(runners, tuple) else (runners(base_llm),
                                                                runners(cand_llm))
            for runner in pair:  # one judge for both sides here too: neither grades itself
                if isinstance(runner, _ArchitectureRunner):
                    runner.arch_kwargs.setdefault("judge", judge_llm)
            name = _runner_name(runners if not isinstance(runners, tuple) else pair[1])
            ba, ba_err = _in_runner(pair[0], name, golden, bar, "baseline")
            ca, ca_err = _in_runner(pair[1], name, golden, bar, "candidate")
            for row, b, c, be, ce in zip(rows, ba, ca, ba_err, ca_err, strict=True):
                row.baseline_arch, row.candidate_arch = b, c
                row.errors += [e for e in (be, ce) if e]
            arch_gate = gate(ba, ca, **rules)

    spread: dict[str, DiversityReport] = {}
    if diversity_check:
        spread = {"baseline": diversity(b_out, embedder),
                  "candidate": diversity(c_out, embedder)}
    report = EvalReport(baseline=_name(baseline), candidate=_name(candidate), arch=name,
                        tasks=rows, single=single, arch_gate=arch_gate,
                        decision=Decision.MANUAL_REVIEW, reasons=[], kl=drift, kl_note=note,
                        diversity=spread)
    decisions = [single.decision] + ([arch_gate.decision] if arch_gate else [])
    report.decision = combine_decisions(decisions, collapsed=report.mode_collapse)
    report.reasons = [f"single-shot: {single}"]
    if arch_gate is not None:
        report.reasons.append(f"{name}: {arch_gate}")
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
