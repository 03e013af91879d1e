"""The end-to-end demo: both loops on the embedded model, offline, on 2 CPU cores.

1. A bundled family of constrained tasks (verifiable: word counts, casing,
   bullets, JSON, forbidden words, arithmetic) is split into train and
   held-out.
2. Inference-time loop: single-shot, Reflection, ArchiveRefine on an empty
   archive, then ArchiveRefine again on the warm archive. Every run is a
   trajectory.
3. Training-time loop: ``rounds`` improve rounds
   (:func:`~agentic_loop.distill.loop.improve.improve`) on the train tasks:
   the current model samples them, what passes their checks (and hinted
   retries) goes through the export (PII gate, curation) into SFT data, a
   LoRA is trained, and the gate compares it with the current model on the
   held-out tasks; the registry promotes it only on a PROMOTE decision, and
   the next round starts from whatever the gate kept, with a higher bar.
4. A before/after table, the per-round table (pool and held-out pass rates
   with 95% intervals, data counts, decisions), PNG plots (the improve curve
   in ``improve/improve.png``) and ``report.json`` in the output folder.

Example (the whole thing takes minutes; see ``agentic-loop demo --help``):
    >>> from agentic_loop.demo.run import DemoOptions
    >>> DemoOptions().n_tasks, DemoOptions().rounds
    (30, 2)
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from agentic_loop.demo.improve import improve_summary, rounds_table, run_rounds
from agentic_loop.demo.options import DemoOptions
from agentic_loop.errors import ConfigError
from agentic_loop.paths import make_dir
from agentic_loop.tasks.spec import TaskSpec

if TYPE_CHECKING:
    from agentic_loop.architectures import Architecture, RunResult

__all__ = ["DemoOptions", "DemoPhase", "run_demo"]


@dataclass
class DemoPhase:
    """Scores of one phase over a set of tasks."""

    name: str
    tasks: int
    pass_rate: float
    mean_score: float
    llm_calls_per_task: float
    seconds: float
    archived: int = 0
    scores: list[float] = field(default_factory=list, repr=False)
    round_scores: list[list[float]] = field(default_factory=list, repr=False)


def _phase(name: str, results: Sequence[RunResult], seconds: float) -> DemoPhase:
    scores = [r.score if r.score is not None else 0.0 for r in results]
    rounds: list[list[float]] = []
    for r in results:
        for i, rd in enumerate(r.trace):
            while len(rounds) <= i:
                rounds.append([])
            rounds[i].append(rd.score or 0.0)
    return DemoPhase(
        name=name, tasks=len(results),
        pass_rate=round(sum(r.passed for r in results) / max(1, len(results)), 4),
        mean_score=round(sum(scores) / max(1, len(scores)), 3),
        llm_calls_per_task=round(sum(r.usage.llm_calls for r in results) / max(1, len(results)), 2),
        seconds=round(seconds, 1), archived=sum(r.archived for r in results),
        scores=scores, round_scores=rounds)


def run_demo(out: str | Path = "runs/demo", options: DemoOptions | None = None,
             console: Console | None = None, *, backend: Any = None,
             embedder: Any = None) -> dict[str, Any]:
    """Run the demo into ``out``; returns (and writes) the report.

    ``backend`` (an :class:`~agentic_loop.distill.loop.improve.ImproveBackend`)
    is how the demo reaches models, and ``embedder`` the archive's and the
    curation's embedder; the defaults are the real ones (tests pass scripted models
    and the hashing embedder).
    """
    from agentic_loop.architectures import ArchiveRefine, Reflection, run_specs, summary_table
    from agentic_loop.distill.release.registry import Registry
    from agentic_loop.memory import Archive
    from agentic_loop.models import load_chat_model
    from agentic_loop.plots import plot_archive_growth, plot_score_distributions
    from agentic_loop.tasks.sets import demo_tasks, split_tasks
    from agentic_loop.trajectories import TrajectoryLog

    opts = options or DemoOptions()
    console = console or Console()
    out = Path(out)
    make_dir(out, what="demo output folder", error=ConfigError)
    started = time.perf_counter()
    train_tasks, test_tasks = split_tasks(demo_tasks(opts.n_tasks, seed=opts.seed),
                                          held_out=opts.held_out, seed=opts.seed)
    all_tasks = train_tasks + test_tasks
    console.rule("[bold]agentic-loop demo")
    console.print(f"{len(all_tasks)} constrained tasks: {len(train_tasks)} train, "
                  f"{len(test_tasks)} held-out. Output: {out}")

    with console.status("loading the embedded model"):
        llm = (backend.chat(opts.model, 0.0, opts.max_tokens) if backend is not None
               else load_chat_model(opts.model, max_tokens=opts.max_tokens))
    train_log = TrajectoryLog(out / "trajectories" / "train")
    test_log = TrajectoryLog(out / "trajectories" / "held_out")
    archive = Archive(out / "archive", embedder=embedder, show_progress=False)
    phases: list[DemoPhase] = []

    Split = list[tuple[list[TaskSpec], TrajectoryLog | None]]

    def run_phase(name: str, arch: Architecture, specs: list[TaskSpec],
                  log_for: Split | None = None) -> list[RunResult]:
        t0 = time.perf_counter()
        results: list[RunResult] = []
        # train and held-out tasks log to separate files, so an export never mixes them
        for subset, log in log_for or [(specs, None)]:
            arch.trajectories = log
            results += run_specs(arch, subset, max_concurrency=opts.concurrency, progress=name,
                                 console=console)
        phase = _phase(name, results, time.perf_counter() - t0)
        phases.append(phase)
        console.print(summary_table(results, name) if len(results) <= 12 else
                      f"[bold]{name}[/]: pass rate {phase.pass_rate:.0%}, mean score "
                      f"{phase.mean_score:.2f}, {phase.llm_calls_per_task} LLM calls/task, "
                      f"{phase.seconds:.0f}s")
        return results

    split_logs: Split = [(train_tasks, train_log), (test_tasks, test_log)]
    target = opts.target_score
    run_phase("single-shot", Reflection(llm, max_iterations=1, target_score=target), all_tasks,
              split_logs)
    run_phase("Reflection",
              Reflection(llm, max_iterations=opts.max_iterations, target_score=target),
              all_tasks, split_logs)
    archive_arch = ArchiveRefine(llm, archive=archive, max_iterations=opts.max_iterations,
                                 target_score=target)
    run_phase("ArchiveRefine (cold)", archive_arch, all_tasks, split_logs)
    run_phase("ArchiveRefine (warm)", archive_arch, all_tasks, split_logs)

    registry = Registry(out / "registry")
    if registry.current is None and opts.model == "local":
        from agentic_loop.models.embedded import ensure_converted

        registry.promote(registry.register(ensure_converted(), name="base").version,
                         reason="demo: the embedded base model")
    console.rule(f"training-time loop: {opts.rounds} improve rounds")
    console.print(f"each round: {opts.samples} samples per train task, hint retry, export "
                  f"(PII gate, curation), SFT{' (LoRA, merged)' if opts.lora else ''} "
                  f"{opts.train_steps} steps, gate on the {len(test_tasks)} held-out tasks")
    flywheel = run_rounds(opts, train_tasks, test_tasks, registry, out / "improve",
                          archive.embedder, console, backend=backend)
    rounds = improve_summary(flywheel)

    table = Table(title="before / after")
    table.add_column("phase", no_wrap=True)
    for column in ("tasks", "pass rate", "mean score", "LLM calls/task", "archived", "s"):
        table.add_column(column, justify="right")
    for p in phases:
        table.add_row(p.name, str(p.tasks), f"{p.pass_rate:.0%}", f"{p.mean_score:.2f}",
                      f"{p.llm_calls_per_task:.1f}", str(p.archived), f"{p.seconds:.0f}")
    console.print(table)
    console.print(rounds_table(rounds["rounds"]))
    console.print(f"stopped: {escape(flywheel.stopped)}: {escape(flywheel.reason)}",
                  highlight=False, soft_wrap=True)

    plots = out / "plots"
    plot_archive_growth(archive.entries(), plots / "archive_growth.png")
    reflection = next(p for p in phases if p.name == "Reflection")
    plot_score_distributions({f"round {i + 1}": s for i, s in enumerate(reflection.round_scores)},
                             plots / "scores_per_round.png",
                             title="Reflection: score per round")
    files = {"trajectories": str(out / "trajectories"), "archive": str(out / "archive"),
             "improve": str(out / "improve"), "curve": str(flywheel.plot or "-"),
             "plots": str(plots), "registry": str(out / "registry")}
    seconds = round(time.perf_counter() - started, 1)
    result: dict[str, Any] = {
        "options": asdict(opts),
        "phases": [{k: v for k, v in asdict(p).items() if k not in ("scores", "round_scores")}
                   for p in phases],
        "improve": rounds,
        "registry_current": registry.current.version if registry.current else None,
        "seconds": seconds,
        "files": files,
    }
    (out / "report.json").write_text(json.dumps(result, indent=2, default=str) + "\n")
    console.print("written:")
    for what, where in files.items():
        console.print(f"  {what:13} {where}")
    console.print(f"  {'report':13} {out / 'report.json'}")
    console.print(f"done in {seconds:.0f}s")
    return result
