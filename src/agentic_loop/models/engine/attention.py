"""SDPA attention that keeps grouped-query attention inside torch's kernel on the CPU.

Why: the engine decodes left-padded batches, so every step passes an attention
mask. transformers' ``sdpa`` backend then copies each layer's keys and values
once per query head group (``repeat_kv``: 3x for SmolLM2's 9 query / 3 KV heads)
before calling torch, because CUDA's fused kernels lack masked GQA. Torch's CPU
kernel takes ``enable_gqa=True`` with a mask and gives the same numbers: on a
32-row, 180-token batch an attention call went from 1.7 ms to 0.5 ms, and a
decoding step with padding from 218 to about 150 ms. The function registers as
``"sdpa_gqa"`` through transformers' ``AttentionInterface`` (with sdpa's mask
builder) and hands anything off the CPU to the stock sdpa function unchanged.

``"sdpa_gqa_f64"`` is the same attention computed in float64 and rounded once, for
bf16 models on the CPU: bf16 attention's sums change with padding, which changed
greedy answers with the batch (see :mod:`.invariance`). It was also faster than
torch's bf16 CPU kernel with a mask: 0.6 against 1.6 ms a call for 8 rows over 100
keys, one thread (fp32: 0.25 ms, but its rounding still depended on the padding).

    >>> name = register()
    >>> name
    'sdpa_gqa'
    >>> from transformers import AttentionInterface
    >>> name in AttentionInterface._global_mapping
    True
"""

from __future__ import annotations

from typing import Any

import torch
from transformers.integrations.sdpa_attention import sdpa_attention_forward

__all__ = ["GQA_SDPA", "GQA_SDPA_WIDE", "register", "sdpa_gqa_attention",
           "sdpa_gqa_wide_attention", "use_gqa_sdpa"]

#: The attention implementation name this module registers.
GQA_SDPA = "sdpa_gqa"
#: The same attention computed in float64 (for bf16/fp16 models on the CPU).
GQA_SDPA_WIDE = "sdpa_gqa_f64"


def sdpa_gqa_attention(module: torch.nn.Module, query: torch.Tensor, key: torch.Tensor,
                       value: torch.Tensor, attention_mask: torch.Tensor | None,
                       dropout: float = 0.0, scaling: float | None = None,
                       is_causal: bool | None = None, **kwargs: Any) -> tuple[torch.Tensor, None]:
    """transformers' attention-function signature: query ``[batch, heads, q, dim]``, key and
    value ``[batch, kv_heads, kv, dim]``; returns ``[batch, q, heads, dim]``."""
    if query.device.type != "cpu" or kwargs.get("position_bias") is not None \
            or kwargs.get("cache") is not None:
        return sdpa_attention_forward(module, query, key, value, attention_mask, dropout=dropout,
                                      scaling=scaling, is_causal=is_causal, **kwargs)
    if attention_mask is not None and attention_mask.ndim == 4:
        attention_mask = attention_mask[:, :, :, : key.shape[-2]]
    causal = is_causal if is_causal is not None else getattr(module, "is_causal", True)
    causal = bool(causal) and attention_mask is None and query.shape[2] > 1
    if causal and key.shape[-2] > query.shape[2]:  # an empty static cache's prefill (as sdpa)
        key, value = key[:, :, : query.shape[2]], value[:, :, : query.shape[2]]
    groups = int(getattr(module, "num_key_value_groups", 1))
    out = torch.nn.functional.scaled_dot_product_attention(
        query, key, value, attn_mask=attention_mask, dropout_p=dropout, scale=scaling,
        is_causal=causal, enable_gqa=groups > 1)
    return out.transpose(1, 2).contiguous(), None


def sdpa_gqa_wide_attention(module: torch.nn.Module, query: torch.Tensor, key: torch.Tensor,
                            value: torch.Tensor, attention_mask: torch.Tensor | None,
                            **kwargs: Any) -> tuple[torch.Tensor, None]:
    """:func:`sdpa_gqa_attention` in float64, the output cast back to ``query``'s dtype."""
    if query.device.type != "cpu" or query.dtype == torch.float32:
        return sdpa_gqa_attention(module, query, key, value, attention_mask, **kwargs)
    wide = torch.float64
    if attention_mask is not None and attention_mask.is_floating_point():
        attention_mask = attention_mask.to(wide)
    out, _ = sdpa_gqa_attention(module, query.to(wide), key.to(wide), value.to(wide),
                                attention_mask, **kwargs)
    return out.to(query.dtype), None


def register() -> str:
    """Make ``"sdpa_gqa"`` a transformers attention implementation (idempotent); return it."""
    from transformers import AttentionInterface
    from transformers.masking_utils import AttentionMaskInterface, sdpa_mask

    AttentionInterface.register(GQA_SDPA, sdpa_gqa_attention)
    AttentionMaskInterface.register(GQA_SDPA, sdpa_mask)
    AttentionInterface.register(GQA_SDPA_WIDE, sdpa_gqa_wide_attention)
    AttentionMaskInterface.register(GQA_SDPA_WIDE, sdpa_mask)
    return GQA_SDPA


def use_gqa_sdpa(model: Any, *, wide: bool = False) -> bool:
    """Switch a CPU model that uses ``sdpa`` (or one of ours) to ``sdpa_gqa``, or with
    ``wide=True`` to ``sdpa_gqa_f64``; True if it switched.

    Models on other devices, or with another attention implementation (eager, flash),
    are left as they are.
    """
    config = getattr(model, "config", None)
    if config is None or getattr(config, "_attn_implementation", None) not in (
            "sdpa", GQA_SDPA, GQA_SDPA_WIDE):
        return False
    if next(model.parameters()).device.type != "cpu":
        return False
    name = register()
    model.set_attn_implementation(GQA_SDPA_WIDE if wide else name)
    return True
