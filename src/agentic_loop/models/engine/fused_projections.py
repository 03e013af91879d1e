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
fp32 and bf16, with AVX-512 and with AVX2 alone (``tests/unit/test_fused_projections.py``).
Since oneDNN picks its kernels by shape and thread count, each group is also checked
once where it is made (:meth:`ProjectionGroup.agrees`); a group that would change a bit
on this machine is not made, and its layers compute alone.

How, without rewriting any model's attention or MLP code: the layers stay where they
are, with their weights, hooks and ``state_dict``. :func:`fuse_projections` puts each
set of siblings in a :class:`ProjectionGroup` (registered in
:data:`~agentic_loop.models.engine.packed_linear.GROUPS`). When the group's first layer
(the query, the gate) is called, the group computes the stacked product once and keeps
the other layers' columns for that same input tensor; the next layers called with
*that* tensor take their columns, and anything else (another input, a call that needs
gradients, autocast, another dtype, a layer with a forward pre-hook, which may change its
input or weight) computes alone, as before. A group whose other columns go unused
(:data:`UNSHARED_LIMIT` times: cross-attention, a model calling its layers in another
order) stops stacking. The stacked weight is packed once and repacked when a member's
weight or bias changes (see :func:`~.packed_linear.stamp`); the layers' own packed copies
are dropped, so the weights take no more memory than before.

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
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import torch

from agentic_loop.models.engine.packed_linear import (
    GROUPS,
    PackedLinear,
    Stamp,
    can_pack,
    forget_packed,
    lone_row_as_two,
    packed_product,
    same_stamp,
    stamp,
)

__all__ = ["SIBLINGS", "ProjectionGroup", "fuse_projections"]

#: After this many stacked products whose other columns no layer took (siblings fed other
#: inputs: cross-attention, or a model calling them in another order), a group stops.
UNSHARED_LIMIT = 3

#: Attribute names of projections that read one input, first the one models call first
#: (transformers' Llama, Mistral, Qwen2/3, Gemma and SmolLM blocks name them so).
SIBLINGS: tuple[tuple[str, ...], ...] = (("q_proj", "k_proj", "v_proj"),
                                        ("gate_proj", "up_proj"))


class ProjectionGroup:
    """Layers of one input whose outputs come from one product (see the module doc)."""

    def __init__(self, layers: Sequence[PackedLinear]) -> None:
        self._layers = [weakref.ref(layer) for layer in layers]
        self._sizes = [layer.out_features for layer in layers]
        self._local = threading.local()  # per thread: (the input's stamp, columns left)
        self._source: list[Stamp] = []
        self._packed: torch.Tensor | None = None
        self._bias: torch.Tensor | None = None
        self._lock = threading.Lock()
        self._unshared = 0

    def take(self, layer: PackedLinear, x: torch.Tensor) -> torch.Tensor | None:
        """``layer``'s output for ``x``: the first layer computes every layer's columns, the
        others take theirs for the same tensor; None where the layer must compute alone."""
        layers = self._alive()
        if layers is None:
            return None
        if layers[0] is layer:
            return self._lead(layers, x)
        pending = getattr(self._local, "pending", None)
        if pending is None or not same_stamp(pending[0], x):
            return None
        columns = pending[1]
        for i, member in enumerate(layers):
            if member is layer and columns[i] is not None:
                out, columns[i] = columns[i], None
                if all(c is None for c in columns[1:]):
                    self._local.pending = None  # every layer served: let the input go
                return out
        return None

    def agrees(self) -> bool:
        """Whether the stacked product gives each layer's own bits on this machine (checked
        once, on 2 and 33 random rows: oneDNN picks its kernels by shape and threads)."""
        members = self._alive()
        if members is None:
            return False
        generator = torch.Generator().manual_seed(0)
        with torch.no_grad():
            for rows in (2, 33):
                x = torch.randn(rows, members[0].in_features, generator=generator)
                x = x.to(members[0].weight.dtype)
                stacked = self._product(members, x).split(self._sizes, dim=-1)
                if not all(torch.equal(s, m.product(x))
                           for s, m in zip(stacked, members, strict=True)):
                    return False
        return True

    def _alive(self) -> list[PackedLinear] | None:
        """The group's layers, or None once one of them is gone."""
        alive = [layer for layer in (ref() for ref in self._layers) if layer is not None]
        return alive if len(alive) == len(self._layers) else None

    def _lead(self, members: list[PackedLinear], x: torch.Tensor) -> torch.Tensor | None:
        """The first layer's call: every layer's columns, or None (each computes alone)."""
        pending = getattr(self._local, "pending", None)
        self._local.pending = None
        if pending is not None and any(c is not None for c in pending[1][1:]):
            self._unshared += 1  # the last product's other columns went unused
        if self._unshared >= UNSHARED_LIMIT:
            return None
        if not can_pack(members[0].weight):  # moved off the CPU or to another dtype
            self.forget()
            return None
        if not all(m.packs_for(x) and not m._forward_pre_hooks for m in members) \
                or _global_pre_hooks():  # a hook may change a layer's input or weight
            return None
        columns = list(self._product(members, x).split(self._sizes, dim=-1))
        self._local.pending = (stamp(x), columns)
        return columns[0]

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
        with self._lock:
            fresh = self._packed is not None and len(tensors) == len(self._source) and all(
                same_stamp(old, t) for old, t in zip(self._source, tensors, strict=True))
            if not fresh:
                with torch.no_grad():
                    weight = torch.cat([m.weight.detach() for m in layers])
                    self._packed = torch.ops.mkldnn._reorder_linear_weight(weight)
                    biases = [m.bias for m in layers]
                    self._bias = (None if biases[0] is None else
                                  torch.cat([b.detach() for b in biases if b is not None]))
                self._source = [stamp(t) for t in tensors]
            assert self._packed is not None
            return self._packed, self._bias


def _global_pre_hooks() -> bool:
    """Whether forward pre-hooks registered for every module are active."""
    return bool(getattr(torch.nn.modules.module, "_global_forward_pre_hooks", None))


def fuse_projections(model: Any) -> int:
    """Group every set of :data:`SIBLINGS` in ``model`` that can share one product; return
    how many groups. Siblings qualify when all are :class:`PackedLinear` of one class,
    dtype and input width whose weights can be packed, with a bias on all or none, and
    when the stacked product gives each layer's own bits here (:meth:`ProjectionGroup.agrees`).
    Idempotent.

    The checks run in a thread of their own that ends with them. torch's CPU kernels run on
    GNU OpenMP, which keeps a team of worker threads for every thread that has run a
    parallel region; once a process holds more of them than it has cores, every team's
    workers stop spinning between regions and sleep, and each of the engine's thousands of
    small products a second waits for a wake-up. Run in the loading thread, these checks
    made the engine decode 1.5x slower afterwards (32 requests: 300 against 450 tokens/s).
    """
    candidates = []
    for module in model.modules():
        for names in SIBLINGS:
            members = _siblings(module, names)
            if members is not None:
                candidates.append((members, ProjectionGroup(members)))
    with ThreadPoolExecutor(1, thread_name_prefix="fuse-check") as checker:
        agreed = checker.submit(lambda: [group.agrees() for _, group in candidates]).result()
    for (members, group), ok in zip(candidates, agreed, strict=True):
        if not ok:
            continue
        for layer in members:
            forget_packed(layer)  # its own packed copy: the stacked one serves it now
            GROUPS[layer] = group
    return sum(agreed)


def _siblings(module: Any, names: tuple[str, ...]) -> list[PackedLinear] | None:
    """``module``'s layers called ``names`` when they qualify (see :func:`fuse_projections`)."""
    layers = [getattr(module, name, None) for name in names]
    if not all(isinstance(layer, PackedLinear) for layer in layers):
        return None
    members: list[PackedLinear] = layers  # type: ignore[assignment]
    first = members[0]
    if any(layer in GROUPS for layer in members) or not can_pack(first.weight):
        return None
    if not all(type(m) is type(first) and m.weight.dtype == first.weight.dtype
               and m.in_features == first.in_features
               and (m.bias is None) == (first.bias is None) for m in members):
        return None
    return members
