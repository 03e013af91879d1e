"""Collect every ``bench/results/*.json`` into one markdown table in ``bench/README.md``.

Each benchmark writes its own JSON with its own shape; this script picks each
one's headline numbers (ratios against the baseline measured in the same run,
as the JSONs report them), with the date and the machine the numbers came
from, and links the JSON. The quality benchmark also gets its per-phase table
(pass rate and mean score with 95% intervals, cost per accepted output).

Only the part of ``bench/README.md`` between the two ``bench-summary`` markers
is rewritten, so the prose around it is kept; without markers the table is
appended. A JSON this script does not know still gets a row: its ratio-like
numbers are listed.

    python bench/summary.py            # rewrites the table in bench/README.md
    python bench/summary.py --print    # prints the markdown instead
"""

from __future__ import annotations

import argparse
import json
import os
import platform
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

BENCH = Path(__file__).parent
RESULTS = BENCH / "results"
README = BENCH / "README.md"
START = "<!-- bench-summary:start (written by bench/summary.py; edits here are overwritten) -->"
END = "<!-- bench-summary:end -->"
ORDER = ["models", "archive", "loop", "judges", "pii", "train", "serve", "serve_avx2", "front",
         "quality", "quality_distilled", "quality_dtypes", "quality_full"]
RATIO_HINTS = ("ratio", "_over_", "speedup")


def get(data: Any, path: str) -> Any:
    """``data["a"]["b"][0]`` for ``"a.b.0"``; None when any step is missing."""
    for step in path.split("."):
        if isinstance(data, dict):
            data = data.get(step)
        elif isinstance(data, list) and step.lstrip("-").isdigit() and data:
            data = data[int(step)] if -len(data) <= int(step) < len(data) else None
        else:
            return None
    return data


def num(value: Any, digits: int = 3) -> str:
    """A number as people read it (3 significant digits); ``-`` for a missing one."""
    if value is None:
        return "-"
    if isinstance(value, bool) or not isinstance(value, int | float):
        return str(value)
    return f"{value:,.0f}" if abs(value) >= 10 ** digits else f"{value:.{digits}g}"


def pct(value: Any) -> str:
    """A proportion as a percentage; ``-`` when missing."""
    return "-" if value is None else f"{100 * value:.0f}%"


def interval(ci: Any, fmt: Callable[[Any], str]) -> str:
    """``[lo, hi]`` in the given format, or nothing when there is no interval."""
    return f" [{fmt(ci[0])}, {fmt(ci[1])}]" if isinstance(ci, list) and len(ci) == 2 else ""


def items(*pairs: tuple[str, Any]) -> list[str]:
    """``label: value`` strings for the pairs whose value exists."""
    return [f"{label} {value}" for label, value in pairs if value is not None and "None" not in
            str(value) and value != "-"]


# ------------------------------------------------------------- headlines per bench


def models(d: dict[str, Any]) -> list[str]:
    """Decoding throughput ratios of the embedded model."""
    r = d.get("ratios", {})
    return items(("baseline:", (f"{num(get(d, 'runs.0.tokens_per_s_batch1'))} tokens/s "
                              f"({d.get('baseline', '?')})")),
                 ("batch 8 / batch 1:", f"{num(r.get('batch8_over_batch1_tokens_per_s'))}x"),
                 ("grammar-constrained / free:",
                  f"{num(r.get('constrained_over_unconstrained_tokens_per_s'))}x"),
                 ("fp32 / bf16:", f"{num(r.get('float32_over_bfloat16_tokens_per_s_batch1'))}x"),
                 ("2 threads / 1:", f"{num(r.get('two_threads_over_one_tokens_per_s_batch1'))}x"),
                 ("decode, share of the bf16 matmul peak at batch 1 / 8 / 32 (1 thread):",
                  " / ".join(pct(v) for b, v in (get(
                      r, "engine_fraction_of_matmul_peak.bfloat16_1t") or {}).items()
                             if b.isdigit()) or None),
                 ("bf16 / fp32 matmul peak at batch 32:",
                  f"{num(get(r, 'bfloat16_over_float32_matmul_step_peak.32'))}x"))


def archive(d: dict[str, Any]) -> list[str]:
    """Add throughput, HNSW recall and search latency at the largest size."""
    big = get(d, "scale.-1") or {}
    return items(
        ("add (batches of 100) / bulk embedding:",
         (f"{num(get(d, 'add_throughput.add_many_batches_of_100.ratio_to_bulk_embedding'))}x "
         f"(ceiling {num(get(d, 'add_throughput.ideal_ratio_to_bulk_embedding'))})")),
        ("HNSW recall@10:", num(get(d, "hnsw_recall.recall_at_10"))),
        (f"search at {big.get('entries', '?'):,} entries:" if big else "search:",
         (f"{num(get(big, 'search_ms.index_only.p50'))} ms p50 index-only, "
         f"{num(big.get('speedup_vs_exact'))}x faster than exact; "
         f"{num(get(big, 'search_ms.end_to_end.p50'))} ms with query embedding")),
        *postgres_store(d.get("postgres_store")))


def postgres_store(pg: dict[str, Any] | None) -> list[tuple[str, Any]]:
    """The Postgres (pgvector) store against the FAISS archive at its largest size."""
    if not pg:
        return []
    big = get(pg, "scale.-1") or {}
    return [(f"Postgres / FAISS search p50 at {big.get('entries', '?'):,} entries:",
             f"{num(get(big, 'ratio_postgres_to_faiss.store_search_p50'))}x "
             f"({num(get(big, 'search_ms.postgres_store_search.p50'))} ms)"),
            ("Postgres / FAISS gated add, one at a time:",
             f"{num(get(pg, 'add_throughput.ratio_postgres_to_faiss.gated_add_one_at_a_time'))}x")]


def loop(d: dict[str, Any]) -> list[str]:
    """Framework overhead against a plain loop, and batch throughput against concurrency 1."""
    share = get(d, "overhead.share_of_embedded_loop")
    return items(("LangGraph overhead:", f"{num(get(d, 'overhead.overhead_per_node_us'))} us/node"
                  + (f" ({100 * share:.3g}% of one embedded-model loop)" if share else "")),
                 ("batch throughput, concurrency 8 / 1:",
                  f"{num(get(d, 'batch_throughput.8.ratio_to_concurrency_1'))}x"))


def judges(d: dict[str, Any]) -> list[str]:
    """Spread of the composite score against the single LLM score, the sandbox's cost, and
    each judge's pairwise accuracy with its coverage and failed judgements."""
    s = d.get("spread", {})
    return items(("composite / single LLM score:",
                  (f"std {num(s.get('std_ratio_composite_vs_baseline'))}x, distinct values "
                  f"{num(s.get('distinct_ratio_composite_vs_baseline'))}x")),
                 ("AUC vs checks passed:",
                  (f"LLM judge {num(get(s, 'auc_vs_checks_passed.llm_judge_baseline'))}, "
                   f"critic {num(get(s, 'auc_vs_checks_passed.critic_overall_score'))}")),
                 ("sandboxed / bare python run:",
                  f"{num(get(d, 'sandbox.ratio_sandbox_vs_bare_python'))}x"),
                 ("pairwise accuracy on the labelled pairs (decided/pairs, failed):",
                  ", ".join(f"{r['judge']} {num(r['accuracy'])} ({r['decided']}/{r['pairs']}, "
                            f"{r.get('failed', '?')} failed)"
                            for r in (get(d, "quality.rows") or {}).values()
                            if r.get("accuracy") is not None) or None))


def pii(d: dict[str, Any]) -> list[str]:
    """Recall on the planted corpora (English and multilingual), benign precision, throughput."""
    def mode(name: str) -> str:
        m = f"modes.{name}"
        return (f"recall {num(get(d, m + '.recall_overall'))}, multilingual "
                f"{num(get(d, m + '.world.recall_overall'))} (unseen seed "
                f"{num(get(d, m + '.world_held_out.recall_overall'))}), benign token precision "
                f"{num(get(d, m + '.benign.token_precision'))}, "
                f"{num(get(d, m + '.batch_records_per_s'))} records/s")
    return items(("regex:", mode("regex")), ("spaCy:", mode("spacy")))


def train(d: dict[str, Any]) -> list[str]:
    """Training throughput ratios (LoRA vs full, DPO vs SFT)."""
    r = d.get("ratios", {})
    return items(("baseline SFT full:", f"{num(get(d, 'results.0.tokens_per_s'))} tokens/s"),
                 ("SFT LoRA / full:", f"{num(r.get('sft_lora_vs_full'))}x"),
                 ("DPO LoRA / full:", f"{num(r.get('dpo_lora_vs_full'))}x"),
                 ("DPO / SFT (full):", f"{num(r.get('dpo_full_vs_sft_full'))}x"),
                 *grpo(d.get("grpo")))


def grpo(g: dict[str, Any] | None) -> list[tuple[str, Any]]:
    """GRPO seconds per step at each generation count (LoRA, CPU)."""
    if not g:
        return []
    return [(f"GRPO LoRA, {r.get('num_generations')} generations x "
             f"{r.get('prompts_per_step')} prompts:",
             f"{num(r.get('wall_s_per_step_after_first', r.get('s_per_step')))} s/step")
            for r in g.get("results", [])]


def serve(d: dict[str, Any]) -> list[str]:
    """vLLM against the in-process transformers engine, same prompts and concurrency."""
    ratio = d.get("median_paired_ratio")  # passes alternate between the engines
    paired = (f"{num(ratio)}x tokens/s (median paired ratio)" if ratio is not None else
              f"{num(d.get('ratio_vllm_vs_transformers_tokens_per_s'))}x tokens/s")
    by_dtype = d.get("by_dtype") or {}
    isa = str(get(d, "setup.isa") or "native")
    return items(*([("kernels:", "AVX2 only (bench/cpu_isa.py: a CPU without native bf16)")]
                   if isa != "native" else []),
                 ("in-process transformers:",
                  (f"{num(get(d, 'transformers.tokens_per_s'))} tokens/s "
                   f"at concurrency {get(d, 'setup.concurrency')}")),
                 ("vLLM / transformers:", paired),
                 *((f"{dtype}, vLLM / transformers:",
                    "vLLM did not start" if "error" in row else
                    f"{num(row.get('median_paired_ratio'))}x")
                   for dtype, row in by_dtype.items() if len(by_dtype) > 1),
                 ("vLLM ready after:", f"{num(get(d, 'vllm.ready_s'))} s"))


def front(d: dict[str, Any]) -> list[str]:
    """The front proxy's cost on vLLM's tokens/s, and a merged-model swap under load."""
    return items(("through the front / straight:",
                  f"{num(get(d, 'cost.ratio_front_vs_straight'))}x tokens/s"),
                 ("merged-model swap under load:",
                  (f"{get(d, 'swap.failed')} of {get(d, 'swap.requests')} requests failed "
                   f"({get(d, 'swap.swap')}), swap {num(get(d, 'swap.swap_s'))} s, the "
                   f"longest wait {num(get(d, 'swap.latency_s_max_during'))} s")))


def quality(d: dict[str, Any]) -> list[str]:
    """Single-shot, the best row and the trained rows on held-out tasks, with their verdicts."""
    phases = {p["name"]: p for p in d.get("phases", [])}
    base = phases.get(d.get("baseline", "single-shot"))
    others = [p for p in phases.values() if p.get("model") != "none" and p is not base]
    best = max(others, key=lambda p: p["pass_rate"] or 0.0, default=None)

    def show(p: dict[str, Any] | None) -> str | None:
        if p is None:
            return None
        vs = p.get("vs_single_shot") or {}
        change = (f", {100 * vs['pass_rate_diff']:+.0f} pts: {vs['verdict']}"
                  if vs.get("verdict") else "")
        return f"pass {pct(p['pass_rate'])}{interval(p.get('pass_rate_ci95'), pct)}{change}"

    trained = [(f"{name}:", show(p)) for name, p in phases.items()
               if p.get("model") in ("distilled", "grpo") and p is not best]
    dtypes = d.get("dtypes") or {}  # quality.py --dtypes: each row vs itself in the first dtype
    paired = [(f"{name} vs {v['baseline']}:", f"{100 * v['pass_rate_diff']:+.1f} pts: "
               f"{v['verdict']}") for name, v in (dtypes.get("vs_first_dtype") or {}).items()]
    paired += [(f"{s['row']}, output tokens per LLM-s, {s['dtype']} / {s['vs']}:",
                f"{num(s['tokens_per_llm_s_ratio'])}x") for s in dtypes.get("speed") or []]
    return items(("held-out tasks (same for every row):",
                  get(d, "dev_set.held_out") or get(d, "dev_set.held_out_scored")),
                 ("single-shot:", show(base)),
                 (f"best ({best['name']}):" if best else "best:", show(best)), *trained,
                 *paired)


def agents(d: dict[str, Any]) -> list[str]:
    """Prefix reuse on agent episodes, and the embedded model as a tool agent on held-out tasks."""
    rows = {r["name"]: r for r in get(d, "tasks.rows") or []}
    base = rows.get(get(d, "tasks.baseline") or "")
    out = items(
        ("episodes per LLM-second, KV reuse on / off:",
         f"{num(get(d, 'engine.concurrent.ratio_episodes_per_llm_s'))}x concurrent, "
         f"{num(get(d, 'engine.sequential.ratio_episodes_per_llm_s'))}x one at a time"),
        ("prompt tokens computed / sent with reuse:",
         num(get(d, "engine.concurrent.computed_over_sent_on"))))
    for name, row in rows.items():
        versus = next((v for k, v in row.items() if k.startswith("vs_")), None)
        said = "" if row is base or versus is None else f", {versus.get('verdict')}"
        out.append(f"{name}: {pct(row.get('pass_rate'))} of {row.get('tasks')} held-out tool "
                   f"tasks, tools used {pct(row.get('tool_use_rate'))}, "
                   f"{num(row.get('llm_s_per_task'))} LLM-s/task{said}")
    return out


def flywheel(d: dict[str, Any]) -> list[str]:
    """Golden pass rate of the improve rounds against one plain SFT run with the same steps."""
    r = d.get("ratios", {})
    return items(("golden pass rate:", (f"base {pct(d.get('base_pass_rate'))}, after the rounds "
                                        f"{pct(d.get('final_pass_rate'))}, plain SFT "
                                        f"{pct(d.get('sft_pass_rate'))}")),
                 ("rounds / plain SFT (final):", f"{num(r.get('final_over_sft'))}x"),
                 ("steps:", (f"{get(d, 'steps.improve')} in rounds, {get(d, 'steps.sft')} plain"))
                 ) + [f"method {m.get('method')}: golden {pct(m.get('final_pass_rate'))} after "
                      f"{m.get('steps')} steps, / plain SFT {num(m.get('final_over_sft'))}x"
                      + (f" (failed: {m['error']})" if m.get("error") else "")
                      for m in d.get("methods") or []]


def tools_flywheel(d: dict[str, Any]) -> list[str]:
    """Each row as a tool agent on the held-out tool tasks: pass and tool-use rates with their
    intervals, and what the paired test against the base (and the control) allows."""
    out = items(("held-out tool tasks (same for every row):", get(d, "tasks.held_out")), (
        "optimizer steps:", f"{get(d, 'steps.rounds')} rounds, {get(d, 'steps.control')} control"))
    for row in d.get("rows", []):
        if row.get("pass_rate") is None:
            out.append(f"{row.get('name')}: {row.get('skipped', 'not measured')}")
            continue
        said = "".join(f", {label} {row[key]['verdict']}" for key, label in
                       (("vs_base", "vs base:"), ("vs_control", "vs control:"))
                       if (row.get(key) or {}).get("verdict"))
        free = row.get("free") or {}
        adopted = (f", tools used unforced {pct(free.get('tool_use_rate'))}"
                   f"{interval(free.get('tool_use_rate_ci95'), pct)}" if free else "")
        method = f" ({row['method']})" if row.get("method") else ""
        out.append(f"{row.get('name')}{method}: pass {pct(row.get('pass_rate'))}"
                   f"{interval(row.get('pass_rate_ci95'), pct)}{adopted}, valid calls "
                   f"{pct(row.get('tool_call_validity'))}{said}")
    out += [f"{name}: {why}" for name, why in (d.get("skipped") or {}).items()]
    return out


def generic(d: dict[str, Any]) -> list[str]:
    """Any ratio-like numbers of a bench this script does not know yet (at most five)."""
    found = [(k, v) for k, v in leaves(d) if any(h in k.rsplit(".", 1)[-1] for h in RATIO_HINTS)]
    return [f"{k}: {num(v)}" for k, v in found[:5]]


def leaves(data: Any, prefix: str = "") -> Iterator[tuple[str, float]]:
    """Every numeric leaf with its dotted path."""
    if isinstance(data, dict):
        for k, v in data.items():
            yield from leaves(v, f"{prefix}.{k}" if prefix else str(k))
    elif isinstance(data, int | float) and not isinstance(data, bool):
        yield prefix, data


HEADLINES: dict[str, Callable[[dict[str, Any]], list[str]]] = {
    "models": models, "archive": archive, "loop": loop, "judges": judges, "pii": pii,
    "train": train, "serve": serve, "front": front, "quality": quality, "flywheel": flywheel,
    "agents": agents, "tools_flywheel": tools_flywheel}


# ------------------------------------------------------------- table


def when(d: dict[str, Any], path: Path) -> str:
    """The run's date from the JSON, else the file's modification time (marked as such)."""
    stamp = d.get("date") or d.get("when")
    if stamp:
        return str(stamp)[:10]
    mtime = datetime.fromtimestamp(path.stat().st_mtime, UTC)
    return f"{mtime:%Y-%m-%d} (file time)"


def machine(d: dict[str, Any]) -> str:
    """CPU count and platform as the JSON records them."""
    m = d.get("machine")
    if isinstance(m, dict):
        cpus = f"{m['cpus']} CPUs, " if m.get("cpus") else ""
        load = m.get("load_avg_1m") or m.get("load_avg_1m_at_end")
        return f"{cpus}{m.get('platform', '?')}" + (f", load {num(load)}" if load else "")
    return str(m) if m else "-"


def load(results: Path) -> list[tuple[str, Path, dict[str, Any]]]:
    """``(name, path, data)`` of each results JSON, known benches first in ``ORDER``."""
    found = {p.stem: p for p in sorted(results.glob("*.json"))}
    names = [n for n in ORDER if n in found] + [n for n in found if n not in ORDER]
    return [(n, found[n], json.loads(found[n].read_text())) for n in names]


def bench_table(rows: list[tuple[str, Path, dict[str, Any]]], base: Path) -> str:
    """One row per bench: headline numbers, date, machine, link to its JSON."""
    lines = [("| bench | headline numbers (ratios vs a baseline in the same run) | date | machine "
             "| results |"), "|---|---|---|---|---|"]
    for name, path, d in rows:
        # quality_full, quality_distilled: a variant of a known bench reads as that bench
        headline = HEADLINES.get(name) or HEADLINES.get(name.split("_", 1)[0], generic)
        heads = headline(d) or ["(no headline numbers)"]
        mode = f" ({d['mode']})" if isinstance(d.get("mode"), str) else \
            " (quick)" if d.get("quick") else ""
        link = os.path.relpath(path, base)
        png = path.with_suffix(".png")
        plot = f", [PNG]({os.path.relpath(png, base)})" if png.exists() else ""
        lines.append(f"| {name}{mode} | {'<br>'.join(heads)} | {when(d, path)} | {machine(d)} "
                     f"| [{path.name}]({link}){plot} |")
    return "\n".join(lines)


def quality_table(d: dict[str, Any]) -> str:
    """Per-row quality, the paired comparison with single-shot, and cost, from a quality JSON."""
    lines = [("| row | pass rate [95% CI] | change vs single-shot, pts [95% CI] | McNemar p "
              "(Holm) | verdict | mean score | LLM calls / task | LLM-s / task "
              "| passes / LLM-min |"), "|---|---|---|---|---|---|---|---|---|"]
    for p in d.get("phases", []):
        vs = p.get("vs_single_shot") or {}
        change = (f"{100 * vs['pass_rate_diff']:+.1f}"
                  f"{interval([100 * x for x in vs['pass_rate_diff_ci95']], num)}"
                  if vs.get("pass_rate_diff_ci95") else "-")
        pval = (f"{num(vs['mcnemar_p'], 2)} ({num(vs.get('mcnemar_p_holm'), 2)})"
                if vs.get("mcnemar_p") is not None else "-")
        lines.append(f"| {p['name']} "
                     f"| {pct(p['pass_rate'])}{interval(p.get('pass_rate_ci95'), pct)} "
                     f"| {change} | {pval} | {vs.get('verdict', '-')} "
                     f"| {num(p.get('mean_score'))} | {num(p.get('llm_calls_per_task'))} "
                     f"| {num(p.get('llm_s_per_task'))} | {num(p.get('passes_per_llm_minute'))} |")
    notes = (dev_set_line(d), distill_line(d.get("distill")), grpo_line(d.get("grpo")),
             train_pass_line(d.get("train_pass")), skipped_line(d.get("skipped_rows")))
    lines += [""] + [f"- {note}" for note in notes if note]
    return "\n".join(lines)


def dev_set_line(d: dict[str, Any]) -> str:
    """Which tasks the quality table covers."""
    ds = d.get("dev_set", {})
    suites = ", ".join(f"{v} {k}" for k, v in ds.get("suites", {}).items())
    return (f"{ds.get('held_out', '?')} held-out tasks, the same for every row ({suites}; "
            f"{len(ds.get('families', {}))} families); {ds.get('train', '?')} train tasks; "
            f"mode `{d.get('mode', '?')}`, seed {ds.get('seed', '?')}, "
            f"{num(d.get('seconds'))} s in all.")


def grpo_line(g: dict[str, Any] | None) -> str:
    """What the GRPO round did within its budget."""
    if not g:
        return ""
    return (f"GRPO round: LoRA, {g.get('steps')} steps of {g.get('num_generations')} "
            f"generations x {g.get('prompts_per_step')} prompts in {num(g.get('train_loop_s'))} "
            f"s (budget {num(g.get('budget_s'))} s, the SFT round's).")


def skipped_line(skipped: dict[str, str] | None) -> str:
    """Rows the run could not make, and why."""
    return "; ".join(f"{k} skipped: {v}" for k, v in (skipped or {}).items())


def distill_line(dist: dict[str, Any] | None) -> str:
    """What the distill round trained on, or why it was skipped."""
    if not dist:
        return ""
    if dist.get("skipped"):
        return f"Distill round skipped: {dist['skipped']}"
    return (f"Distill round: {dist.get('method', '?').upper()}"
            f"{' LoRA' if dist.get('lora') else ''}, "
            f"{dist.get('steps')} steps on {dist.get('sft_rows')} SFT rows, loss "
            f"{num(dist.get('first_loss'))} -> {num(dist.get('last_loss'))}, "
            f"{num(dist.get('train_s'))} s.")


def train_pass_line(tp: dict[str, Any] | None) -> str:
    """What warming the archive cost (paid once, before the warm rows)."""
    if not tp:
        return ""
    return (f"Train pass (ArchiveRefine on {tp.get('tasks')} train tasks; warms the archive, "
            f"feeds the SFT round): {tp.get('passed')} passed, {tp.get('llm_calls')} LLM calls, "
            f"{num(tp.get('wall_s'))} s; archive size {tp.get('archive_size')}.")


def markdown(results: Path = RESULTS, base: Path = BENCH) -> str:
    """The whole generated block: when and where it was collected, the tables."""
    rows = load(results)
    now = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    head = (f"Collected {now} on {os.cpu_count()} CPUs, {platform.platform()}, from "
            f"{len(rows)} result file(s) in `{os.path.relpath(results, base)}/`.")
    parts = [head, "", bench_table(rows, base) if rows else "No results yet."]
    for name, _, q in rows:
        if name.startswith("quality"):
            variant = name.partition("_")[2]
            label = q.get("mode", name) + (f", {variant} rows" if variant not in ("", "full")
                                           else "")
            parts += ["", f"### Quality on held-out tasks ({label})", "",
                      quality_table(q)]
    return "\n".join(parts)


def update_readme(readme: Path, block: str) -> None:
    """Replace the marked block of ``readme`` (or append it), keeping everything else."""
    text = readme.read_text() if readme.exists() else "# Benchmarks\n"
    new = f"{START}\n{block}\n{END}"
    if START in text and END in text:
        before, rest = text.split(START, 1)
        text = before + new + rest.split(END, 1)[1]
    else:
        text = text.rstrip("\n") + "\n\n" + new + "\n"
    readme.write_text(text)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--print", action="store_true", help="print instead of writing")
    parser.add_argument("--results", type=Path, default=RESULTS, help="folder of JSON results")
    parser.add_argument("--readme", type=Path, default=README, help="markdown file to update")
    args = parser.parse_args()
    block = markdown(args.results, args.readme.parent)
    if args.print:
        print(block)
        return
    update_readme(args.readme, block)
    print(block)
    print(f"\nwrote the summary into {args.readme}")


if __name__ == "__main__":
    main()
