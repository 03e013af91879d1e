"""The training loop in one call: one improve round on runs already logged.

``distill_loop`` is what ``agentic-loop distill --from-trajectories`` runs:
the runs already logged are the round's data
(:func:`~agentic_loop.distill.loop.improve.improve` with ``runs=...``, ``rounds=1``),
so nothing is sampled, and the round

1. exports them (:func:`~agentic_loop.distill.data.export.export_datasets`,
   with its own defaults: ``min_score`` 0.8, the PII gate, the latency filter);
2. trains (:func:`~agentic_loop.distill.train.train`; full weights unless
   ``train_options`` says ``lora``; merged, so the model serves as a plain checkpoint)
   from the registry's *current* version (or ``base`` before the first promotion);
3. evaluates it against that model on the golden set
   (:func:`~agentic_loop.distill.eval.evaluate.evaluate_models`: ``eval.json``, ``eval.png``);
4. registers it with its card (the evaluation appended) and promotes it only
   when the release gate says PROMOTE (the promote's audit line keeps the gate's
   record, :class:`~agentic_loop.distill.release.registry_audit.GateRecord`);
   otherwise it stays registered for a person to review. Since its last gate
   decision was ROLLBACK or MANUAL_REVIEW, a plain promote is refused: after
   the review, ``agentic-loop registry promote VERSION --force`` (or
   ``Registry.promote(version, force=True)``) serves it and records the
   override in the audit log.

It is one round of the one loop, so it writes what a round writes
(``work_dir/round-001/``: ``state.json``, ``data/``, ``model/``, ``eval.json``,
``report.json``; ``improve.json``) and returns an
:class:`~agentic_loop.distill.loop.records.ImproveResult`. A killed call run
again continues from the last finished stage; a finished one returns what it
recorded; the same folder with other runs or settings is refused (its model
is a registered version: it is never trained over).

Example (arguments are checked before any work starts):
    >>> distill_loop(["logs"], "work", golden="golden.jsonl", registry="reg", method="ppo")
    Traceback (most recent call last):
    ...
    agentic_loop.errors.ConfigError: method (--method) must be one of sft, dpo, sft+dpo, grpo, ...
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from agentic_loop.distill.loop.improve import ImproveProgress, improve
from agentic_loop.distill.loop.records import ImproveResult
from agentic_loop.distill.loop.settings import ImproveSettings

if TYPE_CHECKING:
    from agentic_loop.distill.release.registry import Registry

__all__ = ["distill_loop"]

#: ``export_datasets``' own score threshold, the one-shot data gate's default.
EXPORT_MIN_SCORE = 0.8


def distill_loop(
    trajectories: Sequence[str | os.PathLike[str]] | str | os.PathLike[str],
    work_dir: str | os.PathLike[str],
    *,
    golden: str | os.PathLike[str],
    registry: Registry | str | os.PathLike[str],
    base: str = "local",
    method: str = "sft",
    arch: str | None = None,
    judge: str | None = None,
    export_options: dict[str, Any] | None = None,
    train_options: dict[str, Any] | None = None,
    eval_options: dict[str, Any] | None = None,
    progress: ImproveProgress | None = None,
) -> ImproveResult:
    """Run the whole training loop once (see the module doc): one round on ``trajectories``.

    ``registry`` is a :class:`~agentic_loop.distill.release.registry.Registry` or its
    folder. ``judge`` (a chat model spec; ``None``: the current model) judges the gate's
    judged features and, for ``grpo`` with ``train_options["judged_reward"] == "rank"``,
    ranks the training groups (:class:`~agentic_loop.distill.loop.settings.ImproveSettings`).
    ``export_options``, ``train_options`` and ``eval_options`` go to
    ``export_datasets`` (its ``min_score`` is the round's threshold), ``train``
    and ``evaluate_models`` (``arch``: also gate inside that architecture).
    The round's report is ``result.reports[0]``. Raises the export's
    :class:`~agentic_loop.distill.data.errors.EmptyExportError` when the runs
    leave nothing to train on.
    """
    from agentic_loop.distill.data.errors import EmptyExportError, ExportError

    paths = ([trajectories] if isinstance(trajectories, (str, os.PathLike))
             else list(trajectories))
    export = dict(export_options or {})
    min_score = float(export.pop("min_score", EXPORT_MIN_SCORE))
    if not 0.0 <= min_score <= 1.0:  # the round's threshold is on the 0-10 scale
        raise ExportError("min_score (--min-score) is on the [0, 1] reward scale (rubric "
                          f"score / 10), got {min_score:g}")
    threshold = round(min_score * 10, 9)
    settings = ImproveSettings(
        rounds=1, method=method, base=base, eval_arch=arch, thresholds=(threshold,), judge=judge,
        train_options={"lora": False, **(train_options or {})}, export_options=export,
        eval_options={"progress": progress is None, **(eval_options or {})})
    result = improve(runs=paths, golden=golden, registry=registry, work_dir=work_dir,
                     settings=settings, progress=progress)
    if result.stopped == "no_data":
        raise EmptyExportError(result.reason)
    return result
