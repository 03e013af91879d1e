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
embeddings and training) and is rebuilt when the weight changes in place (a merged
adapter, a loaded state dict: the tensor's version counter moves; a weight made under
``torch.inference_mode`` has none, so only a new tensor repacks it). A call that needs
gradients, another dtype or another device takes ``F.linear`` unchanged.

    >>> layer = torch.nn.Linear(8, 3).to(torch.bfloat16)
    >>> pack_linears(layer)
    1
    >>> x = torch.ones(2, 8, dtype=torch.bfloat16)
    >>> with torch.no_grad():
    ...     torch.equal(layer(x), torch.nn.functional.linear(x, layer.weight, layer.bias))
    True
"""

from __future__ import annotations

import threading
import weakref
from typing import Any

import torch

__all__ = ["PackedLinear", "can_pack", "pack_linears"]

#: Each layer's packed weight and the weight state it was packed from. Kept outside the
#: module so ``copy.deepcopy``/pickling of a model never meets an opaque oneDNN tensor.
_PACKED: weakref.WeakKeyDictionary[torch.nn.Module, tuple[tuple[int, int], torch.Tensor]] = \
    weakref.WeakKeyDictionary()
_LOCK = threading.Lock()
_DTYPES = (torch.bfloat16, torch.float32)


def can_pack(weight: torch.Tensor) -> bool:
    """Whether this torch build can pack ``weight`` (a CPU bf16/fp32 matrix, oneDNN built in)."""
    return (weight.device.type == "cpu" and weight.dtype in _DTYPES and weight.dim() == 2
            and torch.backends.mkldnn.is_available())


class PackedLinear(torch.nn.Linear):
    """``nn.Linear`` computed with a weight packed once (see the module doc). A layer
    becomes one by a class swap (:func:`pack_linears`), so its parameters, hooks and
    ``state_dict`` stay those of the ``nn.Linear`` it was."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.product(x)

    def product(self, x: torch.Tensor) -> torch.Tensor:
        """``x @ weight.T + bias``: packed where it can be, ``F.linear`` otherwise."""
        weight = self.weight
        if (x.dtype != weight.dtype or x.device != weight.device or not can_pack(weight)
                or (torch.is_grad_enabled() and (weight.requires_grad or x.requires_grad))):
            return torch.nn.functional.linear(x, weight, self.bias)
        # contiguous: F.linear itself computes a strided 3-D input another way
        return torch.ops.mkldnn._linear_pointwise(x.contiguous(), self._packed(), self.bias,
                                                  "none", [], "")

    def _packed(self) -> torch.Tensor:
        weight = self.weight
        # an inference tensor (made under inference_mode) keeps no version counter
        state = (weight.data_ptr(), -1 if weight.is_inference() else weight._version)
        cached = _PACKED.get(self)
        if cached is not None and cached[0] == state:
            return cached[1]
        with _LOCK, torch.no_grad():
            packed = torch.ops.mkldnn._reorder_linear_weight(weight.detach())
            _PACKED[self] = (state, packed)
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
