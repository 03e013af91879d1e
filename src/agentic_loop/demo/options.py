"""The demo's knobs, apart from the code that runs it, so every part of the demo can read them.

Why these defaults: the quality bench's full run (bench/README.md, "Quality on
held-out tasks (full)") found one SFT round of 60 LoRA steps on 57
rejection-sampled rows worth +16.8 points of single-shot pass rate on held-out
tasks, and single-shot costs about 0.4 engine-seconds per task on 2 CPU cores
(200 held-out tasks: about 80 s per model). So the demo samples best-of-4 at
temperature on 120 train tasks (70-80 rows pass every check), trains one round
of 60 LoRA steps (the bench's budget, in the 15 minutes a round costs on 2
cores; two rounds of 30 steps moved nothing: round 2 restarts from the model
the gate kept), and gates the candidate on 200 held-out tasks with the
library's default gate (20 tasks at least). ``--rounds 2`` shows the loop go on.

Example:
    >>> o = DemoOptions()
    >>> o.held_out_tasks, o.rounds, o.train_steps, o.samples
    (200, 1, 60, 4)
    >>> DemoOptions(held_out_tasks=12, rounds=1).thresholds
    (7.0, 8.0)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

__all__ = ["DemoOptions"]


@dataclass
class DemoOptions:
    """Knobs of the demo; the defaults aim at about 15 minutes on 2 CPU cores.

    ``held_out_tasks`` / ``train_tasks`` size the dev set
    (:func:`~agentic_loop.tasks.dev_set.dev_set`: every task family, held-out
    phrasings where a family has them); ``samples`` per train task per round
    at ``temperatures`` (a task none of whose samples passes gets one hinted
    retry); ``train_steps`` LoRA steps per round; ``thresholds`` the score
    (0-10) each round's training data must reach (and every check must pass);
    ``gate_options`` overrides the release gate's rules (empty: the library's
    defaults, as a user's ``improve`` gets them).
    """

    held_out_tasks: int = 200
    train_tasks: int = 120
    seed: int = 0
    model: str = "local"
    max_tokens: int = 48
    concurrency: int = 16
    pii: Literal["spacy", "regex", "off"] = "regex"
    train_steps: int = 60
    lora: bool = True
    rounds: int = 1
    samples: int = 4
    temperatures: tuple[float, ...] = (0.7, 1.0)
    thresholds: tuple[float, ...] = (7.0, 8.0)
    gate_options: tuple[tuple[str, Any], ...] = ()
