"""Batch-invariant decoding on the CPU: a row's numbers must not depend on the rows beside it.

Why: the engine promises that a greedy answer is the same alone and in any batch
(the loops compare answers; the suite pins greedy outputs). In fp32 that held. In
bf16 it did not: 12 of 24 answers (8 prompts x 3 batches, 24 tokens) changed with
their neighbours (tests/integration/test_engine_batch_invariance.py). bf16 keeps 8
bits of mantissa, so the smallest change in the order of a sum (invisible in fp32)
flips an output's rounding now and then, and the flip grows through 30 layers into
another token. Two such changes, measured on torch 2.13 with AVX-512 BF16:

* **Matrix products of one row.** ``linear`` over one row (a lone request's decoding
  step) takes a matrix-vector kernel whose sums run in another order than the
  matrix kernel of two or more rows: at ``in_features=1536`` (the MLP's down
  projection) 1.4e-4 of the outputs rounded differently; any 2..256 rows agreed.
  :func:`two_rows` runs one row as two (the row twice, one result kept): the same
  kernel as a batch, at the price of a second row on a matrix-vector product whose
  cost is reading the weights.
* **Attention over padding.** Left padding, a shared prefix computed apart from the
  prompts' tails, and a prompt prefilled in one piece or two, change how many keys
  the attention kernel sums over and where its blocks start. In bf16, 8e-4 of the
  attention outputs rounded differently; in fp32, 2.4e-6; in float64, none in 4e5.
  :data:`~agentic_loop.models.engine.attention.GQA_SDPA_WIDE` computes attention in
  float64 and rounds once, at the end.

:func:`make_batch_invariant` applies both to a bf16 or fp16 model on the CPU (the
engine's loader calls it), and the first to an fp32 model whose linear layers are packed
(:mod:`~agentic_loop.models.engine.packed_linear`: oneDNN's fp32 agrees from two rows up).
With both, the 24 answers agreed alone and in batches, and
decoding kept bf16's speed: 8 prompts x 48 tokens, one thread, 2-core AVX-512 BF16
machine under load, tokens/s over 3 runs: fp32 49.8-51.6, bf16 65.5-70.5, bf16 made
invariant 64.7-70.0.

    >>> layer = torch.nn.Linear(4, 3).to(torch.bfloat16)
    >>> _ = two_rows(layer)
    >>> layer(torch.ones(1, 1, 4, dtype=torch.bfloat16)).shape
    torch.Size([1, 1, 3])
"""

from __future__ import annotations

from typing import Any

import torch

from agentic_loop.models.engine.attention import use_gqa_sdpa
from agentic_loop.models.engine.packed_linear import PackedLinear

__all__ = ["TwoRowLinear", "make_batch_invariant", "two_rows"]

class TwoRowLinear(PackedLinear):
    """A linear layer that computes a lone row as the first of two equal rows (see the
    module doc), with its weight packed where the CPU can (:class:`PackedLinear`). A layer
    becomes one by a class swap, not a patched ``forward`` bound to itself: a bound method
    stored on the module is a reference cycle, which would keep a released engine's weights
    alive until the next full garbage collection."""

    lone_row_as_two = True


def two_rows(module: torch.nn.Module) -> int:
    """Make every plain ``nn.Linear`` (or :class:`PackedLinear`) in ``module`` a
    :class:`TwoRowLinear`; return how many.

    Idempotent; subclasses of ``nn.Linear`` (quantized or adapter layers, with forwards
    of their own) are left alone.
    """
    count = 0
    for layer in module.modules():
        if type(layer) in (torch.nn.Linear, PackedLinear):
            layer.__class__ = TwoRowLinear
            count += 1
    return count


def make_batch_invariant(model: Any) -> bool:
    """Make a CPU ``model``'s answers independent of its batch; True if it changed it.

    bf16/fp16: float64 attention and lone rows as two. fp32 whose linear layers are
    packed (:func:`~agentic_loop.models.engine.packed_linear.pack_linears`): lone rows as
    two, since oneDNN's packed fp32 agrees from two rows up; fp32 attention's rounding
    already agreed at the answer level. Models off the CPU are left as they are (GPUs
    batch with their own kernels).
    """
    parameter = next(model.parameters())
    if parameter.device.type != "cpu":
        return False
    if parameter.dtype == torch.float32:
        return any(type(m) is PackedLinear for m in model.modules()) and two_rows(model) > 0
    if parameter.dtype not in (torch.bfloat16, torch.float16):
        return False
    if not use_gqa_sdpa(model, wide=True):
        return False
    two_rows(model)
    return True
