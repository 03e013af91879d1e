"""Tools flywheel: do improve rounds on tool-using agents raise pass rate and tool use?

The embedded model runs as a tool agent (the package's tool loop, the first
call forced, as ``bench/agents.py``'s "single-shot + tools" row; see
``tools_flywheel_eval.py``) on held-out tool tasks
(``agentic_loop.tasks.tool_tasks``, ``split="held_out"``: wordings no train
task uses; seed 0, so the first 200 are ``bench/agents.py``'s tasks), and
again with the first call left to it (its tool-use rate is the adoption
rate; ``--no-free`` skips that pass). Rows, all on the SAME held-out tasks:

* **base**: the embedded model before any training;
* **round k**: ``agentic_loop.distill.improve`` run for one round with round
  ``k``'s method (``--methods``, by default SFT, then SFT+DPO, then GRPO) on
  train-split tool tasks: the agent grows ``samples`` episodes per task, the
  STaR hint retries the failed ones, the export turns accepted episodes into
  tool-calling rows (or GRPO rolls out with the tools), a LoRA trains
  ``steps`` optimizer steps, and the gate compares agent with agent on a
  golden set of held-out tool tasks apart from the measured ones. Round
  ``k + 1`` starts from what round ``k``'s gate kept (``--chain kept``,
  improve's own rule: one registry across the rounds) or from round ``k``'s
  candidate whatever the gate said (``--chain candidate``). Each round's
  candidate is measured;
* **control**: one plain LoRA SFT run from the base model on the first SFT
  round's data (what a single distill round over one sampling pass would
  train on) for as many optimizer steps as all the rounds together.

Each row against the base: exact McNemar on pass/fail, Holm over every
comparison made (each row vs the base, and the last round vs the control),
with the change in tool-use rate (exact McNemar on the paired tool-use
lists). Intervals are Wilson 95% (rates) and Student t (mean score). A round
whose difference is not significant is reported as such; nothing asserts on
time. ``--deadline-utc HH:MM`` starts no phase likely to end after it: what
was measured is written, the rest is marked skipped; a phase that raises is
recorded as failed and the others go on. ``--resume OLD.json`` (with the same
``--keep`` folder and settings) goes on from such a run: its measured rows are
kept as they are and only the phases it lacks run. On a machine shared with another
heavy process set ``AGENTIC_LOOP_TORCH_THREADS=1`` (two contending torch
threads made a smoke run ~10x slower).

    python bench/tools_flywheel.py --train-tasks 40 --held-out 200 --rounds 3
    python bench/tools_flywheel.py --train-tasks 40 --held-out 200 --rounds 3 \\
        --keep /tmp/tf/work --resume /tmp/tf/tools_flywheel.json   # after a deadline cut it
    python bench/tools_flywheel.py --smoke --train-tasks 6 --samples 2 --out /tmp/tf.json
    # (--smoke alone: 2 train / 4 held-out / 1 round; 6 x 2 samples make SFT data likely)

Writes the JSON (``--out``, default ``bench/results/tools_flywheel.json``) after
every phase, and the curve next to it (``.png``).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import asdict, fields, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from tools_flywheel_eval import (  # type: ignore[import-not-found]  # bench/ is on the path
    add_comparisons,
    measure,
    plot_curve,
    print_table,
)
from tools_flywheel_setup import (  # type: ignore[import-not-found]
    Options,
    improve_settings,
    missing_parts,
    task_sets,
    train_options,
)

RESULTS = Path(__file__).parent / "results" / "tools_flywheel.json"
BASE = "base"
CONTROL = "control: plain SFT"


class StagePrinter:
    """``improve``'s progress as one line per stage, with the seconds since the round began."""

    def __init__(self, started: float) -> None:
        self.started = started

    def start(self, stage: str, total: int | None = None) -> None:
        size = f" ({total})" if total else ""
        print(f"  [{time.perf_counter() - self.started:6.0f} s] {stage}{size}", flush=True)

    def advance(self, n: int = 1) -> None:
        """Steps within a stage are not printed."""


class Bench:
    """The bench's state: tasks, rows measured so far, what was skipped, the work folder."""

    def __init__(self, o: Options, work: Path, out: Path, deadline: float | None,
                 header: dict[str, Any]) -> None:
        from agentic_loop.tasks.tool_tasks import default_task_tools

        self.o, self.work, self.out, self.deadline, self.header = o, work, out, deadline, header
        self.pool, self.golden, self.held = task_sets(o)
        self.tools = list(default_task_tools())
        self.rows: list[dict[str, Any]] = []
        self.per_task: dict[str, dict[str, list[Any]]] = {}
        self.skipped: dict[str, str] = {}
        self.seconds: dict[str, float] = {}
        self.rounds: list[Any] = []  # each round's ImproveResult

    def resume(self, old: dict[str, Any]) -> None:
        """Take over what an earlier run with the same settings and work folder measured: its
        rows, per-task vectors and phase seconds; phases it skipped run again here."""
        settings = {**asdict(self.o), "tools": [t.name for t in self.tools]}
        given = old.get("settings") or {}
        differ = sorted(k for k in settings
                        if json.dumps(given.get(k)) != json.dumps(settings[k], default=list))
        if differ:
            raise SystemExit(f"--resume: the earlier run used other settings ({', '.join(differ)})"
                             "; give the same flags, or start a new run without --resume")
        if not (self.work / "registry").is_dir():
            raise SystemExit(f"--resume: {self.work} holds no registry; give the earlier run's "
                             "--keep folder")
        measured = {r["name"] for r in old.get("rows", [])}
        self.rows = [r for r in old.get("rows", []) if r.get("kind") != "control"]
        self.per_task = {k: v for k, v in old.get("per_task", {}).items() if k != CONTROL}
        self.seconds = {k: v for k, v in old.get("seconds", {}).items() if CONTROL not in k}
        self.header["resumed"] = {"from": old.get("date"), "rows": sorted(measured - {CONTROL})}

    def has(self, name: str) -> bool:
        """Whether a row called ``name`` is in the report already (measured or not trained)."""
        return any(r["name"] == name for r in self.rows)

    # -- phases ---------------------------------------------------------------------------

    def allows(self, name: str, estimate_s: float) -> bool:
        """Whether ``name`` likely ends before the deadline; if not, it is marked skipped."""
        if self.deadline is None or time.time() + estimate_s <= self.deadline:
            return True
        self.skipped[name] = (f"skipped: it would likely end after the run's deadline "
                              f"(~{estimate_s:.0f} s needed)")
        return False

    def measure(self, name: str, spec: str, **extra: Any) -> dict[str, Any]:
        o = self.o
        print(f"measuring {name} ({spec}) on {len(self.held)} held-out tool tasks...", flush=True)
        started = time.perf_counter()
        row, vectors = measure(name, spec, self.held, self.tools, max_steps=o.max_steps,
                               max_tokens=o.max_tokens, concurrency=o.concurrency, free=o.free)
        self.seconds[f"measure {name}"] = round(time.perf_counter() - started, 1)
        row.update(extra)
        self.rows.append(row)
        self.per_task[name] = vectors
        free = row.get("free") or {}
        print(f"  {name}: pass {row['pass_rate']:.1%} {row['pass_rate_ci95']}, valid calls "
              f"{row['tool_call_validity']}; first call free: tools used "
              f"{free.get('tool_use_rate', '-')}, pass {free.get('pass_rate', '-')}", flush=True)
        return row

    def run_round(self, k: int, registry: Path, base: str) -> Any:
        """Improve round ``k`` (one ``improve`` call); its candidate measured when it trained."""
        from agentic_loop.distill.loop.improve import improve

        method = self.o.method(k)
        name = f"round {k}"
        print(f"{name}: improve with {method} from {base} ...", flush=True)
        started = time.perf_counter()
        result = improve(self.pool, golden=self.golden, registry=registry,
                         work_dir=self.work / f"improve-{k}",
                         settings=improve_settings(self.o, method, base),
                         progress=StagePrinter(started))
        seconds = round(time.perf_counter() - started, 1)
        self.seconds[f"improve {name}"] = seconds
        self.rounds.append(result)
        report = result.reports[-1]
        info = {"kind": "round", "round": k, "method": method, "from": report.model,
                "train_steps": report.train.steps if report.train else 0,
                "decision": report.decision.value if report.decision else None,
                "promoted": bool(report.registration and report.registration.promoted),
                "improve_s": seconds, "improve": report.model_dump(mode="json")}
        if report.train is None:
            self.rows.append({"name": name, **info,
                              "skipped": f"not measured: the round trained nothing "
                                         f"({report.ended or result.reason})"})
            return result
        self.measure(name, f"local:{report.train.model_dir}", **info)
        return result

    def run_control(self) -> None:
        """Plain LoRA SFT from the base on the first SFT round's data, as many steps as the
        rounds took together."""
        from agentic_loop.distill.train import train

        steps = sum(r.get("train_steps") or 0 for r in self.rows if r.get("kind") == "round")
        data = next((d for k in range(1, self.o.rounds + 1)
                     if (d := self.work / f"improve-{k}" / "round-001" / "data")
                     .joinpath("sft.jsonl").is_file()), None)
        if data is None or steps < 1:
            self.skipped[CONTROL] = ("skipped: no finished round exported SFT rows to train on"
                                     if data is None else "skipped: the rounds trained no step")
            return
        o = self.o
        print(f"{CONTROL}: {steps} LoRA steps on {data} ...", flush=True)
        started = time.perf_counter()
        trained = train(data, self.work / "control" / "model", method="sft", base="local",
                        **{**train_options(o), "max_steps": steps})
        train_s = round(time.perf_counter() - started, 1)
        self.seconds[f"train {CONTROL}"] = train_s
        self.measure(CONTROL, trained.spec, kind="control", data=str(data),
                     train_steps=sum(s.steps for s in trained.stages),
                     loss=trained.card.metrics.get("final_train_loss"), train_s=train_s)

    def run(self) -> None:
        """Base, the rounds, the control; the report is saved after each phase."""
        o = self.o
        if not self.has(BASE):
            if not self.allows(BASE, 0.0):  # the deadline has passed: every row needs the base
                return
            self.measure(BASE, "local", kind="base", round=0)
            self.save()
        eval_s = self.seconds[f"measure {BASE}"]
        # a round's improve costs about a measured row or more
        longest = max([eval_s] + [s for k, s in self.seconds.items() if k.startswith("improve")])
        registry = self.work / "registry"
        base = "local"
        for k in range(1, o.rounds + 1):
            name = f"round {k}"
            if self.has(name):
                row = next(r for r in self.rows if r["name"] == name)
                if o.chain == "candidate" and row.get("model"):
                    registry, base = self.work / f"registry-{k}", row["model"]
                continue
            if not self.allows(name, longest + eval_s):
                continue
            if o.chain == "candidate":
                registry = self.work / f"registry-{k}"  # the candidate chains, not the gate
            started = time.perf_counter()
            result = self.guarded(name, lambda: self.run_round(k, registry, base))
            longest = max(longest, time.perf_counter() - started)
            train_ = result.reports[-1].train if result is not None else None
            if o.chain == "candidate" and train_ is not None:
                base = f"local:{train_.model_dir}"
            self.save()
        if self.allows(CONTROL, eval_s * 2):
            self.guarded(CONTROL, self.run_control)
        self.save()

    def guarded(self, name: str, phase: Callable[[], Any]) -> Any:
        """``phase()``, or None with its error recorded as the phase's skip reason: one failed
        round still leaves the others, and the rows measured so far, in the report."""
        try:
            return phase()
        except Exception as exc:  # noqa: BLE001 - kept as data in the report, and printed
            traceback.print_exc()
            self.skipped[name] = f"failed: {type(exc).__name__}: {str(exc)[:500]}"
            return None

    # -- the report -----------------------------------------------------------------------

    def report(self) -> dict[str, Any]:
        rounds = [r for r in self.rows if r.get("kind") == "round" and r["name"] in self.per_task]
        last = rounds[-1]["name"] if rounds else None
        add_comparisons(self.rows, self.per_task, base=BASE, control=CONTROL, last_round=last)
        skipped = dict(self.skipped)
        for name in [f"round {k}" for k in range(1, self.o.rounds + 1)] + [CONTROL]:
            if not any(r["name"] == name for r in self.rows) and name not in skipped:
                skipped[name] = "not run: the run stopped before it"
        families: dict[str, int] = {}
        for task in self.held:
            family = task.metadata.get("family", "?")
            families[family] = families.get(family, 0) + 1
        steps = {"rounds": sum(r.get("train_steps") or 0 for r in self.rows
                               if r.get("kind") == "round"),
                 "control": next((r["train_steps"] for r in self.rows
                                  if r.get("kind") == "control"), None)}
        return {**self.header, "date": datetime.now(UTC).isoformat(timespec="seconds"),
                "settings": {**asdict(self.o), "tools": [t.name for t in self.tools]},
                "tasks": {"held_out": len(self.held), "train": len(self.pool),
                          "golden": len(self.golden), "split": "held_out",
                          "families": families},
                "baseline": BASE, "control": CONTROL, "steps": steps, "rows": self.rows,
                "skipped": skipped, "seconds": self.seconds,
                "per_task": self.per_task}

    def save(self) -> dict[str, Any]:
        report = self.report()
        self.out.parent.mkdir(parents=True, exist_ok=True)
        self.out.write_text(json.dumps(report, indent=2, default=str) + "\n")
        if any(r.get("pass_rate") is not None for r in self.rows):
            plot_curve(report, self.out.with_suffix(".png"))
        return report


def deadline_of(hhmm: str | None) -> float | None:
    """Today's ``HH:MM`` UTC as a Unix time (None: no deadline).

    >>> deadline_of(None) is None
    True
    >>> deadline_of("7") is None
    Traceback (most recent call last):
    ...
    SystemExit: --deadline-utc takes HH:MM (UTC), got '7'
    """
    if hhmm is None:
        return None
    try:
        hour, minute = (int(x) for x in hhmm.split(":"))
        return datetime.now(UTC).replace(hour=hour, minute=minute, second=0,
                                         microsecond=0).timestamp()
    except ValueError:
        raise SystemExit(f"--deadline-utc takes HH:MM (UTC), got {hhmm!r}") from None


def options_from(args: argparse.Namespace) -> Options:
    """The smoke or full options, with each flag given on the command line put over them."""
    o = Options.smoke() if args.smoke else Options()
    given = {f.name: getattr(args, f.name) for f in fields(Options)
             if getattr(args, f.name, None) is not None}
    if "methods" in given:
        given["methods"] = tuple(given["methods"])
    return replace(o, **given)


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    p.add_argument("--smoke", action="store_true", help="tiny settings: checks the wiring only")
    flags: list[tuple[str, type, str]] = [
        ("train-tasks", int, "train tool tasks the rounds grow on"),
        ("held-out", int, "held-out tool tasks every row is measured on"),
        ("golden", int, "held-out tool tasks the gate compares on (apart from the measured)"),
        ("rounds", int, "improve rounds"), ("samples", int, "episodes per train task a round"),
        ("steps", int, "optimizer steps per round"),
        ("threshold", float, "score (0-10) an episode needs to be trained on"),
        ("batch-size", int, "per-device batch"), ("max-length", int, "training sequence length"),
        ("num-generations", int, "GRPO episodes per prompt"),
        ("max-completion-length", int, "GRPO tokens per completion"),
        ("max-tokens", int, "generation limit per model call"),
        ("max-steps", int, "model calls per episode"),
        ("concurrency", int, "tasks measured at once"), ("seed", int, "task seed")]
    for flag, kind, text in flags:
        p.add_argument(f"--{flag}", type=kind, default=None, help=text)
    p.add_argument("--methods", nargs="+", default=None,
                   help="round methods in order (default: sft sft+dpo grpo; repeats past its end)")
    p.add_argument("--no-free", dest="free", action="store_const", const=False, default=None,
                   help="measure only with the first call forced (no adoption rate)")
    p.add_argument("--chain", choices=["kept", "candidate"], default=None,
                   help="the next round starts from what the gate kept (default), or from the "
                        "last candidate")
    p.add_argument("--deadline-utc", default=None,
                   help="HH:MM (UTC): start no phase likely to end after it")
    p.add_argument("--episode-timeout-s", type=float, default=3600.0,
                   help="wall-clock limit of one agent episode in every phase (measure, grow, "
                        "gate); 32 episodes share one batched engine, so the package's default "
                        "(300 s) cuts episodes that only waited their turn")
    p.add_argument("--out", type=Path, default=RESULTS, help="results JSON (PNG next to it)")
    p.add_argument("--keep", type=Path, default=None,
                   help="keep the work folder (models, rounds) here instead of a temp dir")
    p.add_argument("--resume", type=Path, default=None,
                   help="an earlier run's JSON (same settings, its --keep folder given): keep "
                        "its measured rows and run only the phases it lacks")
    return p


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    args = parser().parse_args(argv)
    o = options_from(args)
    missing = missing_parts(sorted({o.method(k) for k in range(1, o.rounds + 1)}))
    if missing:
        raise SystemExit("the tools flywheel cannot run in this checkout:\n- "
                         + "\n- ".join(missing))
    from quality import machine  # type: ignore[import-not-found]  # bench/ is on the path

    from agentic_loop.architectures import Architecture

    # improve builds its own architectures (grow, gate): the limit reaches them as the default
    # of every Architecture made in this process
    defaults = Architecture.__init__.__kwdefaults__
    assert defaults is not None and "episode_timeout_s" in defaults
    defaults["episode_timeout_s"] = args.episode_timeout_s

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    work = args.keep or Path(tempfile.mkdtemp(prefix="tools-flywheel-"))
    os.environ.setdefault("AGENTIC_LOOP_DATA", str(work / "data"))  # the run's places log
    full = o.held_out >= 200 and o.rounds >= 3
    header = {"bench": "tools_flywheel",
              "mode": "smoke" if args.smoke else "full" if full else "partial",
              "command": " ".join(["python", "bench/tools_flywheel.py",
                                   *(argv if argv is not None else sys.argv[1:])]),
              "machine": machine(),
              "episode_timeout_s": args.episode_timeout_s,
              "note": "A shared machine: compare rows within one run (paired, same tasks)."}
    try:
        run = Bench(o, work, args.out, deadline_of(args.deadline_utc), header)
        if args.resume is not None:
            if args.keep is None:
                raise SystemExit("--resume needs --keep: the earlier run's work folder")
            run.resume(json.loads(args.resume.read_text()))
        print(f"tools flywheel: {len(run.pool)} train, {len(run.golden)} golden, "
              f"{len(run.held)} held-out tool tasks; methods "
              f"{[o.method(k) for k in range(1, o.rounds + 1)]}, chain {o.chain}", flush=True)
        run.run()
        report = run.save()
        report["machine_at_end"] = machine()
        args.out.write_text(json.dumps(report, indent=2, default=str) + "\n")
        print_table(report["rows"])
        for name, why in report["skipped"].items():
            print(f"  {name}: {why}")
        print(f"wrote {args.out} and {args.out.with_suffix('.png')}")
        return report
    finally:
        if args.keep is None:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
