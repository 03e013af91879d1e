"""The training loop in one call: export, train, evaluate, register, promote if the gate passes.

``distill_loop`` is what ``agentic-loop distill --from-trajectories`` runs.
Each step is the library's own function, so the loop adds only the wiring:

1. :func:`~agentic_loop.distill.data.export.export_datasets` writes ``work_dir/data``;
2. :func:`~agentic_loop.distill.train.train` writes ``work_dir/model`` (LoRA
   merged, so the model serves as a plain checkpoint);
3. :func:`~agentic_loop.distill.eval.evaluate.evaluate_models` compares it with
   the registry's *current* version (or with ``base`` before the first
   promotion) on the golden set, writing ``eval.json`` and ``eval.png``;
4. the model is registered with its card (the evaluation appended), and
   promoted only when the decision is PROMOTE (the promote's audit line keeps
   the gate's record, :class:`~agentic_loop.distill.release.registry_audit.GateRecord`);
   otherwise it stays registered for a person to review. Since its last gate
   decision was ROLLBACK or MANUAL_REVIEW, a plain promote is refused: after
   the review, ``agentic-loop registry promote VERSION --force`` (or
   ``Registry.promote(version, force=True)``) serves it and records the
   override in the audit log.

Every step is idempotent on a re-run with the same inputs (the export is
rewritten, a finished training run is reused), so a loop that failed at the
evaluation can simply be run again.

Example (arguments are checked before any work starts):
    >>> distill_loop(["logs"], "work", golden="golden.jsonl", registry="reg", method="ppo")
    Traceback (most recent call last):
    ...
    agentic_loop.errors.ConfigError: method (--method) must be one of sft, dpo, sft+dpo, grpo, ...
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agentic_loop.atomic import atomic_write_bytes
from agentic_loop.distill.eval.gate import Decision
from agentic_loop.distill.loop.gating import baseline_spec, register_evaluated
from agentic_loop.distill.train.settings import METHODS
from agentic_loop.errors import ConfigError

if TYPE_CHECKING:
    from agentic_loop.distill.data.export import ExportReport
    from agentic_loop.distill.eval.evaluate import EvalReport
    from agentic_loop.distill.release.registry import Registry
    from agentic_loop.distill.release.registry_audit import ModelVersion
    from agentic_loop.distill.train.trainer import TrainResult

__all__ = ["LoopResult", "distill_loop"]


@dataclass(frozen=True)
class LoopResult:
    """What each step of one loop produced (live objects: the model, its data; not a record)."""

    export: ExportReport
    train: TrainResult
    evaluation: EvalReport
    version: ModelVersion
    baseline: str

    @property
    def promoted(self) -> bool:
        """True when the gate passed and the new version is now current."""
        return self.evaluation.decision == Decision.PROMOTE


def distill_loop(
    trajectories: Sequence[str | os.PathLike[str]] | str | os.PathLike[str],
    work_dir: str | os.PathLike[str],
    *,
    golden: str | os.PathLike[str],
    registry: Registry | str | os.PathLike[str],
    base: str = "local",
    method: str = "sft",
    arch: str | None = None,
    export_options: dict[str, Any] | None = None,
    train_options: dict[str, Any] | None = None,
    eval_options: dict[str, Any] | None = None,
) -> LoopResult:
    """Run the whole training loop once (see the module doc) and return what each step did.

    ``registry`` is a :class:`~agentic_loop.distill.release.registry.Registry` or its
    folder. ``export_options``, ``train_options`` and ``eval_options`` go to
    ``export_datasets``, ``train`` and ``evaluate_models``.
    """
    if method not in METHODS:
        raise ConfigError(f"method (--method) must be one of {', '.join(METHODS)}, "
                          f"got {method!r}")
    train_options = dict(train_options or {})
    if train_options.get("merge_lora") is False:
        raise ConfigError("the loop evaluates the trained model in-process, which needs a "
                          "merged model; leave merge_lora on (drop --no-merge)")
    from agentic_loop.distill.data.export import export_datasets
    from agentic_loop.distill.eval.evaluate import evaluate_models
    from agentic_loop.distill.eval.golden import load_golden
    from agentic_loop.distill.loop.gating import eval_runners
    from agentic_loop.distill.release.registry import Registry
    from agentic_loop.distill.train import train

    golden_tasks = load_golden(golden)  # fail on a bad golden set before hours of training
    reg = registry if isinstance(registry, Registry) else Registry(registry)
    work = Path(work_dir).expanduser()
    exported = export_datasets(trajectories, work / "data", **(export_options or {}))
    trained = train(work / "data", work / "model", method=method, base=base, **train_options)
    baseline = baseline_spec(reg, base)
    options = dict(eval_options or {})
    runners = eval_runners(arch, options)
    report = evaluate_models(baseline, trained.spec, golden_tasks, runners=runners,
                             plot_path=work / "eval.png", **options)
    summary = report.card_entry(golden=str(golden))
    atomic_write_bytes(work / "eval.json", (json.dumps(report.to_dict(), indent=2, default=str)
                                            + "\n").encode())
    notes = f"distilled by the loop; gate {report.decision.value} vs {baseline}"
    version = register_evaluated(reg, trained.model_dir, summary, baseline=baseline, notes=notes)
    return LoopResult(exported, trained, report, version, baseline)
