"""``improve``: the flywheel in rounds: grow, hint retry, train, gate, register, promote.

``improve`` is the one entry point for improvement rounds (the one-shot
``distill_loop`` is one round of it on runs already logged, ``runs=``; the
demo's rounds call it too). It makes the model produce its own training
data, round after round (ReST / expert iteration, with STaR's rationalization):

1. **grow**: the architecture (``arch``) with the current model over a task
   pool, ``samples`` per task at scheduled temperatures, each sample scored
   by its task's locked rubric of Python checks
   (:mod:`~agentic_loop.distill.loop.grow`); the runs are
   trajectories in ``round-NNN/grown``;
2. **hint**: tasks with no passing sample are retried once with a hint
   (a known answer, asking for the working; else the verifier's failed
   checks); a hinted answer is logged, and trained on, as an answer to the
   plain task (``round-NNN/hinted``);
3. **data** (the *data gate*): the round's runs through the one export path
   (:func:`~agentic_loop.distill.data.export.export_datasets`: PII gate,
   curation: only samples that pass every check and raise no guard flag
   train) with the round's score threshold, which rises each round
   (GRPO trains on the pool's prompt set instead);
4. **train**: LoRA (by default) from the model the last gate kept;
5. **gate** (the *release gate*): the candidate against that model on a golden set held apart
   from the pool (:func:`~agentic_loop.distill.eval.evaluate.evaluate_models`);
6. **register**: the candidate is registered with the round's summary in
   its card and the audit log; PROMOTE promotes it and swaps the served
   model (``agentic_loop.distill.release.live.sync_served``, when present);
   ROLLBACK and MANUAL_REVIEW keep the current one.

On **tool tasks** (a :class:`~agentic_loop.tasks.tool_tasks.ToolTask`, or a
task naming ready tools in ``metadata["tools"]``) the round runs the
agent (:mod:`~agentic_loop.distill.loop.tool_use`): grow samples ``samples``
episodes per task with the task's tools (at most ``max_steps`` model calls;
``first_tool_call`` forces each grown episode's first call to be a tool
call), the hint is the verifier's verdict (never the answer) and a hinted
draft that quotes it is dropped, the gate runs both models as agents on the
golden tool tasks and their scores decide, and the report adds ``agent``:
tool-use rate, tool-call validity and model steps per task of the grown data
and of both agents. Plain tasks in the same pool run as before.

Four more methods rest on a judge, a reference or a vote
(:mod:`~agentic_loop.distill.loop.methods`): ``self-rewarding`` (the judge,
``judge`` or the current model, ranks each task's samples into DPO pairs),
``spin`` (a task's reference answer against the policy's own), ``ttrl``
(GRPO with the majority vote across each group as the reward) and
``constitutional`` (written principles as judged features; the judge
critiques, the policy revises; better revisions train). Judged data trains
only while the agreement alarm allows it (people's labels in ``review_logs``
and the round's runs); refused, the round trains on the checks' data, and
its data stage records the refusal, the judge and the method.

Given ``runs`` (logs already written, e.g. served traffic) instead of a
pool, the round takes them as its grown data: it samples nothing (no grow,
no hint; its pool rate is the runs' accepted share), exports them with the
export's own defaults (the latency filter stays on: they are not the loop's
own runs; GRPO trains on the export's prompt set, PII-gated), then trains,
gates and registers like any round. That is one round: ``rounds`` must be 1.

The loop stops on the round budget, a plateau (the golden pass rate not
up by ``min_gain`` over its best for ``patience`` rounds), a regression
(ROLLBACK), or a round with nothing to train on. Every stage is recorded
in ``round-NNN/state.json`` (:mod:`~agentic_loop.distill.loop.state`),
so a killed run started again skips what it finished. Each round writes
``report.json`` (an :class:`~agentic_loop.distill.loop.records.ImproveRound`);
the run writes ``improve.json`` and ``improve.png`` and returns an
:class:`~agentic_loop.distill.loop.records.ImproveResult`.

Example (options are checked before any model loads):
    >>> improve("pool.jsonl", golden="golden.jsonl", registry="reg", work_dir="w", samples=0)
    Traceback (most recent call last):
    ...
    agentic_loop.errors.ConfigError: samples (--samples) must be at least 1, got 0
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Protocol

from agentic_loop.distill.eval.gate import Decision
from agentic_loop.distill.loop.records import ImproveResult, ImproveRound, StopCode
from agentic_loop.distill.loop.report import plot_curve
from agentic_loop.distill.loop.round import (
    RESULT_KEYS,
    RoundRunner,
    round_report,
    sync_live,
)
from agentic_loop.distill.loop.settings import ImproveSettings, votes_unchecked
from agentic_loop.distill.loop.state import RoundState, Watermark, write_json
from agentic_loop.errors import ConfigError
from agentic_loop.tables import percent
from agentic_loop.tasks.spec import TaskSpec

__all__ = ["ImproveBackend", "ImproveProgress", "ImproveResult", "ImproveSettings", "improve",
           "stop_reason", "sync_live"]

IMPROVE_FILE = "improve.json"
WATERMARK_FILE = "watermark.json"


class ImproveProgress(Protocol):
    """Receives progress: a step starts (with its size, if known), then advances."""

    def start(self, stage: str, total: int | None = None) -> None: ...

    def advance(self, n: int = 1) -> None: ...


def _load_chat(spec: str, temperature: float, max_tokens: int) -> Any:
    from agentic_loop.models import load_chat_model

    return load_chat_model(spec, temperature=temperature, max_tokens=max_tokens)


def _train(data: Path, out: Path, **kwargs: Any) -> Any:
    from agentic_loop.distill.train import train

    return train(data, out, **kwargs)


def _as_spec(spec: str) -> Any:
    return spec


@dataclass(frozen=True)
class ImproveBackend:
    """How the loop reaches models; the defaults are the real ones.

    ``chat(spec, temperature, max_tokens)`` makes the sampling model,
    ``train(data, out, **kwargs)`` is :func:`~agentic_loop.distill.train.train`,
    ``gate_model(spec)`` is what the gate is given for a model spec (the spec
    itself, so KL drift can read the weights). Tests swap in scripted models.
    """

    chat: Callable[[str, float, int], Any] = _load_chat
    train: Callable[..., Any] = _train
    gate_model: Callable[[str], Any] = _as_spec


def stop_reason(reports: Sequence[ImproveRound], settings: ImproveSettings
                ) -> tuple[StopCode, str] | None:
    """Why the loop stops after these rounds (``(code, reason)``), or ``None`` to go on.

    >>> from agentic_loop.distill.loop.records import GoldenStats
    >>> r = lambda n, passed: ImproveRound(round=n, decision="MANUAL_REVIEW",
    ...     golden=GoldenStats.of(baseline=(10, 20), candidate=(passed, 20)))
    >>> stop_reason([r(1, 12), r(2, 12), r(3, 11)], ImproveSettings(patience=2))[0]
    'plateau'
    >>> stop_reason([r(1, 12), r(2, 14)], ImproveSettings(patience=2)) is None
    True
    """
    if not reports:
        return None
    last = reports[-1]
    if last.ended:
        return "no_data", str(last.ended)
    if last.decision == Decision.ROLLBACK:
        return "regression", (f"round {last.round}: the gate said ROLLBACK; the current "
                              "model is kept")
    golden = reports[0].golden
    best = golden.baseline.pass_rate if golden else None
    misses = 0
    for report in reports:
        rate = report.golden.candidate.pass_rate if report.golden else None
        if rate is None or best is None or rate >= best + settings.min_gain - 1e-12:
            best = rate if best is None or (rate is not None and rate > best) else best
            misses = 0
        else:
            misses += 1
    if misses >= settings.patience:
        return "plateau", (f"the golden pass rate has not risen by {percent(settings.min_gain)} "
                           f"over its best ({percent(best)}) for {misses} rounds")
    if len(reports) >= settings.rounds:
        return "rounds", f"the round budget ({settings.rounds}) is spent"
    return None


def _claim(work: Path, settings: ImproveSettings, source: str) -> str:
    """The run's fingerprint; refuse a work folder another run (other settings) owns."""
    fingerprint = settings.fingerprint(source)
    path = work / IMPROVE_FILE
    if path.is_file():
        import json

        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            data = None
        previous = data.get("fingerprint") if isinstance(data, dict) else None
        if previous not in (None, fingerprint):
            raise ConfigError(
                f"the work folder {work} holds an improve run with other settings or tasks "
                f"(or other given runs; fingerprint {previous}, this run {fingerprint}); pass "
                "another work folder (--work, or --out), or delete that folder to start over")
    return fingerprint


def _golden_tasks(golden: str | os.PathLike[str] | Sequence[TaskSpec]) -> list[TaskSpec]:
    from agentic_loop.distill.eval.golden import load_golden

    if isinstance(golden, (str, os.PathLike)):
        return load_golden(golden)
    return [g if g.id is not None else g.model_copy(update={"id": str(i)})
            for i, g in enumerate(golden, start=1)]


def improve(
    tasks: str | os.PathLike[str] | Sequence[TaskSpec] | None = None,
    *,
    golden: str | os.PathLike[str] | Sequence[TaskSpec],
    registry: Any,
    work_dir: str | os.PathLike[str],
    trajectories: Sequence[str | os.PathLike[str]] | None = None,
    runs: Sequence[str | os.PathLike[str]] | None = None,
    settings: ImproveSettings | None = None,
    backend: ImproveBackend | None = None,
    progress: ImproveProgress | None = None,
    **options: Any,
) -> ImproveResult:
    """Run improve rounds (see the module doc) and return every round's report.

    Args:
        tasks: the pool: a task file (JSONL as the golden set) or task specs.
        golden: the golden set (a file or specs); must share no task with the pool.
        registry: a :class:`~agentic_loop.distill.release.registry.Registry` or its folder.
        work_dir: one ``round-NNN`` folder per round, ``improve.json``, ``improve.png``.
        trajectories: instead of ``tasks``: TrajectoryLog folders or files whose *new*
            runs (past the watermark in ``work_dir``) give each round its pool.
        runs: instead of a pool: TrajectoryLog folders or files whose runs *are* the
            round's grown data (one round, nothing sampled; ``distill_loop`` is this call).
        settings: an :class:`ImproveSettings`; ``options`` override its fields
            (``rounds=2, samples=4, method="sft", thresholds=(7, 8, 9)``, ...).
        backend: how models are loaded and trained (tests pass scripted ones).
        progress: receives each stage and its progress (the CLI's display).
    """
    settings = replace(settings or ImproveSettings(), **options)
    if isinstance(runs, (str, os.PathLike)):  # one log, not a sequence of characters
        runs = [runs]
    if [tasks is not None, bool(trajectories), bool(runs)].count(True) != 1:
        raise ConfigError("pass exactly one pool: tasks (a task file, --tasks), trajectories "
                          "(logs whose new runs give each round's tasks, --from-trajectories) "
                          "or runs (logged runs that are one round's data)")
    if runs and settings.rounds != 1:
        raise ConfigError(f"runs are one round's data (nothing to grow later rounds from); "
                          f"pass rounds=1, got {settings.rounds}")
    from agentic_loop.distill.loop.gating import baseline_spec
    from agentic_loop.distill.loop.pool import given_runs, read_pool, trajectory_pool, write_pool
    from agentic_loop.distill.release.registry import Registry

    golden_tasks = _golden_tasks(golden)
    given = given_runs(runs) if runs else None
    reg = registry if isinstance(registry, Registry) else Registry(registry)
    work = Path(work_dir).expanduser()
    source = (os.fspath(tasks) if isinstance(tasks, (str, os.PathLike))
              else "tasks" if tasks is not None else f"runs:{given.digest}" if given
              else "trajectories")
    fingerprint = _claim(work, settings, source)
    # a vote rewards the tasks no check can score (TTRL): the pool keeps them
    unchecked = votes_unchecked(settings.method, settings.train_options)
    file_pool = (read_pool(tasks, golden_tasks, unchecked=unchecked)[0]
                 if tasks is not None else None)
    runner = RoundRunner(settings, backend or ImproveBackend(), reg, golden_tasks, work,
                         progress, golden_label=os.fspath(golden)
                         if isinstance(golden, (str, os.PathLike)) else "given", given=given)
    reports: list[ImproveRound] = []
    stopped: tuple[StopCode, str] | None = None
    number = 0
    while stopped is None:
        number += 1
        state = RoundState.open(work, number, required=RESULT_KEYS)
        if not state.started:
            pool, extra = file_pool, dict[str, Any]()
            if given is not None:
                extra = {"given_runs": given.paths}
            elif pool is None:
                assert trajectories is not None
                found = trajectory_pool(trajectories, Watermark.load(work / WATERMARK_FILE),
                                        golden_tasks, unchecked=unchecked)
                if not found.tasks:
                    what = "task" if unchecked else "task with a check"
                    stopped = ("no_new_tasks", f"no new {what} in the trajectories "
                               f"since the last round ({found.runs} new runs)")
                    break
                pool = found.tasks
                extra = {"watermark": found.watermark.model_dump(mode="json"),
                         "from_runs": found.runs, "golden_dropped": found.golden_dropped,
                         "unscored": found.unscored}
            sized: dict[str, int] = {}
            if pool is not None:  # given runs: no pool, nothing is sampled
                write_pool(state.dir / "pool.jsonl", pool)
                sized = {"pool_tasks": len(pool)}
            current = reg.current
            state.start(model=baseline_spec(reg, settings.base),
                        version=current.version if current is not None else None,
                        threshold=settings.threshold_for(number), **sized, **extra)
        if "watermark" in state.data:  # taken by this round: never read again
            write_json(work / WATERMARK_FILE, state.data["watermark"])
        runner.run(state)
        reports.append(round_report(state, settings))
        write_json(state.dir / "report.json", reports[-1].model_dump(mode="json"))
        _write_overall(work, fingerprint, settings, reports, None, reg)
        stopped = stop_reason(reports, settings)
    assert stopped is not None  # the loop ends only with a reason
    code, reason = stopped
    plot = _write_overall(work, fingerprint, settings, reports, stopped, reg)
    current = reg.current
    return ImproveResult(work_dir=work, reports=reports, stopped=code, reason=reason,
                         current=current.version if current else None, plot=plot,
                         settings=settings)


def _write_overall(work: Path, fingerprint: str, settings: ImproveSettings,
                   reports: list[ImproveRound], stopped: tuple[StopCode, str] | None,
                   reg: Any) -> Path | None:
    plot = plot_curve(reports, work / "improve.png") if reports else None
    current = reg.current
    write_json(work / IMPROVE_FILE, {
        "fingerprint": fingerprint, "settings": settings.to_dict(),
        "stopped": stopped[0] if stopped else None, "reason": stopped[1] if stopped else None,
        "current": current.version if current is not None else None,
        "plot": str(plot) if plot else None,
        "rounds": [r.model_dump(mode="json") for r in reports]})
    return plot
