"""Linear layers whose weights oneDNN packs once, instead of on every call, on the CPU.

Why: ``torch.nn.functional.linear`` on the CPU hands the weight to its matrix kernel
in the layout the model stores, and the kernel re-lays it out (packs it into the
blocks its inner loop reads) on every call: 30 layers x 7 projections plus the
vocabulary projection, every decoding step. Packing once at load, as inductor's
freezing pass and vLLM's CPU backend do, measured on a 2-core AVX-512 BF16 machine
(torch 2.13, GFLOP/s, 2 threads, F.linear -> packed): the MLP's 576 x 1536 at 2 rows
55 -> 112, at 32 rows 305 -> 380; the 576 x 49152 vocabulary projection at 32 rows
250 -> 340; fp32 at 32 rows 143 -> 207 and 77 -> 164.

What it changes in the numbers: in bf16 nothing (oneDNN computes both; every output
of every row count from 1 to 300 was bit-identical). In fp32 the packed kernel is
oneDNN's, not MKL's, so outputs differ in the last bits from ``F.linear``; they are
also *more* independent of the batch (MKL's results for 1-7 rows differed from the
same rows in a batch of 8+; oneDNN's agreed from 2 rows up, and
:class:`~agentic_loop.models.engine.invariance.TwoRowLinear` covers the lone row).

The packed copy lives beside the weight (which stays, for ``state_dict``, tied
embeddings and training), so the linear weights take twice their memory (+270 MB for
SmolLM2-135M in bf16). It is rebuilt when the layer's weight is another tensor or changes
in place through autograd's view of it (``load_state_dict``, ``weight.mul_`` under
``no_grad``, a safe adapter merge: the version counter moves). Writes through ``.data``
(``weight.data += delta``, PEFT's default merge) move no counter: call
:func:`forget_packed` after them (the engine's loader merges adapters before it packs).
A weight made under ``torch.inference_mode`` has no counter either. A call that needs
gradients, runs under autocast, or has another dtype or device takes ``F.linear``
unchanged; so does bf16 where oneDNN has no bf16 kernel for the CPU.

Sibling layers that read the same input (a block's query, key and value projections;
its gate and up projections) can share one packed weight and one product:
:mod:`~agentic_loop.models.engine.fused_projections` registers them in :data:`GROUPS`,
and a layer in a group asks its group for its output before computing one itself.

    >>> layer = torch.nn.Linear(8, 3).to(torch.bfloat16)
    >>> pack_linears(layer)
    1
    >>> x = torch.ones(2, 8, dtype=torch.bfloat16)
    >>> with torch.no_grad():
    ...     torch.equal(layer(x), torch.nn.functional.linear(x, layer.weight, layer.bias))
    True
"""

from __future__ import annotations

import functools
import threading
import weakref
from collections.abc import Callable
from typing import Any, Protocol

import torch

__all__ = ["GROUPS", "PackedLinear", "SharedProduct", "Stamp", "can_pack", "forget_packed",
           "lone_row_as_two", "pack_linears", "packed_product", "same_stamp", "stamp"]

_LOCK = threading.Lock()
_DTYPES = (torch.bfloat16, torch.float32)

#: What a packed copy was made from: the tensor (weakly), its version, dtype and storage.
Stamp = tuple[weakref.ref[torch.Tensor], int, torch.dtype, int]


def stamp(t: torch.Tensor) -> Stamp:
    """What tells a packed copy of ``t`` from a stale one: the tensor itself (a new one
    after ``load_state_dict`` by assignment), its version counter (in-place writes through
    autograd's view; an inference tensor keeps none), and its dtype and storage (``.to()``
    swaps a parameter's data and keeps both its identity and its version)."""
    return (weakref.ref(t), *_marks(t))


def same_stamp(old: Stamp, t: torch.Tensor) -> bool:
    """Whether ``t`` is still what ``old`` was taken from (see :func:`stamp`)."""
    return old[0]() is t and old[1:] == _marks(t)


def _marks(t: torch.Tensor) -> tuple[int, torch.dtype, int]:
    """``t``'s version (-1 for an inference tensor, which keeps none), dtype and storage."""
    return -1 if t.is_inference() else t._version, t.dtype, t.data_ptr()


#: Each layer's packed weight and the stamp (:func:`stamp`) of the weight it was packed from.
#: Kept outside the module so ``copy.deepcopy``/pickling of a model never meets an opaque
#: oneDNN tensor.
_PACKED: weakref.WeakKeyDictionary[torch.nn.Module, tuple[Stamp, torch.Tensor]] = \
    weakref.WeakKeyDictionary()


class SharedProduct(Protocol):
    """Layers whose outputs come from one product (see :data:`GROUPS`)."""

    def take(self, layer: PackedLinear, x: torch.Tensor) -> torch.Tensor | None:
        """``layer``'s output for ``x`` from the shared product, or None (compute it alone)."""

    def forget(self) -> None:
        """Drop the shared packed weight (rebuilt at its next use)."""


#: The group each layer's output can come from. Weak keys: a released model's layers
#: leave; a group holds only weak references to its layers, so nothing keeps them alive.
GROUPS: weakref.WeakKeyDictionary[torch.nn.Module, SharedProduct] = weakref.WeakKeyDictionary()


def can_pack(weight: torch.Tensor) -> bool:
    """Whether this torch build can pack ``weight``: a CPU fp32 matrix with oneDNN built in,
    or bf16 where oneDNN also has bf16 kernels for this CPU."""
    return (weight.device.type == "cpu" and weight.dtype in _DTYPES and weight.dim() == 2
            and _onednn()[weight.dtype == torch.bfloat16])


@functools.cache
def _onednn() -> tuple[bool, bool]:
    """(oneDNN built in, oneDNN has bf16 kernels for this CPU): asked once, not per call."""
    built = bool(torch.backends.mkldnn.is_available())
    return built, built and bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())


def forget_packed(module: Any) -> int:
    """Drop the packed weights of ``module``'s layers (repacked at their next call); return
    how many. For weights changed through ``.data``, which no version counter sees."""
    for layer in module.modules():
        group = GROUPS.get(layer)
        if group is not None:
            group.forget()
    return sum(_PACKED.pop(layer, None) is not None for layer in module.modules())


def packed_product(x: torch.Tensor, packed: torch.Tensor, bias: torch.Tensor | None
                   ) -> torch.Tensor:
    """``x @ weight.T + bias`` with a weight packed by oneDNN: the one kernel call."""
    # contiguous: F.linear itself computes a strided 3-D input another way
    return torch.ops.mkldnn._linear_pointwise(x.contiguous(), packed, bias, "none", [], "")


def lone_row_as_two(x: torch.Tensor, product: Callable[[torch.Tensor], torch.Tensor]
                    ) -> torch.Tensor:
    """``product(x)`` for a lone row computed as the first of two equal rows: the kernel of
    a batch rather than a matrix-vector one (see :mod:`.invariance`)."""
    pair = x.reshape(1, x.shape[-1]).expand(2, x.shape[-1]).contiguous()
    out = product(pair)[:1]
    return out.reshape(*x.shape[:-1], out.shape[-1])


class PackedLinear(torch.nn.Linear):
    """``nn.Linear`` computed with a weight packed once (see the module doc). A layer
    becomes one by a class swap (:func:`pack_linears`), so its parameters, hooks and
    ``state_dict`` stay those of the ``nn.Linear`` it was."""

    #: Whether a lone row is computed as two (:class:`~.invariance.TwoRowLinear`).
    lone_row_as_two = False

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        group = GROUPS.get(self)
        shared = group.take(self, x) if group is not None else None
        if shared is not None:
            return shared
        if self.lone_row_as_two and x.numel() == x.shape[-1]:
            return lone_row_as_two(x, self.product)
        return self.product(x)

    def product(self, x: torch.Tensor) -> torch.Tensor:
        """``x @ weight.T + bias``: packed where it can be, ``F.linear`` otherwise."""
        weight, bias = self.weight, self.bias
        if not can_pack(weight):  # moved off the CPU or to another dtype: the copy goes too
            _PACKED.pop(self, None)
            return torch.nn.functional.linear(x, weight, bias)
        if not self.packs_for(x):
            return torch.nn.functional.linear(x, weight, bias)
        return packed_product(x, self._packed(), bias)

    def packs_for(self, x: torch.Tensor) -> bool:
        """Whether a call on ``x`` may take the packed weight: a packable weight of ``x``'s
        dtype and device, no autocast, and no gradient to compute."""
        weight, bias = self.weight, self.bias
        return (can_pack(weight) and x.dtype == weight.dtype and x.device == weight.device
                and not torch.is_autocast_enabled("cpu")
                and not (torch.is_grad_enabled() and (
                    x.requires_grad or weight.requires_grad
                    or (bias is not None and bias.requires_grad))))

    def _packed(self) -> torch.Tensor:
        weight = self.weight
        cached = _PACKED.get(self)
        if cached is not None and same_stamp(cached[0], weight):
            return cached[1]
        with _LOCK, torch.no_grad():
            packed = torch.ops.mkldnn._reorder_linear_weight(weight.detach())
            _PACKED[self] = (stamp(weight), packed)
        return packed


def pack_linears(module: Any) -> int:
    """Make every plain ``nn.Linear`` in ``module`` whose weight can be packed a
    :class:`PackedLinear`; return how many. Idempotent; subclasses of ``nn.Linear``
    (quantized or adapter layers, with forwards of their own) are left alone."""
    count = 0
    for layer in module.modules():
        if type(layer) is torch.nn.Linear and can_pack(layer.weight):
            layer.__class__ = PackedLinear
            count += 1
    return count
