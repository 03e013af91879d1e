"""Where the embedded engine's decoding time goes: a per-stage clock around its step functions.

Why not ``torch.profiler``: the engine has no ``record_function`` ranges yet, and at batch 1
a decode step is about a thousand small torch ops, so the profiler's per-op cost would
inflate exactly the overheads we want to see. Instead :class:`StageClock` wraps the
engine's own functions (the decode loop, the forward pass, ``F.linear``, the attention
function, KV cache writes, row select/merge, grammar masks, sampling, per-row token
bookkeeping) with ``perf_counter`` and charges each its *exclusive* wall time (its own
minus the wrapped calls inside it), so the parts add up to the decode loop's time and what
is left of the loop itself is its Python overhead. Everything inside a prefill (or inside
remembering a finished row's prefix) is charged to that stage, not to the layers it runs.

    >>> class Toy:
    ...     def outer(self):
    ...         time.sleep(0.01); self.inner()
    ...     def inner(self):
    ...         time.sleep(0.05)
    >>> clock = StageClock([(Toy, "outer", "outer"), (Toy, "inner", "inner")])
    >>> with clock:
    ...     Toy().outer()
    >>> clock.seconds["inner"] >= 0.05, 0.01 <= clock.seconds["outer"] < 0.05  # exclusive
    (True, True)
    >>> Toy.outer.__name__  # restored on exit
    'outer'
"""

from __future__ import annotations

import functools
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from typing import Any

__all__ = ["DECODE_STAGES", "StageClock", "engine_stages", "shares"]

#: Stage labels in table order; ``prefill`` and ``prefix memory`` are outside decode time.
DECODE_STAGES = (
    "forward: linear layers",
    "forward: attention",
    "forward: other ops",
    "KV cache writes",
    "rows leaving (KV select)",
    "rows joining (KV merge)",
    "grammar masks",
    "sampling",
    "token bookkeeping",
    "loop overhead (Python)",
)
#: Labels whose nested wrapped calls are charged to them (not to the layers they run).
ABSORBING = frozenset({"prefill", "prefix memory"})


class StageClock:
    """Exclusive wall seconds and calls per label, for functions patched on their owners.

    ``targets``: ``(owner, attribute, label)``; an owner lacking the attribute is skipped
    and listed in ``missing`` (the engine's code moved: the table says so, nothing fails).
    ``on_call`` (optional) sees each call's label and arguments (to count rows per step).
    """

    def __init__(self, targets: Sequence[tuple[Any, str, str]],
                 on_call: Callable[[str, tuple[Any, ...]], None] | None = None) -> None:
        self.targets = list(targets)
        self.on_call = on_call
        self.seconds: dict[str, float] = defaultdict(float)
        self.calls: dict[str, int] = defaultdict(int)
        self.missing: list[str] = []
        self._saved: list[tuple[Any, str, Any]] = []
        self._local = threading.local()

    def _frames(self) -> list[float]:
        if not hasattr(self._local, "frames"):
            self._local.frames, self._local.absorbed = [], 0
        frames: list[float] = self._local.frames
        return frames

    def _wrap(self, fn: Callable[..., Any], label: str) -> Callable[..., Any]:
        @functools.wraps(fn)
        def timed(*args: Any, **kwargs: Any) -> Any:
            frames = self._frames()
            if self._local.absorbed:
                return fn(*args, **kwargs)
            if self.on_call is not None:
                self.on_call(label, args)
            absorbing = label in ABSORBING
            self._local.absorbed += absorbing
            frames.append(0.0)
            started = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                spent = time.perf_counter() - started
                inner = frames.pop()
                self._local.absorbed -= absorbing
                self.seconds[label] += spent - inner
                self.calls[label] += 1
                if frames:
                    frames[-1] += spent
        return timed

    def __enter__(self) -> StageClock:
        for owner, name, label in self.targets:
            fn = owner.__dict__.get(name) if isinstance(owner, type) else getattr(owner, name,
                                                                                  None)
            if fn is None:
                self.missing.append(f"{getattr(owner, '__name__', owner)}.{name}")
                continue
            self._saved.append((owner, name, fn))
            setattr(owner, name, self._wrap(fn, label))
        return self

    def __exit__(self, *exc: object) -> None:
        for owner, name, fn in reversed(self._saved):
            setattr(owner, name, fn)
        self._saved.clear()


def engine_stages(attention_name: str | None) -> list[tuple[Any, str, str]]:
    """The engine's functions to clock, with their labels (see ``DECODE_STAGES``)."""
    import torch

    from agentic_loop.models.engine import (
        decode_batch,
        engine,
        fused_projections,
        packed_linear,
        requests,
    )

    targets: list[tuple[Any, str, str]] = [
        (engine.GenerationEngine, "_decode", "loop overhead (Python)"),
        (engine.GenerationEngine, "_prefill", "prefill"),
        (engine.GenerationEngine, "_remember", "prefix memory"),
        (decode_batch.DecodeBatch, "step", "forward: other ops"),
        # nn.Linear.forward calls it, and so does a layer whose forward was replaced
        # (the engine's bf16 batch invariance runs a lone row as two)
        (torch.nn.functional, "linear", "forward: linear layers"),
        (packed_linear.PackedLinear, "product", "forward: linear layers"),  # packed weights
        (packed_linear, "packed_product", "forward: linear layers"),  # the kernel call, alone
        (fused_projections, "packed_product", "forward: linear layers"),  # or q/k/v, gate/up
        (decode_batch.SpareRoomLayer, "update", "KV cache writes"),
        (decode_batch.DecodeBatch, "select", "rows leaving (KV select)"),
        (decode_batch.DecodeBatch, "merge", "rows joining (KV merge)"),
        (engine, "mask_grammar_rows", "grammar masks"),
        (engine, "sample_tokens", "sampling"),
        (requests.Row, "push", "token bookkeeping"),
    ]
    if attention_name:
        targets.append((_AttentionSlot(attention_name), "function", "forward: attention"))
    return targets


class _AttentionSlot:
    """transformers' registered attention function ``name``, as an attribute to patch."""

    def __init__(self, name: str) -> None:
        self.__name__ = f"attention[{name}]"
        self.name = name

    @property
    def function(self) -> Any:
        from transformers import AttentionInterface

        return AttentionInterface._global_mapping.get(self.name)

    @function.setter
    def function(self, fn: Any) -> None:
        from transformers import AttentionInterface

        AttentionInterface._global_mapping[self.name] = fn


def shares(seconds: dict[str, float]) -> dict[str, Any]:
    """Decode seconds (every stage but prefill and prefix memory) and each stage's share.

    >>> shares({"sampling": 1.0, "forward: linear layers": 3.0, "prefill": 9.0})["share"]
    {'forward: linear layers': 0.75, 'sampling': 0.25}
    """
    decode = sum(seconds.get(s, 0.0) for s in DECODE_STAGES)
    share = {s: round(seconds[s] / decode, 3) for s in DECODE_STAGES
             if seconds.get(s) and decode > 0}
    return {"decode_s": round(decode, 3), "prefill_s": round(seconds.get("prefill", 0.0), 3),
            "prefix_memory_s": round(seconds.get("prefix memory", 0.0), 3), "share": share}


def profile_engine(engine: Any, prompts: Sequence[list[int]], batch: int, params: Any,
                   grammar: Any = None) -> dict[str, Any]:
    """Decode ``prompts`` on ``engine`` ``batch`` at a time (each group submitted at once,
    so it decodes as one batch) under a :class:`StageClock`. Returns the stage shares, the
    rows per decode step, and ``row_tokens``: ``(prompt, completion)`` tokens per request."""
    from agentic_loop.models.engine.requests import GenerationRequest

    rows_per_step: list[int] = []

    def count(label: str, args: tuple[Any, ...]) -> None:
        if label == "forward: other ops":  # DecodeBatch.step(self, model, tokens)
            rows_per_step.append(int(args[2].shape[0]))

    attention = getattr(getattr(engine.model, "config", None), "_attn_implementation", None)
    clock = StageClock(engine_stages(attention), count)
    outputs = []
    with clock:
        started = time.perf_counter()
        for lo in range(0, len(prompts), batch):
            futures = [engine.submit(GenerationRequest(list(p), params, grammar))
                       for p in prompts[lo : lo + batch]]
            outputs += [f.result() for f in futures]
        wall = time.perf_counter() - started
    return {"batch": batch, "requests": len(outputs), "decode_steps": len(rows_per_step),
            "mean_rows_per_step": round(sum(rows_per_step) / max(len(rows_per_step), 1), 2),
            "completion_tokens": sum(o.completion_tokens for o in outputs),
            "wall_s": round(wall, 3), **shares(clock.seconds),
            "calls": dict(clock.calls), "not_clocked": clock.missing,
            "row_tokens": [(o.prompt_tokens, o.completion_tokens) for o in outputs]}
