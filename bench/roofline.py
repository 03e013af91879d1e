"""The embedded model's arithmetic against this machine's matmul peak (the roofline of
``bench/models.py``).

Why: tokens/s alone cannot say whether the engine is slow or the CPU is. Here the CPU's
matrix-multiply speed at the model's own shapes is measured in the same process and
threads as the engine, and the engine's decoding is expressed in the same unit (FLOP/s),
so "how far from the hardware" is one number per batch size and dtype.

FLOP formulas (a multiply-add counts 2; decoding feeds one token per row per step):

- matmul, per token: ``2 * P``, with ``P`` the weights every token multiplies through:
  ``layers * (h*q + 2*h*kv + q*h + 3*h*i) + h*vocab`` (``h`` hidden, ``q`` = heads x head_dim,
  ``kv`` = KV heads x head_dim, ``i`` intermediate: q/k/v/o projections, gate/up/down, then
  the LM head; the input embedding is a lookup, no FLOP).
- attention, per token at context ``c`` (positions attended, the new one included):
  ``4 * layers * q * c`` (scores over ``c`` keys, then the weighted sum of ``c`` values;
  grouped-query attention shares K/V heads, not this arithmetic). Padding is not counted.
- a row with ``p`` prompt tokens that generated ``n`` feeds ``n - 1`` tokens in decode (the
  first comes from the prefill's logits, the last is never fed), at ``c = p+1 ... p+n-1``.

The peak: the engine's own linear kernel (weights packed once for oneDNN where torch can,
:mod:`agentic_loop.models.engine.packed_linear`; ``torch.nn.functional.linear`` otherwise) per
weight shape and batch (hot cache: one weight matrix, best of a few reps after warm-up), and
``step``: every linear layer of one decode step in order, each with its own weights (as the
model streams them from memory), whose GFLOP/s is the peak the fractions are taken of.

    >>> s = ModelShape(hidden=576, intermediate=1536, vocab=49152, layers=30, heads=9,
    ...                kv_heads=3, head_dim=64)
    >>> s.matmul_params()
    134479872
    >>> round(s.flops_per_token(context=100) / 1e6, 1)
    275.9
    >>> sorted({(n_in, n_out) for _, n_in, n_out, _ in s.linears()})
    [(576, 192), (576, 576), (576, 1536), (576, 49152), (1536, 576)]
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

__all__ = ["BATCHES", "ModelShape", "achieved", "decode_flops", "linear_gflops",
           "measure_peaks", "plot", "step_gflops"]

#: The decode batch sizes the roofline is drawn at.
BATCHES = (1, 8, 32)


@dataclass(frozen=True)
class ModelShape:
    """The sizes of a Llama-style decoder that fix its arithmetic per token."""

    hidden: int
    intermediate: int
    vocab: int
    layers: int
    heads: int
    kv_heads: int
    head_dim: int

    @classmethod
    def from_config(cls, config: Any) -> ModelShape:
        """From a transformers config (``LlamaConfig`` and alike)."""
        heads = int(config.num_attention_heads)
        head_dim = getattr(config, "head_dim", None) or config.hidden_size // heads
        return cls(hidden=int(config.hidden_size), intermediate=int(config.intermediate_size),
                   vocab=int(config.vocab_size), layers=int(config.num_hidden_layers),
                   heads=heads, kv_heads=int(getattr(config, "num_key_value_heads", heads)),
                   head_dim=int(head_dim))

    def linears(self) -> list[tuple[str, int, int, int]]:
        """``(name, in, out, count)`` of every matmul a token goes through, in model order."""
        h, q, kv, i = self.hidden, self.heads * self.head_dim, self.kv_heads * self.head_dim, \
            self.intermediate
        per_layer = [("q_proj", h, q), ("k_proj", h, kv), ("v_proj", h, kv), ("o_proj", q, h),
                     ("gate_proj", h, i), ("up_proj", h, i), ("down_proj", i, h)]
        return [(n, a, b, self.layers) for n, a, b in per_layer] + \
            [("lm_head", h, self.vocab, 1)]

    def matmul_params(self) -> int:
        """``P``: the weights one token multiplies through (tied embeddings count once)."""
        return sum(n_in * n_out * count for _, n_in, n_out, count in self.linears())

    def flops_per_token(self, context: int) -> float:
        """Decode FLOP of one token attending to ``context`` positions (itself included)."""
        return 2.0 * self.matmul_params() + 4.0 * self.layers * self.heads * self.head_dim \
            * context


def decode_flops(shape: ModelShape, rows: Sequence[tuple[int, int]]) -> tuple[float, int]:
    """Model FLOP of decoding ``rows`` of ``(prompt_tokens, completion_tokens)``, and the
    tokens fed (prefill excluded; see the module docstring).

    >>> s = ModelShape(hidden=4, intermediate=8, vocab=10, layers=1, heads=2, kv_heads=1,
    ...                head_dim=2)
    >>> s.matmul_params(), s.flops_per_token(3)
    (184, 416.0)
    >>> decode_flops(s, [(2, 3)])  # fed at contexts 3 and 4
    (848.0, 2)
    >>> decode_flops(s, [(5, 1)])  # one token: all from the prefill
    (0.0, 0)
    """
    flops, fed = 0.0, 0
    for prompt, completion in rows:
        n = max(completion - 1, 0)
        contexts = n * prompt + n * (n + 1) // 2  # sum of p+1 ... p+n
        flops += 2.0 * shape.matmul_params() * n + 4.0 * shape.layers * shape.heads \
            * shape.head_dim * contexts
        fed += n
    return flops, fed


def _best_seconds(fn: Callable[[], object], reps: int, min_s: float = 0.01) -> float:
    """Best mean seconds of ``fn`` over ``reps`` timings of at least ``min_s`` each."""
    fn()  # warm-up (allocations, kernel choice)
    t0 = time.perf_counter()
    fn()
    inner = max(1, math.ceil(min_s / max(time.perf_counter() - t0, 1e-9)))
    best = math.inf
    for _ in range(reps):
        t0 = time.perf_counter()
        for _ in range(inner):
            fn()
        best = min(best, (time.perf_counter() - t0) / inner)
    return best


def engine_linear(n_in: int, n_out: int, dtype: torch.dtype) -> torch.nn.Module:
    """A bias-free linear layer as the engine runs it: packed where torch can pack it."""
    from agentic_loop.models.engine.packed_linear import pack_linears

    layer = torch.nn.Linear(n_in, n_out, bias=False, dtype=dtype).requires_grad_(False)
    pack_linears(layer)
    return layer


@torch.inference_mode()
def linear_gflops(batch: int, n_in: int, n_out: int, dtype: torch.dtype, reps: int = 5) -> float:
    """GFLOP/s of ``linear([batch, n_in], [n_out, n_in])`` in ``dtype``, one weight (hot)."""
    x = torch.randn(batch, n_in, dtype=dtype)
    layer = engine_linear(n_in, n_out, dtype)
    seconds = _best_seconds(lambda: layer(x), reps)
    return 2.0 * batch * n_in * n_out / seconds / 1e9


@torch.inference_mode()
def step_gflops(shape: ModelShape, batch: int, dtype: torch.dtype, reps: int = 3) -> float:
    """GFLOP/s of every linear layer of one decode step of ``batch`` rows, each layer with
    its own weights (the model's memory traffic), in model order."""
    layers = [engine_linear(n_in, n_out, dtype)
              for _, n_in, n_out, count in shape.linears() for _ in range(count)]
    inputs = {n: torch.randn(batch, n, dtype=dtype) for n in {m.in_features for m in layers}}

    def step() -> None:
        for layer in layers:
            layer(inputs[layer.in_features])

    seconds = _best_seconds(step, reps, min_s=0.0)
    return 2.0 * batch * shape.matmul_params() / seconds / 1e9


def measure_peaks(shape: ModelShape, dtypes: Sequence[str] = ("float32", "bfloat16"),
                  batches: Sequence[int] = BATCHES) -> dict[str, Any]:
    """GFLOP/s per dtype: ``step`` per batch, and ``shapes`` per ``"in x out"`` and batch."""
    out: dict[str, Any] = {}
    distinct = sorted({(n_in, n_out) for _, n_in, n_out, _ in shape.linears()})
    for name in dtypes:
        dtype = getattr(torch, name)
        out[name] = {
            "step": {str(b): round(step_gflops(shape, b, dtype), 2) for b in batches},
            "shapes": {f"{n_in}x{n_out}": {str(b): round(linear_gflops(b, n_in, n_out, dtype), 2)
                                           for b in batches} for n_in, n_out in distinct}}
    return out


def achieved(flops: float, seconds: float, peak_gflops: float) -> dict[str, float]:
    """Achieved GFLOP/s of ``flops`` done in ``seconds``, and its fraction of the peak.

    >>> achieved(2e9, 0.5, 8.0)
    {'gflops': 4.0, 'fraction_of_peak': 0.5}
    """
    gflops = flops / seconds / 1e9 if seconds > 0 else 0.0
    return {"gflops": round(gflops, 2),
            "fraction_of_peak": round(gflops / peak_gflops, 3) if peak_gflops else 0.0}


def plot(runs: Sequence[dict[str, Any]], path: Path) -> None:
    """Achieved model GFLOP/s against the measured ``step`` peak, per batch, for each run
    (dtype x threads): one panel per run, peaks of both dtypes as dashed lines."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    runs = [r for r in runs if "roofline" in r]
    fig, axes = plt.subplots(1, len(runs), figsize=(4.2 * len(runs), 3.8), squeeze=False,
                             sharey=True)
    for ax, run in zip(axes[0], runs, strict=True):
        roof = run["roofline"]
        for dtype, style in (("float32", "C0"), ("bfloat16", "C1")):
            steps = roof["peak_gflops"].get(dtype, {}).get("step", {})
            xs = [int(b) for b in steps]
            ax.plot(xs, list(steps.values()), "--", color=style, marker="o",
                    label=f"matmul peak {dtype}")
        got = {b: g for b, g in roof["achieved"].items() if b.isdigit()}  # not constrained
        xs = [int(b) for b in got]
        ax.plot(xs, [g["gflops"] for g in got.values()], "-", color="C2", marker="s",
                label=f"engine ({run['dtype']}, sampled)")
        for x, g in zip(xs, got.values(), strict=True):
            ax.annotate(f"{g['fraction_of_peak']:.0%}", (x, g["gflops"]), ha="center",
                        va="bottom", fontsize=8)
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xticks(xs, [str(x) for x in xs])
        ax.set_xlabel("decode batch (rows)")
        ax.set_title(f"{run['dtype']}, {run['threads']} thread(s)")
    axes[0][0].set_ylabel("GFLOP/s")
    axes[0][-1].legend(fontsize=8)
    fig.suptitle("embedded SmolLM2-135M decoding vs the matmul peak at its shapes (CPU)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
