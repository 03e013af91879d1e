"""Quality benchmark: does the loop make the embedded model better, and at what cost?

The dev set is generated from a seed by ``agentic_loop.tasksets``: constrained
instructions (exact word counts, casing, bullets, JSON, forbidden and required
words, sentence counts, prefixes) and arithmetic word problems with exact
answers. Each family is split into train and held-out on its own, so both
splits hold both families in the same proportion.

Everything is scored on held-out tasks with each task's own constraint rubric
(Python checks only, so no judge model is in the measurement):

* ``fixed reply``: always the same answer ("42"), so the other rows can be read;
* ``single-shot``: ``Reflection(max_iterations=1)``, the baseline every ratio uses;
* ``Reflection``, and ``Reflection (resample)``: the same loop with
  ``refine="resample"`` (each new round asks the first prompt again instead of
  showing the model its failed draft), which isolates what the feedback adds;
* ``ArchiveRefine (cold)`` on an empty archive; ``Reflexion`` on
  an empty reflection memory (both fill online during the held-out run);
* ``ArchiveRefine (warm)``: on a copy of the archive filled by running
  ArchiveRefine on the *train* tasks first, with feedback refine and with resample;
* ``distilled single-shot`` and ``distilled + ArchiveRefine (warm)``: the model
  after one distill round (export -> PII gate -> SFT, LoRA merged) trained on
  the train tasks' trajectories only; held-out runs are never logged.
* ``GRPO``: the base model after online RL (LoRA GRPO, merged) on the train
  tasks, each task's own checks as the reward, stopped at the wall-clock
  time the SFT round's training took (same budget), then single-shot.

Pass rates come with Wilson 95% intervals, mean scores with t intervals, and
the change against single-shot with a paired t interval (same tasks). Cost per
accepted output (LLM calls, tokens, wall seconds) is reported per architecture;
the train pass that warms the archive is reported on its own, since a warm
archive pays for it once. Numbers depend on the machine's load; compare ratios
within one run. Nothing here asserts on time.

    python bench/quality.py --quick   # ~15 min on 2 quiet CPU cores: a held-out sample
    python bench/quality.py           # full: every held-out task, more training
Both write bench/results/quality.json and quality.png.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from rich.console import Console

from agentic_loop.tasks import TaskSpec

RESULTS = Path(__file__).parent / "results" / "quality.json"
Z95 = 1.959963984540054
BASELINE = "single-shot"
console = Console()


@dataclass(frozen=True)
class Options:
    """What one run measures; ``MODES`` holds the quick and full settings."""

    constrained: int = 100
    arithmetic: int = 100
    held_out: float = 0.3
    seed: int = 0
    eval_tasks: int | None = None  # held-out tasks scored (None: all)
    train_tasks: int | None = None  # train tasks run to warm the archive and log trajectories
    train_steps: int = 60
    max_iterations: int = 3
    target_score: float = 8.0
    max_tokens: int = 48
    concurrency: int = 8
    pii: str = "regex"
    lora: bool = True
    fixed_reply: str = "42"
    grpo_generations: int = 4


MODES = {
    # sized from a smoke run's tokens per task and ~15 output tokens/s at concurrency 8
    "quick": Options(eval_tasks=20, train_tasks=40, train_steps=20, max_iterations=2),
    "full": Options(),
}


# ---------------------------------------------------------------- statistics


def wilson(k: int, n: int) -> list[float] | None:
    """Wilson 95% interval of a proportion: sane at 0/n and n/n, unlike the normal one."""
    if n == 0:
        return None
    p = k / n
    denom = 1 + Z95**2 / n
    centre = (p + Z95**2 / (2 * n)) / denom
    half = Z95 * math.sqrt(p * (1 - p) / n + Z95**2 / (4 * n * n)) / denom
    return [round(max(0.0, centre - half), 4), round(min(1.0, centre + half), 4)]


def t_interval(values: Sequence[float], lo: float = -10.0,
               hi: float = 10.0) -> list[float] | None:
    """Student-t 95% interval of a mean, clipped to the values' possible range ``[lo, hi]``.

    None below two values (no spread to estimate). Scores live in [0, 10] and score
    changes in [-10, 10]; with a handful of tasks the raw interval would leave them.
    """
    from scipy.stats import t

    if len(values) < 2:
        return None
    mean = statistics.fmean(values)
    half = float(t.ppf(0.975, len(values) - 1)) * statistics.stdev(values) / math.sqrt(len(values))
    return [round(max(lo, mean - half), 3), round(min(hi, mean + half), 3)]


def ratio(a: float, b: float) -> float | None:
    """``a / b``, or None when the baseline is zero (a ratio to nothing says nothing)."""
    return round(a / b, 3) if b else None


def per(total: float, count: int) -> float | None:
    """A cost per item, or None when there is no item (e.g. nothing accepted)."""
    return round(total / count, 3) if count else None


# ---------------------------------------------------------------- dev set


def family(spec: TaskSpec) -> str:
    """``arithmetic`` or ``constrained``: the two groups the issue asks about."""
    return "arithmetic" if spec.metadata.get("family") == "arithmetic" else "constrained"


def interleave(specs: Sequence[TaskSpec], n: int | None) -> list[TaskSpec]:
    """The first ``n`` specs taking the families in turn, so a sample keeps both."""
    groups = [[s for s in specs if family(s) == f] for f in ("constrained", "arithmetic")]
    mixed = [s for pair in zip(*groups) for s in pair]
    longest = max(groups, key=len)
    mixed += longest[len(min(groups, key=len)):]
    return mixed if n is None else mixed[:n]


def dev_set(opts: Options) -> tuple[list[TaskSpec], list[TaskSpec]]:
    """Train and held-out specs: each family generated from the seed and split on its own."""
    from agentic_loop.tasksets import arithmetic_tasks, constrained_tasks, split_tasks

    train: list[TaskSpec] = []
    held: list[TaskSpec] = []
    for specs in (constrained_tasks(opts.constrained, seed=opts.seed),
                  arithmetic_tasks(opts.arithmetic, seed=opts.seed)):
        tr, ho = split_tasks(specs, held_out=opts.held_out, seed=opts.seed)
        train += tr
        held += ho
    overlap = {s.task for s in train} & {s.task for s in held}
    if overlap:
        raise RuntimeError(f"train and held-out share {len(overlap)} tasks; the split leaks")
    return train, held


# ---------------------------------------------------------------- phases


def fixed_results(specs: Sequence[TaskSpec], reply: str) -> list[Any]:
    """What always answering ``reply`` scores: the floor that makes the other rows readable."""
    from agentic_loop.architectures import RunResult
    from agentic_loop.trajectories import Round, Trajectory

    results = []
    for spec in specs:
        ev = spec.rubric().evaluate(spec.task, reply)
        run = Trajectory(architecture="fixed", model_id="none", task=spec.task,
                         rounds=[Round(iteration=0, draft=reply, score=ev.score,
                                       passed=ev.passed)],
                         final_output=reply, final_score=ev.score, latency_s=0.0)
        results.append(RunResult(trajectory=run))
    return results


def run_phase(name: str, arch: Any, specs: Sequence[TaskSpec],
              concurrency: int) -> tuple[list[Any], float]:
    """Run ``arch`` on every spec with a progress bar; results in spec order, wall seconds."""
    from agentic_loop.architectures import run_specs

    t0 = time.perf_counter()
    results = run_specs(arch, list(specs), max_concurrency=concurrency, progress=name,
                        console=console)
    return results, time.perf_counter() - t0


def cost(results: Sequence[Any], seconds: float) -> dict[str, Any]:
    """Calls, tokens and wall seconds, per task and per accepted (passing) output."""
    accepted = sum(r.passed for r in results)
    calls = sum(r.usage.llm_calls for r in results)
    tokens = sum(r.usage.input_tokens + r.usage.output_tokens for r in results)
    out_tokens = sum(r.usage.output_tokens for r in results)
    return {
        "accepted": accepted, "llm_calls": calls, "tokens": tokens, "output_tokens": out_tokens,
        "wall_s": round(seconds, 2),
        "llm_calls_per_task": per(calls, len(results)),
        "tokens_per_task": per(tokens, len(results)),
        "llm_calls_per_accepted": per(calls, accepted),
        "tokens_per_accepted": per(tokens, accepted),
        "output_tokens_per_accepted": per(out_tokens, accepted),
        "wall_s_per_accepted": per(seconds, accepted),
    }


def by_family(specs: Sequence[TaskSpec], results: Sequence[Any]) -> dict[str, Any]:
    """Pass rate and mean score per family, to see where a change comes from."""
    out = {}
    for fam in ("constrained", "arithmetic"):
        rows = [r for s, r in zip(specs, results) if family(s) == fam]
        if rows:
            passed = sum(r.passed for r in rows)
            out[fam] = {"tasks": len(rows), "pass_rate": round(passed / len(rows), 4),
                        "pass_rate_ci95": wilson(passed, len(rows)),
                        "mean_score": round(statistics.fmean(r.score or 0.0 for r in rows), 3)}
    return out


def summarize(name: str, model: str, specs: Sequence[TaskSpec], results: Sequence[Any],
              seconds: float) -> dict[str, Any]:
    """One phase's row: the demo's phase numbers plus intervals, families and cost."""
    from agentic_loop.demo import _phase

    phase = _phase(name, list(results), seconds)
    passed = [bool(r.passed) for r in results]
    return {
        "name": name, "model": model, "tasks": phase.tasks,
        "pass_rate": phase.pass_rate, "pass_rate_ci95": wilson(sum(passed), len(passed)),
        "mean_score": phase.mean_score, "mean_score_ci95": t_interval(phase.scores, lo=0.0),
        "archived": phase.archived, "errors": sum(not r.ok for r in results),
        "by_family": by_family(specs, results), "cost": cost(results, seconds),
        "scores": phase.scores, "passed": passed,
    }


def versus(row: dict[str, Any], base: dict[str, Any]) -> dict[str, Any]:
    """Ratios to the baseline, and the paired (same tasks) score change with its interval."""
    diffs = [a - b for a, b in zip(row["scores"], base["scores"])]
    return {
        "pass_rate_ratio": ratio(row["pass_rate"], base["pass_rate"]),
        "mean_score_ratio": ratio(row["mean_score"], base["mean_score"]),
        "pass_rate_diff": round(row["pass_rate"] - base["pass_rate"], 4),
        "mean_score_diff": round(statistics.fmean(diffs), 3) if diffs else None,
        "mean_score_diff_ci95": t_interval(diffs),
        "llm_calls_per_accepted_ratio": cost_ratio(row, base, "llm_calls_per_accepted"),
        "wall_s_per_accepted_ratio": cost_ratio(row, base, "wall_s_per_accepted"),
    }


def cost_ratio(row: dict[str, Any], base: dict[str, Any], key: str) -> float | None:
    """A per-accepted cost against the baseline's; None when either accepted nothing."""
    a, b = row["cost"][key], base["cost"][key]
    return None if a is None or b is None else ratio(a, b)


def report_row(row: dict[str, Any]) -> None:
    """One line per phase as it finishes, so a long run shows where it is."""
    ci = row["pass_rate_ci95"] or [0, 0]
    per_acc = row["cost"]["llm_calls_per_accepted"]
    console.print(f"[bold]{row['name']}[/]: pass {row['pass_rate']:.0%} "
                  f"[{ci[0]:.0%}, {ci[1]:.0%}], mean score {row['mean_score']:.2f}, "
                  f"{row['cost']['llm_calls_per_task']} calls/task, "
                  f"{per_acc if per_acc is not None else '-'} calls/accepted, "
                  f"{row['cost']['wall_s']:.0f}s")


# ---------------------------------------------------------------- the run


class Bench:
    """Holds the run's models, memories and rows; each method is one step of the flow."""

    def __init__(self, opts: Options, work: Path) -> None:
        from agentic_loop.memory import Archive
        from agentic_loop.models import load_chat_model

        self.opts = opts
        self.work = work
        self.train_specs, self.held_all = dev_set(opts)
        self.held = interleave(self.held_all, opts.eval_tasks)
        self.train_run = interleave(self.train_specs, opts.train_tasks)
        with console.status("loading the embedded model and the embedder"):
            self.llm = load_chat_model("local", max_tokens=opts.max_tokens)
            self.train_archive = Archive(work / "archive-train", show_progress=False)
        self.embedder = self.train_archive.embedder
        self.rows: list[dict[str, Any]] = []
        self.extra: dict[str, Any] = {}

    def common(self) -> dict[str, Any]:
        """Settings every looping architecture shares, so rows differ only in the loop."""
        return {"target_score": self.opts.target_score,
                "max_iterations": self.opts.max_iterations}

    def archive(self, name: str, copy_of: Path | None = None) -> Any:
        """A fresh archive folder, or a copy of one (so two warm runs start equal)."""
        from agentic_loop.memory import Archive

        path = self.work / name
        if copy_of is not None:
            shutil.copytree(copy_of, path)
        return Archive(path, embedder=self.embedder, show_progress=False)

    def held_phase(self, name: str, arch: Any, model: str = "base") -> None:
        """Score ``arch`` on the held-out sample and keep its row."""
        results, seconds = run_phase(name, arch, self.held, self.opts.concurrency)
        self.rows.append(summarize(name, model, self.held, results, seconds))
        report_row(self.rows[-1])

    def base_phases(self, core: bool = False) -> None:
        """The base model's rows that need no train pass (``core``: the floor and baseline)."""
        from agentic_loop.architectures import ArchiveRefine, Reflection, Reflexion
        from agentic_loop.memory import ReflexionMemory

        fixed = fixed_results(self.held, self.opts.fixed_reply)
        self.rows.append(summarize(f"fixed reply {self.opts.fixed_reply!r}", "none",
                                   self.held, fixed, 0.0))
        report_row(self.rows[-1])
        common = self.common()
        self.held_phase(BASELINE, Reflection(self.llm, max_iterations=1,
                                             target_score=self.opts.target_score))
        if core:
            return
        self.held_phase("Reflection", Reflection(self.llm, **common))
        self.held_phase("Reflection (resample)", Reflection(self.llm, refine="resample", **common))
        self.held_phase("ArchiveRefine (cold)",
                        ArchiveRefine(self.llm, archive=self.archive("archive-cold"), **common))
        memory = ReflexionMemory(self.work / "reflections", embedder=self.embedder,
                                 show_progress=False)
        self.held_phase("Reflexion", Reflexion(self.llm, memory=memory, **common))

    def train_pass(self) -> Path:
        """ArchiveRefine on train tasks: fills the warm archive and logs the distill data."""
        from agentic_loop.architectures import ArchiveRefine
        from agentic_loop.trajectories import TrajectoryLog

        log = TrajectoryLog(self.work / "trajectories" / "train")
        arch = ArchiveRefine(self.llm, archive=self.train_archive, trajectories=log,
                             **self.common())
        name = "ArchiveRefine on train (warms the archive)"
        results, seconds = run_phase(name, arch, self.train_run, self.opts.concurrency)
        row = summarize(name, "base", self.train_run, results, seconds)
        row.update(split="train", archive_size=len(self.train_archive))
        self.extra["train_pass"] = {k: v for k, v in row.items() if k not in ("scores", "passed")}
        report_row(row)
        return log.path

    def warm_phase(self, name: str, llm: Any, model: str, refine: str = "feedback") -> None:
        """ArchiveRefine on a private copy of the train-warmed archive."""
        from agentic_loop.architectures import ArchiveRefine

        slug = f"archive-warm-{model}-{refine}"
        archive = self.archive(slug, copy_of=self.work / "archive-train")
        self.held_phase(name, ArchiveRefine(llm, archive=archive, refine=refine, **self.common()),
                        model)

    def export(self, trajectories: Path) -> str | None:
        """Export the train trajectories to SFT data; the reason when there is nothing to train."""
        from agentic_loop.distill import export_datasets
        from agentic_loop.distill.data.errors import EmptyExportError

        try:
            with console.status("exporting train trajectories (PII gate, curation, SFT + DPO)"):
                report = export_datasets([trajectories], self.work / "data", pii=self.opts.pii,
                                         min_score=0.8, embedder=self.embedder)
        except EmptyExportError as exc:
            return str(exc)
        self.extra["distill"].update(sft_rows=report.sft_rows, pairs=report.pairs)
        return None if report.sft_rows else "no SFT rows (nothing accepted on the train pass)"

    def distill(self, trajectories: Path) -> Any | None:
        """One distill round on the train trajectories; None (reason recorded) without data."""
        from agentic_loop.distill.train import train
        from agentic_loop.models import load_chat_model

        self.extra["distill"] = {"method": "sft", "lora": self.opts.lora,
                                 "steps": self.opts.train_steps, "sft_rows": 0, "pairs": 0}
        reason = self.export(trajectories)
        if reason is not None:
            self.extra["distill"]["skipped"] = reason
            console.print(f"[yellow]distilled rows skipped: {reason}")
            return None
        console.print(f"distilling: {self.extra['distill']['sft_rows']} SFT rows, "
                      f"{self.opts.train_steps} steps")
        t0 = time.perf_counter()
        trained = train(self.work / "data", self.work / "model", method="sft", base="local",
                        lora=self.opts.lora, max_steps=self.opts.train_steps, max_length=256,
                        progress=True)
        stage = trained.stages[0]
        self.extra["distill"].update(train_s=round(time.perf_counter() - t0, 1),
                                     train_loop_s=round(stage.runtime_s, 1),
                                     first_loss=stage.metrics.get("first_loss"),
                                     last_loss=stage.metrics.get("last_loss"))
        return load_chat_model(trained.spec, max_tokens=self.opts.max_tokens)

    def distilled_phases(self, llm: Any, core: bool = False) -> None:
        """The distilled model alone, then (unless ``core``) in the loop with the warm archive."""
        from agentic_loop.architectures import Reflection

        self.held_phase("distilled single-shot",
                        Reflection(llm, max_iterations=1, target_score=self.opts.target_score),
                        "distilled")
        if not core:
            self.warm_phase("distilled + ArchiveRefine (warm)", llm, "distilled")


    def grpo(self) -> Any:
        """GRPO on the train tasks for the SFT round's training time (its steps without one)."""
        from transformers import TrainerCallback

        from agentic_loop.distill.train import train
        from agentic_loop.models import load_chat_model

        budget = self.extra.get("distill", {}).get("train_loop_s")

        class WallClock(TrainerCallback):
            """Stop at the first step end past the budget (the SFT round's trainer.train time)."""

            def on_train_begin(self, args: Any, state: Any, control: Any, **kw: Any) -> Any:
                self.t0 = time.perf_counter()

            def on_step_end(self, args: Any, state: Any, control: Any, **kw: Any) -> Any:
                if budget is not None and time.perf_counter() - self.t0 >= budget:
                    control.should_training_stop = True
                return control

        tasks = self.work / "grpo-tasks.jsonl"
        tasks.write_text("".join(s.model_dump_json(by_alias=True) + "\n"
                                 for s in self.train_run))
        g = self.opts.grpo_generations
        console.print(f"GRPO: {len(self.train_run)} train tasks, {g} generations per prompt, "
                      + (f"{budget:.0f}s budget (the SFT round's)" if budget
                         else f"{self.opts.train_steps} steps (no SFT round to match)"))
        trained = train(tasks, self.work / "model-grpo", method="grpo", base="local",
                        lora=self.opts.lora, max_steps=10_000 if budget else self.opts.train_steps,
                        num_generations=g, batch_size=2 * g,
                        max_completion_length=self.opts.max_tokens, progress=True,
                        callbacks=[WallClock()])
        stage, reward = trained.stages[0], trained.card.reward or {}
        self.extra["grpo"] = {
            "method": "grpo", "lora": self.opts.lora, "num_generations": g,
            "prompts_per_step": 2, "budget_s": budget, "train_loop_s": round(stage.runtime_s, 1),
            "steps": stage.steps, "learning_rate": trained.card.hyperparameters.get(
                "learning_rates", {}).get("grpo"),
            "reward_per_step": [row["reward"] for row in reward.get("per_step", [])],
            "reward_errors": sum(f["errors"] for f in reward.get("errors", {}).values())}
        return load_chat_model(trained.spec, max_tokens=self.opts.max_tokens)


    def grpo_phase(self) -> None:
        """The GRPO-trained model alone (single-shot), beside the distilled single-shot row."""
        from agentic_loop.architectures import Reflection

        self.held_phase("GRPO", Reflection(self.grpo(), max_iterations=1,
                                           target_score=self.opts.target_score), "distilled")


def machine() -> dict[str, Any]:
    """Where the numbers were taken; the load says how quiet the machine was."""
    from agentic_loop.models.local import default_num_threads

    return {"cpus": os.cpu_count(), "platform": platform.platform(),
            "python": platform.python_version(),
            "load_avg_1m": round(os.getloadavg()[0], 2),
            "torch_threads": default_num_threads()}


def finish(bench: Bench, mode: str, started: float, at_start: dict[str, Any]) -> dict[str, Any]:
    """Attach baseline comparisons and put the report together."""
    base = next(r for r in bench.rows if r["name"] == BASELINE)
    for row in bench.rows:
        row["vs_single_shot"] = versus(row, base)
    fams = [family(s) for s in bench.held_all]
    kinds = [s.metadata.get("family", "?") for s in bench.train_specs + bench.held_all]
    return {
        "bench": "quality",
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": {**machine(), "load_avg_1m_at_start": at_start["load_avg_1m"]},
        "mode": mode, "options": asdict(bench.opts),
        "model": "embedded SmolLM2-135M-Instruct",
        "dev_set": {
            "constrained": bench.opts.constrained, "arithmetic": bench.opts.arithmetic,
            "seed": bench.opts.seed, "train": len(bench.train_specs),
            "held_out": len(bench.held_all),
            "held_out_families": {f: fams.count(f) for f in sorted(set(fams))},
            "held_out_scored": len(bench.held), "train_run": len(bench.train_run),
            "task_kinds": {k: kinds.count(k) for k in sorted(set(kinds))},
        },
        "baseline": BASELINE,
        "phases": [{k: v for k, v in r.items() if k not in ("scores", "passed")}
                   for r in bench.rows],
        "per_task": {r["name"]: {"scores": r["scores"], "passed": r["passed"]}
                     for r in bench.rows},
        **bench.extra,
        "seconds": round(time.perf_counter() - started, 1),
        "notes": [
            ("Scores use each task's constraint rubric (Python checks only, 0-10); pass = every "
             "check holds. Intervals: Wilson (pass rate), Student t (mean score), paired t "
             "(score change vs single-shot on the same tasks)."),
            ("ArchiveRefine (cold) and Reflexion start empty and fill during the held-out run; "
             "the warm rows start from a copy of the archive the train pass filled."),
            ("The distill round trains only on trajectories of the train pass; held-out runs "
             "are not logged."),
            ("GRPO trains on the train tasks (their checks as the reward) for the wall-clock "
             "time of the SFT round's training loop, then runs single-shot like the distilled "
             "row; compare the two rows."),
            ("wall_s is the phase's wall time at the given concurrency on a shared machine: "
             "compare ratios within this run, not absolute seconds across runs."),
        ],
    }


# ---------------------------------------------------------------- plot


def plot(report: dict[str, Any], path: Path) -> None:
    """Pass rate and mean score with their intervals, and LLM calls per accepted output."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = report["phases"][::-1]
    names = [r["name"] for r in rows]
    fig, axes = plt.subplots(1, 3, figsize=(14, 0.45 * len(rows) + 2), sharey=True)
    panels: list[tuple[str, str, float]] = [("pass_rate", "pass rate (Wilson 95% CI)", 1.0),
                                            ("mean_score", "mean score (t 95% CI)", 10.0)]
    for ax, (key, title, top) in zip(axes, panels):
        values = [r[key] for r in rows]
        cis = [r[f"{key}_ci95"] or [v, v] for r, v in zip(rows, values)]
        err = [[v - lo for v, (lo, _) in zip(values, cis)],
               [hi - v for v, (_, hi) in zip(values, cis)]]
        colors = ["#9e9e9e" if r["model"] == "none" else "#1976d2" if r["model"] == "base"
                  else "#388e3c" for r in rows]
        ax.barh(names, values, xerr=err, color=colors, capsize=3)
        base = next(r[key] for r in rows if r["name"] == BASELINE)
        ax.axvline(base, color="#d32f2f", linestyle="--", linewidth=1, label="single-shot")
        ax.set_xlim(0, top)
        ax.set_title(title, fontsize=10)
    calls = [r["cost"]["llm_calls_per_accepted"] or 0.0 for r in rows]
    bars = axes[2].barh(names, calls, color="#f57c00")
    axes[2].bar_label(bars, labels=[f"{c:.1f}" if c else "none accepted" if r["model"] != "none"
                                    else "" for c, r in zip(calls, rows)], fontsize=8)
    axes[2].set_title("LLM calls per accepted output", fontsize=10)
    axes[0].legend(loc="lower right", fontsize=8)
    fig.suptitle(f"Held-out quality, {report['dev_set']['held_out_scored']} tasks "
                 f"({report['mode']} mode, {report['model']}); green = distilled", fontsize=11)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


# ---------------------------------------------------------------- CLI


def options_from(args: argparse.Namespace) -> tuple[str, Options]:
    """The mode's options with any explicit overrides; overriding makes the mode ``custom``."""
    mode = "quick" if args.quick else "full"
    opts = MODES[mode]
    overrides = {k: v for k, v in {"eval_tasks": args.eval_tasks or args.tasks,
                                   "train_tasks": args.train_tasks or args.tasks,
                                   "train_steps": args.train_steps, "seed": args.seed,
                                   "concurrency": args.concurrency}.items() if v is not None}
    if overrides:
        opts, mode = replace(opts, **overrides), f"{mode}+custom"
    return mode, opts


def parse(argv: Sequence[str] | None) -> argparse.Namespace:
    """Command-line flags; ``--tasks`` is the smoke-test knob (held-out and train sample)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="held-out sample, fewer train steps")
    parser.add_argument("--eval-tasks", type=int, help="held-out tasks to score")
    parser.add_argument("--train-tasks", type=int, help="train tasks to run before distilling")
    parser.add_argument("--train-steps", type=int, help="distill optimizer steps")
    parser.add_argument("--seed", type=int, help="dev-set seed (default 0)")
    parser.add_argument("--concurrency", type=int, help="concurrent runs (default 8)")
    parser.add_argument("--out", type=Path, default=RESULTS, help="JSON path (PNG next to it)")
    parser.add_argument("--workdir", type=Path, help="keep archives, data and model here")
    parser.add_argument("--core-rows", action="store_true",
                        help="only fixed reply, single-shot, distilled and GRPO rows")
    parser.add_argument("--tasks", type=int, help=argparse.SUPPRESS)
    return parser.parse_args(argv)


def run(opts: Options, mode: str, work: Path, core: bool = False) -> dict[str, Any]:
    """The whole flow, in the order that keeps held-out tasks out of training.

    ``core`` keeps only the rows training is compared on: the fixed reply,
    single-shot, the distilled rows and GRPO (the train pass still runs: it is
    the SFT round's data).
    """
    started, at_start = time.perf_counter(), machine()
    bench = Bench(opts, work)
    console.rule(f"[bold]quality bench ({mode})")
    console.print(f"dev set: {len(bench.train_specs)} train, {len(bench.held_all)} held-out; "
                  f"scoring {len(bench.held)} held-out, running {len(bench.train_run)} train")
    bench.base_phases(core)
    trajectories = bench.train_pass()
    if not core:
        bench.warm_phase("ArchiveRefine (warm)", bench.llm, "base")
        bench.warm_phase("ArchiveRefine (warm, resample)", bench.llm, "base",
                         refine="resample")
    distilled = bench.distill(trajectories)
    if distilled is not None:
        bench.distilled_phases(distilled, core)
    bench.grpo_phase()
    return finish(bench, mode, started, at_start)


def with_workdir(path: Path | None, fn: Callable[[Path], dict[str, Any]]) -> dict[str, Any]:
    """Run ``fn`` in ``path``, or in a temporary folder removed afterwards."""
    if path is not None:
        path.mkdir(parents=True, exist_ok=True)
        return fn(path)
    with tempfile.TemporaryDirectory(prefix="quality-bench-") as tmp:
        return fn(Path(tmp))


def main(argv: Sequence[str] | None = None) -> None:
    args = parse(argv)
    mode, opts = options_from(args)
    if args.core_rows:
        mode += "+core"
    report = with_workdir(args.workdir, lambda work: run(opts, mode, work, args.core_rows))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    png = args.out.with_suffix(".png")
    plot(report, png)
    console.print_json(data={"phases": [{k: r[k] for k in ("name", "pass_rate", "pass_rate_ci95",
                                                            "mean_score", "mean_score_ci95")}
                                        | {"vs_single_shot": r["vs_single_shot"]}
                                        for r in report["phases"]]})
    console.print(f"wrote {args.out} and {png} in {report['seconds']:.0f}s")


if __name__ == "__main__":
    sys.exit(main())
