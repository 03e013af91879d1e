"""The end-to-end demo: does the loop make the model better on tasks it never saw?

1. A dev set from every task family the library generates
   (:func:`~agentic_loop.tasks.dev_set.dev_set`): train tasks for the loop to
   practise on, and held-out tasks (200 by default, IFEval-style ones worded
   with templates train never sees) that no round trains on.
2. ``rounds`` improve rounds (:func:`~agentic_loop.distill.loop.improve.improve`)
   on the train tasks: the current model samples each task best-of-n at
   temperature, what passes every check (plus hinted retries) goes through the
   export (PII gate, curation) into SFT data, a LoRA is trained, and the
   library's default release gate compares it with the model it would replace
   on the held-out tasks; the registry promotes it only on PROMOTE.
3. The verdict (:mod:`.heldout`): the base model against each round's
   candidate on the same held-out tasks, exact McNemar p-values and 95%
   intervals, the gate's decision, and one closing line.

A second run starts fresh: the output folder of an earlier demo is cleared
(with a message); ``resume=True`` (``--resume``) continues it instead and
says what it reused. Everything lands in ``out``: ``report.json``, the
registry, the improve rounds (trajectories, data, models), the task files
(``pool.jsonl``, ``held_out.jsonl``) and ``plots/rounds.png``.

Example (the whole thing takes minutes; see ``agentic-loop demo --help``):
    >>> from agentic_loop.demo.run import DemoOptions
    >>> DemoOptions().held_out_tasks, DemoOptions().rounds
    (200, 1)
"""

from __future__ import annotations

import json
import shutil
import time
from collections import Counter
from dataclasses import asdict
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape

from agentic_loop.demo.heldout import closing_line, comparison_table, held_out_comparison
from agentic_loop.demo.improve import improve_summary, rounds_table, run_rounds
from agentic_loop.demo.options import DemoOptions
from agentic_loop.errors import ConfigError
from agentic_loop.paths import make_dir
from agentic_loop.tasks.spec import TaskSpec

__all__ = ["DemoOptions", "prepare_out", "run_demo"]

MARK = "demo.json"  # what says a folder holds a demo run (and may be cleared)


def prepare_out(out: Path, *, resume: bool, console: Console) -> list[str]:
    """Make ``out`` ready: cleared for a fresh run, or kept; returns what a resume reuses.

    A folder that holds files but no demo run is never cleared: that is an
    error naming it.
    """
    if out.exists() and not out.is_dir():
        raise ConfigError(f"the demo output {out} is a file; pass --out with a folder")
    used = out.is_dir() and any(out.iterdir())
    if used and not (out / MARK).is_file():
        raise ConfigError(f"{out} holds files but no demo run (no {MARK}); pass another --out, "
                          "or empty that folder")
    if used and not resume:
        console.print(f"{out} holds an earlier demo run: cleared, starting fresh "
                      "(pass --resume to continue it instead)", highlight=False)
        shutil.rmtree(out)
    reused: list[str] = []
    if used and resume:
        rounds = sorted(p.parent.name for p in (out / "improve").glob("round-*/report.json"))
        started = sorted(p.name for p in (out / "improve").glob("round-*")
                         if p.is_dir() and p.name not in rounds)
        reused += [f"finished rounds: {', '.join(rounds)}" if rounds else "no finished round"]
        if started:
            reused.append(f"the stages finished in {', '.join(started)}")
        if (out / "registry").is_dir():
            reused.append(f"the registry {out / 'registry'}")
        console.print(f"resuming the demo in {out}; reused: {'; '.join(reused)}",
                      highlight=False)
    make_dir(out, what="demo output folder", error=ConfigError)
    return reused


def _numbered(specs: list[TaskSpec], prefix: str) -> list[TaskSpec]:
    """Unique ids (the gate pairs answers by id; suites number their tasks each from 0)."""
    return [s.model_copy(update={"id": f"{prefix}{i:03d}-{s.id or 'task'}"})
            for i, s in enumerate(specs, start=1)]


def _write_tasks(path: Path, specs: list[TaskSpec]) -> None:
    from agentic_loop.distill.loop.pool import write_pool

    write_pool(path, specs)


def run_demo(out: str | Path = "runs/demo", options: DemoOptions | None = None,
             console: Console | None = None, *, backend: Any = None,
             embedder: Any = None, resume: bool = False) -> dict[str, Any]:
    """Run the demo into ``out``; returns (and writes) the report.

    ``backend`` (an :class:`~agentic_loop.distill.loop.improve.ImproveBackend`)
    is how the demo reaches models, and ``embedder`` the curation's and the
    gate's embedder; the defaults are the real ones (tests pass scripted models
    and the hashing embedder).
    """
    from agentic_loop.distill.release.registry import Registry
    from agentic_loop.memory.embeddings import Embedder
    from agentic_loop.tasks.dev_set import dev_set, suite_of

    opts = options or DemoOptions()
    console = console or Console()
    out = Path(out)
    started = time.perf_counter()
    console.rule("[bold]agentic-loop demo")
    reused = prepare_out(out, resume=resume, console=console)
    (out / MARK).write_text(json.dumps({"options": asdict(opts)}, default=str) + "\n")
    train, held = dev_set(opts.held_out_tasks, opts.train_tasks, seed=opts.seed)
    train, held = _numbered(train, "t"), _numbered(held, "h")
    _write_tasks(out / "pool.jsonl", train)
    _write_tasks(out / "held_out.jsonl", held)
    suites = ", ".join(f"{n} {s}" for s, n in sorted(Counter(map(suite_of, held)).items()))
    console.print(f"{len(train)} train tasks for the loop, {len(held)} held-out tasks it never "
                  f"trains on ({suites}); output: {out}", highlight=False)

    registry = Registry(out / "registry")
    if registry.current is None and opts.model == "local":
        from agentic_loop.models.embedded import ensure_converted

        registry.promote(registry.register(ensure_converted(), name="base").version,
                         reason="demo: the embedded base model")
    embedder = embedder if embedder is not None else Embedder()
    console.rule(f"{opts.rounds} improve round{'s' if opts.rounds != 1 else ''}")
    console.print(f"each round: best-of-{opts.samples} samples of each train task at "
                  f"temperature, a hinted retry where none passed, export (PII gate, "
                  f"curation, only samples that pass every check), "
                  f"SFT{' (LoRA, merged)' if opts.lora else ''} {opts.train_steps} steps, then "
                  f"the release gate on the {len(held)} held-out tasks", highlight=False)
    flywheel = run_rounds(opts, train, held, registry, out / "improve", embedder, console,
                          backend=backend)
    rounds = improve_summary(flywheel)
    comparison = held_out_comparison(out / "improve", held, flywheel.reports)

    from agentic_loop.distill.loop.report import plot_curve

    plot = plot_curve(flywheel.reports, out / "plots" / "rounds.png",
                      golden_label=f"{len(held)} held-out tasks")
    files = {"registry": str(out / "registry"), "improve rounds": str(out / "improve"),
             "train tasks": str(out / "pool.jsonl"), "held-out tasks": str(out / "held_out.jsonl"),
             "rounds plot": str(plot or "-"), "report": str(out / "report.json")}
    line = closing_line(comparison)
    seconds = round(time.perf_counter() - started, 1)
    result: dict[str, Any] = {
        "options": asdict(opts), "reused": reused,
        "dev_set": {"seed": opts.seed, "train": len(train), "held_out": len(held),
                    "held_out_suites": dict(Counter(map(suite_of, held)))},
        "improve": rounds, "held_out": comparison, "closing": line,
        "registry_current": registry.current.version if registry.current else None,
        "seconds": seconds, "files": files,
    }
    (out / "report.json").write_text(json.dumps(result, indent=2, default=str) + "\n")

    console.print(rounds_table(rounds["rounds"]))
    console.print(f"stopped: {escape(flywheel.stopped)}: {escape(flywheel.reason)}",
                  highlight=False)
    console.print("written:")
    for what, where in files.items():
        console.print(f"  {what:15} {where}", highlight=False, overflow="fold")
    if comparison is not None:
        console.print(comparison_table(comparison))
        for r in comparison["rounds"]:
            console.print(f"{r['model']} gate: {r['decision'] or '-'} vs {r['gate_vs']}: "
                          f"{r['reason']}", highlight=False, markup=False)
    console.print(f"done in {seconds:.0f}s", highlight=False)
    console.print(f"[bold]{escape(line)}[/]", highlight=False)
    return result
