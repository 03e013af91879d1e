"""A round's release-gate side: the model to beat, the gate's runners, registering the result.

Why a module of its own: the round's stages (:mod:`.round`) and the loop
that opens rounds (:mod:`.improve`, which records each round's baseline)
share these rules, and they are the registry's side of a round, apart from
its sampling and data: the model a candidate must beat, how the gate runs
it, and how an evaluated candidate is registered and promoted.

On a golden set of tool tasks the gate is **agent against agent**
(:func:`agent_gate`): both models run as the agent (each golden task's
tools, the round's architecture), and the agents' scores decide
(:func:`agent_decision`): single-shot answers without the tools are still
scored and kept in ``eval.json``, but they measure the model without the
tools it is served with, so they do not decide an agent round.

Example:
    >>> from types import SimpleNamespace
    >>> baseline_spec(SimpleNamespace(current=None), "local")
    'local'
    >>> eval_runners(None, {"max_iterations": 2}) is None
    True
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agentic_loop.distill.eval.gate import Decision
from agentic_loop.distill.loop.tool_use import AgentGate, any_tools
from agentic_loop.distill.release.registry_audit import GateRecord, RoundRef
from agentic_loop.distill.train.model_card import add_eval
from agentic_loop.tasks.spec import TaskSpec

if TYPE_CHECKING:
    from agentic_loop.distill.eval.evaluate import EvalReport
    from agentic_loop.distill.loop.settings import ImproveSettings
    from agentic_loop.distill.release.registry import Registry
    from agentic_loop.distill.release.registry_audit import ModelVersion

__all__ = ["agent_decision", "agent_gate", "baseline_spec", "eval_runners", "gate_record",
           "register_evaluated"]


def eval_runners(arch: str | None, options: dict[str, Any]) -> Any:
    """The gate's runners for ``arch`` (``None``: single-shot only).

    Takes the architecture's keywords (``max_iterations``, ``arch_kwargs``)
    out of ``options``, the keywords ``evaluate_models`` gets.
    """
    max_iterations = options.pop("max_iterations", 2)
    arch_kwargs = options.pop("arch_kwargs", None)
    if arch is None:
        return None
    from agentic_loop.distill.eval.evaluate import architecture_runner

    return architecture_runner(arch, max_iterations=max_iterations, arch_kwargs=arch_kwargs)


def agent_gate(settings: ImproveSettings, golden: Sequence[TaskSpec],
               options: dict[str, Any]) -> AgentGate | None:
    """The gate's agents when a golden task gives tools (``None``: a plain golden set).

    The agent is the round's: ``eval_arch`` (else ``arch``), ``max_steps``;
    its rounds are ``max_iterations`` in ``options`` (taken out, as
    :func:`eval_runners` does), else the round's own (``eval_arch``: 2).
    """
    if not any_tools(golden):
        return None
    default = 2 if settings.eval_arch is not None else settings.max_iterations
    max_iterations = options.pop("max_iterations", default)
    arch_kwargs = options.pop("arch_kwargs", None)
    return AgentGate(settings.eval_arch or settings.arch, max_iterations=max_iterations,
                     max_steps=settings.max_steps, arch_kwargs=arch_kwargs)


def agent_decision(report: EvalReport, gate: AgentGate, options: Mapping[str, Any]) -> None:
    """Make the agents' gate the decision of ``report`` (in place; see the module doc).

    The candidate agent must beat the baseline agent (the architecture gate's
    rules, KL drift included), and its answers must not have collapsed into
    near-copies when the baseline's did not (measured on the agents' answers
    when ``diversity_check`` is on).
    """
    from agentic_loop.distill.eval.evaluate import combine_decisions

    if report.arch_gate is None:  # the agents did not run: nothing decides but review
        report.decision, report.reasons = Decision.MANUAL_REVIEW, [
            *report.reasons, "the agents did not run on the golden tool tasks"]
        return
    collapsed, note = False, []
    if options.get("diversity_check", True):
        from agentic_loop.distill.eval.diversity import diversity

        answers = {side: [r.final_output or "" for r in gate.runs(side).values()]
                   for side in ("baseline", "candidate")}
        spread = {side: diversity(out, options.get("embedder"))
                  for side, out in answers.items()}
        collapsed = spread["candidate"].collapsed and not spread["baseline"].collapsed
        if collapsed:
            note = ["the candidate agent's answers collapsed into near-copies (mean distance "
                    f"{spread['candidate'].mean_distance:.3f}); not promoted"]
    report.decision = combine_decisions([report.arch_gate.decision], collapsed=collapsed)
    report.reasons = [f"{report.arch}: {report.arch_gate}",
                      f"single-shot without tools (recorded; an agent round is decided by its "
                      f"agents): {report.single}", *note]


def baseline_spec(registry: Registry, base: str) -> str:
    """The model a candidate must beat: the registry's current weights, else ``base``.

    A current LoRA adapter cannot be loaded on its own, so ``base`` stands in for it.
    """
    current = registry.current
    return f"local:{current.path}" if current is not None and not current.adapter else base


def gate_record(entry: Mapping[str, Any], improve: RoundRef | None = None) -> GateRecord:
    """The release gate's record of an evaluation: what a promote's audit line keeps.

    ``entry`` is the evaluation as the model card holds it
    (:meth:`EvalReport.card_entry <agentic_loop.distill.eval.evaluate.EvalReport.card_entry>`):
    its decision, reasons and per-mode gate numbers; ``improve`` names the round.

    >>> gate_record({"decision": "PROMOTE", "reasons": ["better"], "single_shot": None},
    ...             RoundRef(round=1)).improve.round
    1
    """
    return GateRecord(decision=entry["decision"], reasons=[str(r) for r in
                                                           entry.get("reasons") or []],
                      single_shot=entry.get("single_shot"),
                      architecture=entry.get("architecture"), improve=improve)


def register_evaluated(registry: Registry, model_dir: str | os.PathLike[str],
                       summary: Mapping[str, Any], *, baseline: str, notes: str | None = None,
                       reason: str | None = None, improve: RoundRef | None = None,
                       promote: bool = True) -> ModelVersion:
    """Append an evaluation to the model's card, register it, promote it when it says PROMOTE.

    ``promote=False`` registers it with the evaluation only (the flywheel canaries it first).

    ``summary`` is :meth:`EvalReport.card_entry` (plus what the caller adds),
    appended to the model card as it is; the promote's audit line keeps its
    :func:`gate_record` (with ``improve``, the round that asked). A model
    already registered (a step re-run after a crash, or after its round's
    state was lost: the same weights, by content digest) is not registered
    again: its version is promoted, or not, as the evaluation says.
    """
    folder = Path(model_dir).expanduser()
    version = registry.registered(folder)
    if version is None:
        add_eval(folder, dict(summary))
        version = registry.register(folder, notes=notes)
    if promote and summary["decision"] == Decision.PROMOTE.value:
        registry.promote(version.version, reason=reason or f"gate PROMOTE vs {baseline}",
                         gate=gate_record(summary, improve))
    return version
