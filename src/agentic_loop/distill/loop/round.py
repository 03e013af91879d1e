"""One improve round, stage by stage: grow, hint, data, train, gate, register.

Why a module of its own: :mod:`~agentic_loop.distill.loop.improve` decides
*whether* to run another round; this runs one, and runs it resumably. Each
stage is a method that does its work from scratch and returns what the
round's ``state.json`` records; :meth:`RoundRunner.run` skips the stages
the state says are finished, so a killed round continues where it stopped.
:func:`round_report` turns a round's state into its report, a typed
:class:`~agentic_loop.distill.loop.records.ImproveRound`. (``state.json``
stays plain JSON, checked on open: it is the resumable on-disk log, and a
file an earlier version wrote must keep resuming.)

On tool tasks (:mod:`~agentic_loop.distill.loop.tool_use`) the round runs
the agent: grow and hint sample episodes with each task's tools, the gate
runs both models as agents on the golden tool tasks, and the report adds
the tool use of the grown data and of both agents (``agent``).

A round whose method rests on a judge (``self-rewarding``, ``spin``,
``ttrl``, ``constitutional``, or ``grpo`` with a judged reward part) makes
its data in :mod:`~agentic_loop.distill.loop.methods` (the export first,
then the method's rows, gated by the agreement alarm), trains with the
trainer the data stage names (``train_method``), and records which judge
and method made the data (the data stage's ``judged``).

The gate judges the golden tasks' judged features (those that are not checks) with
``ImproveSettings.judge`` when one is given, the same judge for both models; else
with the baseline, as :func:`~agentic_loop.distill.eval.evaluate.evaluate_models` does.

The train stage runs in this process, or, with ``ImproveSettings.parallel``,
as ``accelerate launch ... agentic-loop train`` through a shipped configuration
(:mod:`~agentic_loop.distill.loop.launch`); its ``launch`` result names the
exact command, or why it stayed in this process.

A round given its runs (:class:`~agentic_loop.distill.loop.pool.GivenRuns`,
the one-shot ``distill_loop``) records them as its ``grow`` stage and skips
``hint``; its other stages are the same code.

Example (a round that has not started reports nothing yet):
    >>> import tempfile
    >>> from agentic_loop.distill.loop.state import RoundState
    >>> from agentic_loop.distill.loop.settings import ImproveSettings
    >>> state = RoundState.open(tempfile.mkdtemp(), 1)
    >>> state.start(model="local", threshold=7.0)
    >>> report = round_report(state, ImproveSettings())
    >>> report.pool is None, report.threshold
    (True, 7.0)
"""

from __future__ import annotations

import importlib
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from agentic_loop.agents import agent_options
from agentic_loop.distill.eval.gate import Decision
from agentic_loop.distill.loop.gating import agent_decision, agent_gate, eval_runners
from agentic_loop.distill.loop.grow import (
    RESTATED,
    failed_tasks,
    grow,
    hint_retry,
    outcomes,
    pool_counts,
)
from agentic_loop.distill.loop.launch import launch_line, launched_train
from agentic_loop.distill.loop.methods import handles, method_data, train_method
from agentic_loop.distill.loop.pool import GivenRuns, checked
from agentic_loop.distill.loop.records import ImproveRound, TrainSummary
from agentic_loop.distill.loop.report import (
    golden_stats,
    rate_stats,
    runs_golden_stats,
    summary_line,
)
from agentic_loop.distill.loop.settings import ImproveSettings
from agentic_loop.distill.loop.state import STAGES, RoundState, write_json
from agentic_loop.distill.loop.tool_use import task_tools, tool_use
from agentic_loop.tasks.spec import TaskSpec, load_tasks
from agentic_loop.trajectories import Trajectory, TrajectoryLog

__all__ = ["RESULT_KEYS", "RoundRunner", "round_report", "sync_live"]

#: What each stage's result holds that later stages and :func:`round_report` read back:
#: a ``state.json`` without it is refused when the round is opened, not met as a KeyError.
RESULT_KEYS: dict[str, tuple[str, ...]] = {
    "grow": ("passed", "samples", "tasks", "tasks_solved", "temperatures"),
    "hint": ("retried", "accepted"),
    "data": ("sft_rows", "pairs"),
    "train": ("model_dir", "spec", "steps", "loss"),
    "gate": ("decision", "reasons", "golden", "card_entry"),
    "register": ("version", "promoted"),
}


class RoundRunner:
    """Runs a round's unfinished stages; one runner serves every round of an improve run."""

    def __init__(self, settings: ImproveSettings, backend: Any, registry: Any,
                 golden: list[TaskSpec], work: Path, progress: Any = None, *,
                 golden_label: str = "given", given: GivenRuns | None = None) -> None:
        self.settings = settings
        self.backend = backend
        self.registry = registry
        self.golden = golden
        self.work = work
        self.progress = progress
        self.golden_label = golden_label
        self.given = given

    def run(self, state: RoundState) -> None:
        """Run every stage ``state`` has not finished, in order, recording each when it ends."""
        pool = [] if self.given is not None else load_tasks(state.dir / "pool.jsonl")
        for stage in STAGES:
            if state.data.get("ended"):
                return
            if state.done(stage):
                continue
            started = time.perf_counter()
            result = getattr(self, f"_{stage}")(state, pool)
            state.finish(stage, result, seconds=time.perf_counter() - started)

    # -- helpers ------------------------------------------------------------------------

    def _start(self, state: RoundState, stage: str, total: int | None = None) -> None:
        if self.progress is not None:
            self.progress.start(f"round {state.number}: {stage}", total)

    def _advance(self) -> Callable[[int], None] | None:
        return self.progress.advance if self.progress is not None else None

    def _arch(self, state: RoundState) -> Callable[[float, Sequence[Any]], Any]:
        from agentic_loop.architectures import create_architecture

        model, s = state.data["model"], self.settings
        memory = state.dir / "memory"

        def make(temperature: float, tools: Sequence[Any] = ()) -> Any:
            agent = agent_options(self.backend.chat(model, temperature, s.max_tokens), tools,
                                  max_steps=s.max_steps, first_tool_call=s.first_tool_call)
            return create_architecture(
                s.arch, agent.pop("llm"), max_iterations=s.max_iterations,
                archive=str(memory / "archive"), reflections=str(memory / "reflections"),
                **agent)

        return make

    def _temperatures(self, state: RoundState) -> list[float]:
        return [self.settings.temperature_for(state.number, k)
                for k in range(self.settings.samples)]

    # -- stages -------------------------------------------------------------------------

    def _grow(self, state: RoundState, pool: list[TaskSpec]) -> dict[str, Any]:
        if self.given is not None:  # the round's data is given: nothing to sample
            return {**self.given.counts, "temperatures": [], "given": self.given.paths}
        temperatures = self._temperatures(state)
        scored = checked(pool)  # a task without a check (a vote's, TTRL) cannot be scored
        self._start(state, f"grow ({self.settings.arch}, {len(temperatures)} samples/task)",
                    len(scored) * len(temperatures))
        runs = grow(self._arch(state), scored, state.dir / "grown", round_number=state.number,
                    temperatures=temperatures, max_concurrency=self.settings.max_concurrency,
                    advance=self._advance())
        agent = _agent_use(runs, scored)
        unchecked = len(pool) - len(scored)
        return {**pool_counts(outcomes(runs, scored)), "temperatures": temperatures,
                **({"agent": agent} if agent is not None else {}),
                **({"unchecked": unchecked} if unchecked else {})}

    def _hint(self, state: RoundState, pool: list[TaskSpec]) -> dict[str, Any]:
        if (not self.settings.hint_retry or train_method(self.settings.method) == "grpo"
                or self.given is not None):  # given runs: nothing is sampled, so no retry
            return {"skipped": True, "retried": 0, "accepted": 0}
        runs = TrajectoryLog(state.dir / "grown").read()
        failed = failed_tasks(outcomes(runs, pool), pool)
        self._start(state, "hint retry", len(failed))
        hinted = hint_retry(self._arch(state), failed, state.dir / "hinted",
                            round_number=state.number, temperature=self._temperatures(state)[0],
                            max_concurrency=self.settings.max_concurrency,
                            advance=self._advance())
        # rationalized: given the known answer; restated: a draft that only repeated it (dropped
        # from the data by its guard flag, and counted in the export manifest)
        return {"retried": len(failed), "accepted": sum(t.accepted for t in hinted),
                "rationalized": sum(bool(t.metadata["improve"].get("rationalized"))
                                    for t in hinted),
                "restated": sum(any(RESTATED in r.guards for r in t.rounds) for t in hinted),
                # drafts quoting the hint, dropped from the record (grow.quotes_hint)
                "echoed": sum(bool(t.metadata["improve"].get("hint_echo")) for t in hinted)}

    def _data(self, state: RoundState, pool: list[TaskSpec]) -> dict[str, Any]:
        s = self.settings
        if handles(s.method, s.train_options):  # a judge, a reference or a vote makes the data
            return method_data(self, state, pool)
        if s.method == "grpo" and self.given is None:
            return {"prompts": len(pool), "source": str(state.dir / "pool.jsonl"),
                    "sft_rows": 0, "pairs": 0}
        result = self.export(state)
        if result.get("empty"):
            return result
        needs = {"sft": result["sft_rows"], "dpo": result["pairs"]}
        missing = [k for k in ("sft", "dpo") if k in s.method and not needs[k]]
        if missing:
            threshold = float(state.data["threshold"])
            what = " and ".join("SFT rows" if m == "sft" else "DPO pairs" for m in missing)
            fix = ("lower --min-score or log more runs" if self.given is not None
                   else "lower --thresholds or raise --samples")
            return {**result, **self._end(
                state, f"round {state.number}: no {what} that pass every check and reach the "
                       f"threshold {threshold:g} for method {s.method}; {fix}")}
        return result

    def export(self, state: RoundState, *, end_on_empty: bool = True) -> dict[str, Any]:
        """The round's runs through the one export path (PII gate, curation, the threshold).

        Returns the data stage's counts; an export with nothing in it ends the round
        (``end_on_empty``), or is returned as ``{"empty": True, "reason": ...}``
        for a method that makes rows of its own.
        """
        from agentic_loop.distill.data.errors import EmptyExportError
        from agentic_loop.distill.data.export import export_datasets

        logs: list[str | Path] = [state.dir / name for name in ("grown", "hinted")
                                  if (state.dir / name / TrajectoryLog.FILE).is_file()]
        # the loop's own runs: no latency-outlier filter by default (a hinted retry is slower
        # by design, a second call with a longer prompt); given runs keep the export's defaults
        defaults: dict[str, Any] = {"latency_z": None}
        if self.given is not None:
            logs, defaults = list(self.given.paths), {}
        threshold = float(state.data["threshold"])
        self._start(state, f"export (score >= {threshold:g})")
        try:
            if not logs:
                raise EmptyExportError("the round logged no runs")
            options = {**defaults, **dict(self.settings.export_options)}
            report = export_datasets(logs, state.dir / "data", min_score=threshold / 10,
                                     progress=self.progress, **options)
        except EmptyExportError as exc:
            reason = f"round {state.number}: nothing to train on: {exc}"
            if end_on_empty:
                return self._end(state, reason)
            return {"empty": True, "reason": reason, "sft_rows": 0, "pairs": 0}
        # dropped: what the training rules kept out (failed checks, guard flags, threshold)
        return {"sft_rows": report.sft_rows, "pairs": report.pairs, "dir": str(report.out_dir),
                "dropped": report.dropped}

    def _end(self, state: RoundState, reason: str) -> dict[str, Any]:
        state.data["ended"] = reason
        return {"empty": True, "reason": reason, "sft_rows": 0, "pairs": 0}

    def _train(self, state: RoundState, pool: list[TaskSpec]) -> dict[str, Any]:
        s, data = self.settings, state.result("data")
        method = str(data.get("train_method") or train_method(s.method))
        # GRPO: the pool's prompt set (TTRL: its short-answer tasks); given runs: the export's
        # (PII-gated) prompt set
        grpo_pool = method == "grpo" and self.given is None
        source = Path(data["source"]) if grpo_pool and data.get("source") else (
            state.dir / ("pool.jsonl" if grpo_pool else "data"))
        label = method if method == s.method else f"{s.method}: {method}"
        self._start(state, f"train ({label})")
        # a refused alarm sets judged_reward "none": the round's record overrides the options
        options = {**s.train_kwargs(method), **dict(data.get("train_options") or {})}
        # --parallel: in this process, or `accelerate launch ... agentic-loop train` (.launch)
        result, launch = launched_train(self.backend.train, s, source, state.dir / "model",
                                        method=method, base=state.data["model"],
                                        options=options, log=state.dir / "train.log")
        return {"model_dir": str(result.model_dir), "spec": result.spec,
                "steps": sum(stage.steps for stage in result.stages),
                "loss": result.card.metrics.get("final_train_loss"),
                "reused": result.skipped and launch.command is None, "launch": launch.record()}

    def _gate(self, state: RoundState, pool: list[TaskSpec]) -> dict[str, Any]:
        from agentic_loop.distill.eval.evaluate import evaluate_models

        baseline, candidate = state.data["model"], state.result("train")["spec"]
        self._start(state, f"gate vs {baseline}")
        options = self.settings.eval_kwargs()
        if self.settings.judge and "judge" not in options:  # one judge for both models
            from agentic_loop.distill.loop.methods.common import load_judge

            options["judge"] = load_judge(self, state).llm
        agents = agent_gate(self.settings, self.golden, options)
        runners = agents if agents is not None else eval_runners(self.settings.eval_arch,
                                                                 options)
        report = evaluate_models(self.backend.gate_model(baseline),
                                 self.backend.gate_model(candidate), self.golden,
                                 runners=runners, plot_path=state.dir / "eval.png", **options)
        extra: dict[str, Any] = {}
        if agents is not None:  # agent against agent: their runs decide and are measured
            agent_decision(report, agents, options)
            golden = runs_golden_stats(agents.runs("baseline"), agents.runs("candidate"),
                                       self.golden, pass_score=self.settings.pass_score)
            extra = {"agent": {side: _agent_use({k: [r] for k, r in agents.runs(side).items()},
                                                self.golden)
                               for side in ("baseline", "candidate")}}
        else:
            golden = golden_stats(report, self.golden, pass_score=self.settings.pass_score)
        write_json(state.dir / "eval.json", report.to_dict())
        return {"decision": report.decision.value, "reasons": report.reasons,
                "golden": golden.model_dump(mode="json"),
                "card_entry": report.card_entry(golden=self.golden_label), **extra}

    def _register(self, state: RoundState, pool: list[TaskSpec]) -> dict[str, Any]:
        from agentic_loop.distill.loop.gating import register_evaluated
        from agentic_loop.distill.release.registry_audit import RoundRef

        gate = state.result("gate")
        report = round_report(state, self.settings)
        line = summary_line(report)
        # the card says which method (and, for judged data, which judge) made the version
        parts = report.model_dump(mode="json", include={"pool", "golden", "data", "hint",
                                                        "threshold", "method", "judged"})
        improve = {"round": state.number, "work_dir": str(self.work), "summary": line, **parts}
        self._start(state, "register")
        baseline = state.data["model"]
        version = register_evaluated(
            self.registry, state.result("train")["model_dir"],
            {**gate["card_entry"], "improve": improve}, baseline=baseline, notes=line,
            reason=f"{line}; gate PROMOTE vs {baseline}",
            improve=RoundRef(round=state.number, work_dir=str(self.work), summary=line),
            promote=self.settings.promote)
        promoted = self.settings.promote and gate["decision"] == Decision.PROMOTE.value
        return {"version": version.version, "promoted": promoted,
                "live": sync_live(self.registry) if promoted else None}


def _agent_use(runs: Mapping[str, Sequence[Trajectory]] | Sequence[Trajectory],
               tasks: Sequence[TaskSpec]) -> dict[str, Any] | None:
    """Tool use over the tool tasks' runs (``None`` when no task gives tools).

    ``runs`` are by task id (the gate's), or grown runs, matched by their ``improve`` tag.
    """
    ids = [str(t.id) for t in tasks if task_tools(t)]
    if not ids:
        return None
    if not isinstance(runs, Mapping):
        tagged: dict[str, list[Trajectory]] = {}
        for run in runs:
            tagged.setdefault(str((run.metadata.get("improve") or {}).get("task_id")),
                              []).append(run)
        runs = tagged
    return tool_use({i: list(runs.get(i, ())) for i in ids}).model_dump(mode="json")


def sync_live(registry: Any) -> str:
    """Swap the served model to the registry's current version, when the live module exists.

    Returns what the swap said, or why nothing was swapped; never raises,
    since the promotion it follows has already happened.
    """
    try:
        live = importlib.import_module("agentic_loop.distill.release.live")
    except ModuleNotFoundError as exc:
        if exc.name != "agentic_loop.distill.release.live":
            return f"not swapped: the live module failed to import ({exc})"
        return "not swapped: agentic_loop.distill.release.live is not available"
    try:
        return str(live.sync_served(registry))
    except Exception as exc:  # noqa: BLE001 - the promotion stands; the report says what failed
        return f"not swapped: {type(exc).__name__}: {exc}"


def round_report(state: RoundState, settings: ImproveSettings) -> ImproveRound:
    """A round's report from its state: pool and golden pass rates with intervals, counts, time."""
    stages = state.data["stages"]

    def result(stage: str) -> dict[str, Any] | None:
        return dict(stages[stage]["result"]) if stage in stages else None

    grown, gate = result("grow"), result("gate")
    pool = None
    if grown is not None:
        pool = {**rate_stats(grown["passed"], grown["samples"]).model_dump(),
                "tasks": grown["tasks"], "tasks_solved": grown["tasks_solved"],
                "temperatures": grown["temperatures"]}
    hint = result("hint")
    data = result("data")
    train = result("train")
    # which judge and method made the data (judged methods); read by ImproveRound.judged
    judged = {"judged": data.get("judged")} if data and "judged" in ImproveRound.model_fields \
        else {}
    return ImproveRound.model_validate({
        **judged,
        "round": state.number, "model": state.data.get("model"),
        "from_version": state.data.get("version"), "threshold": state.data.get("threshold"),
        "method": settings.method, "arch": settings.arch, "pool": pool,
        "hint": hint and {"retried": hint["retried"], "accepted": hint["accepted"],
                          "rationalized": hint.get("rationalized"),
                          "restated": hint.get("restated"), "echoed": hint.get("echoed")},
        "data": data and {"accepted": grown["passed"] if grown else 0,
                          "hinted": hint["accepted"] if hint else 0,
                          "sft_rows": data.get("sft_rows", 0), "pairs": data.get("pairs", 0),
                          "prompts": data.get("prompts"), "dropped": data.get("dropped") or {}},
        "train": train and {k: train[k] for k in ("model_dir", "steps", "loss")} | _launch(train),
        "golden": gate["golden"] if gate else None,
        "decision": gate["decision"] if gate else None,
        "reasons": gate["reasons"] if gate else [],
        "register": result("register"),
        "seconds": state.seconds(),
        "ended": state.data.get("ended"),
        "agent": _agent_stats(grown, gate),
    })


def _launch(train: dict[str, Any]) -> dict[str, Any]:
    """The train stage's launch line for the report, where its summary has room for it."""
    launch = train.get("launch")
    if not launch or "launch" not in TrainSummary.model_fields:
        return {}
    return {"launch": launch_line(launch)}


def _agent_stats(grown: dict[str, Any] | None, gate: dict[str, Any] | None
                 ) -> dict[str, Any] | None:
    """The report's ``agent`` from the grow and gate results (``None``: a plain round)."""
    sides = {"grown": (grown or {}).get("agent"), **((gate or {}).get("agent") or {})}
    return sides if any(v is not None for v in sides.values()) else None
