"""A round's release-gate side: the model to beat, the gate's runners, registering the result.

Why a module of its own: the round's stages (:mod:`.round`) and the loop
that opens rounds (:mod:`.improve`, which records each round's baseline)
share these rules, and they are the registry's side of a round, apart from
its sampling and data: the model a candidate must beat, how the gate runs
it, and how an evaluated candidate is registered and promoted.

Example:
    >>> from types import SimpleNamespace
    >>> baseline_spec(SimpleNamespace(current=None), "local")
    'local'
    >>> eval_runners(None, {"max_iterations": 2}) is None
    True
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agentic_loop.distill.eval.gate import Decision
from agentic_loop.distill.release.registry_audit import GateRecord, RoundRef
from agentic_loop.distill.train.model_card import add_eval

if TYPE_CHECKING:
    from agentic_loop.distill.release.registry import Registry
    from agentic_loop.distill.release.registry_audit import ModelVersion

__all__ = ["baseline_spec", "eval_runners", "gate_record", "register_evaluated"]


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
                       reason: str | None = None,
                       improve: RoundRef | None = None) -> ModelVersion:
    """Append an evaluation to the model's card, register it, promote it when it says PROMOTE.

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
    if summary["decision"] == Decision.PROMOTE.value:
        registry.promote(version.version, reason=reason or f"gate PROMOTE vs {baseline}",
                         gate=gate_record(summary, improve))
    return version
