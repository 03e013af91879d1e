"""Benchmark training on CPU: SFT and DPO tokens/s, full fine-tuning vs LoRA; GRPO seconds per step.

Each configuration trains the embedded SmolLM2-135M for a few steps on the
same small dataset (built here, TRL conversational format) in its own
subprocess, with one torch thread (the project default on this shared
2-core machine). Throughput is input tokens per second of ``trainer.train()``
(DPO counts chosen and rejected sequences); numbers are reported as ratios
against full SFT measured in the same run. Nothing here asserts on time.

GRPO (``"grpo"`` key): LoRA GRPO on generated constrained tasks (each task's
checks as the reward), two prompts per step, at 2 and 4 generations per
prompt: seconds per optimizer step and the mean reward of every step
(``train_grpo.png``). Generation dominates a GRPO step on a CPU, so its
cost grows with the generations and the completion length.

    python bench/train.py            # writes bench/results/train.json and train.png
    python bench/train.py --quick    # 2 steps per configuration
    python bench/train.py --only grpo --grpo-steps 3   # GRPO only; other keys kept
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
from datetime import UTC, datetime
from pathlib import Path

RESULTS = Path(__file__).parent / "results" / "train.json"
PLOT = RESULTS.with_suffix(".png")
GRPO_PLOT = RESULTS.with_name("train_grpo.png")
GRPO_GENERATIONS = (2, 4)
GRPO_PROMPTS_PER_STEP = 2
GRPO_COMPLETION_TOKENS = 16
CONFIGS = [("sft", False), ("sft", True), ("dpo", False), ("dpo", True)]
ROWS = [
    ("Write a tagline for a bookstore in 6 words.", "Every shelf holds a new adventure.", "Books."),
    ("Explain why the sky is blue in one sentence.",
     "Air scatters blue sunlight more than red, so the sky looks blue.", "Because it is."),
    ("List three uses for a paperclip.",
     "Hold papers, reset a device, and mark a page.", "Paper."),
    ("Give advice to a new gardener in two sentences.",
     "Start with a few easy plants. Water them in the morning and watch the soil.",
     "Plant things."),
    ("Write a short thank-you note to a teacher.",
     "Thank you for your patience and for making every lesson count.", "Thanks."),
    ("Name three rainy-day activities.",
     "Reading, baking bread, and playing board games.", "Sleep."),
    ("Summarize a heist movie plot in one sentence.",
     "A crew plans one last job, and a betrayal turns the plan upside down.", "Robbery."),
    ("Describe a good cup of coffee in ten words.",
     "Fresh beans, hot water, patience: rich, balanced and gently sweet.", "Brown."),
]


def write_dataset(folder: Path) -> None:
    """Sixteen SFT rows and sixteen preference pairs (the rows twice)."""
    with (folder / "sft.jsonl").open("w") as sft, (folder / "pairs.jsonl").open("w") as pairs:
        for task, good, bad in ROWS * 2:
            user = [{"role": "user", "content": task}]
            sft.write(json.dumps({"messages": user + [{"role": "assistant", "content": good}]})
                      + "\n")
            pairs.write(json.dumps({"prompt": user,
                                    "chosen": [{"role": "assistant", "content": good}],
                                    "rejected": [{"role": "assistant", "content": bad}]}) + "\n")
    (folder / "manifest.json").write_text(json.dumps({"bench": "train"}))


def worker(method: str, lora: bool, steps: int, data: str) -> dict:
    from agentic_loop.distill.train import train

    with tempfile.TemporaryDirectory() as out:
        result = train(data, Path(out) / "model", method=method, lora=lora, max_steps=steps,
                       batch_size=4, max_length=128, progress=False)
    stage = result.stages[0]
    return {"method": method, "lora": lora, "steps": stage.steps, "tokens": stage.tokens,
            "train_s": round(stage.runtime_s, 2),
            "tokens_per_s": round(stage.tokens_per_s or 0.0, 2),
            "s_per_step": round(stage.runtime_s / stage.steps, 2),
            "first_loss": stage.metrics.get("first_loss"),
            "last_loss": stage.metrics.get("last_loss")}


def write_tasks(path: Path, n: int = 8) -> None:
    """``n`` constrained tasks (word counts, casing, bullets, ...) as a task file."""
    from agentic_loop.tasks.sets import constrained_tasks

    path.write_text("".join(spec.model_dump_json(by_alias=True) + "\n"
                            for spec in constrained_tasks(n, seed=0)))


def step_clock() -> tuple[object, list[tuple[float, float]]]:
    """A trainer callback that records each step's wall and CPU seconds (all threads)."""
    import time

    from transformers import TrainerCallback

    steps: list[tuple[float, float]] = []

    class StepClock(TrainerCallback):
        def on_step_begin(self, args, state, control, **kwargs):
            self.begun = (time.perf_counter(), time.process_time())

        def on_step_end(self, args, state, control, **kwargs):
            wall, cpu = self.begun
            steps.append((time.perf_counter() - wall, time.process_time() - cpu))

    return StepClock(), steps


def grpo_worker(generations: int, steps: int, tasks: str) -> dict:
    from agentic_loop.distill.train import train

    clock, timed = step_clock()
    with tempfile.TemporaryDirectory() as out:
        result = train(tasks, Path(out) / "model", method="grpo", lora=True, max_steps=steps,
                       num_generations=generations,
                       batch_size=generations * GRPO_PROMPTS_PER_STEP,
                       max_completion_length=GRPO_COMPLETION_TOKENS, progress=False,
                       callbacks=[clock])
    stage, reward = result.stages[0], result.card.reward or {}
    return {"step_wall_s": [round(w, 2) for w, _ in timed],
            "step_cpu_s": [round(c, 2) for _, c in timed],
            "cpu_s_per_step": round(sum(c for _, c in timed) / max(1, len(timed)), 2),
            "wall_s_per_step_after_first": round(
                sum(w for w, _ in timed[1:]) / max(1, len(timed) - 1), 2),
            "num_generations": generations, "prompts_per_step": GRPO_PROMPTS_PER_STEP,
            "steps": stage.steps, "train_s": round(stage.runtime_s, 2),
            "s_per_step": round(stage.runtime_s / stage.steps, 2),
            "s_per_completion": round(stage.runtime_s / stage.steps
                                      / (generations * GRPO_PROMPTS_PER_STEP), 2),
            "tokens": stage.tokens,
            "reward_per_step": [row["reward"] for row in reward.get("per_step", [])],
            "mean_completion_tokens_last_step": stage.metrics.get("completions/mean_length"),
            "reward_errors": sum(f["errors"] for f in reward.get("errors", {}).values()),
            "reward_functions": [f["name"] for f in reward.get("functions", [])]}


def run_grpo(steps: int) -> dict:
    """GRPO at each generation count, one subprocess each (like the SFT/DPO rows)."""
    rows = []
    with tempfile.TemporaryDirectory() as folder:
        tasks = Path(folder) / "tasks.jsonl"
        write_tasks(tasks)
        for generations in GRPO_GENERATIONS:
            print(f"grpo lora, {generations} generations: {steps} steps...", flush=True)
            out = subprocess.run([sys.executable, __file__, "--grpo-worker", str(generations),
                                  str(steps), str(tasks)],
                                 capture_output=True, text=True, check=True)
            rows.append(json.loads(out.stdout.strip().splitlines()[-1]))
            print(f"  {rows[-1]['s_per_step']} s/step, rewards {rows[-1]['reward_per_step']}",
                  flush=True)
    from agentic_loop.plots import plot_reward_curve

    plot_reward_curve({f"{r['num_generations']} generations per prompt":
                       list(enumerate(r["reward_per_step"], 1)) for r in rows}, GRPO_PLOT,
                      title="GRPO on CPU: mean reward per step (SmolLM2-135M, LoRA)")
    by = {r["num_generations"]: r for r in rows}
    return {
        "when": datetime.now(UTC).isoformat(timespec="seconds"),
        "load_avg_1m_at_end": round(os.getloadavg()[0], 2),
        "setup": {"model": "embedded SmolLM2-135M-Instruct", "lora": True, "steps": steps,
                  "prompts_per_step": GRPO_PROMPTS_PER_STEP,
                  "max_completion_length": GRPO_COMPLETION_TOKENS, "tasks": 8,
                  "learning_rate": "default (1e-5 with LoRA)", "beta": 0.04,
                  "reward": "each task's constraint rubric, score / 10"},
        "results": rows,
        "s_per_step_4_vs_2_generations": round(by[4]["s_per_step"] / by[2]["s_per_step"], 3),
        "wall_s_per_step_after_first_4_vs_2": round(by[4]["wall_s_per_step_after_first"]
                                                    / by[2]["wall_s_per_step_after_first"], 3),
        "cpu_s_per_step_4_vs_2_generations": round(
            by[4]["cpu_s_per_step"] / by[2]["cpu_s_per_step"], 3),
        "plot": GRPO_PLOT.name,
        "note": "s_per_step is trainer.train() wall time / steps (generation + reward + "
                "update); the first step carries warm-up, so wall_s_per_step_after_first leaves it "
                "out; cpu_s_per_step is the process's CPU time per step (all threads), the "
                "steadier number on a shared machine. A few steps: the reward curve shows the "
                "signal GRPO sees, not a trend.",
    }


def plot(rows: list[dict]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    labels = [f"{r['method'].upper()} {'LoRA' if r['lora'] else 'full'}" for r in rows]
    fig, ax = plt.subplots(figsize=(6, 3.5))
    bars = ax.bar(labels, [r["tokens_per_s"] for r in rows],
                  color=["#1f77b4", "#aec7e8", "#d62728", "#ff9896"])
    ax.bar_label(bars, labels=[f"{r['ratio_vs_sft_full']:.2f}x" for r in rows])
    ax.set_ylim(0, max(r["tokens_per_s"] for r in rows) * 1.15)
    ax.set_ylabel("input tokens / s")
    ax.set_title("Training throughput on CPU (SmolLM2-135M, batch 4, 1 thread)", fontsize=10)
    fig.tight_layout()
    fig.savefig(PLOT, dpi=110)
    plt.close(fig)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="2 steps per configuration")
    parser.add_argument("--only", choices=("sft-dpo", "grpo"),
                        help="run one part; the other's keys in train.json are kept")
    parser.add_argument("--grpo-steps", type=int, help="GRPO steps (default 2 quick, 6 full)")
    parser.add_argument("--worker", nargs=4, metavar=("METHOD", "LORA", "STEPS", "DATA"),
                        help=argparse.SUPPRESS)
    parser.add_argument("--grpo-worker", nargs=3, metavar=("GENERATIONS", "STEPS", "TASKS"),
                        help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        method, lora, steps, data = args.worker
        print(json.dumps(worker(method, lora == "1", int(steps), data)))
        return
    if args.grpo_worker:
        generations, steps, tasks = args.grpo_worker
        print(json.dumps(grpo_worker(int(generations), int(steps), tasks)))
        return
    steps = 2 if args.quick else 6
    previous = json.loads(RESULTS.read_text()) if RESULTS.is_file() else {}
    grpo = (run_grpo(args.grpo_steps or steps) if args.only != "sft-dpo"
            else previous.get("grpo"))
    if args.only == "grpo":
        RESULTS.write_text(json.dumps({**previous, "grpo": grpo}, indent=2) + "\n")
        print(json.dumps({k: v for k, v in grpo.items() if k != "results"}, indent=2))
        print(f"wrote {RESULTS} (grpo) and {GRPO_PLOT}")
        return
    rows = []
    with tempfile.TemporaryDirectory() as data:
        write_dataset(Path(data))
        for method, lora in CONFIGS:
            print(f"{method} {'lora' if lora else 'full'}: {steps} steps...", flush=True)
            out = subprocess.run([sys.executable, __file__, "--worker", method,
                                  "1" if lora else "0", str(steps), data],
                                 capture_output=True, text=True, check=True)
            rows.append(json.loads(out.stdout.strip().splitlines()[-1]))
            print(f"  {rows[-1]['tokens_per_s']} tokens/s, {rows[-1]['s_per_step']} s/step",
                  flush=True)
    from agentic_loop.models.local import default_num_threads

    baseline = rows[0]["tokens_per_s"]
    for row in rows:
        row["ratio_vs_sft_full"] = round(row["tokens_per_s"] / baseline, 3) if baseline else None
    by = {(r["method"], r["lora"]): r["tokens_per_s"] for r in rows}
    report = {
        "bench": "train",
        "when": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform(),
                    "load_avg_1m_at_end": round(os.getloadavg()[0], 2)},
        "setup": {"model": "embedded SmolLM2-135M-Instruct", "batch_size": 4, "max_length": 128,
                  "steps": steps, "dtype": "fp32", "torch_threads": default_num_threads(),
                  "rows": len(ROWS) * 2},
        "results": rows,
        "ratios": {
            "sft_lora_vs_full": round(by[("sft", True)] / by[("sft", False)], 3),
            "dpo_lora_vs_full": round(by[("dpo", True)] / by[("dpo", False)], 3),
            "dpo_full_vs_sft_full": round(by[("dpo", False)] / by[("sft", False)], 3),
        },
        "note": "tokens/s of trainer.train(); DPO counts chosen + rejected tokens. "
                "A shared machine: compare ratios within one run, "
                "not absolute numbers across runs.",
        "grpo": grpo,
    }
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(report, indent=2) + "\n")
    plot(rows)
    print(json.dumps(report["ratios"], indent=2))
    print(f"wrote {RESULTS} and {PLOT}")


if __name__ == "__main__":
    main()
