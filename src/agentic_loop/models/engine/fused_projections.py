"""Sibling projections of one input computed as one matrix product on the CPU.

Why: every decoder block projects the same hidden state three times for attention
(query, key, value) and twice for its MLP (gate, up). Run apart, each is a small
matrix product with its own call, its own pass over the input and, for the key and
value (576 x 192 in SmolLM2), too few columns to keep the kernel busy. One product
over the weights stacked (576 x 960, 576 x 3072), as vLLM's merged layers do, measured
on a 2-core AVX-512 machine, fp32, 2 threads, per block: query/key/value 156 -> 105 us
at 32 rows and 92 -> 49 us at 8; gate/up 289 -> 265 and 125 -> 96 us (AVX2 kernels
only: 223 -> 177, 109 -> 65, 511 -> 476, 171 -> 147 us).

What it changes in the numbers: nothing. oneDNN's output columns of the stacked product
were bit-identical to the separate products' at every row count tried (1 to 200), in
fp32 and bf16, with AVX-512 and with AVX2 alone; ``tests/unit/test_fused_projections.py``
pins it.

How, without rewriting any model's attention or MLP code: the layers stay where they
are, with their weights, hooks and ``state_dict``. :func:`fuse_projections` puts each
set of siblings in a :class:`ProjectionGroup` (registered in
:data:`~agentic_loop.models.engine.packed_linear.GROUPS`). When the group's first layer
(the query, the gate) is called, the group computes the stacked product once and keeps
the other layers' columns for that same input tensor; the next layers called with
*that* tensor take their columns, and anything else (another input, a call that needs
gradients, autocast, another dtype, a model whose code calls them in another order)
computes alone, as before. The stacked weight is packed once and repacked when a
member's weight or bias changes (see :mod:`.packed_linear`); the layers' own packed
copies are then never made, so the weights take no more memory than before.

    >>> from agentic_loop.models.engine.packed_linear import pack_linears
    >>> _ = torch.manual_seed(0)
    >>> block = torch.nn.Module()
    >>> block.q_proj, block.k_proj, block.v_proj = (torch.nn.Linear(8, n, bias=False)
    ...                                             for n in (8, 4, 4))
    >>> pack_linears(block), fuse_projections(block)
    (3, 1)
    >>> x = torch.randn(2, 8)
    >>> with torch.no_grad():
    ...     q, k, v = block.q_proj(x), block.k_proj(x), block.v_proj(x)
    ...     torch.equal(k, block.k_proj.product(x))  # the key layer's product alone
    True
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Sequence
from typing import Any

import torch

from agentic_loop.models.engine.packed_linear import (
    GROUPS,
    PackedLinear,
    lone_row_as_two,
    packed_product,
)

__all__ = ["SIBLINGS", "ProjectionGroup", "fuse_projections"]

#: Attribute names of projections that read one input, first the one models call first
#: (transformers' Llama, Mistral, Qwen2/3, Gemma and SmolLM blocks name them so).
SIBLINGS: tuple[tuple[str, ...], ...] = (("q_proj", "k_proj", "v_proj"),
                                        ("gate_proj", "up_proj"))


class ProjectionGroup:
    """Layers of one input whose outputs come from one product (see the module doc)."""

    def __init__(self, layers: Sequence[PackedLinear]) -> None:
        self._layers = [weakref.ref(layer) for layer in layers]
        self._sizes = [layer.out_features for layer in layers]
        self._local = threading.local()  # per thread: (input, its version, columns left)
        self._source: list[tuple[weakref.ref[torch.Tensor], int]] = []
        self._packed: torch.Tensor | None = None
        self._bias: torch.Tensor | None = None
        self._lock = threading.Lock()

    def take(self, layer: PackedLinear, x: torch.Tensor) -> torch.Tensor | None:
        """``layer``'s output for ``x``: the first layer computes every layer's columns, the
        others take theirs for the same tensor; None where the layer must compute alone."""
        layers = [ref() for ref in self._layers]
        if layers[0] is layer:
            self._local.pending = None
            if not all(m is not None and m.packs_for(x) for m in layers):
                return None
            columns = list(self._product([m for m in layers if m is not None], x)
                           .split(self._sizes, dim=-1))
            self._local.pending = (x, _version(x), columns)
            return columns[0]
        pending = getattr(self._local, "pending", None)
        if pending is None or pending[0] is not x or pending[1] != _version(x):
            return None
        columns = pending[2]
        for i, member in enumerate(layers):
            if member is layer and columns[i] is not None:
                out, columns[i] = columns[i], None
                if all(c is None for c in columns[1:]):
                    self._local.pending = None  # every layer served: let the input go
                return out
        return None

    def forget(self) -> None:
        """Drop the stacked packed weight (rebuilt at its next use)."""
        with self._lock:
            self._packed, self._bias, self._source = None, None, []

    def _product(self, layers: list[PackedLinear], x: torch.Tensor) -> torch.Tensor:
        packed, bias = self._stacked(layers)
        if layers[0].lone_row_as_two and x.numel() == x.shape[-1]:
            return lone_row_as_two(x, lambda rows: packed_product(rows, packed, bias))
        return packed_product(x, packed, bias)

    def _stacked(self, layers: list[PackedLinear]) -> tuple[torch.Tensor, torch.Tensor | None]:
        tensors = [t for m in layers for t in (m.weight, m.bias) if t is not None]
        source = [(weakref.ref(t), _version(t)) for t in tensors]
        with self._lock:
            fresh = self._packed is not None and len(source) == len(self._source) and all(
                old() is t and v == w for (old, w), t, (_, v) in
                zip(self._source, tensors, source, strict=True))
            if not fresh:
                with torch.no_grad():
                    weight = torch.cat([m.weight.detach() for m in layers])
                    self._packed = torch.ops.mkldnn._reorder_linear_weight(weight)
                    biases = [m.bias for m in layers]
                    self._bias = (None if biases[0] is None else
                                  torch.cat([b.detach() for b in biases if b is not None]))
                self._source = source
            assert self._packed is not None
            return self._packed, self._bias


def _version(t: torch.Tensor) -> int:
    """``t``'s version counter; -1 for an inference tensor, which keeps none."""
    return -1 if t.is_inference() else t._version


def fuse_projections(model: Any) -> int:
    """Group every set of :data:`SIBLINGS` in ``model`` that can share one product; return
    how many groups. Siblings qualify when all are :class:`PackedLinear` of one class,
    dtype and input width, with a bias on all or none. Idempotent."""
    count = 0
    for module in model.modules():
        for names in SIBLINGS:
            layers = [getattr(module, name, None) for name in names]
            if not all(isinstance(layer, PackedLinear) for layer in layers):
                continue
            members: list[PackedLinear] = layers  # type: ignore[assignment]
            first = members[0]
            if any(layer in GROUPS for layer in members) or not all(
                    type(m) is type(first) and m.weight.dtype == first.weight.dtype
                    and m.in_features == first.in_features
                    and (m.bias is None) == (first.bias is None) for m in members):
                continue
            group = ProjectionGroup(members)
            for layer in members:
                GROUPS[layer] = group
            count += 1
    return count

