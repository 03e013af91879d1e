"""``bench/tools_flywheel.py``'s setup: its options, its tasks, the round's settings, readiness.

Why its own module: what the bench runs with (the task sets, the one round
of ``improve`` each method gets, the training options the control shares)
is decided here, apart from running it, and so is the check that refuses a
checkout whose parts of issue 33 have not landed (each missing part named),
before any model loads.

Example (the pool, the golden set and the measured tasks share no task):
    >>> pool, golden, held = task_sets(Options.smoke())
    >>> len(pool), len(golden), len(held)
    (2, 2, 4)
    >>> texts = [{t.task for t in s} for s in (pool, golden, held)]
    >>> any(a & b for i, a in enumerate(texts) for b in texts[i + 1:])
    False
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, fields
from typing import Any


@dataclass(frozen=True)
class Options:
    """The bench's size and settings; :meth:`smoke` is a tiny run that only checks the wiring."""

    train_tasks: int = 40
    held_out: int = 200
    golden: int = 40
    rounds: int = 3
    methods: tuple[str, ...] = ("sft", "sft+dpo", "grpo")
    samples: int = 4
    steps: int = 8
    threshold: float = 8.0
    batch_size: int = 4
    max_length: int = 1024  # a tool episode row: tool descriptions + every turn (>256 tokens)
    num_generations: int = 4
    max_completion_length: int = 96
    max_tokens: int = 96
    max_steps: int = 4
    concurrency: int = 32
    chain: str = "kept"
    free: bool = True
    seed: int = 0

    @classmethod
    def smoke(cls) -> Options:
        return cls(train_tasks=2, held_out=4, golden=2, rounds=1, samples=1, steps=1,
                   batch_size=2, max_length=1024, num_generations=2, max_completion_length=32,
                   max_tokens=48, max_steps=2, concurrency=4)

    def method(self, round_number: int) -> str:
        """Round ``round_number``'s method (1-based; the list repeats past its end).

        >>> [Options(methods=("sft", "grpo")).method(k) for k in (1, 2, 3)]
        ['sft', 'grpo', 'sft']
        """
        return self.methods[(round_number - 1) % len(self.methods)]


def missing_parts(methods: Sequence[str]) -> list[str]:
    """What this checkout lacks for a tool flywheel with ``methods`` (empty: ready).

    Each entry names the part of issue 33 and what was looked for, so a run
    refused here says what to land first.
    """
    import importlib.util
    import typing

    from agentic_loop.distill.data.datasets import Message
    from agentic_loop.distill.train.settings import METHODS

    found: list[str] = []
    unknown = [m for m in methods if m not in METHODS]
    if unknown:
        found.append(f"unknown method(s) {', '.join(unknown)}: pass --methods from "
                     f"{', '.join(METHODS)}")
    if "tool" not in typing.get_args(Message.model_fields["role"].annotation):
        found.append("part 1: the export writes no tool messages (agentic_loop.distill.data."
                     "datasets.Message has no role 'tool')")
    trains_rows = any(m != "grpo" for m in methods)
    if trains_rows and importlib.util.find_spec("agentic_loop.distill.train.tool_format") is None:
        found.append("part 2: training does not read tool-calling rows "
                     "(agentic_loop.distill.train.tool_format is missing)")
    if "grpo" in methods and importlib.util.find_spec(
            "agentic_loop.distill.train.tool_rollout") is None:
        found.append("part 3: GRPO has no tool rollouts "
                     "(agentic_loop.distill.train.tool_rollout is missing)")
    why = improve_runs_agents()
    if why is not None:
        found.append(f"part 4: {why}")
    return found


def improve_runs_agents() -> str | None:
    """Why ``improve`` does not run agents on tool tasks in this checkout (None: it does)."""
    import importlib.util

    from agentic_loop.distill.loop.improve import ImproveSettings
    from agentic_loop.distill.loop.records import ImproveRound

    if importlib.util.find_spec("agentic_loop.distill.loop.tool_use") is None:
        return ("improve's rounds do not run the agent on tool tasks "
                "(agentic_loop.distill.loop.tool_use is missing)")
    if "first_tool_call" not in {f.name for f in fields(ImproveSettings)}:
        return "ImproveSettings has no first_tool_call (the grown episodes' first call forced)"
    if "agent" not in ImproveRound.model_fields:
        return "the round report has no tool-use figures (ImproveRound.agent is missing)"
    return None


def task_sets(o: Options) -> tuple[list[Any], list[Any], list[Any]]:
    """``(pool, golden, held)``: train tool tasks to grow on, held-out ones for the gate, and
    the held-out tasks every row is measured on (none of them in the golden set)."""
    from agentic_loop.tasks.tool_tasks import tool_tasks

    held = tool_tasks(o.held_out, split="held_out", seed=o.seed)
    measured = {t.task for t in held}
    golden = [t for t in tool_tasks(o.golden + o.held_out, split="held_out", seed=o.seed + 1)
              if t.task not in measured][:o.golden]
    pool = tool_tasks(o.train_tasks, split="train", seed=o.seed)
    return pool, golden, held


def train_options(o: Options) -> dict[str, Any]:
    """What every training run gets (the rounds' and the control's): LoRA, merged."""
    return {"lora": True, "max_steps": o.steps, "batch_size": o.batch_size,
            "max_length": o.max_length, "num_generations": o.num_generations,
            "max_completion_length": o.max_completion_length,
            "tool_max_turns": o.max_steps,  # GRPO's episodes: the measured agent's step limit
            "progress": False}


def improve_settings(o: Options, method: str, base: str) -> Any:
    """One round of ``improve`` with ``method``, starting from ``base`` (when the registry has
    no current version)."""
    from agentic_loop.distill.loop.improve import ImproveSettings
    from agentic_loop.memory import HashingEmbedder

    embedder = HashingEmbedder()
    # the grown episodes' first call forced, as the measured rows' are (the gate forces none)
    return ImproveSettings(
        rounds=1, samples=o.samples, method=method, thresholds=(o.threshold,), base=base,
        max_tokens=o.max_tokens, max_steps=o.max_steps, first_tool_call=True, patience=2,
        max_concurrency=min(o.concurrency, 16), train_options=train_options(o),
        export_options={"pii": "regex", "embedder": embedder},
        # the gate decides on the golden set's size, and rolls back only on a halving of the
        # mean score, as bench/flywheel.py's rounds do
        eval_options={"min_tasks": max(1, o.golden), "rollback_ratio": 0.5,
                      "embedder": embedder, "max_concurrency": min(o.concurrency, 16)})


