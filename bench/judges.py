"""Benchmark the judges: score spread on real drafts, and the sandbox's cost.

1. **Spread.** The embedded model drafts taglines for a few briefs; each
   draft is judged by the copywriting rubric through the :class:`Critic` and by
   the single-score :class:`LLMJudge` baseline. We report, per judge, the
   standard deviation and the number of distinct scores (both scaled to the
   judge's range, so 0-10 and 1-10 compare), the ratio composite / baseline,
   how often each LLM boolean said True (a judge saying True to everything
   adds no information), and how the checks-only score compares. Spread
   alone is not quality (random scores spread too), so we also report each
   judge's AUC at ranking drafts that pass every check above those that do
   not: 0.5 is chance, 1.0 is perfect agreement with the checks.
2. **Sandbox.** Wall time of :func:`run_python_tests` on a trivial solution,
   as a ratio to a bare ``python -I -c pass`` measured in the same run.
3. **Sandbox isolation** (issue #15). The same ratio for the isolated sandbox
   (bubblewrap namespaces + seccomp, tests in a second process), next to the
   previous single-process sandbox (loaded from ``git show HEAD``, when it still
   differs) timed in the same run; the start-up cost of ``bwrap`` itself; and
   the cost of one call across the solution/tests boundary.

4. **Quality** (issue #34): pairwise accuracy and position consistency of the
   same-model critic, a separate judge (``--judge``), the group ranker, majority
   vote and the checks alone, on the labelled pairs in ``bench/data/``
   (:mod:`judges_quality`); written under ``"quality"``. Accuracy is over the pairs
   a judge decided; its failed judgements (no valid answer) are their own column,
   never a tie, and coverage (decided / pairs) says what the accuracy rests on.

Numbers are ratios against baselines from the same run (this machine is
shared and noisy); nothing here asserts on time.

    python bench/judges.py            # writes bench/results/judges.json
    python bench/judges.py --quick    # fewer drafts
    python bench/judges.py --only-sandbox-isolation   # part 3 only, merged into the JSON
    python bench/judges.py --only-quality [--quick] [--judge SPEC] [--out PATH]   # part 4
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from rich.progress import track

RESULTS = Path(__file__).parent / "results" / "judges.json"
BRIEFS = [
    "Write a tagline for an independent bookstore in 4 to 12 words.",
    "Write a tagline for a neighbourhood bakery in 4 to 12 words.",
    "Write a tagline for a bicycle repair shop in 4 to 12 words.",
    "Write a tagline for a quiet seaside hotel in 4 to 12 words.",
]


def _scaled(values: list[float], lo: float, hi: float) -> dict[str, float]:
    scaled = [(v - lo) / (hi - lo) for v in values]
    return {"std": statistics.pstdev(scaled), "distinct": len(set(values)),
            "mean": statistics.fmean(scaled)}


def _auc(scores: list[float], labels: list[bool]) -> float | None:
    """P(score of a passing draft > score of a failing one), ties count half."""
    pos = [s for s, y in zip(scores, labels) if y]
    neg = [s for s, y in zip(scores, labels) if not y]
    if not pos or not neg:
        return None
    wins = sum(1.0 if p > n else 0.5 if p == n else 0.0 for p in pos for n in neg)
    return wins / (len(pos) * len(neg))


def bench_spread(per_brief: int) -> dict[str, Any]:
    from agentic_loop.judges import Critic, LLMJudge, copywriting_rubric, spread_report
    from agentic_loop.models import load_chat_model

    llm = load_chat_model("local", temperature=1.0, max_tokens=32)
    rubric = copywriting_rubric(word_range=(4, 12))
    pairs: list[tuple[str, str]] = []
    for brief in track(BRIEFS, description="drafting"):
        drafts = llm.batch([brief] * per_brief, temperature=1.0, max_tokens=32)
        pairs += [(brief, str(d.content).strip()) for d in drafts]
    started = time.perf_counter()
    critiques = Critic(llm, rubric).batch(pairs)
    critic_s = time.perf_counter() - started
    started = time.perf_counter()
    baseline = LLMJudge(llm).batch(pairs)
    judge_s = time.perf_counter() - started
    report = spread_report(critiques, baseline=[j.score for j in baseline])
    print(report)

    composite = _scaled([c.score for c in critiques], 0, 10)
    checks_only = report.checks_only
    judge = _scaled([float(j.score) for j in baseline], 1, 10)
    overall = _scaled([float(c.overall_score or 1) for c in critiques], 1, 10)
    share_true = {
        f.name: sum(bool(c.values[f.name]) for c in critiques) / len(critiques)
        for f in rubric.llm_features
    }
    passed = [c.passed for c in critiques]
    llm_only = [
        sum(f.points for f in c.evaluation.features if f.source == "llm") for c in critiques
    ]
    return {
        "n_outputs": len(pairs),
        "n_distinct_outputs": len({o for _, o in pairs}),
        "auc_vs_checks_passed": {
            "llm_judge_baseline": _auc([float(j.score) for j in baseline], passed),
            "critic_overall_score": _auc([float(c.overall_score or 1) for c in critiques], passed),
            "critic_llm_features_only": _auc(llm_only, passed),
        },
        "composite": composite,
        "checks_only": None if checks_only is None else {
            "std": checks_only.std / 10, "distinct": checks_only.distinct},
        "critic_overall_score": overall,
        "llm_judge_baseline": judge,
        "std_ratio_composite_vs_baseline": (
            composite["std"] / judge["std"] if judge["std"] else None),
        "distinct_ratio_composite_vs_baseline": composite["distinct"] / judge["distinct"],
        "llm_feature_share_true": share_true,
        "checks_pass_rate": sum(c.passed for c in critiques) / len(critiques),
        "seconds_per_critique_vs_per_baseline_judgement": critic_s / judge_s if judge_s else None,
    }


def bench_sandbox(runs: int) -> dict[str, Any]:
    from agentic_loop.judges.sandbox.run import isolation_mode, run_python_tests

    def timed(fn: Any) -> float:
        times = []
        for _ in range(runs):
            t0 = time.perf_counter()
            fn()
            times.append(time.perf_counter() - t0)
        return statistics.median(times)

    bare = timed(lambda: subprocess.run([sys.executable, "-I", "-c", "pass"], check=True))
    sandboxed = timed(lambda: run_python_tests("def f():\n    return 1", ["assert f() == 1"] * 5))
    return {"isolation": isolation_mode(), "bare_python_s": bare, "sandbox_run_s": sandboxed,
            "ratio_sandbox_vs_bare_python": sandboxed / bare}


def _previous_sandbox() -> Any | None:
    """The committed sandbox module, when it is not the one in the work tree (the "before")."""
    import importlib.util
    import tempfile

    root = Path(__file__).resolve().parents[1]
    sources = {}
    for name in ("sandbox.py", "_sandbox_runner.py"):
        done = subprocess.run(["git", "show", f"HEAD:src/agentic_loop/judges/{name}"],
                              cwd=root, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            return None
        sources[name] = done.stdout
    if "bwrap" in sources["sandbox.py"]:
        return None  # HEAD already has the isolated sandbox: nothing older to compare
    folder = Path(tempfile.mkdtemp(prefix="previous-sandbox-"))
    for name, text in sources.items():
        (folder / name).write_text(text, encoding="utf-8")
    spec = importlib.util.spec_from_file_location("previous_sandbox", folder / "sandbox.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["previous_sandbox"] = module  # pydantic resolves its annotations through it
    spec.loader.exec_module(module)
    return module


def bench_sandbox_isolation(runs: int) -> dict[str, Any]:
    """Cost per run of the isolated sandbox against a bare interpreter, before and after."""
    from agentic_loop.judges.sandbox.isolation import bwrap_command, isolation
    from agentic_loop.judges.sandbox.run import run_python_tests, sandbox_layers

    def timed(fn: Any) -> float:
        fn()  # warm-up: the first call probes the layers
        times = []
        for _ in range(runs):
            t0 = time.perf_counter()
            fn()
            times.append(time.perf_counter() - t0)
        return statistics.median(times)

    code, tests = "def f():\n    return 1", ["assert f() == 1"] * 5
    bare = timed(lambda: subprocess.run([sys.executable, "-I", "-c", "pass"], check=True))
    after = timed(lambda: run_python_tests(code, tests))
    calls = timed(lambda: run_python_tests(code, "for _ in range(1000):\n    assert f() == 1"))
    out: dict[str, Any] = {
        "isolation": isolation().describe(), "layers": list(sandbox_layers()),
        "bare_python_s": bare, "sandbox_run_s": after,
        "ratio_sandbox_vs_bare_python": after / bare,
        "seconds_per_boundary_call": max(0.0, calls - after) / 1000,
    }
    if isolation().mode == "bwrap":
        argv = bwrap_command([sys.executable, "-I", "-c", "pass"], tmpfs_mb=8)
        wrapped = timed(lambda: subprocess.run(argv, check=True))
        out["bwrap_python_s"] = wrapped
        out["bwrap_startup_s"] = wrapped - bare
    previous = _previous_sandbox()
    if previous is not None:
        before = timed(lambda: previous.run_python_tests(code, tests))
        out["before_sandbox_run_s"] = before
        out["before_ratio_sandbox_vs_bare_python"] = before / bare
    return out


def print_quality(rows: dict[str, dict[str, Any]]) -> None:
    """Part 4's table, one row per judge (FitTable: readable at 80 columns), then each
    judge's model and note, and the judges that were skipped."""
    from judges_quality import pct
    from rich.console import Console

    from agentic_loop.tables import Col, FitTable

    skipped = {k: v for k, v in rows.items() if "skipped" in v}
    rows = {k: v for k, v in rows.items() if k not in skipped}

    table = FitTable("Judge quality on the labelled pairs (accuracy over the decided pairs, "
                     "ties count half; a failed judgement is not a tie)", [
        Col("judge", wrap=True, min_width=12), Col("accuracy", short="acc"), Col("95% CI"),
        Col("accuracy where checks tie", short="acc~chk"), Col("ties"), Col("failed"),
        Col("coverage", short="cover"), Col("order consistency", short="consist"),
        Col("first shown wins", short="1st wins", drop=1)],
        hidden_hint="see bench/results/judges.json")
    for row in rows.values():
        low, high = row["wilson95"]
        table.add_row(row["judge"], pct(row["accuracy"]), f"{pct(low)}-{pct(high)}",
                      pct(row.get("accuracy_where_checks_tie")), str(row["ties"]),
                      str(row["failed"]), f"{row['decided']}/{row['pairs']}",
                      pct(row["position_consistency"]), pct(row["first_shown_wins"]))
    console = Console()
    console.print(table)
    for row in rows.values():
        console.print(f"- {row['judge']}: {row['model']}; {row['note']}", highlight=False)
    for row in skipped.values():
        console.print(f"- {row['judge']}: skipped ({row['skipped']})", highlight=False)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="2 drafts per brief, 5 sandbox runs")
    parser.add_argument("--only-sandbox-isolation", action="store_true",
                        help="run part 3 only and merge it into the existing results")
    parser.add_argument("--only-quality", action="store_true",
                        help="run part 4 only (judge accuracy on the labelled pairs), merged "
                        "into the results under 'quality'; --quick: 3 pairs per kind")
    parser.add_argument("--judge", default="local", metavar="SPEC",
                        help="the separate judge (any load_chat_model spec, e.g. an "
                        "OpenAI-compatible URL); default: the embedded model")
    parser.add_argument("--votes", type=int, default=5, help="samples per majority vote")
    parser.add_argument("--out", type=Path, default=RESULTS, help=f"default {RESULTS}")
    args = parser.parse_args()
    if args.only_quality:
        sys.path.insert(0, str(Path(__file__).parent))
        from judges_quality import bench_quality

        section = bench_quality(args.out, judge=args.judge, quick=args.quick, votes=args.votes)
        print_quality(section["rows"])
        print(f"wrote {args.out}")
        return
    previous = json.loads(args.out.read_text(encoding="utf-8")) if args.out.exists() else {}
    if args.only_sandbox_isolation:
        results = previous
        results["sandbox_isolation"] = {
            "when": datetime.now(UTC).isoformat(timespec="seconds"),
            "machine": platform.platform(),
            **bench_sandbox_isolation(5 if args.quick else 20),
        }
    else:
        results = {
            "when": datetime.now(UTC).isoformat(timespec="seconds"),
            "machine": platform.platform(),
            "sandbox": bench_sandbox(5 if args.quick else 20),
            "sandbox_isolation": bench_sandbox_isolation(5 if args.quick else 20),
            "spread": bench_spread(2 if args.quick else 4),
        }
        if "quality" in previous:  # part 4 runs on its own (--only-quality): keep its numbers
            results["quality"] = previous["quality"]
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    print(json.dumps(results, indent=2))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
