"""What the quality bench reads off the model layer: engine busy time, engine dtype, the machine.

Why its own module: a row's cost (LLM-seconds) and its dtype must come from
the decoding engine itself, not from what the bench asked for; these small
readers keep that out of the run's flow (``quality.py``).

Example:
    >>> clock = EngineClock()
    >>> clock.watch("a remote model: no engine") and clock.seconds
    0
    >>> engine_dtype(object()) is None, checked_dtype(object(), None) is None
    (True, True)
"""

from __future__ import annotations

import inspect
import os
import platform
from typing import Any

from agentic_loop.errors import ConfigError


class EngineClock:
    """Seconds the local models' decoding engines spend busy (a row's LLM-seconds).

    Reads each engine's ``busy_s``, which counts every prefill and step before
    handing out that step's answers, so a row is metered right even when the
    engine stays busy across its end. A model without an engine (a remote one)
    adds nothing; its rows report wall seconds.
    """

    def __init__(self) -> None:
        self.engines: dict[int, Any] = {}

    def watch(self, llm: Any) -> Any:
        engine = getattr(llm, "engine", None)
        if engine is not None:
            self.engines[id(engine)] = engine
        return llm

    @property
    def seconds(self) -> float:
        return sum(engine.busy_s for engine in self.engines.values())


def engine_dtype(llm: Any) -> str | None:
    """The dtype the model's engine really runs in (its first parameter's); None without one."""
    engine = getattr(llm, "engine", None)
    model = getattr(engine, "model", None)
    if model is None:
        return None
    return str(next(model.parameters()).dtype).removeprefix("torch.")


def checked_dtype(llm: Any, wanted: str | None) -> str | None:
    """The engine's dtype, refusing a run where it is not the one asked for."""
    actual = engine_dtype(llm)
    if wanted is not None and actual != wanted:
        raise ConfigError(f"asked the embedded engine for {wanted} but its weights are in "
                          f"{actual}; check that load_chat_model's dtype keyword reaches "
                          "the engine (agentic_loop.models.local.loaded_engine)")
    return actual


def has_best_of() -> bool:
    """Whether the architectures take ``samples_per_round`` (best-of-n inside a round)."""
    from agentic_loop.architectures import Architecture

    return "samples_per_round" in inspect.signature(Architecture.__init__).parameters


def machine() -> dict[str, Any]:
    """Where the numbers were taken; the load says how quiet the machine was."""
    from agentic_loop.models.cpu_caps import native_bf16
    from agentic_loop.models.local import default_num_threads

    return {"cpus": os.cpu_count(), "platform": platform.platform(),
            "python": platform.python_version(), "load_avg_1m": round(os.getloadavg()[0], 2),
            "torch_threads": default_num_threads(), "native_bf16": native_bf16()}
