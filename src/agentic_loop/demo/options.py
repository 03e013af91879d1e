"""The demo's knobs, apart from the code that runs it, so every part of the demo can read them.

Example:
    >>> DemoOptions(n_tasks=12, rounds=1).thresholds
    (7.0, 8.0)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

__all__ = ["DemoOptions"]


@dataclass
class DemoOptions:
    """Knobs of the demo; the defaults aim at about 15-20 minutes on 2 CPU cores.

    ``train_steps`` is per improve round; ``samples`` per train task per round (a
    task none of whose samples passes gets one hinted retry, so one sample means up
    to two tries);
    ``thresholds`` the score (0-10) each round's training data must reach;
    ``rollback_ratio`` the gate's rollback rule (see
    :func:`~agentic_loop.distill.eval.gate.gate`), loose for a small held-out set.
    """

    n_tasks: int = 30
    held_out: float = 0.3
    seed: int = 7
    model: str = "local"
    max_tokens: int = 48
    max_iterations: int = 2
    target_score: float = 8.0
    concurrency: int = 8
    pii: Literal["spacy", "regex", "off"] = "regex"
    train_steps: int = 8
    lora: bool = True
    rounds: int = 2
    samples: int = 1
    thresholds: tuple[float, ...] = (7.0, 8.0)
    rollback_ratio: float = 0.5
