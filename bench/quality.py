"""Quality bench: do loops, best-of-n, distillation or GRPO beat single-shot, at what cost?

Every row answers the SAME held-out tasks, so every row is compared with
single-shot task by task (paired statistics; see ``quality_report.py``):
exact McNemar on pass/fail, paired bootstrap on the pass-rate and score
differences, Holm's adjustment over the rows, a power note (tasks needed
for a 10-point difference at the observed discordance) and a verdict.

The dev set (``quality_tasks.py``) draws from every task generator in
``agentic_loop.tasks.sets*`` (constrained instructions, arithmetic, IFEval-style
families, and any added later) plus the hand-written golden tasks, held-out
and train split deterministically by the seed. Scoring uses each task's own
checks (Python only: no judge model in the measurement).

Rows:

* ``fixed reply``: always "42", the floor that makes the other rows readable;
* ``single-shot``: ``Reflection(max_iterations=1)``, the baseline;
* ``best-of-N``: one round of N samples, the checks pick (``samples_per_round``;
  skipped with a note when the architectures lack it);
* ``Reflection`` (feedback) and ``Reflection (resample)``;
* ``Reflexion`` on an empty reflection memory, ``ArchiveRefine (cold)`` on an
  empty archive (both fill online during the held-out run);
* ``ArchiveRefine (warm)``: on a copy of the archive an ArchiveRefine pass over
  *train* tasks filled, best-of-n in each round (rejection sampling; that pass is
  also the distill round's data);
* ``distilled single-shot``: after one LoRA SFT round on the train pass;
  ``distilled + <best loop>``: the distilled model in the base loop row with the
  highest pass rate;
* ``GRPO``: LoRA GRPO on the train tasks (their checks as the reward) for the
  SFT round's training seconds, then single-shot.

Cost per row: LLM calls, tokens, LLM-seconds (the decoding engine's busy
time for the row) and passes per LLM-minute. Numbers depend on the
machine's load; compare within one run.

    python bench/quality.py --quick            # 200 held-out tasks, every row
    python bench/quality.py                    # full: 600 held-out tasks, 3 rounds
    python bench/quality.py --tasks 20 --out /tmp/slice.json   # time a slice, extrapolate
    python bench/quality.py --quick --rows single,best_of --dtypes float32,bfloat16  # pairs

``--quick`` writes bench/results/quality.json, full quality_full.json (PNG
next to each). Measured and predicted times are in bench/README.md.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape

from agentic_loop.errors import ConfigError
from agentic_loop.tasks.spec import TaskSpec

sys.path.insert(0, str(Path(__file__).parent))
from quality_dtypes import (  # noqa: E402
    DTYPE_ROWS,
    NOTE,
    add_dtype_comparisons,
    check_rows,
    headlines,
    parse_dtypes,
    summary,
    tagged,
)
from quality_engine import EngineClock, checked_dtype, has_best_of, machine  # noqa: E402
from quality_report import (  # noqa: E402
    BASELINE,
    NOTES,
    add_comparisons,
    headline,
    plot,
    predict,
    summarize,
)
from quality_tasks import dev_set, family_of, suite_of, suites  # noqa: E402
from quality_train import grpo_round, sft_round  # noqa: E402

RESULTS = Path(__file__).parent / "results"
console = Console()
ROWS = ("fixed", "single", "best_of", "reflection", "resample", "reflexion", "ar_cold",
        "ar_warm", "distilled", "distilled_loop", "grpo")
ALIASES = {"single-shot": "single", "best-of-N": "best_of", "best-of-n": "best_of"}


@dataclass(frozen=True)
class Options:
    """What one run measures; ``MODES`` holds the quick and full settings."""

    held_out_tasks: int = 600  # golden tasks included
    train_tasks: int = 120  # run to warm the archive and log the distill data; GRPO prompts
    held_out: float = 0.3  # held-out fraction when a generator has no split of its own
    seed: int = 0
    train_steps: int = 60
    max_iterations: int = 3
    best_of: int = 4
    target_score: float = 8.0
    max_tokens: int = 48
    concurrency: int = 32
    pii: str = "regex"
    lora: bool = True
    fixed_reply: str = "42"
    grpo_generations: int = 4
    resamples: int = 10_000
    dtypes: tuple[str, ...] = ()  # each row once per dtype; () = the engine's default
    sample_seed: int | None = None  # every request's sampling seed (sample i: +i); None: unseeded


MODES = {
    "quick": Options(held_out_tasks=200, train_tasks=40, train_steps=20, max_iterations=2),
    "full": Options(),
}


def fixed_results(specs: Sequence[TaskSpec], reply: str) -> tuple[list[bool], list[float]]:
    """What always answering ``reply`` scores."""
    evals = [s.rubric().evaluate(s.task, reply) for s in specs]
    return [bool(e.passed) for e in evals], [float(e.score) for e in evals]


class Bench:
    """Holds the run's models, memories and rows; each method is one step of the flow."""

    def __init__(self, opts: Options, work: Path, rows: Sequence[str]) -> None:
        from agentic_loop.memory import Archive

        t0 = time.perf_counter()
        self.opts, self.work, self.wanted = opts, work, set(rows)
        self.train, self.held = dev_set(opts.held_out_tasks, opts.train_tasks, seed=opts.seed,
                                        held_out=opts.held_out)
        self.clock = EngineClock()
        self.dtypes: tuple[str | None, ...] = opts.dtypes or (None,)
        self.baseline = tagged(BASELINE, self.dtypes[0])
        with console.status("loading the embedded model and the embedder"):
            self.llms = {d: self.load("local", dtype=d) for d in self.dtypes}
            self.train_archive = Archive(work / "archive-train", show_progress=False)
            for llm in self.llms.values():
                llm.invoke("Hi")  # weights loaded now, not inside the first row's timing
        self.llm = self.llms[self.dtypes[0]]
        self.embedder = self.train_archive.embedder
        self.rows: list[dict[str, Any]] = []
        self.per_task: dict[str, dict[str, list[Any]]] = {}
        self.extra: dict[str, Any] = {"skipped_rows": {}}
        self.one_off: dict[str, float] = {"load_s": round(time.perf_counter() - t0, 1)}
        self.factories: dict[str, Callable[[Any], Any]] = {}

    def load(self, spec: str, dtype: str | None = None) -> Any:
        from agentic_loop.models import load_chat_model

        # Room in one decoding batch for every sample of every concurrent task (best-of-n).
        rows = self.opts.concurrency * max(1, self.opts.best_of)
        kw = {k: v for k, v in (("dtype", dtype), ("seed", self.opts.sample_seed)) if v is not None}
        return self.clock.watch(load_chat_model(spec, max_tokens=self.opts.max_tokens,
                                                max_batch_size=rows, **kw))

    def groups(self) -> dict[str, list[int]]:
        """Held-out task indexes per suite."""
        out: dict[str, list[int]] = {}
        for i, spec in enumerate(self.held):
            out.setdefault(suite_of(spec), []).append(i)
        return out

    def keep(self, name: str, model: str, passed: list[bool], scores: list[float],
             usage: dict[str, int], llm_s: float, wall_s: float, errors: int = 0,
             dtypes: tuple[str | None, str | None] = (None, None)) -> None:
        """Keep a row; ``dtypes``: the one asked for (tags the name) and the engine's."""
        name = tagged(name, dtypes[0])
        row = summarize(name, model, passed, scores, usage, llm_s=llm_s, wall_s=wall_s,
                        errors=errors, groups=self.groups())
        row.update(dtype=dtypes[0], engine_dtype=dtypes[1])
        self.rows.append(row)
        self.per_task[name] = {"passed": passed, "scores": scores}
        console.print(headline(row))

    def run_row(self, name: str, model: str, make: Callable[[Any], Any], llm: Any,
                dtype: str | None = None) -> None:
        """Score ``make(llm)`` on every held-out task, batched, and keep its row."""
        from agentic_loop.architectures import run_specs

        engine_dtype = checked_dtype(llm, dtype)  # the engine really runs in ``dtype``
        arch = make(llm)
        self.factories[name] = make
        before, t0 = self.clock.seconds, time.perf_counter()
        results = run_specs(arch, self.held, max_concurrency=self.opts.concurrency,
                            progress=escape(tagged(name, dtype)), console=console)
        wall = time.perf_counter() - t0
        usage = {"llm_calls": sum(r.usage.llm_calls for r in results),
                 "input_tokens": sum(r.usage.input_tokens for r in results),
                 "output_tokens": sum(r.usage.output_tokens for r in results)}
        self.keep(name, model, [bool(r.passed) for r in results],
                  [float(r.score or 0.0) for r in results], usage,
                  self.clock.seconds - before, wall, sum(not r.ok for r in results),
                  (dtype, engine_dtype))

    def common(self) -> dict[str, Any]:
        """Settings every looping row shares, so rows differ only in the loop."""
        return {"target_score": self.opts.target_score,
                "max_iterations": self.opts.max_iterations}

    def fresh(self, name: str) -> Path:
        """A new folder name under the work dir (each row gets its own memory)."""
        return self.work / f"{name}-{len(os.listdir(self.work))}"

    def archive(self, name: str, copy_of: Path | None = None) -> Any:
        """A fresh archive folder, or a private copy of one (so warm rows start equal)."""
        from agentic_loop.memory import Archive

        path = self.fresh(name)
        if copy_of is not None:
            shutil.copytree(copy_of, path)
        return Archive(path, embedder=self.embedder, show_progress=False)

    def base_rows(self) -> None:
        """The base model's rows that need no train pass, each once per dtype in turn."""
        from agentic_loop.architectures import ArchiveRefine, Reflection, Reflexion
        from agentic_loop.memory import ReflexionMemory

        o, common = self.opts, self.common()
        if "fixed" in self.wanted:
            passed, scores = fixed_results(self.held, o.fixed_reply)
            self.keep(f"fixed reply {o.fixed_reply!r}", "none", passed, scores, {}, 0.0, 0.0)
        rows: list[tuple[str, str, Callable[[Any], Any]]] = [
            ("single", BASELINE,
             lambda llm: Reflection(llm, max_iterations=1, target_score=o.target_score))]
        if "best_of" in self.wanted and has_best_of():
            rows.append(("best_of", f"best-of-{o.best_of}", lambda llm: Reflection(
                llm, max_iterations=1, target_score=o.target_score,
                samples_per_round=o.best_of)))
        elif "best_of" in self.wanted:
            self.extra["skipped_rows"]["best-of-n"] = (
                "the architectures take no samples_per_round keyword in this checkout")
        rows += [
            ("reflection", "Reflection", lambda llm: Reflection(llm, **common)),
            ("resample", "Reflection (resample)",
             lambda llm: Reflection(llm, refine="resample", **common)),
            ("reflexion", "Reflexion", lambda llm: Reflexion(
                llm, memory=ReflexionMemory(self.fresh("reflections"), embedder=self.embedder,
                                            show_progress=False),
                **common)),
            ("ar_cold", "ArchiveRefine (cold)",
             lambda llm: ArchiveRefine(llm, archive=self.archive("archive-cold"), **common)),
        ]
        for key, name, make in rows:
            if key == "single" or key in self.wanted:
                for dtype in self.dtypes:  # in turn: a drift in machine load hits both alike
                    self.run_row(name, "base", make, self.llms[dtype], dtype)

    def train_pass(self) -> Path:
        """ArchiveRefine on train tasks: fills the warm archive and logs the distill data.

        Each round draws ``best_of`` samples and the checks keep the best (rejection
        sampling): on 40 train tasks a one-sample pass accepted 6 to 10 answers, too few
        for an SFT round or an archive to show on held-out tasks.
        """
        from agentic_loop.architectures import ArchiveRefine, run_specs
        from agentic_loop.trajectories import TrajectoryLog

        log = TrajectoryLog(self.work / "trajectories" / "train")
        samples = {"samples_per_round": self.opts.best_of} if has_best_of() else {}
        arch = ArchiveRefine(self.llm, archive=self.train_archive, trajectories=log,
                             **self.common(), **samples)
        t0 = time.perf_counter()
        results = run_specs(arch, self.train, max_concurrency=self.opts.concurrency,
                            progress="ArchiveRefine on train tasks (warms the archive)",
                            console=console)
        seconds = time.perf_counter() - t0
        passed = sum(bool(r.passed) for r in results)
        self.extra["train_pass"] = {
            "tasks": len(results), "passed": passed, "archive_size": len(self.train_archive),
            "llm_calls": sum(r.usage.llm_calls for r in results), "wall_s": round(seconds, 1)}
        self.one_off["train_pass_per_task"] = round(seconds / max(1, len(results)), 3)
        console.print(f"train pass: {passed}/{len(results)} passed, archive "
                      f"{len(self.train_archive)} entries, {seconds:.0f}s")
        return log.path

    def warm(self, llm: Any) -> Any:
        from agentic_loop.architectures import ArchiveRefine

        return ArchiveRefine(llm, archive=self.archive("archive-warm",
                                                        copy_of=self.work / "archive-train"),
                             **self.common())

    def best_loop(self) -> str | None:
        """The base-model loop row with the highest pass rate (ties: the cheaper one)."""
        loops = [r for r in self.rows if r["model"] == "base" and r["name"] != self.baseline]
        if not loops:
            return None
        return max(loops, key=lambda r: (r["pass_rate"], -(r["llm_s"] or 0.0)))["name"]

    def trained_rows(self, trajectories: Path | None) -> None:
        """SFT round -> distilled rows; GRPO at the SFT round's budget -> its row."""
        from agentic_loop.architectures import Reflection

        o = self.opts
        single = lambda llm: Reflection(llm, max_iterations=1,  # noqa: E731
                                        target_score=o.target_score)
        budget = None
        if trajectories is not None and {"distilled", "distilled_loop"} & self.wanted:
            t0 = time.perf_counter()
            sft = sft_round(trajectories, self.work, steps=o.train_steps, lora=o.lora,
                            pii=o.pii, embedder=self.embedder, console=console)
            self.one_off["sft_s"] = round(time.perf_counter() - t0, 1)
            self.extra["distill"] = sft.info
            budget = sft.info.get("train_loop_s")
            if sft.spec is None:
                console.print(f"[yellow]distilled rows skipped: {sft.info['skipped']}")
                self.extra["skipped_rows"]["distilled"] = sft.info["skipped"]
            else:
                llm = self.load(sft.spec)
                self.run_row("distilled single-shot", "distilled", single, llm)
                best = self.best_loop()
                if "distilled_loop" in self.wanted and best is not None:
                    self.extra["distilled_loop_of"] = best
                    self.run_row(f"distilled + {best}", "distilled", self.factories[best], llm)
        if "grpo" in self.wanted:
            t0 = time.perf_counter()
            grpo = grpo_round(self.train, self.work, budget_s=budget, steps=o.train_steps,
                              generations=o.grpo_generations, completion_tokens=o.max_tokens,
                              lora=o.lora, console=console)
            self.one_off["grpo_s"] = round(time.perf_counter() - t0, 1)
            self.extra["grpo"] = grpo.info
            self.run_row("GRPO", "grpo", single, self.load(str(grpo.spec)))


def run(opts: Options, mode: str, work: Path, rows: Sequence[str]) -> dict[str, Any]:
    """The whole flow, in the order that keeps held-out tasks out of training."""
    started, at_start = time.perf_counter(), machine()
    bench = Bench(opts, work, rows)
    console.rule(f"[bold]quality bench ({mode})")
    console.print(f"{len(bench.held)} held-out tasks for every row, {len(bench.train)} train "
                  f"tasks; suites: {', '.join(s.name for s in suites())} + golden")
    bench.base_rows()
    needs_train = {"ar_warm", "distilled", "distilled_loop"} & bench.wanted
    trajectories = bench.train_pass() if needs_train else None
    if "ar_warm" in bench.wanted:
        bench.run_row("ArchiveRefine (warm)", "base", bench.warm, bench.llm)
    bench.trained_rows(trajectories)
    add_comparisons(bench.rows, bench.per_task, resamples=opts.resamples,
                    baseline=bench.baseline)
    add_dtype_comparisons(bench.rows, bench.per_task, opts.dtypes, resamples=opts.resamples)
    if opts.dtypes:
        console.print(escape("\n".join(headlines(summary(bench.rows, opts.dtypes)))))
    return report(bench, mode, started, at_start)


def report(bench: Bench, mode: str, started: float, at_start: dict[str, Any]) -> dict[str, Any]:
    """The JSON report: rows with their comparisons, per-task outcomes, the dev set, notes."""
    fams = [family_of(s) for s in bench.held]
    suites_ = [suite_of(s) for s in bench.held]
    sizes = {m: (o.held_out_tasks, o.train_tasks) for m, o in MODES.items()}
    return {
        "bench": "quality", "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": {**machine(), "load_avg_1m_at_start": at_start["load_avg_1m"]},
        "mode": mode, "options": asdict(bench.opts), "model": "embedded SmolLM2-135M-Instruct",
        "dev_set": {"seed": bench.opts.seed, "held_out": len(bench.held),
                    "train": len(bench.train),
                    "suites": {s: suites_.count(s) for s in sorted(set(suites_))},
                    "families": {f: fams.count(f) for f in sorted(set(fams))}},
        "baseline": bench.baseline,
        "phases": bench.rows,
        "per_task": {"ids": [s.id for s in bench.held], "suites": suites_,
                     "rows": bench.per_task},
        **bench.extra,
        **({"dtypes": summary(bench.rows, bench.opts.dtypes)}
           if bench.opts.dtypes else {}),
        "one_off_s": bench.one_off,
        "predicted_s": predict(bench.rows, bench.one_off, sizes),
        "seconds": round(time.perf_counter() - started, 1),
        "notes": NOTES + ([NOTE] if bench.opts.dtypes else []),
    }


def options_from(args: argparse.Namespace) -> tuple[str, Options]:
    """The mode's options with any explicit overrides; overriding makes the mode ``custom``."""
    mode = "quick" if args.quick else "full"
    overrides = {k: v for k, v in {
        "held_out_tasks": args.tasks, "train_tasks": args.train_tasks or args.tasks,
        "train_steps": args.train_steps, "seed": args.seed, "concurrency": args.concurrency,
        "max_iterations": args.max_iterations}.items() if v is not None}
    # same tasks and settings: the mode stays what it is
    same = {"dtypes": parse_dtypes(args.dtypes), "sample_seed": args.sample_seed}
    if overrides:
        return f"{mode}+custom", replace(MODES[mode], **overrides, **same)
    return mode, replace(MODES[mode], **same)


def parse(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="200 held-out tasks, 2 rounds")
    parser.add_argument("--tasks", type=int, help="held-out tasks (a slice to time)")
    parser.add_argument("--train-tasks", type=int, help="train tasks run before training")
    parser.add_argument("--train-steps", type=int, help="SFT optimizer steps")
    parser.add_argument("--max-iterations", type=int, help="rounds of the looping rows")
    parser.add_argument("--seed", type=int, help="dev-set seed (default 0)")
    parser.add_argument("--concurrency", type=int, help="concurrent runs = decode batch (32)")
    parser.add_argument("--rows", help=f"comma-separated subset of {','.join(ROWS)} "
                        "(single-shot always runs)")
    parser.add_argument("--dtypes", help="comma-separated dtypes (float32,bfloat16): each row "
                        "once per dtype, paired with itself in the first")
    parser.add_argument("--sample-seed", type=int, help="seed every request (sample i of "
                        "best-of-n: +i): dtypes draw alike (resample rows then repeat)")
    parser.add_argument("--out", type=Path, help="JSON path (PNG next to it); default "
                        "results/quality.json (quick) or quality_full.json, quality_dtypes* "
                        "with --dtypes")
    parser.add_argument("--workdir", type=Path, help="keep archives, data and models here")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> None:
    args = parse(argv)
    rows = (tuple(r for r in ROWS if r in DTYPE_ROWS) if args.dtypes else ROWS) if not args.rows \
        else tuple(ALIASES.get(r.strip(), r.strip()) for r in args.rows.split(","))
    unknown = set(rows) - set(ROWS)
    if unknown:
        raise SystemExit(f"unknown rows {sorted(unknown)}; choose from {', '.join(ROWS)}")
    try:
        mode, opts = options_from(args)
        check_rows(rows, opts.dtypes)
    except ConfigError as exc:
        raise SystemExit(str(exc)) from None
    out = args.out or RESULTS / ("quality" + ("_dtypes" if opts.dtypes else "")
                                 + (".json" if args.quick else "_full.json"))
    if args.workdir is not None:
        args.workdir.mkdir(parents=True, exist_ok=True)
        data = run(opts, mode, args.workdir, rows)
    else:
        with tempfile.TemporaryDirectory(prefix="quality-bench-") as tmp:
            data = run(opts, mode, Path(tmp), rows)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(data, indent=1) + "\n")
    plot(data, out.with_suffix(".png"))
    console.print("predicted: " + ", ".join(f"{m} {p['total_s'] / 60:.0f} min"
                                             for m, p in data["predicted_s"].items()))
    console.print(f"wrote {out} and {out.with_suffix('.png')} in {data['seconds']:.0f}s")


if __name__ == "__main__":
    main()
